//! [`ServiceError`] as a gRPC status: the code's gRPC status (from `ErrorCode`'s table), the
//! message as is, and the error code in the `omr-error-code` metadata (with `retry-after`, in
//! seconds, when the error says when to retry), so that clients can tell a rate limit from other
//! `RESOURCE_EXHAUSTED` refusals.

use omr_api::ErrorCode;
use tonic::{Code, Status};

use crate::error::ServiceError;

/// The gRPC metadata key that carries an error's [`ErrorCode`].
pub const GRPC_ERROR_CODE: &str = "omr-error-code";

/// The gRPC status code for an error with `code` (the code's table in omr-api gives it).
pub fn grpc_code(code: ErrorCode) -> Code {
    Code::from_i32(code.grpc_code() as i32)
}

impl From<ServiceError> for Status {
    fn from(e: ServiceError) -> Self {
        let mut status = Status::new(grpc_code(e.code), e.message);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_to_a_grpc_status_of_the_same_class() {
        for code in ErrorCode::ALL {
            let grpc = grpc_code(code);
            let http = code.http_status();
            match http {
                400 | 415 => assert_eq!(grpc, Code::InvalidArgument, "{code}"),
                413 | 429 | 507 => assert_eq!(grpc, Code::ResourceExhausted, "{code}"),
                500 => assert_eq!(grpc, Code::Internal, "{code}"),
                503 => assert_eq!(grpc, Code::Unavailable, "{code}"),
                _ => assert_ne!(grpc, Code::Ok, "{code}"),
            }
        }
        let s = Status::from(ServiceError::unknown_key("k"));
        assert_eq!(
            (s.code(), s.message()),
            (Code::NotFound, "no detection key k")
        );
    }
}
