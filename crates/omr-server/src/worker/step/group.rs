//! Several keys' jobs at once: [`prepare_group`] prepares the next job of each (a batch read once,
//! by the first), [`run_group`] runs them on one pool, a batch's jobs in one pass over its shared
//! work. Each job is the parent's `Job`, committed on its own as `Job::run` commits.

use std::sync::Arc;
use std::time::Instant;

use omr_store::ActiveKey;

use super::super::cache::KeyCache;
use super::super::pool::{on_pool, Priority};
use super::super::WorkerContext;
use super::{commit, prepare_reading, read_batch, Done, Job};
use crate::scheme::{DetectionScheme, Walk};

/// The next batch of each of `keys` (as [`prepare`]; keys with nothing to detect or not in
/// memory are left out). A batch scheme's batch is read once, by the first job.
pub(in crate::worker) async fn prepare_group<S: DetectionScheme>(
    ctx: &WorkerContext,
    cache: &mut KeyCache<S>,
    keys: &[ActiveKey],
    limit: usize,
    reach: u64,
) -> anyhow::Result<Vec<Job<S>>> {
    let mut jobs: Vec<Job<S>> = Vec::with_capacity(keys.len());
    // A batch scheme's keys (offline) see one batch: their reach, with no store read.
    for key in keys {
        let read = jobs.is_empty();
        if let Some(job) = prepare_reading(ctx, cache, key, limit, reach, read).await? {
            jobs.push(job);
        }
    }
    Ok(jobs)
}

/// Several keys' jobs at once on `pool`, so that keys whose work alone cannot fill the pool
/// share it: a batch scheme's jobs of one batch in one pass over its shared work
/// ([`Walk::detect_many`]), other jobs side by side. Each key commits on its own
/// (compare-and-set on its cursor), so a crash in the middle leaves every key either committed
/// or where it was. One result per job, in order.
pub(in crate::worker) async fn run_group<S: DetectionScheme>(
    mut jobs: Vec<Job<S>>,
    ctx: Arc<WorkerContext>,
    pool: Arc<rayon::ThreadPool>,
    priority: Priority,
) -> anyhow::Result<Vec<anyhow::Result<Done<S>>>> {
    let one_batch = jobs.first().and_then(|j| j.batch);
    if one_batch.is_none() || jobs.iter().any(|j| j.batch != one_batch) {
        let runs = jobs
            .into_iter()
            .map(|j| j.run(ctx.clone(), pool.clone(), priority));
        return Ok(futures::future::join_all(runs).await);
    }
    let (first, count) = one_batch.expect("a batch");
    let started = Instant::now();
    let mut messages = jobs
        .iter_mut()
        .map(|j| std::mem::take(&mut j.messages))
        .find(|m| !m.is_empty())
        .unwrap_or_default();
    let mut states = None;
    for attempt in 0..2 {
        if attempt == 1 {
            // The preparation was evicted since `prepare` looked: read the batch after all.
            messages = read_batch(&ctx, first, count).await?;
            messages.truncate(count);
        }
        let (scheme, keys, hooks) = (jobs[0].scheme.clone(), keys_of(&jobs), ctx.hooks.clone());
        let batch = std::mem::take(&mut messages);
        let (held, batch) = on_pool(&pool, move || {
            hooks.before_job(priority);
            let refs: Vec<&S::Key> = keys.iter().map(|k| k.as_ref()).collect();
            (
                S::Walk::detect_many(&scheme, &refs, first, count, &batch),
                batch,
            )
        })
        .await?;
        messages = batch;
        states = held?;
        if states.is_some() {
            break;
        }
    }
    let states = states.ok_or_else(|| anyhow::anyhow!("batch at {first} was not prepared"))?;
    let seconds = started.elapsed().as_secs_f64();
    let share = seconds / jobs.len() as f64;
    let end = first + count as u64;
    let mut done = Vec::with_capacity(jobs.len());
    for (job, folded) in jobs.into_iter().zip(states) {
        let committed = commit::<S>(&ctx, &job.key_id, job.cursor, &folded).await;
        done.push(committed.map_err(Into::into).map(|committed| Done {
            count: (end - job.cursor) as usize,
            key_id: job.key_id,
            cursor: job.cursor,
            seconds,
            share,
            folded: committed.then_some(folded),
            refresh: job.refresh,
        }));
    }
    Ok(done)
}

fn keys_of<S: DetectionScheme>(jobs: &[Job<S>]) -> Vec<Arc<S::Key>> {
    jobs.iter().map(|j| j.key.clone()).collect()
}
