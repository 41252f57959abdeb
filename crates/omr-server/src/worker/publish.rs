//! Publishing what this worker does with its keys (the store's `key_schedule`), so that
//! GetKeyStatus, in whatever process answers it, can say whether a key is being detected now or
//! waiting, and roughly how long until it is caught up. The estimates of all keys (a sort of the
//! waiting keys) are made again every [`ESTIMATE_EVERY`], or as soon as a key starts or stops
//! waiting; between them a turn writes only the key it starts serving and the one it stopped
//! serving. Writes only what changed noticeably, and everything again every third of a lease so
//! that no published row looks stale. The rows are written by a task of their own, in order, so
//! that a turn does not wait for the store to start detecting; a write that fails (logged) makes
//! the next publication write everything again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omr_store::Store;
use tokio::sync::mpsc;

use super::schedule::Costs;
use super::{Plan, Worker};

/// How often the estimates of all keys are made again.
const ESTIMATE_EVERY: Duration = Duration::from_secs(1);

/// Publications waiting for the writer before the next one is dropped (and everything is
/// written again afterwards).
const PENDING: usize = 64;

/// What was last published, and when everything was.
#[derive(Debug)]
pub(super) struct Published {
    rows: HashMap<String, (&'static str, Option<i64>)>,
    refreshed: Option<Instant>,
    /// When the estimates were last made, and the queue's changes then.
    estimated: Option<(Instant, u64)>,
    /// The key published as being detected.
    serving: Option<String>,
    /// To the writer task (which ends when this is dropped).
    writer: mpsc::Sender<Vec<Row>>,
    /// Set by the writer when a write failed.
    failed: Arc<AtomicBool>,
}

impl Published {
    /// Nothing published yet; starts the writer on `store` (call within the runtime).
    pub(super) fn new(store: Store) -> Self {
        let (writer, mut rows) = mpsc::channel::<Vec<Row>>(PENDING);
        let failed = Arc::new(AtomicBool::new(false));
        let flag = failed.clone();
        tokio::spawn(async move {
            while let Some(batch) = rows.recv().await {
                if let Err(e) = store.publish_schedule(&batch).await {
                    tracing::warn!(error = %e, "publishing key schedules failed");
                    flag.store(true, Ordering::Relaxed);
                }
            }
        });
        Self {
            rows: HashMap::new(),
            refreshed: None,
            estimated: None,
            serving: None,
            writer,
            failed,
        }
    }
}

/// Whether `new` differs enough from `old` to be written: another state, or an estimate that
/// moved by more than 5 s and a fifth.
fn changed(old: Option<&(&'static str, Option<i64>)>, new: &(&'static str, Option<i64>)) -> bool {
    let Some(old) = old else { return true };
    if old.0 != new.0 {
        return true;
    }
    match (old.1, new.1) {
        (Some(a), Some(b)) => {
            let now = chrono::Utc::now().timestamp_millis();
            let (a, b) = ((a - now).max(0), (b - now).max(0));
            (a - b).abs() > 5_000 && (a - b).abs() * 5 > a.max(b)
        }
        (a, b) => a.is_some() != b.is_some(),
    }
}

impl<S: crate::scheme::DetectionScheme> Worker<S> {
    /// Publish `serving` as detecting and every other key of `plan` with a backlog as waiting,
    /// with the estimated time each will be caught up, by the writer task. Failures are logged,
    /// never fatal.
    pub(super) fn publish(&mut self, plan: &Plan, serving: Option<&str>) {
        let now = Instant::now();
        let lease = Duration::from_secs(self.ctx.config.lease_secs.max(1));
        let failed = self.published.failed.swap(false, Ordering::Relaxed);
        let refresh = failed || (self.published.refreshed).is_none_or(|t| t.elapsed() > lease / 3);
        // Also at once when a key started or stopped waiting, so that its row is there as soon
        // as the lag says it waits.
        let changes = self.queue.changes();
        let estimate = refresh
            || (self.published.estimated)
                .is_none_or(|(t, c)| t.elapsed() >= ESTIMATE_EVERY || c != changes);
        let rows = if estimate {
            self.estimated_rows(plan, serving, refresh, now)
        } else {
            self.serving_rows(serving)
        };
        for (k, s, e) in &rows {
            self.published.rows.insert(k.clone(), (s, *e));
        }
        if !rows.is_empty() && self.published.writer.try_send(rows).is_err() {
            // The store is behind by PENDING publications: write everything once it catches up.
            self.published.failed.store(true, Ordering::Relaxed);
            return;
        }
        self.published.serving = serving.map(str::to_string);
        if estimate {
            self.published.estimated = Some((now, changes));
        }
        if refresh {
            self.published.refreshed = Some(now);
        }
    }

    /// Every key of `plan` with a backlog, `serving` as detecting and the others as waiting,
    /// with the time each is estimated to be caught up: the rows that changed noticeably, or all
    /// of them when `refresh`.
    fn estimated_rows(
        &self,
        plan: &Plan,
        serving: Option<&str>,
        refresh: bool,
        now: Instant,
    ) -> Vec<Row> {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let costs = Costs {
            per_message: Duration::from_secs_f64(self.per_message_secs.unwrap_or(0.1)),
            load: Duration::from_secs_f64(self.cache.load_secs().unwrap_or(2.0)),
        };
        let estimates = self
            .queue
            .estimates(&plan.views, plan.head, self.policy(), costs, now);
        let mut rows = Vec::new();
        for (key_id, eta) in estimates {
            let state = if serving == Some(key_id.as_str()) {
                "detecting"
            } else {
                "waiting"
            };
            let row = (state, Some(now_ms + eta.as_millis() as i64));
            if refresh || changed(self.published.rows.get(&key_id), &row) {
                rows.push((key_id, row.0, row.1));
            }
        }
        rows
    }

    /// Between estimates: only the key no longer served (waiting again) and the key now served
    /// (detecting), each keeping the estimate last published for it.
    fn serving_rows(&self, serving: Option<&str>) -> Vec<Row> {
        let before = self.published.serving.as_deref();
        if before == serving {
            return Vec::new();
        }
        let eta = |id: &str| self.published.rows.get(id).and_then(|r| r.1);
        let stopped = before.map(|id| (id.to_string(), "waiting", eta(id)));
        let started = serving.map(|id| (id.to_string(), "detecting", eta(id)));
        stopped.into_iter().chain(started).collect()
    }
}

/// A row to publish: key, state, estimated time caught up (ms since the epoch).
type Row = (String, &'static str, Option<i64>);
