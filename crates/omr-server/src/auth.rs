//! Access tokens: 256 random bits shown once, stored as SHA-256, compared in constant time;
//! [`authorize`], the one check every call on a key makes (HTTP digests and gRPC alike).

use omr_api::ErrorCode;
use omr_store::{KeyMeta, Store};
use rand::RngCore;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

use crate::error::ServiceError;

/// A fresh token (hex) and the hash to store.
pub fn new_token() -> (String, [u8; 32]) {
    let mut raw = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut raw);
    let token = hex::encode(raw);
    let hash = Sha256::digest(token.as_bytes()).into();
    (token, hash)
}

/// The token of an `Authorization: Bearer <token>` value.
pub fn bearer(value: &str) -> Option<&str> {
    value
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

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

/// [`authorize`] an HTTP request on `key_id` by its `Authorization` header.
pub async fn authorize_http(
    store: &Store,
    key_id: &str,
    headers: &axum::http::HeaderMap,
) -> Result<KeyMeta, ServiceError> {
    let authorization = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    authorize(store, key_id, authorization).await
}

/// Whether `token` hashes to `stored_hash`.
pub fn token_matches(token: &str, stored_hash: &[u8]) -> bool {
    let hash = Sha256::digest(token.as_bytes());
    bool::from(hash.as_slice().ct_eq(stored_hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_their_hash() {
        let (t, h) = new_token();
        assert_eq!(t.len(), 64);
        assert!(token_matches(&t, &h));
        assert!(!token_matches(&t[1..], &h));
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
    }
}
