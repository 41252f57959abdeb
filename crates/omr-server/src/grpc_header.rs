//! The check of a key registration's header, before any key byte is read (`grpc.rs` applies it;
//! the decoder fuzz tests call it as omrd does).

use omr_api::ErrorCode;
use omr_core::ParamSet;
use omr_proto::v1::RegistrationHeader;

use crate::error::ServiceError;

/// Check a registration header against a server running `server_params` that accepts keys of
/// at most `max_key_bytes`, before any key byte is read. Public for the decoder fuzz tests.
pub fn check_header(
    h: &RegistrationHeader,
    server_params: &'static ParamSet,
    max_key_bytes: u64,
) -> Result<(), ServiceError> {
    let malformed = |m: String| ServiceError::new(ErrorCode::MalformedUpload, m);
    let mismatch = |m: String| ServiceError::new(ErrorCode::ParamSetMismatch, m);
    let params = ParamSet::by_name(&h.param_set)
        .map_err(|_| mismatch(format!("unknown parameter set {:?}", h.param_set)))?;
    if params != server_params {
        let (name, ours) = (params.name, server_params.name);
        return Err(mismatch(format!(
            "parameter set {name} is not this server's ({ours})"
        )));
    }
    if h.kbar == 0 || h.kbar as usize > params.max_kbar {
        return Err(malformed(format!(
            "k̄ = {} is out of range 1..={}",
            h.kbar, params.max_kbar
        )));
    }
    if h.total_bytes == 0 {
        return Err(malformed("total_bytes must be the key's size".into()));
    }
    if h.total_bytes > max_key_bytes {
        return Err(ServiceError::new(
            ErrorCode::KeyTooLarge,
            format!(
                "key of {} bytes exceeds the limit of {} bytes",
                h.total_bytes, max_key_bytes
            ),
        ));
    }
    if h.start.is_none() {
        return Err(malformed(
            "header must say where to start: from_now or start_index".into(),
        ));
    }
    Ok(())
}
