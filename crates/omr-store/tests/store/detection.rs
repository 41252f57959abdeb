//! Detection state on each backend: active keys and cursors, accumulators by range, and the
//! compare-and-set commit that refuses a stale cursor.

use std::time::Duration;

use crate::common::{messages, register};
use omr_store::{ActiveKey, StartAt, StoredAccumulator};
use omr_test_support::{test_each_backend, TestDb};

fn acc(start: u64, end: u64, data: &str) -> StoredAccumulator {
    StoredAccumulator {
        start,
        end,
        data: data.as_bytes().to_vec(),
    }
}

test_each_backend!(commit_progress_is_a_compare_and_set);

async fn commit_progress_is_a_compare_and_set(db: &TestDb) {
    let store = db.store();
    store.append(&messages("m", 8)).await.unwrap();
    register(store, "k", StartAt::Index(0)).await;
    assert_eq!(store.cursor("k").await.unwrap(), Some(0));
    assert_eq!(store.cursor("unknown").await.unwrap(), None);

    assert!(store
        .commit_progress("k", 0, &acc(0, 3, "first"))
        .await
        .unwrap());
    assert_eq!(store.cursor("k").await.unwrap(), Some(3));
    assert_eq!(
        store.accumulator_ending_at("k", 3).await.unwrap(),
        Some(acc(0, 3, "first"))
    );

    // A worker that started from 0 is too late: refused, nothing changes.
    assert!(!store
        .commit_progress("k", 0, &acc(0, 5, "stale"))
        .await
        .unwrap());
    assert_eq!(store.cursor("k").await.unwrap(), Some(3));
    assert_eq!(
        store.accumulators_from("k", 0, 10).await.unwrap(),
        vec![acc(0, 3, "first")]
    );
    assert_eq!(store.accumulator_ending_at("k", 5).await.unwrap(), None);

    // Continuing the open epoch replaces its accumulator.
    assert!(store
        .commit_progress("k", 3, &acc(0, 5, "grown"))
        .await
        .unwrap());
    assert_eq!(store.accumulator_ending_at("k", 3).await.unwrap(), None);
    assert_eq!(
        store.accumulators_from("k", 0, 10).await.unwrap(),
        vec![acc(0, 5, "grown")]
    );
    // A new epoch adds one.
    assert!(store
        .commit_progress("k", 5, &acc(5, 8, "next"))
        .await
        .unwrap());
    assert_eq!(store.cursor("k").await.unwrap(), Some(8));
    assert_eq!(
        store.active_keys().await.unwrap(),
        vec![ActiveKey {
            key_id: "k".to_string(),
            start_index: 0,
            cursor: 8,
            last_seen_ms: None,
        }]
    );

    // A deleted key's cursor is gone: a commit for it is refused.
    assert!(store.delete_key("k").await.unwrap());
    assert!(!store
        .commit_progress("k", 8, &acc(8, 9, "late"))
        .await
        .unwrap());
    assert!(store
        .accumulators_from("k", 0, 10)
        .await
        .unwrap()
        .is_empty());
}

test_each_backend!(accumulators_are_listed_by_range);

async fn accumulators_are_listed_by_range(db: &TestDb) {
    let store = db.store();
    register(store, "k", StartAt::Index(0)).await;
    register(store, "other", StartAt::Index(0)).await;
    let epochs = [acc(0, 4, "e0"), acc(4, 6, "e1"), acc(6, 9, "e2")];
    let mut cursor = 0;
    for e in &epochs {
        assert!(store.commit_progress("k", cursor, e).await.unwrap());
        cursor = e.end;
    }
    assert!(store
        .commit_progress("other", 0, &acc(0, 1, "x"))
        .await
        .unwrap());

    // Everything that covers anything at or after `from`, in order, at most `limit`.
    let cases: [(u64, u32, &[StoredAccumulator]); 7] = [
        (0, 10, &epochs),
        (3, 10, &epochs),
        (4, 10, &epochs[1..]),
        (5, 10, &epochs[1..]),
        (8, 10, &epochs[2..]),
        (9, 10, &[]),
        (0, 2, &epochs[..2]),
    ];
    for (from, limit, want) in cases {
        let got = store.accumulators_from("k", from, limit).await.unwrap();
        assert_eq!(got, want, "accumulators_from({from}, {limit})");
        let ranges = store
            .accumulator_ranges_from("k", from, limit)
            .await
            .unwrap();
        let want_ranges: Vec<(u64, u64)> = want.iter().map(|a| (a.start, a.end)).collect();
        assert_eq!(
            ranges, want_ranges,
            "accumulator_ranges_from({from}, {limit})"
        );
    }
    assert!(store
        .accumulators_from("k", u64::MAX, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.accumulator_ending_at("k", 6).await.unwrap(),
        Some(acc(4, 6, "e1"))
    );
    assert_eq!(store.accumulator_ending_at("k", 5).await.unwrap(), None);
}

test_each_backend!(active_keys_list_the_oldest_registration_first);

async fn active_keys_list_the_oldest_registration_first(db: &TestDb) {
    let store = db.store();
    assert!(store.active_keys().await.unwrap().is_empty());
    store.append(&messages("m", 2)).await.unwrap();
    register(store, "b", StartAt::Now).await;
    // Registration times are in milliseconds.
    tokio::time::sleep(Duration::from_millis(5)).await;
    register(store, "a", StartAt::Index(1)).await;
    assert_eq!(
        store.active_keys().await.unwrap(),
        vec![
            ActiveKey {
                key_id: "b".to_string(),
                start_index: 2,
                cursor: 2,
                last_seen_ms: None,
            },
            ActiveKey {
                key_id: "a".to_string(),
                start_index: 1,
                cursor: 1,
                last_seen_ms: None,
            },
        ]
    );
}
