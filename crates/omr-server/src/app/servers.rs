//! The two servers of an [`Application`](super::Application): the HTTP API (hyper, through
//! `http::serve`) and the gRPC services (tonic: the registry, health, reflection), each on its
//! listener with the connection bound and TLS when configured, and the wait for both to finish
//! at shutdown.

use std::sync::Arc;
use std::time::Duration;

use omr_proto::v1::detector_server::DetectorServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::connections::ConnectionLimit;
use crate::grpc::{
    grpc_incoming, reflection_v1, reflection_v1alpha, DeadlineLayer, DetectorService,
    ReflectionIndex, MAX_MESSAGE_BYTES,
};
use crate::http::HttpState;
use crate::state::ApiState;
use crate::tls::Tls;

pub(super) type ServerTask<E> = tokio::task::JoinHandle<Result<(), E>>;

/// The HTTP API on `listener` until `cancel` fires.
pub(super) fn serve_http(
    state: &Arc<HttpState>,
    listener: TcpListener,
    connections: ConnectionLimit,
    tls: Option<Tls>,
    cancel: &CancellationToken,
) -> ServerTask<std::io::Error> {
    let router = crate::http::router(state.clone());
    let header_timeout = Duration::from_secs(state.config.header_read_timeout_secs.max(1));
    tokio::spawn(crate::http::serve::serve(
        listener,
        router,
        crate::http::serve::Options {
            limit: connections,
            header_timeout,
            tls: tls.map(|t| t.http),
            metrics: state.metrics.clone(),
        },
        cancel.clone(),
    ))
}

/// The gRPC registry, health and reflection services on `listener` until `cancel` fires (a
/// `role = "worker"` process has no listener and serves none of them); returns the health
/// reporter.
pub(super) async fn serve_grpc(
    state: &Arc<ApiState>,
    listener: Option<TcpListener>,
    connections: ConnectionLimit,
    tls: Option<Tls>,
    cancel: &CancellationToken,
) -> anyhow::Result<(
    ServerTask<tonic::transport::Error>,
    tonic_health::server::HealthReporter,
)> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<DetectorServer<DetectorService>>()
        .await;
    // Reflection v1, and v1alpha for the clients that still ask only for it (grpcio-reflection's
    // descriptor database, older grpcurl, Postman); an unknown name is an error answer inside
    // the stream.
    let index = ReflectionIndex::new(&[
        omr_proto::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
    ])?;
    let reflection =
        reflection_v1::ServerReflectionServer::new(reflection_v1::Reflection(index.clone()));
    let reflection_v1alpha =
        reflection_v1alpha::ServerReflectionServer::new(reflection_v1alpha::Reflection(index));
    let detector = DetectorServer::new(DetectorService::new(state.clone()))
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let c = cancel.clone();
    let config = &state.config;
    let secs = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    let server = tonic::transport::Server::builder()
        .http2_keepalive_interval(secs(config.grpc_keepalive_interval_secs))
        .http2_keepalive_timeout(secs(config.grpc_keepalive_timeout_secs))
        .max_concurrent_streams(config.grpc_max_concurrent_streams.max(1))
        .concurrency_limit_per_connection(config.grpc_concurrency_per_connection.max(1))
        .layer(DeadlineLayer::new(Duration::from_secs(
            config.grpc_request_timeout_secs.max(1),
        )));
    let handshake_timeout = Duration::from_secs(config.header_read_timeout_secs.max(1));
    let metrics = state.metrics.clone();
    let task = tokio::spawn(async move {
        let Some(listener) = listener else {
            c.cancelled().await;
            return Ok(());
        };
        let mut server = server;
        server
            .add_service(health_service)
            .add_service(reflection)
            .add_service(reflection_v1alpha)
            .add_service(detector)
            .serve_with_incoming_shutdown(
                grpc_incoming(
                    listener,
                    connections,
                    tls.map(|t| (t.grpc, handshake_timeout)),
                    metrics,
                ),
                async move { c.cancelled().await },
            )
            .await
    });
    Ok((task, health_reporter))
}

/// Wait (at most `deadline`) for both servers to finish their in-flight requests.
pub(super) async fn join_servers(
    http: ServerTask<std::io::Error>,
    grpc: ServerTask<tonic::transport::Error>,
    deadline: Duration,
) {
    match tokio::time::timeout(deadline, async { (http.await, grpc.await) }).await {
        Ok((h, g)) => {
            if let Ok(Err(e)) = h {
                tracing::warn!(error = %e, "HTTP server stopped with an error");
            }
            if let Ok(Err(e)) = g {
                tracing::warn!(error = %e, "gRPC server stopped with an error");
            }
        }
        Err(_) => tracing::warn!("servers did not stop within {} s", deadline.as_secs()),
    }
}
