//! Key progress inside the process: the detection worker publishes each key's new cursor after
//! a commit, and calls waiting for a key's next detected message (HTTP long-polls, gRPC
//! `WatchKeyStatus`) wake at once. Other processes' commits arrive here too, by PostgreSQL
//! notification (`app.rs` listens); waiters also re-read the store every `poll_interval_ms`,
//! so a lost notification delays an answer, never loses it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use omr_store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Keys tracked before those nobody waits for are forgotten.
const PRUNE_ABOVE: usize = 4096;

/// One watch channel per key somebody waits for, holding the highest cursor published.
#[derive(Debug, Default)]
pub struct KeyProgress {
    keys: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Fired at shutdown: every waiter answers with what it has.
    stop: CancellationToken,
}

impl KeyProgress {
    /// `key_id`'s cursor is now `cursor` (a commit succeeded): wake its waiters. Cheap when
    /// nobody waits.
    pub fn publish(&self, key_id: &str, cursor: u64) {
        let mut keys = self.keys.lock().expect("key progress");
        let Some(tx) = keys.get(key_id) else {
            return;
        };
        if tx.receiver_count() == 0 {
            keys.remove(key_id);
            return;
        }
        tx.send_if_modified(|c| {
            let moved = cursor > *c;
            *c = (*c).max(cursor);
            moved
        });
    }

    /// A receiver of `key_id`'s published cursors (0 until the first publication after the
    /// first subscription: read the store for the current cursor).
    pub fn subscribe(&self, key_id: &str) -> watch::Receiver<u64> {
        let mut keys = self.keys.lock().expect("key progress");
        if keys.len() >= PRUNE_ABOVE && !keys.contains_key(key_id) {
            keys.retain(|_, tx| tx.receiver_count() > 0);
        }
        keys.entry(key_id.to_string())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Publish every process's commits as the store announces them (PostgreSQL notifications;
    /// nothing on SQLite, where this process's worker is the only one) until stopped.
    pub fn spawn_listener(self: &Arc<Self>, store: &Store) -> JoinHandle<()> {
        let (progress, store) = (self.clone(), store.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = store.progress_notifications(|key_id, cursor| progress.publish(key_id, cursor)) => {}
                () = progress.stopped() => {}
            }
        })
    }

    /// Stop waiting (shutdown): every waiter answers now, and no new one waits.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Resolves once [`KeyProgress::stop`] was called.
    pub async fn stopped(&self) {
        self.stop.cancelled().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribers_see_the_highest_cursor_published() {
        let p = KeyProgress::default();
        p.publish("k", 5); // nobody waits: nothing kept
        let mut rx = p.subscribe("k");
        assert_eq!(*rx.borrow_and_update(), 0);
        p.publish("k", 3);
        rx.changed().await.unwrap();
        assert_eq!(*rx.borrow_and_update(), 3);
        p.publish("k", 2); // an older commit's cursor: no change
        p.publish("other", 9);
        assert!(!rx.has_changed().unwrap());
        p.publish("k", 4);
        assert_eq!(*rx.borrow_and_update(), 4);
        drop(rx);
        p.publish("k", 6);
        assert!(
            p.keys.lock().unwrap().is_empty(),
            "unwatched keys are dropped"
        );
        assert!(!p.is_stopped());
        p.stop();
        p.stopped().await;
    }
}
