//! One key's turn: batch after batch until it caught up, or until it yields at an epoch boundary
//! once it detected a load's worth of messages (see `schedule`; or at every epoch boundary when
//! its scheme's walk says so: `Walk::yields_each_epoch`). An offline key's load and
//! batches run on the bulk pool while the loop serves online keys on the online pool as soon as
//! new messages arrive, so an online recipient never waits for an offline key's turn.

use std::future::Future;
use std::time::Instant;

use futures::FutureExt;
use tracing::Instrument;

use omr_store::ActiveKey;

use super::pool::Priority;
use super::{plan, step, supervise, Plan, Worker};
use crate::scheme::Walk;

impl<S: crate::scheme::DetectionScheme> Worker<S> {
    /// Serve `key_id` (a key of `plan`) until it caught up or yields; requeue it if it still
    /// has messages to detect. False when a batch failed (logged).
    pub(super) async fn serve_turn(
        &mut self,
        plan: &Plan,
        key_id: &str,
        priority: Priority,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> bool {
        let Some(key) = plan.key(key_id).cloned() else {
            return true;
        };
        let epochs = self.ctx.epochs;
        let min_batch = self.policy().min_batch;
        let each_epoch = S::Walk::yields_each_epoch();
        let mut served = 0u64;
        let mut ok = true;
        while !cancel.is_cancelled() {
            self.leases.renew_if_due(&self.ctx).await;
            if !self.leases.holds(key_id) {
                break;
            }
            let online = priority == Priority::Online;
            let span = tracing::info_span!("detect_batch", key_id = %key_id, online);
            let batch = self.one_batch(plan, &key, priority);
            let batch = match batch.instrument(span).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(key_id = %key_id, error = %e, "detection step failed");
                    ok = false;
                    break;
                }
            };
            if batch.count == 0 {
                break;
            }
            served += batch.count as u64;
            self.record(batch.count, batch.seconds);
            let cursor = self.cache.cursor(key_id).unwrap_or(key.cursor);
            if epochs.is_boundary(cursor) && (served >= min_batch || each_epoch) {
                break;
            }
        }
        self.queue.requeue(key_id, Instant::now());
        ok
    }

    /// Serve the keys `ids` of `plan`, all in memory, together: one batch each, run at once on
    /// `priority`'s pool (`step::run_group`), while the loop serves other online keys as messages
    /// arrive; then requeue them. False when a batch failed (logged).
    pub(super) async fn serve_group(
        &mut self,
        plan: &Plan,
        ids: &[String],
        priority: Priority,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> bool {
        self.leases.renew_if_due(&self.ctx).await;
        let keys: Vec<ActiveKey> = (ids.iter())
            .filter(|id| self.leases.holds(id))
            .filter_map(|id| plan.key(id).cloned())
            .collect();
        let mut ok = true;
        if !keys.is_empty() && !cancel.is_cancelled() {
            ok = self.group_batch(plan, &keys, priority).await;
        }
        let now = Instant::now();
        for id in ids {
            self.queue.requeue(id, now);
        }
        ok
    }

    /// One batch of each of `keys` (in memory, all offline or all online) side by side on
    /// `priority`'s pool: online keys' open batches up to their refresh mark.
    async fn group_batch(&mut self, plan: &Plan, keys: &[ActiveKey], priority: Priority) -> bool {
        let online = priority == Priority::Online;
        let reach = self.reach(plan.head, online);
        let limit = self.batch_limit();
        let span = tracing::info_span!("detect_group", keys = keys.len(), online);
        let mut prepared = step::prepare_group(&self.ctx, &mut self.cache, keys, limit, reach)
            .instrument(span.clone())
            .await;
        if let (true, Ok(jobs)) = (online, prepared.as_mut()) {
            for job in jobs.iter_mut() {
                let key = keys.iter().find(|k| k.key_id == job.key_id());
                if let Some(key) = key.filter(|k| plan::asks_open(&self.open_answered, k)) {
                    self.answer_open(key, job);
                }
            }
        }
        let jobs = match prepared {
            Ok(jobs) if jobs.is_empty() => return true,
            Ok(jobs) => jobs,
            Err(e) => {
                tracing::error!(keys = keys.len(), error = %e, "preparing a group of keys failed");
                return false;
            }
        };
        let m = &self.ctx.metrics.detection;
        m.group_turns.inc();
        m.group_keys.inc_by(jobs.len() as u64);
        let pool = self.pools.of(priority).clone();
        let run = step::run_group(jobs, self.ctx.clone(), pool, priority);
        let busy: Vec<&str> = keys.iter().map(|k| k.key_id.as_str()).collect();
        let dones = match self
            .alongside_online(plan, &busy, run.instrument(span))
            .await
        {
            Ok(d) => d,
            Err(e) => {
                tracing::error!(keys = keys.len(), error = %e, "a group of keys failed");
                return false;
            }
        };
        let (mut ok, mut count, mut seconds) = (true, 0, 0f64);
        for done in dones {
            match done {
                Ok(done) => {
                    let b = step::finish(&self.ctx, &mut self.cache, done);
                    count += b.count;
                    seconds = seconds.max(b.seconds);
                }
                Err(e) => {
                    tracing::error!(error = %e, "detection step failed in a group");
                    ok = false;
                }
            }
        }
        if count > 0 {
            self.record(count, seconds);
        }
        ok
    }

    /// One batch of `key` on `priority`'s pool: load the key if it is not in memory (and has
    /// anything to detect), then prepare, detect and commit, and finish. The load and the job
    /// run as tasks of their own while the loop keeps the other online keys of `plan` served
    /// as messages arrive.
    async fn one_batch(
        &mut self,
        plan: &Plan,
        key: &ActiveKey,
        priority: Priority,
    ) -> anyhow::Result<step::Outcome> {
        let Some(job) = self.next_job(plan, key, priority, true).await? else {
            return Ok(step::Outcome::NOTHING);
        };
        let pool = self.pools.of(priority).clone();
        let run = job.run(self.ctx.clone(), pool, priority);
        let done = self.alongside_online(plan, &[&key.key_id], run).await?;
        Ok(step::finish(&self.ctx, &mut self.cache, done))
    }

    /// The next batch of `key` for `priority`'s pool, the key loaded first if it is not in memory
    /// and has anything to detect (with `alongside`, as [`Self::load`] says); None when it has
    /// nothing to detect.
    pub(super) async fn next_job(
        &mut self,
        plan: &Plan,
        key: &ActiveKey,
        priority: Priority,
        alongside: bool,
    ) -> anyhow::Result<Option<step::Job<S>>> {
        let online = plan.online.contains(&key.key_id);
        let open = online && plan::asks_open(&self.open_answered, key);
        let reach = self.reach(plan.head, open);
        if !self.cache.contains(&key.key_id) {
            if !step::has_work(&self.ctx, &self.cache, key, reach).await? {
                return Ok(None);
            }
            // Boxed: a load waits alongside online keys, whose batches come through here.
            Box::pin(self.load(plan, key, priority, alongside)).await?;
        }
        let limit = self.batch_limit();
        let mut job = step::prepare(&self.ctx, &mut self.cache, key, limit, reach).await?;
        if let Some(job) = job.as_mut().filter(|_| open) {
            self.answer_open(key, job);
        }
        Ok(job)
    }

    /// `job`, of `key` whose online recipient asked for its open batch: when it detects the
    /// batch up to a refresh mark inside it, it answers the recipient's mark (remembered, so
    /// the next refresh waits for a newer ask), and it is counted as a refresh. (One that ends
    /// at a batch boundary answers nothing: the batch after it is still to come.)
    fn answer_open(&mut self, key: &ActiveKey, job: &mut step::Job<S>) {
        let epochs = self.ctx.epochs;
        let Some(end) = job.batch_end().filter(|&end| !epochs.is_boundary(end)) else {
            return;
        };
        let seen = key.last_seen_ms.unwrap_or(0);
        tracing::debug!(key_id = %key.key_id, end, seen, "open batch detected as asked");
        self.open_answered.insert(key.key_id.clone(), seen);
        let m = &self.ctx.metrics.detection;
        m.open_batches.inc();
        if self.refreshed_to.replace(end) != Some(end) {
            m.refreshes.inc();
        }
        job.mark_refresh();
    }

    /// Load `key` (not in memory) for its batch on `priority`: wait for its load ahead when one is
    /// under way, otherwise load it; on the bulk pool the next cold keys begin loading ahead
    /// beside it (a load reads the store or a file and then lays the key out: one key alone
    /// leaves cores idle), and the turn starts once its own key is in. With `alongside`, the
    /// load runs as a task of its own while the loop serves the other online keys of `plan` as
    /// messages arrive.
    async fn load(
        &mut self,
        plan: &Plan,
        key: &ActiveKey,
        priority: Priority,
        alongside: bool,
    ) -> anyhow::Result<()> {
        let pool = self.pools.of(priority).clone();
        // The key's own load: the one under way ahead of its turn, or a new one.
        let own = match self.take_ahead(&key.key_id) {
            Some(ahead) => ahead.boxed(),
            None => (self.cache)
                .begin_load(&self.ctx, &pool, key, &plan.online)
                .boxed(),
        };
        // The next cold keys begin loading ahead, in the room left or in place of keys with
        // nothing to detect (keys time-shared, each a batch behind: every turn is a load).
        let busy = [key.key_id.as_str()];
        if alongside && priority == Priority::Bulk {
            self.load_ahead(plan, &busy);
        }
        let loaded = if alongside {
            let own = async move { Ok::<_, anyhow::Error>(own.await) };
            self.alongside_online(plan, &busy, own).await
        } else {
            Ok(own.await)
        };
        match loaded {
            Ok(own) => self.cache.end_load(key, own),
            Err(e) => {
                // Release the reservation: the load's task failed as a whole.
                let _ = self.cache.end_load(key, Err(anyhow::anyhow!("{e}")));
                Err(e)
            }
        }
    }

    /// Run `work` as a task of its own (so that it progresses, and releases the connections,
    /// transactions and permits it holds, whatever the loop does meanwhile) and wait for it,
    /// keeping a batch of an online key of `plan` other than `busy` in flight beside it
    /// whenever one has messages to detect (`online`): each online batch is a task of its own
    /// too, so the end of either is seen at once. An online batch still running when `work`
    /// ends runs on; the next wait (or the loop) finishes it.
    async fn alongside_online<T: Send + 'static>(
        &mut self,
        plan: &Plan,
        busy: &[&str],
        work: impl Future<Output = anyhow::Result<T>> + Send + 'static,
    ) -> anyhow::Result<T> {
        let work = supervise::in_incarnation(work.in_current_span());
        let mut task = AbortOnDrop(tokio::spawn(work));
        let out = if plan.online.iter().all(|k| busy.contains(&k.as_str())) {
            (&mut task.0).await
        } else {
            let notify = self.ctx.board_notify.clone();
            loop {
                // Go on with the online keys pending (first: an online batch may have ended,
                // or left its key with more, while the loop was between two waits).
                self.next_online(plan, busy).await;
                tokio::select! {
                    biased;
                    out = &mut task.0 => break out,
                    out = self.online.ended(), if self.online.in_flight() => self.end_online(out),
                    () = notify.notified() => self.board_moved_online(plan, busy),
                }
            }
        };
        joined(out, "a detection task")
    }

    /// Messages one job detects at most ([`Walk::job_limit`]).
    pub(super) fn batch_limit(&self) -> usize {
        S::Walk::job_limit(&self.scheme, self.ctx.config.detect_batch)
    }

    /// The board index a key's detection may reach with the board at `head`, `open` when its
    /// online recipient asked for its open batch since the last time (`plan::asks_open`):
    /// [`Walk::reach`].
    pub(super) fn reach(&self, head: u64, open: bool) -> u64 {
        let every = self.ctx.config.light_refresh_messages;
        S::Walk::reach(&self.scheme, self.ctx.epochs, head, open, every)
    }

    /// Account one batch of `count` messages that took `seconds` on a pool: the detection time
    /// metric, and the per-message time and capacity from batches that used every thread.
    pub(super) fn record(&mut self, count: usize, seconds: f64) {
        let m = &self.ctx.metrics.detection;
        m.detect_seconds.inc_by(seconds);
        if count >= self.pools.threads() {
            let per = seconds / count as f64;
            let mean = self.per_message_secs.map_or(per, |m| 0.8 * m + 0.2 * per);
            self.per_message_secs = Some(mean);
            m.capacity.set(1.0 / mean);
        }
    }
}

/// A task's answer, its panic or cancellation as an error naming `what` it was.
pub(super) fn joined<T>(
    out: Result<anyhow::Result<T>, tokio::task::JoinError>,
    what: &str,
) -> anyhow::Result<T> {
    out.map_err(|e| anyhow::anyhow!("{what} failed: {e}"))?
}

/// A task aborted when its handle is dropped (the loop was cancelled or restarted while it ran).
/// A job already on the pool finishes there; a commit that did not happen leaves the cursor
/// where it was, and the next batch redoes the work.
pub(super) struct AbortOnDrop<T>(pub(super) tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
