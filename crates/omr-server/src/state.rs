//! State shared by the HTTP and gRPC services.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use omr_core::DigestKey;
use tokio::sync::Notify;

use omr_core::ParamSet;
use omr_store::Store;

use crate::admission::Admission;
use crate::config::Config;
use crate::health::WorkerHealth;
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
    /// Client addresses and their rate limits.
    pub admission: Admission,
    /// Set once migrations ran and both servers listen.
    pub ready: AtomicBool,
    /// Signalled after every board commit (wakes the detection worker).
    pub board_notify: Arc<Notify>,
    /// Digest keys by key id.
    pub digest_keys: Mutex<HashMap<String, Arc<DigestKey>>>,
    /// Encoded digests by (key id, range start, range end): valid until the cursor moves.
    /// `Bytes`, so that a response shares the cached encoding instead of copying it.
    pub digests: Mutex<HashMap<DigestRange, axum::body::Bytes>>,
    /// The SHA-256 of the admin API's token (`admin_token` / `admin_token_file`); `None`: the
    /// admin API is off. The token itself is not kept.
    pub admin_token_hash: Option<[u8; 32]>,
    /// Attachment epochs built for PIR.
    pub pir: crate::pir::PirEpochs,
    /// Which recipients are online (throttled writes to the store).
    pub presence: Presence,
    /// Each key's cursor as commits move it, for calls waiting for a key's next message.
    pub progress: Arc<KeyProgress>,
    /// The detection worker's restarts and failing rounds, for readiness.
    pub worker_health: WorkerHealth,
    /// Fault injection for tests, set by nothing in omrd (no configuration, no environment): the
    /// next this many detection jobs panic.
    #[doc(hidden)]
    pub inject_detection_panics: AtomicU32,
    /// Fault injection for tests, set by nothing in omrd: while true, detection jobs of offline
    /// keys (on the bulk pool) wait before they start, and `bulk_jobs_held` counts them.
    #[doc(hidden)]
    pub hold_bulk_jobs: AtomicBool,
    #[doc(hidden)]
    pub bulk_jobs_held: AtomicU32,
}

impl AppState {
    /// What serving attachment epochs by PIR takes from this server.
    pub fn pir_serving(&self) -> crate::pir::Serving {
        crate::pir::Serving {
            store: self.store.clone(),
            epoch_len: crate::pir::epoch_len(&self.config, self.params),
            max_attachment_bytes: self.config.max_attachment_bytes,
            retain_digest_messages: self.config.retain_digest_messages,
            metrics: self.metrics.pir.clone(),
        }
    }

    /// Whether the detection job about to run must panic (fault injection for tests): true
    /// while [`AppState::inject_detection_panics`] was above 0, which it then decrements.
    #[doc(hidden)]
    pub fn take_injected_panic(&self) -> bool {
        self.inject_detection_panics
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Wait while [`AppState::hold_bulk_jobs`] is set (fault injection for tests; runs on a
    /// bulk pool thread).
    #[doc(hidden)]
    pub fn wait_while_bulk_held(&self) {
        if self.hold_bulk_jobs.load(Ordering::Acquire) {
            self.bulk_jobs_held.fetch_add(1, Ordering::AcqRel);
            while self.hold_bulk_jobs.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}
