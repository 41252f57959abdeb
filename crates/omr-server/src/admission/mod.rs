//! Sender and reader admission: which client a request comes from (`client`: the socket peer,
//! or `X-Forwarded-For` behind a trusted proxy) and its per-address rate limits (`rate`), with
//! the count of refusals. The handlers call [`Admission::check`] before they do any work a
//! refusal would waste (a batch after decoding, to know its cost). Each transport reads the
//! client's address its own way and hands it to [`Admission::client`].

mod client;
mod rate;

use std::net::IpAddr;

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

    /// The client of a request from `peer` whose `X-Forwarded-For` values (HTTP headers or gRPC
    /// metadata) are `forwarded`: named there only when `peer` is a trusted proxy.
    pub fn client<'a>(&self, peer: IpAddr, forwarded: impl Iterator<Item = &'a str>) -> ClientKey {
        ClientKey::from(self.proxies.client_ip(peer, forwarded))
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
