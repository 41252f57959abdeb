//! The expanded-key cache: detection keys fetched from the store and expanded on the rayon pool,
//! at most `max_cached_keys` of them (the least recently used goes first), each beside the
//! cursor and open accumulator of its key.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use omr_core::{Accumulator, CompressedDetectionKey, DetectionKey};
use omr_store::ActiveKey;

use super::pool::on_pool;
use crate::config::Config;
use crate::state::AppState;

/// One key in memory.
pub(super) struct CachedKey {
    pub(super) dk: Arc<DetectionKey>,
    /// The open accumulator (ends at `cursor`), when it is known.
    pub(super) acc: Option<Accumulator>,
    pub(super) cursor: u64,
    used: Instant,
}

/// Expanded keys by key id.
pub(super) struct KeyCache {
    keys: HashMap<String, CachedKey>,
    capacity: usize,
}

impl KeyCache {
    /// An empty cache of `max_cached_keys` keys (at least one).
    pub(super) fn new(config: &Config) -> Self {
        Self {
            keys: HashMap::new(),
            capacity: config.max_cached_keys.max(1),
        }
    }

    /// The cursor cached for `key_id`, if it is cached.
    pub(super) fn cursor(&self, key_id: &str) -> Option<u64> {
        self.keys.get(key_id).map(|c| c.cursor)
    }

    /// `key`'s entry, loading and expanding the key first if it is not cached; marks it used.
    pub(super) async fn load(
        &mut self,
        state: &AppState,
        pool: &rayon::ThreadPool,
        key: &ActiveKey,
    ) -> anyhow::Result<&mut CachedKey> {
        if !self.keys.contains_key(&key.key_id) {
            self.make_room();
            let dk = expand(state, pool, &key.key_id).await?;
            self.keys.insert(
                key.key_id.clone(),
                CachedKey {
                    dk: Arc::new(dk),
                    acc: None,
                    cursor: key.cursor,
                    used: Instant::now(),
                },
            );
        }
        let entry = self.keys.get_mut(&key.key_id).expect("inserted above");
        entry.used = Instant::now();
        Ok(entry)
    }

    /// `key_id`'s entry, if it is cached.
    pub(super) fn get_mut(&mut self, key_id: &str) -> Option<&mut CachedKey> {
        self.keys.get_mut(key_id)
    }

    /// Forget `key_id`: the next batch reloads it and its cursor.
    pub(super) fn remove(&mut self, key_id: &str) {
        self.keys.remove(key_id);
    }

    /// Drop every key not among `keys` (deleted, or no longer leased here).
    pub(super) fn retain_only(&mut self, keys: &[ActiveKey]) {
        self.keys
            .retain(|id, _| keys.iter().any(|k| &k.key_id == id));
    }

    /// Evict the least recently used key when the cache is full.
    fn make_room(&mut self) {
        if self.keys.len() < self.capacity {
            return;
        }
        if let Some(old) = self
            .keys
            .iter()
            .min_by_key(|(_, c)| c.used)
            .map(|(k, _)| k.clone())
        {
            self.keys.remove(&old);
        }
    }
}

/// Fetch `key_id`'s stored bytes and expand them on `pool`.
async fn expand(
    state: &AppState,
    pool: &rayon::ThreadPool,
    key_id: &str,
) -> anyhow::Result<DetectionKey> {
    let bytes = state
        .store
        .key_bytes(key_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("key {} has no stored bytes", key_id))?;
    let started = Instant::now();
    let dk = on_pool(pool, move || {
        CompressedDetectionKey::from_bytes(&bytes).map(|k| k.expand())
    })
    .await??;
    tracing::info!(key_id = %key_id, ms = started.elapsed().as_millis() as u64, memory_bytes = dk.memory_bytes(), "detection key expanded");
    Ok(dk)
}
