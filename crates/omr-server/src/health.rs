//! The detection worker's health as readiness sees it: restarts recorded by the supervisor and
//! rounds (or failures to start one) reported by the worker loop. `/readyz` answers 503 with
//! the reason while the worker keeps failing, and 200 again once it works.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Restarts within this window count towards "keeps failing".
pub const RESTART_WINDOW: Duration = Duration::from_secs(300);
/// This many restarts within [`RESTART_WINDOW`] make the worker unready until it completes a
/// round again.
pub const RESTARTS_UNREADY: usize = 3;

/// What the supervisor and the worker loop report; one per process.
#[derive(Debug)]
pub struct WorkerHealth {
    /// How long the worker's store calls may fail round after round before it is unready.
    store_bound: Duration,
    inner: Mutex<Record>,
}

#[derive(Debug, Default)]
struct Record {
    /// When the loop was restarted, within the window.
    restarts: VecDeque<Instant>,
    /// The last restart's reason and cause.
    last_failure: Option<String>,
    /// Rounds planned since the last restart (two: one round went through in between).
    rounds_since_restart: u32,
    /// When the store calls that start a round began failing, if they are failing.
    store_failing_since: Option<Instant>,
}

impl WorkerHealth {
    /// A healthy record; the worker is unready once its store calls have failed for longer
    /// than `store_bound` (omrd uses `lease_secs`: by then its leases have lapsed too).
    pub fn new(store_bound: Duration) -> Self {
        Self {
            store_bound,
            inner: Mutex::default(),
        }
    }

    /// The worker loop tried to start a round: `ok` when its store calls (lease renewal,
    /// listing the keys) succeeded.
    pub fn round_planned(&self, ok: bool) {
        let mut r = self.lock();
        if ok {
            r.store_failing_since = None;
            r.rounds_since_restart = r.rounds_since_restart.saturating_add(1);
        } else if r.store_failing_since.is_none() {
            r.store_failing_since = Some(Instant::now());
        }
    }

    /// The supervisor restarts the loop after a failure (`reason: cause`); returns the
    /// restarts within [`RESTART_WINDOW`], this one included.
    pub fn restarted(&self, failure: String) -> usize {
        let mut r = self.lock();
        let now = Instant::now();
        r.restarts.push_back(now);
        while r
            .restarts
            .front()
            .is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW)
        {
            r.restarts.pop_front();
        }
        r.last_failure = Some(failure);
        r.rounds_since_restart = 0;
        r.restarts.len()
    }

    /// Why the worker is not ready, if it is not: it restarted [`RESTARTS_UNREADY`] times within
    /// [`RESTART_WINDOW`] and has not completed a round since, or its store calls have failed
    /// for longer than the bound.
    pub fn unready_reason(&self) -> Option<String> {
        let r = self.lock();
        let now = Instant::now();
        let recent = r
            .restarts
            .iter()
            .filter(|t| now.duration_since(**t) <= RESTART_WINDOW)
            .count();
        if recent >= RESTARTS_UNREADY && r.rounds_since_restart < 2 {
            return Some(format!(
                "the detection worker restarted {recent} times in the last {} minutes and has \
                 not completed a round since (last failure: {})",
                RESTART_WINDOW.as_secs() / 60,
                r.last_failure.as_deref().unwrap_or("unknown"),
            ));
        }
        match r.store_failing_since {
            Some(since) if since.elapsed() > self.store_bound => Some(format!(
                "the detection worker's store calls have failed for {} s (see the log)",
                since.elapsed().as_secs()
            )),
            _ => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Record> {
        // The record stays consistent under a panic (each update is one small step).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_restarts_without_a_round_make_the_worker_unready_until_it_works() {
        let h = WorkerHealth::new(Duration::from_secs(30));
        assert_eq!(h.unready_reason(), None);
        for n in 1..=2 {
            assert_eq!(h.restarted(format!("panic: boom {n}")), n);
            assert_eq!(h.unready_reason(), None, "after {n} restarts");
        }
        assert_eq!(h.restarted("panic: boom 3".into()), 3);
        let reason = h.unready_reason().expect("unready");
        assert!(reason.contains("restarted 3 times"), "{reason}");
        assert!(reason.contains("panic: boom 3"), "{reason}");
        // One round planned is not enough (it may fail at once); the second means the first
        // went through.
        h.round_planned(true);
        assert!(h.unready_reason().is_some());
        h.round_planned(true);
        assert_eq!(h.unready_reason(), None);
        // Another failure makes it unready again: the restarts are still recent.
        h.restarted("error: gave up".into());
        assert!(h.unready_reason().is_some());
    }

    #[test]
    fn store_failures_make_the_worker_unready_past_the_bound_and_a_round_clears_them() {
        let patient = WorkerHealth::new(Duration::from_secs(3600));
        patient.round_planned(false);
        assert_eq!(patient.unready_reason(), None, "within the bound");

        let h = WorkerHealth::new(Duration::ZERO);
        h.round_planned(false);
        std::thread::sleep(Duration::from_millis(2));
        h.round_planned(false);
        let reason = h.unready_reason().expect("unready");
        assert!(reason.contains("store calls have failed"), "{reason}");
        h.round_planned(true);
        assert_eq!(h.unready_reason(), None);
    }
}
