//! Attachment PIR metrics: epoch databases built and how long that took, requests by route and
//! outcome, and the time each answer took; and omr-light-v1's fetch snapshot builds.

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// The PIR metrics.
#[derive(Debug, Clone)]
pub struct PirMetrics {
    /// Epoch databases built (hint computed), by result (`ok`, `error`).
    pub builds: IntCounterVec,
    /// Time to build one epoch's database: read its attachments, compute the hint.
    pub build_seconds: Histogram,
    /// Hint and query requests, by route (`hint`, `query`) and outcome (`ok` or the error
    /// code).
    pub requests: IntCounterVec,
    /// Time to answer one query (one fetch's queries together).
    pub answer_seconds: Histogram,
    /// omr-light-v1: time to build one payload fetch snapshot, by kind (`closed`: every closed,
    /// retained epoch; `open`: the open epoch so far); its count is the builds.
    pub fetch_snapshot_seconds: HistogramVec,
}

impl PirMetrics {
    /// The metrics, registered in `registry`.
    pub fn new(registry: &Registry) -> Self {
        let m = PirMetrics {
            builds: IntCounterVec::new(
                Opts::new(
                    "pir_builds_total",
                    "Attachment epoch PIR databases built, by result",
                ),
                &["result"],
            )
            .expect("metric"),
            build_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "pir_build_seconds",
                    "Time to build one attachment epoch's PIR database and hint",
                )
                .buckets(vec![0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0]),
            )
            .expect("metric"),
            requests: IntCounterVec::new(
                Opts::new(
                    "pir_requests_total",
                    "PIR hint and query requests, by route and outcome",
                ),
                &["route", "outcome"],
            )
            .expect("metric"),
            answer_seconds: Histogram::with_opts(
                HistogramOpts::new("pir_answer_seconds", "Time to answer one PIR fetch").buckets(
                    vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0],
                ),
            )
            .expect("metric"),
            fetch_snapshot_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "fetch_snapshot_build_seconds",
                    "omr-light-v1: time to build one payload fetch snapshot, by kind (closed, open)",
                )
                .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
                &["kind"],
            )
            .expect("metric"),
        };
        for c in [
            Box::new(m.builds.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.build_seconds.clone()),
            Box::new(m.requests.clone()),
            Box::new(m.answer_seconds.clone()),
            Box::new(m.fetch_snapshot_seconds.clone()),
        ] {
            registry.register(c).expect("unique metric names");
        }
        m
    }
}
