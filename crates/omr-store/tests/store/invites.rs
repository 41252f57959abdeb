//! Invite codes on each backend: a registration takes a use only when its key is stored (not
//! when it is refused for the cap, nor when its insert fails), a code admits exactly its uses
//! even when registrations race for the last one, and an unknown, used-up or expired code is
//! refused with the reason and stores nothing.

use std::num::NonZeroU32;

use omr_store::{InviteRefusal, NewKey, StartAt, Store, StoreError};
use omr_test_support::{test_each_backend, TestDb};

test_each_backend!(
    a_use_is_taken_only_with_the_key,
    racing_registrations_share_exactly_the_uses,
    unknown_used_up_and_expired_codes_are_refused,
);

/// A small key `key_id` presenting the invite `hash`.
fn invited_key(key_id: &str, hash: [u8; 32]) -> NewKey<'static> {
    NewKey {
        key_id: key_id.to_string(),
        param_set: "test",
        kbar: 4,
        start: StartAt::Now,
        token_hash: [5; 32],
        key: b"detection key",
        digest_key: b"digest key",
        invite_hash: Some(hash),
    }
}

fn uses(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

/// Why `r` was refused; panics unless it is an invite refusal.
fn refusal<T: std::fmt::Debug>(r: Result<T, StoreError>) -> InviteRefusal {
    match r {
        Err(StoreError::InviteRefused(why)) => why,
        other => panic!("not an invite refusal: {other:?}"),
    }
}

async fn uses_left(store: &Store, hash: &[u8; 32]) -> u32 {
    store.invite(hash).await.unwrap().expect("stored").uses_left
}

async fn a_use_is_taken_only_with_the_key(db: &TestDb) {
    let store = db.store();
    let code = [1; 32];
    store.create_invite(&code, uses(2), None).await.unwrap();
    let stored = store.invite(&code).await.unwrap().unwrap();
    assert_eq!(
        (stored.uses, stored.uses_left, stored.expires_ms),
        (2, 2, None)
    );
    store.check_invite(&code).await.unwrap();
    assert_eq!(uses_left(store, &code).await, 2, "a check takes nothing");

    store.insert_key(&invited_key("a", code)).await.unwrap();
    assert_eq!(uses_left(store, &code).await, 1);

    // Refused for the cap: the use it took in its transaction is rolled back with it.
    let refused = store.insert_key_within(&invited_key("b", code), 1).await;
    assert!(
        matches!(refused, Err(StoreError::KeyLimit { keys: 1, cap: 1 })),
        "{refused:?}"
    );
    // A failing insert (the key id exists): rolled back too.
    assert!(store.insert_key(&invited_key("a", code)).await.is_err());
    assert_eq!(uses_left(store, &code).await, 1);
    assert_eq!(store.key_count().await.unwrap(), 1);

    store
        .insert_key_within(&invited_key("b", code), 2)
        .await
        .unwrap();
    assert_eq!(uses_left(store, &code).await, 0);
    assert_eq!(store.key_count().await.unwrap(), 2);
}

async fn racing_registrations_share_exactly_the_uses(db: &TestDb) {
    let store = db.store();
    let code = [2; 32];
    store.create_invite(&code, uses(3), None).await.unwrap();
    let racers = (0..8).map(|i| {
        let store = store.clone();
        tokio::spawn(async move { store.insert_key(&invited_key(&format!("r{i}"), code)).await })
    });
    let mut stored = 0;
    for r in futures::future::join_all(racers).await {
        match r.unwrap() {
            Ok(_) => stored += 1,
            Err(StoreError::InviteRefused(InviteRefusal::UsedUp { uses: 3 })) => {}
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!(stored, 3);
    assert_eq!(store.key_count().await.unwrap(), 3);
    assert_eq!(uses_left(store, &code).await, 0);
}

async fn unknown_used_up_and_expired_codes_are_refused(db: &TestDb) {
    let store = db.store();
    let unknown = [3; 32];
    assert_eq!(
        refusal(store.check_invite(&unknown).await),
        InviteRefusal::Unknown
    );
    let r = store.insert_key(&invited_key("u", unknown)).await;
    assert_eq!(refusal(r), InviteRefusal::Unknown);

    let once = [4; 32];
    store.create_invite(&once, uses(1), None).await.unwrap();
    store.insert_key(&invited_key("first", once)).await.unwrap();
    let used_up = InviteRefusal::UsedUp { uses: 1 };
    assert_eq!(refusal(store.check_invite(&once).await), used_up);
    assert_eq!(
        refusal(store.insert_key(&invited_key("second", once)).await),
        used_up
    );

    let expired = [5; 32];
    let past = 1_000; // 1 s after the Unix epoch
    store
        .create_invite(&expired, uses(5), Some(past))
        .await
        .unwrap();
    let gone = InviteRefusal::Expired { expires_ms: past };
    assert_eq!(refusal(store.check_invite(&expired).await), gone);
    assert_eq!(
        refusal(store.insert_key(&invited_key("late", expired)).await),
        gone
    );
    assert_eq!(uses_left(store, &expired).await, 5);

    // Only the one admitted key was stored.
    assert_eq!(store.key_count().await.unwrap(), 1);
    for id in ["u", "second", "late"] {
        assert_eq!(store.key(id).await.unwrap(), None, "{id}");
    }
}
