//! The scheduling policy: which of the keys this worker leases it serves next. A worker serves
//! every key it leases, however few fit in its memory budget, by time-sharing them:
//!
//! 1. **Online keys first.** A key whose recipient was seen recently (`online_secs`) and that has
//!    messages to detect is served before any other, loaded at once if it is not in memory
//!    (evicting an offline key), and worked until caught up. Offline keys run on a bulk pool at a
//!    lower thread priority; while an offline key's batch or load is in flight, new messages for
//!    online keys are detected at once on a second pool at the process's priority, so an online
//!    recipient's message does not wait for an offline batch to end (`turn`, `pool`).
//! 2. **Then oldest-waiting first.** Every key with a backlog has a place in one queue, ordered by
//!    when it started waiting (or last yielded). The first key in the queue is served, unless it
//!    is not in memory, memory is full (loading it evicts another key) and loading it would not
//!    pay yet: its backlog is below `min_batch` (the
//!    batch that makes the load ≤ 5% of the detection it enables, from measured load and
//!    detection times) and it has waited less than `key_max_wait_secs`. Such a key is deferred
//!    (it collects messages) and the next one is considered.
//! 3. **A served key works off its backlog in large batches**, committing every `detect_batch`
//!    messages, and yields at the first epoch boundary once it has detected at least `min_batch`
//!    messages in this turn; then it goes to the back of the queue.
//!
//! The bound: a message for a key waits at most `key_max_wait_secs` to be picked up plus the
//! turns of the keys ahead of it in the queue, each at most one epoch of messages (or its
//! backlog) plus one key load, as long as the detection work fits the CPU. The policy is pure
//! (no I/O) so that it is tested here on its own.
//! Long: the policy is pure, and its unit tests sit beside it; splitting them would part the rules from their cases.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use super::pool::Lane;

/// The share of detection time key loads may take: a key not in memory is loaded for a batch of
/// at least `load / (LOAD_SHARE × per-message detection)` messages (before `key_max_wait_secs`).
pub(super) const LOAD_SHARE: f64 = 0.05;

/// A leased key as the policy sees it.
#[derive(Debug, Clone)]
pub(super) struct KeyView {
    pub(super) key_id: String,
    /// Next board index to detect.
    pub(super) cursor: u64,
    /// Its recipient was seen within `online_secs`.
    pub(super) online: bool,
    /// Its expanded key is in this worker's memory.
    pub(super) cached: bool,
    /// How far it may be detected now (below the board head for an offline key of a batch
    /// scheme: the end of the last full batch).
    pub(super) head: u64,
    /// The batch its cursor is in, for a batch scheme (0 otherwise): keys behind are served
    /// lowest batch first, so that they go through the board together and each batch's shared
    /// work is prepared once for all of them.
    pub(super) batch: u64,
}

impl KeyView {
    /// Messages it can detect now with the board at `head`.
    pub(super) fn behind(&self, head: u64) -> u64 {
        self.head.min(head).saturating_sub(self.cursor)
    }
}

/// What the worker should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pick {
    /// Serve this key now.
    Serve { key_id: String, lane: Lane },
    /// Nothing worth doing now: wait for new messages, or until `until` (when a deferred key's
    /// wait runs out).
    Idle { until: Option<Instant> },
}

/// The queue of waiting keys: when each key with a backlog started waiting.
#[derive(Debug, Default)]
pub(super) struct Queue {
    /// Planning looks up every key here each turn: a fast hash (the ids are the server's own).
    waiting_since: FxHashMap<String, Instant>,
    /// Counts the keys that started or stopped waiting (see [`Queue::changes`]).
    changes: u64,
}

/// The policy's tunables for one decision.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    /// Smallest backlog worth loading a key for.
    pub(super) min_batch: u64,
    /// Longest a key not in memory is deferred.
    pub(super) max_wait: Duration,
    /// Whether one more key fits in memory without evicting one.
    pub(super) room: bool,
}

impl Policy {
    /// `min_batch` from the measured mean load time and per-message detection time.
    pub(super) fn new(load_secs: f64, per_message_secs: f64, max_wait: Duration) -> Self {
        let min_batch = if per_message_secs > 0.0 {
            (load_secs / (LOAD_SHARE * per_message_secs))
                .ceil()
                .max(1.0) as u64
        } else {
            1
        };
        Policy {
            min_batch,
            max_wait,
            room: false,
        }
    }
}

impl Queue {
    /// Start the clock of every key that has fallen behind `head` and stop that of every key
    /// that caught up or is gone.
    pub(super) fn observe(&mut self, keys: &[KeyView], head: u64, now: Instant) {
        // One look-up per key behind; the keys that stopped waiting (or are gone) are looked for
        // only when some did.
        let mut behind = 0;
        for k in keys.iter().filter(|k| k.behind(head) > 0) {
            behind += 1;
            if !self.waiting_since.contains_key(&k.key_id) {
                self.waiting_since.insert(k.key_id.clone(), now);
                self.changes += 1;
            }
        }
        if self.waiting_since.len() > behind {
            let behind: HashSet<&str> = (keys.iter())
                .filter(|k| k.behind(head) > 0)
                .map(|k| k.key_id.as_str())
                .collect();
            let before = self.waiting_since.len();
            self.waiting_since
                .retain(|id, _| behind.contains(id.as_str()));
            self.changes += (before - self.waiting_since.len()) as u64;
        }
    }

    /// How many times a key started or stopped waiting so far: what changed when it moved.
    pub(super) fn changes(&self) -> u64 {
        self.changes
    }

    /// Send `key_id` to the back of the queue (it had its turn and still has a backlog).
    pub(super) fn requeue(&mut self, key_id: &str, now: Instant) {
        if let Some(t) = self.waiting_since.get_mut(key_id) {
            *t = now;
        }
    }

    /// How long `key_id` has been waiting, if it is.
    pub(super) fn waited(&self, key_id: &str, now: Instant) -> Option<Duration> {
        self.waiting_since
            .get(key_id)
            .map(|t| now.saturating_duration_since(*t))
    }

    /// The keys with a backlog, first to be served first (online ones, then the lowest batch
    /// for a batch scheme, then oldest waiting).
    pub(super) fn order<'a>(&self, keys: &'a [KeyView], head: u64) -> Vec<&'a KeyView> {
        self.first(keys.iter().filter(|k| k.behind(head) > 0), usize::MAX)
    }

    /// The `n` first of `keys` in queue order, in that order: a selection then a sort of the
    /// `n`, so that taking a few among thousands costs one pass over them.
    pub(super) fn first<'a>(
        &self,
        keys: impl Iterator<Item = &'a KeyView>,
        n: usize,
    ) -> Vec<&'a KeyView> {
        if n == 0 {
            return Vec::new();
        }
        let mut ranked: Vec<(Rank<'a>, &'a KeyView)> = keys.map(|k| (self.rank(k), k)).collect();
        if ranked.len() > n {
            ranked.select_nth_unstable_by(n - 1, |a, b| a.0.cmp(&b.0));
            ranked.truncate(n);
        }
        ranked.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        ranked.into_iter().map(|(_, k)| k).collect()
    }

    /// Where `k` stands in the queue: online first, then the lowest batch, then oldest waiting,
    /// then by id (so that the order is total).
    fn rank<'a>(&self, k: &'a KeyView) -> Rank<'a> {
        let since = self.waiting_since.get(&k.key_id).copied();
        (!k.online, k.batch, since, k.key_id.as_str())
    }

    /// The next key to serve among `keys` (this worker's leased keys) with the board at `head`:
    /// the first in queue order that is worth serving now, found in one pass (no sort).
    pub(super) fn pick(&self, keys: &[KeyView], head: u64, policy: Policy, now: Instant) -> Pick {
        let mut until: Option<Instant> = None;
        let mut best: Option<(Rank<'_>, &KeyView, Lane)> = None;
        for k in keys.iter().filter(|k| k.behind(head) > 0) {
            let rank = self.rank(k);
            let waited = (rank.2).map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
            let lane = if k.online || k.cached || policy.room || k.behind(head) >= policy.min_batch
            {
                Lane::of(k.online)
            } else if waited >= policy.max_wait {
                Lane::Bulk
            } else {
                let due = now + (policy.max_wait - waited);
                until = Some(until.map_or(due, |u| u.min(due)));
                continue;
            };
            if best.as_ref().is_none_or(|(b, ..)| rank < *b) {
                best = Some((rank, k, lane));
            }
        }
        match best {
            Some((_, k, lane)) => Pick::Serve {
                key_id: k.key_id.clone(),
                lane,
            },
            None => Pick::Idle { until },
        }
    }
}

/// A key's place in the queue (see [`Queue::rank`]).
type Rank<'a> = (bool, u64, Option<Instant>, &'a str);

/// How a turn fills the pool with keys served together (see [`Queue::companions`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Fill {
    /// A batch scheme: up to `max_keys` keys at the same batch, in one pass over its shared work.
    Batch { max_keys: usize },
    /// A scheme that detects one message at a time, each message on a thread: keys until the
    /// turn has a message per thread (a key contributes at most `limit`, its batch).
    Messages { threads: u64, limit: u64 },
}

impl Queue {
    /// The keys to serve with `leader` in one turn, in queue order: offline keys in memory with
    /// messages to detect, when `leader` is one too. A batch scheme groups the keys at
    /// `leader`'s batch (and reach); a per-message scheme adds keys only while the turn's
    /// messages cannot fill the threads, so a key far behind still has its turn to itself.
    /// Online keys are never grouped: they keep their own lane.
    pub(super) fn companions(
        &self,
        keys: &[KeyView],
        head: u64,
        leader: &str,
        fill: Fill,
    ) -> Vec<String> {
        let Some(lead) = keys.iter().find(|k| k.key_id == leader) else {
            return Vec::new();
        };
        if lead.online || !lead.cached {
            return Vec::new();
        }
        // Only keys in memory can join: a few among the leased ones, so only they are ranked.
        let candidates = (keys.iter())
            .filter(|k| k.behind(head) > 0 && k.key_id != leader && k.cached && !k.online);
        match fill {
            Fill::Batch { max_keys } => {
                let same = candidates.filter(|k| k.batch == lead.batch && k.head == lead.head);
                (self.first(same, max_keys.saturating_sub(1)).into_iter())
                    .map(|k| k.key_id.clone())
                    .collect()
            }
            Fill::Messages { threads, limit } => {
                let mut work = lead.behind(head).min(limit);
                let mut out = Vec::new();
                for k in self.first(candidates, usize::MAX) {
                    if work >= threads {
                        break;
                    }
                    work += k.behind(head).min(limit);
                    out.push(k.key_id.clone());
                }
                out
            }
        }
    }
}

/// Rough times to catch up: what one message and one key load cost on this worker.
#[derive(Debug, Clone, Copy)]
pub(super) struct Costs {
    pub(super) per_message: Duration,
    pub(super) load: Duration,
}

impl Queue {
    /// For every key with a backlog, roughly how long from `now` until it is caught up if the
    /// queue is served in order and no new message arrives: the work of the keys ahead of it
    /// (their backlogs and loads), then its own; a deferred key starts no earlier than its wait
    /// runs out.
    pub(super) fn estimates(
        &self,
        keys: &[KeyView],
        head: u64,
        policy: Policy,
        costs: Costs,
        now: Instant,
    ) -> Vec<(String, Duration)> {
        let mut busy = Duration::ZERO;
        let mut out = Vec::new();
        for k in self.order(keys, head) {
            let load = if k.cached { Duration::ZERO } else { costs.load };
            let own = load + costs.per_message * k.behind(head).min(u32::MAX as u64) as u32;
            let deferred =
                !(k.online || k.cached || policy.room) && k.behind(head) < policy.min_batch;
            if deferred {
                let waited = self.waited(&k.key_id, now).unwrap_or_default();
                let start = busy.max(policy.max_wait.saturating_sub(waited));
                out.push((k.key_id.clone(), start + own));
            } else {
                busy += own;
                out.push((k.key_id.clone(), busy));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str, cursor: u64, online: bool, cached: bool) -> KeyView {
        KeyView {
            key_id: id.into(),
            cursor,
            online,
            cached,
            head: u64::MAX,
            batch: 0,
        }
    }

    fn policy(min_batch: u64) -> Policy {
        Policy {
            min_batch,
            max_wait: Duration::from_secs(60),
            room: false,
        }
    }

    fn serve(id: &str, online: bool) -> Pick {
        Pick::Serve {
            key_id: id.into(),
            lane: Lane::of(online),
        }
    }

    #[test]
    fn keys_of_a_batch_scheme_go_lowest_batch_first_and_stop_at_their_reach() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let at = |id: &str, cursor: u64, head: u64| KeyView {
            batch: cursor / 4096,
            head,
            ..key(id, cursor, false, true)
        };
        // "a" waited longest but is a batch ahead; "c" cannot go past the full batches.
        let keys = vec![at("a", 4096, 8192), at("b", 0, 8192), at("c", 8192, 8192)];
        q.observe(&keys[..1], 9000, t0);
        q.observe(&keys, 9000, t0 + Duration::from_secs(1));
        let order: Vec<&str> = q
            .order(&keys, 9000)
            .iter()
            .map(|k| k.key_id.as_str())
            .collect();
        assert_eq!(order, ["b", "a"]);
        assert_eq!(q.pick(&keys, 9000, policy(1), t0), serve("b", false));
    }

    #[test]
    fn an_online_key_goes_before_keys_that_waited_longer() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let mut keys = vec![key("a", 0, false, true), key("b", 10, false, true)];
        q.observe(&keys, 10, t0);
        keys.push(key("c", 10, true, false));
        q.observe(&keys, 11, t0 + Duration::from_secs(5));
        assert_eq!(
            q.pick(&keys, 11, policy(100), t0 + Duration::from_secs(5)),
            serve("c", true)
        );
    }

    #[test]
    fn oldest_waiting_first_and_a_served_key_goes_to_the_back() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let keys = vec![key("a", 5, false, true), key("b", 0, false, true)];
        q.observe(&keys[1..], 10, t0);
        q.observe(&keys, 10, t0 + Duration::from_secs(1));
        let now = t0 + Duration::from_secs(2);
        assert_eq!(q.pick(&keys, 10, policy(1), now), serve("b", false));
        q.requeue("b", now);
        assert_eq!(q.pick(&keys, 10, policy(1), now), serve("a", false));
    }

    #[test]
    fn a_key_not_in_memory_is_deferred_until_its_batch_pays_or_its_wait_runs_out() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let keys = vec![key("a", 90, false, false)];
        q.observe(&keys, 100, t0);
        let later = t0 + Duration::from_secs(20);
        assert_eq!(
            q.pick(&keys, 100, policy(50), later),
            Pick::Idle {
                until: Some(t0 + Duration::from_secs(60))
            }
        );
        // The backlog grew past the batch that pays for the load.
        assert_eq!(q.pick(&keys, 140, policy(50), later), serve("a", false));
        // Or the wait ran out.
        let timeout = t0 + Duration::from_secs(60);
        assert_eq!(q.pick(&keys, 100, policy(50), timeout), serve("a", false));
        // Or memory has room: loading it evicts nobody.
        let room = Policy {
            room: true,
            ..policy(50)
        };
        assert_eq!(q.pick(&keys, 100, room, later), serve("a", false));
    }

    #[test]
    fn a_deferred_key_does_not_block_a_cached_one_behind_it() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let keys = vec![key("cold", 90, false, false), key("warm", 99, false, true)];
        q.observe(&keys[..1], 100, t0);
        q.observe(&keys, 100, t0 + Duration::from_secs(1));
        assert_eq!(
            q.pick(&keys, 100, policy(50), t0 + Duration::from_secs(2)),
            serve("warm", false)
        );
    }

    #[test]
    fn caught_up_keys_leave_the_queue() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let keys = vec![key("a", 3, false, true)];
        q.observe(&keys, 10, t0);
        assert!(q.waited("a", t0).is_some());
        q.observe(&[key("a", 10, false, true)], 10, t0);
        assert_eq!(q.waited("a", t0), None);
        assert_eq!(
            q.pick(&[key("a", 10, false, true)], 10, policy(1), t0),
            Pick::Idle { until: None }
        );
    }

    #[test]
    fn estimates_add_up_the_work_ahead_and_deferred_keys_wait_their_deadline() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let keys = vec![
            key("first", 90, false, true),
            key("second", 95, false, false),
            key("deferred", 99, false, false),
        ];
        q.observe(&keys[..1], 100, t0);
        q.observe(&keys[..2], 100, t0 + Duration::from_secs(1));
        q.observe(&keys, 100, t0 + Duration::from_secs(2));
        let costs = Costs {
            per_message: Duration::from_secs(1),
            load: Duration::from_secs(3),
        };
        let got = q.estimates(&keys, 100, policy(5), costs, t0 + Duration::from_secs(2));
        let secs: Vec<(&str, u64)> = got.iter().map(|(k, d)| (k.as_str(), d.as_secs())).collect();
        // first: 10 messages; second: 10 + a load and 5 messages; deferred: its wait runs out
        // 60 s after it started waiting (now), then a load and 1 message.
        assert_eq!(secs, vec![("first", 10), ("second", 18), ("deferred", 64)]);
    }

    #[test]
    fn keys_a_few_messages_behind_share_a_turn_until_it_fills_the_threads() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let keys = vec![
            key("lead", 9, false, true),
            key("online", 9, true, true),
            key("cold", 9, false, false),
            key("b", 8, false, true),
            key("c", 9, false, true),
            key("d", 9, false, true),
            key("done", 10, false, true),
        ];
        q.observe(&keys[..1], 10, t0);
        q.observe(&keys, 10, t0 + Duration::from_secs(1));
        let fill = |threads| Fill::Messages { threads, limit: 64 };
        // One message for "lead", two for "b", one for "c": four threads are full.
        assert_eq!(q.companions(&keys, 10, "lead", fill(4)), ["b", "c"]);
        assert_eq!(
            q.companions(&keys, 10, "lead", fill(1)),
            Vec::<String>::new()
        );
        assert_eq!(q.companions(&keys, 10, "lead", fill(16)), ["b", "c", "d"]);
        // A key far behind fills the threads alone; an online or cold leader serves alone.
        let far = [vec![key("far", 0, false, true)], keys.clone()].concat();
        q.observe(&far, 100, t0);
        assert!(q.companions(&far, 100, "far", fill(16)).is_empty());
        assert!(q.companions(&keys, 10, "online", fill(16)).is_empty());
        assert!(q.companions(&keys, 10, "cold", fill(16)).is_empty());
    }

    #[test]
    fn a_batch_scheme_groups_the_keys_at_the_leaders_batch() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let at = |id: &str, cursor: u64| KeyView {
            batch: cursor / 4096,
            head: 8192,
            ..key(id, cursor, false, true)
        };
        let keys = vec![
            at("a", 0),
            at("b", 4096),
            at("c", 100),
            at("d", 0),
            at("e", 0),
        ];
        q.observe(&keys, 9000, t0);
        let fill = Fill::Batch { max_keys: 3 };
        assert_eq!(q.companions(&keys, 9000, "a", fill), ["c", "d"]);
        assert!(q.companions(&keys, 9000, "b", fill).is_empty());
    }

    #[test]
    fn min_batch_makes_loads_a_small_share_of_detection() {
        // A 0.3 s load and 50 ms per message: 0.3 / (0.05 × 0.05) = 120 messages.
        let p = Policy::new(0.3, 0.05, Duration::from_secs(60));
        assert_eq!(p.min_batch, 120);
        assert_eq!(Policy::new(0.3, 0.0, Duration::ZERO).min_batch, 1);
    }

    /// The pick made in one pass is the definition's: the first key in queue order that is
    /// worth serving now (and, when none is, the earliest deadline of a deferred key); and the
    /// selection of the first `n` is the queue order's first `n`. On random queues.
    #[test]
    fn one_pass_pick_and_selection_agree_with_the_sorted_queue() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let t0 = Instant::now();
        for round in 0..300 {
            let mut q = Queue::default();
            let head = 1_000;
            let keys: Vec<KeyView> = (0..rng.gen_range(0..40))
                .map(|i| KeyView {
                    key_id: format!("k{:02}", rng.gen_range(0..60) * 100 + i),
                    cursor: rng.gen_range(990..=1_000),
                    online: rng.gen_bool(0.1),
                    cached: rng.gen_bool(0.3),
                    head: if rng.gen_bool(0.2) { 995 } else { u64::MAX },
                    batch: rng.gen_range(0..3),
                })
                .collect();
            // Keys started waiting at different times, some at the same one.
            for k in &keys {
                let at = t0 + Duration::from_secs(rng.gen_range(0..4) * 30);
                q.observe(std::slice::from_ref(k), head, at);
            }
            let now = t0 + Duration::from_secs(rng.gen_range(60..200));
            let p = Policy {
                min_batch: rng.gen_range(1..12),
                max_wait: Duration::from_secs(120),
                room: rng.gen_bool(0.2),
            };
            // The queue order, by a plain sort.
            let mut order: Vec<&KeyView> = keys.iter().filter(|k| k.behind(head) > 0).collect();
            order.sort_by_key(|k| {
                let since = q.waiting_since.get(&k.key_id).copied();
                (!k.online, k.batch, since, k.key_id.clone())
            });
            let ids = |v: &[&KeyView]| v.iter().map(|k| k.key_id.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&q.order(&keys, head)), ids(&order), "round {round}");
            let mut until: Option<Instant> = None;
            let mut want = None;
            for k in &order {
                let waited = q.waited(&k.key_id, now).unwrap_or_default();
                if k.online || k.cached || p.room || k.behind(head) >= p.min_batch {
                    want = Some(serve(&k.key_id, k.online));
                } else if waited >= p.max_wait {
                    want = Some(serve(&k.key_id, false));
                } else {
                    let due = now + (p.max_wait - waited);
                    until = Some(until.map_or(due, |u| u.min(due)));
                    continue;
                }
                break;
            }
            let want = want.unwrap_or(Pick::Idle { until });
            assert_eq!(q.pick(&keys, head, p, now), want, "round {round}: {keys:?}");
            for n in [0, 1, 3, usize::MAX] {
                let got: Vec<&str> = (q.first(keys.iter().filter(|k| k.behind(head) > 0), n))
                    .iter()
                    .map(|k| k.key_id.as_str())
                    .collect();
                let sorted: Vec<&str> = order.iter().take(n).map(|k| k.key_id.as_str()).collect();
                assert_eq!(got, sorted, "round {round}, n = {n}");
            }
        }
    }
}
