//! Leases: the keys this worker may serve. Taken or renewed when a third of the lease has gone by
//! (at a plan, or within a long round), and at the next plan after this process registered or
//! deleted a key; released when the worker stops. Each renewal is
//! also this worker's heartbeat: the store shares the keys among the live workers, so a worker
//! holds at most ⌈keys / live workers⌉ and gives back its surplus when another joins. Leases
//! only decide who works; the compare-and-set commit decides what is committed.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use omr_store::StoreError;

use super::WorkerContext;

/// What the worker held at its last renewal, kept across restarts of its loop (a restarted loop
/// keeps its leases: they are not counted as acquired again).
pub(super) type Held = Arc<Mutex<HashSet<String>>>;

/// This worker's leases and when they were last renewed.
pub(super) struct Leases {
    owner: String,
    lease: Duration,
    held: HashSet<String>,
    carried: Held,
    /// Live workers at the last renewal (0 before the first).
    live_workers: u64,
    /// When they were last renewed (None: not yet by this loop).
    renewed_at: Option<Instant>,
}

impl Leases {
    /// The leases of the worker id `owner` (see [`worker_id`]): those `carried` from an earlier
    /// incarnation of the loop, until the first renewal says what it holds now.
    pub(super) fn new(state: &WorkerContext, owner: String, carried: Held) -> Self {
        let lease = Duration::from_secs(state.config.lease_secs.max(1));
        let held = carried.lock().map(|h| h.clone()).unwrap_or_default();
        tracing::info!(worker_id = %owner, lease_secs = lease.as_secs(), kept = held.len(), "leasing keys");
        Self {
            owner,
            lease,
            held,
            carried,
            live_workers: 0,
            renewed_at: None,
        }
    }

    /// Whether this worker holds a live lease on `key_id`.
    pub(super) fn holds(&self, key_id: &str) -> bool {
        self.held.contains(key_id)
    }

    /// Renew the heartbeat and the leases, taking or giving back keys towards this worker's
    /// share; log and count what changed.
    pub(super) async fn renew(&mut self, state: &WorkerContext) -> Result<(), StoreError> {
        let grant = state.store.acquire_leases(&self.owner, self.lease).await?;
        let leased: HashSet<String> = grant.keys.into_iter().collect();
        self.record_changes(state, &leased, &grant.given_back);
        if grant.live_workers != self.live_workers {
            tracing::info!(
                worker_id = %self.owner,
                live_workers = grant.live_workers,
                share = grant.share,
                held = leased.len(),
                "live workers changed: keys rebalance towards the share"
            );
            self.live_workers = grant.live_workers;
        }
        self.held = leased;
        if let Ok(mut carried) = self.carried.lock() {
            carried.clone_from(&self.held);
        }
        state.metrics.leased_keys.set(self.held.len() as i64);
        self.renewed_at = Some(Instant::now());
        Ok(())
    }

    /// Whether a third of the lease went by since the last renewal (or none happened, or the
    /// last one failed).
    pub(super) fn due(&self) -> bool {
        self.renewed_at.is_none_or(|t| t.elapsed() > self.lease / 3)
    }

    /// A round can be long (a key load and a batch can each take seconds): renew
    /// before a third of the lease is gone.
    pub(super) async fn renew_if_due(&mut self, state: &WorkerContext) {
        if self.due() {
            if let Err(e) = self.renew(state).await {
                tracing::error!(error = %e, "renewing leases failed");
            }
        }
    }

    /// Log and count the keys in `leased` not held before, then those held before but not now:
    /// `given_back` towards the fair share (`rebalanced`), or lost (`released`: the lease expired
    /// and another worker took the key, or the key was deleted).
    fn record_changes(
        &self,
        state: &WorkerContext,
        leased: &HashSet<String>,
        given_back: &[String],
    ) {
        let changes = &state.metrics.lease_changes;
        for k in leased.iter().filter(|k| !self.held.contains(*k)) {
            tracing::info!(key_id = %k, worker_id = %self.owner, "lease acquired");
            changes.with_label_values(&["acquired"]).inc();
        }
        for k in self.held.iter().filter(|k| !leased.contains(*k)) {
            if given_back.contains(k) {
                tracing::info!(key_id = %k, worker_id = %self.owner, "lease given back to rebalance");
                changes.with_label_values(&["rebalanced"]).inc();
            } else {
                tracing::info!(key_id = %k, worker_id = %self.owner, "lease lost");
                changes.with_label_values(&["released"]).inc();
            }
        }
    }
}

/// Give every lease and the heartbeat of `owner` back, so that other workers need not wait for
/// them to expire.
pub(super) async fn release(state: &WorkerContext, owner: &str) {
    if let Err(e) = state.store.release_leases(owner).await {
        tracing::warn!(error = %e, "releasing leases failed; they expire by themselves");
    }
}

/// The configured `worker_id`, else a name for this process; chosen once when the worker starts
/// (a restarted worker loop keeps it, and with it its leases). With the embedded store there is one
/// process: a fixed name lets a restart after a crash resume at once instead of waiting for its
/// previous leases to expire.
pub(super) fn worker_id(state: &WorkerContext) -> String {
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
