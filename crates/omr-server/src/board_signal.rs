//! [`BoardSignal`]: the board's wake-ups, and a count of them, so that whoever read the board
//! head knows whether it may have moved since.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// Raised after every board commit of this process (the group-commit writer) and every commit
/// another process announces (PostgreSQL NOTIFY, `Store::board_notifications`). It wakes the
/// detection worker, and counts: a head read after [`BoardSignal::raised`] said `n` is the head
/// for as long as it still says `n` (within the poll interval, for commits whose announcement
/// was missed while the listener reconnected).
#[derive(Debug, Default)]
pub struct BoardSignal {
    notify: Notify,
    raised: AtomicU64,
}

impl BoardSignal {
    /// The board moved: count it, then wake the worker (a stored permit if it is busy: it looks
    /// again when it is done).
    pub fn raise(&self) {
        self.raised.fetch_add(1, Ordering::AcqRel);
        self.notify.notify_one();
    }

    /// How many times the board moved so far. Read it *before* reading the head: a commit that
    /// the read missed is counted after it.
    pub fn raised(&self) -> u64 {
        self.raised.load(Ordering::Acquire)
    }

    /// Wait until the board moves (at once if it moved since the last wait ended).
    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_raise_counts_and_wakes_one_waiter_even_before_it_waits() {
        let s = BoardSignal::default();
        assert_eq!(s.raised(), 0);
        s.raise();
        assert_eq!(s.raised(), 1);
        // The permit was stored: the wait ends at once.
        tokio::time::timeout(std::time::Duration::from_secs(5), s.notified())
            .await
            .expect("a raise before the wait wakes it");
    }
}
