//! Postage: a proof of work that makes every posted message cost its sender CPU, without
//! identifying the sender.
//!
//! A stamp is a 64-bit nonce such that SHA-256 over
//!
//! ```text
//! len(tag) ‖ tag ‖ len(set) ‖ set ‖ len(clue) ‖ clue ‖ len(payload) ‖ payload ‖ len(nonce) ‖ nonce
//! ```
//!
//! has at least the server's `postage_bits` leading zero bits (most significant bit of the first
//! byte first). A message with an attachment adds `len(attachment) ‖ attachment` after the
//! payload ([`Postage::with_attachment`]), so a stamp cannot be moved to another attachment; one
//! without hashes exactly the input above. `tag` is [`POSTAGE_TAG`], `set` the parameter set's name, `clue` the clue's
//! encoding as posted, `nonce` 8 bytes little-endian, and every `len(…)` a u32 little endian, so
//! that no two different messages hash the same input. Checking costs one SHA-256 of about
//! 2.2 KB (omr-v1); finding a stamp costs 2^bits hashes on average. [`Postage`] keeps the hash
//! state after the payload, so each attempt hashes only the last block or two.

use std::ops::Range;

use sha2::{Digest, Sha256};

use crate::error::OmrError;
use crate::params::ParamSet;

/// The domain tag hashed first, so that a stamp is worth nothing outside this scheme.
pub const POSTAGE_TAG: &[u8] = b"omr-postage-v1";

/// The most leading zero bits a server may ask for: 2^32 hashes keep a core busy for minutes.
pub const MAX_POSTAGE_BITS: u32 = 32;

/// The hash state of one message's stamp, before the nonce.
#[derive(Debug, Clone)]
pub struct Postage {
    prefix: Sha256,
}

impl Postage {
    /// Start the stamp hash of the message (`clue` is the clue's encoding, as posted).
    pub fn new(params: &ParamSet, clue: &[u8], payload: &[u8]) -> Postage {
        Postage::named(params.name, clue, payload)
    }

    /// [`Postage::new`] for the set named `set` (of any scheme: omr-light-v1's messages are
    /// stamped the same way).
    pub fn named(set: &str, clue: &[u8], payload: &[u8]) -> Postage {
        let mut prefix = Sha256::new();
        for field in [POSTAGE_TAG, set.as_bytes(), clue, payload] {
            absorb(&mut prefix, field);
        }
        Postage { prefix }
    }

    /// Adds the message's attachment to the stamp hash (nothing when it is empty).
    pub fn with_attachment(mut self, attachment: &[u8]) -> Postage {
        if !attachment.is_empty() {
            absorb(&mut self.prefix, attachment);
        }
        self
    }

    /// The stamp hash with `nonce`.
    pub fn digest(&self, nonce: u64) -> [u8; 32] {
        let mut h = self.prefix.clone();
        absorb(&mut h, &nonce.to_le_bytes());
        h.finalize().into()
    }

    /// How many leading zero bits the stamp hash with `nonce` has.
    pub fn zero_bits(&self, nonce: u64) -> u32 {
        leading_zero_bits(&self.digest(nonce))
    }

    /// The first nonce in `nonces` whose hash has at least `bits` leading zero bits.
    pub fn search(&self, bits: u32, mut nonces: Range<u64>) -> Option<u64> {
        nonces.find(|&n| self.zero_bits(n) >= bits)
    }

    /// The server's check: `Ok` when `bits` is 0 (postage off) or `nonce` is a stamp with at
    /// least `bits` leading zero bits; [`OmrError::PostageRequired`] without a nonce,
    /// [`OmrError::PostageInsufficient`] with one that falls short.
    pub fn check(&self, bits: u32, nonce: Option<u64>) -> Result<(), OmrError> {
        if bits == 0 {
            return Ok(());
        }
        let nonce = nonce.ok_or(OmrError::PostageRequired { bits })?;
        let got = self.zero_bits(nonce);
        if got < bits {
            return Err(OmrError::PostageInsufficient { got, need: bits });
        }
        Ok(())
    }
}

/// A u32 little-endian length, then the bytes.
fn absorb(h: &mut Sha256, field: &[u8]) {
    h.update((field.len() as u32).to_le_bytes());
    h.update(field);
}

/// Leading zero bits of a hash, most significant bit of the first byte first.
pub fn leading_zero_bits(hash: &[u8; 32]) -> u32 {
    let mut bits = 0;
    for &b in hash {
        bits += b.leading_zeros();
        if b != 0 {
            break;
        }
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{INSECURE_TEST, OMR_V1};

    fn postage(clue: &[u8], payload: &[u8]) -> Postage {
        Postage::new(&INSECURE_TEST, clue, payload)
    }

    #[test]
    fn leading_zero_bits_count_from_the_first_byte_s_top_bit() {
        let mut h = [0u8; 32];
        assert_eq!(leading_zero_bits(&h), 256);
        h[0] = 0x80;
        assert_eq!(leading_zero_bits(&h), 0);
        h[0] = 0x01;
        assert_eq!(leading_zero_bits(&h), 7);
        h[0] = 0;
        h[2] = 0x10;
        assert_eq!(leading_zero_bits(&h), 16 + 3);
        h[3] = 0xff; // bits after the first one do not count
        assert_eq!(leading_zero_bits(&h), 19);
    }

    #[test]
    fn the_hash_is_sha256_of_the_length_prefixed_fields() {
        let (clue, payload, nonce) = (b"a clue".as_slice(), b"payload".as_slice(), 42u64);
        let mut input = Vec::new();
        for f in [
            POSTAGE_TAG,
            INSECURE_TEST.name.as_bytes(),
            clue,
            payload,
            &nonce.to_le_bytes()[..],
        ] {
            input.extend_from_slice(&(f.len() as u32).to_le_bytes());
            input.extend_from_slice(f);
        }
        let want: [u8; 32] = Sha256::digest(&input).into();
        assert_eq!(postage(clue, payload).digest(nonce), want);
    }

    #[test]
    fn a_found_stamp_passes_and_a_short_or_missing_one_is_refused() {
        let p = postage(b"clue", b"hello");
        let nonce = p.search(12, 0..u64::MAX).expect("a 12-bit stamp exists");
        assert!(p.zero_bits(nonce) >= 12);
        assert_eq!(p.check(12, Some(nonce)), Ok(()));
        // The first nonce that meets 12 bits: none below it does.
        assert!((0..nonce).all(|n| p.zero_bits(n) < 12));
        assert_eq!(
            p.check(12, None),
            Err(OmrError::PostageRequired { bits: 12 })
        );
        let short = (0..).find(|&n| p.zero_bits(n) < 12).unwrap();
        assert_eq!(
            p.check(12, Some(short)),
            Err(OmrError::PostageInsufficient {
                got: p.zero_bits(short),
                need: 12
            })
        );
        // Postage off: anything goes, a stamp or none.
        assert_eq!(p.check(0, None), Ok(()));
        assert_eq!(p.check(0, Some(short)), Ok(()));
    }

    #[test]
    fn a_stamp_is_bound_to_its_clue_payload_and_parameter_set() {
        let bits = 16;
        let p = postage(b"clue", b"hello");
        let nonce = p.search(bits, 0..u64::MAX).unwrap();
        // Any other payload, clue or set gives an unrelated hash: the stamp almost surely fails
        // (2^-16 per try), and in these fixed cases it does.
        for other in [
            postage(b"clue", b"hellp"),
            postage(b"clue", b"hello!"),
            postage(b"clux", b"hello"),
            Postage::new(&OMR_V1, b"clue", b"hello"),
        ] {
            assert!(matches!(
                other.check(bits, Some(nonce)),
                Err(OmrError::PostageInsufficient { .. })
            ));
        }
    }

    #[test]
    fn moving_bytes_between_clue_and_payload_changes_the_hash() {
        // Without the length prefixes, ("ab", "c") and ("a", "bc") would hash alike.
        assert_ne!(
            postage(b"ab", b"c").digest(0),
            postage(b"a", b"bc").digest(0)
        );
        assert_ne!(postage(b"", b"x").digest(0), postage(b"x", b"").digest(0));
    }
}
