//! The SDK's runtime: every async call of the bindings runs as a task on one multi-threaded
//! tokio runtime owned by the library, whatever event loop the caller awaits it from (Python's
//! asyncio, Kotlin coroutines, Swift concurrency). The caller's future only waits for the task;
//! dropping it (a cancelled coroutine or task) aborts the task at its next await point.

use std::future::Future;
use std::sync::OnceLock;

use crate::error::{OmrError, Result};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("omr-sdk")
            .enable_all()
            .build()
            .expect("the SDK's tokio runtime starts")
    })
}

/// Aborts its task when dropped before the task finished.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Run `work` on the SDK's runtime and wait for it; cancelling the returned future aborts it.
pub(crate) async fn run<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    let mut task = AbortOnDrop(runtime().spawn(work));
    match (&mut task.0).await {
        Ok(r) => r,
        Err(e) if e.is_cancelled() => Err(OmrError::local("cancelled", "the call was cancelled")),
        Err(e) => Err(OmrError::local("internal", format!("the call failed: {e}"))),
    }
}

/// [`run`] for a future the compiler cannot prove `Send` (the SDK's key upload, a gRPC client
/// stream: rust-lang/rust#110338 and kin), made by `make` and driven to the end on one of the
/// runtime's blocking threads. Cancelling the returned future ends it at its next await point
/// as [`run`] does.
pub(crate) async fn run_pinned<T, M, F>(make: M) -> Result<T>
where
    T: Send + 'static,
    M: FnOnce() -> F + Send + 'static,
    F: Future<Output = Result<T>>,
{
    let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
    let handle = runtime().handle().clone();
    let r = run_blocking(move || {
        handle.block_on(async move {
            tokio::select! {
                r = make() => r,
                // The sender is dropped, never sent on: the caller went away.
                _ = cancelled => Err(OmrError::local("cancelled", "the call was cancelled")),
            }
        })
    })
    .await;
    drop(cancel);
    r
}

/// Run CPU-heavy `work` (key generation) on the runtime's blocking threads.
pub(crate) async fn run_blocking<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    run(async move {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| OmrError::local("internal", format!("the call failed: {e}")))?
    })
    .await
}
