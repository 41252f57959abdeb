//! The three keys: the recipient's secret key, the public clue key, and the detection key
//! (compressed with seeds for transport, expanded once on the server), each with its encoding
//! beside it; and key generation.
//!
//! Layers inside: `seeded` (rounded seeded native keys and their codec) -> `secret`,
//! `clue_key`, `compressed` -> `expanded` -> `expanded_codec` (its local file) -> `keygen`.

mod clue_key;
mod compressed;
mod expanded;
mod expanded_codec;
mod keygen;
mod lwe_ksk;
mod secret;
mod seeded;

pub use clue_key::{ClueKey, CLUE_KEY_LIMIT};
pub use compressed::{CompressedDetectionKey, DETECTION_KEY_LIMIT};
pub use expanded::{DetectionKey, ExpandTimes};
pub use expanded_codec::EXPANDED_KEY_VERSION;
pub use keygen::{keygen, KeySet};
pub use secret::{SecretKey, SECRET_KEY_LIMIT};
