//! [`ServiceError`]: one error for every omrd API, transport-neutral, with one mapping to HTTP
//! (status + JSON `{code, message}`) and one to gRPC (`tonic::Status`). Bad input gets a precise
//! message; internal failures are logged once, where they are made, and shown generically.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use omr_api::http::ErrorBody;
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
}

impl ServiceError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ServiceError {
            code,
            message: message.into(),
            retry_after_secs: None,
        }
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

    /// The gRPC status code for an error with `code`.
    pub fn grpc_code(code: ErrorCode) -> tonic::Code {
        use tonic::Code;
        match code {
            ErrorCode::MalformedJson
            | ErrorCode::MalformedClue
            | ErrorCode::MalformedPayload
            | ErrorCode::MalformedMessage
            | ErrorCode::MalformedQuery
            | ErrorCode::MalformedUpload
            | ErrorCode::InvalidKey
            | ErrorCode::ParamSetMismatch
            | ErrorCode::EmptyBatch
            | ErrorCode::TlsRequired
            | ErrorCode::MalformedPirQuery
            | ErrorCode::UnsupportedMediaType => Code::InvalidArgument,
            ErrorCode::AttachmentTooLarge
            | ErrorCode::PayloadTooLarge
            | ErrorCode::BodyTooLarge
            | ErrorCode::BatchTooLarge
            | ErrorCode::KeyTooLarge
            | ErrorCode::TooManyKeys => Code::ResourceExhausted,
            ErrorCode::Unauthorized | ErrorCode::InviteRequired | ErrorCode::AdminUnauthorized => {
                Code::Unauthenticated
            }
            ErrorCode::Forbidden | ErrorCode::InviteInvalid | ErrorCode::AdminForbidden => {
                Code::PermissionDenied
            }
            ErrorCode::UnknownKey | ErrorCode::AdminDisabled | ErrorCode::UnknownEpoch => {
                Code::NotFound
            }
            ErrorCode::UploadTimeout | ErrorCode::RequestTimeout => Code::DeadlineExceeded,
            ErrorCode::RateLimited => Code::ResourceExhausted,
            ErrorCode::StartIndexRetired
            | ErrorCode::EpochOpen
            | ErrorCode::PostageRequired
            | ErrorCode::PostageInvalid => Code::FailedPrecondition,
            ErrorCode::Busy | ErrorCode::Unavailable | ErrorCode::Overloaded => Code::Unavailable,
            ErrorCode::Internal => Code::Internal,
        }
    }
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ServiceError {}

/// The HTTP mapping: the code's status, `Retry-After` when set, and the `{code, message}` body.
impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, Json(ErrorBody::new(self.code, self.message))).into_response();
        if let Some(secs) = self.retry_after_secs {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        resp
    }
}

/// The gRPC mapping: the code's status, the message as is, and the error code in the
/// `omr-error-code` metadata (with `retry-after`, in seconds, when the error says when to retry),
/// so that clients can tell a rate limit from other `RESOURCE_EXHAUSTED` refusals.
impl From<ServiceError> for tonic::Status {
    fn from(e: ServiceError) -> Self {
        let mut status = tonic::Status::new(ServiceError::grpc_code(e.code), e.message);
        let metadata = status.metadata_mut();
        metadata.insert(
            GRPC_ERROR_CODE,
            tonic::metadata::MetadataValue::from_static(e.code.as_str()),
        );
        if let Some(secs) = e.retry_after_secs {
            metadata.insert("retry-after", secs.into());
        }
        status
    }
}

/// The gRPC metadata key that carries an error's [`ErrorCode`].
pub const GRPC_ERROR_CODE: &str = "omr-error-code";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_to_a_grpc_status_of_the_same_class() {
        for code in ErrorCode::ALL {
            let grpc = ServiceError::grpc_code(code);
            let http = code.http_status();
            match http {
                400 | 415 => assert_eq!(grpc, tonic::Code::InvalidArgument, "{code}"),
                413 | 429 | 507 => assert_eq!(grpc, tonic::Code::ResourceExhausted, "{code}"),
                500 => assert_eq!(grpc, tonic::Code::Internal, "{code}"),
                503 => assert_eq!(grpc, tonic::Code::Unavailable, "{code}"),
                _ => assert_ne!(grpc, tonic::Code::Ok, "{code}"),
            }
        }
        let s = tonic::Status::from(ServiceError::unknown_key("k"));
        assert_eq!(
            (s.code(), s.message()),
            (tonic::Code::NotFound, "no detection key k")
        );
    }
}
