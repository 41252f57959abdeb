//! Request bodies of the board: the Content-Type, the size limit, and each message decoded and
//! validated against the server's parameter set and its postage, alone or in a batch.

use axum::body::{to_bytes, Body};
use axum::http::{header, HeaderMap};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_api::http::{BatchIn, MessageIn};
use omr_api::ErrorCode;
use omr_core::{validate_payload, Clue, Message, Postage};
use omr_store::NewMessage;

use crate::error::ServiceError;
use crate::state::AppState;

/// Largest single-message body (JSON base64 of the largest clue and payload, with room).
pub(super) const SINGLE_BODY_LIMIT: usize = 16 * 1024;

pub(super) enum BodyKind {
    Json,
    Binary,
}

pub(super) fn body_kind(headers: &HeaderMap) -> Result<BodyKind, ServiceError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match ct.as_str() {
        "application/json" => Ok(BodyKind::Json),
        "application/octet-stream" => Ok(BodyKind::Binary),
        "" => Err(ServiceError::new(
            ErrorCode::UnsupportedMediaType,
            "missing Content-Type: use application/json or application/octet-stream",
        )),
        other => Err(ServiceError::new(
            ErrorCode::UnsupportedMediaType,
            format!("Content-Type {other} is not supported: use application/json or application/octet-stream"),
        )),
    }
}

/// Read the whole body, refusing more than `limit` bytes with 413.
pub(super) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Vec<u8>, ServiceError> {
    let too_large = || {
        ServiceError::new(
            ErrorCode::BodyTooLarge,
            format!("request body exceeds {limit} bytes"),
        )
    };
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
    {
        if len > limit {
            return Err(too_large());
        }
    }
    to_bytes(body, limit)
        .await
        .map(|b| b.to_vec())
        .map_err(|_| too_large())
}

/// The one message of a `POST /v1/messages` body.
pub(super) fn message(
    state: &AppState,
    kind: BodyKind,
    bytes: &[u8],
) -> Result<NewMessage, ServiceError> {
    match kind {
        BodyKind::Json => {
            let m: MessageIn = serde_json::from_slice(bytes)
                .map_err(|e| ServiceError::new(ErrorCode::MalformedJson, e.to_string()))?;
            from_json(state, &m)
        }
        BodyKind::Binary => from_binary(state, bytes),
    }
}

/// The messages of a `POST /v1/messages/batch` body, at most `max` of them.
pub(super) fn batch(
    state: &AppState,
    kind: BodyKind,
    bytes: &[u8],
    max: usize,
) -> Result<Vec<NewMessage>, ServiceError> {
    match kind {
        BodyKind::Json => batch_from_json(state, bytes, max),
        BodyKind::Binary => batch_from_binary(state, bytes, max),
    }
}

fn too_many(n: usize, max: usize) -> ServiceError {
    ServiceError::new(
        ErrorCode::BatchTooLarge,
        format!("{n} messages in one batch; the limit is {max}"),
    )
}

fn batch_from_json(
    state: &AppState,
    bytes: &[u8],
    max: usize,
) -> Result<Vec<NewMessage>, ServiceError> {
    let b: BatchIn = serde_json::from_slice(bytes)
        .map_err(|e| ServiceError::new(ErrorCode::MalformedJson, e.to_string()))?;
    if b.messages.len() > max {
        return Err(too_many(b.messages.len(), max));
    }
    b.messages
        .iter()
        .enumerate()
        .map(|(i, m)| from_json(state, m).map_err(|e| e.at(format_args!("message {i}"))))
        .collect()
}

/// A sequence of (u32 little-endian length, Message encoding).
fn batch_from_binary(
    state: &AppState,
    bytes: &[u8],
    max: usize,
) -> Result<Vec<NewMessage>, ServiceError> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        if out.len() == max {
            return Err(too_many(max + 1, max));
        }
        let i = out.len();
        let (message, tail) =
            next_binary(state, rest).map_err(|e| e.at(format_args!("message {i}")))?;
        out.push(message);
        rest = tail;
    }
    Ok(out)
}

/// The first length-prefixed message of `rest`, and what follows it.
fn next_binary<'a>(
    state: &AppState,
    rest: &'a [u8],
) -> Result<(NewMessage, &'a [u8]), ServiceError> {
    if rest.len() < 4 {
        return Err(ServiceError::new(
            ErrorCode::MalformedMessage,
            "truncated length prefix",
        ));
    }
    let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
    if rest.len() - 4 < len {
        return Err(ServiceError::new(
            ErrorCode::MalformedMessage,
            "truncated message",
        ));
    }
    Ok((from_binary(state, &rest[4..4 + len])?, &rest[4 + len..]))
}

/// Decode and validate one JSON message against the server's parameter set.
fn from_json(state: &AppState, m: &MessageIn) -> Result<NewMessage, ServiceError> {
    let clue = B64.decode(m.clue.as_bytes()).map_err(|e| {
        ServiceError::new(ErrorCode::MalformedClue, format!("clue is not base64: {e}"))
    })?;
    let payload = B64.decode(m.payload.as_bytes()).map_err(|e| {
        ServiceError::new(
            ErrorCode::MalformedPayload,
            format!("payload is not base64: {e}"),
        )
    })?;
    let decoded = Clue::from_bytes(&clue).map_err(|e| ServiceError::from_omr("clue", e))?;
    check_params(state, decoded.params().name)?;
    validate_payload(state.params, &payload).map_err(|e| ServiceError::from_omr("payload", e))?;
    check_postage(state, &clue, &payload, m.nonce)?;
    Ok(NewMessage { clue, payload })
}

/// Decode and validate one binary message (`omr_core::Message` encoding).
fn from_binary(state: &AppState, bytes: &[u8]) -> Result<NewMessage, ServiceError> {
    let m = Message::from_bytes(bytes).map_err(|e| ServiceError::from_omr("message", e))?;
    check_params(state, m.params().name)?;
    let clue = m.clue.to_bytes();
    check_postage(state, &clue, &m.payload, m.nonce)?;
    Ok(NewMessage {
        clue,
        payload: m.payload,
    })
}

/// With `postage_bits` > 0, the message's stamp (over the clue bytes as stored): refused with
/// `postage_required` without a nonce, `postage_invalid` with one that falls short. One
/// SHA-256 of the message, before anything is queued.
fn check_postage(
    state: &AppState,
    clue: &[u8],
    payload: &[u8],
    nonce: Option<u64>,
) -> Result<(), ServiceError> {
    let bits = state.config.postage_bits;
    if bits == 0 {
        return Ok(());
    }
    Postage::new(state.params, clue, payload)
        .check(bits, nonce)
        .map_err(|e| ServiceError::from_omr("message", e))
}

fn check_params(state: &AppState, got: &str) -> Result<(), ServiceError> {
    if got != state.params.name {
        return Err(ServiceError::new(
            ErrorCode::ParamSetMismatch,
            format!(
                "clue uses parameter set {got}; this server runs {}",
                state.params.name
            ),
        ));
    }
    Ok(())
}
