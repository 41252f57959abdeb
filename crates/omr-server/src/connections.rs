//! The bound on open connections, HTTP and gRPC together (`max_connections`):
//! [`ConnectionLimit::try_open`] gives each accepted connection a permit, held until it
//! closes; without one the connection is closed at once, so a flood of connections costs a
//! file descriptor only for as long as it takes to close it. [`grpc_incoming`] is the gRPC
//! listener's stream of permitted connections ([`Limited`]), TLS ones once their handshake is
//! done.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use prometheus::IntGauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;
use tonic::transport::server::{Connected, TcpConnectInfo};

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

/// A connection's byte stream: plain TCP, or TLS over it.
pub type MaybeTls = Either<TcpStream, Box<TlsStream<TcpStream>>>;

/// A connection that holds its permit while it is open.
#[derive(Debug)]
pub struct Limited {
    io: MaybeTls,
    info: TcpConnectInfo,
    _permit: ConnectionPermit,
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The peer address, for tonic's `Request::remote_addr` (rate limits per client).
impl Connected for Limited {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.info.clone()
    }
}

/// The connections `listener` accepts, each with a permit of `limit` (one without a permit is
/// closed at once); with `tls`, each after its TLS handshake, which runs in a task of its own
/// and must finish within the given time (a failed one is counted and closed). Accepting stops
/// when the stream is dropped.
pub fn grpc_incoming(
    listener: TcpListener,
    limit: ConnectionLimit,
    tls: Option<(TlsAcceptor, Duration)>,
    metrics: Metrics,
) -> impl Stream<Item = io::Result<Limited>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Limited>>(64);
    tokio::spawn(async move {
        loop {
            let (io, peer) = tokio::select! {
                _ = tx.closed() => break,
                accepted = accept(&listener, "gRPC") => accepted,
            };
            let Some(permit) = limit.try_open("grpc") else {
                continue;
            };
            let info = TcpConnectInfo {
                local_addr: io.local_addr().ok(),
                remote_addr: Some(peer),
            };
            let Some((acceptor, timeout)) = tls.clone() else {
                let conn = Limited {
                    io: Either::Left(io),
                    info,
                    _permit: permit,
                };
                if tx.send(Ok(conn)).await.is_err() {
                    break;
                }
                continue;
            };
            let (tx, metrics) = (tx.clone(), metrics.clone());
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + timeout;
                let handshake =
                    crate::tls::handshake(&acceptor, io, deadline, "grpc", peer, &metrics);
                if let Some(tls) = handshake.await {
                    let conn = Limited {
                        io: Either::Right(Box::new(tls)),
                        info,
                        _permit: permit,
                    };
                    let _ = tx.send(Ok(conn)).await;
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
