//! Request bodies of the board: the Content-Type, the size limit, and each message decoded and
//! validated against the server's parameter set and its postage, alone or in a batch.
//! [`message`] and [`batch`] are public so that the decoder fuzz tests (`tests/fuzz`) call them
//! as the routes do.

use std::cell::Cell;
use std::fmt;

use axum::body::{to_bytes, Body};
use axum::http::{header, HeaderMap};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_api::http::MessageIn;
use omr_api::ErrorCode;
use omr_core::Message;
use omr_store::NewMessage;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::ServiceError;
pub use crate::service::board::Rules;
use crate::service::board::{check_message, check_params};

/// The largest `POST /v1/messages` body under `rules`: a message, and the largest attachment in
/// base64.
pub fn single_body_limit(rules: &Rules) -> usize {
    SINGLE_BODY_LIMIT + rules.max_attachment_bytes.div_ceil(3) * 4
}

/// Largest single-message body without an attachment (JSON base64 of the largest clue and
/// payload, with room). A batch may hold this much per message, attachments included.
pub const SINGLE_BODY_LIMIT: usize = 16 * 1024;

/// How a body is encoded (its Content-Type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Json,
    Binary,
}

/// Refuses a body that is not `application/octet-stream` (`415 unsupported_media_type`, naming
/// `what` the route takes).
pub(super) fn require_binary(headers: &HeaderMap, what: &str) -> Result<(), ServiceError> {
    if body_kind(headers)? != BodyKind::Binary {
        return Err(ServiceError::new(
            ErrorCode::UnsupportedMediaType,
            format!("{what} is application/octet-stream"),
        ));
    }
    Ok(())
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

/// The one message of a `POST /v1/messages` body, under a server's `rules`.
pub fn message(rules: Rules, kind: BodyKind, bytes: &[u8]) -> Result<NewMessage, ServiceError> {
    match kind {
        BodyKind::Json => {
            let Object(m) = serde_json::from_slice::<Object<MessageIn>>(bytes)
                .map_err(|e| ServiceError::new(ErrorCode::MalformedJson, e.to_string()))?;
            from_json(rules, &m)
        }
        BodyKind::Binary => from_binary(rules, bytes),
    }
}

/// The messages of a `POST /v1/messages/batch` body, at most `max` of them.
pub fn batch(
    rules: Rules,
    kind: BodyKind,
    bytes: &[u8],
    max: usize,
) -> Result<Vec<NewMessage>, ServiceError> {
    match kind {
        BodyKind::Json => batch_from_json(rules, bytes, max),
        BodyKind::Binary => batch_from_binary(rules, bytes, max),
    }
}

fn too_many(max: usize) -> ServiceError {
    ServiceError::new(
        ErrorCode::BatchTooLarge,
        format!("more than {max} messages in one batch; the limit is {max}"),
    )
}

fn batch_from_json(
    rules: Rules,
    bytes: &[u8],
    max: usize,
) -> Result<Vec<NewMessage>, ServiceError> {
    let over = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let messages = BoundedBatch { max, over: &over }
        .deserialize(&mut de)
        .and_then(|m| de.end().map(|()| m))
        .map_err(|e| {
            if over.get() {
                too_many(max)
            } else {
                ServiceError::new(ErrorCode::MalformedJson, e.to_string())
            }
        })?;
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| from_json(rules, m).map_err(|e| e.at(format_args!("message {i}"))))
        .collect()
}

/// A JSON [`omr_api::http::BatchIn`] of at most `max` messages, refused at message `max + 1`
/// (`over` is then set): serde's own `Vec` would hold every message of the body first, ≈ 3
/// bytes per body byte for a body of empty messages.
struct BoundedBatch<'a> {
    max: usize,
    over: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for BoundedBatch<'_> {
    type Value = Vec<MessageIn>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_struct("BatchIn", &["messages"], self)
    }
}

impl<'de> Visitor<'de> for BoundedBatch<'_> {
    type Value = Vec<MessageIn>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(r#"an object {"messages": [...]}"#)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut messages = None;
        while let Some(key) = map.next_key::<String>()? {
            if key != "messages" {
                return Err(de::Error::unknown_field(&key, &["messages"]));
            }
            if messages.is_some() {
                return Err(de::Error::duplicate_field("messages"));
            }
            messages = Some(map.next_value_seed(BoundedMessages(self.max, self.over))?);
        }
        messages.ok_or_else(|| de::Error::missing_field("messages"))
    }
}

/// The `messages` array of a [`BoundedBatch`].
struct BoundedMessages<'a>(usize, &'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for BoundedMessages<'_> {
    type Value = Vec<MessageIn>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for BoundedMessages<'_> {
    type Value = Vec<MessageIn>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Object(m)) = seq.next_element::<Object<MessageIn>>()? {
            if out.len() == self.0 {
                self.1.set(true);
                return Err(de::Error::custom("too many messages"));
            }
            out.push(m);
        }
        Ok(out)
    }
}

/// A sequence of (u32 little-endian length, Message encoding).
/// A `T` read only from a JSON object: serde's derived structs also take an array of the fields
/// in order (`[clue, payload]`, `[null, null]`), which the documented bodies are not.
pub(super) struct Object<T>(pub T);

impl<'de, T: de::Deserialize<'de>> de::Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor(std::marker::PhantomData))
    }
}

struct ObjectVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: de::Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = Object<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Object)
    }
}

fn batch_from_binary(
    rules: Rules,
    bytes: &[u8],
    max: usize,
) -> Result<Vec<NewMessage>, ServiceError> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        if out.len() == max {
            return Err(too_many(max));
        }
        let i = out.len();
        let (message, tail) =
            next_binary(rules, rest).map_err(|e| e.at(format_args!("message {i}")))?;
        out.push(message);
        rest = tail;
    }
    Ok(out)
}

/// The first length-prefixed message of `rest`, and what follows it.
fn next_binary(rules: Rules, rest: &[u8]) -> Result<(NewMessage, &[u8]), ServiceError> {
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
    Ok((from_binary(rules, &rest[4..4 + len])?, &rest[4 + len..]))
}

/// Decode and validate one JSON message against the server's parameter set.
fn from_json(rules: Rules, m: &MessageIn) -> Result<NewMessage, ServiceError> {
    let clue = B64.decode(m.clue.as_bytes()).map_err(|e| {
        ServiceError::new(ErrorCode::MalformedClue, format!("clue is not base64: {e}"))
    })?;
    let payload = B64.decode(m.payload.as_bytes()).map_err(|e| {
        ServiceError::new(
            ErrorCode::MalformedPayload,
            format!("payload is not base64: {e}"),
        )
    })?;
    let set = (rules.set.clue_set(&clue)).map_err(|e| ServiceError::from_omr("clue", e))?;
    check_params(rules.set, set)?;
    // Before the attachment is decoded, as `check_message` would (an oversized payload is
    // named first).
    (rules.set.validate_payload(&payload)).map_err(|e| ServiceError::from_omr("payload", e))?;
    let attachment = match &m.attachment {
        None => Vec::new(),
        Some(a) => B64.decode(a.as_bytes()).map_err(|e| {
            ServiceError::new(
                ErrorCode::MalformedMessage,
                format!("attachment is not base64: {e}"),
            )
        })?,
    };
    check_message(rules, clue, payload, attachment, m.nonce)
}

/// Decode and validate one binary message (`omr_core::Message` encoding).
fn from_binary(rules: Rules, bytes: &[u8]) -> Result<NewMessage, ServiceError> {
    let m = Message::from_bytes(bytes).map_err(|e| ServiceError::from_omr("message", e))?;
    check_params(rules.set, m.params().name)?;
    check_message(rules, m.clue.to_bytes(), m.payload, m.attachment, m.nonce)
}

#[cfg(test)]
mod tests;
