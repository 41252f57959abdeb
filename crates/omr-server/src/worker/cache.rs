//! The expanded-key cache: detection keys loaded by `KeyFiles` (their expanded file on local
//! disk, or fetched from the store and expanded on the rayon pool), as many as fit in the
//! worker's memory budget (`key_memory_bytes`), each beside the cursor and open accumulator of
//! its key. Before a load, least recently used keys are evicted until the new one fits (keys being
//! loaded count as held), keys of online recipients last; at least one key is always held, whatever the budget.
//! An evicted key's file is written then if its scheme does not write it at load (`KeyFiles::evicted`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use omr_store::ActiveKey;

use super::key_files::KeyFiles;
use super::WorkerContext;
use crate::scheme::DetectionScheme;

/// One key in memory.
pub(super) struct CachedKey<S: DetectionScheme> {
    pub(super) key: Arc<S::Key>,
    /// The open state (ends at `cursor`), when it is known.
    pub(super) state: Option<S::State>,
    pub(super) cursor: u64,
    bytes: u64,
    used: Instant,
}

/// A key loaded by [`KeyCache::begin_load`], and how long that took.
pub(super) struct Loaded<S: DetectionScheme> {
    key: Arc<S::Key>,
    secs: f64,
}

/// Expanded keys by key id.
pub(super) struct KeyCache<S: DetectionScheme> {
    keys: HashMap<String, CachedKey<S>>,
    budget: u64,
    max_count: usize,
    /// The largest key loaded so far: what the next load is expected to take.
    key_bytes: u64,
    /// Mean seconds per load (exponentially weighted), once one happened.
    load_secs: Option<f64>,
    /// Loads begun and not yet ended (their room is reserved).
    loading: usize,
    /// The cursors of keys evicted since the worker last listed its keys, where the list may
    /// still show an older one.
    evicted: HashMap<String, u64>,
    /// Keys whose entry changed since the last [`take_changed`](Self::take_changed): loaded,
    /// evicted, removed, or handed out to be changed (its cursor). A plan brings only their
    /// views up to date, not every key's.
    changed: HashSet<String>,
    files: KeyFiles<S>,
}

impl<S: DetectionScheme> KeyCache<S> {
    /// An empty cache with the configured budget, loading `scheme`'s keys through the
    /// expanded-key files under `data_dir`.
    pub(super) fn new(state: &WorkerContext, scheme: S) -> Self {
        let config = &state.config;
        Self {
            keys: HashMap::new(),
            budget: config.key_memory_budget(),
            max_count: config.max_cached_keys.unwrap_or(usize::MAX).max(1),
            key_bytes: 0,
            load_secs: None,
            loading: 0,
            evicted: HashMap::new(),
            changed: HashSet::new(),
            files: KeyFiles::open(config, &state.metrics, scheme),
        }
    }

    /// The scheme whose keys it holds.
    pub(super) fn scheme(&self) -> &S {
        self.files.scheme()
    }

    /// The memory budget in bytes.
    pub(super) fn budget(&self) -> u64 {
        self.budget
    }

    /// Bytes held by the cached keys.
    pub(super) fn used_bytes(&self) -> u64 {
        self.keys.values().map(|c| c.bytes).sum()
    }

    /// Keys in memory.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Mean seconds one load took, if any happened.
    pub(super) fn load_secs(&self) -> Option<f64> {
        self.load_secs
    }

    /// The keys whose cursor or presence here may have changed since the last call (the
    /// listing of [`retain_only`](Self::retain_only) resets what a plan knows of every key).
    pub(super) fn take_changed(&mut self) -> HashSet<String> {
        std::mem::take(&mut self.changed)
    }

    /// Whether `key_id` is in memory.
    pub(super) fn contains(&self, key_id: &str) -> bool {
        self.keys.contains_key(key_id)
    }

    /// The cursor this worker last knew for `key_id`: its entry's, or the one it had when it
    /// was evicted.
    pub(super) fn cursor(&self, key_id: &str) -> Option<u64> {
        (self.keys.get(key_id).map(|c| c.cursor)).or_else(|| self.evicted.get(key_id).copied())
    }

    /// Make room for `key` (evicting least recently used keys, never a key in `pinned` while
    /// another can go) and reserve it, then return its load on `pool`, which borrows nothing:
    /// the worker serves online keys while it runs. Pass what it returns to
    /// [`end_load`](Self::end_load).
    pub(super) fn begin_load(
        &mut self,
        state: &WorkerContext,
        pool: &Arc<rayon::ThreadPool>,
        key: &ActiveKey,
        pinned: &HashSet<String>,
    ) -> impl std::future::Future<Output = anyhow::Result<Loaded<S>>> + Send + 'static {
        self.make_room(pinned);
        self.loading += 1;
        let (files, store) = (self.files.clone(), state.store.clone());
        let (pool, key_id) = (pool.clone(), key.key_id.clone());
        async move {
            let started = Instant::now();
            let (loaded, _source) = files.load(&store, &pool, &key_id).await?;
            Ok(Loaded {
                key: loaded,
                secs: started.elapsed().as_secs_f64(),
            })
        }
    }

    /// Release the reservation of [`begin_load`](Self::begin_load) and keep what it loaded.
    pub(super) fn end_load(
        &mut self,
        key: &ActiveKey,
        loaded: anyhow::Result<Loaded<S>>,
    ) -> anyhow::Result<()> {
        self.loading -= 1;
        let Loaded { key: loaded, secs } = loaded?;
        self.load_secs = Some(self.load_secs.map_or(secs, |m| 0.8 * m + 0.2 * secs));
        let bytes = S::key_memory_bytes(&loaded);
        self.key_bytes = self.key_bytes.max(bytes);
        let evicted = self.evicted.remove(&key.key_id).unwrap_or(0);
        self.changed.insert(key.key_id.clone());
        self.keys.insert(
            key.key_id.clone(),
            CachedKey {
                key: loaded,
                state: None,
                cursor: key.cursor.max(evicted),
                bytes,
                used: Instant::now(),
            },
        );
        Ok(())
    }

    /// `key_id`'s entry, if it is cached, marked used now.
    pub(super) fn touch(&mut self, key_id: &str) -> Option<&mut CachedKey<S>> {
        let entry = self.keys.get_mut(key_id)?;
        entry.used = Instant::now();
        self.changed.insert(key_id.to_string());
        Some(entry)
    }

    /// `key_id`'s entry, if it is cached.
    pub(super) fn get_mut(&mut self, key_id: &str) -> Option<&mut CachedKey<S>> {
        let entry = self.keys.get_mut(key_id)?;
        self.changed.insert(key_id.to_string());
        Some(entry)
    }

    /// `key_id`, no longer in memory, committed up to `cursor`.
    pub(super) fn evicted_at(&mut self, key_id: &str, cursor: u64) {
        let at = self.evicted.entry(key_id.to_string()).or_insert(cursor);
        *at = (*at).max(cursor);
        self.changed.insert(key_id.to_string());
    }

    /// Forget `key_id`: the next batch reloads it and its cursor.
    pub(super) fn remove(&mut self, key_id: &str) {
        self.keys.remove(key_id);
        self.evicted.remove(key_id);
        self.changed.insert(key_id.to_string());
    }

    /// Drop every key not among `keys` (deleted, or no longer leased here), and the evicted
    /// keys' cursors: `keys` were just listed from the store, with their cursors.
    pub(super) fn retain_only(&mut self, keys: &[ActiveKey]) {
        let ids: HashSet<&str> = keys.iter().map(|k| k.key_id.as_str()).collect();
        self.keys.retain(|id, _| ids.contains(id.as_str()));
        self.evicted.clear();
    }

    /// How many more keys fit without evicting one (keys being loaded count as held), as far
    /// as the largest key loaded so far tells (0 before any load: nothing is known).
    pub(super) fn room_for(&self) -> usize {
        if self.key_bytes == 0 {
            return 0;
        }
        let (held, bytes) = self.reserved();
        let by_bytes = self.budget.saturating_sub(bytes) / self.key_bytes;
        (by_bytes as usize).min(self.max_count.saturating_sub(held))
    }

    /// Whether one more key fits without evicting one (keys being loaded count as held).
    pub(super) fn has_room(&self) -> bool {
        let (held, bytes) = self.reserved();
        held < self.max_count && bytes + self.key_bytes <= self.budget
    }

    /// Keys held and the bytes they take, each key being loaded counted at the largest size
    /// loaded so far.
    fn reserved(&self) -> (usize, u64) {
        let held = self.keys.len() + self.loading;
        (
            held,
            self.used_bytes() + self.loading as u64 * self.key_bytes,
        )
    }

    /// Evict least recently used keys, unpinned ones first, until one more key fits.
    fn make_room(&mut self, pinned: &HashSet<String>) {
        while !self.keys.is_empty() && !self.has_room() {
            let victim = self
                .keys
                .iter()
                .min_by_key(|(id, c)| (pinned.contains(*id), c.used))
                .map(|(k, _)| k.clone())
                .expect("not empty");
            self.evict(&victim);
        }
    }

    /// Evict the least recently used of `candidates` that is in memory, if any: it is filed
    /// (when its scheme files keys at eviction) and its cursor remembered.
    pub(super) fn evict_one_of<'a>(&mut self, candidates: impl Iterator<Item = &'a str>) -> bool {
        let victim = candidates
            .filter_map(|id| self.keys.get(id).map(|c| (c.used, id)))
            .min()
            .map(|(_, id)| id.to_string());
        victim.is_some_and(|v| self.evict(&v))
    }

    /// Take `victim` out of memory (see [`evict_one_of`](Self::evict_one_of)).
    fn evict(&mut self, victim: &str) -> bool {
        let Some(gone) = self.keys.remove(victim) else {
            return false;
        };
        tracing::debug!(key_id = %victim, "evicting expanded key to make room");
        self.files.evicted(victim, gone.key);
        self.changed.insert(victim.to_string());
        self.evicted.insert(victim.to_string(), gone.cursor);
        true
    }
}
