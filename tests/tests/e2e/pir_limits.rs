//! PIR fetches and the rate limit, on both stores: a fetch is charged once its epoch is served
//! and its query decodes, so garbage queries take no token from the client.

use omr_core::Message;
use omr_test_support::{insecure_keys, test_each_backend, TestDb, TestServer};
use reqwest::StatusCode;
use serde_json::json;

use crate::attachments::{fetch, hint, BINARY, EPOCH, MAX};

test_each_backend!(a_query_that_does_not_decode_takes_no_rate_limit_token);

/// A PIR fetch is charged once its epoch is served and its query decodes: garbage queries to a
/// served epoch leave the client's token for the real fetch.
async fn a_query_that_does_not_decode_takes_no_rate_limit_token(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        c.epoch_len = EPOCH;
        c.max_attachment_bytes = Some(MAX);
        // Two tokens: the hint's and one fetch's.
        c.digest_rate_limit_per_second = 0.01;
        c.digest_rate_limit_burst = 2;
    })
    .await;
    let to = insecure_keys(4).clue_key;
    for _ in 0..EPOCH {
        let m = Message::new(to.make_clue(), b"p".to_vec())
            .unwrap()
            .with_attachment(b"attached".to_vec())
            .unwrap();
        let (status, body) = (s.client())
            .post_bytes("/v1/messages", BINARY, m.to_bytes())
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let h = hint(&s, 0).await.expect("epoch 0 is served");
    for _ in 0..3 {
        let (status, body) = (s.client())
            .post_bytes("/v1/pir/0/query", BINARY, b"not a query".to_vec())
            .await;
        assert_eq!(
            (status, &body["code"]),
            (StatusCode::BAD_REQUEST, &json!("malformed_pir_query"))
        );
    }
    assert_eq!(fetch(&s, &h, 3).await, b"attached");
    let (status, body) = (s.client())
        .post_bytes("/v1/pir/0/query", BINARY, b"not a query".to_vec())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (query, _) = h.query(1, &mut rand::thread_rng()).unwrap();
    let (status, body) = (s.client())
        .post_bytes("/v1/pir/0/query", BINARY, query.to_bytes())
        .await;
    assert_eq!(
        (status, &body["code"]),
        (StatusCode::TOO_MANY_REQUESTS, &json!("rate_limited"))
    );
}
