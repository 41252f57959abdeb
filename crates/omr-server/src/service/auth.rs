//! [`authorize`], the one check every call on a key makes (HTTP and gRPC alike): its
//! `Bearer` token against the stored hash (`crate::tokens`).

use omr_api::ErrorCode;
use omr_store::{KeyMeta, Store};

use crate::error::ServiceError;
pub use crate::tokens::{bearer, new_token, token_matches};

/// Authenticate a call on `key_id` whose `Authorization` value (header or gRPC metadata; `None`
/// when absent or not text) should be `Bearer <token>`; returns the key's metadata.
pub async fn authorize(
    store: &Store,
    key_id: &str,
    authorization: Option<&str>,
) -> Result<KeyMeta, ServiceError> {
    let value = authorization.ok_or_else(|| {
        ServiceError::new(
            ErrorCode::Unauthorized,
            "missing Authorization: Bearer <token>",
        )
    })?;
    let token = bearer(value).ok_or_else(|| {
        ServiceError::new(
            ErrorCode::Unauthorized,
            "authorization must be 'Bearer <token>'",
        )
    })?;
    let meta = store
        .key(key_id)
        .await
        .map_err(|e| ServiceError::internal("loading a key", e))?
        .ok_or_else(|| ServiceError::unknown_key(key_id))?;
    if !token_matches(token, &meta.token_hash) {
        return Err(ServiceError::new(
            ErrorCode::Forbidden,
            "the token does not belong to this key",
        ));
    }
    Ok(meta)
}
