//! The bindings' one exception family, [`OmrError`]: every variant carries the service's error
//! code (`rate_limited`, `duplicate_message`, `unknown_key`, … as omrd names them, or one of
//! the client's own below), a message for people (`detail`) and whether trying again may help
//! (`retryable`). The variant says where the problem lies.
//!
//! The client's own codes: `unreachable`, `tls`, `timeout`, `protocol` (the server or the
//! network), `bad_address`, `bad_invite`, `bad_url`, `bad_ca_cert`, `bad_param_set`,
//! `insecure_params`, `payload_too_large`, `attachment_too_large`, `no_attachments`,
//! `attachment_invalid`, `invalid` (the caller's input), `file`, `bad_file`,
//! `not_registered`, `already_registered`, `postage`, `overflow`, `callback`, `cancelled`,
//! `stale_inbox`, `bad_receipt`, `follow_stopped`, `internal` (this device).

use omr_client::Error as Sdk;

/// Everything a call of the bindings can fail with.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum OmrError {
    /// The server refused the call and stored nothing (a rate limit, a wrong token, an
    /// unknown key, a duplicate post, an invite it does not take, …).
    #[error("{detail} ({code})")]
    Refused {
        code: String,
        detail: String,
        retryable: bool,
    },
    /// The server could not be reached or failed (`unreachable`, `timeout`, `tls`, the
    /// server's `internal` or `unavailable`, an answer of the wrong shape).
    #[error("{detail} ({code})")]
    Unavailable {
        code: String,
        detail: String,
        retryable: bool,
    },
    /// The caller's input is not usable (an address, an invite code, a payload too large, a
    /// URL, a parameter set); checked before anything is sent.
    #[error("{detail} ({code})")]
    Invalid {
        code: String,
        detail: String,
        retryable: bool,
    },
    /// Something on this device: a key directory's files, a registration missing, postage
    /// that could not be solved, a callback that raised, a call cancelled.
    #[error("{detail} ({code})")]
    Local {
        code: String,
        detail: String,
        retryable: bool,
    },
}

impl OmrError {
    /// The service's (or the client's) error code.
    pub fn code(&self) -> &str {
        match self {
            OmrError::Refused { code, .. }
            | OmrError::Unavailable { code, .. }
            | OmrError::Invalid { code, .. }
            | OmrError::Local { code, .. } => code,
        }
    }

    pub(crate) fn invalid(code: &str, detail: impl std::fmt::Display) -> Self {
        OmrError::Invalid {
            code: code.into(),
            detail: detail.to_string(),
            retryable: false,
        }
    }

    pub(crate) fn local(code: &str, detail: impl std::fmt::Display) -> Self {
        OmrError::Local {
            code: code.into(),
            detail: detail.to_string(),
            retryable: false,
        }
    }
}

impl From<Sdk> for OmrError {
    fn from(e: Sdk) -> Self {
        let detail = e.to_string();
        let retryable = e.is_transient();
        let (kind, code): (fn(String, String, bool) -> OmrError, String) = match &e {
            Sdk::Unreachable { .. } => (unavailable, "unreachable".into()),
            Sdk::Tls { .. } => (unavailable, "tls".into()),
            Sdk::Timeout { .. } => (unavailable, "timeout".into()),
            Sdk::Server { code, .. } => (unavailable, code.clone()),
            Sdk::Protocol { .. } => (unavailable, "protocol".into()),
            Sdk::Busy { code, .. } | Sdk::Rejected { code, .. } => (refused, code.clone()),
            Sdk::Unauthenticated { .. } => (refused, "unauthorized".into()),
            Sdk::Forbidden { .. } => (refused, "forbidden".into()),
            Sdk::NotAdmitted { .. } => (refused, "invite".into()),
            Sdk::UnknownKey { .. } => (refused, "unknown_key".into()),
            Sdk::AlreadyPosted { .. } => (refused, "duplicate_message".into()),
            Sdk::NoAttachments { .. } => (refused, "no_attachments".into()),
            Sdk::BadInvite(_) => (invalid, "bad_invite".into()),
            Sdk::AttachmentTooLarge { .. } => (invalid, "attachment_too_large".into()),
            Sdk::SealedPayloadTooLarge { .. } => (invalid, "payload_too_large".into()),
            Sdk::BadUrl { .. } => (invalid, "bad_url".into()),
            Sdk::BadCaCert { .. } => (invalid, "bad_ca_cert".into()),
            Sdk::Omr(_) => (invalid, "invalid".into()),
            Sdk::Attachment { .. } => (local, "attachment_invalid".into()),
            Sdk::Postage(_) => (local, "postage".into()),
            Sdk::Overflow { .. } => (local, "overflow".into()),
            Sdk::File { .. } => (local, "file".into()),
            Sdk::BadFile { .. } => (local, "bad_file".into()),
        };
        kind(code, detail, retryable)
    }
}

fn refused(code: String, detail: String, retryable: bool) -> OmrError {
    OmrError::Refused {
        code,
        detail,
        retryable,
    }
}

fn unavailable(code: String, detail: String, retryable: bool) -> OmrError {
    OmrError::Unavailable {
        code,
        detail,
        retryable,
    }
}

fn invalid(code: String, detail: String, retryable: bool) -> OmrError {
    OmrError::Invalid {
        code,
        detail,
        retryable,
    }
}

fn local(code: String, detail: String, retryable: bool) -> OmrError {
    OmrError::Local {
        code,
        detail,
        retryable,
    }
}

/// A foreign callback (a progress or inbox listener) raised: the call it was given to ends
/// with this error.
impl From<uniffi::UnexpectedUniFFICallbackError> for OmrError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        OmrError::local("callback", format!("a callback raised: {}", e.reason))
    }
}

pub type Result<T, E = OmrError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use omr_client::{Api, Error as Sdk};

    use super::OmrError;

    fn url() -> String {
        "http://omrd".into()
    }

    #[test]
    fn sdk_errors_keep_their_codes_and_say_whether_to_retry() {
        let busy = Sdk::Busy {
            api: Api::Http,
            url: url(),
            code: "rate_limited".into(),
            message: "slow down".into(),
            retry_after: std::time::Duration::from_secs(1),
        };
        let rejected = Sdk::Rejected {
            api: Api::Http,
            url: url(),
            code: "malformed_clue".into(),
            message: "no".into(),
        };
        let down = Sdk::Unreachable {
            api: Api::Grpc,
            url: url(),
            reason: "refused".into(),
        };
        let cases = [
            (OmrError::from(busy), "rate_limited", true, "Refused"),
            (rejected.into(), "malformed_clue", false, "Refused"),
            (
                Sdk::AlreadyPosted { index: 7 }.into(),
                "duplicate_message",
                false,
                "Refused",
            ),
            (down.into(), "unreachable", true, "Unavailable"),
            (
                Sdk::BadInvite("x".into()).into(),
                "bad_invite",
                false,
                "Invalid",
            ),
        ];
        for (e, code, retryable, variant) in cases {
            assert_eq!(e.code(), code, "{e:?}");
            let (r, v) = match &e {
                OmrError::Refused { retryable, .. } => (*retryable, "Refused"),
                OmrError::Unavailable { retryable, .. } => (*retryable, "Unavailable"),
                OmrError::Invalid { retryable, .. } => (*retryable, "Invalid"),
                OmrError::Local { retryable, .. } => (*retryable, "Local"),
            };
            assert_eq!((r, v), (retryable, variant), "{e:?}");
            // The detail is the SDK's message, which names the server or what to do.
            assert!(e.to_string().ends_with(&format!("({code})")), "{e}");
        }
        let dup = OmrError::from(Sdk::AlreadyPosted { index: 7 });
        assert!(dup.to_string().contains("index 7"), "{dup}");
    }
}
