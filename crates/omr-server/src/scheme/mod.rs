//! The seam between the service and a detection scheme. [`DetectionScheme`] names everything omrd
//! needs from a scheme: how an uploaded key is validated and what the registry stores beside it,
//! how the worker loads a key and runs detection over board messages (one message at a time, or in
//! batches for a [`BatchScheme`]: its [`Walk`]), what it stores per key and epoch, and how a digest
//! for a range is assembled from those and encoded. [`Scheme`] is the set a server runs, chosen
//! once from its parameter set; the worker and the digest endpoint dispatch on it once and are
//! generic below that.
//!
//! `tfhe` is omr-v1 and omr-v2 (TFHE functional bootstrapping, one message at a time, folded
//! into an accumulator per epoch); `light` is omr-light-v1 (linear detection in batches of 4096,
//! one batch per epoch, a key's part of the open batch replaced as it grows). The parameter set
//! itself, as configuration and the request side see it, is `crate::set::Set`.

mod gpu;
mod light;
mod tfhe;
mod walk;

use std::io::{Read, Write};

use omr_core::OmrError;
use omr_store::StoredMessage;

pub use gpu::GpuDetector;
pub use light::Light;
pub use tfhe::Tfhe;
pub use walk::{Batched, Grouping, PerMessage, Span, Walk};

use crate::set::Set;

/// What the registry keeps of a validated key beside its bytes.
#[derive(Debug)]
pub struct AcceptedKey {
    pub param_set: &'static str,
    pub kbar: usize,
    /// What an API server needs to encode this key's digests ([`DetectionScheme::digest_key`]).
    pub digest_key: Vec<u8>,
}

/// A detection scheme as the service runs it. `Key` is a detection key in a worker's memory,
/// `State` what detection folds a key's messages into over a range `[start, end)` (stored per
/// key and epoch, encoded), `DigestKey` what turns a state into a digest for transport.
pub trait DetectionScheme: Clone + Send + Sync + 'static {
    type Key: Send + Sync + 'static;
    type State: Send + Sync + 'static;
    type DigestKey: Send + Sync + 'static;
    /// How the worker walks the board for this scheme: [`PerMessage`], or [`Batched`] for a
    /// [`BatchScheme`].
    type Walk: Walk<Self>;

    // Registration.
    /// Decode and check a whole uploaded key (at most `limit` bytes) before anything is stored.
    fn accept_key(&self, key: &[u8], limit: usize) -> Result<AcceptedKey, OmrError>;

    // Loading a key for detection.
    /// The detection key of a stored upload (CPU-heavy: run it on a detection pool).
    fn expand_key(&self, stored: &[u8]) -> Result<Self::Key, OmrError>;
    /// Bytes `key` holds in memory (the worker's budget).
    fn key_memory_bytes(key: &Self::Key) -> u64;
    /// Bytes of `key`'s local file.
    fn key_file_len(key: &Self::Key) -> u64;
    /// Write `key` as a local file (a server's own disk, not transport).
    fn write_key_file(key: &Self::Key, w: &mut dyn Write) -> std::io::Result<()>;
    /// Read a key written by [`write_key_file`](Self::write_key_file) on this machine.
    fn read_key_file(&self, r: &mut dyn Read) -> Result<Self::Key, OmrError>;
    /// Whether a key's local file is written as soon as it is loaded from the store (its next
    /// load, after a restart or an eviction, then skips the expansion), or only when it leaves
    /// memory, that is when a reload is to come: for a key whose expansion costs about what
    /// writing its file does.
    fn key_file_at_load(&self) -> bool {
        true
    }

    // Detection.
    /// A new, empty state starting at board index `start`.
    fn new_state(key: &Self::Key, start: u64) -> Self::State;
    /// Detect `messages` and fold them into `state`: consecutive, starting at the state's end,
    /// for a scheme that walks [`PerMessage`]; for a [`BatchScheme`], every message of the batch
    /// so far from its first index, into a new state. Runs on a detection pool.
    fn detect_and_fold(
        &self,
        key: &Self::Key,
        state: Self::State,
        messages: &[StoredMessage],
    ) -> Result<Self::State, OmrError>;

    // What is stored per key and epoch.
    /// The board range `[start, end)` a state covers.
    fn range(state: &Self::State) -> (u64, u64);
    fn encode_state(state: &Self::State) -> Vec<u8>;
    fn decode_state(&self, bytes: &[u8]) -> Result<Self::State, OmrError>;

    // Digests.
    /// The state of nothing at `at`, for a key with `kbar`.
    fn empty_state(&self, kbar: usize, at: u64) -> Self::State;
    /// Append the adjacent state `next` to `state`.
    fn merge(state: &mut Self::State, next: &Self::State) -> Result<(), OmrError>;
    /// Decode the digest key [`AcceptedKey::digest_key`] stored at registration.
    fn digest_key(&self, bytes: &[u8]) -> Result<Self::DigestKey, OmrError>;
    /// Encode the digest of `state` for transport (CPU-heavy: off the async runtime).
    fn encode_digest(key: &Self::DigestKey, state: Self::State) -> Result<Vec<u8>, OmrError>;
}

/// A scheme that detects messages in batches of a fixed size ([`Batched`] walks it): the work
/// every key shares is prepared once per batch and kept a while, and one pass over it can serve
/// many keys.
pub trait BatchScheme: DetectionScheme {
    /// Messages per batch (at least 1).
    fn batch_messages(&self) -> usize;

    /// `key`'s state for the batch `[first, first + count)` from a preparation still held, so
    /// that the worker need not read the batch's messages again; `None` when it is not held
    /// (then the worker reads them and calls [`detect_and_fold`](DetectionScheme::detect_and_fold)).
    /// Runs on a detection pool.
    fn detect_prepared(&self, key: &Self::Key, first: u64, count: usize) -> Option<Self::State>;

    /// Whether [`detect_prepared`](Self::detect_prepared) would find the batch (a cheap check
    /// before reading anything).
    fn has_prepared(&self, first: u64, count: usize) -> bool;

    /// The states of several keys for the batch `[first, first + count)`, in the order of
    /// `keys`, in one pass over the batch's shared work: from `messages` (the batch's, from
    /// its first index) or, when `messages` is empty, from a preparation still held (`None`
    /// when it is not). Runs on a detection pool.
    fn detect_many(
        &self,
        keys: &[&Self::Key],
        first: u64,
        count: usize,
        messages: &[StoredMessage],
    ) -> Result<Option<Vec<Self::State>>, OmrError>;

    /// Keys worth serving in one pass, when the scheme knows better than the worker's default
    /// (a GPU wants many at once).
    fn keys_per_pass(&self) -> Option<usize> {
        None
    }
}

/// The scheme a server runs, from its parameter set. Adding a scheme adds a variant here; every
/// place that dispatches on it is a `match` the compiler checks.
#[derive(Debug, Clone)]
pub enum Scheme {
    /// omr-v1, omr-v2 and the insecure test set.
    Tfhe(Tfhe),
    /// omr-light-v1.
    Light(Light),
}

impl Scheme {
    /// The scheme of `set`.
    pub fn of(set: Set) -> Scheme {
        match set {
            Set::Tfhe(p) => Scheme::Tfhe(Tfhe::new(p)),
            Set::Light(p) => Scheme::Light(Light::new(p)),
        }
    }

    /// The same scheme, a light one's passes on `gpu` (a TFHE scheme has none).
    pub fn with_gpu(self, gpu: Option<std::sync::Arc<GpuDetector>>) -> Scheme {
        match self {
            Scheme::Light(s) => Scheme::Light(s.with_gpu(gpu)),
            tfhe => tfhe,
        }
    }

    /// The GPU detector the scheme detects on, if any.
    pub fn gpu(&self) -> Option<&std::sync::Arc<GpuDetector>> {
        match self {
            Scheme::Light(s) => s.gpu(),
            Scheme::Tfhe(_) => None,
        }
    }

    /// [`DetectionScheme::accept_key`] of the running scheme.
    pub fn accept_key(&self, key: &[u8], limit: usize) -> Result<AcceptedKey, OmrError> {
        match self {
            Scheme::Tfhe(s) => s.accept_key(key, limit),
            Scheme::Light(s) => s.accept_key(key, limit),
        }
    }
}
