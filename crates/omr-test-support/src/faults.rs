//! Fault injection for the in-process server: [`Faults`] is the job hook a [`TestServer`]
//! installs in its detection worker (`Application::set_job_hooks`), so that tests can make
//! detection jobs panic or hold either pool's jobs, and omrd's own state carries none of it.
//!
//! [`TestServer`]: crate::TestServer

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use omr_server::worker::{JobHooks, Priority};

/// What a test sets to disturb detection.
#[derive(Debug, Default)]
pub struct Faults {
    /// The next this many detection jobs panic.
    pub inject_detection_panics: AtomicU32,
    /// While true, detection jobs of offline keys (the bulk pool) wait before they start, and
    /// `bulk_jobs_held` counts them.
    pub hold_bulk_jobs: AtomicBool,
    pub bulk_jobs_held: AtomicU32,
    /// The same for online keys' jobs (the online pool), counted by `online_jobs_held`.
    pub hold_online_jobs: AtomicBool,
    pub online_jobs_held: AtomicU32,
}

impl JobHooks for Faults {
    fn before_job(&self, priority: Priority) {
        let (hold, held) = match priority {
            Priority::Bulk => (&self.hold_bulk_jobs, &self.bulk_jobs_held),
            Priority::Online => (&self.hold_online_jobs, &self.online_jobs_held),
        };
        if hold.load(Ordering::Acquire) {
            held.fetch_add(1, Ordering::AcqRel);
            while hold.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let panic = (self.inject_detection_panics)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        assert!(!panic, "injected detection panic (test fault injection)");
    }
}
