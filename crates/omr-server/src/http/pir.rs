//! Attachments by PIR: `GET /v1/pir/{epoch}/hint` (the epoch database's hint, the same for every
//! client, cacheable) and `POST /v1/pir/{epoch}/query` (one fetch's queries in, their answer
//! out). Both are rate-limited with the digests (a recipient's retrieval), and both wait for
//! the epoch's database to be built the first time it is asked for.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use omr_api::http::ErrorBody;
use omr_api::ErrorCode;

use super::body::{read_body, require_binary};
use super::HttpState;
use crate::admission::Limit;
use crate::error::ServiceError;
use crate::service::pir::{self, count_request};

/// The `{epoch}` of a PIR route, or `400 malformed_query` in the one error shape.
fn epoch_number(epoch: Result<Path<u64>, PathRejection>) -> Result<u64, ServiceError> {
    let Path(epoch) = epoch.map_err(|e| {
        ServiceError::new(
            ErrorCode::MalformedQuery,
            format!(
                "the epoch must be an epoch number (0, 1, …): {}",
                e.body_text()
            ),
        )
    })?;
    Ok(epoch)
}

fn octets(bytes: impl Into<Body>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/octet-stream")],
        bytes.into(),
    )
        .into_response()
}

/// The hint of a closed epoch's attachment database (omr-pir encoding).
#[utoipa::path(
    get, tag = "pir", path = "/v1/pir/{epoch}/hint",
    params(("epoch" = u64, Path, description = "Board indices epoch·epoch_len .. (epoch+1)·epoch_len")),
    responses(
        (status = 200, content_type = "application/octet-stream", description = "The hint (the same bytes for every client; cacheable)"),
        (status = 400, body = ErrorBody, description = "The epoch is not an epoch number (`malformed_query`)"),
        (status = 404, body = ErrorBody, description = "No such epoch: past the board, deleted by retention, or no attachments (`unknown_epoch`)"),
        (status = 409, body = ErrorBody, description = "The epoch is still open (`epoch_open`)"),
        (status = 429, body = ErrorBody, description = "This client's rate limit"),
    )
)]
pub(super) async fn get_hint(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    epoch: Result<Path<u64>, PathRejection>,
) -> Response {
    let result = async {
        let epoch = epoch_number(epoch)?;
        let admit = || state.admit(Limit::Digests, "/v1/pir/hint", peer, &headers, 1);
        let mut resp = octets(pir::hint(&state.service, epoch, admit).await?);
        resp.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("public, max-age=86400, immutable"),
        );
        Ok(resp)
    }
    .await;
    count_request(&state.metrics.pir, "hint", &result);
    result.unwrap_or_else(IntoResponse::into_response)
}

/// Answer one fetch's queries against a closed epoch's attachment database.
#[utoipa::path(
    post, tag = "pir", path = "/v1/pir/{epoch}/query",
    params(("epoch" = u64, Path, description = "The epoch the hint came from")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The queries (omr-pir encoding)"),
    responses(
        (status = 200, content_type = "application/octet-stream", description = "The answer (omr-pir encoding)"),
        (status = 400, body = ErrorBody, description = "The query does not decode or is for another database (`malformed_pir_query`), or the epoch is not an epoch number (`malformed_query`)"),
        (status = 404, body = ErrorBody, description = "No such epoch (`unknown_epoch`)"),
        (status = 409, body = ErrorBody, description = "The epoch is still open (`epoch_open`)"),
        (status = 413, body = ErrorBody, description = "Larger than this server's queries"),
        (status = 415, body = ErrorBody, description = "Not application/octet-stream"),
        (status = 429, body = ErrorBody, description = "This client's rate limit"),
    )
)]
pub(super) async fn post_query(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    epoch: Result<Path<u64>, PathRejection>,
    body: Body,
) -> Response {
    let result = async {
        let epoch = epoch_number(epoch)?;
        require_binary(&headers, "a PIR query")?;
        let limit = pir::max_query_bytes(&state.service)?;
        let bytes = read_body(&headers, body, limit).await?;
        let admit = || state.admit(Limit::Digests, "/v1/pir/query", peer, &headers, 1);
        Ok(octets(
            pir::answer(&state.service, epoch, &bytes, admit).await?,
        ))
    }
    .await;
    count_request(&state.metrics.pir, "query", &result);
    result.unwrap_or_else(IntoResponse::into_response)
}
