//! Streaming detection end to end on each store: recipients register real keys, messages are
//! posted interleaved, the worker detects and folds them, digests are fetched over HTTP (and
//! gRPC) and decoded to exactly the expected (index, payload) sets, across epochs and a
//! restart; digests need the key's token, and a deleted key is gone.

use omr_proto::v1::registration_header::Start;
use omr_proto::v1::{get_digest_response, DeleteDetectionKeyRequest, GetDigestRequest};
use omr_test_support::{
    insecure_keys, quick_detection, test_each_backend, with_token, RawClient, TestDb, TestServer,
};
use reqwest::StatusCode;

test_each_backend!(
    recipients_get_exactly_their_messages_across_epochs_and_restarts,
    digests_need_the_right_token_and_deleted_keys_are_gone,
);

async fn recipients_get_exactly_their_messages_across_epochs_and_restarts(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_detection).await;
    let api = s.client();
    let noise = insecure_keys(4);
    let r1 = api.register(insecure_keys(4), Start::StartIndex(0)).await;
    let r2 = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let mut want: [Vec<(u64, Vec<u8>)>; 3] = Default::default();
    // First 10 messages: r1 gets 1 and 5, r2 gets 3.
    for i in 0..10u64 {
        let payload = format!("message {i}").into_bytes();
        let to = match i {
            1 | 5 => 0,
            3 => 1,
            _ => 9,
        };
        let keys = match to {
            0 => &r1.keys,
            1 => &r2.keys,
            _ => &noise,
        };
        let idx = api.post(&keys.clue_key, &payload).await;
        assert_eq!(idx, i);
        if to < 3 {
            want[to].push((i, payload));
        }
    }
    // r3 registers mid-board, "from now": it must see only what comes after.
    let r3 = api.register(insecure_keys(4), Start::FromNow(true)).await;
    for i in 10..20u64 {
        let payload = format!("message {i}").into_bytes();
        let to = match i {
            12 => 0,
            15 | 19 => 1,
            11 | 17 => 2,
            _ => 9,
        };
        let keys = match to {
            0 => &r1.keys,
            1 => &r2.keys,
            2 => &r3.keys,
            _ => &noise,
        };
        api.post(&keys.clue_key, &payload).await;
        if to < 3 {
            want[to].push((i, payload));
        }
    }
    for (r, w) in [&r1, &r2, &r3].iter().zip(&want) {
        let got = api.caught_up_digest(r, None).await.messages;
        assert_eq!(&got, w, "{:?}", db.backend());
    }
    // `from` rounds down to the epoch start (epochs of 8): from 12 covers [8, 20).
    let digest = api.caught_up_digest(&r1, Some(12)).await;
    assert_eq!(digest.start, 8);
    assert_eq!(digest.messages, vec![want[0][2].clone()]);

    // Restart; more messages; everything exactly once.
    let s = s.restart().await;
    let api = s.client();
    let payload = b"after restart".to_vec();
    let idx = api.post(&r1.keys.clue_key, &payload).await;
    want[0].push((idx, payload));
    let got = api.caught_up_digest(&r1, None).await.messages;
    assert_eq!(got, want[0], "{:?}", db.backend());
    let metrics = api.metrics().await;
    assert!(metrics.contains("omr_detections_total"), "{metrics}");
    s.stop().await;
}

async fn digests_need_the_right_token_and_deleted_keys_are_gone(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_detection).await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    api.post(&r.keys.clue_key, b"hello").await;
    let url = s.url(&format!("/v1/digests/{}", r.key_id));
    let client = reqwest::Client::new();
    let resp = client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let resp = client
        .get(&url)
        .bearer_auth("0".repeat(64))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let resp = client
        .get(s.url("/v1/digests/nope"))
        .bearer_auth(&r.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let got = api.caught_up_digest(&r, None).await.messages;
    assert_eq!(got, vec![(0, b"hello".to_vec())]);
    // gRPC GetDigest streams the same bytes as HTTP.
    let http_bytes = api.digest(&r, None).await.bytes().await.unwrap().to_vec();
    let (header, grpc_bytes) = grpc_digest(&api, &r.key_id, &r.token).await;
    assert_eq!(
        (header.range_start, header.range_end, header.total_bytes),
        (0, 1, http_bytes.len() as u64)
    );
    assert_eq!(grpc_bytes, http_bytes);
    let e = api
        .detector()
        .await
        .get_digest(GetDigestRequest {
            key_id: r.key_id.clone(),
            from: None,
            to: None,
            etag: None,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);

    api.detector()
        .await
        .delete_detection_key(with_token(
            DeleteDetectionKeyRequest {
                key_id: r.key_id.clone(),
            },
            &r.token,
        ))
        .await
        .unwrap();
    let resp = api.digest(&r, None).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    // The worker keeps going for nobody and the server stays healthy: a key registered after
    // the deletion gets the message after the deleted key's, so once its digest covers the
    // whole board the worker has gone past the deleted key's message.
    let other = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let after_delete = api.post(&r.keys.clue_key, b"after delete").await;
    let mine = api.post(&other.keys.clue_key, b"for the other key").await;
    assert!(after_delete < mine);
    let got = api.caught_up_digest(&other, None).await;
    assert_eq!(got.messages, vec![(mine, b"for the other key".to_vec())]);
    assert_eq!(got.end, mine + 1);
    // It counts only the key that is left.
    let metrics = api.metrics().await;
    assert!(metrics.contains("\nomr_keys 1\n"), "{metrics}");
    assert_eq!(api.get("/readyz").await.status(), StatusCode::OK);
    s.stop().await;
}

/// `GetDigest` over gRPC with `token`: the header and the streamed bytes.
pub(crate) async fn grpc_digest(
    api: &RawClient,
    key_id: &str,
    token: &str,
) -> (omr_proto::v1::DigestHeader, Vec<u8>) {
    let (header, bytes, _) = grpc_digest_held(api, key_id, token, None).await;
    (header, bytes)
}

/// [`grpc_digest`] naming the digest the client holds (`etag`): also how many chunks came.
pub(crate) async fn grpc_digest_held(
    api: &RawClient,
    key_id: &str,
    token: &str,
    etag: Option<String>,
) -> (omr_proto::v1::DigestHeader, Vec<u8>, usize) {
    let request = with_token(
        GetDigestRequest {
            key_id: key_id.to_string(),
            from: None,
            to: None,
            etag,
        },
        token,
    );
    let mut stream = api
        .detector()
        .await
        .get_digest(request)
        .await
        .unwrap()
        .into_inner();
    let (mut bytes, mut chunks) = (Vec::new(), 0);
    let mut header = None;
    while let Some(m) = stream.message().await.unwrap() {
        match m.part.unwrap() {
            get_digest_response::Part::Header(h) => header = Some(h),
            get_digest_response::Part::Chunk(b) => {
                bytes.extend_from_slice(&b);
                chunks += 1;
            }
        }
    }
    (header.expect("a header first"), bytes, chunks)
}
