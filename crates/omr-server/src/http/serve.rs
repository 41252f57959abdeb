//! Serving the router over HTTP/1.1 with hyper: each accepted connection takes a permit of
//! `max_connections` (without one it is answered 503 `overloaded` and closed), must send each
//! request's headers within `header_read_timeout_secs` of connecting or of its previous
//! response (hyper's header-read timeout: a client that sends half a request, or nothing, is
//! disconnected), and carries its peer address (`ConnectInfo`) for the rate limits. With TLS
//! the handshake happens first, in the connection's own task, within the same timeout; a client
//! that speaks plain HTTP to it is answered `400 tls_required` and closed. When `cancel` fires
//! the loop stops accepting and waits for the open connections to finish their requests (the
//! caller bounds the wait).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::Service;

use crate::connections::{accept, ConnectionLimit};
use crate::metrics::Metrics;

/// What a connection past `max_connections` gets before it is closed.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 124\r\n\
\r\n\
{\"code\":\"overloaded\",\"message\":\"the server has as many connections open as it accepts (max_connections); retry in a second\"}";

/// What a plain-HTTP request to the TLS listener gets before it is closed.
const PLAIN_TO_TLS: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
content-type: application/json\r\n\
connection: close\r\n\
content-length: 113\r\n\
\r\n\
{\"code\":\"tls_required\",\"message\":\"this server speaks HTTPS only: use an https:// URL (with --ca-cert if needed)\"}";

/// How the HTTP listener serves its connections.
pub struct Options {
    /// The bound on open connections (shared with gRPC).
    pub limit: ConnectionLimit,
    /// The header-read timeout, which bounds a TLS handshake too.
    pub header_timeout: Duration,
    /// HTTPS only, when set.
    pub tls: Option<TlsAcceptor>,
    pub metrics: Metrics,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("header_timeout", &self.header_timeout)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// Serve `router` on `listener` until `cancel` fires, then finish open connections.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: Options,
    cancel: CancellationToken,
) -> io::Result<()> {
    let mut make_service = router.into_make_service_with_connect_info::<SocketAddr>();
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout);
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = accept(&listener, "HTTP") => accepted,
        };
        let Some(permit) = options.limit.try_open("http") else {
            // A fresh socket's send buffer is empty: this small write does not block.
            let _ = stream.try_write(REFUSAL);
            continue;
        };
        let service = match make_service.call(peer).await {
            Ok(s) => s,
            Err(never) => match never {},
        };
        let service = TowerToHyperService::new(service);
        let (http1, watcher) = (http1.clone(), graceful.watcher());
        let (tls, timeout, metrics) = (
            options.tls.clone(),
            options.header_timeout,
            options.metrics.clone(),
        );
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let io: Box<dyn Io> = match tls {
                None => Box::new(stream),
                Some(acceptor) => {
                    let handshake = tokio::select! {
                        _ = cancel.cancelled() => None,
                        s = handshake(&acceptor, stream, timeout, &metrics, peer) => s,
                    };
                    match handshake {
                        Some(stream) => Box::new(stream),
                        None => return,
                    }
                }
            };
            let connection = http1.serve_connection(TokioIo::new(io), service);
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!(error = %e, %peer, "HTTP connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A connection's byte stream, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// The TLS handshake on `stream`, within `timeout`; `None` when it fails (counted by reason).
/// A client that sent plain HTTP is answered `400 tls_required` first.
async fn handshake(
    acceptor: &TlsAcceptor,
    mut stream: TcpStream,
    timeout: Duration,
    metrics: &Metrics,
    peer: SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut first = [0u8; 1];
    let reason = match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Err(_) => "timeout",
        Ok(Err(_)) | Ok(Ok(0)) => "error",
        // A TLS connection opens with a handshake record (content type 22); a letter opens a
        // plain-HTTP request line.
        Ok(Ok(_)) if first[0].is_ascii_alphabetic() => {
            // A fresh socket's send buffer is empty: this small write does not block.
            let _ = stream.try_write(PLAIN_TO_TLS);
            // Close our side, then read what the client sent so that closing does not reset
            // the connection before it has read the answer (a second at most).
            let _ = stream.shutdown().await;
            let linger = deadline.min(tokio::time::Instant::now() + Duration::from_secs(1));
            let mut sink = [0u8; 4096];
            let _ = tokio::time::timeout_at(linger, async {
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
            "plain_http"
        }
        Ok(Ok(_)) => {
            return crate::tls::handshake(acceptor, stream, deadline, "http", peer, metrics).await
        }
    };
    crate::tls::count_failure(metrics, "http", reason);
    None
}

#[cfg(test)]
mod tests {
    /// A canned answer is complete: its Content-Length is its body's, the body the JSON error.
    fn check(answer: &[u8], code: &str) {
        let text = std::str::from_utf8(answer).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["code"], code);
        assert!(omr_api::ErrorCode::ALL.iter().any(|c| c.as_str() == code));
    }

    #[test]
    fn the_canned_answers_are_complete_responses_with_the_json_error() {
        check(super::REFUSAL, "overloaded");
        check(super::PLAIN_TO_TLS, "tls_required");
    }
}
