//! The key registry on each backend: a key larger than one chunk round-trips, its start index
//! resolves, a duplicate changes nothing, deletion removes everything derived from it, and the
//! cap on registered keys holds under racing registrations.

use std::time::Duration;

use crate::common::{messages, register};
use omr_store::{KeyMeta, NewKey, StartAt, StoreError, StoredAccumulator, KEY_CHUNK_BYTES};
use omr_test_support::{test_each_backend, TestDb};

test_each_backend!(
    a_key_round_trips_through_its_chunks,
    registrations_past_the_cap_store_nothing_even_when_racing,
);

/// A small key `key_id` for the cap tests.
fn small_key(key_id: &str) -> NewKey<'static> {
    NewKey {
        key_id: key_id.to_string(),
        param_set: "test",
        kbar: 4,
        start: StartAt::Now,
        token_hash: [3; 32],
        key: b"detection key",
        digest_key: b"digest key",
        invite_hash: None,
    }
}

async fn registrations_past_the_cap_store_nothing_even_when_racing(db: &TestDb) {
    let store = db.store();
    assert_eq!(
        store.insert_key_within(&small_key("a"), 2).await.unwrap(),
        0
    );
    // Eight uploads race for the one remaining place: exactly one gets it.
    let racers = (0..8).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .insert_key_within(&small_key(&format!("r{i}")), 2)
                .await
        })
    });
    let mut stored = 0;
    for r in futures::future::join_all(racers).await {
        match r.unwrap() {
            Ok(_) => stored += 1,
            Err(StoreError::KeyLimit { keys, cap }) => assert_eq!((keys, cap), (2, 2)),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!(stored, 1);
    assert_eq!(store.key_count().await.unwrap(), 2);
    // A refused key left nothing behind; an uncapped insert still works.
    assert!(matches!(
        store.insert_key_within(&small_key("late"), 2).await,
        Err(StoreError::KeyLimit { keys: 2, cap: 2 })
    ));
    assert_eq!(store.key("late").await.unwrap(), None);
    assert_eq!(store.cursor("late").await.unwrap(), None);
    assert_eq!(store.digest_key("late").await.unwrap(), None);
    // Room again after a deletion.
    assert!(store.delete_key("a").await.unwrap());
    store
        .insert_key_within(&small_key("late"), 2)
        .await
        .unwrap();
    assert_eq!(store.key_count().await.unwrap(), 2);
}

async fn a_key_round_trips_through_its_chunks(db: &TestDb) {
    let store = db.store();
    assert_eq!(store.key_count().await.unwrap(), 0);
    assert_eq!(store.key("big").await.unwrap(), None);
    assert_eq!(store.key_bytes("big").await.unwrap(), None);

    // Two full chunks and a partial third.
    let key: Vec<u8> = (0..2 * KEY_CHUNK_BYTES + 123)
        .map(|i| (i % 251) as u8)
        .collect();
    let new = NewKey {
        key_id: "big".to_string(),
        param_set: "test-set",
        kbar: 9,
        start: StartAt::Index(7),
        token_hash: [7; 32],
        key: &key,
        digest_key: b"the digest key",
        invite_hash: None,
    };
    assert_eq!(store.insert_key(&new).await.unwrap(), 7);

    let meta = store.key("big").await.unwrap().expect("registered");
    let registered_ms = meta.registered_ms;
    assert!(registered_ms > 0);
    assert_eq!(
        meta,
        KeyMeta {
            key_id: "big".to_string(),
            param_set: "test-set".to_string(),
            kbar: 9,
            start_index: 7,
            key_bytes: key.len() as u64,
            registered_ms,
            token_hash: vec![7; 32],
            cursor: 7,
        }
    );
    assert_eq!(store.key_bytes("big").await.unwrap(), Some(key.clone()));
    assert_eq!(
        store.digest_key("big").await.unwrap(),
        Some(b"the digest key".to_vec())
    );
    assert_eq!(store.cursor("big").await.unwrap(), Some(7));
    assert_eq!(store.key_count().await.unwrap(), 1);

    // A second registration under the same id fails and changes nothing.
    let again = NewKey {
        key: b"other",
        start: StartAt::Index(0),
        ..new.clone()
    };
    assert!(store.insert_key(&again).await.is_err());
    assert_eq!(store.key_count().await.unwrap(), 1);
    assert_eq!(store.key_bytes("big").await.unwrap(), Some(key));
    assert_eq!(store.cursor("big").await.unwrap(), Some(7));
}

test_each_backend!(a_key_starting_now_starts_at_the_board_head);

async fn a_key_starting_now_starts_at_the_board_head(db: &TestDb) {
    let store = db.store();
    assert_eq!(register(store, "first", StartAt::Now).await, 0);
    store.append(&messages("m", 3)).await.unwrap();
    assert_eq!(register(store, "second", StartAt::Now).await, 3);
    let meta = store.key("second").await.unwrap().unwrap();
    assert_eq!((meta.start_index, meta.cursor), (3, 3));
    assert_eq!(store.key_count().await.unwrap(), 2);
}

test_each_backend!(deleting_a_key_removes_everything);

async fn deleting_a_key_removes_everything(db: &TestDb) {
    let store = db.store();
    let key = vec![5u8; KEY_CHUNK_BYTES + 1];
    store
        .insert_key(&NewKey {
            key_id: "gone".to_string(),
            param_set: "test",
            kbar: 4,
            start: StartAt::Index(0),
            token_hash: [2; 32],
            key: &key,
            digest_key: b"digest",
            invite_hash: None,
        })
        .await
        .unwrap();
    register(store, "kept", StartAt::Index(0)).await;
    // Give it an accumulator and a lease too.
    let acc = StoredAccumulator {
        start: 0,
        end: 2,
        data: b"acc".to_vec(),
    };
    assert!(store.commit_progress("gone", 0, &acc).await.unwrap());
    let held = store
        .acquire_leases("w", Duration::from_secs(60))
        .await
        .unwrap()
        .keys;
    assert_eq!(held, vec!["gone".to_string(), "kept".to_string()]);

    assert!(store.delete_key("gone").await.unwrap());
    assert_eq!(store.key("gone").await.unwrap(), None);
    assert_eq!(store.key_bytes("gone").await.unwrap(), None);
    assert_eq!(store.digest_key("gone").await.unwrap(), None);
    assert_eq!(store.cursor("gone").await.unwrap(), None);
    assert!(store
        .accumulators_from("gone", 0, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .acquire_leases("w", Duration::from_secs(60))
            .await
            .unwrap()
            .keys,
        vec!["kept".to_string()]
    );
    let active: Vec<String> = store
        .active_keys()
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.key_id)
        .collect();
    assert_eq!(active, vec!["kept".to_string()]);
    assert_eq!(store.key_count().await.unwrap(), 1);
    // The other key is untouched; deleting again reports that nothing was there.
    assert!(store.key("kept").await.unwrap().is_some());
    assert!(!store.delete_key("gone").await.unwrap());
}
