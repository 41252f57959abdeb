//! What the store tests share: small builders. (One test per backend comes from
//! `omr_test_support::test_each_backend!`.)

use omr_store::{NewKey, NewMessage, StartAt, Store, StoreError};

/// `n` distinct messages, tagged with `tag` so appends can be told apart.
#[allow(dead_code)]
pub fn messages(tag: &str, n: usize) -> Vec<NewMessage> {
    (0..n)
        .map(|i| NewMessage {
            clue: format!("clue {tag} {i}").into_bytes(),
            payload: format!("payload {tag} {i}").into_bytes(),
            attachment: Vec::new(),
        })
        .collect()
}

/// Register a key `key_id` with small key material, starting at `start`; returns the start
/// index it resolved to.
#[allow(dead_code)]
pub async fn register(store: &Store, key_id: &str, start: StartAt) -> u64 {
    try_register(store, key_id, start)
        .await
        .expect("insert key")
}

/// [`register`], returning the store's answer.
#[allow(dead_code)]
pub async fn try_register(store: &Store, key_id: &str, start: StartAt) -> Result<u64, StoreError> {
    store
        .insert_key(&NewKey {
            key_id: key_id.to_string(),
            param_set: "test",
            kbar: 4,
            start,
            token_hash: [1; 32],
            key: b"detection key",
            digest_key: b"digest key",
            invite_hash: None,
        })
        .await
}
