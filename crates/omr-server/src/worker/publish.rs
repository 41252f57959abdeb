//! Publishing what this worker does with its keys (the store's `key_schedule`), so that
//! GetKeyStatus, in whatever process answers it, can say whether a key is being detected now or
//! waiting, and roughly how long until it is caught up. Writes only what changed noticeably, and
//! everything again every third of a lease so that no published row looks stale.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::schedule::Costs;
use super::{Plan, Worker};

/// What was last published, and when everything was.
#[derive(Debug)]
pub(super) struct Published {
    rows: HashMap<String, (&'static str, Option<i64>)>,
    refreshed: Option<Instant>,
}

impl Published {
    pub(super) fn new() -> Self {
        Self {
            rows: HashMap::new(),
            refreshed: None,
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
    /// with the estimated time each will be caught up. Failures are logged, never fatal.
    pub(super) async fn publish(&mut self, plan: &Plan, serving: Option<&str>) {
        let now = Instant::now();
        let now_ms = chrono::Utc::now().timestamp_millis();
        let costs = Costs {
            per_message: Duration::from_secs_f64(self.per_message_secs.unwrap_or(0.1)),
            load: Duration::from_secs_f64(self.cache.load_secs().unwrap_or(2.0)),
        };
        let lease = Duration::from_secs(self.state.config.lease_secs.max(1));
        let refresh = self
            .published
            .refreshed
            .is_none_or(|t| t.elapsed() > lease / 3);
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
        if rows.is_empty() {
            return;
        }
        match self.state.store.publish_schedule(&rows).await {
            Ok(()) => {
                for (k, s, e) in rows {
                    self.published.rows.insert(k, (s, e));
                }
                if refresh {
                    self.published.refreshed = Some(now);
                }
            }
            Err(e) => tracing::warn!(error = %e, "publishing key schedules failed"),
        }
    }
}
