//! Prometheus metrics, served as text at `/metrics`.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

mod admission;
mod detection;
mod device;
mod pir;

pub use admission::AdmissionMetrics;
pub use detection::DetectionMetrics;
pub use device::{Device, DeviceMetrics};
pub use pir::PirMetrics;

/// Every metric omrd exports.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    /// Messages accepted, by route (`single`, `batch`).
    pub messages_accepted: IntCounterVec,
    /// Requests refused, by error code.
    pub messages_rejected: IntCounterVec,
    /// Clue + payload bytes accepted.
    pub message_bytes: IntCounter,
    /// Time from starting a group-commit transaction to its commit.
    pub commit_seconds: Histogram,
    /// Messages per group-commit transaction.
    pub commit_messages: Histogram,
    /// Board head after the last commit.
    pub board_head: IntGauge,
    /// Board reads (`GET /v1/messages`), by where they were answered from (`memory`: the tail
    /// this process keeps; `store`).
    pub board_reads: IntCounterVec,
    /// Key registrations, by outcome.
    pub registrations: IntCounterVec,
    /// HTTP request latency by route.
    pub http_seconds: HistogramVec,
    /// Messages detected and folded (summed over keys).
    pub detections: IntCounter,
    /// Wall time of one detection batch (detect + fold) for one key.
    pub detect_batch_seconds: Histogram,
    /// Largest lag (messages behind the board head) over every registered key (read from the
    /// store at scrape time).
    pub max_lag: IntGauge,
    /// Keys registered.
    pub active_keys: IntGauge,
    /// Digest requests by outcome, and bytes served.
    pub digest_requests: IntCounterVec,
    pub digest_bytes: IntCounter,
    /// Digest answers served from memory (the key's cursor had not moved since the last one).
    pub digest_answers_kept: IntCounter,
    /// Keys this worker took over or gave up.
    pub lease_changes: IntCounterVec,
    /// Keys this worker holds.
    pub leased_keys: IntGauge,
    /// Capacity, memory and lag of detection.
    pub detection: DetectionMetrics,
    /// Which device detects, and the GPU detector's keys, uploads and failures.
    pub device: DeviceMetrics,
    /// Rate limits, load shedding and connections.
    pub admission: AdmissionMetrics,
    /// Attachment epochs built and served by PIR.
    pub pir: PirMetrics,
    /// Calls waiting for a key's next detected message now (HTTP long-polls, gRPC watches).
    pub key_waiters: IntGauge,
    /// Time to load a detection key into memory, by source (`disk`: its expanded file;
    /// `store`: fetched and expanded).
    pub key_load_seconds: HistogramVec,
    /// Bytes read to load detection keys, by source (expanded files; compressed stored keys).
    pub key_load_bytes: IntCounterVec,
    /// Bytes of expanded-key files on local disk.
    pub key_file_bytes: IntGauge,
    /// Expanded-key file events: written, evicted, unregistered, discarded (unreadable),
    /// write_failed, write_skipped.
    pub key_file_events: IntCounterVec,
    /// Detection workers whose heartbeat is live (read from the store at each scrape).
    pub live_workers: IntGauge,
    /// Restarts of the detection worker loop, by reason (`panic`, `error`).
    pub worker_restarts: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new_custom(Some("omr".into()), None).expect("valid prefix");
        let messages_accepted = IntCounterVec::new(
            Opts::new("messages_accepted_total", "Messages appended to the board"),
            &["route"],
        )
        .expect("metric");
        let messages_rejected = IntCounterVec::new(
            Opts::new(
                "messages_rejected_total",
                "Message submissions refused, by error code",
            ),
            &["code"],
        )
        .expect("metric");
        let message_bytes =
            IntCounter::new("message_bytes_total", "Clue and payload bytes accepted")
                .expect("metric");
        let commit_seconds = Histogram::with_opts(
            HistogramOpts::new("commit_seconds", "Board group-commit transaction latency").buckets(
                vec![
                    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0,
                ],
            ),
        )
        .expect("metric");
        let commit_messages = Histogram::with_opts(
            HistogramOpts::new("commit_messages", "Messages per group-commit transaction")
                .buckets(prometheus::exponential_buckets(1.0, 2.0, 13).expect("buckets")),
        )
        .expect("metric");
        let board_head =
            IntGauge::new("board_head", "Next board index to be assigned").expect("metric");
        let board_reads = IntCounterVec::new(
            Opts::new(
                "board_reads_total",
                "Board reads, by where they were answered from (memory: this process's tail of the board; store)",
            ),
            &["source"],
        )
        .expect("metric");
        let registrations = IntCounterVec::new(
            Opts::new(
                "key_registrations_total",
                "Detection-key registrations, by outcome",
            ),
            &["outcome"],
        )
        .expect("metric");
        let http_seconds = HistogramVec::new(
            HistogramOpts::new("http_request_seconds", "HTTP request latency").buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
            ]),
            &["route", "status"],
        )
        .expect("metric");
        let detections = IntCounter::new(
            "detections_total",
            "Messages detected and folded, over all keys",
        )
        .expect("metric");
        let detect_batch_seconds = Histogram::with_opts(
            HistogramOpts::new("detect_batch_seconds", "Detection batch latency (one key)")
                .buckets(prometheus::exponential_buckets(0.005, 2.0, 14).expect("buckets")),
        )
        .expect("metric");
        let max_lag = IntGauge::new(
            "max_key_lag",
            "Largest number of board messages a key is behind",
        )
        .expect("metric");
        let active_keys = IntGauge::new("keys", "Registered detection keys").expect("metric");
        let digest_requests = IntCounterVec::new(
            Opts::new("digest_requests_total", "Digest requests, by outcome"),
            &["outcome"],
        )
        .expect("metric");
        let digest_bytes =
            IntCounter::new("digest_bytes_total", "Digest bytes served").expect("metric");
        let digest_answers_kept = IntCounter::new(
            "digest_answers_kept_total",
            "Digest answers served from memory, the key's cursor unmoved since the last (no store read)",
        )
        .expect("metric");
        let lease_changes = IntCounterVec::new(
            Opts::new(
                "lease_changes_total",
                "Keys this worker took (acquired), gave back to rebalance (rebalanced) or lost (released)",
            ),
            &["change"],
        )
        .expect("metric");
        let leased_keys = IntGauge::new("leased_keys", "Keys this worker holds").expect("metric");
        registry
            .register(Box::new(lease_changes.clone()))
            .expect("unique metric names");
        registry
            .register(Box::new(leased_keys.clone()))
            .expect("unique metric names");
        let key_waiters = IntGauge::new(
            "key_waiters",
            "Calls waiting for a key's next detected message (long-polls and watches)",
        )
        .expect("metric");
        registry
            .register(Box::new(key_waiters.clone()))
            .expect("unique metric names");
        let live_workers = IntGauge::new(
            "live_workers",
            "Detection workers with a live heartbeat, across every process on the store",
        )
        .expect("metric");
        let worker_restarts = IntCounterVec::new(
            Opts::new(
                "worker_restarts_total",
                "Restarts of this process's detection worker loop after a failure, by reason",
            ),
            &["reason"],
        )
        .expect("metric");
        for m in [
            Box::new(live_workers.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(worker_restarts.clone()),
        ] {
            registry.register(m).expect("unique metric names");
        }
        for m in [
            Box::new(detections.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(detect_batch_seconds.clone()),
            Box::new(max_lag.clone()),
            Box::new(active_keys.clone()),
            Box::new(digest_requests.clone()),
            Box::new(digest_bytes.clone()),
            Box::new(digest_answers_kept.clone()),
        ] {
            registry.register(m).expect("unique metric names");
        }
        for m in [
            Box::new(messages_accepted.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(messages_rejected.clone()),
            Box::new(message_bytes.clone()),
            Box::new(commit_seconds.clone()),
            Box::new(commit_messages.clone()),
            Box::new(board_head.clone()),
            Box::new(board_reads.clone()),
            Box::new(registrations.clone()),
            Box::new(http_seconds.clone()),
        ] {
            registry.register(m).expect("unique metric names");
        }
        let key_load_seconds = HistogramVec::new(
            HistogramOpts::new(
                "key_load_seconds",
                "Time to load a detection key into memory, by source (disk or store)",
            )
            .buckets(vec![
                0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
            ]),
            &["source"],
        )
        .expect("metric");
        let key_load_bytes = IntCounterVec::new(
            Opts::new(
                "key_load_bytes_total",
                "Bytes read to load detection keys, by source (disk or store)",
            ),
            &["source"],
        )
        .expect("metric");
        let key_file_bytes = IntGauge::new(
            "key_file_bytes",
            "Bytes of expanded detection-key files on local disk",
        )
        .expect("metric");
        let key_file_events = IntCounterVec::new(
            Opts::new(
                "key_file_events_total",
                "Expanded detection-key file events (written, evicted, unregistered, discarded, write_failed, write_skipped)",
            ),
            &["event"],
        )
        .expect("metric");
        for m in [
            Box::new(key_load_seconds.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(key_load_bytes.clone()),
            Box::new(key_file_bytes.clone()),
            Box::new(key_file_events.clone()),
        ] {
            registry.register(m).expect("unique metric names");
        }
        let detection = DetectionMetrics::new(&registry);
        let device = DeviceMetrics::new(&registry);
        let admission = AdmissionMetrics::new(&registry);
        let pir = PirMetrics::new(&registry);
        Metrics {
            registry,
            messages_accepted,
            messages_rejected,
            message_bytes,
            commit_seconds,
            commit_messages,
            board_head,
            board_reads,
            registrations,
            http_seconds,
            detections,
            detect_batch_seconds,
            max_lag,
            active_keys,
            digest_requests,
            digest_bytes,
            digest_answers_kept,
            lease_changes,
            leased_keys,
            detection,
            device,
            admission,
            pir,
            key_waiters,
            key_load_seconds,
            key_load_bytes,
            key_file_bytes,
            key_file_events,
            live_workers,
            worker_restarts,
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding");
        String::from_utf8(buf).expect("prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
