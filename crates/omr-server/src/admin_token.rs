//! [`AdminToken`]: the admin API's bearer token as configuration holds it (`admin_token`, or
//! the first line of `admin_token_file`): never printed, never serialized, compared only
//! through its SHA-256.

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer};

/// Shortest admin token accepted, in characters (`openssl rand -hex 32` gives 64).
pub const MIN_ADMIN_TOKEN_LEN: usize = 16;

/// The admin API's bearer token: kept in a [`SecretString`] (zeroed when dropped), printed by
/// `Debug` as `[redacted]`, never serialized; compared only through its SHA-256
/// ([`AdminToken::sha256`]), in constant time (`crate::tokens::token_matches`).
#[derive(Clone)]
pub struct AdminToken(SecretString);

impl AdminToken {
    pub fn new(token: impl Into<String>) -> AdminToken {
        AdminToken(SecretString::from(token.into()))
    }

    /// The SHA-256 of the token, the only form the server keeps while it runs.
    pub fn sha256(&self) -> [u8; 32] {
        use sha2::Digest as _;
        sha2::Sha256::digest(self.0.expose_secret().as_bytes()).into()
    }

    pub(crate) fn char_count(&self) -> usize {
        self.0.expose_secret().chars().count()
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken([redacted])")
    }
}

/// Equal tokens have equal hashes (compared in constant time).
impl PartialEq for AdminToken {
    fn eq(&self, other: &AdminToken) -> bool {
        crate::tokens::token_matches(self.0.expose_secret(), &other.sha256())
    }
}

impl<'de> Deserialize<'de> for AdminToken {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AdminToken, D::Error> {
        String::deserialize(d).map(AdminToken::new)
    }
}
