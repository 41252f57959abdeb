//! The detection worker: for every registered key, detect each board message after the key's
//! cursor, in index order, fold it into the key's accumulator for the current epoch, and commit
//! accumulator and cursor together in one transaction (compare-and-set on the cursor), so a
//! crash loses nothing and folds nothing twice. CPU work runs on a bounded rayon pool; the async
//! runtime only waits for it. Keys are served round-robin, one batch each per round, so a key
//! with a long backlog does not starve the others.
//!
//! This module is the loop; each concern it calls on has a module of its own: `schedule` (which
//! keys, in what order), `leases` (taking, renewing and releasing them), `cache` (expanded
//! keys), `step` (one batch for one key), `pool` (the rayon pool), `supervise` (restarting the
//! loop when it fails), `retention`.

mod cache;
mod leases;
mod pool;
mod retention;
mod schedule;
mod step;
mod supervise;

use std::sync::Arc;
use std::time::Duration;

use omr_store::ActiveKey;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::state::AppState;

use cache::KeyCache;
use leases::Leases;

pub use retention::retention;

/// What the worker loop holds from one round to the next.
struct Worker {
    state: Arc<AppState>,
    pool: Arc<rayon::ThreadPool>,
    cache: KeyCache,
    leases: Leases,
    poll: Duration,
}

/// The worker, supervised: the loop runs until `cancel` fires (after finishing the batch in
/// progress), restarted with backoff when it fails; then the leases are released.
pub async fn run(state: Arc<AppState>, cancel: CancellationToken) {
    let pool = Arc::new(pool::detect_pool(&state.config));
    let owner = leases::worker_id(&state);
    tracing::info!(
        threads = pool.current_num_threads(),
        worker_id = %owner,
        "detection worker started"
    );
    let listener = spawn_board_listener(&state, &cancel);
    supervise::supervise(&state, &cancel, |incarnation| {
        let mut worker = Worker::new(state.clone(), pool.clone(), owner.clone());
        async move {
            worker.serve_until(&incarnation).await;
            Ok(())
        }
    })
    .await;
    listener.abort();
    leases::release(&state, &owner).await;
    tracing::info!("detection worker stopped");
}

/// Wake the loop on other processes' commits, which arrive as store notifications (PostgreSQL
/// LISTEN/NOTIFY; nothing on SQLite); our own arrive by `board_notify`.
fn spawn_board_listener(state: &AppState, cancel: &CancellationToken) -> JoinHandle<()> {
    let (store, notify, cancel) = (
        state.store.clone(),
        state.board_notify.clone(),
        cancel.clone(),
    );
    tokio::spawn(async move {
        tokio::select! {
            () = store.board_notifications(move || notify.notify_one()) => {}
            _ = cancel.cancelled() => {}
        }
    })
}

impl Worker {
    fn new(state: Arc<AppState>, pool: Arc<rayon::ThreadPool>, owner: String) -> Self {
        let cache = KeyCache::new(&state.config);
        let poll = Duration::from_millis(state.config.poll_interval_ms.max(10));
        let leases = Leases::new(&state, owner);
        Self {
            state,
            pool,
            cache,
            leases,
            poll,
        }
    }

    /// Serve round after round until `cancel` fires; wait for new messages when a round folded
    /// none, and retry after `poll` when a round could not start.
    async fn serve_until(&mut self, cancel: &CancellationToken) {
        while !cancel.is_cancelled() {
            let planned = self.plan_round().await;
            self.state.worker_health.round_planned(planned.is_some());
            let Some(keys) = planned else {
                if self.pause(cancel).await {
                    continue;
                }
                break;
            };
            let head = self.state.store.board_head().await.unwrap_or(0);
            let progressed = self.serve_round(&keys, cancel).await;
            self.report_lag(&keys, head);
            if !progressed && !self.wait_for_work(cancel).await {
                break;
            }
        }
    }

    /// Sleep for `poll`; false when `cancel` fired first.
    async fn pause(&self, cancel: &CancellationToken) -> bool {
        tokio::select! { _ = tokio::time::sleep(self.poll) => true, _ = cancel.cancelled() => false }
    }

    /// Wait for a board commit or `poll`, whichever comes first; false when `cancel` fired.
    async fn wait_for_work(&self, cancel: &CancellationToken) -> bool {
        tokio::select! {
            _ = self.state.board_notify.notified() => true,
            _ = tokio::time::sleep(self.poll) => true,
            _ = cancel.cancelled() => false,
        }
    }

    /// Set each key's lag behind `head` (the board head when the round began) and the largest.
    fn report_lag(&self, keys: &[ActiveKey], head: u64) {
        let metrics = &self.state.metrics;
        let mut max_lag = 0;
        metrics.key_lag.reset();
        for key in keys {
            let cursor = self.cache.cursor(&key.key_id).unwrap_or(key.cursor);
            let lag = head.saturating_sub(cursor.min(head));
            metrics
                .key_lag
                .with_label_values(&[key.key_id.as_str()])
                .set(lag as i64);
            max_lag = max_lag.max(lag);
        }
        metrics.max_lag.set(max_lag as i64);
    }
}
