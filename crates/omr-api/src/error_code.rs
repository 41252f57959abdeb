//! [`ErrorCode`]: every stable code an omrd error body carries, and its HTTP status.

use std::fmt;

/// A stable, machine-readable error code (`{"code": "malformed_clue", ...}`).
///
/// Clients match on [`ErrorCode::as_str`]; a code is never renamed once released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The body is not the JSON the route expects.
    MalformedJson,
    /// A clue is not base64 or does not decode.
    MalformedClue,
    /// A payload is not base64.
    MalformedPayload,
    /// A binary message (or batch framing) does not decode.
    MalformedMessage,
    /// The query string or request parameters are invalid.
    MalformedQuery,
    /// A gRPC key upload is malformed (header, order of parts, truncated).
    MalformedUpload,
    /// A detection key does not decode, or contradicts its header.
    InvalidKey,
    /// Clue or key is for another parameter set than the server's.
    ParamSetMismatch,
    /// A payload is longer than the parameter set carries.
    PayloadTooLarge,
    /// The request body is larger than the route accepts.
    BodyTooLarge,
    /// More messages in one batch than `max_batch_messages`.
    BatchTooLarge,
    /// A detection key is larger than `max_key_bytes`, or the upload carries more than declared.
    KeyTooLarge,
    /// A batch with no messages.
    EmptyBatch,
    /// A `Content-Type` the route does not take.
    UnsupportedMediaType,
    /// No (or a malformed) `Bearer` token.
    Unauthorized,
    /// The token does not belong to the key.
    Forbidden,
    /// No such detection key.
    UnknownKey,
    /// The server holds as many detection keys as it accepts (`max_keys`).
    TooManyKeys,
    /// A key registered to start below the oldest board message retention kept.
    StartIndexRetired,
    /// Too many key uploads at once: retry shortly.
    Busy,
    /// A key upload took longer than `key_upload_timeout_secs`.
    UploadTimeout,
    /// The server requires postage (`postage_bits` > 0) and the message carries no stamp.
    PostageRequired,
    /// The message's stamp does not have the leading zero bits the server requires (wrong,
    /// insufficient, or made for another message).
    PostageInvalid,
    /// The server is shutting down: nothing was stored, retry.
    Unavailable,
    /// The server registers keys only with an invite code (`registration = "invite"`), and the
    /// registration carried none.
    InviteRequired,
    /// The invite code is unknown, used up or expired (the message says which).
    InviteInvalid,
    /// An admin API call without `Authorization: Bearer <admin token>`.
    AdminUnauthorized,
    /// An admin API call with a token that is not the admin token.
    AdminForbidden,
    /// The admin API is off: no `admin_token` / `admin_token_file` is configured.
    AdminDisabled,
    /// This client address sent more requests than its rate limit allows: retry after the
    /// `Retry-After` seconds; nothing was stored or consumed.
    RateLimited,
    /// The server has as many requests in progress as it accepts: retry after `Retry-After`.
    Overloaded,
    /// The request did not complete within the server's request timeout.
    RequestTimeout,
    /// Plain HTTP to a server that speaks HTTPS only: use an `https://` URL.
    TlsRequired,
    /// An attachment is longer than the server's `max_attachment_bytes` (or the server takes
    /// none: `max_attachment_bytes = 0`).
    AttachmentTooLarge,
    /// A PIR request for an epoch the server does not serve: past the board head, deleted by
    /// retention, or attachments are off.
    UnknownEpoch,
    /// A PIR request for an epoch still open (the board has not reached its end): retry once it
    /// closes.
    EpochOpen,
    /// A PIR query that does not decode or is not for the epoch's database.
    MalformedPirQuery,
    /// An internal failure; the server logged the cause.
    Internal,
}

impl ErrorCode {
    /// Every code, for documentation and tests.
    pub const ALL: [ErrorCode; 38] = [
        ErrorCode::MalformedJson,
        ErrorCode::MalformedClue,
        ErrorCode::MalformedPayload,
        ErrorCode::MalformedMessage,
        ErrorCode::MalformedQuery,
        ErrorCode::MalformedUpload,
        ErrorCode::InvalidKey,
        ErrorCode::ParamSetMismatch,
        ErrorCode::PayloadTooLarge,
        ErrorCode::BodyTooLarge,
        ErrorCode::BatchTooLarge,
        ErrorCode::KeyTooLarge,
        ErrorCode::EmptyBatch,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::UnknownKey,
        ErrorCode::TooManyKeys,
        ErrorCode::StartIndexRetired,
        ErrorCode::Busy,
        ErrorCode::UploadTimeout,
        ErrorCode::PostageRequired,
        ErrorCode::PostageInvalid,
        ErrorCode::Unavailable,
        ErrorCode::RateLimited,
        ErrorCode::Overloaded,
        ErrorCode::RequestTimeout,
        ErrorCode::TlsRequired,
        ErrorCode::Internal,
        ErrorCode::InviteRequired,
        ErrorCode::InviteInvalid,
        ErrorCode::AdminUnauthorized,
        ErrorCode::AdminForbidden,
        ErrorCode::AdminDisabled,
        ErrorCode::AttachmentTooLarge,
        ErrorCode::UnknownEpoch,
        ErrorCode::EpochOpen,
        ErrorCode::MalformedPirQuery,
    ];

    /// The code as it appears in error bodies and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::MalformedJson => "malformed_json",
            ErrorCode::MalformedClue => "malformed_clue",
            ErrorCode::MalformedPayload => "malformed_payload",
            ErrorCode::MalformedMessage => "malformed_message",
            ErrorCode::MalformedQuery => "malformed_query",
            ErrorCode::MalformedUpload => "malformed_upload",
            ErrorCode::InvalidKey => "invalid_key",
            ErrorCode::ParamSetMismatch => "param_set_mismatch",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::BodyTooLarge => "body_too_large",
            ErrorCode::BatchTooLarge => "batch_too_large",
            ErrorCode::KeyTooLarge => "key_too_large",
            ErrorCode::EmptyBatch => "empty_batch",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::UnknownKey => "unknown_key",
            ErrorCode::TooManyKeys => "too_many_keys",
            ErrorCode::StartIndexRetired => "start_index_retired",
            ErrorCode::Busy => "busy",
            ErrorCode::UploadTimeout => "upload_timeout",
            ErrorCode::PostageRequired => "postage_required",
            ErrorCode::PostageInvalid => "postage_invalid",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::TlsRequired => "tls_required",
            ErrorCode::Internal => "internal",
            ErrorCode::InviteRequired => "invite_required",
            ErrorCode::InviteInvalid => "invite_invalid",
            ErrorCode::AdminUnauthorized => "admin_unauthorized",
            ErrorCode::AdminForbidden => "admin_forbidden",
            ErrorCode::AdminDisabled => "admin_disabled",
            ErrorCode::AttachmentTooLarge => "attachment_too_large",
            ErrorCode::UnknownEpoch => "unknown_epoch",
            ErrorCode::EpochOpen => "epoch_open",
            ErrorCode::MalformedPirQuery => "malformed_pir_query",
        }
    }

    /// The code named `s`, if any.
    pub fn parse(s: &str) -> Option<ErrorCode> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The HTTP status an error with this code is answered with.
    pub const fn http_status(self) -> u16 {
        match self {
            ErrorCode::MalformedJson
            | ErrorCode::MalformedClue
            | ErrorCode::MalformedPayload
            | ErrorCode::MalformedMessage
            | ErrorCode::MalformedQuery
            | ErrorCode::MalformedUpload
            | ErrorCode::InvalidKey
            | ErrorCode::ParamSetMismatch
            | ErrorCode::EmptyBatch
            | ErrorCode::MalformedPirQuery
            | ErrorCode::TlsRequired => 400,
            ErrorCode::Unauthorized | ErrorCode::InviteRequired | ErrorCode::AdminUnauthorized => {
                401
            }
            // Payment Required: postage is the payment (a proof of work, not money).
            ErrorCode::PostageRequired | ErrorCode::PostageInvalid => 402,
            ErrorCode::Forbidden | ErrorCode::InviteInvalid | ErrorCode::AdminForbidden => 403,
            ErrorCode::UnknownKey | ErrorCode::AdminDisabled | ErrorCode::UnknownEpoch => 404,
            ErrorCode::UploadTimeout | ErrorCode::RequestTimeout => 408,
            ErrorCode::EpochOpen => 409,
            ErrorCode::StartIndexRetired => 410,
            ErrorCode::AttachmentTooLarge
            | ErrorCode::PayloadTooLarge
            | ErrorCode::BodyTooLarge
            | ErrorCode::BatchTooLarge
            | ErrorCode::KeyTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::RateLimited => 429,
            ErrorCode::Internal => 500,
            ErrorCode::TooManyKeys => 507,
            ErrorCode::Busy | ErrorCode::Unavailable | ErrorCode::Overloaded => 503,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn every_code_round_trips_through_its_name_and_names_are_unique() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(c.as_str()), Some(c));
        }
        let mut names: Vec<_> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        assert_eq!(ErrorCode::parse("no_such_code"), None);
    }

    #[test]
    fn client_errors_are_4xx_and_failures_5xx() {
        assert_eq!(ErrorCode::MalformedClue.http_status(), 400);
        assert_eq!(ErrorCode::UnknownKey.http_status(), 404);
        assert_eq!(ErrorCode::Internal.http_status(), 500);
        assert_eq!(ErrorCode::Unavailable.http_status(), 503);
        assert_eq!(ErrorCode::PostageRequired.http_status(), 402);
        assert_eq!(ErrorCode::PostageInvalid.http_status(), 402);
    }
}
