//! Keys loaded ahead of their turn: while the pool detects keys already in memory, the next
//! cold keys in the queue (offline, behind, not in memory) are read from the store or their
//! files and laid out beside it, as many as memory holds without evicting a key (and, keys
//! time-shared, in place of keys with nothing to detect) and at most two per detection thread
//! (a load is partly the store's read: with one per thread a light catch-up leaves the cores
//! idle more of the time than with two). A load is reading the store and writing fresh memory;
//! run between turns it would leave the pool idle: on many cores a catch-up of light keys would
//! spend most of its wall time loading (docs/benchmarks.md, "Loads ahead").
//!
//! A key loaded ahead keeps its room reserved in the cache until its load ends; the loop keeps
//! it when it finished ([`Worker::keep_loaded_ahead`], before each plan), and a turn that picks
//! a key whose load is under way waits for that load instead of starting another.

use std::future::Future;
use std::time::Instant;

use futures::FutureExt;
use tracing::Instrument;

use omr_store::ActiveKey;

use super::cache::Loaded;
use super::pool::Priority;
use super::turn::{joined, AbortOnDrop};
use super::{supervise, Plan, Worker};
use crate::scheme::DetectionScheme;

/// A load under way beside a turn.
type Pending<S> = AbortOnDrop<anyhow::Result<Loaded<S>>>;

/// The loads under way, by key.
pub(super) struct Ahead<S: DetectionScheme> {
    loads: Vec<(ActiveKey, Pending<S>)>,
}

impl<S: DetectionScheme> Default for Ahead<S> {
    fn default() -> Self {
        Self { loads: Vec::new() }
    }
}

impl<S: DetectionScheme> Ahead<S> {
    /// Whether `key_id` is being loaded ahead.
    pub(super) fn contains(&self, key_id: &str) -> bool {
        self.loads.iter().any(|(k, _)| k.key_id == key_id)
    }
}

impl<S: DetectionScheme> Worker<S> {
    /// Begin loading the cold keys next in the queue after the keys `busy` that a bulk turn is
    /// about to detect, at most two loads per detection thread under way: while memory has
    /// room for them without evicting a key; and beyond that, when keys are time-shared, in
    /// place of keys in memory with nothing to detect (offline, caught up, not in the turn),
    /// for cold keys the policy would load now although memory is full
    /// ([`Policy::worth_loading`]: their turns would evict such keys anyway, the pool waiting).
    pub(super) fn load_ahead(&mut self, plan: &Plan, busy: &[&str]) {
        // Every key in memory or being loaded (the steady state): no look at the queue.
        if self.cache.len() + self.ahead.loads.len() >= plan.keys.len() {
            return;
        }
        let slots = (2 * self.pools.threads()).saturating_sub(self.ahead.loads.len());
        // Nothing known yet of a key's size: `room_for` is 0 before any load (and no key is
        // in memory to give way).
        let room = self.cache.room_for().min(slots);
        let idle: Vec<&str> = if room < slots {
            (plan.views.iter())
                .filter(|v| v.cached && !v.online && v.behind(plan.head) == 0)
                .map(|v| v.key_id.as_str())
                .filter(|id| !busy.contains(id))
                .collect()
        } else {
            Vec::new()
        };
        let take = (room + idle.len()).min(slots);
        if take == 0 {
            return;
        }
        let ahead = &self.ahead;
        let cold = plan.views.iter().filter(|v| {
            v.behind(plan.head) > 0
                && !v.online
                && !v.cached
                && !busy.contains(&v.key_id.as_str())
                && !ahead.contains(&v.key_id)
        });
        let next = self.queue.first(cold, take);
        let mut full = self.policy();
        full.room = false;
        let now = Instant::now();
        let mut keys = Vec::new();
        for (i, v) in next.into_iter().enumerate() {
            if i >= room && !full.worth_loading(v, plan.head, now) {
                continue;
            }
            keys.extend(plan.key(&v.key_id).cloned());
        }
        let pool = self.pools.of(Priority::Bulk).clone();
        for key in keys {
            if !self.cache.has_room() && !self.cache.evict_one_of(idle.iter().copied()) {
                break;
            }
            let span = tracing::debug_span!("load_ahead", key_id = %key.key_id);
            let load = (self.cache).begin_load(&self.ctx, &pool, &key, &plan.online);
            let task = tokio::spawn(supervise::in_incarnation(load.instrument(span)));
            self.ctx.metrics.detection.loads_ahead.inc();
            self.ahead.loads.push((key, AbortOnDrop(task)));
        }
    }

    /// Keep the keys whose load ahead ended (a failed one is logged and loaded again by its
    /// turn).
    pub(super) fn keep_loaded_ahead(&mut self) {
        let mut i = 0;
        while i < self.ahead.loads.len() {
            if !self.ahead.loads[i].1 .0.is_finished() {
                i += 1;
                continue;
            }
            let (key, mut task) = self.ahead.loads.swap_remove(i);
            let loaded = (&mut task.0)
                .now_or_never()
                .expect("a finished task answers at once");
            self.end_ahead(&key, joined(loaded, "a key's load"));
        }
    }

    /// The load of `key` under way ahead of its turn, if any, to wait for instead of loading
    /// it again; pass what it gives to [`KeyCache::end_load`](super::cache::KeyCache::end_load).
    pub(super) fn take_ahead(
        &mut self,
        key_id: &str,
    ) -> Option<impl Future<Output = anyhow::Result<Loaded<S>>> + Send + 'static> {
        let i = self
            .ahead
            .loads
            .iter()
            .position(|(k, _)| k.key_id == key_id)?;
        let (_, mut task) = self.ahead.loads.swap_remove(i);
        Some(async move { joined((&mut task.0).await, "a key's load") })
    }

    /// Keep (or log the failure of) `key`'s load ahead.
    fn end_ahead(&mut self, key: &ActiveKey, loaded: anyhow::Result<Loaded<S>>) {
        if let Err(e) = self.cache.end_load(key, loaded) {
            tracing::warn!(key_id = %key.key_id, error = %e, "loading a key ahead of its turn failed");
        }
    }
}
