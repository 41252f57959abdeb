//! The bounded rayon pools detection runs on, and how async code waits for a job on it without
//! blocking the runtime. A job that panics is caught on the pool (rayon would otherwise abort
//! the process) and comes back as [`JobPanicked`].

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::supervise::{job_panicked, panic_message};
use crate::config::Config;

/// A job on the detection pool panicked; the panic's message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("a detection job panicked: {0}")]
pub(super) struct JobPanicked(pub(super) String);

/// Nice value of the bulk pool's threads: when both pools have work, the kernel's fair
/// scheduler weighs a nice-10 thread at 110 against 1024 for one at the process's own priority,
/// so an online key's detection gets about nine tenths of a core it shares with bulk work.
pub(super) const BULK_NICE: i32 = 10;

/// A key's priority: which pool its work runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Keys of online recipients, at the process's own priority.
    Online,
    /// Offline keys and key loads, at a lower priority ([`BULK_NICE`]).
    Bulk,
}

impl Priority {
    /// The priority of a key whose recipient is (or is not) online.
    pub fn of(online: bool) -> Priority {
        if online {
            Priority::Online
        } else {
            Priority::Bulk
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Online => "online",
            Priority::Bulk => "bulk",
        }
    }
}

/// The worker's two detection pools, one per [`Priority`], `worker_threads` threads each (one per
/// core when 0). The loop serves online keys while a bulk job is in flight, and the kernel gives
/// them the cores: an online recipient's new message does not wait for a batch of offline keys
/// to finish.
#[derive(Clone)]
pub(super) struct Pools {
    bulk: Arc<rayon::ThreadPool>,
    online: Arc<rayon::ThreadPool>,
}

impl Pools {
    pub(super) fn new(config: &Config) -> Self {
        let threads = match config.worker_threads {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        };
        let bulk = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("omr-detect-{i}"))
            .start_handler(|_| lower_priority())
            .build()
            .expect("rayon pool");
        let online = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("omr-online-{i}"))
            .build()
            .expect("rayon pool");
        Pools {
            bulk: Arc::new(bulk),
            online: Arc::new(online),
        }
    }

    /// The pool of `priority`.
    pub(super) fn of(&self, priority: Priority) -> &Arc<rayon::ThreadPool> {
        match priority {
            Priority::Online => &self.online,
            Priority::Bulk => &self.bulk,
        }
    }

    /// Threads per pool.
    pub(super) fn threads(&self) -> usize {
        self.bulk.current_num_threads()
    }
}

/// Raise the calling thread's nice value to [`BULK_NICE`] (Linux: nice is per thread; raising it
/// needs no privilege). Elsewhere, or if the call fails (logged), the thread keeps the process's
/// priority: online keys still go first, but may wait for a bulk batch in progress.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        let tid = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(tid), BULK_NICE) {
            tracing::warn!(error = %e, "could not lower the bulk detection thread's priority");
        }
    }
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn nice_on(pool: &rayon::ThreadPool) -> i32 {
        pool.install(|| rustix::process::getpriority_process(Some(rustix::thread::gettid())))
            .expect("getpriority")
    }

    #[test]
    fn bulk_threads_run_at_a_lower_priority_than_online_ones() {
        let config = Config {
            worker_threads: 2,
            ..Default::default()
        };
        let pools = Pools::new(&config);
        let own = rustix::process::getpriority_process(None).expect("getpriority");
        assert_eq!(pools.threads(), 2);
        assert_eq!(nice_on(pools.of(Priority::Online)), own);
        assert_eq!(nice_on(pools.of(Priority::Bulk)), (own + BULK_NICE).min(19));
    }
}
