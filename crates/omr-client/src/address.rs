//! A recipient's address: everything a sender needs — the clue key (to make the clue that lets
//! the recipient's detection key find the message) and the seal public key (to seal the
//! payload) — as one line of text that people can copy:
//!
//! ```text
//! omr1 ‖ base64url, unpadded, of: version (1) ‖ seal public key (32) ‖ clue key encoding ‖ check (4)
//! ```
//!
//! `check` is the first 4 bytes of SHA-256 over what precedes it, so a mistyped or truncated
//! address is refused instead of sending to nobody. `omr keygen` writes it to `DIR/address`; `omr
//! address` prints it. An omr-v1 address is 3,838 characters (its clue key is 2,838 bytes); an
//! omr-light-v1 address 4,200 (its clue key, the light address b = a·s + e, is 3,110 bytes).
//! The clue key's header names its parameter set, so the address says it too.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::scheme::ClueKey;
use crate::seal::{SealPublicKey, SEAL_KEY_LEN};

/// What every address starts with.
pub const ADDRESS_PREFIX: &str = "omr1";
const VERSION: u8 = 1;
const CHECK_LEN: usize = 4;
/// The longest address text read (an omr-v1 address is 3,838 characters).
pub const MAX_ADDRESS_CHARS: usize = 64 * 1024;

/// A recipient's public address.
#[derive(Debug, Clone)]
pub struct Address {
    pub clue_key: ClueKey,
    pub seal: SealPublicKey,
}

/// Why text is not an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an OMR address: {0}")]
pub struct BadAddress(pub String);

impl Address {
    /// The address as one line of text.
    pub fn encode(&self) -> String {
        let mut bytes = vec![VERSION];
        bytes.extend_from_slice(&self.seal.to_bytes());
        bytes.extend_from_slice(&self.clue_key.to_bytes());
        let check = Sha256::digest(&bytes);
        bytes.extend_from_slice(&check[..CHECK_LEN]);
        format!("{ADDRESS_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Whether `text` looks like an address (its prefix), as opposed to a file name.
    pub fn looks_like(text: &str) -> bool {
        text.trim_start().starts_with(ADDRESS_PREFIX)
    }

    /// Parse an address (surrounding white space, and line breaks inside it, are ignored).
    pub fn parse(text: &str) -> Result<Address, BadAddress> {
        let bad = |m: &str| BadAddress(m.to_string());
        if text.len() > MAX_ADDRESS_CHARS {
            return Err(bad("far too long"));
        }
        let compact: String = text.split_whitespace().collect();
        let body = compact
            .strip_prefix(ADDRESS_PREFIX)
            .ok_or_else(|| bad(&format!("an address starts with {ADDRESS_PREFIX:?}")))?;
        let bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|e| bad(&format!("not base64url ({e}): was it copied whole?")))?;
        if bytes.len() < 1 + SEAL_KEY_LEN + CHECK_LEN {
            return Err(bad("too short: was it copied whole?"));
        }
        let (content, check) = bytes.split_at(bytes.len() - CHECK_LEN);
        if Sha256::digest(content)[..CHECK_LEN] != *check {
            return Err(bad(
                "its checksum does not match: a character was changed or lost in copying",
            ));
        }
        if content[0] != VERSION {
            return Err(bad(&format!(
                "version {} (this client reads version {VERSION}): upgrade omr",
                content[0]
            )));
        }
        let seal = SealPublicKey::from_bytes(&content[1..1 + SEAL_KEY_LEN])
            .map_err(|e| bad(&e.to_string()))?;
        let clue_key = ClueKey::from_bytes(&content[1 + SEAL_KEY_LEN..])
            .map_err(|e| bad(&format!("its clue key: {e}")))?;
        Ok(Address { clue_key, seal })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::SealKey;

    fn address() -> Address {
        let keys = omr_core::keygen(&omr_core::INSECURE_TEST, 2).unwrap();
        Address {
            clue_key: keys.clue_key.into(),
            seal: SealKey::generate().public().clone(),
        }
    }

    #[test]
    fn an_address_round_trips_even_wrapped_and_refuses_damage() {
        let a = address();
        let text = a.encode();
        assert!(Address::looks_like(&text) && !text.contains(['+', '/', '=', '\n']));
        let back = Address::parse(&format!("  {text}\n")).unwrap();
        assert_eq!(back.seal, a.seal);
        assert_eq!(back.clue_key.to_bytes(), a.clue_key.to_bytes());
        // Wrapped over lines, as a mail client might.
        let wrapped: Vec<String> = text
            .as_bytes()
            .chunks(76)
            .map(|c| String::from_utf8(c.to_vec()).unwrap())
            .collect();
        assert!(Address::parse(&wrapped.join("\n")).is_ok());

        let changed = {
            let mut b = text.clone().into_bytes();
            let i = b.len() / 2;
            b[i] = if b[i] == b'A' { b'B' } else { b'A' };
            String::from_utf8(b).unwrap()
        };
        let e = Address::parse(&changed).unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
        let e = Address::parse(&text[..text.len() - 10])
            .unwrap_err()
            .to_string();
        assert!(e.contains("checksum") || e.contains("copied whole"), "{e}");
        let e = Address::parse("alice/clue.key").unwrap_err().to_string();
        assert!(e.contains("starts with \"omr1\""), "{e}");
        assert!(Address::parse("omr1").is_err());
        assert!(Address::parse("omr1!!!").is_err());
    }

    #[test]
    fn a_light_address_round_trips_and_names_its_set() {
        let secret = omr_light::SecretKey::generate(&omr_light::OMR_LIGHT_V1);
        let a = Address {
            clue_key: secret.address().into(),
            seal: SealKey::generate().public().clone(),
        };
        let text = a.encode();
        assert_eq!(text.len(), 4200);
        let back = Address::parse(&text).unwrap();
        assert_eq!(back.clue_key.param_set(), "omr-light-v1");
        assert_eq!(back.clue_key.to_bytes(), a.clue_key.to_bytes());
    }
}
