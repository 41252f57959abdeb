//! Where detection stands for a key, and waiting for it to move. [`key_status`] builds the one
//! status every API answers (HTTP `GET /v1/keys/{key_id}/status`, gRPC `GetKeyStatus` and
//! `WatchKeyStatus`); [`wait_past`] waits until a key's cursor passes an index (woken by the
//! worker's commits through `progress`, re-reading the store every `poll_interval_ms` as a
//! safety net) and keeps the key's recipient online meanwhile; [`watch`] is the stream of
//! statuses `WatchKeyStatus` sends.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use futures::Stream;
use omr_api::http::{ErrorBody, KeyStatus, StatusQuery, DEFAULT_WAIT_SECS, MAX_WAIT_SECS};
use omr_api::ErrorCode;

use crate::error::ServiceError;
use crate::metrics::Metrics;
use crate::state::AppState;

/// The key's status now: its registration, cursor, the board head and its lag.
pub async fn key_status(state: &AppState, key_id: &str) -> Result<KeyStatus, ServiceError> {
    let meta = state
        .store
        .key(key_id)
        .await
        .map_err(|e| ServiceError::internal("loading a key", e))?
        .ok_or_else(|| ServiceError::unknown_key(key_id))?;
    let head = state
        .store
        .board_head()
        .await
        .map_err(|e| ServiceError::internal("reading the board head", e))?;
    let (detection, eta_secs) = crate::key_state::key_state(state, key_id, meta.cursor, head)
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
    })
}

/// Where detection stands for a key; with `wait_past`, a long-poll: the answer comes as soon as
/// the key's cursor is past `wait_past` (a message after it was detected), or after
/// `timeout_secs` (default 30, at most 60) with the status as it is then.
#[utoipa::path(
    get, path = "/v1/keys/{key_id}/status", params(("key_id" = String, Path), StatusQuery),
    responses(
        (status = 200, body = KeyStatus),
        (status = 400, body = ErrorBody, description = "Malformed query"),
        (status = 401, body = ErrorBody, description = "No Bearer token"),
        (status = 403, body = ErrorBody, description = "Wrong token"),
        (status = 404, body = ErrorBody, description = "Unknown key"),
    )
)]
pub async fn get_key_status(
    State(state): State<Arc<AppState>>,
    Path(key_id): Path<String>,
    query: Result<Query<StatusQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Result<Json<KeyStatus>, ServiceError> {
    let Query(q) =
        query.map_err(|e| ServiceError::new(ErrorCode::MalformedQuery, e.body_text()))?;
    crate::auth::authorize_http(&state.store, &key_id, &headers).await?;
    state.presence.seen(&state.store, &key_id);
    if let Some(past) = q.wait_past {
        let secs = q
            .timeout_secs
            .unwrap_or(DEFAULT_WAIT_SECS)
            .min(MAX_WAIT_SECS);
        wait_past(&state, &key_id, past, Duration::from_secs(secs)).await?;
    }
    Ok(Json(key_status(&state, &key_id).await?))
}

/// Wait until `key_id`'s cursor is greater than `past`, `timeout` has passed, or the server
/// is stopping, whichever comes first (at once if the cursor already is past). Marks the key's
/// recipient online while it waits. An unknown (or meanwhile deleted) key is an error.
pub async fn wait_past(
    state: &AppState,
    key_id: &str,
    past: u64,
    timeout: Duration,
) -> Result<(), ServiceError> {
    let deadline = tokio::time::Instant::now() + timeout;
    // Subscribe before reading the store: a commit in between is seen by one or the other.
    let mut published = state.progress.subscribe(key_id);
    let _waiting = Waiting::new(&state.metrics);
    let poll = Duration::from_millis(state.config.poll_interval_ms.max(10));
    let tick = poll.min(state.presence.every());
    loop {
        if *published.borrow_and_update() > past {
            return Ok(());
        }
        let cursor = state
            .store
            .cursor(key_id)
            .await
            .map_err(|e| ServiceError::internal("reading a key's cursor", e))?
            .ok_or_else(|| ServiceError::unknown_key(key_id))?;
        let now = tokio::time::Instant::now();
        if cursor > past || now >= deadline || state.progress.is_stopped() {
            return Ok(());
        }
        state.presence.seen(&state.store, key_id);
        tokio::select! {
            Ok(()) = published.changed() => {}
            () = tokio::time::sleep(tick) => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = state.progress.stopped() => {}
        }
    }
}

/// The statuses `WatchKeyStatus` sends for an authorized `key_id`: the status now, then the
/// status each time the cursor has moved, until the stream is dropped (the client went away)
/// or the key is deleted (`unknown_key`). At shutdown it ends with `unavailable`.
pub fn watch(
    state: Arc<AppState>,
    key_id: String,
) -> impl Stream<Item = Result<KeyStatus, ServiceError>> + Send + 'static {
    // The state of the stream: the cursor last sent (`None` before the first), or done.
    futures::stream::unfold(Some(None), move |sent: Option<Option<u64>>| {
        let (state, key_id) = (state.clone(), key_id.clone());
        async move {
            let last = sent?;
            match next_status(&state, &key_id, last).await {
                Ok(s) => {
                    let cursor = s.cursor;
                    Some((Ok(s), Some(Some(cursor))))
                }
                Err(e) => Some((Err(e), None)),
            }
        }
    })
}

/// The status to send after one whose cursor was `last` (`None`: the first, at once).
async fn next_status(
    state: &AppState,
    key_id: &str,
    last: Option<u64>,
) -> Result<KeyStatus, ServiceError> {
    let Some(last) = last else {
        return key_status(state, key_id).await;
    };
    loop {
        wait_past(state, key_id, last, Duration::from_secs(MAX_WAIT_SECS)).await?;
        if state.progress.is_stopped() {
            return Err(ServiceError::new(
                ErrorCode::Unavailable,
                "the server is shutting down; watch again",
            ));
        }
        let status = key_status(state, key_id).await?;
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
