//! The `omr.v1` gRPC API generated from `proto/omr/v1/detector.proto`.

/// Generated types and service traits.
#[allow(clippy::all, missing_debug_implementations)]
pub mod v1 {
    tonic::include_proto!("omr.v1");
}

/// Encoded file descriptor set, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("omr_descriptor");

use v1::register_detection_key_request::Part;
use v1::registration_header::Start;
use v1::{RegisterDetectionKeyRequest, RegistrationHeader};

/// Largest chunk a client should send (the server accepts messages up to 5 MiB).
pub const KEY_CHUNK_BYTES: usize = 1 << 20;

/// The client stream of `RegisterDetectionKey` for an encoded detection key: the header, then
/// the key in chunks of [`KEY_CHUNK_BYTES`].
pub fn registration_requests(
    param_set: &str,
    kbar: u32,
    start: Start,
    key: &[u8],
) -> Vec<RegisterDetectionKeyRequest> {
    let header = RegisterDetectionKeyRequest {
        part: Some(Part::Header(RegistrationHeader {
            param_set: param_set.to_string(),
            kbar,
            total_bytes: key.len() as u64,
            start: Some(start),
        })),
    };
    std::iter::once(header)
        .chain(
            key.chunks(KEY_CHUNK_BYTES)
                .map(|c| RegisterDetectionKeyRequest {
                    part: Some(Part::Chunk(c.to_vec())),
                }),
        )
        .collect()
}
