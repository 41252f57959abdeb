//! What the store tests share: running one check on a fresh database of each backend, and
//! small builders.

use omr_store::{NewKey, NewMessage, StartAt, Store};

/// Two tests, `$sqlite` and `$postgres`, each running `$check(&Store)` on a fresh database of
/// its own (`omr_store::testing::TestDb`). The PostgreSQL one prints SKIPPED and passes when
/// `OMR_TEST_POSTGRES_URL` is not set.
macro_rules! on_both_backends {
    ($check:ident: $sqlite:ident, $postgres:ident) => {
        #[tokio::test]
        async fn $sqlite() {
            let db = omr_store::testing::TestDb::sqlite().await;
            $check(db.store()).await;
            db.cleanup().await;
        }

        #[tokio::test]
        async fn $postgres() {
            if let Some(db) = omr_store::testing::TestDb::postgres(stringify!($postgres)).await {
                $check(db.store()).await;
                db.cleanup().await;
            }
        }
    };
}

/// `n` distinct messages, tagged with `tag` so appends can be told apart.
#[allow(dead_code)]
pub fn messages(tag: &str, n: usize) -> Vec<NewMessage> {
    (0..n)
        .map(|i| NewMessage {
            clue: format!("clue {tag} {i}").into_bytes(),
            payload: format!("payload {tag} {i}").into_bytes(),
        })
        .collect()
}

/// Register a key `key_id` with small key material, starting at `start`; returns the start
/// index it resolved to.
#[allow(dead_code)]
pub async fn register(store: &Store, key_id: &str, start: StartAt) -> u64 {
    store
        .insert_key(&NewKey {
            key_id: key_id.to_string(),
            param_set: "test",
            kbar: 4,
            start,
            token_hash: [1; 32],
            key: b"detection key",
            digest_key: b"digest key",
        })
        .await
        .expect("insert key")
}
