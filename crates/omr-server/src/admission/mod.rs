//! Sender and reader admission: which client a request comes from (`client`: the socket peer,
//! or `X-Forwarded-For` behind a trusted proxy) and its per-address rate limits (`rate`), with
//! the count of refusals. The handlers call [`Admission::check`] before they do any work a
//! refusal would waste (a batch after decoding, to know its cost).

mod client;
mod rate;

use std::net::SocketAddr;

use axum::http::HeaderMap;

pub use client::{ClientKey, TrustedProxies, FORWARDED_FOR};
pub use rate::{Limit, RateLimits};

use crate::config::Config;
use crate::error::ServiceError;
use crate::metrics::Metrics;

/// The trusted proxies and the rate limits of one process.
#[derive(Debug)]
pub struct Admission {
    proxies: TrustedProxies,
    limits: RateLimits,
    metrics: Metrics,
}

impl Admission {
    /// From `trusted_proxies` and the `*rate_limit*` keys; an error names a bad value.
    pub fn new(config: &Config, metrics: Metrics) -> Result<Admission, String> {
        Ok(Admission {
            proxies: TrustedProxies::parse(&config.trusted_proxies)?,
            limits: RateLimits::new(config)?,
            metrics,
        })
    }

    /// The client of an HTTP request from `peer` with `headers`.
    pub fn http_client(&self, peer: SocketAddr, headers: &HeaderMap) -> ClientKey {
        let forwarded = headers
            .get_all(FORWARDED_FOR)
            .iter()
            .filter_map(|v| v.to_str().ok());
        ClientKey::from(self.proxies.client_ip(peer.ip(), forwarded))
    }

    /// The client of a gRPC call (its peer, and `x-forwarded-for` metadata from a trusted
    /// proxy); `None` when the transport does not know the peer.
    pub fn grpc_client<T>(&self, request: &tonic::Request<T>) -> Option<ClientKey> {
        let peer = request.remote_addr()?;
        let forwarded = request
            .metadata()
            .get_all(FORWARDED_FOR)
            .iter()
            .filter_map(|v| v.to_str().ok());
        Some(ClientKey::from(
            self.proxies.client_ip(peer.ip(), forwarded),
        ))
    }

    /// [`Admission::check`] for a gRPC call costing 1 (a call whose peer is unknown passes).
    pub fn check_grpc<T>(
        &self,
        limit: Limit,
        route: &str,
        request: &tonic::Request<T>,
    ) -> Result<(), ServiceError> {
        match self.grpc_client(request) {
            Some(client) => self.check(limit, route, client, 1),
            None => Ok(()),
        }
    }

    /// Take `cost` from `client`'s `limit` for a request on `route`, or refuse it (nothing
    /// taken), counting a `rate_limited` refusal.
    pub fn check(
        &self,
        limit: Limit,
        route: &str,
        client: ClientKey,
        cost: u32,
    ) -> Result<(), ServiceError> {
        self.limits.check(limit, client, cost).inspect_err(|e| {
            if e.code != omr_api::ErrorCode::RateLimited {
                return;
            }
            self.metrics
                .admission
                .rate_limited
                .with_label_values(&[route, limit.as_str()])
                .inc();
        })
    }

    /// Forget idle clients (see [`RateLimits::forget_idle`]); called periodically.
    pub fn forget_idle(&self) {
        self.limits.forget_idle();
    }
}
