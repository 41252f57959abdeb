//! [`ErrorCode`]: every stable code an omrd error body carries, with its HTTP status and its
//! gRPC status ([`GrpcCode`]), all from one table.

use std::fmt;

/// The gRPC status codes omrd answers errors with: the canonical names and numbers of
/// `google.rpc.Code`, without a gRPC library (the server converts them, e.g. with
/// `tonic::Code::from_i32(code as i32)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum GrpcCode {
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    Unauthenticated = 16,
}

/// Declares [`ErrorCode`] from one table in which every code appears once, with its docs, its
/// name in error bodies, its HTTP status and its gRPC status: generates the enum,
/// [`ErrorCode::ALL`], [`ErrorCode::as_str`], [`ErrorCode::http_status`] and
/// [`ErrorCode::grpc_code`].
macro_rules! error_codes {
    ($( $(#[$doc:meta])* $code:ident = $name:literal, http: $http:literal, grpc: $grpc:ident; )*) => {
        /// A stable, machine-readable error code (`{"code": "malformed_clue", ...}`).
        ///
        /// Clients match on [`ErrorCode::as_str`]; a code is never renamed once released.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $( $(#[$doc])* $code, )*
        }

        impl ErrorCode {
            /// Every code, for documentation and tests.
            pub const ALL: [ErrorCode; [$(ErrorCode::$code),*].len()] = [$(ErrorCode::$code),*];

            /// The code as it appears in error bodies and metric labels.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( ErrorCode::$code => $name, )*
                }
            }

            /// The HTTP status an error with this code is answered with.
            pub const fn http_status(self) -> u16 {
                match self {
                    $( ErrorCode::$code => $http, )*
                }
            }

            /// The gRPC status an error with this code is answered with.
            pub const fn grpc_code(self) -> GrpcCode {
                match self {
                    $( ErrorCode::$code => GrpcCode::$grpc, )*
                }
            }
        }
    };
}

error_codes! {
    /// The body is not the JSON the route expects.
    MalformedJson = "malformed_json", http: 400, grpc: InvalidArgument;
    /// A clue is not base64 or does not decode.
    MalformedClue = "malformed_clue", http: 400, grpc: InvalidArgument;
    /// A payload is not base64.
    MalformedPayload = "malformed_payload", http: 400, grpc: InvalidArgument;
    /// A binary message (or batch framing) does not decode.
    MalformedMessage = "malformed_message", http: 400, grpc: InvalidArgument;
    /// The query string or request parameters are invalid.
    MalformedQuery = "malformed_query", http: 400, grpc: InvalidArgument;
    /// A gRPC key upload is malformed (header, order of parts, truncated).
    MalformedUpload = "malformed_upload", http: 400, grpc: InvalidArgument;
    /// A detection key does not decode, or contradicts its header.
    InvalidKey = "invalid_key", http: 400, grpc: InvalidArgument;
    /// Clue or key is for another parameter set than the server's.
    ParamSetMismatch = "param_set_mismatch", http: 400, grpc: InvalidArgument;
    /// A payload is longer than the parameter set carries.
    PayloadTooLarge = "payload_too_large", http: 413, grpc: ResourceExhausted;
    /// The request body is larger than the route accepts.
    BodyTooLarge = "body_too_large", http: 413, grpc: ResourceExhausted;
    /// More messages in one batch than `max_batch_messages`.
    BatchTooLarge = "batch_too_large", http: 413, grpc: ResourceExhausted;
    /// A detection key is larger than `max_key_bytes`, or the upload carries more than declared.
    KeyTooLarge = "key_too_large", http: 413, grpc: ResourceExhausted;
    /// A batch with no messages.
    EmptyBatch = "empty_batch", http: 400, grpc: InvalidArgument;
    /// A `Content-Type` the route does not take.
    UnsupportedMediaType = "unsupported_media_type", http: 415, grpc: InvalidArgument;
    /// No (or a malformed) `Bearer` token.
    Unauthorized = "unauthorized", http: 401, grpc: Unauthenticated;
    /// The token does not belong to the key.
    Forbidden = "forbidden", http: 403, grpc: PermissionDenied;
    /// No such detection key.
    UnknownKey = "unknown_key", http: 404, grpc: NotFound;
    /// The server holds as many detection keys as it accepts (`max_keys`).
    TooManyKeys = "too_many_keys", http: 507, grpc: ResourceExhausted;
    /// A key registered to start below the oldest board message retention kept.
    StartIndexRetired = "start_index_retired", http: 410, grpc: FailedPrecondition;
    /// The message (the same clue, payload and attachment) is already on the board: nothing was
    /// appended; the error body's `index` is the index it has. A sender retrying after a lost
    /// answer treats this as success.
    DuplicateMessage = "duplicate_message", http: 409, grpc: AlreadyExists;
    /// A key registered to start past the board head: it would report being caught up while
    /// nothing is detected for it. Register from now, or from an index on the board.
    StartIndexAhead = "start_index_ahead", http: 409, grpc: FailedPrecondition;
    /// No route at this path.
    UnknownRoute = "unknown_route", http: 404, grpc: NotFound;
    /// The route does not take this method.
    MethodNotAllowed = "method_not_allowed", http: 405, grpc: Unimplemented;
    /// Too many key uploads at once: retry shortly.
    Busy = "busy", http: 503, grpc: Unavailable;
    /// A key upload took longer than `key_upload_timeout_secs`.
    UploadTimeout = "upload_timeout", http: 408, grpc: DeadlineExceeded;
    // Payment Required: postage is the payment (a proof of work, not money).
    /// The server requires postage (`postage_bits` > 0) and the message carries no stamp.
    PostageRequired = "postage_required", http: 402, grpc: FailedPrecondition;
    /// The message's stamp does not have the leading zero bits the server requires (wrong,
    /// insufficient, or made for another message).
    PostageInvalid = "postage_invalid", http: 402, grpc: FailedPrecondition;
    /// The server is shutting down: nothing was stored, retry.
    Unavailable = "unavailable", http: 503, grpc: Unavailable;
    /// The server registers keys only with an invite code (`registration = "invite"`), and the
    /// registration carried none.
    InviteRequired = "invite_required", http: 401, grpc: Unauthenticated;
    /// The invite code is unknown, used up or expired (the message says which).
    InviteInvalid = "invite_invalid", http: 403, grpc: PermissionDenied;
    /// An admin API call without `Authorization: Bearer <admin token>`.
    AdminUnauthorized = "admin_unauthorized", http: 401, grpc: Unauthenticated;
    /// An admin API call with a token that is not the admin token.
    AdminForbidden = "admin_forbidden", http: 403, grpc: PermissionDenied;
    /// The admin API is off: no `admin_token` / `admin_token_file` is configured.
    AdminDisabled = "admin_disabled", http: 404, grpc: NotFound;
    /// This client address sent more requests than its rate limit allows: retry after the
    /// `Retry-After` seconds; nothing was stored or consumed.
    RateLimited = "rate_limited", http: 429, grpc: ResourceExhausted;
    /// The server has as many requests in progress as it accepts: retry after `Retry-After`.
    Overloaded = "overloaded", http: 503, grpc: Unavailable;
    /// The request did not complete within the server's request timeout.
    RequestTimeout = "request_timeout", http: 408, grpc: DeadlineExceeded;
    /// Plain HTTP to a server that speaks HTTPS only: use an `https://` URL.
    TlsRequired = "tls_required", http: 400, grpc: InvalidArgument;
    /// An attachment is longer than the server's `max_attachment_bytes` (or the server takes
    /// none: `max_attachment_bytes = 0`).
    AttachmentTooLarge = "attachment_too_large", http: 413, grpc: ResourceExhausted;
    /// A PIR request for an epoch the server does not serve: past the board head, deleted by
    /// retention, or attachments are off.
    UnknownEpoch = "unknown_epoch", http: 404, grpc: NotFound;
    /// A PIR request for an epoch still open (the board has not reached its end): retry once it
    /// closes.
    EpochOpen = "epoch_open", http: 409, grpc: FailedPrecondition;
    /// A PIR query that does not decode or is not for the epoch's database.
    MalformedPirQuery = "malformed_pir_query", http: 400, grpc: InvalidArgument;
    /// omr-light-v1: a payload fetch for a key that has no fetch key uploaded
    /// (`PUT /v1/keys/{key_id}/fetch-key`).
    NoFetchKey = "no_fetch_key", http: 409, grpc: FailedPrecondition;
    /// omr-light-v1: an uploaded fetch key that does not decode (or is for another set).
    InvalidFetchKey = "invalid_fetch_key", http: 400, grpc: InvalidArgument;
    /// An internal failure; the server logged the cause.
    Internal = "internal", http: 500, grpc: Internal;
}

impl ErrorCode {
    /// The code named `s`, if any.
    pub fn parse(s: &str) -> Option<ErrorCode> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::{ErrorCode, GrpcCode};

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

    #[test]
    fn grpc_codes_carry_the_canonical_numbers() {
        assert_eq!(
            ErrorCode::MalformedClue.grpc_code(),
            GrpcCode::InvalidArgument
        );
        assert_eq!(GrpcCode::InvalidArgument as i32, 3);
        assert_eq!(ErrorCode::RateLimited.grpc_code() as i32, 8);
        assert_eq!(ErrorCode::Unauthorized.grpc_code() as i32, 16);
    }
}
