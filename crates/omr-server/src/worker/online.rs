//! Online keys' batches beside bulk work. While a bulk job (an offline key's batch or load, or a
//! group's) runs as a task of its own, the loop keeps one online key's batch in flight on the
//! online pool whenever an online recipient has messages to detect. Each runs as a task of its
//! own, so neither waits for the other: the loop notices the bulk job's end at once and starts
//! the next bulk batch while the online one runs on, and the other way round.
//!
//! Before, the loop served the online keys inside its wait for the bulk job, until they had
//! caught up: a bulk job that ended meanwhile waited for that, its pool idle. With one message a
//! thread in each bulk batch (omrd's `detect_batch` of 16 on a 16-core node) and an online
//! recipient's message every 150 ms, the bulk pool's batches ended in step with the online
//! ones, a third of its time idle (`omr bench-capacity`, one thread a pool, on 2 vCPUs).
//!
//! An online batch in flight holds its key's state (taken from the cache by `step::prepare`);
//! the loop finishes it (`step::finish`) before it serves that key otherwise: before an online
//! turn, before it idles, and when it stops.

use futures::FutureExt;
use tracing::Instrument;

use super::pool::Lane;
use super::step::{self, Done};
use super::turn::{joined, AbortOnDrop};
use super::{supervise, Plan, Worker};
use crate::scheme::DetectionScheme;

/// An online key's batch in flight.
pub(super) struct InFlight<S: DetectionScheme> {
    key_id: String,
    task: AbortOnDrop<anyhow::Result<Done<S>>>,
}

impl<S: DetectionScheme> InFlight<S> {
    /// Wait for it to end (cancel-safe: the task runs on whatever happens to this future).
    pub(super) async fn ended(&mut self) -> anyhow::Result<Done<S>> {
        joined((&mut self.task.0).await, "a detection task")
    }
}

impl<S: DetectionScheme> Worker<S> {
    /// Start a batch for the first online key of `plan` (not one of `busy`, leased) that has
    /// messages to detect, loading it first when it is not in memory (the loop waits for that
    /// load, as an online key's turn does). False when none has any, or one is in flight.
    pub(super) async fn start_online(&mut self, plan: &Plan, busy: &[&str]) -> bool {
        if self.online.is_some() {
            return false;
        }
        for key in plan.online.iter().filter_map(|id| plan.key(id)) {
            if busy.contains(&key.key_id.as_str()) || !self.leases.holds(&key.key_id) {
                continue;
            }
            let span = tracing::info_span!("detect_batch", key_id = %key.key_id, online = true);
            let job = self.online_job(plan, key).instrument(span.clone()).await;
            let job = match job {
                Ok(Some(job)) => job,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(key_id = %key.key_id, error = %e, "detection step failed");
                    continue;
                }
            };
            let pool = self.pools.of(Lane::Online).clone();
            let run = job.run(self.state.clone(), pool, Lane::Online);
            let task = tokio::spawn(supervise::in_incarnation(run.instrument(span)));
            self.online = Some(InFlight {
                key_id: key.key_id.clone(),
                task: AbortOnDrop(task),
            });
            return true;
        }
        false
    }

    /// The next batch of online `key`, loaded first if need be; None when it has nothing to
    /// detect.
    async fn online_job(
        &mut self,
        plan: &Plan,
        key: &omr_store::ActiveKey,
    ) -> anyhow::Result<Option<step::Job<S>>> {
        let reach = self.reach(plan.head, true);
        if !self.cache.contains(&key.key_id) {
            if !step::has_work(&self.state, &self.cache, key, reach).await? {
                return Ok(None);
            }
            // Boxed: a load waits alongside online keys, which may start this.
            Box::pin(self.load(plan, key, Lane::Online, false)).await?;
        }
        let limit = self.batch_limit();
        step::prepare(&self.state, &mut self.cache, key, limit, reach).await
    }

    /// Finish the online batch that ended with `out`: commit's aftermath in the cache, the
    /// counts. True when it detected messages (its key may have more).
    pub(super) fn end_online(&mut self, out: anyhow::Result<Done<S>>) -> bool {
        let Some(flight) = self.online.take() else {
            return false;
        };
        match out {
            Ok(done) => {
                let b = step::finish(&self.state, &mut self.cache, done);
                if b.count > 0 {
                    self.record(b.count, b.seconds);
                }
                b.count > 0
            }
            Err(e) => {
                tracing::error!(key_id = %flight.key_id, error = %e, "detection step failed");
                false
            }
        }
    }

    /// Finish the online batch in flight if it ended (without waiting).
    pub(super) fn keep_online_done(&mut self) {
        let ended = (self.online.as_mut()).and_then(|f| f.ended().now_or_never());
        if let Some(out) = ended {
            self.end_online(out);
        }
    }

    /// Before a turn of `ids` on `lane`: finish the online batch in flight first when the
    /// turn is an online one (it would run beside it on the online pool) or serves its key (a
    /// recipient gone offline since: two batches of one key would race to commit).
    pub(super) async fn settle_online_before(&mut self, ids: &[&str], lane: Lane) {
        let serves = (self.online.as_ref()).is_some_and(|f| ids.contains(&f.key_id.as_str()));
        if lane == Lane::Online || serves {
            self.settle_online().await;
        }
    }

    /// Wait for the online batch in flight, if any, and finish it.
    pub(super) async fn settle_online(&mut self) {
        if let Some(flight) = self.online.as_mut() {
            let out = flight.ended().await;
            self.end_online(out);
        }
    }
}
