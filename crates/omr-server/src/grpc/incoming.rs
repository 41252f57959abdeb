//! The gRPC listener's stream of permitted connections ([`Limited`]: each holds a permit of
//! the shared `ConnectionLimit` while it is open), TLS ones once their handshake is done.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::connections::{accept, ConnectionLimit, ConnectionPermit};
use crate::metrics::Metrics;

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
