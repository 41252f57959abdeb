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
    let token = token_of(authorization)?;
    let meta = store
        .key(key_id)
        .await
        .map_err(|e| ServiceError::internal("loading a key", e))?
        .ok_or_else(|| ServiceError::unknown_key(key_id))?;
    check(token, &meta)?;
    Ok(meta)
}

/// [`authorize`] against `meta` already read (a key's answer kept in memory).
pub fn authorize_with(meta: &KeyMeta, authorization: Option<&str>) -> Result<(), ServiceError> {
    check(token_of(authorization)?, meta)
}

/// The token of an `Authorization` value.
fn token_of(authorization: Option<&str>) -> Result<&str, ServiceError> {
    let value = authorization.ok_or_else(|| {
        ServiceError::new(
            ErrorCode::Unauthorized,
            "missing Authorization: Bearer <token>",
        )
    })?;
    bearer(value).ok_or_else(|| {
        ServiceError::new(
            ErrorCode::Unauthorized,
            "authorization must be 'Bearer <token>'",
        )
    })
}

/// Whether `token` is `meta`'s key's.
fn check(token: &str, meta: &KeyMeta) -> Result<(), ServiceError> {
    if !token_matches(token, &meta.token_hash) {
        return Err(ServiceError::new(
            ErrorCode::Forbidden,
            "the token does not belong to this key",
        ));
    }
    Ok(())
}
