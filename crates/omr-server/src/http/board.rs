//! The public board: `POST /v1/messages`, `POST /v1/messages/batch` (answered only after the
//! group commit) and `GET /v1/messages`, with the acceptance and rejection metrics.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_api::http::{
    BatchIn, BatchPosted, BoardMessage, BoardPage, ErrorBody, MessageIn, Posted, ReadQuery,
};
use omr_api::ErrorCode;
use omr_store::{NewMessage, StoredMessage};

use super::body::{self, body_kind, read_body, SINGLE_BODY_LIMIT};
use crate::admission::Limit;
use crate::error::ServiceError;
use crate::ingest::IngestError;
use crate::state::AppState;

/// Most board messages one GET returns.
const MAX_READ: u32 = 1000;

/// Post one message. Answers only after the message is durably committed.
#[utoipa::path(
    post, path = "/v1/messages",
    request_body(content = MessageIn, description = "JSON, or application/octet-stream with the omr-core Message encoding"),
    responses(
        (status = 201, body = Posted, description = "Committed"),
        (status = 400, body = ErrorBody, description = "Malformed clue, payload or JSON; wrong parameter set"),
        (status = 402, body = ErrorBody, description = "Postage is on (`postage_bits` > 0) and the message has no stamp (`postage_required`) or one that falls short (`postage_invalid`): nothing stored"),
        (status = 413, body = ErrorBody, description = "Body, payload or attachment too large (`attachment_too_large`: over max_attachment_bytes): nothing stored"),
        (status = 415, body = ErrorBody, description = "Unsupported Content-Type"),
        (status = 429, body = ErrorBody, description = "This client's rate limit: nothing stored; retry after Retry-After seconds"),
    )
)]
pub(super) async fn post_message(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let kind = body_kind(&headers)?;
        let rules = body::Rules::of(&state);
        let bytes = read_body(&headers, body, rules.single_body_limit()).await?;
        let message = body::message(rules, kind, &bytes)?;
        // Checked once the message is known good, so that a refused one takes no token.
        let client = state.admission.http_client(peer, &headers);
        state
            .admission
            .check(Limit::Messages, "/v1/messages", client, 1)?;
        commit(&state, vec![message], "single").await
    }
    .await;
    match result {
        Ok(index) => (StatusCode::CREATED, Json(Posted { index })).into_response(),
        Err(e) => reject(&state, e).into_response(),
    }
}

/// Post several messages in one transaction (all or nothing). The binary form is a sequence of
/// (u32 little-endian length, Message encoding). Every message is checked (its postage too)
/// before any is queued: one bad message refuses the whole batch, naming its position.
#[utoipa::path(
    post, path = "/v1/messages/batch",
    request_body(content = BatchIn),
    responses(
        (status = 201, body = BatchPosted, description = "All committed, in request order"),
        (status = 400, body = ErrorBody, description = "A message is malformed: nothing stored"),
        (status = 402, body = ErrorBody, description = "A message has no stamp or a short one while postage is on: nothing stored"),
        (status = 413, body = ErrorBody, description = "Too many messages (max_batch_messages, or more than this client's rate_limit_burst) or too large"),
        (status = 415, body = ErrorBody, description = "Unsupported Content-Type"),
        (status = 429, body = ErrorBody, description = "This client's rate limit (a batch costs its message count): nothing stored; retry after Retry-After seconds"),
    )
)]
pub(super) async fn post_batch(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let kind = body_kind(&headers)?;
        let max = state.config.max_batch_messages;
        let bytes = read_body(&headers, body, max * SINGLE_BODY_LIMIT).await?;
        let messages = body::batch(body::Rules::of(&state), kind, &bytes, max)?;
        if messages.is_empty() {
            return Err(ServiceError::new(
                ErrorCode::EmptyBatch,
                "the batch holds no messages",
            ));
        }
        // A batch costs its message count, checked once it is known (decoded, not stored).
        let client = state.admission.http_client(peer, &headers);
        let cost = u32::try_from(messages.len()).unwrap_or(u32::MAX);
        state
            .admission
            .check(Limit::Messages, "/v1/messages/batch", client, cost)?;
        let count = messages.len() as u64;
        let first = commit(&state, messages, "batch").await?;
        Ok((first, count))
    }
    .await;
    match result {
        Ok((first_index, count)) => (
            StatusCode::CREATED,
            Json(BatchPosted { first_index, count }),
        )
            .into_response(),
        Err(e) => reject(&state, e).into_response(),
    }
}

/// Read the public board.
#[utoipa::path(
    get, path = "/v1/messages", params(ReadQuery),
    responses(
        (status = 200, body = BoardPage),
        (status = 400, body = ErrorBody),
        (status = 429, body = ErrorBody, description = "This client's read rate limit; retry after Retry-After seconds"),
    )
)]
pub(super) async fn get_messages(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    query: Result<Query<ReadQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<BoardPage>, ServiceError> {
    let client = state.admission.http_client(peer, &headers);
    state
        .admission
        .check(Limit::BoardReads, "/v1/messages", client, 1)?;
    let Query(q) =
        query.map_err(|e| ServiceError::new(ErrorCode::MalformedQuery, e.body_text()))?;
    let from = q.from.unwrap_or(0);
    let limit = q.limit.unwrap_or(MAX_READ);
    if limit == 0 || limit > MAX_READ {
        return Err(ServiceError::new(
            ErrorCode::MalformedQuery,
            format!("limit must be 1..={MAX_READ}"),
        ));
    }
    let head = state
        .store
        .board_head()
        .await
        .map_err(|e| ServiceError::internal("reading the board head", e))?;
    let rows = state
        .store
        .read(from, limit)
        .await
        .map_err(|e| ServiceError::internal("reading the board", e))?;
    let next = rows.last().map(|m| m.index + 1).unwrap_or(from);
    Ok(Json(BoardPage {
        messages: rows.into_iter().map(board_message).collect(),
        next,
        head,
    }))
}

fn board_message(m: StoredMessage) -> BoardMessage {
    BoardMessage {
        index: m.index,
        clue: B64.encode(&m.clue),
        payload: B64.encode(&m.payload),
        received_ms: m.received_ms,
    }
}

/// Queue `messages` for the group commit and count them once committed; the first index.
async fn commit(
    state: &AppState,
    messages: Vec<NewMessage>,
    route: &str,
) -> Result<u64, ServiceError> {
    let count = messages.len() as u64;
    let bytes: usize = messages
        .iter()
        .map(|m| m.clue.len() + m.payload.len())
        .sum();
    let first = state.ingestor.submit(messages).await.map_err(|e| match e {
        IngestError::Closed => ServiceError::new(
            ErrorCode::Unavailable,
            "the server is shutting down; nothing was stored, retry",
        ),
        IngestError::Store(e) => ServiceError::internal("appending to the board", e),
    })?;
    state
        .metrics
        .messages_accepted
        .with_label_values(&[route])
        .inc_by(count);
    state.metrics.message_bytes.inc_by(bytes as u64);
    Ok(first)
}

/// Count a refused message by its error code.
fn reject(state: &AppState, err: ServiceError) -> ServiceError {
    state
        .metrics
        .messages_rejected
        .with_label_values(&[err.code.as_str()])
        .inc();
    err
}
