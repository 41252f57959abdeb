//! Probes: `/readyz` (ready once migrations ran and both servers listen, the store answers, and
//! the detection worker is not failing: 503 names the reason) and `/metrics` (Prometheus text;
//! the live workers are read from the store at each scrape). `/livez` is a constant in the
//! router.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

pub(super) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if !state.ready.load(Ordering::Acquire) || state.store.ping().await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response();
    }
    match state.worker_health.unready_reason() {
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}"),
        )
            .into_response(),
        None => (StatusCode::OK, "ready").into_response(),
    }
}

pub(super) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    refresh_fleet(&state).await;
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

/// Read the live workers (unexpired heartbeats) from the store, so every process reports the
/// fleet as it is; when the store does not answer the gauge keeps its last value.
async fn refresh_fleet(state: &AppState) {
    match state.store.live_workers().await {
        Ok(n) => state.metrics.live_workers.set(n as i64),
        Err(e) => tracing::warn!(error = %e, "reading the live workers for /metrics failed"),
    }
}
