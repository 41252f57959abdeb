//! Worker leases on each backend: the live workers share the keys fairly (a joining worker takes
//! its share, renewals then change nothing), a worker that stops renewing loses its keys after
//! its lease, a released worker's keys are taken at once, and every key stays leased.

use std::time::Duration;

use crate::common::register;
use omr_store::{StartAt, Store};
use omr_test_support::{test_each_backend, wait_until, TestDb};

const LONG: Duration = Duration::from_secs(60);

/// Register keys `k0`, `k1`, … `k{n-1}`.
async fn register_keys(store: &Store, n: usize) {
    for i in 0..n {
        register(store, &format!("k{i}"), StartAt::Now).await;
    }
}

/// Renew each of `owners` once, in order, with a long lease; how many keys each holds.
async fn renew_all(store: &Store, owners: &[&str]) -> Vec<usize> {
    let mut held = Vec::new();
    for owner in owners {
        held.push(store.acquire_leases(owner, LONG).await.unwrap().keys.len());
    }
    held
}

/// Renew each of `owners` once, in order; the keys each holds.
async fn holdings(store: &Store, owners: &[&str]) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    for owner in owners {
        all.push(store.acquire_leases(owner, LONG).await.unwrap().keys);
    }
    all
}

test_each_backend!(a_joining_worker_takes_its_share_and_then_renewals_change_nothing);

async fn a_joining_worker_takes_its_share_and_then_renewals_change_nothing(db: &TestDb) {
    let store = db.store();
    let alone = store.acquire_leases("a", LONG).await.unwrap();
    assert!(alone.keys.is_empty());
    assert_eq!((alone.live_workers, alone.share), (1, 0));
    register_keys(store, 8).await;

    // Alone, A takes every key.
    let a = store.acquire_leases("a", LONG).await.unwrap();
    assert_eq!(a.keys.len(), 8);
    // B joins: nothing is free yet, but it counts as live; A gives back half at its renewal
    // and B takes it at its own.
    let b = store.acquire_leases("b", LONG).await.unwrap();
    assert!(b.keys.is_empty(), "{b:?}");
    assert_eq!((b.live_workers, b.share), (2, 4));
    let a = store.acquire_leases("a", LONG).await.unwrap();
    let half = |i: std::ops::Range<usize>| i.map(|i| format!("k{i}")).collect::<Vec<_>>();
    assert_eq!((a.keys, a.given_back), (half(0..4), half(4..8)));
    let b = store.acquire_leases("b", LONG).await.unwrap();
    assert_eq!((b.keys, b.given_back), (half(4..8), vec![]));

    // From here on, renewals in any order move nothing: no key flips between the two.
    let settled = holdings(store, &["a", "b"]).await;
    assert!(settled[0].iter().all(|k| !settled[1].contains(k)));
    for _ in 0..5 {
        assert_eq!(holdings(store, &["a", "b"]).await, settled);
        let reversed = holdings(store, &["b", "a"]).await;
        assert_eq!((&reversed[1], &reversed[0]), (&settled[0], &settled[1]));
    }
    assert_eq!(store.live_workers().await.unwrap(), 2);
}

test_each_backend!(three_workers_split_keys_within_one_of_each_other_and_keep_every_key_leased);

async fn three_workers_split_keys_within_one_of_each_other_and_keep_every_key_leased(db: &TestDb) {
    let store = db.store();
    register_keys(store, 8).await;
    let owners = ["a", "b", "c"];
    assert_eq!(renew_all(store, &owners).await, vec![8, 0, 0]);
    for _ in 0..3 {
        renew_all(store, &owners).await;
    }
    let mut held = renew_all(store, &owners).await;
    held.sort_unstable();
    assert_eq!(held, vec![2, 3, 3]);
    let settled = holdings(store, &owners).await;
    for _ in 0..3 {
        assert_eq!(holdings(store, &owners).await, settled);
    }

    // A ninth key goes to the worker below the share at its next renewal, whichever that is.
    register(store, "k8", StartAt::Now).await;
    assert_eq!(renew_all(store, &owners).await, vec![3, 3, 3]);
}

test_each_backend!(a_worker_that_stops_renewing_loses_its_keys_when_its_lease_expires);

async fn a_worker_that_stops_renewing_loses_its_keys_when_its_lease_expires(db: &TestDb) {
    let store = db.store();
    register_keys(store, 8).await;
    let short = Duration::from_secs(2);
    assert_eq!(renew_all(store, &["a", "b"]).await, vec![8, 0]);
    // A's last renewal, with a short lease: it gives half back and then stops renewing.
    assert_eq!(
        store.acquire_leases("a", short).await.unwrap().keys.len(),
        4
    );
    let b = store.acquire_leases("b", LONG).await.unwrap();
    assert_eq!((b.keys.len(), b.live_workers), (4, 2));

    wait_until(
        Duration::from_secs(20),
        "B takes A's keys after A's lease expired",
        || async {
            let b = store.acquire_leases("b", LONG).await.unwrap();
            b.keys.len() == 8 && b.live_workers == 1
        },
    )
    .await;
    assert_eq!(store.live_workers().await.unwrap(), 1);
    // A comes back: it is live again and gets its share back from B.
    assert_eq!(renew_all(store, &["a", "b", "a"]).await, vec![0, 4, 4]);
}

test_each_backend!(released_leases_and_heartbeat_go_at_once);

async fn released_leases_and_heartbeat_go_at_once(db: &TestDb) {
    let store = db.store();
    register_keys(store, 8).await;
    renew_all(store, &["a", "b"]).await;
    assert_eq!(renew_all(store, &["a", "b"]).await, vec![4, 4]);

    store.release_leases("a").await.unwrap();
    assert_eq!(store.live_workers().await.unwrap(), 1);
    let b = store.acquire_leases("b", LONG).await.unwrap();
    assert_eq!((b.keys.len(), b.live_workers, b.share), (8, 1, 8));

    // Releasing what one does not hold changes nothing.
    store.release_leases("nobody").await.unwrap();
    assert_eq!(store.acquire_leases("b", LONG).await.unwrap(), b);
}
