//! Load shedding and the request timeout of the API routes: at most `max_concurrent_requests`
//! in progress across them (one more is answered 503 `overloaded` with `Retry-After` at once,
//! never queued), and each cut at its deadline with 408 `request_timeout`. The probes and
//! `/metrics` are outside both, so they answer while the API is saturated.

use std::sync::Arc;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::response::{IntoResponse, Response};
use axum::{BoxError, Router};
use omr_api::ErrorCode;
use tokio::sync::Semaphore;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::error::Overloaded;
use tower::timeout::error::Elapsed;
use tower::ServiceBuilder;

use crate::error::ServiceError;
use crate::metrics::Metrics;

/// The shared bound on requests in progress.
#[derive(Debug, Clone)]
pub(super) struct Overload {
    in_progress: Arc<Semaphore>,
    metrics: Metrics,
}

impl Overload {
    pub(super) fn new(max_concurrent_requests: usize, metrics: Metrics) -> Self {
        Overload {
            in_progress: Arc::new(Semaphore::new(max_concurrent_requests.max(1))),
            metrics,
        }
    }

    /// `routes` counted against the bound, each request cut after `timeout`.
    pub(super) fn guard<S: Clone + Send + Sync + 'static>(
        &self,
        routes: Router<S>,
        timeout: Duration,
    ) -> Router<S> {
        let metrics = self.metrics.clone();
        let refuse = move |err: BoxError| {
            let metrics = metrics.clone();
            async move { refusal(&metrics, timeout, err) }
        };
        routes.layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(refuse))
                .load_shed()
                .layer(GlobalConcurrencyLimitLayer::with_semaphore(
                    self.in_progress.clone(),
                ))
                .timeout(timeout),
        )
    }
}

/// The answer to a request the layers refused or cut.
fn refusal(metrics: &Metrics, timeout: Duration, err: BoxError) -> Response {
    let (reason, error) = if err.is::<Overloaded>() {
        ("overloaded", ServiceError::overloaded())
    } else if err.is::<Elapsed>() {
        (
            "timeout",
            ServiceError::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request did not complete within {} s (request_timeout_secs); a post \
                     that was already queued may still be committed: read the board before \
                     posting it again",
                    timeout.as_secs()
                ),
            ),
        )
    } else {
        return ServiceError::internal("serving a request", err).into_response();
    };
    metrics.admission.shed.with_label_values(&[reason]).inc();
    error.into_response()
}
