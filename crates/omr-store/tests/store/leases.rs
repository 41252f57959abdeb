//! Worker leases on each backend: owners split the keys, a live lease is kept, an expired or
//! released one is taken over.

use std::time::Duration;

use crate::common::register;
use omr_store::StartAt;
use omr_test_support::{test_each_backend, TestDb};

const LONG: Duration = Duration::from_secs(60);

fn ids(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

test_each_backend!(owners_split_keys_and_take_over_expired_or_released_leases);

async fn owners_split_keys_and_take_over_expired_or_released_leases(db: &TestDb) {
    let store = db.store();
    assert!(store.acquire_leases("a", LONG, 2).await.unwrap().is_empty());
    for k in ["k0", "k1", "k2", "k3"] {
        register(store, k, StartAt::Now).await;
    }

    // Two owners of two keys each split the four.
    assert_eq!(
        store.acquire_leases("a", LONG, 2).await.unwrap(),
        ids(&["k0", "k1"])
    );
    assert_eq!(
        store.acquire_leases("b", LONG, 2).await.unwrap(),
        ids(&["k2", "k3"])
    );
    // Renewing keeps what is held; live leases are not taken even with room for more.
    assert_eq!(
        store.acquire_leases("a", LONG, 2).await.unwrap(),
        ids(&["k0", "k1"])
    );
    assert_eq!(
        store.acquire_leases("b", LONG, 4).await.unwrap(),
        ids(&["k2", "k3"])
    );
    assert!(store.acquire_leases("c", LONG, 4).await.unwrap().is_empty());

    // Released leases are free at once.
    store.release_leases("a").await.unwrap();
    assert_eq!(
        store.acquire_leases("b", LONG, 4).await.unwrap(),
        ids(&["k0", "k1", "k2", "k3"])
    );

    // An expired lease goes to the next owner that asks.
    assert_eq!(
        store
            .acquire_leases("b", Duration::from_millis(1), 4)
            .await
            .unwrap()
            .len(),
        4
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        store.acquire_leases("c", LONG, 3).await.unwrap(),
        ids(&["k0", "k1", "k2"])
    );
    assert_eq!(
        store.acquire_leases("b", LONG, 4).await.unwrap(),
        ids(&["k3"])
    );

    // Releasing what one does not hold changes nothing.
    store.release_leases("nobody").await.unwrap();
    assert_eq!(
        store.acquire_leases("c", LONG, 4).await.unwrap(),
        ids(&["k0", "k1", "k2"])
    );
}
