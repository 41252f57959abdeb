//! One key's turn: batch after batch until it caught up, or until it should yield (see
//! `schedule`): at an epoch boundary once it detected a load's worth of messages, or, for a key
//! of an offline recipient, as soon as new messages may have made an online key wait.

use std::time::Instant;

use tracing::Instrument;

use super::{step, Plan, Worker};

impl Worker {
    /// Serve `key_id` (a key of `plan`) until it caught up or yields; requeue it if it still
    /// has messages to detect. False when a batch failed (logged).
    pub(super) async fn serve_turn(
        &mut self,
        plan: &Plan,
        key_id: &str,
        online: bool,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> bool {
        let Some(key) = plan.keys.iter().find(|k| k.key_id == key_id).cloned() else {
            return true;
        };
        let epoch = self
            .state
            .config
            .epoch_len
            .clamp(1, self.state.params.max_range);
        // While an online recipient may be waiting, an offline key detects one message per
        // thread at a time, so a new message for the online key waits at most one detection.
        let limit = if online || plan.online.is_empty() {
            self.state.config.detect_batch.max(1)
        } else {
            self.pool.current_num_threads()
        };
        let min_batch = self.policy().min_batch;
        let mut served = 0u64;
        let mut ok = true;
        while !cancel.is_cancelled() {
            self.leases.renew_if_due(&self.state).await;
            if !self.leases.holds(key_id) {
                break;
            }
            let span = tracing::info_span!("detect_batch", key_id = %key_id, online);
            let batch = step::step(
                &self.state,
                &self.pool,
                &mut self.cache,
                &key,
                limit,
                &plan.online,
            );
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
            if cursor.is_multiple_of(epoch) && served >= min_batch {
                break;
            }
            if !online && !plan.online.is_empty() && self.board_moved(plan.head).await {
                break;
            }
        }
        self.queue.requeue(key_id, Instant::now());
        ok
    }

    /// Whether the board head moved past `head` (new messages an online key may wait for).
    async fn board_moved(&self, head: u64) -> bool {
        self.state
            .store
            .board_head()
            .await
            .map_or(true, |h| h > head)
    }

    /// Account one batch of `count` messages that took `seconds` on the pool: the detection
    /// time metric, and the per-message time and capacity from batches that used every thread.
    fn record(&mut self, count: usize, seconds: f64) {
        let m = &self.state.metrics.detection;
        m.detect_seconds.inc_by(seconds);
        if count >= self.pool.current_num_threads() {
            let per = seconds / count as f64;
            let mean = self.per_message_secs.map_or(per, |m| 0.8 * m + 0.2 * per);
            self.per_message_secs = Some(mean);
            m.capacity.set(1.0 / mean);
        }
    }
}
