//! The JSON bodies and query strings of omrd's HTTP API (`/v1/...`), as both sides see them.
//! [`KeyStatus`] is also what gRPC `GetKeyStatus` / `WatchKeyStatus` answer (omr-proto converts).
//!
//! Binary values (clues, payloads) travel as standard padded base64 strings.
//!
//! Long: every type of the HTTP API in one file, which the server, the SDK and the OpenAPI
//! document all read; each is a plain struct with its documented fields.

use serde::{Deserialize, Serialize};

use crate::ErrorCode;

/// A message as JSON: base64 of the clue's encoding and of the payload bytes, and the postage
/// stamp when the server asks for one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MessageIn {
    /// Base64 (standard, padded) of the clue's binary encoding.
    pub clue: String,
    /// Base64 of the payload (at most `max_payload_bytes` bytes).
    pub payload: String,
    /// The postage nonce (see `postage_bits` in `GET /v1/params`): SHA-256 of the
    /// length-prefixed tag `omr-postage-v1`, parameter set name, clue bytes, payload bytes and
    /// this nonce (8 bytes little-endian) must have `postage_bits` leading zero bits. Leave it
    /// out when `postage_bits` is 0.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "integral::option"
    )]
    pub nonce: Option<u64>,
    /// Base64 of the attachment (at most `max_attachment_bytes`; sealed by the sender), fetched
    /// by recipients through PIR once its epoch closes. With postage, the stamp covers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<String>,
}

/// A batch of messages as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchIn {
    pub messages: Vec<MessageIn>,
}

/// Answer to a committed post.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Posted {
    /// The message's board index.
    pub index: u64,
}

/// Answer to a committed batch: indices `first_index .. first_index + count`, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchPosted {
    pub first_index: u64,
    pub count: u64,
}

/// Query of `GET /v1/messages`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct ReadQuery {
    /// First index to return (default 0).
    pub from: Option<u64>,
    /// Most messages to return (default and maximum 1000).
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 1000))]
    pub limit: Option<u32>,
    /// Also return each message's sealed attachment, where it has one (default false). The page
    /// then ends early once its attachments reach 1 MiB (`next` says where to go on). Every
    /// attachment is public data, sealed to its recipient, as the board's payloads are: a
    /// reader who takes all of a range's tells the server nothing about which it wanted.
    pub attachments: Option<bool>,
}

/// One board message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BoardMessage {
    pub index: u64,
    /// Base64 of the clue's encoding.
    pub clue: String,
    /// Base64 of the payload.
    pub payload: String,
    /// Milliseconds since the Unix epoch when the message was committed.
    pub received_ms: i64,
    /// Base64 of its sealed attachment: only when asked for (`attachments=true`) and the message
    /// has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<String>,
}

/// A page of the board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BoardPage {
    pub messages: Vec<BoardMessage>,
    /// Where the next page starts.
    pub next: u64,
    /// The next index to be assigned.
    pub head: u64,
}

/// The server's parameter set and limits (`GET /v1/params`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Params {
    pub param_set: String,
    pub clue_bytes: usize,
    pub max_payload_bytes: usize,
    pub max_kbar: usize,
    /// Most messages one digest covers.
    pub max_range: u64,
    pub max_key_bytes: u64,
    pub max_batch_messages: usize,
    pub board_head: u64,
    /// Leading zero bits every message's postage stamp must have; 0: no postage (servers that
    /// predate postage leave the field out).
    #[serde(default)]
    pub postage_bits: u32,
    /// Whether registering a detection key needs an invite code (`registration = "invite"`:
    /// `omr register --invite CODE`); false from servers that predate the field.
    #[serde(default)]
    pub invite_required: bool,
    /// Largest attachment a message may carry (as posted, sealed); 0: the server takes none
    /// (servers that predate attachments leave the field out).
    #[serde(default)]
    pub max_attachment_bytes: usize,
    /// Board indices per epoch: digests start at epoch boundaries, and each closed epoch's
    /// attachments are one PIR database (`GET /v1/pir/{epoch}/hint`).
    #[serde(default)]
    pub epoch_len: u64,
    /// The PIR parameter set of attachment epochs (`pir-v1`); absent without attachments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pir_params: Option<String>,
}

/// A snapshot omr-light-v1's payload fetch serves now: every closed epoch retention keeps
/// (`GET /v1/fetch`), or the open epoch's messages so far (`GET /v1/fetch/open`), in `buckets`
/// buckets of `rows` grid rows; a round's query names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FetchRange {
    /// The first board index of the snapshot.
    pub start: u64,
    /// Past the last board index of the snapshot (an epoch boundary, except for an open
    /// epoch's snapshot).
    pub end: u64,
    /// Grid rows of every bucket.
    pub rows: u32,
    /// Buckets of a round (75).
    pub buckets: u32,
    /// Records a round fetches at most (50).
    pub records_per_round: u32,
}

/// Query of `GET /v1/fetch/open`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct OpenFetchQuery {
    /// The snapshot must hold every open-epoch message before this board index (default: the
    /// board head; one past the head counts as the head). A request for messages the snapshot
    /// lacks waits for its next rebuild.
    pub min_end: Option<u64>,
}

/// Query of `GET /v1/digests/{key_id}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct DigestQuery {
    /// First board index wanted (default: the key's start). Rounded down to an epoch start.
    pub from: Option<u64>,
    /// Stop at the first epoch boundary at or after this index (default: the key's cursor).
    /// For splitting a range that holds more than k̄ pertinent messages.
    pub to: Option<u64>,
}

/// Longest `GET /v1/keys/{key_id}/status?wait_past=…` waits, in seconds: a longer
/// `timeout_secs` is cut to this.
pub const MAX_WAIT_SECS: u64 = 60;

/// How long a wait without `timeout_secs` lasts, in seconds.
pub const DEFAULT_WAIT_SECS: u64 = 30;

/// Query of `GET /v1/keys/{key_id}/status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct StatusQuery {
    /// Long-poll: answer as soon as the key's cursor is greater than this index (at once if it
    /// already is), or when `timeout_secs` pass, with the status as it is then.
    pub wait_past: Option<u64>,
    /// How long a `wait_past` call may wait, in seconds (default 30, at most 60). Ignored
    /// without `wait_past`.
    pub timeout_secs: Option<u64>,
}

/// Where detection stands for a key: `GET /v1/keys/{key_id}/status` (and, with the same
/// fields, gRPC `GetKeyStatus` and `WatchKeyStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyStatus {
    pub key_id: String,
    pub param_set: String,
    pub kbar: u32,
    /// The first board index this key's digests cover.
    pub start_index: u64,
    /// Next board index to detect for this key: every message below it is in its digests.
    pub cursor: u64,
    /// Next board index to be assigned.
    pub board_head: u64,
    /// Messages on the board not yet detected for this key.
    pub lag: u64,
    pub key_bytes: u64,
    /// Registration time, RFC 3339.
    pub registered_at: String,
    /// Where detection stands: `caught_up`, `detecting` (a worker serves it now), `waiting` (a
    /// worker holds it and serves it in turn) or `unassigned` (no live worker holds it).
    pub state: String,
    /// When waiting or detecting: the worker's estimate of the seconds until it is caught up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_secs: Option<u64>,
    /// omr-light-v1: the board index whose arrival makes this key's open batch due for its next
    /// detection (a refresh, every `light_refresh_messages` messages) when its recipient asks.
    /// Absent on the TFHE sets, which detect every message as it comes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_at: Option<u64>,
}

/// The longest invite expiry, 100 years of 365 days, in seconds (the schema of
/// [`NewInvite::expires_secs`] states it as a literal: a test checks they agree).
pub const MAX_INVITE_EXPIRY_SECS: u64 = 100 * 365 * 24 * 3600;

/// `POST /v1/admin/invites`: mint an invite code (admin token required).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewInvite {
    /// Registrations the code admits (default 1, at least 1).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "integral::option"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub uses: Option<u32>,
    /// Seconds from now until the code expires (default: never; 1 to 100 years,
    /// [`MAX_INVITE_EXPIRY_SECS`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "integral::option"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3_153_600_000_u64))]
    pub expires_secs: Option<u64>,
}

/// A minted invite code. The code is shown only here: the server keeps its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedInvite {
    /// 32 hexadecimal digits (128 random bits), for `omr register --invite CODE`.
    pub code: String,
    /// Registrations it admits.
    pub uses: u32,
    /// When it expires, RFC 3339; `null` when it never does.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// `PUT /v1/keys`: a registered key, told once (the gRPC `RegisterDetectionKeyResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyRegistered {
    /// The key's id, in the paths of its digest, status and deletion.
    pub key_id: String,
    /// Its access token (64 hexadecimal digits), for `Authorization: Bearer`: shown only
    /// here, the server keeps its hash.
    pub access_token: String,
    /// The board index its detection starts at.
    pub start_index: u64,
}

/// The JSON body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// Stable machine-readable code, e.g. `malformed_clue` (see [`ErrorCode`]).
    pub code: String,
    /// What was wrong, for humans.
    pub message: String,
    /// `duplicate_message` only: the board index the message already has (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code: code.as_str().to_string(),
            message: message.into(),
            index: None,
        }
    }

    /// The code, when it is one this version knows.
    pub fn error_code(&self) -> Option<ErrorCode> {
        ErrorCode::parse(&self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_the_documented_json_shape() {
        let e = ErrorBody::new(ErrorCode::MalformedClue, "clue: truncated");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"code": "malformed_clue", "message": "clue: truncated"})
        );
        assert_eq!(e.error_code(), Some(ErrorCode::MalformedClue));
        let m: Result<MessageIn, _> =
            serde_json::from_str(r#"{"clue": "AA==", "payload": "", "extra": 1}"#);
        assert!(m.is_err(), "unknown fields are refused");
        let m: MessageIn = serde_json::from_str(r#"{"clue": "AA==", "payload": ""}"#).unwrap();
        assert_eq!(m.nonce, None);
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            serde_json::json!({"clue": "AA==", "payload": ""}),
            "no nonce, no field: a server without postage takes it"
        );
        let m: MessageIn = serde_json::from_str(
            r#"{"clue": "AA==", "payload": "", "nonce": 18446744073709551615}"#,
        )
        .unwrap();
        assert_eq!(m.nonce, Some(u64::MAX));
    }

    #[test]
    fn params_of_a_server_without_postage_read_as_postage_off() {
        let p: Params = serde_json::from_value(serde_json::json!({
            "param_set": "omr-v1", "clue_bytes": 1548, "max_payload_bytes": 612, "max_kbar": 50,
            "max_range": 65536, "max_key_bytes": 1, "max_batch_messages": 1000, "board_head": 0
        }))
        .unwrap();
        assert_eq!(p.postage_bits, 0);
    }
}

/// JSON integers as JSON Schema counts them: `5` and also `5.0` (a number with no fractional
/// part is an integer to the schema the OpenAPI document states; Python's `json.dumps(5.0)`
/// writes it), refused where fractional, negative or out of the field's range.
mod integral {
    use serde::de::{Deserializer, Error};
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Int(u64),
        Float(f64),
    }

    pub fn option<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<u64>,
    {
        let Some(n) = Option::<Number>::deserialize(d)? else {
            return Ok(None);
        };
        let whole = match n {
            Number::Int(i) => i,
            // 2^64 is the first float past u64::MAX.
            Number::Float(f)
                if f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&f) =>
            {
                f as u64
            }
            Number::Float(f) => {
                return Err(D::Error::custom(format!(
                    "expected a non-negative integer, not {f}"
                )))
            }
        };
        T::try_from(whole)
            .map(Some)
            .map_err(|_| D::Error::custom(format!("{whole} is out of range")))
    }

    #[cfg(test)]
    mod tests {
        use super::super::NewInvite;

        #[test]
        fn integral_floats_are_integers_and_fractions_are_not() {
            let parse = |s: &str| serde_json::from_str::<NewInvite>(s);
            assert_eq!(parse(r#"{"uses": 3.0}"#).unwrap().uses, Some(3));
            assert_eq!(parse(r#"{"uses": 3}"#).unwrap().uses, Some(3));
            assert_eq!(parse(r#"{"uses": null}"#).unwrap().uses, None);
            assert!(parse(r#"{"uses": 3.5}"#).is_err());
            assert!(parse(r#"{"uses": -1}"#).is_err());
            assert!(parse(r#"{"uses": 4294967296}"#).is_err());
            assert!(parse(r#"{"uses": "3"}"#).is_err());
            assert_eq!(
                parse(r#"{"expires_secs": 1e3}"#).unwrap().expires_secs,
                Some(1000)
            );
        }
    }
}
