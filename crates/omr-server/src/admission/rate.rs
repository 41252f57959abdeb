//! [`RateLimits`]: one token bucket per client address (governor's keyed GCRA limiter) for each
//! of posting, reading the board and fetching digests. A refused request takes no token: the
//! limiter updates a bucket only when the whole cost fits.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota};
use omr_api::ErrorCode;

use super::client::ClientKey;
use crate::config::Config;
use crate::error::ServiceError;

/// What a limit protects, and its label on `omr_rate_limited_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `POST /v1/messages` and `/v1/messages/batch`: one token per message.
    Messages,
    /// `GET /v1/messages`.
    BoardReads,
    /// `GET /v1/digests/{key}`, gRPC `GetDigest`, and the PIR hint and query routes.
    Digests,
}

impl Limit {
    pub const fn as_str(self) -> &'static str {
        match self {
            Limit::Messages => "messages",
            Limit::BoardReads => "board_reads",
            Limit::Digests => "digests",
        }
    }

    /// The configuration keys that set it (for error messages).
    const fn keys(self) -> (&'static str, &'static str) {
        match self {
            Limit::Messages => ("rate_limit_per_second", "rate_limit_burst"),
            Limit::BoardReads => ("read_rate_limit_per_second", "read_rate_limit_burst"),
            Limit::Digests => ("digest_rate_limit_per_second", "digest_rate_limit_burst"),
        }
    }
}

/// One limiter per [`Limit`]; `None` where the rate is 0 (no limit).
#[derive(Debug)]
pub struct RateLimits {
    messages: Option<Bucket>,
    board_reads: Option<Bucket>,
    digests: Option<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    limiter: DefaultKeyedRateLimiter<ClientKey>,
    rate: f64,
    burst: u32,
}

impl RateLimits {
    /// The limits `config` sets; an error names a key whose value cannot make a limit.
    pub fn new(config: &Config) -> Result<RateLimits, String> {
        Ok(RateLimits {
            messages: bucket(
                Limit::Messages,
                config.rate_limit_per_second,
                config.rate_limit_burst,
            )?,
            board_reads: bucket(
                Limit::BoardReads,
                config.read_rate_limit_per_second,
                config.read_rate_limit_burst,
            )?,
            digests: bucket(
                Limit::Digests,
                config.digest_rate_limit_per_second,
                config.digest_rate_limit_burst,
            )?,
        })
    }

    fn bucket(&self, limit: Limit) -> Option<&Bucket> {
        match limit {
            Limit::Messages => self.messages.as_ref(),
            Limit::BoardReads => self.board_reads.as_ref(),
            Limit::Digests => self.digests.as_ref(),
        }
    }

    /// Take `cost` tokens from `client`'s bucket of `limit`, or refuse, taking none:
    /// `rate_limited` (429) with the seconds until the cost fits, or, for a cost larger than
    /// the burst (a batch that could never pass), `batch_too_large`.
    pub fn check(&self, limit: Limit, client: ClientKey, cost: u32) -> Result<(), ServiceError> {
        let Some(b) = self.bucket(limit) else {
            return Ok(());
        };
        let Some(n) = NonZeroU32::new(cost) else {
            return Ok(());
        };
        let (rate_key, burst_key) = limit.keys();
        match b.limiter.check_key_n(&client, n) {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(not_until)) => {
                let wait = not_until.wait_time_from(b.limiter.clock().now());
                let secs = retry_after_secs(wait);
                Err(ServiceError::new(
                    ErrorCode::RateLimited,
                    format!(
                        "rate limit: {} per second per client address, bursts of {} \
                         ({rate_key}, {burst_key}); nothing was stored: retry in {secs} s",
                        b.rate, b.burst
                    ),
                )
                .retry_after(secs))
            }
            Err(_) => Err(ServiceError::new(
                ErrorCode::BatchTooLarge,
                format!(
                    "{cost} messages exceed this server's burst of {} per client address \
                     ({burst_key}); nothing was stored: send batches of at most {}",
                    b.burst, b.burst
                ),
            )),
        }
    }

    /// Forget clients whose buckets are full again (they are no different from new ones), so
    /// that the tables hold only recently active addresses.
    pub fn forget_idle(&self) {
        for b in [&self.messages, &self.board_reads, &self.digests]
            .into_iter()
            .flatten()
        {
            b.limiter.retain_recent();
            b.limiter.shrink_to_fit();
        }
    }
}

/// The limiter for `rate` per second with bursts of `burst`; `None` for a rate of 0.
fn bucket(limit: Limit, rate: f64, burst: u32) -> Result<Option<Bucket>, String> {
    let (rate_key, burst_key) = limit.keys();
    if rate == 0.0 {
        return Ok(None);
    }
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!(
            "{rate_key} = {rate}: must be 0 (no limit) or positive"
        ));
    }
    let burst_nz =
        NonZeroU32::new(burst).ok_or_else(|| format!("{burst_key} must be at least 1"))?;
    let period = Duration::try_from_secs_f64(1.0 / rate)
        .map_err(|_| format!("{rate_key} = {rate} is too small"))?;
    let quota = Quota::with_period(period)
        .ok_or_else(|| format!("{rate_key} = {rate} is too large"))?
        .allow_burst(burst_nz);
    Ok(Some(Bucket {
        limiter: DefaultKeyedRateLimiter::keyed(quota),
        rate,
        burst,
    }))
}

/// Whole seconds for `Retry-After`: rounded up, at least 1.
fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rate: f64, burst: u32) -> RateLimits {
        RateLimits::new(&Config {
            rate_limit_per_second: rate,
            rate_limit_burst: burst,
            ..Config::default()
        })
        .unwrap()
    }

    fn key(s: &str) -> ClientKey {
        ClientKey::from(s.parse::<std::net::IpAddr>().unwrap())
    }

    #[test]
    fn a_burst_passes_then_the_next_request_waits_and_a_refusal_takes_nothing() {
        let l = limits(0.5, 3);
        let a = key("192.0.2.1");
        assert!(l.check(Limit::Messages, a, 2).is_ok());
        // 2 tokens would not fit, 1 does: the refused request of 2 took nothing.
        let refused = l.check(Limit::Messages, a, 2).unwrap_err();
        assert_eq!(refused.code, ErrorCode::RateLimited);
        assert_eq!(refused.retry_after_secs, Some(2));
        assert!(l.check(Limit::Messages, a, 1).is_ok());
        assert_eq!(
            l.check(Limit::Messages, a, 1).unwrap_err().code,
            ErrorCode::RateLimited
        );
        // Another client, and another limit, have buckets of their own.
        assert!(l.check(Limit::Messages, key("192.0.2.2"), 3).is_ok());
        assert!(l.check(Limit::Digests, a, 1).is_ok());
    }

    #[test]
    fn a_batch_larger_than_the_burst_is_refused_as_too_large() {
        let l = limits(10.0, 5);
        let e = l.check(Limit::Messages, key("192.0.2.1"), 6).unwrap_err();
        assert_eq!(e.code, ErrorCode::BatchTooLarge);
        assert!(l.check(Limit::Messages, key("192.0.2.1"), 5).is_ok());
    }

    #[test]
    fn rate_zero_is_no_limit_and_bad_values_are_named() {
        let l = limits(0.0, 0);
        for _ in 0..1000 {
            assert!(l.check(Limit::Messages, key("192.0.2.1"), 1000).is_ok());
        }
        let bad = |rate, burst| {
            RateLimits::new(&Config {
                rate_limit_per_second: rate,
                rate_limit_burst: burst,
                ..Config::default()
            })
            .unwrap_err()
        };
        assert!(bad(-1.0, 5).contains("rate_limit_per_second"));
        assert!(bad(f64::NAN, 5).contains("rate_limit_per_second"));
        assert!(bad(1.0, 0).contains("rate_limit_burst"));
    }

    /// The cost of one admission check with 65,536 clients in the table (run with
    /// `cargo test --release -p omr-server --lib check_cost -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn check_cost() {
        let l = limits(1.0, 60);
        let clients: Vec<ClientKey> = (0..65_536u32)
            .map(|i| ClientKey::from(std::net::IpAddr::from((0xC612_0000 + i).to_be_bytes())))
            .collect();
        let rounds = 40;
        let started = std::time::Instant::now();
        for _ in 0..rounds {
            for &c in &clients {
                let _ = l.check(Limit::Messages, c, 1);
            }
        }
        let per = started.elapsed() / (rounds * clients.len() as u32);
        println!("one check with {} clients: {per:?}", clients.len());
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(2001)), 3);
    }
}
