//! omr-api: the wire types omrd and its clients share, defined once.
//!
//! - [`http`]: the JSON bodies of the HTTP API (board, parameters, key status, errors) and its
//!   query strings.
//! - [`headers`]: the names of the digest response headers.
//! - [`ErrorCode`]: the stable error codes of `{code, message}` bodies, and the HTTP status and
//!   gRPC status ([`GrpcCode`], transport-free) each is answered with.
//! - [`StartAt`] and [`CHUNK_BYTES`]: what the gRPC registry and the store share with the SDK.
//! - [`invite`]: the shape of invite codes (`registration = "invite"`).
//! - [`param_sets`]: the names of the parameter sets a deployment may run, and the default.
//!
//! No transport code: the server (axum, tonic) and the SDK (reqwest, tonic) map these types.

mod error_code;
pub mod headers;
pub mod http;
pub mod invite;
pub mod param_sets;

pub use error_code::{ErrorCode, GrpcCode};

/// Size of one chunk of a detection key or digest streamed over gRPC, and of a stored key chunk.
/// (The server accepts gRPC messages up to 5 MiB.)
pub const CHUNK_BYTES: usize = 1 << 20;

/// Where a newly registered key's detection starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartAt {
    /// At the board head when the key is committed: only messages posted from then on.
    #[default]
    Now,
    /// At a given board index (messages already on the board are detected too).
    Index(u64),
}
