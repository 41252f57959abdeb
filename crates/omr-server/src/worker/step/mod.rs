//! One batch for one key, in three parts the turn runs in order: [`prepare`] (read the messages
//! after its cursor, pick or resume its state), [`Job::run`] (detect and fold on a pool through
//! the scheme, then commit state and cursor with a compare-and-set) and [`finish`] (wake who
//! waits, count, keep the state open); `group` runs several keys' jobs at once.
//!
//! What a job detects is its scheme's walk's answer ([`Walk::span`]): the messages after the
//! key's cursor, folded into its state, or a batch read from its first message (the state is
//! computed again and replaced, never folded into) up to `reach`, an index below a board head
//! already read (so a job reads no head): the last refresh mark for a key whose online
//! recipient asked for its open batch, the last full batch for the others.

use std::sync::Arc;
use std::time::Instant;

use omr_store::{ActiveKey, StoreError, StoredAccumulator, StoredMessage};

use super::cache::{CachedKey, KeyCache};
use super::pool::{on_pool, Priority};
use super::WorkerContext;
use crate::scheme::{DetectionScheme, Span, Walk};

mod group;
pub(super) use group::{prepare_group, run_group};

/// What one batch did.
pub(super) struct Outcome {
    /// Messages detected, folded and committed (0: nothing to do, or the cursor moved).
    pub(super) count: usize,
    /// Seconds the pool spent detecting and folding them.
    pub(super) seconds: f64,
}

impl Outcome {
    pub(super) const NOTHING: Outcome = Outcome {
        count: 0,
        seconds: 0.0,
    };
}

/// Whether `key` has a message below `reach` to detect (a cheap check before loading it).
pub(super) async fn has_work<S: DetectionScheme>(
    state: &WorkerContext,
    cache: &KeyCache<S>,
    key: &ActiveKey,
    reach: u64,
) -> Result<bool, StoreError> {
    let next = next_index(cache, key);
    if next >= reach {
        return Ok(false);
    }
    let batch = read_batch(state, next, 1).await?;
    Ok(!batch.is_empty())
}

/// One batch ready to detect: a key's messages after its cursor, the key, and the state they
/// fold into.
pub(super) struct Job<S: DetectionScheme> {
    key_id: String,
    cursor: u64,
    /// A batch scheme's batch `(first, count)`; its messages are empty when it is prepared.
    batch: Option<(u64, usize)>,
    messages: Vec<StoredMessage>,
    key: Arc<S::Key>,
    state: S::State,
    scheme: S,
    /// An online key's open batch detected to a refresh mark (its time is counted as such).
    refresh: bool,
}

/// `key`'s next batch of at most `limit` messages, none past its epoch's end or at or past
/// `reach`; None when it has nothing to detect or is not in memory.
pub(super) async fn prepare<S: DetectionScheme>(
    ctx: &WorkerContext,
    cache: &mut KeyCache<S>,
    key: &ActiveKey,
    limit: usize,
    reach: u64,
) -> anyhow::Result<Option<Job<S>>> {
    prepare_reading(ctx, cache, key, limit, reach, true).await
}

/// [`prepare`], reading a batch's messages ([`Span::Batch`]) only when `read` (a group's
/// companions leave them to the first job: see [`run_group`]).
async fn prepare_reading<S: DetectionScheme>(
    ctx: &WorkerContext,
    cache: &mut KeyCache<S>,
    key: &ActiveKey,
    limit: usize,
    reach: u64,
    read: bool,
) -> anyhow::Result<Option<Job<S>>> {
    let cursor = next_index(cache, key);
    let scheme = cache.scheme().clone();
    let Some(span) = S::Walk::span(&scheme, ctx.epochs, cursor, reach) else {
        return Ok(None);
    };
    if let Span::Batch { first, count } = span {
        // Detected whole from its first message, whatever was detected of it before. When its
        // shared work is still prepared, its messages are not read again (every key's job would
        // read the same clues).
        let end = first + count as u64;
        let messages = if !read || S::Walk::has_prepared(&scheme, first, count) {
            Vec::new()
        } else {
            let mut m = read_batch(ctx, first, count).await?;
            m.retain(|m| m.index < end);
            m
        };
        let Some(entry) = cache.touch(&key.key_id) else {
            return Ok(None);
        };
        entry.cursor = cursor;
        let dk = entry.key.clone();
        let state = S::new_state(&dk, first);
        return Ok(Some(Job {
            key_id: key.key_id.clone(),
            cursor,
            batch: Some((first, count)),
            messages,
            key: dk,
            state,
            scheme,
            refresh: false,
        }));
    }
    let messages = read_batch(ctx, cursor, limit).await?;
    if messages.is_empty() {
        return Ok(None);
    }
    let Some(entry) = cache.touch(&key.key_id) else {
        return Ok(None);
    };
    if entry.cursor != cursor {
        entry.state = None;
        entry.cursor = cursor;
    }
    let (dk, open) = (entry.key.clone(), entry.state.take());
    let state = resume(&scheme, ctx, key, &dk, open, cursor).await?;
    Ok(Some(Job {
        key_id: key.key_id.clone(),
        cursor,
        batch: None,
        messages,
        key: dk,
        state,
        scheme,
        refresh: false,
    }))
}

impl<S: DetectionScheme> Job<S> {
    /// Where a batch scheme's job ends (`None` for a scheme that detects message by message).
    pub(super) fn batch_end(&self) -> Option<u64> {
        self.batch.map(|(first, count)| first + count as u64)
    }

    /// The key this job detects for.
    pub(super) fn key_id(&self) -> &str {
        &self.key_id
    }

    /// This job refreshes an online key's open batch.
    pub(super) fn mark_refresh(&mut self) {
        self.refresh = true;
    }
}

/// What a job did: its state, committed (None: the cursor had moved).
pub(super) struct Done<S: DetectionScheme> {
    key_id: String,
    cursor: u64,
    count: usize,
    seconds: f64,
    /// This job's share of the pool's time (`seconds` over the jobs of a group).
    share: f64,
    folded: Option<S::State>,
    refresh: bool,
}

impl<S: DetectionScheme> Job<S> {
    /// Detect and fold on `pool` (the pool of `priority`), then commit state and cursor. Borrows
    /// nothing of the worker, so that the loop can serve online keys while it runs.
    pub(super) async fn run(
        self,
        ctx: Arc<WorkerContext>,
        pool: Arc<rayon::ThreadPool>,
        priority: Priority,
    ) -> anyhow::Result<Done<S>> {
        let Job {
            key_id,
            cursor,
            batch,
            mut messages,
            key,
            state,
            scheme,
            refresh,
        } = self;
        let started = Instant::now();
        let hooks = ctx.hooks.clone();
        let mut held = None;
        // The hook runs once per job, whichever way it detects.
        let mut hooked = false;
        if let (Some((first, count)), true) = (batch, messages.is_empty()) {
            hooked = true;
            let (s, k, h) = (scheme.clone(), key.clone(), hooks.clone());
            held = on_pool(&pool, move || {
                h.before_job(priority);
                S::Walk::detect_prepared(&s, &k, first, count)
            })
            .await?;
            if held.is_none() {
                // Evicted since `prepare` looked: read the batch after all.
                messages = read_batch(&ctx, first, count).await?;
                messages.truncate(count);
            }
        }
        let end = batch.map_or(0, |(first, count)| first + count as u64);
        // Messages detected for the first time (a batch scheme detects the batch's earlier ones
        // again).
        let count = match batch {
            Some(_) => (end - cursor) as usize,
            None => messages.len(),
        };
        let folded = match held {
            Some(state) => state,
            None => {
                on_pool(&pool, move || {
                    if !hooked {
                        hooks.before_job(priority);
                    }
                    scheme.detect_and_fold(&key, state, &messages)
                })
                .await??
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        let committed = commit::<S>(&ctx, &key_id, cursor, &folded).await?;
        Ok(Done {
            key_id,
            cursor,
            count,
            seconds,
            share: seconds,
            folded: committed.then_some(folded),
            refresh,
        })
    }
}

/// After a job: wake who waits for the key, count, and keep its state open in the cache (or,
/// when the cursor had moved, forget the key so that its next batch reloads it).
pub(super) fn finish<S: DetectionScheme>(
    ctx: &WorkerContext,
    cache: &mut KeyCache<S>,
    done: Done<S>,
) -> Outcome {
    let Done {
        key_id,
        cursor,
        count,
        seconds,
        share,
        folded,
        refresh,
    } = done;
    let Some(folded) = folded else {
        // Someone else moved this key (or it was deleted): forget local state.
        tracing::warn!(%key_id, cursor, "cursor moved underneath; reloading");
        cache.remove(&key_id);
        ctx.roster.changed(); // the listed cursor is stale too
        return Outcome::NOTHING;
    };
    let end = S::range(&folded).1;
    ctx.metrics.detections.inc_by(count as u64);
    ctx.metrics.detect_batch_seconds.observe(seconds);
    if refresh {
        ctx.metrics.detection.refresh_seconds.inc_by(share);
    }
    // Counted first: a call this wakes reads metrics that already hold the batch.
    ctx.progress.publish(&key_id, end); // wakes calls waiting for this key
    tracing::debug!(%key_id, count, cursor = end, "batch committed");
    match cache.get_mut(&key_id) {
        Some(entry) => keep_open(ctx, entry, folded),
        // An online key's load evicted it meanwhile: remember where it is now, or the worker
        // would see it behind until its next listing (and load it for nothing).
        None => cache.evicted_at(&key_id, end),
    }
    Outcome { count, seconds }
}

/// The next board index to detect for `key`: its cached cursor, unless the store's is ahead.
fn next_index<S: DetectionScheme>(cache: &KeyCache<S>, key: &ActiveKey) -> u64 {
    match cache.cursor(&key.key_id) {
        Some(c) if c >= key.cursor => c,
        _ => key.cursor,
    }
}

/// The board messages from `cursor` on without a gap: at most `limit`, and none past the end of
/// `cursor`'s epoch.
async fn read_batch(
    ctx: &WorkerContext,
    cursor: u64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    let boundary = ctx.epochs.next_boundary(cursor);
    let limit = (limit as u64).min(boundary - cursor).max(1) as u32;
    let messages = ctx.store.read(cursor, limit).await?;
    Ok(messages
        .into_iter()
        .enumerate()
        .take_while(|(k, m)| m.index == cursor + *k as u64)
        .map(|(_, m)| m)
        .collect())
}

/// The state to continue: the open one, the stored one ending here, or a new epoch's.
async fn resume<S: DetectionScheme>(
    scheme: &S,
    ctx: &WorkerContext,
    key: &ActiveKey,
    dk: &S::Key,
    open: Option<S::State>,
    cursor: u64,
) -> anyhow::Result<S::State> {
    let boundary = ctx.epochs.is_boundary(cursor);
    Ok(match open {
        Some(a) if S::range(&a).1 == cursor && !boundary => a,
        _ if boundary || cursor == key.start_index => S::new_state(dk, cursor),
        _ => match (ctx.store)
            .accumulator_ending_at(&key.key_id, cursor)
            .await?
        {
            Some(row) => scheme.decode_state(&row.data)?,
            None => S::new_state(dk, cursor),
        },
    })
}

/// Commit `folded` and move `key_id`'s cursor to its end, only if the cursor is still at
/// `cursor`; false when it is not.
async fn commit<S: DetectionScheme>(
    ctx: &WorkerContext,
    key_id: &str,
    cursor: u64,
    folded: &S::State,
) -> Result<bool, StoreError> {
    let (start, end) = S::range(folded);
    let row = StoredAccumulator {
        start,
        end,
        data: S::encode_state(folded),
    };
    ctx.store.commit_progress(key_id, cursor, &row).await
}

/// After a commit: the cached cursor moves to `folded`'s end, and `folded` stays open unless
/// it completed its epoch.
fn keep_open<S: DetectionScheme>(ctx: &WorkerContext, entry: &mut CachedKey<S>, folded: S::State) {
    let end = S::range(&folded).1;
    entry.cursor = end;
    entry.state = (!ctx.epochs.is_boundary(end)).then_some(folded);
}
