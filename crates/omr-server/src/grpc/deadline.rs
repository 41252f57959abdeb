//! The gRPC request timeout (`grpc_request_timeout_secs`) as a tower layer around tonic's
//! routes: a call must produce its response within it (a streamed answer: its first message),
//! or it is answered `DEADLINE_EXCEEDED`. A key upload is exempt: its client stream carries
//! ≈ 107 MB and takes seconds to minutes, so the registry bounds it itself, by
//! `key_upload_timeout_secs` from its first message to its last.
//!
//! The same layer gives the transport's own refusals their `omr-error-code`: tonic answers a
//! request message over the server's decoding limit with a bare `OUT_OF_RANGE` before any handler
//! runs (a unary call's trailers-only response), which becomes `RESOURCE_EXHAUSTED`
//! `body_too_large` like every other oversized body.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use omr_api::ErrorCode;
use tonic::codegen::http::{Request, Response};
use tower::{Layer, Service};

use super::{GRPC_ERROR_CODE, MAX_MESSAGE_BYTES};
use crate::error::ServiceError;

/// The path of the one method the timeout does not cover.
const UPLOAD_PATH: &str = "/omr.v1.Detector/RegisterDetectionKey";

/// Puts [`Deadline`] around a service.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    timeout: Duration,
}

impl DeadlineLayer {
    pub fn new(timeout: Duration) -> Self {
        DeadlineLayer { timeout }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            timeout: self.timeout,
        }
    }
}

/// A service whose calls (but key uploads) end after a timeout.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    timeout: Duration,
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for Deadline<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Future: Send + 'static,
    ResB: Default + Send + 'static,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<ResB>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let exempt = request.uri().path() == UPLOAD_PATH;
        let call = self.inner.call(request);
        if exempt {
            return Box::pin(async move { call.await.map(coded) });
        }
        let timeout = self.timeout;
        Box::pin(async move {
            match tokio::time::timeout(timeout, call).await {
                Ok(answer) => answer.map(coded),
                Err(_) => Ok(tonic::Status::from(ServiceError::new(
                    ErrorCode::RequestTimeout,
                    format!(
                        "the call did not complete within {} s (grpc_request_timeout_secs); retry",
                        timeout.as_secs()
                    ),
                ))
                .into_http()),
            }
        })
    }
}

/// `response`, or where it is tonic's own refusal of an oversized request message (a
/// trailers-only `OUT_OF_RANGE` without `omr-error-code`: no handler answers that code), the
/// server's `body_too_large` status instead.
fn coded<B: Default>(response: Response<B>) -> Response<B> {
    let headers = response.headers();
    let out_of_range = headers
        .get("grpc-status")
        .is_some_and(|s| s.as_bytes() == b"11");
    if !out_of_range || headers.contains_key(GRPC_ERROR_CODE) {
        return response;
    }
    let detail = tonic::Status::from_header_map(headers)
        .map(|s| s.message().to_string())
        .unwrap_or_default();
    tonic::Status::from(ServiceError::new(
        ErrorCode::BodyTooLarge,
        format!(
            "a request message is over the server's gRPC message limit ({} MiB); nothing was \
             done ({detail})",
            MAX_MESSAGE_BYTES >> 20
        ),
    ))
    .into_http()
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn calls_end_at_the_deadline_but_key_uploads_do_not() {
        let slow = tower::service_fn(|_: Request<()>| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok::<_, Infallible>(Response::new("done".to_string()))
        });
        let service = DeadlineLayer::new(Duration::from_millis(50)).layer(slow);
        let request = |path: &str| Request::builder().uri(path).body(()).unwrap();
        let cut = (service
            .clone()
            .oneshot(request("/omr.v1.Detector/GetDigest"))
            .await)
            .unwrap();
        // 4: DEADLINE_EXCEEDED.
        assert_eq!(cut.headers()["grpc-status"], "4");
        assert_eq!(cut.headers()[GRPC_ERROR_CODE], "request_timeout");
        assert!(cut.body().is_empty());
        let upload = service.oneshot(request(UPLOAD_PATH)).await.unwrap();
        assert_eq!(upload.into_body(), "done");
    }

    #[tokio::test]
    async fn transport_out_of_range_is_body_too_large_and_handler_statuses_are_kept() {
        let answer = |status: tonic::Status| {
            let service = DeadlineLayer::new(Duration::from_secs(5)).layer(tower::service_fn(
                move |_: Request<()>| {
                    let s = status.clone();
                    async move { Ok::<_, Infallible>(s.into_http::<String>()) }
                },
            ));
            let request = Request::builder()
                .uri("/omr.v1.Detector/AnswerPirQuery")
                .body(())
                .unwrap();
            service.oneshot(request)
        };
        let limit = answer(tonic::Status::out_of_range(
            "decoded message length too large",
        ))
        .await
        .unwrap();
        // 8: RESOURCE_EXHAUSTED.
        assert_eq!(limit.headers()["grpc-status"], "8");
        assert_eq!(limit.headers()[GRPC_ERROR_CODE], "body_too_large");
        let own = tonic::Status::from(ServiceError::unknown_key("k"));
        let kept = answer(own).await.unwrap();
        assert_eq!(kept.headers()["grpc-status"], "5");
        assert_eq!(kept.headers()[GRPC_ERROR_CODE], "unknown_key");
    }
}
