//! Key registration and deletion over HTTP, for clients that cannot stream gRPC (browsers):
//! `PUT /v1/keys` takes the key as its body and the registration header's fields as request
//! headers (`omr_api::headers`: the parameter set, k̄, where to start, an invite code; the size
//! is `Content-Length`), and runs it as the gRPC registry does (`service::registry::upload`:
//! the same permits, deadline, admission from the header before any key byte is read, checks
//! and refusals that store nothing; a refusal decided before the body is read drains the body,
//! so that a client that writes it all before reading reads the answer). `DELETE
//! /v1/keys/{key_id}` deletes a key.

use std::sync::Arc;

use axum::body::{Body, BodyDataStream};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use omr_api::headers::{INVITE_CODE, KBAR, PARAM_SET, START};
use omr_api::http::{ErrorBody, KeyRegistered};
use omr_api::ErrorCode;
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::RegistrationHeader;

use super::body::require_binary;
use super::{authorization, HttpState};
use crate::error::ServiceError;
use crate::service::registry;

/// Register a detection key: its encoding as the body (`omr keygen` writes it), streamed, and
/// the registration's header as request headers. The headers are checked, and the invite and
/// room for one more key admitted, before any byte of the body is read.
#[utoipa::path(
    put, tag = "keys", path = "/v1/keys", operation_id = "register_key",
    params(
        ("omr-param-set" = String, Header, description = "The key's parameter set (the server's, `GET /v1/params`)"),
        ("omr-kbar" = u32, Header, description = "k̄, the most messages a digest of the key carries (1 on omr-light-v1)"),
        ("omr-start" = String, Header, description = "Where detection starts: `now` (the board head when the key is stored) or a board index"),
        ("omr-invite-code" = Option<String>, Header, description = "An invite code, on a server with `registration = \"invite\"`"),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The detection key's encoding, with its size as `Content-Length` (a chunked body is refused)"),
    responses(
        (status = 201, body = KeyRegistered, description = "Registered: the key's id, its access token (shown once) and where detection starts"),
        (status = 400, body = ErrorBody, description = "A header missing or malformed, no `Content-Length`, or a body shorter than it (`malformed_upload`); the key does not decode or is not the header's (`invalid_key`); another parameter set (`param_set_mismatch`)"),
        (status = 401, body = ErrorBody, description = "An invite code is required (`invite_required`)"),
        (status = 403, body = ErrorBody, description = "The invite code is unknown, spent or expired (`invite_invalid`)"),
        (status = 408, body = ErrorBody, description = "The upload took longer than `key_upload_timeout_secs` (`upload_timeout`)"),
        (status = 409, body = ErrorBody, description = "The start index is past the board head (`start_index_ahead`)"),
        (status = 410, body = ErrorBody, description = "The start index is below what retention kept (`start_index_retired`)"),
        (status = 413, body = ErrorBody, description = "Larger than `max_key_bytes`, or a body longer than declared (`key_too_large`)"),
        (status = 415, body = ErrorBody, description = "Not application/octet-stream"),
        (status = 503, body = ErrorBody, description = "`max_concurrent_uploads` uploads in progress (`busy`): retry shortly"),
        (status = 507, body = ErrorBody, description = "`max_keys` keys are registered (`too_many_keys`)"),
    )
)]
pub(super) async fn put_key(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let svc = &state.service;
    let mut unread = Some(body.into_data_stream());
    let receive = async {
        require_binary(&headers, "a detection key")?;
        let header = registration_header(&headers)?;
        let invite = registry::admit(svc, &header).await?;
        let mut key = registry::KeyBytes::new(&header);
        // From here the body is read: an error in it ends the upload, nothing to drain.
        let mut frames = unread.take().expect("the body is unread until here");
        while let Some(frame) = frames.next().await {
            let chunk = frame.map_err(|e| {
                malformed(format!(
                    "the body ended before the key did ({e}); nothing was stored"
                ))
            })?;
            key.push(&chunk)?;
        }
        Ok::<_, ServiceError>((header, invite, key.finish()?))
    };
    match registry::upload(svc, receive).await {
        Ok(r) => {
            let registered = KeyRegistered {
                key_id: r.key_id,
                access_token: r.access_token,
                start_index: r.start_index,
            };
            (StatusCode::CREATED, Json(registered)).into_response()
        }
        Err(e) => {
            if let Some(rest) = unread {
                drain(svc, &headers, rest).await;
            }
            e.into_response()
        }
    }
}

/// After a refusal decided before the body was read (the headers, admission, no permit): read
/// the rest of the body and discard it, at most the declared `Content-Length` (only when it is
/// within `max_key_bytes`; `max_key_bytes` for a body without one) and within
/// `key_upload_timeout_secs`, so that an HTTP/1.1 client that sends its whole body before it
/// reads (a browser's `fetch`) reads the refusal rather than a reset connection. Nothing of it
/// is kept. A client that sent `Expect: 100-continue` was not asked for the body and sends
/// none: it reads the refusal at once.
async fn drain(svc: &crate::service::Service, headers: &HeaderMap, mut rest: BodyDataStream) {
    let max = svc.config.max_key_bytes;
    let declared = (headers.get(header::CONTENT_LENGTH))
        .map(|v| v.to_str().ok().and_then(|v| v.parse::<u64>().ok()));
    let limit = match declared {
        _ if headers.contains_key(header::EXPECT) => return,
        None => max,
        Some(Some(len)) if len <= max => len,
        Some(_) => return,
    };
    let deadline = std::time::Duration::from_secs(svc.config.key_upload_timeout_secs);
    let discard = async {
        let mut read = 0u64;
        while let Some(Ok(chunk)) = rest.next().await {
            read += chunk.len() as u64;
            if read > limit {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(deadline, discard).await;
}

/// Delete a key and everything detected for it.
#[utoipa::path(
    delete, tag = "keys", path = "/v1/keys/{key_id}", params(("key_id" = String, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, body = ErrorBody, description = "No Bearer token"),
        (status = 403, body = ErrorBody, description = "Wrong token"),
        (status = 404, body = ErrorBody, description = "Unknown key"),
    ),
    security(("key_token" = []))
)]
pub(super) async fn delete_key(
    State(state): State<Arc<HttpState>>,
    Path(key_id): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ServiceError> {
    registry::delete(&state.service, &key_id, authorization(&headers)).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn malformed(message: String) -> ServiceError {
    ServiceError::new(ErrorCode::MalformedUpload, message)
}

/// The registration header a `PUT /v1/keys` request's headers carry (checked further by
/// `registry::admit`, as the gRPC header is).
fn registration_header(headers: &HeaderMap) -> Result<RegistrationHeader, ServiceError> {
    let text = |name: &str| -> Result<Option<&str>, ServiceError> {
        let Some(value) = headers.get(name) else {
            return Ok(None);
        };
        let value = value
            .to_str()
            .map_err(|_| malformed(format!("header {name} is not text")))?;
        Ok(Some(value.trim()))
    };
    let required = |name: &str, what: &str| -> Result<&str, ServiceError> {
        text(name)?.ok_or_else(|| malformed(format!("header {name} is required: {what}")))
    };
    let param_set = required(PARAM_SET, "the key's parameter set")?.to_string();
    let kbar = required(KBAR, "the key's k̄")?;
    let kbar =
        (kbar.parse::<u32>()).map_err(|_| malformed(format!("{KBAR} {kbar:?} is not a number")))?;
    let start = match required(START, "`now` or a board index")? {
        "now" => Start::FromNow(true),
        index => Start::StartIndex(index.parse::<u64>().map_err(|_| {
            malformed(format!(
                "{START} {index:?} is neither `now` nor a board index"
            ))
        })?),
    };
    let total_bytes = text(header::CONTENT_LENGTH.as_str())?
        .ok_or_else(|| {
            malformed(
                "Content-Length is required: the key's size (a chunked body is not taken)".into(),
            )
        })?
        .parse::<u64>()
        .map_err(|_| malformed("Content-Length is not a number".into()))?;
    Ok(RegistrationHeader {
        param_set,
        kbar,
        total_bytes,
        start: Some(start),
        invite_code: text(INVITE_CODE)?.unwrap_or_default().to_string(),
    })
}
