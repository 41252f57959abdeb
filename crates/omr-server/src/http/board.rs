//! The public board: `POST /v1/messages`, `POST /v1/messages/batch` (answered only after the
//! group commit) and `GET /v1/messages`, with the acceptance and rejection metrics.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use omr_api::http::{BatchIn, BatchPosted, BoardPage, ErrorBody, MessageIn, Posted, ReadQuery};
use omr_api::ErrorCode;

use super::body::{self, body_kind, read_body, SINGLE_BODY_LIMIT};
use super::{error::malformed_query, HttpState};
use crate::admission::Limit;
use crate::error::ServiceError;
use crate::service::board;

/// Post one message. Answers only after the message is durably committed.
#[utoipa::path(
    post, tag = "board", path = "/v1/messages",
    request_body(
        description = "JSON, or application/octet-stream with the omr-core Message encoding",
        content((MessageIn = "application/json"), ("application/octet-stream"))
    ),
    responses(
        (status = 201, body = Posted, description = "Committed"),
        (status = 400, body = ErrorBody, description = "Malformed clue, payload or JSON; wrong parameter set"),
        (status = 402, body = ErrorBody, description = "Postage is on (`postage_bits` > 0) and the message has no stamp (`postage_required`) or one that falls short (`postage_invalid`): nothing stored"),
        (status = 409, body = ErrorBody, description = "`duplicate_message`: the same clue, payload and attachment are already on the board; `index` is the index they have (a retry after a lost answer: posted there). Nothing appended"),
        (status = 413, body = ErrorBody, description = "Body, payload or attachment too large (`attachment_too_large`: over max_attachment_bytes): nothing stored"),
        (status = 415, body = ErrorBody, description = "Unsupported Content-Type"),
        (status = 429, body = ErrorBody, description = "This client's rate limit: nothing stored; retry after Retry-After seconds"),
    )
)]
pub(super) async fn post_message(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let kind = body_kind(&headers)?;
        let rules = body::Rules::of(&state);
        let bytes = read_body(&headers, body, body::single_body_limit(&rules)).await?;
        let message = body::message(rules, kind, &bytes)?;
        // Checked once the message is known good, so that a refused one takes no token.
        state.admit(Limit::Messages, "/v1/messages", peer, &headers, 1)?;
        board::post(&state.service, vec![message], "single").await
    }
    .await;
    match result {
        Ok(index) => (StatusCode::CREATED, Json(Posted { index })).into_response(),
        Err(e) => board::rejected(&state.service, e).into_response(),
    }
}

/// Post several messages in one transaction (all or nothing). The binary form is a sequence of
/// (u32 little-endian length, Message encoding). Every message is checked (its postage too)
/// before any is queued: one bad message refuses the whole batch, naming its position.
#[utoipa::path(
    post, tag = "board", path = "/v1/messages/batch",
    request_body(
        description = "JSON, or application/octet-stream: a sequence of (u32 little-endian length, omr-core Message encoding)",
        content((BatchIn = "application/json"), ("application/octet-stream"))
    ),
    responses(
        (status = 201, body = BatchPosted, description = "All committed, in request order"),
        (status = 400, body = ErrorBody, description = "A message is malformed: nothing stored"),
        (status = 402, body = ErrorBody, description = "A message has no stamp or a short one while postage is on: nothing stored"),
        (status = 409, body = ErrorBody, description = "`duplicate_message`: a message is already on the board (`index` is its index) or appears twice in the batch (no `index`); the message names its position. Nothing stored"),
        (status = 413, body = ErrorBody, description = "Too many messages (max_batch_messages, or more than this client's rate_limit_burst) or too large"),
        (status = 415, body = ErrorBody, description = "Unsupported Content-Type"),
        (status = 429, body = ErrorBody, description = "This client's rate limit (a batch costs its message count): nothing stored; retry after Retry-After seconds"),
    )
)]
pub(super) async fn post_batch(
    State(state): State<Arc<HttpState>>,
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
        let cost = u32::try_from(messages.len()).unwrap_or(u32::MAX);
        state.admit(Limit::Messages, "/v1/messages/batch", peer, &headers, cost)?;
        let count = messages.len() as u64;
        let first = board::post(&state.service, messages, "batch").await?;
        Ok((first, count))
    }
    .await;
    match result {
        Ok((first_index, count)) => (
            StatusCode::CREATED,
            Json(BatchPosted { first_index, count }),
        )
            .into_response(),
        Err(e) => board::rejected(&state.service, e).into_response(),
    }
}

/// Read the public board.
#[utoipa::path(
    get, tag = "board", path = "/v1/messages", params(ReadQuery),
    responses(
        (status = 200, body = BoardPage),
        (status = 400, body = ErrorBody),
        (status = 429, body = ErrorBody, description = "This client's read rate limit; retry after Retry-After seconds"),
    )
)]
pub(super) async fn get_messages(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    query: Result<Query<ReadQuery>, QueryRejection>,
) -> Result<Json<BoardPage>, ServiceError> {
    let Query(q) = query.map_err(malformed_query)?;
    let page = board::Page::new(q.from, q.limit, q.attachments)?;
    // Charged once the query is known good: a refused read takes no token.
    state.admit(Limit::BoardReads, "/v1/messages", peer, &headers, 1)?;
    Ok(Json(board::read(&state.service, page).await?))
}
