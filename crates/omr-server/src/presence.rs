//! Which recipients are online: every authorized digest, status or wait call marks its key
//! seen. Marks reach the store (`key_presence`, read by every process's scheduler through
//! `Store::active_keys`) at most once per key every few seconds, written in the background so
//! that no request waits for them; a waiting call marks its key again while it waits. A key
//! seen within `online_secs` is online ([`is_online`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use omr_store::{ActiveKey, Store};

use crate::config::Config;

/// Longest interval between two store writes for one key's presence.
const WRITE_EVERY: Duration = Duration::from_secs(5);

/// Keys remembered before the stale ones are forgotten.
const PRUNE_ABOVE: usize = 16_384;

/// The in-memory throttle of presence writes.
#[derive(Debug)]
pub struct Presence {
    /// When each key's presence was last written to the store.
    written: Arc<Mutex<HashMap<String, Instant>>>,
    every: Duration,
}

impl Presence {
    pub fn new(config: &Config) -> Self {
        // Several writes within the online window, so a waiting recipient never drops out.
        let half_window = Duration::from_millis(config.online_secs.saturating_mul(500));
        let every = match config.online_secs {
            0 => WRITE_EVERY,
            _ => WRITE_EVERY.min(half_window),
        };
        Presence {
            written: Arc::default(),
            every,
        }
    }

    /// How often a waiting call marks its key again (the longest a write is held back).
    pub fn every(&self) -> Duration {
        self.every
    }

    /// `key_id`'s recipient is here now. Writes to the store in the background unless this
    /// key was written less than [`Presence::every`] ago; a failed write is logged and the
    /// next mark writes again. Call after authorizing the call, from within the runtime.
    pub fn seen(&self, store: &Store, key_id: &str) {
        if !self.claim(key_id, Instant::now()) {
            return;
        }
        let (store, written) = (store.clone(), self.written.clone());
        let (key_id, at) = (key_id.to_string(), now_ms());
        tokio::spawn(async move {
            if let Err(e) = store.mark_seen(&key_id, at).await {
                tracing::warn!(%key_id, error = %e, "recording that a recipient is online");
                written.lock().expect("presence").remove(&key_id);
            }
        });
    }

    /// Whether a mark of `key_id` at `now` is due for the store; if so, the write is claimed.
    fn claim(&self, key_id: &str, now: Instant) -> bool {
        let mut written = self.written.lock().expect("presence");
        if written
            .get(key_id)
            .is_some_and(|t| now.saturating_duration_since(*t) < self.every)
        {
            return false;
        }
        if written.len() >= PRUNE_ABOVE {
            written.retain(|_, t| now.saturating_duration_since(*t) < self.every);
        }
        written.insert(key_id.to_string(), now);
        true
    }
}

/// Milliseconds since the Unix epoch, as presence is stored.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// How long after it was last seen a recipient stays online: `online_secs`, in milliseconds.
pub fn online_window_ms(config: &Config) -> i64 {
    i64::try_from(config.online_secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// Whether `key`'s recipient is online at `now_ms`: seen within `online_secs` (never, when
/// `online_secs` is 0). For the scheduler, on what `Store::active_keys` returned.
pub fn is_online(config: &Config, key: &ActiveKey, now_ms: i64) -> bool {
    let window = online_window_ms(config);
    key.last_seen_ms
        .is_some_and(|seen| window > 0 && now_ms.saturating_sub(seen) <= window)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(online_secs: u64) -> Config {
        Config {
            online_secs,
            ..Config::default()
        }
    }

    #[test]
    fn writes_are_throttled_per_key() {
        let p = Presence::new(&config(300));
        assert_eq!(p.every(), WRITE_EVERY);
        let t = Instant::now();
        assert!(p.claim("a", t));
        assert!(!p.claim("a", t + Duration::from_secs(1)));
        assert!(p.claim("b", t + Duration::from_secs(1)));
        assert!(p.claim("a", t + WRITE_EVERY));
        // A short online window writes more often than it expires.
        assert_eq!(Presence::new(&config(2)).every(), Duration::from_secs(1));
    }

    #[test]
    fn online_means_seen_within_the_window() {
        let key = |seen| ActiveKey {
            key_id: "k".into(),
            start_index: 0,
            cursor: 0,
            last_seen_ms: seen,
        };
        let c = config(300);
        let now = 1_000_000_000;
        assert!(!is_online(&c, &key(None), now));
        assert!(is_online(&c, &key(Some(now)), now));
        assert!(is_online(&c, &key(Some(now - 300_000)), now));
        assert!(!is_online(&c, &key(Some(now - 300_001)), now));
        assert!(!is_online(&config(0), &key(Some(now)), now));
    }
}
