//! Replay protection, on both stores: a message already on the board (the same clue, payload and
//! attachment) is never appended again. Its re-post is answered `409 duplicate_message` with the
//! index it has, as JSON or binary, alone or inside a batch (which then stores nothing), and from
//! many posters at once exactly one copy is stored; the SDK treats a re-post as posted.

use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_client::Client;
use omr_core::{keygen, ClueKey, Message, INSECURE_TEST};
use omr_test_support::{test_each_backend, TestDb, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

fn clue_key() -> &'static ClueKey {
    static K: OnceLock<ClueKey> = OnceLock::new();
    K.get_or_init(|| keygen(&INSECURE_TEST, 4).unwrap().clue_key)
}

fn message(payload: &[u8]) -> Message {
    Message::new(clue_key().make_clue(), payload.to_vec()).unwrap()
}

fn json_of(m: &Message) -> Value {
    json!({"clue": B64.encode(m.clue.to_bytes()), "payload": B64.encode(&m.payload)})
}

async fn head(s: &TestServer) -> u64 {
    s.client().board(0, 1).await["head"].as_u64().unwrap()
}

async fn post_binary(s: &TestServer, m: &Message) -> (StatusCode, Value) {
    (s.client())
        .post_bytes(
            "/v1/messages",
            Some("application/octet-stream"),
            m.to_bytes(),
        )
        .await
}

test_each_backend!(
    a_repost_is_answered_with_its_index_and_never_appended,
    a_batch_with_a_message_on_the_board_stores_nothing,
    concurrent_reposts_store_one_copy,
);

async fn a_repost_is_answered_with_its_index_and_never_appended(db: &TestDb) {
    let s = TestServer::start(db).await;
    let (a, b) = (message(b"pay 5"), message(b"pay 5"));
    assert_eq!(post_binary(&s, &a).await.1["index"], 0);
    // The same payload under a fresh clue is another message.
    assert_eq!(post_binary(&s, &b).await.1["index"], 1);

    for (st, body) in [
        post_binary(&s, &a).await,
        s.client().post_json("/v1/messages", &json_of(&a)).await,
    ] {
        assert_eq!(st, StatusCode::CONFLICT, "{:?}: {body}", db.backend());
        assert_eq!(body["code"], "duplicate_message", "{body}");
        assert_eq!(body["index"], 0, "{body}");
    }
    assert_eq!(head(&s).await, 2);
    let board = s.client().board(0, 10).await;
    assert_eq!(board["messages"].as_array().unwrap().len(), 2);

    // The SDK's post of a message already on the board answers the index it has.
    let sdk = Client::new(&s.url(""), &s.grpc_url()).unwrap();
    assert_eq!(sdk.post(&b).await.unwrap(), 1);
    assert_eq!(head(&s).await, 2);
    // Other errors still have no index.
    let (st, body) = s.client().post_json("/v1/messages", &json!({})).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(body.get("index").is_none(), "{body}");
}

async fn a_batch_with_a_message_on_the_board_stores_nothing(db: &TestDb) {
    let s = TestServer::start(db).await;
    let old = message(b"old");
    post_binary(&s, &old).await;
    let (c, d) = (message(b"c"), message(b"d"));

    let batch = json!({"messages": [json_of(&c), json_of(&old)]});
    let (st, body) = s.client().post_json("/v1/messages/batch", &batch).await;
    assert_eq!(st, StatusCode::CONFLICT, "{:?}: {body}", db.backend());
    assert_eq!(body["code"], "duplicate_message");
    assert_eq!(body["index"], 0);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("message 1 of the batch"));

    let repeated = json!({"messages": [json_of(&c), json_of(&c)]});
    let (st, body) = s.client().post_json("/v1/messages/batch", &repeated).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["code"], "duplicate_message");
    assert!(body.get("index").is_none(), "{body}");
    assert_eq!(head(&s).await, 1, "a refused batch stored nothing");

    let fresh = json!({"messages": [json_of(&c), json_of(&d)]});
    let (st, body) = s.client().post_json("/v1/messages/batch", &fresh).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    assert_eq!(body["first_index"], 1);
    assert_eq!(post_binary(&s, &d).await.1["index"], 2);
}

async fn concurrent_reposts_store_one_copy(db: &TestDb) {
    let s = TestServer::start(db).await;
    post_binary(&s, &message(b"before")).await;
    let m = message(b"racing");
    let answers = futures::future::join_all((0..12).map(|_| post_binary(&s, &m))).await;
    let stored: Vec<&Value> = answers
        .iter()
        .filter(|(st, _)| *st == StatusCode::CREATED)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(stored.len(), 1, "{:?}: {answers:?}", db.backend());
    let index = stored[0]["index"].as_u64().unwrap();
    for (st, body) in &answers {
        if *st != StatusCode::CREATED {
            assert_eq!(*st, StatusCode::CONFLICT, "{body}");
            assert_eq!(body["index"].as_u64(), Some(index), "{body}");
        }
    }
    assert_eq!(head(&s).await, 2);
}
