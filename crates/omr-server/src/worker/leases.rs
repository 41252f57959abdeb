//! Leases: the keys this worker may serve. Taken or renewed at the start of every round and again
//! when a round runs past a third of the lease; released when the worker stops. Leases only
//! decide who works; the compare-and-set commit decides what is committed.

use std::time::{Duration, Instant};

use omr_store::StoreError;

use crate::state::AppState;

/// This worker's leases and when they were last renewed.
pub(super) struct Leases {
    owner: String,
    lease: Duration,
    max_leased: usize,
    held: Vec<String>,
    renewed_at: Instant,
}

impl Leases {
    /// Leases of up to `max_leased` keys, none held yet, under this worker's id.
    pub(super) fn new(state: &AppState, max_leased: usize) -> Self {
        let owner = worker_id(state);
        let lease = Duration::from_secs(state.config.lease_secs.max(1));
        tracing::info!(worker_id = %owner, lease_secs = lease.as_secs(), max_leased, "leasing keys");
        Self {
            owner,
            lease,
            max_leased,
            held: Vec::new(),
            renewed_at: Instant::now(),
        }
    }

    /// Whether this worker holds a live lease on `key_id`.
    pub(super) fn holds(&self, key_id: &str) -> bool {
        self.held.iter().any(|k| k == key_id)
    }

    /// Take or renew up to `max_leased` leases; log and count what changed.
    pub(super) async fn renew(&mut self, state: &AppState) -> Result<(), StoreError> {
        let leased = state
            .store
            .acquire_leases(&self.owner, self.lease, self.max_leased)
            .await?;
        self.record_changes(state, &leased);
        self.held = leased;
        state.metrics.leased_keys.set(self.held.len() as i64);
        self.renewed_at = Instant::now();
        Ok(())
    }

    /// A round can be long (a key load takes ≈ 1.8 s, a batch up to a few seconds): renew
    /// before a third of the lease is gone.
    pub(super) async fn renew_if_due(&mut self, state: &AppState) {
        if self.renewed_at.elapsed() > self.lease / 3 {
            if let Err(e) = self.renew(state).await {
                tracing::error!(error = %e, "renewing leases failed");
            }
        }
    }

    /// Give every lease back, so that other workers need not wait for them to expire.
    pub(super) async fn release(&self, state: &AppState) {
        if let Err(e) = state.store.release_leases(&self.owner).await {
            tracing::warn!(error = %e, "releasing leases failed; they expire by themselves");
        }
    }

    /// Log and count the keys in `leased` not held before, then those held before but not now.
    fn record_changes(&self, state: &AppState, leased: &[String]) {
        let changes = &state.metrics.lease_changes;
        for k in leased.iter().filter(|k| !self.held.contains(k)) {
            tracing::info!(key_id = %k, worker_id = %self.owner, "lease acquired");
            changes.with_label_values(&["acquired"]).inc();
        }
        for k in self.held.iter().filter(|k| !leased.contains(k)) {
            tracing::info!(key_id = %k, worker_id = %self.owner, "lease lost");
            changes.with_label_values(&["released"]).inc();
        }
    }
}

/// The configured `worker_id`, else a name for this process. With the embedded store there is
/// one process: a fixed name lets a restart after a crash resume at once instead of waiting for
/// its previous leases to expire.
fn worker_id(state: &AppState) -> String {
    state.config.worker_id.clone().unwrap_or_else(|| {
        if state.store.is_embedded() {
            "embedded".to_string()
        } else {
            default_worker_id()
        }
    })
}

/// `host-pid-random`: unique among the processes sharing one database.
fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    format!(
        "{host}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}
