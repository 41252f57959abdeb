//! omr-core: oblivious message retrieval on TFHE (tfhe-rs `core_crypto`), after InstantOMR.
//!
//! - [`keys::keygen`] makes a recipient's [`SecretKey`], public [`ClueKey`] and
//!   [`CompressedDetectionKey`];
//! - a sender calls [`ClueKey::make_clue`];
//! - the detector expands the detection key once ([`CompressedDetectionKey::expand`]) and for each
//!   message calls [`DetectionKey::detect`] then [`DetectionKey::fold`] into an [`Accumulator`];
//! - the recipient decodes the [`Digest`] with [`SecretKey::decode`];
//! - [`postage`]: the proof of work a server may ask of each [`Message`].
//!
//! No I/O, no async, no global state (one exception: [`pin_fft_plans`] sets tfhe-rs's
//! process-wide FFT plans, for expanded keys kept on disk). Every type that crosses a process boundary has a
//! versioned, size-limited `to_bytes`/`from_bytes`.
//!
//! Modules are layered; each uses only layers below it (bottom to top): `error`, `params`,
//! `codec`, `fft_plans`, `postage`, `mlwe` (module-LWE clues) -> `prime` (GLWE mod p), `layout` (digest plaintext layout and PRF) -> `keys` ->
//! `clue` -> `detect`, `message` -> `digest` (accumulator, digest, digest key) -> `decode`;
//! `noise` and `security` analyse the scheme from above.

mod bits;
pub mod clue;
pub mod codec;
pub mod decode;
pub mod detect;
pub mod digest;
pub mod error;
mod fft_plans;
pub mod keys;
mod layout;
pub mod message;
mod mlwe;
pub mod noise;
pub mod params;
pub mod postage;
pub(crate) mod prime;
pub mod security;

pub use clue::Clue;
pub use decode::Retrieved;
pub use detect::{Pertinency, StageTimes};
pub use digest::{validate_payload, Accumulator, Digest, DigestKey, FoldScratch, Layout};
pub use error::OmrError;
pub use fft_plans::pin_fft_plans;
pub use keys::{
    keygen, ClueKey, CompressedDetectionKey, DetectionKey, ExpandTimes, KeySet, SecretKey,
    EXPANDED_KEY_VERSION,
};
pub use message::Message;
pub use params::{ParamSet, INSECURE_TEST, OMR_V1, OMR_V2};
pub use postage::{Postage, MAX_POSTAGE_BITS};
