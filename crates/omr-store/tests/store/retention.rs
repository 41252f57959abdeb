//! Retention on each backend: only messages every key has detected go, in batches, and old
//! accumulators go by their end; no key may start below the oldest message kept, even when its
//! registration races a retention pass.

use crate::common::{messages, register, try_register};
use omr_store::{StartAt, Store, StoreError, StoredAccumulator};
use omr_test_support::{test_each_backend, TestDb};

fn acc(start: u64, end: u64) -> StoredAccumulator {
    StoredAccumulator {
        start,
        end,
        data: vec![start as u8, end as u8],
    }
}

async fn first_index(store: &Store) -> Option<u64> {
    store.read(0, 1).await.unwrap().first().map(|m| m.index)
}

test_each_backend!(retention_keeps_what_a_key_has_not_detected);

async fn retention_keeps_what_a_key_has_not_detected(db: &TestDb) {
    let store = db.store();
    assert_eq!(store.apply_retention(100, 100, 10).await.unwrap(), (0, 0));
    store.append(&messages("m", 10)).await.unwrap();
    register(store, "fast", StartAt::Index(0)).await;
    register(store, "slow", StartAt::Index(0)).await;
    assert!(store.commit_progress("fast", 0, &acc(0, 6)).await.unwrap());
    assert!(store.commit_progress("slow", 0, &acc(0, 4)).await.unwrap());

    // Below `keep_from` (8) but only what the slowest cursor (4) has passed.
    assert_eq!(store.apply_retention(8, 0, 100).await.unwrap(), (4, 0));
    assert_eq!(first_index(store).await, Some(4));
    assert_eq!(store.board_head().await.unwrap(), 10);

    // In batches of at most `batch`.
    assert!(store.commit_progress("fast", 6, &acc(6, 10)).await.unwrap());
    assert!(store.commit_progress("slow", 4, &acc(4, 10)).await.unwrap());
    assert_eq!(store.apply_retention(10, 0, 4).await.unwrap(), (4, 0));
    assert_eq!(first_index(store).await, Some(8));
    assert_eq!(store.apply_retention(10, 0, 4).await.unwrap(), (2, 0));
    assert_eq!(first_index(store).await, None);
    assert_eq!(store.apply_retention(10, 0, 4).await.unwrap(), (0, 0));

    // Accumulators that end at or before `accumulators_before`.
    assert_eq!(store.apply_retention(0, 6, 100).await.unwrap(), (0, 2));
    assert_eq!(
        store.accumulators_from("fast", 0, 10).await.unwrap(),
        vec![acc(6, 10)]
    );
    assert_eq!(
        store.accumulators_from("slow", 0, 10).await.unwrap(),
        vec![acc(4, 10)]
    );
    assert_eq!(store.apply_retention(0, 10, 1).await.unwrap(), (0, 1));
    assert_eq!(store.apply_retention(0, 10, 1).await.unwrap(), (0, 1));
    assert_eq!(store.apply_retention(0, 10, 1).await.unwrap(), (0, 0));

    // With no keys, `keep_from` alone decides.
    store.append(&messages("n", 5)).await.unwrap();
    assert!(store.delete_key("fast").await.unwrap());
    assert!(store.delete_key("slow").await.unwrap());
    assert_eq!(store.apply_retention(12, 0, 100).await.unwrap(), (2, 0));
    assert_eq!(first_index(store).await, Some(12));
}

test_each_backend!(a_key_cannot_start_below_the_oldest_retained_message);

async fn a_key_cannot_start_below_the_oldest_retained_message(db: &TestDb) {
    let store = db.store();
    assert_eq!(store.oldest_retained_index().await.unwrap(), 0);
    store.append(&messages("m", 10)).await.unwrap();
    register(store, "reader", StartAt::Index(0)).await;
    assert!(store
        .commit_progress("reader", 0, &acc(0, 6))
        .await
        .unwrap());
    assert_eq!(store.apply_retention(8, 0, 100).await.unwrap(), (6, 0));
    assert_eq!(store.oldest_retained_index().await.unwrap(), 6);

    // Below the oldest retained message: refused, and nothing is stored.
    let refused = try_register(store, "late", StartAt::Index(5)).await;
    assert!(
        matches!(
            refused,
            Err(StoreError::StartRetired {
                start: 5,
                oldest: 6
            })
        ),
        "{refused:?}"
    );
    assert_eq!(store.key("late").await.unwrap(), None);
    assert_eq!(store.key_count().await.unwrap(), 1);
    // At it, above the head, or from now: accepted.
    assert_eq!(
        try_register(store, "at", StartAt::Index(6)).await.unwrap(),
        6
    );
    assert_eq!(
        try_register(store, "ahead", StartAt::Index(50))
            .await
            .unwrap(),
        50
    );
    assert_eq!(try_register(store, "now", StartAt::Now).await.unwrap(), 10);

    // Once retention deleted every message, the oldest retained index is the head.
    for key in ["reader", "at", "ahead", "now"] {
        assert!(store.delete_key(key).await.unwrap());
    }
    assert_eq!(store.apply_retention(10, 0, 100).await.unwrap(), (4, 0));
    assert_eq!(first_index(store).await, None);
    assert_eq!(store.oldest_retained_index().await.unwrap(), 10);
    assert!(matches!(
        try_register(store, "late", StartAt::Index(9)).await,
        Err(StoreError::StartRetired {
            start: 9,
            oldest: 10
        })
    ));
}

test_each_backend!(a_registration_racing_retention_never_starts_below_the_retained_board);

/// Registrations at an index race retention passes that would delete that index: each either
/// is refused, or keeps the index from being deleted. No key ever waits for a deleted message.
async fn a_registration_racing_retention_never_starts_below_the_retained_board(db: &TestDb) {
    let store = db.store();
    register(store, "holder", StartAt::Index(0)).await;
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..20u64 {
        let head = store.board_head().await.unwrap();
        store
            .append(&messages(&format!("r{round}"), 10))
            .await
            .unwrap();
        assert!(store
            .commit_progress("holder", head, &acc(head, head + 10))
            .await
            .unwrap());
        let key = format!("r{round}");
        let (deleted, registered) = tokio::join!(
            store.apply_retention(head + 10, 0, 1000),
            try_register(store, &key, StartAt::Index(head + 5)),
        );
        deleted.unwrap();
        match registered {
            Ok(start) => {
                accepted += 1;
                let first = store.read(start, 1).await.unwrap().first().map(|m| m.index);
                assert_eq!(first, Some(start), "key {key} starts at a deleted message");
                // Out of the way, so that the next round's retention may pass its cursor.
                assert!(store.delete_key(&key).await.unwrap());
            }
            Err(StoreError::StartRetired { start, oldest }) => {
                refused += 1;
                assert_eq!((start, oldest), (head + 5, head + 10));
                assert_eq!(store.key(&key).await.unwrap(), None);
            }
            Err(e) => panic!("registration failed: {e}"),
        }
    }
    println!("{accepted} registrations went first, {refused} were refused");
}
