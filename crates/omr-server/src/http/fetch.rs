//! omr-light-v1's payload fetch (`service::fetch`): `GET /v1/fetch` (the closed epochs' snapshot),
//! `GET /v1/fetch/open` (the open epoch's),
//! `PUT /v1/keys/{key_id}/fetch-key` (the one-time key) and `POST /v1/keys/{key_id}/fetch`
//! (one round's query in, its answers out). The round is rate-limited with the digests.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use omr_api::http::{ErrorBody, FetchRange, OpenFetchQuery};
use omr_light::fetch::FetchKey;

use super::body::{read_body, require_binary};
use super::error::malformed_query;
use super::{authorization, HttpState};
use crate::admission::Limit;
use crate::error::ServiceError;
use crate::service::fetch;

/// The snapshot a round is made against: every closed epoch retention keeps.
#[utoipa::path(
    get, tag = "fetch", path = "/v1/fetch",
    responses(
        (status = 200, body = FetchRange),
        (status = 404, body = ErrorBody, description = "No epoch has closed yet (`unknown_epoch`), or this server runs a TFHE set, which has no payload fetch (`unknown_route`)"),
        (status = 429, body = ErrorBody, description = "This client's rate limit"),
    )
)]
pub(super) async fn get_range(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        state.admit(Limit::Digests, "/v1/fetch", peer, &headers, 1)?;
        let s = fetch::current(&state.service).await?;
        Ok(Json(s.fetch_range()))
    }
    .await;
    result.map_or_else(
        |e: ServiceError| e.into_response(),
        IntoResponse::into_response,
    )
}

/// The open epoch's snapshot: its messages so far, rebuilt at most once per
/// `light_fetch_open_rebuild_ms` when a request needs a message past it.
#[utoipa::path(
    get, tag = "fetch", path = "/v1/fetch/open", params(OpenFetchQuery),
    responses(
        (status = 200, body = FetchRange, description = "The open epoch's snapshot, holding every message before `min_end` (`end` is not an epoch boundary unless the epoch has filled)"),
        (status = 400, body = ErrorBody, description = "A malformed query string (`malformed_query`)"),
        (status = 404, body = ErrorBody, description = "The open epoch holds no message yet (`unknown_epoch`), or this server runs a TFHE set (`unknown_route`)"),
        (status = 429, body = ErrorBody, description = "This client's rate limit"),
    )
)]
pub(super) async fn get_open_range(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    query: Result<Query<OpenFetchQuery>, QueryRejection>,
) -> Response {
    let result = async {
        let Query(q) = query.map_err(malformed_query)?;
        state.admit(Limit::Digests, "/v1/fetch/open", peer, &headers, 1)?;
        let s = fetch::open(&state.service, q.min_end).await?;
        Ok(Json(s.fetch_range()))
    }
    .await;
    result.map_or_else(
        |e: ServiceError| e.into_response(),
        IntoResponse::into_response,
    )
}

/// Store the key's fetch key (replacing one uploaded before).
#[utoipa::path(
    put, tag = "fetch", path = "/v1/keys/{key_id}/fetch-key", params(("key_id" = String, Path)),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The omr-light-v1 fetch key encoding"),
    responses(
        (status = 204, description = "Stored"),
        (status = 400, body = ErrorBody, description = "Does not decode (`invalid_fetch_key`)"),
        (status = 401, body = ErrorBody, description = "No Bearer token"),
        (status = 403, body = ErrorBody, description = "Wrong token"),
        (status = 404, body = ErrorBody, description = "Unknown key, or a TFHE server (`unknown_route`)"),
        (status = 413, body = ErrorBody, description = "Larger than a fetch key"),
        (status = 415, body = ErrorBody, description = "Not application/octet-stream"),
    ),
    security(("key_token" = []))
)]
pub(super) async fn put_key(
    State(state): State<Arc<HttpState>>,
    Path(key_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        require_binary(&headers, "a fetch key")?;
        let bytes = read_body(&headers, body, FetchKey::encoded_len()).await?;
        fetch::put_key(&state.service, &key_id, authorization(&headers), bytes).await
    }
    .await;
    match result {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}

/// Answer one round of the key's payload fetch.
#[utoipa::path(
    post, tag = "fetch", path = "/v1/keys/{key_id}/fetch", params(("key_id" = String, Path)),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The round's query (omr-light-v1 fetch query encoding)"),
    responses(
        (status = 200, content_type = "application/octet-stream", description = "The round's answers (omr-light-v1 encoding)"),
        (status = 400, body = ErrorBody, description = "The query does not decode or does not fit its snapshot (`malformed_pir_query`)"),
        (status = 401, body = ErrorBody, description = "No Bearer token"),
        (status = 403, body = ErrorBody, description = "Wrong token"),
        (status = 404, body = ErrorBody, description = "Unknown key, a snapshot no longer served (`unknown_epoch`: GET /v1/fetch and make the round again), or a TFHE server (`unknown_route`)"),
        (status = 409, body = ErrorBody, description = "The key has no fetch key (`no_fetch_key`)"),
        (status = 413, body = ErrorBody, description = "Larger than a query"),
        (status = 415, body = ErrorBody, description = "Not application/octet-stream"),
        (status = 429, body = ErrorBody, description = "This client's rate limit"),
    ),
    security(("key_token" = []))
)]
pub(super) async fn post_round(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(key_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        require_binary(&headers, "a fetch query")?;
        let bytes = read_body(&headers, body, fetch::max_query_bytes()).await?;
        let admit = || state.admit(Limit::Digests, "/v1/keys/fetch", peer, &headers, 1);
        let auth = authorization(&headers);
        fetch::answer(&state.service, &key_id, auth, &bytes, admit).await
    }
    .await;
    match result {
        Ok(bytes) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            bytes,
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}
