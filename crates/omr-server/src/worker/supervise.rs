//! The supervisor: runs the worker loop as a task and starts it again when it fails — the task
//! panicked, a job it ran on the detection pool panicked, or the loop gave up (returned an
//! error, or returned without being asked to stop) — after an exponential backoff (1 s doubling
//! to 60 s, back to 1 s after an incarnation that ran five minutes). Each failure is logged at
//! error with its cause, counted in `omr_worker_restarts_total{reason}` and recorded in
//! the process's `WorkerHealth`, which `/readyz` reads.
//!
//! A restarted loop keeps the worker id, so it renews the leases it held instead of waiting for
//! them to expire; a worker that keeps failing waits longer than a lease between attempts, so
//! its keys go to healthy workers meanwhile.
//!
//! A panic in a pool job is caught where it happens (`pool::on_pool`) and returned to the loop
//! as an error; the job also reports it here, through the incarnation this task-local names,
//! which stops the incarnation after the step in progress.

use std::any::Any;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::WorkerContext;
use crate::health::RESTART_WINDOW;

/// The first delay before a restart, and the longest.
const FIRST_DELAY: Duration = Duration::from_secs(1);
const MAX_DELAY: Duration = Duration::from_secs(60);

tokio::task_local! {
    /// The incarnation of the loop the current task runs.
    static INCARNATION: Arc<Incarnation>;
}

/// One run of the worker loop: its own cancellation (a child of the process's) and the panic a
/// pool job reported, if any.
#[derive(Debug)]
struct Incarnation {
    cancel: CancellationToken,
    job_panic: Mutex<Option<String>>,
}

/// Run `start(cancel)` (one incarnation of the worker loop; it returns when `cancel` fires)
/// until the process's `cancel` fires, starting it again after each failure.
pub(super) async fn supervise<F, Fut>(
    state: &WorkerContext,
    cancel: &CancellationToken,
    mut start: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let mut delay = FIRST_DELAY;
    loop {
        let incarnation = Arc::new(Incarnation {
            cancel: cancel.child_token(),
            job_panic: Mutex::new(None),
        });
        let started = Instant::now();
        let run = INCARNATION.scope(incarnation.clone(), start(incarnation.cancel.clone()));
        let joined = tokio::spawn(run).await;
        if cancel.is_cancelled() {
            return;
        }
        let job_panic = incarnation.job_panic.lock().ok().and_then(|mut p| p.take());
        let (reason, cause) = match (joined, job_panic) {
            (Err(e), _) if e.is_panic() => ("panic", panic_message(e.into_panic().as_ref())),
            (Err(e), _) => ("error", format!("the loop task ended: {e}")),
            (Ok(_), Some(message)) => ("panic", format!("a detection job panicked: {message}")),
            (Ok(Err(e)), None) => ("error", format!("{e:#}")),
            (Ok(Ok(())), None) => ("error", "the loop stopped without being asked to".into()),
        };
        if started.elapsed() >= RESTART_WINDOW {
            delay = FIRST_DELAY;
        }
        state
            .metrics
            .worker_restarts
            .with_label_values(&[reason])
            .inc();
        let recent = state.worker_health.restarted(format!("{reason}: {cause}"));
        tracing::error!(
            reason,
            cause = %cause,
            restarts_in_5_min = recent,
            retry_in_secs = delay.as_secs(),
            "the detection worker failed; restarting it"
        );
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = cancel.cancelled() => return,
        }
        delay = (delay * 2).min(MAX_DELAY);
    }
}

/// A pool job of the current incarnation panicked with `message`: record it and stop the
/// incarnation, so the supervisor restarts the loop. (Outside a supervised task: nothing.)
pub(super) fn job_panicked(message: &str) {
    let _ = INCARNATION.try_with(|i| {
        if let Ok(mut slot) = i.job_panic.lock() {
            slot.get_or_insert_with(|| message.to_string());
        }
        i.cancel.cancel();
    });
}

/// `work` to run as a task the loop spawns, within the loop's incarnation, so that a job panic
/// it sees stops that incarnation as one the loop runs itself would.
pub(super) fn in_incarnation<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let current = INCARNATION.try_with(Arc::clone).ok();
    async move {
        match current {
            Some(incarnation) => INCARNATION.scope(incarnation, work).await,
            None => work.await,
        }
    }
}

/// The message a panic carried (`panic!` with a literal or a formatted string).
pub(super) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_read_from_either_payload() {
        let literal = std::panic::catch_unwind(|| panic!("literal")).unwrap_err();
        assert_eq!(panic_message(literal.as_ref()), "literal");
        let formatted = std::panic::catch_unwind(|| panic!("n = {}", 3)).unwrap_err();
        assert_eq!(panic_message(formatted.as_ref()), "n = 3");
        let other = std::panic::catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
        assert_eq!(panic_message(other.as_ref()), "a panic without a message");
    }
}
