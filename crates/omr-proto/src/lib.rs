//! The `omr.v1` gRPC API generated from `proto/omr/v1/detector.proto`.

/// Generated types and service traits.
#[allow(clippy::all, missing_debug_implementations)]
pub mod v1 {
    tonic::include_proto!("omr.v1");
}

/// Encoded file descriptor set, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("omr_descriptor");
