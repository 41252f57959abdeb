//! `GET /v1/digests/{key_id}?from=INDEX&to=INDEX`: a key's digest (`service::digests`), its range
//! and the board's state in the `omr-*` headers.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use omr_api::headers;
use omr_api::http::{DigestQuery, ErrorBody};

use super::{authorization, error::malformed_query, HttpState};
use crate::admission::Limit;
use crate::service::digests::{self, BuiltDigest};

/// The encoded digest, with the range it covers in `omr-range-start` / `omr-range-end`, the board
/// head, the key's lag and cursor (`omr-detected-up-to`); `omr-next-from` when more of the range
/// is on a further page; on omr-light-v1, `omr-refresh-at`: the board index whose arrival makes
/// the key's open batch due for its next detection (asking before then detects nothing new).
/// `ETag` names the digest; a request with `If-None-Match` naming it is answered 304, no body.
#[utoipa::path(
    get, tag = "keys", path = "/v1/digests/{key_id}",
    params(
        ("key_id" = String, Path),
        DigestQuery,
        ("If-None-Match" = Option<String>, Header, description = "The `ETag` of the digest the client holds for this request: answered 304 with no body while it is the same"),
    ),
    responses(
        (status = 200, content_type = "application/octet-stream", description = "The omr-core Digest encoding; `ETag` names it"),
        (status = 304, description = "The digest named by `If-None-Match` (the client holds it): the same headers, no body"),
        (status = 400, body = ErrorBody, description = "Malformed query, or `to` not past `from` (`malformed_query`)"),
        (status = 401, body = ErrorBody, description = "No Bearer token"),
        (status = 403, body = ErrorBody, description = "Wrong token"),
        (status = 404, body = ErrorBody, description = "Unknown key"),
        (status = 429, body = ErrorBody, description = "This client's digest rate limit; retry after Retry-After seconds"),
    ),
    security(("key_token" = []))
)]
pub(super) async fn get_digest(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(key_id): Path<String>,
    query: Result<Query<DigestQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let Query(q) = query.map_err(malformed_query)?;
        let auth = authorization(&headers);
        let admit = || state.admit(Limit::Digests, "/v1/digests", peer, &headers, 1);
        digests::get(&state.service, &key_id, auth, q.from, q.to, admit).await
    }
    .await;
    let held = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok());
    let unchanged = result.as_ref().is_ok_and(|d| d.held(held));
    digests::count(&state.service, &result, unchanged);
    match result {
        Ok(d) => answer(d, unchanged),
        Err(e) => e.into_response(),
    }
}

/// The digest, or when the client holds it (`unchanged`) 304 with the same headers.
fn answer(d: BuiltDigest, unchanged: bool) -> Response {
    let mut h = HeaderMap::new();
    let num = |v: u64| HeaderValue::from_str(&v.to_string()).expect("digits");
    let etag = HeaderValue::from_str(&d.etag()).expect("digits and quotes");
    h.insert(header::ETAG, etag);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(headers::RANGE_START, num(d.range_start));
    h.insert(headers::RANGE_END, num(d.range_end));
    h.insert(headers::BOARD_HEAD, num(d.board_head));
    h.insert(headers::LAG, num(d.lag));
    h.insert(headers::EPOCH_LENGTH, num(d.epoch));
    if let Some(n) = d.next_from {
        h.insert(headers::NEXT_FROM, num(n));
    }
    h.insert(headers::DETECTED_UP_TO, num(d.detected_up_to));
    if let Some(n) = d.refresh_at {
        h.insert(headers::REFRESH_AT, num(n));
    }
    if unchanged {
        h.remove(header::CONTENT_TYPE);
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }
    (StatusCode::OK, h, d.bytes).into_response()
}
