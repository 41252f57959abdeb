//! Access tokens: 256 random bits shown once, stored as SHA-256, compared in constant time
//! (key tokens in `service::auth`, the admin token in `admin_token`); the `Bearer` scheme.

use rand::RngCore;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

/// A fresh token (hex) and the hash to store.
pub fn new_token() -> (String, [u8; 32]) {
    let mut raw = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut raw);
    let token = hex::encode(raw);
    let hash = Sha256::digest(token.as_bytes()).into();
    (token, hash)
}

/// The token of an `Authorization: Bearer <token>` value; the scheme's name is
/// case-insensitive (RFC 9110, section 11.1).
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
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
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("BEARER  abc "), Some("abc"));
        assert_eq!(bearer("Bearerabc"), None);
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
    }
}
