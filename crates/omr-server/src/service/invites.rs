//! Invite codes (`registration = "invite"`): minting one ([`mint`], behind both
//! `omrd invite create` and `POST /v1/admin/invites`) and the check a registration makes from
//! its header ([`admit`]). The store keeps only a code's SHA-256 and takes a use in the
//! transaction that stores the key.

use std::num::NonZeroU32;
use std::time::Duration;

use omr_api::http::CreatedInvite;
use omr_api::invite::normalize_invite_code;
use omr_api::ErrorCode;
use omr_store::{Store, StoreError, MAX_INVITE_USES};
use rand::RngCore;
use sha2::{Digest as _, Sha256};

use crate::error::ServiceError;

/// Longest expiry accepted: 100 years (anything longer is "never", which is the default).
pub const MAX_EXPIRY: Duration = Duration::from_secs(omr_api::http::MAX_INVITE_EXPIRY_SECS);

/// The hash a code is stored and looked up under. A plain SHA-256 is sound here, where it would
/// not be for a password: a code is 128 bits from the operating system's generator, so its hash
/// cannot be inverted by guessing, however fast the hash (the same holds for access tokens).
pub fn code_hash(code: &str) -> [u8; 32] {
    Sha256::digest(code.as_bytes()).into()
}

/// A fresh code (32 lower-case hex digits: 128 random bits) and its hash.
pub fn new_code() -> (String, [u8; 32]) {
    let mut raw = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut raw);
    let code = hex::encode(raw);
    let hash = code_hash(&code);
    (code, hash)
}

/// Why no code was minted.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// The uses or the expiry asked for are out of range (the message says which).
    #[error("{0}")]
    Invalid(String),
    #[error("storing the invite: {0}")]
    Store(#[from] StoreError),
}

/// The admin API's answer: fields of its JSON body out of range as `malformed_json`, a store
/// failure logged and answered as `internal`.
impl From<MintError> for ServiceError {
    fn from(e: MintError) -> ServiceError {
        match e {
            MintError::Invalid(m) => ServiceError::new(ErrorCode::MalformedJson, m),
            MintError::Store(e) => ServiceError::internal("storing an invite", e),
        }
    }
}

/// Mint a code admitting `uses` registrations, expiring `expires` from now (`None`: never),
/// and store its hash. The code is in the answer and nowhere else.
pub async fn mint(
    store: &Store,
    uses: u32,
    expires: Option<Duration>,
) -> Result<CreatedInvite, MintError> {
    let uses = NonZeroU32::new(uses)
        .filter(|u| u.get() <= MAX_INVITE_USES)
        .ok_or_else(|| {
            MintError::Invalid(format!("uses must be 1 to {MAX_INVITE_USES}, not {uses}"))
        })?;
    let expires_at = match expires {
        None => None,
        Some(d) if d.is_zero() || d > MAX_EXPIRY => {
            return Err(MintError::Invalid(format!(
                "the expiry must be 1 s to 100 years from now (or none), not {} s",
                d.as_secs()
            )))
        }
        Some(d) => {
            let d = chrono::Duration::from_std(d).map_err(|e| MintError::Invalid(e.to_string()))?;
            Some(chrono::Utc::now() + d)
        }
    };
    let (code, hash) = new_code();
    store
        .create_invite(&hash, uses, expires_at.map(|t| t.timestamp_millis()))
        .await?;
    tracing::info!(
        uses = uses.get(),
        expires_at = %expires_at.map_or("never".to_string(), |t| t.to_rfc3339()),
        "invite code minted"
    );
    Ok(CreatedInvite {
        code,
        uses: uses.get(),
        expires_at: expires_at.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
    })
}

/// The check of a registration's header on a server with `registration = "invite"`: the code
/// must be there, well formed, and admit a registration now. Returns its hash, which the insert
/// presents to take the use. Nothing is taken here.
pub async fn admit(store: &Store, invite_code: &str) -> Result<[u8; 32], ServiceError> {
    if invite_code.trim().is_empty() {
        return Err(ServiceError::invite_required());
    }
    let code = normalize_invite_code(invite_code).map_err(|e| {
        ServiceError::new(ErrorCode::InviteInvalid, format!("{e}; nothing was stored"))
    })?;
    let hash = code_hash(&code);
    match store.check_invite(&hash).await {
        Ok(()) => Ok(hash),
        Err(StoreError::InviteRefused(r)) => Err(ServiceError::invite_refused(r)),
        Err(e) => Err(ServiceError::internal("reading an invite", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_128_random_bits_in_hex_and_stored_as_their_sha256() {
        let (a, ha) = new_code();
        let (b, _) = new_code();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert_eq!(normalize_invite_code(&a).as_deref(), Ok(a.as_str()));
        assert_eq!(ha, code_hash(&a));
    }
}
