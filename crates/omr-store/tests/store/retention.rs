//! Retention on each backend: only messages every key has detected go, in batches, and old
//! accumulators go by their end.

use crate::common::{messages, register};
use omr_store::{StartAt, Store, StoredAccumulator};
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
