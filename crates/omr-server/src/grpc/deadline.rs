//! The gRPC request timeout (`grpc_request_timeout_secs`) as a tower layer around tonic's
//! routes: a call must produce its response within it (a streamed answer: its first message),
//! or it is answered `DEADLINE_EXCEEDED`. A key upload is exempt: its client stream carries
//! ≈ 107 MB and takes seconds to minutes, so the registry bounds it itself, by
//! `key_upload_timeout_secs` from its first message to its last.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use tonic::codegen::http::{Request, Response};
use tower::{Layer, Service};

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
            return Box::pin(call);
        }
        let timeout = self.timeout;
        Box::pin(async move {
            match tokio::time::timeout(timeout, call).await {
                Ok(answer) => answer,
                Err(_) => Ok(tonic::Status::deadline_exceeded(format!(
                    "the call did not complete within {} s (grpc_request_timeout_secs); retry",
                    timeout.as_secs()
                ))
                .into_http()),
            }
        })
    }
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
        assert!(cut.body().is_empty());
        let upload = service.oneshot(request(UPLOAD_PATH)).await.unwrap();
        assert_eq!(upload.into_body(), "done");
    }
}
