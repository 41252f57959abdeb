//! State shared by the HTTP and gRPC services.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use omr_core::DigestKey;
use tokio::sync::Notify;

use omr_core::ParamSet;
use omr_store::Store;

use crate::config::Config;
use crate::ingest::Ingestor;
use crate::metrics::Metrics;
use crate::presence::Presence;
use crate::progress::KeyProgress;

/// (key id, range start, range end) of an encoded digest.
pub type DigestRange = (String, u64, u64);

/// Everything a request handler needs.
#[derive(Debug)]
pub struct AppState {
    pub config: Config,
    pub params: &'static ParamSet,
    pub store: Store,
    pub ingestor: Ingestor,
    pub metrics: Metrics,
    /// Set once migrations ran and both servers listen.
    pub ready: AtomicBool,
    /// Signalled after every board commit (wakes the detection worker).
    pub board_notify: Arc<Notify>,
    /// Digest keys by key id.
    pub digest_keys: Mutex<HashMap<String, Arc<DigestKey>>>,
    /// Encoded digests by (key id, range start, range end): valid until the cursor moves.
    /// `Bytes`, so that a response shares the cached encoding instead of copying it.
    pub digests: Mutex<HashMap<DigestRange, axum::body::Bytes>>,
    /// Which recipients are online (throttled writes to the store).
    pub presence: Presence,
    /// Each key's cursor as commits move it, for calls waiting for a key's next message.
    pub progress: Arc<KeyProgress>,
}
