//! The `omr.v1` gRPC API generated from `proto/omr/v1/detector.proto`, the registration
//! stream both sides use, and conversions to the shared wire types of `omr-api` (`StartAt`,
//! `KeyStatus`).

/// Generated types and service traits.
#[allow(clippy::all, missing_debug_implementations)]
pub mod v1 {
    tonic::include_proto!("omr.v1");
}

/// Encoded file descriptor set, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("omr_descriptor");

use std::sync::Arc;

use omr_api::http::KeyStatus;
use omr_api::{StartAt, CHUNK_BYTES};
use v1::register_detection_key_request::Part;
use v1::registration_header::Start;
use v1::{GetKeyStatusResponse, RegisterDetectionKeyRequest, RegistrationHeader};

impl From<StartAt> for Start {
    fn from(s: StartAt) -> Start {
        match s {
            StartAt::Now => Start::FromNow(true),
            StartAt::Index(i) => Start::StartIndex(i),
        }
    }
}

impl From<Start> for StartAt {
    fn from(s: Start) -> StartAt {
        match s {
            Start::StartIndex(i) => StartAt::Index(i),
            Start::FromNow(_) => StartAt::Now,
        }
    }
}

impl From<KeyStatus> for GetKeyStatusResponse {
    fn from(s: KeyStatus) -> GetKeyStatusResponse {
        GetKeyStatusResponse {
            key_id: s.key_id,
            param_set: s.param_set,
            kbar: s.kbar,
            start_index: s.start_index,
            cursor: s.cursor,
            board_head: s.board_head,
            lag: s.lag,
            key_bytes: s.key_bytes,
            registered_at: s.registered_at,
            state: s.state,
            eta_secs: s.eta_secs,
            refresh_at: s.refresh_at,
        }
    }
}

impl From<GetKeyStatusResponse> for KeyStatus {
    fn from(s: GetKeyStatusResponse) -> KeyStatus {
        KeyStatus {
            key_id: s.key_id,
            param_set: s.param_set,
            kbar: s.kbar,
            start_index: s.start_index,
            cursor: s.cursor,
            board_head: s.board_head,
            lag: s.lag,
            key_bytes: s.key_bytes,
            registered_at: s.registered_at,
            state: s.state,
            eta_secs: s.eta_secs,
            refresh_at: s.refresh_at,
        }
    }
}

/// The client stream of `RegisterDetectionKey` for an encoded detection key: the header, then
/// the key in chunks of [`CHUNK_BYTES`].
pub fn registration_requests(
    param_set: &str,
    kbar: u32,
    start: Start,
    key: &[u8],
) -> Vec<RegisterDetectionKeyRequest> {
    registration_stream(param_set, kbar, start, None, Arc::from(key)).collect()
}

/// [`registration_requests`] with an invite code in the header (when given), made lazily: each
/// chunk is copied out of `key` only when the transport asks for it, so a 100 MB key is not held
/// twice.
pub fn registration_stream(
    param_set: &str,
    kbar: u32,
    start: Start,
    invite_code: Option<&str>,
    key: Arc<[u8]>,
) -> impl Iterator<Item = RegisterDetectionKeyRequest> + Send + 'static {
    let header = RegisterDetectionKeyRequest {
        part: Some(Part::Header(RegistrationHeader {
            param_set: param_set.to_string(),
            kbar,
            total_bytes: key.len() as u64,
            start: Some(start),
            invite_code: invite_code.unwrap_or_default().to_string(),
        })),
    };
    let chunks = key.len().div_ceil(CHUNK_BYTES);
    std::iter::once(header).chain((0..chunks).map(move |i| {
        let end = ((i + 1) * CHUNK_BYTES).min(key.len());
        RegisterDetectionKeyRequest {
            part: Some(Part::Chunk(key[i * CHUNK_BYTES..end].to_vec())),
        }
    }))
}
