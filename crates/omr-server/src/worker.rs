//! The detection worker: for every registered key, detect each board message after the key's
//! cursor, in index order, fold it into the key's accumulator for the current epoch, and commit
//! accumulator and cursor together in one transaction (compare-and-set on the cursor), so a
//! crash loses nothing and folds nothing twice. CPU work runs on a bounded rayon pool; the async
//! runtime only waits for it. Keys are served round-robin, one batch each per round, so a key
//! with a long backlog does not starve the others.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use omr_core::{Accumulator, Clue, CompressedDetectionKey, DetectionKey, FoldScratch};
use omr_store::{ActiveKey, StoredAccumulator};
use rayon::prelude::*;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::state::AppState;

struct Cached {
    dk: Arc<DetectionKey>,
    /// The open accumulator (ends at `cursor`), when it is known.
    acc: Option<Accumulator>,
    cursor: u64,
    used: Instant,
}

/// Run on `pool` and wait for the result without blocking the runtime.
async fn on_pool<T: Send + 'static>(
    pool: &rayon::ThreadPool,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = oneshot::channel();
    let span = tracing::Span::current();
    pool.spawn(move || {
        let _e = span.enter();
        let _ = tx.send(f());
    });
    rx.await.expect("rayon job panicked")
}

/// The worker loop; returns when `cancel` fires (after finishing the batch in progress).
pub async fn run(state: Arc<AppState>, cancel: CancellationToken) {
    let threads = match state.config.worker_threads {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n => n,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("omr-detect-{i}"))
        .build()
        .expect("rayon pool");
    tracing::info!(threads, "detection worker started");
    // Other processes' commits arrive as store notifications (PostgreSQL LISTEN/NOTIFY; nothing
    // on SQLite); our own by `board_notify`.
    let listener = {
        let (store, notify, cancel) = (
            state.store.clone(),
            state.board_notify.clone(),
            cancel.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                () = store.board_notifications(move || notify.notify_one()) => {}
                _ = cancel.cancelled() => {}
            }
        })
    };
    let mut cache: HashMap<String, Cached> = HashMap::new();
    let poll = Duration::from_millis(state.config.poll_interval_ms.max(10));
    // With the embedded store there is one process: a fixed name lets a restart after a crash
    // resume at once instead of waiting for its previous leases to expire.
    let owner = state.config.worker_id.clone().unwrap_or_else(|| {
        if state.store.is_embedded() {
            "embedded".to_string()
        } else {
            default_worker_id()
        }
    });
    let lease = Duration::from_secs(state.config.lease_secs.max(1));
    let max_keys = state.config.max_cached_keys.max(1);
    let mut held: Vec<String> = Vec::new();
    tracing::info!(worker_id = %owner, lease_secs = lease.as_secs(), max_keys, "leasing keys");
    while !cancel.is_cancelled() {
        if let Err(e) = renew_leases(&state, &owner, lease, max_keys, &mut held).await {
            tracing::error!(error = %e, "renewing leases failed; retrying");
            tokio::select! { _ = tokio::time::sleep(poll) => continue, _ = cancel.cancelled() => break }
        }
        let mut renewed_at = std::time::Instant::now();
        let keys = match state.store.active_keys().await {
            Ok(k) => {
                // All registered keys (what the fleet must serve), then the ones held here.
                state.metrics.active_keys.set(k.len() as i64);
                k.into_iter()
                    .filter(|k| held.contains(&k.key_id))
                    .collect::<Vec<_>>()
            }
            Err(e) => {
                tracing::error!(error = %e, "listing keys failed; retrying");
                tokio::select! { _ = tokio::time::sleep(poll) => continue, _ = cancel.cancelled() => break }
            }
        };
        cache.retain(|id, _| keys.iter().any(|k| &k.key_id == id));
        let head = state.store.board_head().await.unwrap_or(0);
        let mut progressed = false;
        for key in &keys {
            if cancel.is_cancelled() {
                break;
            }
            // A round can be long (a key load takes ≈ 1.8 s, a batch up to a few seconds):
            // renew before a third of the lease is gone, and skip keys lost meanwhile.
            if renewed_at.elapsed() > lease / 3 {
                match renew_leases(&state, &owner, lease, max_keys, &mut held).await {
                    Ok(()) => renewed_at = std::time::Instant::now(),
                    Err(e) => tracing::error!(error = %e, "renewing leases failed"),
                }
            }
            if !held.contains(&key.key_id) {
                continue;
            }
            let span =
                tracing::info_span!("detect_batch", key_id = %key.key_id, cursor = key.cursor);
            match step(&state, &pool, &mut cache, key).instrument(span).await {
                Ok(n) => progressed |= n > 0,
                Err(e) => {
                    tracing::error!(key_id = %key.key_id, error = %e, "detection step failed")
                }
            }
        }
        let mut max_lag = 0;
        state.metrics.key_lag.reset();
        for key in &keys {
            let cursor = cache
                .get(&key.key_id)
                .map(|c| c.cursor)
                .unwrap_or(key.cursor);
            let lag = head.saturating_sub(cursor.min(head));
            state
                .metrics
                .key_lag
                .with_label_values(&[key.key_id.as_str()])
                .set(lag as i64);
            max_lag = max_lag.max(lag);
        }
        state.metrics.max_lag.set(max_lag as i64);
        if !progressed {
            tokio::select! {
                _ = state.board_notify.notified() => {}
                _ = tokio::time::sleep(poll) => {}
                _ = cancel.cancelled() => break,
            }
        }
    }
    listener.abort();
    if let Err(e) = state.store.release_leases(&owner).await {
        tracing::warn!(error = %e, "releasing leases failed; they expire by themselves");
    }
    tracing::info!("detection worker stopped");
}

fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    format!(
        "{host}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

/// Take or renew up to `max_keys` leases for `owner`; log and count what changed.
async fn renew_leases(
    state: &AppState,
    owner: &str,
    lease: Duration,
    max_keys: usize,
    held: &mut Vec<String>,
) -> Result<(), omr_store::StoreError> {
    let leased = state.store.acquire_leases(owner, lease, max_keys).await?;
    for k in leased.iter().filter(|k| !held.contains(k)) {
        tracing::info!(key_id = %k, worker_id = %owner, "lease acquired");
        state
            .metrics
            .lease_changes
            .with_label_values(&["acquired"])
            .inc();
    }
    for k in held.iter().filter(|k| !leased.contains(k)) {
        tracing::info!(key_id = %k, worker_id = %owner, "lease lost");
        state
            .metrics
            .lease_changes
            .with_label_values(&["released"])
            .inc();
    }
    *held = leased;
    state.metrics.leased_keys.set(held.len() as i64);
    Ok(())
}

/// Detect and commit one batch for `key`; returns how many messages were folded.
async fn step(
    state: &Arc<AppState>,
    pool: &rayon::ThreadPool,
    cache: &mut HashMap<String, Cached>,
    key: &ActiveKey,
) -> anyhow::Result<usize> {
    let params = state.params;
    let epoch = state.config.epoch_len.clamp(1, params.max_range);
    // Cheap check first: anything to do?
    let cursor = match cache.get(&key.key_id) {
        Some(c) if c.cursor >= key.cursor => c.cursor,
        _ => key.cursor,
    };
    let boundary = (cursor / epoch + 1) * epoch;
    let limit = (state.config.detect_batch as u64)
        .min(boundary - cursor)
        .max(1) as u32;
    let messages = state.store.read(cursor, limit).await?;
    let messages: Vec<_> = messages
        .into_iter()
        .enumerate()
        .take_while(|(k, m)| m.index == cursor + *k as u64)
        .map(|(_, m)| m)
        .collect();
    if messages.is_empty() {
        return Ok(0);
    }

    if !cache.contains_key(&key.key_id) {
        if cache.len() >= state.config.max_cached_keys.max(1) {
            if let Some(old) = cache
                .iter()
                .min_by_key(|(_, c)| c.used)
                .map(|(k, _)| k.clone())
            {
                cache.remove(&old);
            }
        }
        let bytes = state
            .store
            .key_bytes(&key.key_id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("key {} has no stored bytes", key.key_id))?;
        let started = Instant::now();
        let dk = on_pool(pool, move || {
            CompressedDetectionKey::from_bytes(&bytes).map(|k| k.expand())
        })
        .await?;
        tracing::info!(key_id = %key.key_id, ms = started.elapsed().as_millis() as u64, memory_bytes = dk.memory_bytes(), "detection key expanded");
        cache.insert(
            key.key_id.clone(),
            Cached {
                dk: Arc::new(dk),
                acc: None,
                cursor: key.cursor,
                used: Instant::now(),
            },
        );
    }
    let entry = cache.get_mut(&key.key_id).expect("inserted above");
    entry.used = Instant::now();
    if entry.cursor != cursor {
        entry.acc = None;
        entry.cursor = cursor;
    }
    // The accumulator to continue: the open one, the stored one ending here, or a new epoch.
    let acc = match entry.acc.take() {
        Some(a) if a.end() == cursor && cursor % epoch != 0 => a,
        _ if cursor % epoch == 0 || cursor == key.start_index => entry.dk.new_accumulator(cursor),
        _ => match state
            .store
            .accumulator_ending_at(&key.key_id, cursor)
            .await?
        {
            Some(row) => Accumulator::from_bytes(&row.data)?,
            None => entry.dk.new_accumulator(cursor),
        },
    };
    let dk = entry.dk.clone();
    let count = messages.len();
    let started = Instant::now();
    let folded = on_pool(pool, move || -> anyhow::Result<Accumulator> {
        let mut acc = acc;
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
        let pvs: Vec<_> = parts.into_iter().flatten().collect();
        let mut scratch = FoldScratch::default();
        for (m, pv) in messages.iter().zip(&pvs) {
            dk.fold(&mut acc, m.index, pv, &m.payload, &mut scratch)?;
        }
        Ok(acc)
    })
    .await?;
    let detect_seconds = started.elapsed().as_secs_f64();
    let row = StoredAccumulator {
        start: folded.start(),
        end: folded.end(),
        data: folded.to_bytes(),
    };
    if !state
        .store
        .commit_progress(&key.key_id, cursor, &row)
        .await?
    {
        // Someone else moved this key (or it was deleted): forget local state.
        tracing::warn!(key_id = %key.key_id, cursor, "cursor moved underneath; reloading");
        cache.remove(&key.key_id);
        return Ok(0);
    }
    state.metrics.detections.inc_by(count as u64);
    state.metrics.detect_batch_seconds.observe(detect_seconds);
    let entry = cache.get_mut(&key.key_id).expect("present");
    entry.cursor = folded.end();
    entry.acc = if folded.end() % epoch == 0 {
        None
    } else {
        Some(folded)
    };
    tracing::debug!(key_id = %key.key_id, count, cursor = entry.cursor, "batch committed");
    Ok(count)
}

/// Apply the configured retention every `retention_interval_secs`, in small batches.
pub async fn retention(state: Arc<AppState>, cancel: CancellationToken) {
    if state.config.retain_messages.is_none() && state.config.retain_digest_messages.is_none() {
        return;
    }
    let every = Duration::from_secs(state.config.retention_interval_secs.max(1));
    loop {
        tokio::select! { _ = tokio::time::sleep(every) => {}, _ = cancel.cancelled() => return }
        let head = match state.store.board_head().await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, "retention: reading the board head failed");
                continue;
            }
        };
        let keep_from = state
            .config
            .retain_messages
            .map(|n| head.saturating_sub(n))
            .unwrap_or(0);
        let acc_before = state
            .config
            .retain_digest_messages
            .map(|n| head.saturating_sub(n))
            .unwrap_or(0);
        let (mut messages, mut epochs) = (0, 0);
        loop {
            match state
                .store
                .apply_retention(keep_from, acc_before, 1000)
                .await
            {
                Ok((0, 0)) => break,
                Ok((m, e)) => {
                    messages += m;
                    epochs += e;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "retention pass failed");
                    break;
                }
            }
            if cancel.is_cancelled() {
                return;
            }
        }
        if messages + epochs > 0 {
            tracing::info!(messages, epochs, "retention applied");
        }
    }
}
