//! The bound on open connections, HTTP and gRPC together (`max_connections`):
//! [`ConnectionLimit::try_open`] gives each accepted connection a permit, held until it
//! closes; without one the connection is closed at once, so a flood of connections costs a
//! file descriptor only for as long as it takes to close it. [`accept`] is the accept both
//! listeners use (`http/serve.rs`, `grpc/incoming.rs`).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus::IntGauge;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// How long [`accept`] pauses after an accept error that is not one connection's
/// (running out of file descriptors), instead of spinning.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Permits for open connections.
#[derive(Debug, Clone)]
pub struct ConnectionLimit {
    permits: Arc<Semaphore>,
    metrics: Metrics,
}

/// One open connection's permit; dropping it (the connection closed) frees it.
#[derive(Debug)]
pub struct ConnectionPermit {
    _permit: OwnedSemaphorePermit,
    open: IntGauge,
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        self.open.dec();
    }
}

impl ConnectionLimit {
    pub fn new(max_connections: usize, metrics: Metrics) -> Self {
        ConnectionLimit {
            permits: Arc::new(Semaphore::new(max_connections.max(1))),
            metrics,
        }
    }

    /// A permit for a connection just accepted on `listener` (`http`, `grpc`), or `None`
    /// (counted as refused) when `max_connections` are open.
    pub fn try_open(&self, listener: &str) -> Option<ConnectionPermit> {
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => {
                let open = self.metrics.admission.connections.clone();
                open.inc();
                Some(ConnectionPermit {
                    _permit: permit,
                    open,
                })
            }
            Err(_) => {
                self.metrics
                    .admission
                    .connections_refused
                    .with_label_values(&[listener])
                    .inc();
                None
            }
        }
    }
}

/// The next connection `listener` (named `name` in the log) accepts, with Nagle's algorithm
/// off. An accept error of one connection is skipped; any other (out of file descriptors) is
/// logged and waited out for [`ACCEPT_ERROR_PAUSE`] rather than spun on.
pub async fn accept(listener: &TcpListener, name: &str) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                return (stream, peer);
            }
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                tracing::warn!(error = %e, listener = name, "accepting a connection failed");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            }
        }
    }
}

/// Whether an accept error concerns only the connection being accepted (the listener is fine).
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
