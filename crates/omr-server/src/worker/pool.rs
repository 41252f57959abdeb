//! The bounded rayon pool detection runs on, and how async code waits for a job on it without
//! blocking the runtime. A job that panics is caught on the pool (rayon would otherwise abort
//! the process) and comes back as [`JobPanicked`].

use std::panic::{catch_unwind, AssertUnwindSafe};

use tokio::sync::oneshot;

use super::supervise::{job_panicked, panic_message};
use crate::config::Config;

/// A job on the detection pool panicked; the panic's message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("a detection job panicked: {0}")]
pub(super) struct JobPanicked(pub(super) String);

/// The detection pool: `worker_threads` threads, or one per available core when that is 0.
pub(super) fn detect_pool(config: &Config) -> rayon::ThreadPool {
    let threads = match config.worker_threads {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n => n,
    };
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("omr-detect-{i}"))
        .build()
        .expect("rayon pool")
}

/// Run on `pool` and wait for the result without blocking the runtime. A panic in `f` is
/// returned as [`JobPanicked`] and reported to the supervisor, which restarts the worker loop.
pub(super) async fn on_pool<T: Send + 'static>(
    pool: &rayon::ThreadPool,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, JobPanicked> {
    let (tx, rx) = oneshot::channel();
    let span = tracing::Span::current();
    pool.spawn(move || {
        let _e = span.enter();
        let result = catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_message(p.as_ref()));
        let _ = tx.send(result);
    });
    let result = rx
        .await
        .unwrap_or_else(|_| Err("the job was dropped before it answered".to_string()));
    result.map_err(|message| {
        job_panicked(&message);
        JobPanicked(message)
    })
}
