//! Which recipients are online: every authorized digest, status or wait call marks its key
//! seen. Marks reach the store (`key_presence`, read by every process's scheduler through
//! `Store::active_keys`) at most once per key every few seconds, written in the background so
//! that no request waits for them; a waiting call marks its key again while it waits. A key
//! seen within `online_secs` is online ([`is_online`]).
//!
//! A mark is also how a recipient of a batch scheme (omr-light-v1) asks for its open batch: the
//! worker detects an online key's open batch once per mark newer than the one it last answered
//! (`worker::plan`), not on every new message. So a call that finds its light key behind the
//! board ([`Presence::asked`]) marks it at most once a second, not once every few seconds, and
//! a detection worker in the same process hears of every ask at once ([`Asks`]), without
//! waiting for the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use omr_store::{ActiveKey, Store};

use crate::board_signal::BoardSignal;
use crate::config::Config;

/// Longest interval between two store writes for one key's presence: a tenth of the default
/// online window, and rare enough that a key whose client polls every second costs the store's
/// writer little (docs/benchmarks.md, "omr-light-v1's digest endpoint under raw polls").
const WRITE_EVERY: Duration = Duration::from_secs(30);

/// Shortest interval between two store writes for a key whose recipient asks for detection its
/// key has not reached ([`Presence::asked`]).
const ASK_EVERY: Duration = Duration::from_secs(1);

/// Keys remembered before the stale ones are forgotten.
const PRUNE_ABOVE: usize = 16_384;

/// The in-memory throttle of presence writes.
#[derive(Debug)]
pub struct Presence {
    /// When each key's presence was last written to the store.
    written: Arc<Mutex<HashMap<String, Instant>>>,
    every: Duration,
    /// Asks for the detection worker of this process (none when it runs no worker).
    asks: Option<Arc<Asks>>,
}

/// The asks for open batches made through this process, for the detection worker of the same
/// process: each key's newest ask (ms since the Unix epoch), taken by the worker at its next
/// plan, and the worker woken. A worker in another process sees the same asks as marks in the
/// store, within a second or two (the write's throttle and its look at who is online).
#[derive(Debug)]
pub struct Asks {
    asked: Mutex<HashMap<String, i64>>,
    wake: Arc<BoardSignal>,
}

impl Asks {
    /// Asks that wake the worker through `wake` (the board's signal, which it waits on: an ask
    /// makes it plan again, as a board move does).
    pub fn new(wake: Arc<BoardSignal>) -> Self {
        Asks {
            asked: Mutex::default(),
            wake,
        }
    }

    /// `key_id`'s recipient asked at `at_ms`.
    fn ask(&self, key_id: &str, at_ms: i64) {
        let mut asked = self.asked.lock().expect("asks");
        match asked.get_mut(key_id) {
            Some(at) => *at = (*at).max(at_ms),
            None => {
                asked.insert(key_id.to_string(), at_ms);
            }
        }
        drop(asked);
        self.wake.raise();
    }

    /// The asks since the last call, each key's newest.
    pub fn take(&self) -> HashMap<String, i64> {
        std::mem::take(&mut *self.asked.lock().expect("asks"))
    }
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
            asks: None,
        }
    }

    /// From now on tell `asks` (the detection worker of this process) of every ask at once.
    pub fn tell(&mut self, asks: Arc<Asks>) {
        self.asks = Some(asks);
    }

    /// How often a waiting call marks its key again (the longest a write is held back).
    pub fn every(&self) -> Duration {
        self.every
    }

    /// `key_id`'s recipient is here now. Writes to the store in the background unless this
    /// key was written less than [`Presence::every`] ago; a failed write is logged and the
    /// next mark writes again. Call after authorizing the call, from within the runtime.
    pub fn seen(&self, store: &Store, key_id: &str) {
        self.mark(store, key_id, self.every, now_ms());
    }

    /// `key_id`'s recipient is here and asks for messages its key has not been detected to (a
    /// key of a batch scheme behind the board: a digest or status call that found it behind, or
    /// a call waiting for its cursor to move). As [`Presence::seen`], with writes held back at
    /// most [`Presence::ask_every`]: each mark that reaches the store asks the worker for one
    /// detection of the key's open batch.
    pub fn asked(&self, store: &Store, key_id: &str) {
        // One time for both, so that the worker, which hears it twice, counts one ask.
        let at = now_ms();
        if let Some(asks) = &self.asks {
            asks.ask(key_id, at);
        }
        self.mark(store, key_id, self.ask_every(), at);
    }

    /// How often a call that asks for detection marks its key ([`Presence::asked`]).
    pub fn ask_every(&self) -> Duration {
        ASK_EVERY.min(self.every)
    }

    /// Mark `key_id` seen at `at` unless it was written less than `every` ago.
    fn mark(&self, store: &Store, key_id: &str, every: Duration, at: i64) {
        if !self.claim(key_id, Instant::now(), every) {
            return;
        }
        let (store, written) = (store.clone(), self.written.clone());
        let key_id = key_id.to_string();
        tokio::spawn(async move {
            if let Err(e) = store.mark_seen(&key_id, at).await {
                tracing::warn!(%key_id, error = %e, "recording that a recipient is online");
                written.lock().expect("presence").remove(&key_id);
            }
        });
    }

    /// Whether a mark of `key_id` at `now` is due for the store (its last write is `every` old);
    /// if so, the write is claimed.
    fn claim(&self, key_id: &str, now: Instant, every: Duration) -> bool {
        let mut written = self.written.lock().expect("presence");
        if written
            .get(key_id)
            .is_some_and(|t| now.saturating_duration_since(*t) < every)
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
        let every = p.every();
        let t = Instant::now();
        assert!(p.claim("a", t, every));
        assert!(!p.claim("a", t + Duration::from_secs(1), every));
        assert!(p.claim("b", t + Duration::from_secs(1), every));
        assert!(p.claim("a", t + WRITE_EVERY, every));
        // A short online window writes more often than it expires.
        assert_eq!(Presence::new(&config(2)).every(), Duration::from_secs(1));
    }

    #[test]
    fn a_recipient_that_asks_is_written_once_a_second() {
        let p = Presence::new(&config(300));
        let ask = p.ask_every();
        assert_eq!(ask, ASK_EVERY);
        let t = Instant::now();
        assert!(p.claim("a", t, p.every()));
        // Asking within the second after a write waits; after it, it is written, where a
        // plain mark would still wait for its few seconds.
        assert!(!p.claim("a", t + ask / 2, ask));
        assert!(!p.claim("a", t + ask, p.every()));
        assert!(p.claim("a", t + ask, ask));
        // Never less often than a plain mark.
        assert_eq!(
            Presence::new(&config(1)).ask_every(),
            Duration::from_millis(500)
        );
    }

    #[tokio::test]
    async fn an_ask_reaches_the_worker_at_once_and_wakes_it() {
        let wake = Arc::new(BoardSignal::default());
        let asks = Asks::new(wake.clone());
        asks.ask("a", 5);
        asks.ask("b", 7);
        asks.ask("a", 3);
        assert_eq!(wake.raised(), 3);
        let taken = asks.take();
        assert_eq!(taken.len(), 2);
        assert_eq!((taken["a"], taken["b"]), (5, 7), "each key's newest ask");
        assert!(asks.take().is_empty(), "taken once");
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
