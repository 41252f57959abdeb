//! The detection worker: for every key it leases, detect each board message after the key's
//! cursor, in index order, fold it into the key's accumulator for the current epoch, and commit
//! accumulator and cursor together in one transaction (compare-and-set on the cursor), so a
//! crash loses nothing and folds nothing twice. CPU work runs on bounded rayon pools; the async
//! runtime only waits for it. A worker serves every key it leases, however few fit in its memory
//! budget, by time-sharing them (the policy is in `schedule`).
//!
//! This module is the loop; each concern it calls on has a module of its own: `plan` (the keys,
//! their cursors, who is online, the board head), `schedule` (which key next), `turn` (serving one key until it yields), `leases` (taking, renewing and releasing
//! them), `cache` (expanded keys within the memory budget), `ahead` (keys loaded beside a turn, before
//! theirs), `online` (an online key's batch in flight beside the bulk work), `key_files` (loading them: expanded
//! files on local disk, or the store; `key_dir`, the files' directory), `step` (one batch for one
//! key), `pool` (the rayon pools, one per `Priority`: bulk, and online at a higher priority),
//! `publish` (what it does, for GetKeyStatus), `supervise` (restarting the loop when it fails),
//! `retention`, and `context` (`WorkerContext`, what it all works with, and the job hooks).
//!
//! The loop is generic over the detection scheme (`crate::scheme`): [`run`] dispatches on the
//! server's scheme once; the scheme expands keys, detects and folds, and encodes what is stored.

mod ahead;
mod cache;
mod context;
mod key_dir;
pub mod key_files;
mod leases;
mod online;
mod plan;
mod pool;
mod publish;
mod retention;
mod schedule;
mod step;
mod supervise;
mod turn;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::scheme::{DetectionScheme, Grouping, Scheme, Walk};

use cache::KeyCache;
use leases::Leases;
use plan::{HeadSeen, Listed, Plan};
use schedule::{BoardRate, Fill, Pick, Policy, Queue};

pub use context::{JobHooks, NoHooks, WorkerContext};
pub use pool::Priority;
pub use retention::retention;

/// Keys of a batch scheme served in one pass over a batch's shared work: each block of the
/// shared plaintexts is then read from memory once for all of them. Where the cores bound the
/// pass, a group of 8 costs each key no more than a pass of its own (docs/light/STUDY.md §5);
/// where memory bounds it (many cores, §8), the plaintexts are half of a lone key's traffic.
const GROUP_KEYS: usize = 8;

/// What the worker loop holds from one turn to the next.
struct Worker<S: DetectionScheme> {
    ctx: Arc<WorkerContext>,
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
    /// Keys being loaded beside the turns, ahead of their own.
    ahead: ahead::Ahead<S>,
    /// Online keys' batches beside the bulk work: the one in flight, the keys to look at.
    online: online::Online<S>,
    /// The board head as last read.
    head_seen: Option<HeadSeen>,
    /// For each key whose open batch (a batch scheme's) this worker detected: the recipient's
    /// mark that detection answered; the next waits for a newer one (`plan::asks_open`).
    open_answered: HashMap<String, i64>,
    /// The refresh mark an online key's open batch was last detected up to (a new one counts
    /// a refresh).
    refreshed_to: Option<u64>,
    /// New board messages per second lately, from the plans' heads.
    board_rate: BoardRate,
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

/// The keys of a turn: its key, then the group's others.
fn turn_keys<'a>(key_id: &'a str, group: &'a [String]) -> Vec<&'a str> {
    std::iter::once(key_id)
        .chain(group.iter().map(String::as_str))
        .collect()
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
            () = store.board_notifications(move || notify.raise()) => {}
            _ = cancel.cancelled() => {}
        }
    })
}

impl<S: DetectionScheme> Worker<S> {
    fn new(ctx: Arc<WorkerContext>, scheme: S, pools: pool::Pools, leases: Leases) -> Self {
        let cache = KeyCache::new(&ctx, scheme.clone());
        let published = publish::Published::new(ctx.store.clone());
        let poll = Duration::from_millis(ctx.config.poll_interval_ms.max(10));
        ctx.metrics
            .detection
            .key_memory_budget_bytes
            .set(cache.budget() as i64);
        if S::Walk::refreshes_open_batches() {
            let every = ctx.config.light_refresh_messages;
            ctx.metrics.detection.refresh_messages.set(every as i64);
        }
        Self {
            ctx,
            scheme,
            pools,
            cache,
            leases,
            queue: Queue::default(),
            poll,
            per_message_secs: None,
            published,
            listed: None,
            ahead: ahead::Ahead::default(),
            online: online::Online::default(),
            head_seen: None,
            open_answered: HashMap::new(),
            refreshed_to: None,
            board_rate: BoardRate::default(),
        }
    }

    /// Turn after turn until `cancel` fires: pick the next key and serve it, or wait for new
    /// messages (or a deferred key's deadline) when none is worth serving; retry after `poll`
    /// when the store fails.
    async fn serve_until(&mut self, cancel: &CancellationToken) {
        while !cancel.is_cancelled() {
            let planning = Instant::now();
            self.keep_loaded_ahead();
            self.keep_online_done();
            let planned = self.plan().await;
            self.ctx.worker_health.round_planned(planned.is_some());
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
                    key_id, priority, ..
                } => {
                    let group =
                        (self.queue).companions(&plan.views, plan.head, key_id, self.fill());
                    // A bulk turn of keys in memory: the next cold keys load beside it.
                    if *priority == Priority::Bulk && self.cache.contains(key_id) {
                        self.load_ahead(&plan, &turn_keys(key_id, &group));
                    }
                    group
                }
                Pick::Idle { .. } => Vec::new(),
            };
            // Everything a turn pays before it detects: the plan, the pick, the published
            // schedule, the companions and the loads begun ahead.
            let took = planning.elapsed().as_secs_f64();
            self.ctx.metrics.detection.plan_seconds.observe(took);
            match pick {
                Pick::Serve {
                    key_id,
                    priority,
                    idle_fill,
                } => {
                    if idle_fill {
                        self.ctx.metrics.detection.idle_fills.inc();
                    }
                    (self.settle_online_before(&turn_keys(&key_id, &group), priority)).await;
                    let ok = if group.is_empty() {
                        self.serve_turn(&plan, &key_id, priority, cancel).await
                    } else {
                        let ids = [vec![key_id], group].concat();
                        self.serve_group(&plan, &ids, priority, cancel).await
                    };
                    // A failing key goes to the back of the queue; pause so that a key that
                    // fails every time does not spin the loop.
                    if !ok && !self.pause(cancel).await {
                        break;
                    }
                }
                Pick::Idle { until } => {
                    // Nothing else to do: finish the online batch in flight, then plan again.
                    if self.online.in_flight() {
                        self.settle_online().await;
                        continue;
                    }
                    if !self.wait_for_work(until, cancel).await {
                        break;
                    }
                }
            }
        }
        self.settle_online().await;
    }

    /// The policy's tunables from what was measured so far (before any measurement: a load
    /// costs 2 s and a message 0.1 s, pessimistic for omr-v1 on a small node).
    fn policy(&self) -> Policy {
        let max_wait = Duration::from_secs(self.ctx.config.key_max_wait_secs);
        let load = self.cache.load_secs().unwrap_or(2.0);
        let mut policy = Policy::new(load, self.per_message_secs.unwrap_or(0.1), max_wait);
        policy.room = self.cache.has_room();
        policy.board_rate = self.board_rate.per_sec();
        self.ctx
            .metrics
            .detection
            .min_load_batch
            .set(policy.min_batch as i64);
        policy
    }

    /// How a turn fills the pool with keys served together ([`Walk::grouping`]): up to
    /// [`GROUP_KEYS`] keys at one batch (or as many as the scheme asks for: a GPU's), or keys
    /// until every thread has a message.
    fn fill(&self) -> Fill {
        match S::Walk::grouping(&self.scheme) {
            Grouping::ByBatch { max_keys } => Fill::Batch {
                max_keys: max_keys.unwrap_or(GROUP_KEYS),
            },
            Grouping::ByThreads => Fill::Messages {
                threads: self.pools.threads() as u64,
                limit: self.batch_limit() as u64,
            },
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
            _ = self.ctx.board_notify.notified() => true,
            _ = tokio::time::sleep(wait) => true,
            _ = cancel.cancelled() => false,
        }
    }
}
