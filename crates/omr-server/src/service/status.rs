//! Where detection stands for a key, and waiting for it to move. [`key_status`] builds the one
//! status every API answers (HTTP `GET /v1/keys/{key_id}/status`, gRPC `GetKeyStatus` and
//! `WatchKeyStatus`); [`wait_past`] waits until a key's cursor passes an index (woken by the
//! worker's commits through `progress`, re-reading the store every `poll_interval_ms` as a
//! safety net) and keeps the key's recipient online meanwhile; [`watch`] is the stream of
//! statuses `WatchKeyStatus` sends.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use omr_api::http::{KeyStatus, MAX_WAIT_SECS};
use omr_api::ErrorCode;

use super::Service;
use crate::error::ServiceError;
use crate::metrics::Metrics;

/// The key's status now: its registration, cursor, the board head and its lag.
pub async fn key_status(svc: &Service, key_id: &str) -> Result<KeyStatus, ServiceError> {
    let meta = svc
        .store
        .key(key_id)
        .await
        .map_err(|e| ServiceError::internal("loading a key", e))?
        .ok_or_else(|| ServiceError::unknown_key(key_id))?;
    let head = svc
        .store
        .board_head()
        .await
        .map_err(|e| ServiceError::internal("reading the board head", e))?;
    let (detection, eta_secs) = super::key_state::key_state(svc, key_id, meta.cursor, head)
        .await
        .map_err(|e| ServiceError::internal("reading the key's schedule", e))?;
    Ok(KeyStatus {
        key_id: meta.key_id,
        param_set: meta.param_set,
        kbar: meta.kbar,
        start_index: meta.start_index,
        cursor: meta.cursor,
        board_head: head,
        lag: head.saturating_sub(meta.cursor),
        key_bytes: meta.key_bytes,
        registered_at: rfc3339_ms(meta.registered_ms),
        state: detection.as_str().to_string(),
        eta_secs,
        refresh_at: svc.refresh_at(meta.cursor),
    })
}

/// The status of `key_id` for a caller presenting `authorization` (its recipient, who is now
/// online); with `wait`, a long-poll: answered as soon as the key's cursor is past `wait.0` (a
/// message after it was detected), or after `wait.1` with the status as it is then.
pub async fn get(
    svc: &Service,
    key_id: &str,
    authorization: Option<&str>,
    wait: Option<(u64, Duration)>,
) -> Result<KeyStatus, ServiceError> {
    super::auth::authorize(&svc.store, key_id, authorization).await?;
    if let Some((past, timeout)) = wait {
        wait_past(svc, key_id, past, timeout).await?;
    }
    let status = key_status(svc, key_id).await;
    let asks = |s: &KeyStatus| svc.asks_at(s.cursor, s.board_head);
    svc.mark_seen(key_id, status.as_ref().is_ok_and(asks));
    status
}

/// Wait until `key_id`'s cursor is greater than `past`, `timeout` has passed, or the server
/// is stopping, whichever comes first (at once if the cursor already is past). Marks the key's
/// recipient online while it waits. An unknown (or meanwhile deleted) key is an error.
pub async fn wait_past(
    svc: &Service,
    key_id: &str,
    past: u64,
    timeout: Duration,
) -> Result<(), ServiceError> {
    let deadline = tokio::time::Instant::now() + timeout;
    // Subscribe before reading the store: a commit in between is seen by one or the other.
    let mut published = svc.progress.subscribe(key_id);
    let _waiting = Waiting::new(&svc.metrics);
    let poll = Duration::from_millis(svc.config.poll_interval_ms.max(10));
    // A waiting recipient asks for the messages past `past` (`Service::mark_seen`).
    let tick = poll.min(svc.mark_every(true));
    loop {
        if *published.borrow_and_update() > past {
            return Ok(());
        }
        let cursor = svc
            .store
            .cursor(key_id)
            .await
            .map_err(|e| ServiceError::internal("reading a key's cursor", e))?
            .ok_or_else(|| ServiceError::unknown_key(key_id))?;
        let now = tokio::time::Instant::now();
        if cursor > past || now >= deadline || svc.progress.is_stopped() {
            return Ok(());
        }
        svc.mark_seen(key_id, true);
        tokio::select! {
            Ok(()) = published.changed() => {}
            () = tokio::time::sleep(tick) => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = svc.progress.stopped() => {}
        }
    }
}

/// The statuses `WatchKeyStatus` sends for an authorized `key_id`: the status now, then the
/// status each time the cursor has moved, until the stream is dropped (the client went away)
/// or the key is deleted (`unknown_key`). At shutdown it ends with `unavailable`.
pub fn watch(
    svc: Arc<Service>,
    key_id: String,
) -> impl Stream<Item = Result<KeyStatus, ServiceError>> + Send + 'static {
    // The state of the stream: the cursor last sent (`None` before the first), or done.
    futures::stream::unfold(Some(None), move |sent: Option<Option<u64>>| {
        let (svc, key_id) = (svc.clone(), key_id.clone());
        async move {
            let last = sent?;
            match next_status(&svc, &key_id, last).await {
                Ok(s) => {
                    let cursor = s.cursor;
                    Some((Ok(s), Some(Some(cursor))))
                }
                Err(e) => Some((Err(e), None)),
            }
        }
    })
}

/// [`watch`] for a caller presenting `authorization` (its recipient, now online), checked
/// before the stream starts.
pub async fn watch_authorized(
    svc: &Arc<Service>,
    key_id: String,
    authorization: Option<&str>,
) -> Result<impl Stream<Item = Result<KeyStatus, ServiceError>> + Send + 'static, ServiceError> {
    super::auth::authorize(&svc.store, &key_id, authorization).await?;
    svc.presence.seen(&svc.store, &key_id);
    Ok(watch(svc.clone(), key_id))
}

/// The status to send after one whose cursor was `last` (`None`: the first, at once).
async fn next_status(
    svc: &Service,
    key_id: &str,
    last: Option<u64>,
) -> Result<KeyStatus, ServiceError> {
    let Some(last) = last else {
        return key_status(svc, key_id).await;
    };
    loop {
        wait_past(svc, key_id, last, Duration::from_secs(MAX_WAIT_SECS)).await?;
        if svc.progress.is_stopped() {
            return Err(ServiceError::new(
                ErrorCode::Unavailable,
                "the server is shutting down; watch again",
            ));
        }
        let status = key_status(svc, key_id).await?;
        if status.cursor > last {
            return Ok(status);
        }
    }
}

/// One call waiting, counted in `omr_key_waiters` while it lives.
struct Waiting<'a>(&'a Metrics);

impl<'a> Waiting<'a> {
    fn new(metrics: &'a Metrics) -> Self {
        metrics.key_waiters.inc();
        Waiting(metrics)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.key_waiters.dec();
    }
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
fn rfc3339_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| format!("{ms} ms since the Unix epoch"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(super::rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::rfc3339_ms(1_795_314_600_123),
            "2026-11-22T02:30:00.123Z"
        );
    }
}
