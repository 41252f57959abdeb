//! Detection capacity and lag metrics: what the node sustains, what it holds, and how far every
//! registered key is behind, leased or not. The worker sets the first group as it goes; the
//! deployment-wide group is read from the store when `/metrics` is scraped, so it tells the truth
//! in every process (API-only ones too) and covers keys no worker holds.

use prometheus::{
    Counter, Gauge, Histogram, HistogramOpts, IntCounter, IntGauge, IntGaugeVec, Opts, Registry,
};

/// The detection metrics.
#[derive(Debug, Clone)]
pub struct DetectionMetrics {
    /// Key·messages per second this worker's pool sustains while busy (mean of recent batches).
    pub capacity: Gauge,
    /// Expanded keys in this worker's memory, their bytes, and the budget.
    pub keys_loaded: IntGauge,
    pub key_memory_bytes: IntGauge,
    pub key_memory_budget_bytes: IntGauge,
    /// Keys this worker leases that have messages to detect and are not being served.
    pub keys_waiting: IntGauge,
    /// Keys this worker leases whose recipient is online.
    pub keys_online: IntGauge,
    /// Seconds the detection pool spent detecting (against `omr_key_load_seconds`: the share of
    /// time loads take).
    pub detect_seconds: Counter,
    /// Smallest backlog worth loading a key for (see worker/schedule.rs).
    pub min_load_batch: IntGauge,
    /// Turns that served several keys at once (keys whose work alone could not fill the
    /// pool), and the keys they served.
    pub group_turns: IntCounter,
    pub group_keys: IntCounter,
    /// Key loads begun beside a turn that detects keys in memory, ahead of the loaded key's own
    /// turn.
    pub loads_ahead: IntCounter,
    /// Turns that served a key deferred to collect a batch worth its load, because no other key
    /// was worth serving and waiting would have grown its backlog little (an idle fill).
    pub idle_fills: IntCounter,
    /// Open batches (omr-light-v1) detected again because an online recipient asked for theirs
    /// (a digest or status call that found its key behind, or a wait): each a pass over the key.
    pub open_batches: IntCounter,
    /// omr-light-v1 refreshes: the refresh marks online keys' open batches were detected up
    /// to (each key's pass to one counts in `open_batches`: keys per refresh is their ratio),
    /// the pool seconds those passes took, and the policy (`light_refresh_messages`).
    pub refreshes: IntCounter,
    pub refresh_seconds: Counter,
    pub refresh_messages: IntGauge,
    /// Time the worker loop spends planning each turn (its leases, its keys and the board head
    /// from the store, the queue, these metrics): what every turn pays whatever it detects.
    pub plan_seconds: Histogram,
    /// Deployment-wide, read from the store at scrape time: keys behind the board head, keys
    /// that no live worker leases, and the age of the oldest message some key has not detected.
    pub keys_behind: IntGauge,
    pub keys_unassigned: IntGauge,
    pub oldest_undetected_seconds: Gauge,
    /// Per key this worker leases: messages behind the board head.
    pub key_lag: IntGaugeVec,
}

impl DetectionMetrics {
    /// The metrics, registered in `registry`.
    pub fn new(registry: &Registry) -> Self {
        let g = |name: &str, help: &str| IntGauge::new(name, help).expect("metric");
        let m = DetectionMetrics {
            capacity: Gauge::new(
                "detect_capacity_key_messages_per_second",
                "Key·messages per second this worker detects while busy (recent batches)",
            )
            .expect("metric"),
            keys_loaded: g(
                "keys_loaded",
                "Expanded detection keys in this worker's memory",
            ),
            key_memory_bytes: g("key_memory_bytes", "Bytes of expanded keys in memory"),
            key_memory_budget_bytes: g(
                "key_memory_budget_bytes",
                "This worker's memory budget for expanded keys (key_memory_bytes)",
            ),
            keys_waiting: g(
                "keys_waiting",
                "Keys this worker leases with messages to detect, not being served right now",
            ),
            keys_online: g(
                "keys_online",
                "Keys this worker leases whose recipient is online",
            ),
            detect_seconds: Counter::new(
                "detect_seconds_total",
                "Seconds the detection pool spent detecting and folding",
            )
            .expect("metric"),
            min_load_batch: g(
                "min_load_batch",
                "Smallest backlog worth loading a key that is not in memory",
            ),
            group_turns: IntCounter::new(
                "detect_group_turns_total",
                "Detection turns that served several keys at once on the pool",
            )
            .expect("metric"),
            group_keys: IntCounter::new(
                "detect_group_keys_total",
                "Keys served by detection turns that served several at once",
            )
            .expect("metric"),
            loads_ahead: IntCounter::new(
                "key_loads_ahead_total",
                "Key loads begun beside a turn detecting keys in memory, ahead of their own turn",
            )
            .expect("metric"),
            idle_fills: IntCounter::new(
                "detect_idle_fills_total",
                "Turns serving a key deferred for a batch worth its load, because nothing else was worth serving and the board would grow its backlog little before its wait ran out",
            )
            .expect("metric"),
            open_batches: IntCounter::new(
                "detect_open_batches_total",
                "Open batches (omr-light-v1) detected again because an online recipient asked for its key's: each a pass over the key",
            )
            .expect("metric"),
            refreshes: IntCounter::new(
                "light_refreshes_total",
                "Refresh marks (omr-light-v1) that online keys' open batches were detected up to; keys per refresh = detect_open_batches_total / this",
            )
            .expect("metric"),
            refresh_seconds: Counter::new(
                "light_refresh_seconds_total",
                "Seconds the detection pool spent on refreshes of online keys' open batches (omr-light-v1)",
            )
            .expect("metric"),
            refresh_messages: g(
                "light_refresh_messages",
                "New messages between two refreshes of an online key's open batch (light_refresh_messages)",
            ),
            plan_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "detect_plan_seconds",
                    "Time the detection worker spends planning one turn (leases, key list, board head, queue, pick, published schedule)",
                )
                .buckets(prometheus::exponential_buckets(0.000_25, 2.0, 14).expect("buckets")),
            )
            .expect("metric"),
            keys_behind: g(
                "keys_behind",
                "Registered keys with board messages not yet detected (all keys)",
            ),
            keys_unassigned: g(
                "keys_unassigned",
                "Registered keys no live worker leases (they are not being detected)",
            ),
            oldest_undetected_seconds: Gauge::new(
                "oldest_undetected_seconds",
                "Age of the oldest board message some key has not detected yet (all keys)",
            )
            .expect("metric"),
            key_lag: IntGaugeVec::new(
                Opts::new(
                    "key_lag",
                    "Board messages not yet detected, per key this worker holds",
                ),
                &["key_id"],
            )
            .expect("metric"),
        };
        for c in [
            Box::new(m.capacity.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.keys_loaded.clone()),
            Box::new(m.key_memory_bytes.clone()),
            Box::new(m.key_memory_budget_bytes.clone()),
            Box::new(m.keys_waiting.clone()),
            Box::new(m.keys_online.clone()),
            Box::new(m.detect_seconds.clone()),
            Box::new(m.min_load_batch.clone()),
            Box::new(m.group_turns.clone()),
            Box::new(m.group_keys.clone()),
            Box::new(m.loads_ahead.clone()),
            Box::new(m.idle_fills.clone()),
            Box::new(m.open_batches.clone()),
            Box::new(m.refreshes.clone()),
            Box::new(m.refresh_seconds.clone()),
            Box::new(m.refresh_messages.clone()),
            Box::new(m.plan_seconds.clone()),
            Box::new(m.keys_behind.clone()),
            Box::new(m.keys_unassigned.clone()),
            Box::new(m.oldest_undetected_seconds.clone()),
            Box::new(m.key_lag.clone()),
        ] {
            registry.register(c).expect("unique metric names");
        }
        m
    }
}
