//! omr-light-v1: oblivious message detection by a linear map, after UnifOMR (ePrint 2026/910).
//!
//! A clue is an RLWE encryption of zero under the recipient's address; the server holds the
//! recipient's clue secret s encrypted coefficient by coefficient (the detection key) and
//! computes, for D = 4096 messages at once, encryptions of b′_k − (a′·s)_k for the first ℓ = 2
//! coefficients: n·ℓ plaintext-by-ciphertext products per message, no bootstrapping. The
//! recipient decrypts the digest and keeps the messages whose ℓ values are all small.
//!
//! Layers, each using only those before it: `params` → `ring`, `sample`, `codec` → `rlwe` →
//! `switch` → `expand` → `cmux` → `fetch` (the batch payload fetch: `layout`, `wire`, `client`,
//! `server`) → `layout` (a detection key in the kernel's layout) → `keys` → `clue` → `digest` →
//! `batch`, `decode`. Beside them, `pir` sizes the fetch's bytes for `omr bench`, and
//! `security` argues the parameters.

pub mod batch;
pub mod clue;
pub mod cmux;
pub mod codec;
mod decode;
pub mod digest;
pub mod expand;
pub mod fetch;
pub mod keys;
mod layout;
pub mod params;
pub mod pir;
mod ring;
pub mod rlwe;
mod sample;
pub mod security;
pub mod switch;

pub use batch::Batch;
pub use clue::Clue;
pub use digest::{BatchDigest, Digest, DigestPart, SharedHalf};
pub use keys::{Address, DetectionKey, ExpandedKey, SecretKey};
pub use params::{LightParams, OMR_LIGHT_V1};

/// A process-wide number never handed out before: what a device (omr-light-cuda) knows an
/// `ExpandedKey` or a `Batch` by, neither of which changes after it is made.
pub(crate) fn fresh_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
