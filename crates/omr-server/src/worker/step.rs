//! One batch for one key: read the messages after its cursor, pick or resume its accumulator,
//! detect on the rayon pool, fold, and commit accumulator and cursor with a compare-and-set.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use omr_core::{Accumulator, Clue, DetectionKey, FoldScratch, OmrError, Pertinency};
use omr_store::{ActiveKey, StoreError, StoredAccumulator, StoredMessage};
use rayon::prelude::*;

use super::cache::{CachedKey, KeyCache};
use super::pool::on_pool;
use crate::state::AppState;

/// What one batch did.
pub(super) struct Batch {
    /// Messages detected, folded and committed (0: nothing to do, or the cursor moved).
    pub(super) count: usize,
    /// Seconds the pool spent detecting and folding them.
    pub(super) seconds: f64,
}

impl Batch {
    pub(super) const NOTHING: Batch = Batch {
        count: 0,
        seconds: 0.0,
    };
}

/// Detect and commit one batch of at most `limit` messages for `key` on `pool`, loading the key
/// first if it is not in memory (without evicting a key in `pinned` while another can go).
pub(super) async fn step(
    state: &Arc<AppState>,
    pool: &Arc<rayon::ThreadPool>,
    cache: &mut KeyCache,
    key: &ActiveKey,
    limit: usize,
    pinned: &HashSet<String>,
) -> anyhow::Result<Batch> {
    if !cache.contains(&key.key_id) {
        // Cheap check first: anything to load the key for?
        if read_batch(state, next_index(cache, key), 1)
            .await?
            .is_empty()
        {
            return Ok(Batch::NOTHING);
        }
        cache.load(state, pool, key, pinned).await?;
    }
    let Some(job) = prepare(state, cache, key, limit).await? else {
        return Ok(Batch::NOTHING);
    };
    let done = job.run(state.clone(), pool.clone(), false).await?;
    Ok(finish(state, cache, done))
}

/// One batch ready to detect: a key's messages after its cursor, the key, and the accumulator
/// they fold into.
pub(super) struct Job {
    key_id: String,
    cursor: u64,
    messages: Vec<StoredMessage>,
    dk: Arc<DetectionKey>,
    acc: Accumulator,
}

/// `key`'s next batch of at most `limit` messages, none past its epoch's end; None when it has
/// nothing to detect or is not in memory.
pub(super) async fn prepare(
    state: &AppState,
    cache: &mut KeyCache,
    key: &ActiveKey,
    limit: usize,
) -> anyhow::Result<Option<Job>> {
    let epoch = state.config.epoch_len.clamp(1, state.params.max_range);
    let cursor = next_index(cache, key);
    let messages = read_batch(state, cursor, limit).await?;
    if messages.is_empty() {
        return Ok(None);
    }
    let Some(entry) = cache.touch(&key.key_id) else {
        return Ok(None);
    };
    if entry.cursor != cursor {
        entry.acc = None;
        entry.cursor = cursor;
    }
    let (dk, open) = (entry.dk.clone(), entry.acc.take());
    let acc = resume(state, key, &dk, open, cursor, epoch).await?;
    Ok(Some(Job {
        key_id: key.key_id.clone(),
        cursor,
        messages,
        dk,
        acc,
    }))
}

/// What a job did: its accumulator, committed (None: the cursor had moved).
pub(super) struct Done {
    key_id: String,
    cursor: u64,
    count: usize,
    seconds: f64,
    folded: Option<Accumulator>,
}

impl Job {
    /// Detect and fold on `pool` (the bulk pool when `bulk`), then commit accumulator and
    /// cursor. Borrows nothing of the worker, so that the loop can serve online keys while it
    /// runs.
    pub(super) async fn run(
        self,
        state: Arc<AppState>,
        pool: Arc<rayon::ThreadPool>,
        bulk: bool,
    ) -> anyhow::Result<Done> {
        let Job {
            key_id,
            cursor,
            messages,
            dk,
            acc,
        } = self;
        let count = messages.len();
        let started = Instant::now();
        let inject_panic = state.take_injected_panic();
        let hold = bulk.then(|| state.clone());
        let folded = on_pool(&pool, move || {
            if let Some(state) = hold {
                state.wait_while_bulk_held();
            }
            assert!(
                !inject_panic,
                "injected detection panic (test fault injection)"
            );
            detect_and_fold(&dk, acc, &messages)
        })
        .await??;
        let seconds = started.elapsed().as_secs_f64();
        let committed = commit(&state, &key_id, cursor, &folded).await?;
        Ok(Done {
            key_id,
            cursor,
            count,
            seconds,
            folded: committed.then_some(folded),
        })
    }
}

/// After a job: wake who waits for the key, count, and keep its accumulator open in the cache
/// (or, when the cursor had moved, forget the key so that its next batch reloads it).
pub(super) fn finish(state: &AppState, cache: &mut KeyCache, done: Done) -> Batch {
    let Done {
        key_id,
        cursor,
        count,
        seconds,
        folded,
    } = done;
    let Some(folded) = folded else {
        // Someone else moved this key (or it was deleted): forget local state.
        tracing::warn!(%key_id, cursor, "cursor moved underneath; reloading");
        cache.remove(&key_id);
        return Batch::NOTHING;
    };
    state.progress.publish(&key_id, folded.end()); // wakes calls waiting for this key
    state.metrics.detections.inc_by(count as u64);
    state.metrics.detect_batch_seconds.observe(seconds);
    let epoch = state.config.epoch_len.clamp(1, state.params.max_range);
    tracing::debug!(%key_id, count, cursor = folded.end(), "batch committed");
    // An online key's load may have evicted it meanwhile; the store has its cursor.
    if let Some(entry) = cache.get_mut(&key_id) {
        keep_open(entry, folded, epoch);
    }
    Batch { count, seconds }
}

/// The next board index to detect for `key`: its cached cursor, unless the store's is ahead.
fn next_index(cache: &KeyCache, key: &ActiveKey) -> u64 {
    match cache.cursor(&key.key_id) {
        Some(c) if c >= key.cursor => c,
        _ => key.cursor,
    }
}

/// The board messages from `cursor` on without a gap: at most `limit`, and none past the end of
/// `cursor`'s epoch.
async fn read_batch(
    state: &AppState,
    cursor: u64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    let epoch = state.config.epoch_len.clamp(1, state.params.max_range);
    let boundary = (cursor / epoch + 1) * epoch;
    let limit = (limit as u64).min(boundary - cursor).max(1) as u32;
    let messages = state.store.read(cursor, limit).await?;
    Ok(messages
        .into_iter()
        .enumerate()
        .take_while(|(k, m)| m.index == cursor + *k as u64)
        .map(|(_, m)| m)
        .collect())
}

/// The accumulator to continue: the open one, the stored one ending here, or a new epoch.
async fn resume(
    state: &AppState,
    key: &ActiveKey,
    dk: &DetectionKey,
    open: Option<Accumulator>,
    cursor: u64,
    epoch: u64,
) -> anyhow::Result<Accumulator> {
    Ok(match open {
        Some(a) if a.end() == cursor && !cursor.is_multiple_of(epoch) => a,
        _ if cursor.is_multiple_of(epoch) || cursor == key.start_index => {
            dk.new_accumulator(cursor)
        }
        _ => match state
            .store
            .accumulator_ending_at(&key.key_id, cursor)
            .await?
        {
            Some(row) => Accumulator::from_bytes(&row.data)?,
            None => dk.new_accumulator(cursor),
        },
    })
}

/// Detect every message and fold each into `acc` in index order. Runs on the pool.
fn detect_and_fold(
    dk: &DetectionKey,
    mut acc: Accumulator,
    messages: &[StoredMessage],
) -> anyhow::Result<Accumulator> {
    let pvs = detect(dk, messages)?;
    let mut scratch = FoldScratch::default();
    for (m, pv) in messages.iter().zip(&pvs) {
        dk.fold(&mut acc, m.index, pv, &m.payload, &mut scratch)?;
    }
    Ok(acc)
}

/// The pertinency of every message, in order. Runs on the pool.
fn detect(dk: &DetectionKey, messages: &[StoredMessage]) -> Result<Vec<Pertinency>, OmrError> {
    let clues: Vec<Clue> = messages
        .iter()
        .map(|m| Clue::from_bytes(&m.clue))
        .collect::<Result<_, _>>()?;
    // Split the batch over the pool's threads; each part still shares its key loads.
    let threads = rayon::current_num_threads().max(1);
    let part = clues.len().div_ceil(threads).max(1);
    let parts: Vec<Vec<_>> = clues
        .par_chunks(part)
        .map(|c| dk.detect_batch(&c.iter().collect::<Vec<_>>()))
        .collect::<Result<_, _>>()?;
    Ok(parts.into_iter().flatten().collect())
}

/// Commit `folded` and move `key_id`'s cursor to its end, only if the cursor is still at
/// `cursor`; false when it is not.
async fn commit(
    state: &AppState,
    key_id: &str,
    cursor: u64,
    folded: &Accumulator,
) -> Result<bool, StoreError> {
    let row = StoredAccumulator {
        start: folded.start(),
        end: folded.end(),
        data: folded.to_bytes(),
    };
    state.store.commit_progress(key_id, cursor, &row).await
}

/// After a commit: the cached cursor moves to `folded`'s end, and `folded` stays open unless
/// it completed its epoch.
fn keep_open(entry: &mut CachedKey, folded: Accumulator, epoch: u64) {
    entry.cursor = folded.end();
    entry.acc = if folded.end().is_multiple_of(epoch) {
        None
    } else {
        Some(folded)
    };
}
