//! Online keys' batches beside bulk work. While a bulk job (an offline key's batch or load, or a
//! group's) runs as a task of its own, the loop keeps one online key's batch in flight on the
//! online pool whenever an online recipient has messages to detect. Each runs as a task of its
//! own, so neither waits for the other: the loop notices the bulk job's end at once and starts
//! the next bulk batch while the online one runs on, and the other way round.
//!
//! Why not serve the online keys inside the loop's wait for the bulk job, until they have
//! caught up: a bulk job that ends meanwhile would wait for that, its pool idle. With one message
//! a thread in each bulk batch (omrd's `detect_batch` of 16 on a 16-core node) and an online
//! recipient's message every 150 ms, the bulk pool's batches would end in step with the online
//! ones, the pool idle for much of its time (`omr bench-capacity` shows it).
//!
//! The keys looked at are those online when the board last moved, each until it has caught up,
//! in a queue ([`Online`]): so a board move costs each online key one look more than its
//! batches (a store read), not one per batch of every other key.
//!
//! An online batch in flight holds its key's state (taken from the cache by `step::prepare`);
//! the loop finishes it (`step::finish`) before it serves that key otherwise: before an online
//! turn, before it idles, and when it stops.

use std::collections::VecDeque;

use futures::FutureExt;
use tracing::Instrument;

use super::pool::Priority;
use super::step::{self, Done};
use super::turn::{joined, AbortOnDrop};
use super::{supervise, Plan, Worker};
use crate::scheme::DetectionScheme;

/// Online keys' work beside the bulk work.
pub(super) struct Online<S: DetectionScheme> {
    /// The batch in flight.
    flight: Option<InFlight<S>>,
    /// Online keys that may have messages to detect, first looked at first: every online key
    /// when the board moves; a key whose batch detected messages goes back to the front (it
    /// may have more), one found caught up leaves.
    pending: VecDeque<String>,
}

impl<S: DetectionScheme> Default for Online<S> {
    fn default() -> Self {
        Self {
            flight: None,
            pending: VecDeque::new(),
        }
    }
}

impl<S: DetectionScheme> Online<S> {
    /// Whether a batch is in flight.
    pub(super) fn in_flight(&self) -> bool {
        self.flight.is_some()
    }

    /// The batch in flight, if it ended (without waiting).
    fn ended_now(&mut self) -> Option<anyhow::Result<Done<S>>> {
        (self.flight.as_mut()).and_then(|f| f.ended().now_or_never())
    }

    /// Wait for the batch in flight to end (cancel-safe: the task runs on whatever happens to
    /// this future); pending forever when none is.
    pub(super) async fn ended(&mut self) -> anyhow::Result<Done<S>> {
        match self.flight.as_mut() {
            Some(f) => f.ended().await,
            None => std::future::pending().await,
        }
    }
}

/// An online key's batch in flight.
struct InFlight<S: DetectionScheme> {
    key_id: String,
    task: AbortOnDrop<anyhow::Result<Done<S>>>,
}

impl<S: DetectionScheme> InFlight<S> {
    async fn ended(&mut self) -> anyhow::Result<Done<S>> {
        joined((&mut self.task.0).await, "a detection task")
    }
}

impl<S: DetectionScheme> Worker<S> {
    /// The board moved: every online key of `plan` but those of `busy` is to be looked at.
    pub(super) fn board_moved_online(&mut self, plan: &Plan, busy: &[&str]) {
        let pending = &mut self.online.pending;
        pending.clear();
        let keys = plan.online.iter().filter(|id| !busy.contains(&id.as_str()));
        pending.extend(keys.cloned());
    }

    /// Finish the batch in flight if it ended, then start the next one if none is in flight:
    /// the first pending key (online in `plan`, not one of `busy`, leased) that has messages
    /// to detect, loaded first when it is not in memory (the loop waits for that load, as an
    /// online key's turn does). Pending keys found caught up leave the queue.
    pub(super) async fn next_online(&mut self, plan: &Plan, busy: &[&str]) {
        if let Some(out) = self.online.ended_now() {
            self.end_online(out);
        }
        if self.online.in_flight() {
            return;
        }
        while let Some(id) = self.online.pending.pop_front() {
            let Some(key) = plan.key(&id).filter(|_| plan.online.contains(&id)) else {
                continue;
            };
            if busy.contains(&id.as_str()) || !self.leases.holds(&id) {
                continue;
            }
            let span = tracing::info_span!("detect_batch", key_id = %id, online = true);
            let job = self.next_job(plan, key, Priority::Online, false);
            let job = match job.instrument(span.clone()).await {
                Ok(Some(job)) => job,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(key_id = %id, error = %e, "detection step failed");
                    continue;
                }
            };
            let pool = self.pools.of(Priority::Online).clone();
            let run = job.run(self.ctx.clone(), pool, Priority::Online);
            let task = tokio::spawn(supervise::in_incarnation(run.instrument(span)));
            self.online.flight = Some(InFlight {
                key_id: id,
                task: AbortOnDrop(task),
            });
            return;
        }
    }

    /// Finish the online batch that ended with `out`: the commit's aftermath in the cache, the
    /// counts; its key back to the front of the queue when it detected messages (after a
    /// failure it waits for the next board move).
    pub(super) fn end_online(&mut self, out: anyhow::Result<Done<S>>) {
        let Some(flight) = self.online.flight.take() else {
            return;
        };
        match out {
            Ok(done) => {
                let b = step::finish(&self.ctx, &mut self.cache, done);
                if b.count > 0 {
                    self.record(b.count, b.seconds);
                    self.online.pending.push_front(flight.key_id);
                }
            }
            Err(e) => {
                tracing::error!(key_id = %flight.key_id, error = %e, "detection step failed");
            }
        }
    }

    /// Finish the online batch in flight if it ended (without waiting).
    pub(super) fn keep_online_done(&mut self) {
        if let Some(out) = self.online.ended_now() {
            self.end_online(out);
        }
    }

    /// Before a turn of `ids` on `priority`: finish the online batch in flight first when the
    /// turn is an online one (it would run beside it on the online pool) or serves its key (a
    /// recipient gone offline since: two batches of one key would race to commit).
    pub(super) async fn settle_online_before(&mut self, ids: &[&str], priority: Priority) {
        let flight = self.online.flight.as_ref();
        let serves = flight.is_some_and(|f| ids.contains(&f.key_id.as_str()));
        if priority == Priority::Online || serves {
            self.settle_online().await;
        }
    }

    /// Wait for the online batch in flight, if any, and finish it.
    pub(super) async fn settle_online(&mut self) {
        if self.online.in_flight() {
            let out = self.online.ended().await;
            self.end_online(out);
        }
    }
}
