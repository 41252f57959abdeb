//! Presence on each backend: `mark_seen` records when a key's recipient was last seen, only
//! ever forward, shows in `active_keys` and in `seen_since`, ignores unknown keys and goes with a
//! deleted key; and
//! progress notifications carry each committed cursor to other connections (PostgreSQL).

use std::time::Duration;

use crate::common::{messages, register};
use omr_store::{StartAt, StoredAccumulator};
use omr_test_support::{test_each_backend, TestDb};
use tokio::sync::mpsc;

test_each_backend!(
    presence_moves_forward_and_shows_in_active_keys,
    progress_notifications_carry_each_committed_cursor,
);

async fn presence_moves_forward_and_shows_in_active_keys(db: &TestDb) {
    let store = db.store();
    register(store, "a", StartAt::Index(0)).await;
    register(store, "b", StartAt::Index(0)).await;
    let seen = |keys: Vec<omr_store::ActiveKey>| -> Vec<(String, Option<i64>)> {
        keys.into_iter()
            .map(|k| (k.key_id, k.last_seen_ms))
            .collect()
    };
    assert_eq!(store.last_seen("a").await.unwrap(), None);
    assert_eq!(
        seen(store.active_keys().await.unwrap()),
        vec![("a".into(), None), ("b".into(), None)]
    );

    store.mark_seen("a", 1_000).await.unwrap();
    store.mark_seen("a", 5_000).await.unwrap();
    // An older time (a slower process's write) does not move it back.
    store.mark_seen("a", 3_000).await.unwrap();
    assert_eq!(store.last_seen("a").await.unwrap(), Some(5_000));
    assert_eq!(
        seen(store.active_keys().await.unwrap()),
        vec![("a".into(), Some(5_000)), ("b".into(), None)]
    );
    // Only the keys seen at or after a time, with when.
    store.mark_seen("b", 2_000).await.unwrap();
    let mut recent = store.seen_since(2_000).await.unwrap();
    recent.sort();
    assert_eq!(recent, vec![("a".into(), 5_000), ("b".into(), 2_000)]);
    assert_eq!(
        store.seen_since(2_001).await.unwrap(),
        vec![("a".into(), 5_000)]
    );
    assert!(store.seen_since(5_001).await.unwrap().is_empty());

    // An unknown key records nothing (and is no error: it may have just been deleted).
    store.mark_seen("nope", 1).await.unwrap();
    assert_eq!(store.last_seen("nope").await.unwrap(), None);

    // Deleting the key deletes its presence; registering the same id again starts unseen.
    assert!(store.delete_key("a").await.unwrap());
    assert_eq!(store.last_seen("a").await.unwrap(), None);
    register(store, "a", StartAt::Index(0)).await;
    assert_eq!(store.last_seen("a").await.unwrap(), None);
}

async fn progress_notifications_carry_each_committed_cursor(db: &TestDb) {
    let store = db.store();
    store.append(&messages("m", 40)).await.unwrap();
    register(store, "k", StartAt::Index(0)).await;
    if store.is_embedded() {
        let mut called = false;
        tokio::time::timeout(
            Duration::from_secs(1),
            store.progress_notifications(|_, _| called = true),
        )
        .await
        .expect("returns at once on SQLite");
        assert!(!called);
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .progress_notifications(move |key, cursor| {
                    let _ = tx.send((key.to_string(), cursor));
                })
                .await
        })
    };
    // The listener may not be listening yet: commit until a notification arrives.
    let mut cursor = 0;
    let mut got = None;
    while got.is_none() && cursor < 40 {
        let acc = StoredAccumulator {
            start: 0,
            end: cursor + 1,
            data: b"acc".to_vec(),
        };
        assert!(store.commit_progress("k", cursor, &acc).await.unwrap());
        cursor += 1;
        got = tokio::time::timeout(Duration::from_millis(250), rx.recv())
            .await
            .ok()
            .flatten();
    }
    let (key, notified) = got.expect("no progress notification within 10 s of committing");
    assert_eq!(key, "k");
    assert!((1..=cursor).contains(&notified), "{notified} of {cursor}");
    // A refused commit (stale cursor) is not announced; the next good one is, with its cursor.
    let stale = StoredAccumulator {
        start: 0,
        end: 39,
        data: b"stale".to_vec(),
    };
    assert!(!store.commit_progress("k", 0, &stale).await.unwrap());
    let next = StoredAccumulator {
        start: 0,
        end: cursor + 1,
        data: b"next".to_vec(),
    };
    assert!(store.commit_progress("k", cursor, &next).await.unwrap());
    let last = loop {
        let (key, c) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a notification for the last commit")
            .expect("the listener runs");
        assert_eq!(key, "k");
        if c == cursor + 1 {
            break c;
        }
        assert!(
            c <= cursor,
            "notified {c}: a cursor that was never committed"
        );
    };
    assert_eq!(last, cursor + 1);
    listener.abort();
}
