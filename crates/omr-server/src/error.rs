//! [`ServiceError`]: one error for every omrd API, transport-neutral: an [`ErrorCode`] (whose
//! table gives its HTTP status and gRPC code) and a message. `http/error.rs` maps it to a status
//! and a JSON `{code, message}` body, `grpc/error.rs` to a `tonic::Status`. Bad input gets a
//! precise message; internal failures are logged once, where they are made, and shown
//! generically.

use omr_api::ErrorCode;
use omr_core::OmrError;
use omr_store::InviteRefusal;

/// An error answered to a client of the HTTP or the gRPC API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceError {
    pub code: ErrorCode,
    pub message: String,
    /// When to try again, for refusals that pass (`Retry-After` on HTTP).
    pub retry_after_secs: Option<u64>,
    /// `duplicate_message`: the board index the message already has.
    pub index: Option<u64>,
}

impl ServiceError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ServiceError {
            code,
            message: message.into(),
            retry_after_secs: None,
            index: None,
        }
    }

    /// A post whose message (at `position` of a batch of `count`) is already on the board at
    /// `index`: nothing was appended.
    pub fn duplicate(position: usize, count: usize, index: u64) -> Self {
        let which = if count == 1 {
            "the message".to_string()
        } else {
            format!("message {position} of the batch")
        };
        let mut e = Self::new(
            ErrorCode::DuplicateMessage,
            format!(
                "{which} is already on the board at index {index} (the same clue, payload and \
                 attachment); nothing was appended. A retry after a lost answer: treat it as \
                 posted at {index}"
            ),
        );
        e.index = Some(index);
        e
    }

    /// The same error, telling the client to retry after `secs` seconds.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// The refusal of a request while the server is at `max_concurrent_requests`.
    pub fn overloaded() -> Self {
        Self::new(
            ErrorCode::Overloaded,
            "the server is handling as many requests as it accepts (max_concurrent_requests); \
             nothing was stored: retry in a second",
        )
        .retry_after(1)
    }

    /// An internal failure: logged with its cause, answered generically.
    pub fn internal(context: &str, err: impl std::fmt::Display) -> Self {
        tracing::error!(error = %err, "{context}");
        Self::new(ErrorCode::Internal, "internal error; see server logs")
    }

    pub fn unknown_key(key_id: &str) -> Self {
        Self::new(ErrorCode::UnknownKey, format!("no detection key {key_id}"))
    }

    /// The refusal of a registration past `max_keys`.
    pub fn too_many_keys(keys: u64, cap: u64) -> Self {
        Self::new(
            ErrorCode::TooManyKeys,
            format!(
                "this server holds {keys} detection keys and accepts at most {cap} (max_keys); \
                 nothing was stored: ask its operator, or delete a key you no longer use"
            ),
        )
    }

    /// A registration starting at `start`, below `oldest`, the oldest board index retention
    /// kept: detection could never read the messages it would start from.
    pub fn start_index_retired(start: u64, oldest: u64) -> Self {
        Self::new(
            ErrorCode::StartIndexRetired,
            format!(
                "start index {start} is below the oldest retained board message ({oldest}): \
                 retention deleted the messages before it; nothing was stored. Register from \
                 index {oldest} or later, or from now"
            ),
        )
    }

    /// A registration starting at `start`, past the board head `head`: it would report being
    /// caught up while nothing is detected for it until the board got there.
    pub fn start_index_ahead(start: u64, head: u64) -> Self {
        Self::new(
            ErrorCode::StartIndexAhead,
            format!(
                "start index {start} is past the board head ({head}); nothing was stored. \
                 Register from now, or from an index up to {head}"
            ),
        )
    }

    /// The refusal of a registration without an invite code by a server that wants one.
    pub fn invite_required() -> Self {
        Self::new(
            ErrorCode::InviteRequired,
            "this server registers detection keys only with an invite code (registration = \
             \"invite\"): ask its operator for one and pass it with `omr register --invite CODE` \
             (SDK: `Client::register_with_invite`); nothing was stored",
        )
    }

    /// The refusal of a registration whose invite code admits none, saying why.
    pub fn invite_refused(refusal: InviteRefusal) -> Self {
        let why = match refusal {
            InviteRefusal::Unknown => "is unknown to this server: check that it was copied \
                                       exactly and is for this server"
                .to_string(),
            InviteRefusal::UsedUp { uses } => {
                format!("is used up (all {uses} of its uses were taken)")
            }
            InviteRefusal::Expired { expires_ms } => format!(
                "expired at {}",
                chrono::DateTime::from_timestamp_millis(expires_ms)
                    .map_or(format!("{expires_ms} ms"), |t| t
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            ),
        };
        Self::new(
            ErrorCode::InviteInvalid,
            format!(
                "the invite code {why}; ask the server's operator for a new one. Nothing was \
                 stored and no invite use was taken"
            ),
        )
    }

    /// Map a decoding error of client-supplied bytes (`what` names the field).
    pub fn from_omr(what: &'static str, err: OmrError) -> Self {
        match err {
            OmrError::PayloadTooLarge { .. } => {
                Self::new(ErrorCode::PayloadTooLarge, err.to_string())
            }
            OmrError::TooLarge { .. } => Self::new(ErrorCode::BodyTooLarge, err.to_string()),
            OmrError::UnknownParamSet(_) | OmrError::ParamMismatch { .. } => {
                Self::new(ErrorCode::ParamSetMismatch, format!("{what}: {err}"))
            }
            OmrError::PostageRequired { bits } => Self::new(
                ErrorCode::PostageRequired,
                format!(
                    "{err}; nothing was stored. Send the stamped message encoding (version 2) \
                     or the JSON field `nonce`: `omr send` and the SDK find one (2^{bits} \
                     hashes on average; GET /v1/params says `postage_bits`)"
                ),
            ),
            OmrError::PostageInsufficient { need, .. } => Self::new(
                ErrorCode::PostageInvalid,
                format!(
                    "{err}; nothing was stored. The stamp must be solved for exactly this \
                     clue and payload, with {need} bits (GET /v1/params says `postage_bits`)"
                ),
            ),
            _ => Self::new(
                match what {
                    "clue" => ErrorCode::MalformedClue,
                    _ => ErrorCode::MalformedMessage,
                },
                format!("{what}: {err}"),
            ),
        }
    }

    /// Prefix the message with where the error happened (e.g. `message 3`).
    pub fn at(mut self, place: impl std::fmt::Display) -> Self {
        self.message = format!("{place}: {}", self.message);
        self
    }
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ServiceError {}
