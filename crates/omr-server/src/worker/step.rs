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

/// Detect and commit one batch of at most `limit` messages for `key`, loading the key first if
/// it is not in memory (without evicting a key in `pinned` while another can go).
pub(super) async fn step(
    state: &AppState,
    pool: &rayon::ThreadPool,
    cache: &mut KeyCache,
    key: &ActiveKey,
    limit: usize,
    pinned: &HashSet<String>,
) -> anyhow::Result<Batch> {
    let nothing = Batch {
        count: 0,
        seconds: 0.0,
    };
    let epoch = state.config.epoch_len.clamp(1, state.params.max_range);
    // Cheap check first: anything to do?
    let cursor = match cache.cursor(&key.key_id) {
        Some(c) if c >= key.cursor => c,
        _ => key.cursor,
    };
    let messages = read_batch(state, cursor, epoch, limit).await?;
    if messages.is_empty() {
        return Ok(nothing);
    }
    let (dk, open) = checkout(state, pool, cache, key, cursor, pinned).await?;
    let acc = resume(state, key, &dk, open, cursor, epoch).await?;
    let count = messages.len();
    let started = Instant::now();
    let inject_panic = state.take_injected_panic();
    let folded = on_pool(pool, move || {
        assert!(
            !inject_panic,
            "injected detection panic (test fault injection)"
        );
        detect_and_fold(&dk, acc, &messages)
    })
    .await??;
    let detect_seconds = started.elapsed().as_secs_f64();
    if !commit(state, &key.key_id, cursor, &folded).await? {
        // Someone else moved this key (or it was deleted): forget local state.
        tracing::warn!(key_id = %key.key_id, cursor, "cursor moved underneath; reloading");
        cache.remove(&key.key_id);
        return Ok(nothing);
    }
    state.progress.publish(&key.key_id, folded.end()); // wakes calls waiting for this key
    state.metrics.detections.inc_by(count as u64);
    state.metrics.detect_batch_seconds.observe(detect_seconds);
    let entry = cache.get_mut(&key.key_id).expect("present");
    keep_open(entry, folded, epoch);
    tracing::debug!(key_id = %key.key_id, count, cursor = entry.cursor, "batch committed");
    Ok(Batch {
        count,
        seconds: detect_seconds,
    })
}

/// The board messages from `cursor` on without a gap: at most `limit`, and none past the end of
/// `cursor`'s epoch.
async fn read_batch(
    state: &AppState,
    cursor: u64,
    epoch: u64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
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

/// `key`'s expanded key (loaded if need be) and its open accumulator, which is dropped when the
/// cached cursor is not `cursor`.
async fn checkout(
    state: &AppState,
    pool: &rayon::ThreadPool,
    cache: &mut KeyCache,
    key: &ActiveKey,
    cursor: u64,
    pinned: &HashSet<String>,
) -> anyhow::Result<(Arc<DetectionKey>, Option<Accumulator>)> {
    let entry = cache.load(state, pool, key, pinned).await?;
    if entry.cursor != cursor {
        entry.acc = None;
        entry.cursor = cursor;
    }
    Ok((entry.dk.clone(), entry.acc.take()))
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
