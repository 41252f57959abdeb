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
//!    (it collects messages) and the next one is considered. But when no key is worth serving
//!    now, the first deferred key whose backlog would grow by less than a quarter before its
//!    wait runs out (at the board's rate lately, [`BoardRate`]: on a still board, any) is served
//!    anyway (an *idle fill*): the pool would idle, the load is paid either way, and waiting
//!    would save little of it (such a load covers at least four fifths of what the deferred one
//!    would: at most a quarter more loads than deferring, and no idle pool while keys wait).
//! 3. **A served key works off its backlog in large batches**, committing every `detect_batch`
//!    messages, and yields at the first epoch boundary once it has detected at least `min_batch`
//!    messages in this turn; then it goes to the back of the queue.
//!
//! The bound: a message for a key waits at most `key_max_wait_secs` to be picked up plus the
//! turns of the keys ahead of it in the queue, each at most one epoch of messages (or its
//! backlog) plus one key load, as long as the detection work fits the CPU. The policy is pure
//! (no I/O) so that it is tested here on its own.
//! Long: the policy is pure, and its unit tests sit beside it; splitting them would part the rules from their cases.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::pool::Priority;

/// The share of detection time key loads may take: a key not in memory is loaded for a batch of
/// at least `load / (LOAD_SHARE × per-message detection)` messages (before `key_max_wait_secs`).
pub(super) const LOAD_SHARE: f64 = 0.05;

/// A deferred key fills an idle pool when the board would grow its backlog by less than this
/// share of it before its wait runs out.
pub(super) const FILL_GROWTH: f64 = 0.25;

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
    /// The group its cursor is in (`Walk::group_of`: a batch scheme's batch, 0 otherwise):
    /// keys behind are served lowest group first, so that they go through the board together
    /// and each batch's shared work is prepared once for all of them.
    pub(super) group: u64,
    /// When it started waiting, or last yielded its turn (`None` while it has nothing to
    /// detect): its place in the queue, kept by [`Queue::observe`]. Kept in the view, not in a
    /// map by key, so that the queue's passes over thousands of keys look nothing up.
    pub(super) since: Option<Instant>,
    /// Its place in the listing of the worker's keys (by registration): the queue's last
    /// tie-break.
    pub(super) place: usize,
}

impl KeyView {
    /// Messages it can detect now with the board at `head`.
    pub(super) fn behind(&self, head: u64) -> u64 {
        self.head.min(head).saturating_sub(self.cursor)
    }

    /// How long it has been waiting at `now` (zero when it is not).
    pub(super) fn waited(&self, now: Instant) -> Duration {
        self.since
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
    }
}

/// What the worker should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pick {
    /// Serve this key now (`idle_fill`: a deferred key, because nothing else is worth it).
    Serve {
        key_id: String,
        priority: Priority,
        idle_fill: bool,
    },
    /// Nothing worth doing now: wait for new messages, or until `until` (when a deferred key's
    /// wait runs out).
    Idle { until: Option<Instant> },
}

/// The queue of waiting keys. Each key's place (when it started waiting) is in its view
/// ([`KeyView::since`]); the queue holds what happened between two plans.
#[derive(Debug, Default)]
pub(super) struct Queue {
    /// Keys that had their turn since the last [`Queue::observe`], and when it ended.
    requeued: Vec<(String, Instant)>,
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
    /// New board messages per second lately ([`BoardRate`]).
    pub(super) board_rate: f64,
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
            board_rate: 0.0,
        }
    }

    /// Whether `k`, not in memory, is worth loading at `now` even if memory is full (with this
    /// policy's `room`, whatever it is): online, a backlog worth the load, its wait run out, or
    /// it may fill an idle pool. The pick serves such a key when its turn comes.
    pub(super) fn worth_loading(&self, k: &KeyView, head: u64, now: Instant) -> bool {
        let waited = k.waited(now);
        !self.defers(k, head, waited) || self.fills(k, head, waited)
    }

    /// Whether `k`, after waiting `waited`, is deferred to collect a batch worth its load: not
    /// online, not in memory, memory full, its backlog below `min_batch` and its wait not run
    /// out. Every other key with a backlog is served when its turn comes (on its priority).
    fn defers(&self, k: &KeyView, head: u64, waited: Duration) -> bool {
        !(k.online || k.cached || self.room || k.behind(head) >= self.min_batch)
            && waited < self.max_wait
    }

    /// Whether `k`, deferred after waiting `waited`, may fill an idle pool: the board would
    /// grow its backlog by less than [`FILL_GROWTH`] of it before its wait runs out.
    fn fills(&self, k: &KeyView, head: u64, waited: Duration) -> bool {
        let left = self.max_wait.saturating_sub(waited).as_secs_f64();
        self.board_rate * left < FILL_GROWTH * k.behind(head) as f64
    }
}

/// The board's rate of new messages: the head now against the head a minute ago, from the
/// heads the plans read (sampled at most once a second), but at most one message per second it
/// has been still: a board that posted a burst and then nothing for ten seconds is taken at
/// 0.1 messages a second, not at the burst's rate for the rest of the minute (an idle pool
/// would wait that minute before it fills). A board that posts in bursts minutes apart is so
/// taken as slow between them: fills then load keys a burst may grow, at most one load more
/// per key and burst.
#[derive(Debug, Default)]
pub(super) struct BoardRate {
    samples: VecDeque<(u64, Instant)>,
    /// The head last seen, and when it was first seen.
    moved: Option<(u64, Instant)>,
    per_sec: f64,
}

impl BoardRate {
    const WINDOW: Duration = Duration::from_secs(60);

    /// A plan read `head` at `now`.
    pub(super) fn observe(&mut self, head: u64, now: Instant) {
        let second = Duration::from_secs(1);
        if (self.samples.back()).is_none_or(|&(_, t)| now.saturating_duration_since(t) >= second) {
            self.samples.push_back((head, now));
        }
        // Keep the newest sample at least a window old, and those after it.
        while (self.samples.get(1))
            .is_some_and(|&(_, t)| now.saturating_duration_since(t) >= Self::WINDOW)
        {
            self.samples.pop_front();
        }
        if self.moved.is_none_or(|(h, _)| h != head) {
            self.moved = Some((head, now));
        }
        let (h0, t0) = self.samples[0];
        let secs = now.saturating_duration_since(t0).as_secs_f64().max(1.0);
        let window = head.saturating_sub(h0) as f64 / secs;
        let still = self
            .moved
            .map_or(0.0, |(_, t)| now.saturating_duration_since(t).as_secs_f64());
        self.per_sec = if still >= 1.0 {
            window.min(1.0 / still)
        } else {
            window
        };
    }

    /// Messages per second at the last observation (0 before the board moved).
    pub(super) fn per_sec(&self) -> f64 {
        self.per_sec
    }
}

impl Queue {
    /// Start the clock of every key that has fallen behind `head` and stop that of every key
    /// that caught up; send the keys that had their turn since the last look (found by
    /// `index`, their places in `keys`) to the back of the queue. One pass, no look-up per key.
    pub(super) fn observe(
        &mut self,
        keys: &mut [KeyView],
        index: &HashMap<String, usize>,
        head: u64,
        now: Instant,
    ) {
        for (id, at) in self.requeued.drain(..) {
            if let Some(k) = index.get(&id).and_then(|&i| keys.get_mut(i)) {
                if k.since.is_some() {
                    k.since = Some(at);
                }
            }
        }
        for k in keys.iter_mut() {
            match (k.behind(head) > 0, k.since) {
                (true, None) => k.since = Some(now),
                (false, Some(_)) => k.since = None,
                _ => continue,
            }
            self.changes += 1;
        }
    }

    /// How many times a key started or stopped waiting so far: what changed when it moved.
    pub(super) fn changes(&self) -> u64 {
        self.changes
    }

    /// Send `key_id` to the back of the queue (it had its turn, and if it still has a backlog
    /// it waits behind every key waiting now), from the next [`Queue::observe`] on.
    pub(super) fn requeue(&mut self, key_id: &str, now: Instant) {
        self.requeued.push((key_id.to_string(), now));
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
        let mut ranked: Vec<(Rank, &'a KeyView)> = keys.map(|k| (self.rank(k), k)).collect();
        if ranked.len() > n {
            ranked.select_nth_unstable_by_key(n - 1, |r| r.0);
            ranked.truncate(n);
        }
        ranked.sort_unstable_by_key(|r| r.0);
        ranked.into_iter().map(|(_, k)| k).collect()
    }

    /// Where `k` stands in the queue: online first, then the lowest batch, then oldest waiting,
    /// then in the listing's order (the order of registration: so that the order is total,
    /// and compares no ids).
    fn rank(&self, k: &KeyView) -> Rank {
        (!k.online, k.group, k.since, k.place)
    }

    /// The next key to serve among `keys` (this worker's leased keys) with the board at `head`:
    /// the first in queue order that is worth serving now, found in one pass (no sort).
    pub(super) fn pick(&self, keys: &[KeyView], head: u64, policy: Policy, now: Instant) -> Pick {
        let mut until: Option<Instant> = None;
        let mut best: Option<(Rank, &KeyView)> = None;
        let mut fill: Option<(Rank, &KeyView)> = None;
        for k in keys.iter().filter(|k| k.behind(head) > 0) {
            let rank = self.rank(k);
            let waited = k.waited(now);
            if policy.defers(k, head, waited) {
                let due = now + (policy.max_wait - waited);
                until = Some(until.map_or(due, |u| u.min(due)));
                if policy.fills(k, head, waited) && fill.as_ref().is_none_or(|(b, _)| rank < *b) {
                    fill = Some((rank, k));
                }
                continue;
            }
            if best.as_ref().is_none_or(|(b, _)| rank < *b) {
                best = Some((rank, k));
            }
        }
        match (best, fill) {
            (Some((_, k)), _) => Pick::Serve {
                key_id: k.key_id.clone(),
                priority: Priority::of(k.online),
                idle_fill: false,
            },
            (None, Some((_, k))) => Pick::Serve {
                key_id: k.key_id.clone(),
                priority: Priority::Bulk,
                idle_fill: true,
            },
            (None, None) => Pick::Idle { until },
        }
    }
}

/// A key's place in the queue (see [`Queue::rank`]).
type Rank = (bool, u64, Option<Instant>, usize);

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
    /// The keys to serve with `leader` in one turn, in queue order: keys in memory with messages
    /// to detect, online when `leader` is and offline when it is not. A batch scheme groups the
    /// keys at `leader`'s batch and reach (online keys refreshed to one mark share one pass
    /// over its shared work); a per-message scheme adds offline keys only while the turn's
    /// messages cannot fill the threads, so a key far behind still has its turn to itself, and
    /// never groups online keys.
    pub(super) fn companions(
        &self,
        keys: &[KeyView],
        head: u64,
        leader: &str,
        fill: Fill,
    ) -> Vec<String> {
        // Only keys in memory lead or join: a few among the leased ones, so only their ids are
        // compared and only they are ranked.
        let Some(lead) = (keys.iter()).find(|k| k.cached && k.key_id == leader) else {
            return Vec::new();
        };
        let candidates = (keys.iter()).filter(|k| {
            k.cached && k.online == lead.online && k.behind(head) > 0 && k.key_id != leader
        });
        match fill {
            Fill::Batch { max_keys } => {
                let same = candidates.filter(|k| k.group == lead.group && k.head == lead.head);
                (self.first(same, max_keys.saturating_sub(1)).into_iter())
                    .map(|k| k.key_id.clone())
                    .collect()
            }
            Fill::Messages { .. } if lead.online => Vec::new(),
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
    /// runs out, unless it would fill an idle pool (then it is counted in its place).
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
            let waited = k.waited(now);
            let deferred = !(k.online || k.cached || policy.room)
                && k.behind(head) < policy.min_batch
                && !policy.fills(k, head, waited);
            if deferred {
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
            group: 0,
            since: None,
            place: 0,
        }
    }

    /// `keys` as the worker lists them: each in its place.
    fn listing(mut keys: Vec<KeyView>) -> Vec<KeyView> {
        for (i, k) in keys.iter_mut().enumerate() {
            k.place = i;
        }
        keys
    }

    /// The worker's look at its keys before each pick (`keys` are the whole listing).
    fn observe(q: &mut Queue, keys: &mut [KeyView], head: u64, now: Instant) {
        let index = (keys.iter().enumerate())
            .map(|(i, k)| (k.key_id.clone(), i))
            .collect();
        q.observe(keys, &index, head, now);
    }

    fn policy(min_batch: u64) -> Policy {
        Policy {
            min_batch,
            max_wait: Duration::from_secs(60),
            room: false,
            // Busy enough that no deferred key fills an idle pool, unless a test says so.
            board_rate: 1e9,
        }
    }

    fn serve(id: &str, online: bool) -> Pick {
        Pick::Serve {
            key_id: id.into(),
            priority: Priority::of(online),
            idle_fill: false,
        }
    }

    fn fill(id: &str) -> Pick {
        Pick::Serve {
            key_id: id.into(),
            priority: Priority::Bulk,
            idle_fill: true,
        }
    }

    #[test]
    fn keys_of_a_batch_scheme_go_lowest_batch_first_and_stop_at_their_reach() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let at = |id: &str, cursor: u64, head: u64| KeyView {
            group: cursor / 4096,
            head,
            ..key(id, cursor, false, true)
        };
        // "a" waited longest but is a batch ahead; "c" cannot go past the full batches.
        let mut keys = listing(vec![
            at("a", 4096, 8192),
            at("b", 0, 8192),
            at("c", 8192, 8192),
        ]);
        observe(&mut q, &mut keys[..1], 9000, t0);
        observe(&mut q, &mut keys, 9000, t0 + Duration::from_secs(1));
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
        let mut keys = listing(vec![key("a", 0, false, true), key("b", 10, false, true)]);
        observe(&mut q, &mut keys, 10, t0);
        keys.push(KeyView {
            place: 2,
            ..key("c", 10, true, false)
        });
        observe(&mut q, &mut keys, 11, t0 + Duration::from_secs(5));
        assert_eq!(
            q.pick(&keys, 11, policy(100), t0 + Duration::from_secs(5)),
            serve("c", true)
        );
    }

    #[test]
    fn oldest_waiting_first_and_a_served_key_goes_to_the_back() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let mut keys = listing(vec![key("a", 5, false, true), key("b", 0, false, true)]);
        observe(&mut q, &mut keys[1..], 10, t0);
        observe(&mut q, &mut keys, 10, t0 + Duration::from_secs(1));
        let now = t0 + Duration::from_secs(2);
        assert_eq!(q.pick(&keys, 10, policy(1), now), serve("b", false));
        q.requeue("b", now);
        observe(&mut q, &mut keys, 10, now);
        assert_eq!(q.pick(&keys, 10, policy(1), now), serve("a", false));
        // A key that caught up after its turn leaves the queue: nothing to requeue.
        q.requeue("a", now);
        keys[0].cursor = 10;
        observe(&mut q, &mut keys, 10, now + Duration::from_secs(1));
        assert_eq!((keys[0].since, keys[1].since), (None, Some(now)));
    }

    #[test]
    fn a_key_not_in_memory_is_deferred_until_its_batch_pays_or_its_wait_runs_out() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let mut keys = listing(vec![key("a", 90, false, false)]);
        observe(&mut q, &mut keys, 100, t0);
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
    fn a_deferred_key_fills_an_idle_pool_when_waiting_would_grow_its_backlog_little() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        // Ten messages behind, not worth a load (50), 40 s of its wait left.
        let mut keys = listing(vec![key("a", 90, false, false), key("b", 95, false, false)]);
        observe(&mut q, &mut keys[..1], 100, t0);
        observe(&mut q, &mut keys, 100, t0 + Duration::from_secs(1));
        let now = t0 + Duration::from_secs(20);
        let at = |board_rate| Policy {
            board_rate,
            ..policy(50)
        };
        // A still board, or one that would add less than a quarter of the backlog (2.5
        // messages) in 40 s: the first in the queue fills the pool.
        assert_eq!(q.pick(&keys, 100, at(0.0), now), fill("a"));
        assert_eq!(q.pick(&keys, 100, at(0.05), now), fill("a"));
        // Busier: it waits, and so does "b" (5 behind, 41 s left).
        let idle = Pick::Idle {
            until: Some(t0 + Duration::from_secs(60)),
        };
        assert_eq!(q.pick(&keys, 100, at(0.1), now), idle);
        // A key worth serving goes first: no fill while there is work.
        keys[1].cached = true;
        assert_eq!(q.pick(&keys, 100, at(0.0), now), serve("b", false));
        // The estimates count a key that fills in its place, not at its deadline.
        let costs = Costs {
            per_message: Duration::from_secs(1),
            load: Duration::from_secs(3),
        };
        let secs = |rate| {
            (q.estimates(&keys, 100, at(rate), costs, now).into_iter())
                .map(|(k, d)| (k, d.as_secs()))
                .collect::<Vec<_>>()
        };
        assert_eq!(secs(0.0), [("a".into(), 13), ("b".into(), 18)]);
        assert_eq!(secs(0.1), [("a".into(), 53), ("b".into(), 5)]);
    }

    #[test]
    fn the_board_rate_is_the_heads_move_over_the_last_minute() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut r = BoardRate::default();
        r.observe(100, t0);
        assert_eq!(r.per_sec(), 0.0);
        // Within a second of the last sample: not a sample, but the rate counts the move.
        r.observe(101, t0 + Duration::from_millis(200));
        assert_eq!(r.per_sec(), 1.0);
        r.observe(160, at(30));
        assert_eq!(r.per_sec(), 2.0);
        // A minute later with no post: still.
        r.observe(160, at(90));
        assert_eq!(r.per_sec(), 0.0);
        r.observe(220, at(91));
        assert_eq!(r.per_sec(), 60.0 / 61.0);
    }

    #[test]
    fn a_board_still_after_a_burst_is_taken_as_slow_before_the_minute_is_out() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut r = BoardRate::default();
        r.observe(0, t0);
        // 16,384 messages in two seconds.
        r.observe(8_000, at(1_000));
        r.observe(16_384, at(2_000));
        assert_eq!(r.per_sec(), 8_192.0);
        // Still for half a second: a pause within the burst, its rate holds.
        r.observe(16_384, at(2_500));
        assert_eq!(r.per_sec(), 16_384.0 / 2.5);
        // Still for ten seconds: at most one message in ten seconds, not the minute's 1,300.
        r.observe(16_384, at(12_000));
        assert_eq!(r.per_sec(), 0.1);
        // It moves again: the window's rate, not the stillness before.
        r.observe(16_385, at(12_100));
        assert!(
            (r.per_sec() - 16_385.0 / 12.1).abs() < 1e-6,
            "{}",
            r.per_sec()
        );
        // A board that posts every two seconds is taken at its rate, give or take.
        let mut r = BoardRate::default();
        for i in 0..40u64 {
            r.observe(i, at(2_000 * i));
            r.observe(i, at(2_000 * i + 1_500));
            assert!(r.per_sec() <= 1.0 / 1.5 + 1e-9, "{}", r.per_sec());
        }
        assert!((r.per_sec() - 0.5).abs() < 0.05, "{}", r.per_sec());
    }

    #[test]
    fn a_deferred_key_does_not_block_a_cached_one_behind_it() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let mut keys = listing(vec![
            key("cold", 90, false, false),
            key("warm", 99, false, true),
        ]);
        observe(&mut q, &mut keys[..1], 100, t0);
        observe(&mut q, &mut keys, 100, t0 + Duration::from_secs(1));
        assert_eq!(
            q.pick(&keys, 100, policy(50), t0 + Duration::from_secs(2)),
            serve("warm", false)
        );
    }

    #[test]
    fn caught_up_keys_leave_the_queue() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let mut keys = listing(vec![key("a", 3, false, true)]);
        observe(&mut q, &mut keys, 10, t0);
        assert_eq!(keys[0].since, Some(t0));
        keys[0].cursor = 10;
        observe(&mut q, &mut keys, 10, t0);
        assert_eq!(keys[0].since, None);
        assert_eq!(q.pick(&keys, 10, policy(1), t0), Pick::Idle { until: None });
    }

    #[test]
    fn estimates_add_up_the_work_ahead_and_deferred_keys_wait_their_deadline() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let mut keys = listing(vec![
            key("first", 90, false, true),
            key("second", 95, false, false),
            key("deferred", 99, false, false),
        ]);
        observe(&mut q, &mut keys[..1], 100, t0);
        observe(&mut q, &mut keys[..2], 100, t0 + Duration::from_secs(1));
        observe(&mut q, &mut keys, 100, t0 + Duration::from_secs(2));
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
        let mut keys = listing(vec![
            key("lead", 9, false, true),
            key("online", 9, true, true),
            key("cold", 9, false, false),
            key("b", 8, false, true),
            key("c", 9, false, true),
            key("d", 9, false, true),
            key("done", 10, false, true),
        ]);
        observe(&mut q, &mut keys[..1], 10, t0);
        observe(&mut q, &mut keys, 10, t0 + Duration::from_secs(1));
        let fill = |threads| Fill::Messages { threads, limit: 64 };
        // One message for "lead", two for "b", one for "c": four threads are full.
        assert_eq!(q.companions(&keys, 10, "lead", fill(4)), ["b", "c"]);
        assert_eq!(
            q.companions(&keys, 10, "lead", fill(1)),
            Vec::<String>::new()
        );
        assert_eq!(q.companions(&keys, 10, "lead", fill(16)), ["b", "c", "d"]);
        // A key far behind fills the threads alone; an online or cold leader serves alone.
        let mut far = listing([vec![key("far", 0, false, true)], keys.clone()].concat());
        observe(&mut q, &mut far, 100, t0);
        assert!(q.companions(&far, 100, "far", fill(16)).is_empty());
        assert!(q.companions(&keys, 10, "online", fill(16)).is_empty());
        assert!(q.companions(&keys, 10, "cold", fill(16)).is_empty());
    }

    #[test]
    fn a_batch_scheme_groups_the_keys_at_the_leaders_batch() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        let at = |id: &str, cursor: u64| KeyView {
            group: cursor / 4096,
            head: 8192,
            ..key(id, cursor, false, true)
        };
        let mut keys = listing(vec![
            at("a", 0),
            at("b", 4096),
            at("c", 100),
            at("d", 0),
            at("e", 0),
        ]);
        observe(&mut q, &mut keys, 9000, t0);
        let fill = Fill::Batch { max_keys: 3 };
        assert_eq!(q.companions(&keys, 9000, "a", fill), ["c", "d"]);
        assert!(q.companions(&keys, 9000, "b", fill).is_empty());
        // Online keys refreshed to one mark (their reach) go together, never with offline ones
        // nor with one already there.
        let on = |id: &str, cursor: u64| KeyView {
            group: cursor / 4096,
            head: 8256,
            ..key(id, cursor, true, true)
        };
        let off = KeyView {
            head: 8256,
            ..at("z", 8192)
        };
        let mut mixed = listing(vec![on("x", 8192), off, on("y", 8200), on("w", 8256)]);
        observe(&mut q, &mut mixed, 8300, t0);
        assert_eq!(q.companions(&mixed, 8300, "x", fill), ["y"]);
        assert!(q.companions(&mixed, 8300, "z", fill).is_empty());
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
            let mut keys: Vec<KeyView> = (0..rng.gen_range(0..40usize))
                .map(|i| KeyView {
                    key_id: format!("k{:02}", rng.gen_range(0..60) * 100 + i),
                    cursor: rng.gen_range(990..=1_000),
                    online: rng.gen_bool(0.1),
                    cached: rng.gen_bool(0.3),
                    head: if rng.gen_bool(0.2) { 995 } else { u64::MAX },
                    group: rng.gen_range(0..3),
                    since: None,
                    place: i,
                })
                .collect();
            // Keys started waiting at different times, some at the same one.
            for k in keys.iter_mut() {
                let at = t0 + Duration::from_secs(rng.gen_range(0..4) * 30);
                observe(&mut q, std::slice::from_mut(k), head, at);
            }
            let now = t0 + Duration::from_secs(rng.gen_range(60..200));
            let p = Policy {
                min_batch: rng.gen_range(1..12),
                max_wait: Duration::from_secs(120),
                room: rng.gen_bool(0.2),
                board_rate: [0.0, 0.01, 0.05, 1e9][rng.gen_range(0..4)],
            };
            // The queue order, by a plain sort.
            let mut order: Vec<&KeyView> = keys.iter().filter(|k| k.behind(head) > 0).collect();
            order.sort_by_key(|k| (!k.online, k.group, k.since, k.place));
            let ids = |v: &[&KeyView]| v.iter().map(|k| k.key_id.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&q.order(&keys, head)), ids(&order), "round {round}");
            let mut until: Option<Instant> = None;
            let mut want = None;
            let mut fills = None;
            for k in &order {
                let waited = k.waited(now);
                if k.online || k.cached || p.room || k.behind(head) >= p.min_batch {
                    want = Some(serve(&k.key_id, k.online));
                } else if waited >= p.max_wait {
                    want = Some(serve(&k.key_id, false));
                } else {
                    let due = now + (p.max_wait - waited);
                    until = Some(until.map_or(due, |u| u.min(due)));
                    let growth = p.board_rate * (p.max_wait - waited).as_secs_f64();
                    if fills.is_none() && growth < FILL_GROWTH * k.behind(head) as f64 {
                        fills = Some(fill(&k.key_id));
                    }
                    continue;
                }
                break;
            }
            let want = want.or(fills).unwrap_or(Pick::Idle { until });
            assert_eq!(q.pick(&keys, head, p, now), want, "round {round}: {keys:?}");
            // A key out of memory that the pick serves is one worth loading, and a deferred
            // one that would not fill is not.
            for k in order.iter().filter(|k| !k.cached) {
                let deferred = !(k.online || p.room || k.behind(head) >= p.min_batch)
                    && k.waited(now) < p.max_wait;
                let fills = p.board_rate * p.max_wait.saturating_sub(k.waited(now)).as_secs_f64()
                    < FILL_GROWTH * k.behind(head) as f64;
                assert_eq!(
                    p.worth_loading(k, head, now),
                    !deferred || fills,
                    "round {round}"
                );
            }
            if let Pick::Serve { key_id, .. } = &want {
                let k = keys.iter().find(|k| &k.key_id == key_id).expect("picked");
                assert!(k.cached || p.worth_loading(k, head, now), "round {round}");
            }
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
