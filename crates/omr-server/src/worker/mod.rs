//! The detection worker: for every key it leases, detect each board message after the key's
//! cursor, in index order, fold it into the key's accumulator for the current epoch, and commit
//! accumulator and cursor together in one transaction (compare-and-set on the cursor), so a
//! crash loses nothing and folds nothing twice. CPU work runs on bounded rayon pools; the async
//! runtime only waits for it. A worker serves every key it leases, however few fit in its memory
//! budget, by time-sharing them (the policy is in `schedule`).
//!
//! This module is the loop; each concern it calls on has a module of its own: `schedule` (which
//! key next), `turn` (serving one key until it yields), `leases` (taking, renewing and releasing
//! them), `cache` (expanded keys within the memory budget), `key_files` (loading them: expanded
//! files on local disk, or the store; `key_dir`, the files' directory), `step` (one batch for one
//! key), `pool` (the rayon pools, one per `Lane`: bulk, and online at a higher priority),
//! `publish` (what it does, for GetKeyStatus), `supervise` (restarting the loop when it fails),
//! `retention`, and `context` (`WorkerContext`, what it all works with, and the job hooks).
//!
//! The loop is generic over the detection scheme (`crate::scheme`): [`run`] dispatches on the
//! server's scheme once; the scheme expands keys, detects and folds, and encodes what is stored.

mod cache;
mod context;
mod key_dir;
pub mod key_files;
mod leases;
mod pool;
mod publish;
mod retention;
mod schedule;
mod step;
mod supervise;
mod turn;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omr_store::ActiveKey;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::scheme::{DetectionScheme, Scheme};

use cache::KeyCache;
use leases::Leases;
use schedule::{Fill, KeyView, Pick, Policy, Queue};

pub use context::{JobHooks, NoHooks, WorkerContext};
pub use pool::Lane;
pub use retention::retention;

/// Keys of a batch scheme served in one pass over a batch's shared work: each block of the
/// shared plaintexts is then read from memory once for all of them. docs/light/STUDY.md §5
/// measured groups of 8 within noise of one key on 2 cores; on 16 cores (§8) the pass is
/// memory-bound, and the plaintexts are half of a lone key's traffic.
const GROUP_KEYS: usize = 8;

/// How long the worker plans from its last look at who is online before it looks again: how
/// stale its view of presence may be (written by whichever process serves the recipient). The
/// look reads only the keys seen within `online_secs`; the whole list of keys is read again
/// when the leases are renewed (a third of `lease_secs`, or at once after this process
/// registered or deleted a key), which is also when keys registered elsewhere are leased.
const LIST_EVERY: Duration = Duration::from_secs(1);

/// What the worker loop holds from one turn to the next.
struct Worker<S: DetectionScheme> {
    state: Arc<WorkerContext>,
    scheme: S,
    pools: pool::Pools,
    cache: KeyCache<S>,
    leases: Leases,
    queue: Queue,
    poll: Duration,
    /// Mean wall seconds per detected message on a whole pool (exponentially weighted).
    per_message_secs: Option<f64>,
    published: publish::Published,
    /// This worker's keys as last listed from the store.
    listed: Option<Listed>,
}

/// This worker's keys as last listed from the store, and when; the views of them that each
/// plan brings up to date in place.
struct Listed {
    at: Instant,
    keys: Arc<Vec<ActiveKey>>,
    /// Where each key is in `keys` (and `views`).
    index: Arc<HashMap<String, usize>>,
    online: Arc<HashSet<String>>,
    views: Arc<Vec<KeyView>>,
}

/// This worker's keys as one turn's decision sees them (shared with the listing it comes
/// from: a plan copies nothing per key).
struct Plan {
    head: u64,
    keys: Arc<Vec<ActiveKey>>,
    index: Arc<HashMap<String, usize>>,
    views: Arc<Vec<KeyView>>,
    /// Keys of online recipients (pinned in memory).
    online: Arc<HashSet<String>>,
}

impl Plan {
    /// The key `key_id` of this plan, found without a scan.
    fn key(&self, key_id: &str) -> Option<&ActiveKey> {
        self.index.get(key_id).map(|&i| &self.keys[i])
    }
}

/// The worker, supervised: the loop runs until `cancel` fires (after finishing the batch in
/// progress), restarted with backoff when it fails; then the leases are released.
pub async fn run(state: Arc<WorkerContext>, scheme: Scheme, cancel: CancellationToken) {
    match scheme {
        Scheme::Tfhe(s) => run_with(state, s, cancel).await,
        Scheme::Light(s) => run_with(state, s, cancel).await,
    }
}

async fn run_with<S: DetectionScheme>(
    state: Arc<WorkerContext>,
    scheme: S,
    cancel: CancellationToken,
) {
    let pools = pool::Pools::new(&state.config);
    let owner = leases::worker_id(&state);
    tracing::info!(
        threads = pools.threads(),
        bulk_nice = pool::BULK_NICE,
        worker_id = %owner,
        key_memory_bytes = state.config.key_memory_budget(),
        "detection worker started"
    );
    let listener = spawn_board_listener(&state, &cancel);
    let held = leases::Held::default();
    supervise::supervise(&state, &cancel, |incarnation| {
        let leases = Leases::new(&state, owner.clone(), held.clone());
        let mut worker = Worker::new(state.clone(), scheme.clone(), pools.clone(), leases);
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
fn spawn_board_listener(state: &WorkerContext, cancel: &CancellationToken) -> JoinHandle<()> {
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

impl<S: DetectionScheme> Worker<S> {
    fn new(state: Arc<WorkerContext>, scheme: S, pools: pool::Pools, leases: Leases) -> Self {
        let cache = KeyCache::new(&state, scheme.clone());
        let published = publish::Published::new(state.store.clone());
        let poll = Duration::from_millis(state.config.poll_interval_ms.max(10));
        state
            .metrics
            .detection
            .key_memory_budget_bytes
            .set(cache.budget() as i64);
        Self {
            state,
            scheme,
            pools,
            cache,
            leases,
            queue: Queue::default(),
            poll,
            per_message_secs: None,
            published,
            listed: None,
        }
    }

    /// Turn after turn until `cancel` fires: pick the next key and serve it, or wait for new
    /// messages (or a deferred key's deadline) when none is worth serving; retry after `poll`
    /// when the store fails.
    async fn serve_until(&mut self, cancel: &CancellationToken) {
        while !cancel.is_cancelled() {
            let planning = Instant::now();
            let planned = self.plan().await;
            self.state.worker_health.round_planned(planned.is_some());
            let Some(plan) = planned else {
                if self.pause(cancel).await {
                    continue;
                }
                break;
            };
            let pick = self
                .queue
                .pick(&plan.views, plan.head, self.policy(), Instant::now());
            let serving = match &pick {
                Pick::Serve { key_id, .. } => Some(key_id.as_str()),
                Pick::Idle { .. } => None,
            };
            self.publish(&plan, serving);
            let group = match &pick {
                Pick::Serve {
                    key_id,
                    lane: Lane::Bulk,
                } => (self.queue).companions(&plan.views, plan.head, key_id, self.fill()),
                _ => Vec::new(),
            };
            // Everything a turn pays before it detects: the plan, the pick, the published
            // schedule and the companions.
            let took = planning.elapsed().as_secs_f64();
            self.state.metrics.detection.plan_seconds.observe(took);
            match pick {
                Pick::Serve { key_id, lane } => {
                    let ok = if group.is_empty() {
                        self.serve_turn(&plan, &key_id, lane, cancel).await
                    } else {
                        let ids = [vec![key_id], group].concat();
                        self.serve_group(&plan, &ids, cancel).await
                    };
                    // A failing key goes to the back of the queue; pause so that a key that
                    // fails every time does not spin the loop.
                    if !ok && !self.pause(cancel).await {
                        break;
                    }
                }
                Pick::Idle { until } => {
                    if !self.wait_for_work(until, cancel).await {
                        break;
                    }
                }
            }
        }
    }

    /// The policy's tunables from what was measured so far (before any measurement: a load
    /// costs 2 s and a message 0.1 s, the slow end of omr-v1 on 2 cores).
    fn policy(&self) -> Policy {
        let max_wait = Duration::from_secs(self.state.config.key_max_wait_secs);
        let load = self.cache.load_secs().unwrap_or(2.0);
        let mut policy = Policy::new(load, self.per_message_secs.unwrap_or(0.1), max_wait);
        policy.room = self.cache.has_room();
        self.state
            .metrics
            .detection
            .min_load_batch
            .set(policy.min_batch as i64);
        policy
    }

    /// How a turn fills the pool with keys served together: for a batch scheme, up to
    /// [`GROUP_KEYS`] keys at one batch; otherwise keys until every thread has a message.
    fn fill(&self) -> Fill {
        match self.scheme.detection() {
            crate::scheme::Detection::PerBatch { .. } => Fill::Batch {
                max_keys: GROUP_KEYS,
            },
            crate::scheme::Detection::PerMessage => Fill::Messages {
                threads: self.pools.threads() as u64,
                limit: self.batch_limit() as u64,
            },
        }
    }

    /// Plan a turn: the board head, and this worker's keys with their cursors and who is
    /// online; `None` (logged) when the store fails. What does not change from turn to turn is
    /// not read every turn: the leases are renewed, and the keys listed from the store, when a
    /// third of the lease went by, or at once after this process registered or deleted a key
    /// (their cursors meanwhile are the cache's, which sees every commit this worker makes);
    /// who is online is read every [`LIST_EVERY`], from the keys seen lately alone. So a turn's
    /// planning reads one row, and a second the recently seen keys, at any number of keys.
    async fn plan(&mut self) -> Option<Plan> {
        let changed = self.state.roster.take();
        let renew = changed || self.leases.due();
        if renew {
            if let Err(e) = self.leases.renew(&self.state).await {
                tracing::error!(error = %e, "renewing leases failed; retrying");
                self.state.roster.changed(); // list again once it succeeds
                return None;
            }
        }
        let stale = (self.listed.as_ref()).is_none_or(|l| l.at.elapsed() >= LIST_EVERY);
        let relist = renew || self.listed.is_none();
        if !relist && stale {
            if let Err(e) = self.look_who_is_online().await {
                tracing::error!(error = %e, "reading who is online failed; retrying");
                return None;
            }
        }
        if relist {
            let keys = match self.state.store.active_keys().await {
                Ok(all) => (all.into_iter())
                    .filter(|k| self.leases.holds(&k.key_id))
                    .collect::<Vec<_>>(),
                Err(e) => {
                    tracing::error!(error = %e, "listing keys failed; retrying");
                    return None;
                }
            };
            self.cache.retain_only(&keys);
            self.listed = Some(self.listing(keys));
        }
        let head = match self.state.store.board_head().await {
            Ok(head) => head,
            Err(e) => {
                tracing::error!(error = %e, "reading the board head failed; retrying");
                return None;
            }
        };
        let batch = self.scheme.detection().batch();
        let reach = [
            self.reach(head, false).min(head),
            self.reach(head, true).min(head),
        ];
        let listed = self.listed.as_mut().expect("listed above");
        let cache = &self.cache;
        for (v, k) in Arc::make_mut(&mut listed.views)
            .iter_mut()
            .zip(listed.keys.iter())
        {
            v.cursor = cache.cursor(&k.key_id).unwrap_or(k.cursor).max(k.cursor);
            v.batch = batch.map_or(0, |d| v.cursor / d);
            v.head = reach[usize::from(v.online)];
            v.cached = cache.contains(&k.key_id);
        }
        let plan = Plan {
            head,
            keys: listed.keys.clone(),
            index: listed.index.clone(),
            views: listed.views.clone(),
            online: listed.online.clone(),
        };
        self.queue.observe(&plan.views, head, Instant::now());
        if relist || stale {
            self.report(&plan);
        }
        Some(plan)
    }

    /// Between listings: which of the listed keys are online now, from the keys seen within
    /// `online_secs` (a few rows, at any number of keys) and those online at the last look.
    async fn look_who_is_online(&mut self) -> Result<(), omr_store::StoreError> {
        let config = &self.state.config;
        let now_ms = crate::presence::now_ms();
        let window = i64::try_from(config.online_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        let seen = (self.state.store)
            .seen_since(now_ms.saturating_sub(window))
            .await?;
        let listed = self.listed.as_mut().expect("looked after a listing");
        let keys = Arc::make_mut(&mut listed.keys);
        for (key_id, at) in &seen {
            if let Some(&i) = listed.index.get(key_id) {
                let k = &mut keys[i];
                k.last_seen_ms = Some(k.last_seen_ms.map_or(*at, |t| t.max(*at)));
            }
        }
        let was = listed.online.iter().map(String::as_str);
        let candidates = was.chain(seen.iter().map(|(id, _)| id.as_str()));
        let online: HashSet<String> = (candidates.filter_map(|id| listed.index.get(id)))
            .map(|&i| &keys[i])
            .filter(|k| crate::presence::is_online(config, k, now_ms))
            .map(|k| k.key_id.clone())
            .collect();
        let views = Arc::make_mut(&mut listed.views);
        for id in listed.online.iter().chain(online.iter()) {
            if let Some(&i) = listed.index.get(id) {
                views[i].online = online.contains(id);
            }
        }
        listed.online = Arc::new(online);
        listed.at = Instant::now();
        Ok(())
    }

    /// `keys` just listed, who of them is online now, and their views (brought up to date by
    /// each plan).
    fn listing(&self, keys: Vec<ActiveKey>) -> Listed {
        let now_ms = crate::presence::now_ms();
        let online: HashSet<String> = (keys.iter())
            .filter(|k| crate::presence::is_online(&self.state.config, k, now_ms))
            .map(|k| k.key_id.clone())
            .collect();
        let views = (keys.iter())
            .map(|k| KeyView {
                key_id: k.key_id.clone(),
                cursor: k.cursor,
                online: online.contains(&k.key_id),
                cached: false,
                head: 0,
                batch: 0,
            })
            .collect();
        let index = (keys.iter().enumerate())
            .map(|(i, k)| (k.key_id.clone(), i))
            .collect();
        Listed {
            at: Instant::now(),
            index: Arc::new(index),
            keys: Arc::new(keys),
            online: Arc::new(online),
            views: Arc::new(views),
        }
    }

    /// Sleep for `poll`; false when `cancel` fired first.
    async fn pause(&self, cancel: &CancellationToken) -> bool {
        tokio::select! { _ = tokio::time::sleep(self.poll) => true, _ = cancel.cancelled() => false }
    }

    /// Wait for a board commit, `until` or `poll`, whichever comes first; false when `cancel`
    /// fired.
    async fn wait_for_work(&self, until: Option<Instant>, cancel: &CancellationToken) -> bool {
        let wait = until.map_or(self.poll, |u| {
            u.saturating_duration_since(Instant::now()).min(self.poll)
        });
        tokio::select! {
            _ = self.state.board_notify.notified() => true,
            _ = tokio::time::sleep(wait) => true,
            _ = cancel.cancelled() => false,
        }
    }

    /// Per-key lag of this worker's keys, and what it holds and what waits.
    fn report(&self, plan: &Plan) {
        let m = &self.state.metrics.detection;
        m.key_lag.reset();
        for v in plan.views.iter() {
            m.key_lag
                .with_label_values(&[v.key_id.as_str()])
                .set(plan.head.saturating_sub(v.cursor) as i64);
        }
        let waiting = plan.views.iter().filter(|v| v.cursor < plan.head).count();
        m.keys_waiting.set(waiting as i64);
        m.keys_online.set(plan.online.len() as i64);
        m.keys_loaded.set(self.cache.len() as i64);
        m.key_memory_bytes.set(self.cache.used_bytes() as i64);
    }
}
