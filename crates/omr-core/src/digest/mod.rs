//! Digests: the accumulator a key's pertinency ciphertexts are folded into, the digest the
//! recipient downloads, and the digest key that turns the one into the other.
//!
//! Layers inside: `accumulator` and `ciphertext` (the `Digest`) -> `key` (`DigestKey`). The
//! plaintext layout and PRF they share are in `crate::layout`; they are re-exported here so the
//! paths `omr_core::digest::{Layout, validate_payload}` keep working.

mod accumulator;
mod ciphertext;
mod key;

pub use crate::layout::{validate_payload, Layout};
pub use accumulator::{Accumulator, FoldScratch, ACCUMULATOR_LIMIT};
pub use ciphertext::{Digest, DIGEST_LIMIT};
pub use key::{DigestKey, DIGEST_KEY_LIMIT};
