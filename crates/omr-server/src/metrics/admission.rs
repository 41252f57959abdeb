//! Admission metrics: requests refused by a rate limit, requests shed under load or cut by the
//! request timeout, connections open and refused, failed TLS handshakes and certificate
//! reloads.

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

/// The admission metrics.
#[derive(Debug, Clone)]
pub struct AdmissionMetrics {
    /// Requests refused by a per-client rate limit, by route and limit (`messages`,
    /// `board_reads`, `digests`).
    pub rate_limited: IntCounterVec,
    /// HTTP requests answered without being served, by reason: `overloaded`
    /// (`max_concurrent_requests` in progress) or `timeout` (`request_timeout_secs`).
    pub shed: IntCounterVec,
    /// Open connections (HTTP and gRPC) and connections closed at once because
    /// `max_connections` were open, by listener (`http`, `grpc`).
    pub connections: IntGauge,
    pub connections_refused: IntCounterVec,
    /// TLS handshakes that failed, by listener and reason (`plain_http`: a plain-HTTP request
    /// to the HTTPS listener; `timeout`; `error`).
    pub tls_handshake_failures: IntCounterVec,
    /// Reloads of `tls_cert` / `tls_key` (SIGHUP or a file change), by result (`ok`, `error`).
    pub tls_reloads: IntCounterVec,
}

impl AdmissionMetrics {
    /// The metrics, registered in `registry`.
    pub fn new(registry: &Registry) -> Self {
        let m = AdmissionMetrics {
            rate_limited: IntCounterVec::new(
                Opts::new(
                    "rate_limited_total",
                    "Requests refused by a per-client-address rate limit, by route and limit",
                ),
                &["route", "limit"],
            )
            .expect("metric"),
            shed: IntCounterVec::new(
                Opts::new(
                    "requests_shed_total",
                    "HTTP requests answered 503 overloaded or 408 request_timeout, by reason",
                ),
                &["reason"],
            )
            .expect("metric"),
            connections: IntGauge::new("open_connections", "Open HTTP and gRPC connections")
                .expect("metric"),
            connections_refused: IntCounterVec::new(
                Opts::new(
                    "connections_refused_total",
                    "Connections closed at once because max_connections were open, by listener",
                ),
                &["listener"],
            )
            .expect("metric"),
            tls_handshake_failures: IntCounterVec::new(
                Opts::new(
                    "tls_handshake_failures_total",
                    "TLS handshakes that failed, by listener and reason",
                ),
                &["listener", "reason"],
            )
            .expect("metric"),
            tls_reloads: IntCounterVec::new(
                Opts::new(
                    "tls_reloads_total",
                    "Reloads of the TLS certificate and key, by result",
                ),
                &["result"],
            )
            .expect("metric"),
        };
        for c in [
            Box::new(m.rate_limited.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.shed.clone()),
            Box::new(m.connections.clone()),
            Box::new(m.connections_refused.clone()),
            Box::new(m.tls_handshake_failures.clone()),
            Box::new(m.tls_reloads.clone()),
        ] {
            registry.register(c).expect("unique metric names");
        }
        m
    }
}
