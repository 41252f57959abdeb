//! The SDK's one error type. Every variant says what failed, where, and — where there is one —
//! what to do about it.

use std::path::PathBuf;

use thiserror::Error;

/// Which of omrd's two listeners a call went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Http,
    Grpc,
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Api::Http => "HTTP",
            Api::Grpc => "gRPC",
        })
    }
}

/// Everything a client call can fail with.
#[derive(Debug, Error)]
pub enum Error {
    /// No connection could be made (refused, DNS, TLS, connect timeout).
    #[error("cannot reach {api} server at {url}: {reason}; is omrd running and listening there?")]
    Unreachable {
        api: Api,
        url: String,
        reason: String,
    },
    /// The TLS handshake failed: most often a certificate this client does not trust.
    #[error("TLS with the {api} server at {url} failed: {reason}; if its certificate is private or self-signed, pass the CA that signed it with --ca-cert (OMR_CA_CERT)")]
    Tls {
        api: Api,
        url: String,
        reason: String,
    },
    /// The server refused for now and stored nothing: this client address's rate limit
    /// (`429 rate_limited`) or a full server (`503 overloaded`). Retried after `retry_after`
    /// (the server's `Retry-After`) while retries are left, even for calls that must not reach
    /// the server twice, since nothing was done.
    #[error("{api} server at {url} refused for now ({code}): {message}; retry in {} s", retry_after.as_secs())]
    Busy {
        api: Api,
        url: String,
        code: String,
        message: String,
        retry_after: std::time::Duration,
    },
    /// The server did not answer within the client's timeout.
    #[error("{api} server at {url} did not answer within {secs} s")]
    Timeout { api: Api, url: String, secs: u64 },
    /// The call carried no token, or the server wants one.
    #[error("{api} server at {url} refused the call: no access token ({message})")]
    Unauthenticated {
        api: Api,
        url: String,
        message: String,
    },
    /// The token is not the key's.
    #[error("{api} server at {url} refused the access token for key {key_id}: {message}; is registration.json from this server?")]
    Forbidden {
        api: Api,
        url: String,
        key_id: String,
        message: String,
    },
    /// The server did not admit the registration: it wants an invite code, or the code is
    /// unknown, used up or expired (its message says which and what to do).
    #[error("{api} server at {url} did not admit the key: {message}")]
    NotAdmitted {
        api: Api,
        url: String,
        message: String,
    },
    /// An invite code that is not one (checked before anything is sent).
    #[error("invalid invite code: {0}")]
    BadInvite(String),
    /// The key is not registered on this server (never was, or was deleted).
    #[error("{api} server at {url} has no detection key {key_id}; register it again with `omr register`")]
    UnknownKey {
        api: Api,
        url: String,
        key_id: String,
    },
    /// The server rejected the request (4xx / invalid argument …); `code` is its error code.
    #[error("the attachment is {bytes} bytes; the server at {url} takes attachments of at most {max} bytes (its max_attachment_bytes, less the seal's overhead)")]
    AttachmentTooLarge {
        url: String,
        bytes: usize,
        max: usize,
    },
    #[error("the server at {url} takes no attachments (max_attachment_bytes = 0)")]
    NoAttachments { url: String },
    #[error("the attachment of message {index} was not opened: {reason}")]
    Attachment { index: u64, reason: String },
    /// The message is already on the board at `index` (`duplicate_message`): an earlier post
    /// of the same bytes was stored. [`crate::Client::post`] answers it as posted.
    #[error("the message is already on the board at index {index}")]
    AlreadyPosted { index: u64 },
    #[error("{api} server at {url} rejected the request ({code}): {message}")]
    Rejected {
        api: Api,
        url: String,
        code: String,
        message: String,
    },
    /// The server failed (5xx / internal / unavailable) and retries did not help.
    #[error("{api} server at {url} failed ({code}): {message}")]
    Server {
        api: Api,
        url: String,
        code: String,
        message: String,
    },
    /// The answer did not have the expected shape.
    #[error("unexpected answer from {api} server at {url}: {message}")]
    Protocol {
        api: Api,
        url: String,
        message: String,
    },
    /// A key, clue, message or digest failed to encode, decode or check.
    #[error(transparent)]
    Omr(#[from] omr_core::OmrError),
    /// Postage could not be solved (the server asks for more bits than can be, or it stopped).
    #[error(transparent)]
    Postage(#[from] crate::postage::SolveError),
    /// A digest range holds more pertinent messages than k̄ and cannot be split further (one
    /// epoch of the server holds them all).
    #[error("board messages [{start}, {end}) hold more than k̄ = {kbar} messages for this key and the server cannot split the range further; register a key with a larger k̄ (omr keygen --kbar)")]
    Overflow { start: u64, end: u64, kbar: usize },
    /// A payload too long to seal into one message.
    #[error("the message is {bytes} bytes; sealed, at most {max} bytes fit (the parameter set's payload less the seal's 50): shorten it, or send it unsealed with --plaintext (readable by anyone)")]
    SealedPayloadTooLarge { bytes: usize, max: usize },
    /// A local file could not be read or written.
    #[error("{action} {path}: {source}")]
    File {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A local file exists but is not what it should be.
    #[error("{path}: {message}")]
    BadFile { path: PathBuf, message: String },
    /// A CA certificate given to the client is not usable.
    #[error("CA certificate: {message}")]
    BadCaCert { message: String },
    /// A URL given to the client is not usable.
    #[error("invalid {api} URL {url:?}: {message}")]
    BadUrl {
        api: Api,
        url: String,
        message: String,
    },
}

impl Error {
    /// Whether retrying the same idempotent call may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Unreachable { .. }
                | Error::Timeout { .. }
                | Error::Server { .. }
                | Error::Busy { .. }
        )
    }

    pub(crate) fn file(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::File {
            action,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn bad_file(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::BadFile {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Shorthand for the SDK's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;
