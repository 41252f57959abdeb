//! Retention: every `retention_interval_secs`, delete board messages and accumulators older than
//! the configured windows, and the attachments of whole epochs whose digests are gone, in small
//! batches.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::WorkerContext;
use crate::config::Config;

/// Messages and accumulators one retention pass deletes at most.
const RETENTION_BATCH: u32 = 1000;

/// Apply the configured retention every `retention_interval_secs`, in small batches.
pub async fn retention(state: Arc<WorkerContext>, cancel: CancellationToken) {
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
        let (keep_from, acc_before) = retention_bounds(&state.config, head);
        let Some((messages, epochs)) =
            apply_in_batches(&state, &cancel, keep_from, acc_before).await
        else {
            return;
        };
        let attachments = delete_attachments(&state, head).await;
        if messages + epochs + attachments > 0 {
            tracing::info!(messages, epochs, attachments, "retention applied");
        }
    }
}

/// Delete, in batches, the attachments of the epochs that end before the digests kept (a
/// recipient that cannot get a digest cannot learn an index to fetch); how many went.
async fn delete_attachments(state: &WorkerContext, head: u64) -> u64 {
    let len = state.epochs.size();
    let before = (state.epochs).retired_below(state.config.retain_digest_messages, head);
    let mut deleted = 0;
    if before == 0 {
        return 0;
    }
    loop {
        match (state.store)
            .delete_attachments_before(before, len, RETENTION_BATCH)
            .await
        {
            Ok(0) => break,
            Ok(n) => deleted += n,
            Err(e) => {
                tracing::warn!(error = %e, "retention: deleting attachments failed");
                break;
            }
        }
    }
    deleted
}

/// (keep messages from, delete accumulators ending at or before) for board head `head`.
fn retention_bounds(config: &Config, head: u64) -> (u64, u64) {
    let keep_from = config
        .retain_messages
        .map(|n| head.saturating_sub(n))
        .unwrap_or(0);
    let acc_before = config
        .retain_digest_messages
        .map(|n| head.saturating_sub(n))
        .unwrap_or(0);
    (keep_from, acc_before)
}

/// Delete in batches until nothing is left or a pass fails (logged); (messages, epochs)
/// deleted, or `None` when `cancel` fired between passes.
async fn apply_in_batches(
    state: &WorkerContext,
    cancel: &CancellationToken,
    keep_from: u64,
    acc_before: u64,
) -> Option<(u64, u64)> {
    let (mut messages, mut epochs) = (0, 0);
    loop {
        match state
            .store
            .apply_retention(keep_from, acc_before, RETENTION_BATCH)
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
            return None;
        }
    }
    Some((messages, epochs))
}
