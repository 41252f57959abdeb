//! The bounded rayon pool detection runs on, and how async code waits for a job on it without
//! blocking the runtime.

use tokio::sync::oneshot;

use crate::config::Config;

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

/// Run on `pool` and wait for the result without blocking the runtime.
pub(super) async fn on_pool<T: Send + 'static>(
    pool: &rayon::ThreadPool,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = oneshot::channel();
    let span = tracing::Span::current();
    pool.spawn(move || {
        let _e = span.enter();
        let _ = tx.send(f());
    });
    rx.await.expect("rayon job panicked")
}
