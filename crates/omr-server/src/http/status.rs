//! `GET /v1/keys/{key_id}/status`, with its long-poll (`?wait_past=`): `service::status`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use omr_api::http::{ErrorBody, KeyStatus, StatusQuery, DEFAULT_WAIT_SECS, MAX_WAIT_SECS};

use super::{authorization, error::malformed_query, HttpState};
use crate::error::ServiceError;

/// Where detection stands for a key; with `wait_past`, a long-poll: the answer comes as soon as
/// the key's cursor is past `wait_past` (a message after it was detected), or after
/// `timeout_secs` (default 30, at most 60) with the status as it is then.
#[utoipa::path(
    get, tag = "keys", path = "/v1/keys/{key_id}/status", params(("key_id" = String, Path), StatusQuery),
    responses(
        (status = 200, body = KeyStatus),
        (status = 400, body = ErrorBody, description = "Malformed query"),
        (status = 401, body = ErrorBody, description = "No Bearer token"),
        (status = 403, body = ErrorBody, description = "Wrong token"),
        (status = 404, body = ErrorBody, description = "Unknown key"),
    ),
    security(("key_token" = []))
)]
pub(super) async fn get_key_status(
    State(state): State<Arc<HttpState>>,
    Path(key_id): Path<String>,
    query: Result<Query<StatusQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Json<KeyStatus>, ServiceError> {
    let Query(q) = query.map_err(malformed_query)?;
    let wait = q.wait_past.map(|past| {
        let secs = (q.timeout_secs.unwrap_or(DEFAULT_WAIT_SECS)).min(MAX_WAIT_SECS);
        (past, Duration::from_secs(secs))
    });
    let status =
        crate::service::status::get(&state.service, &key_id, authorization(&headers), wait);
    Ok(Json(status.await?))
}
