//! omr-light-v1 through the service, on each store: three registered recipients and an
//! unregistered one share a board of 64 messages (the first and the last index among theirs);
//! each recipient's digest, asked for while the batch is still open, decodes to exactly its
//! messages. A full batch is detected for a key whose recipient is offline and the next batch's
//! messages once it comes online. Keys and clues of the other scheme are refused, as are
//! malformed light clues and keys, and nothing is stored.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_light::{Address, Digest, SecretKey, OMR_LIGHT_V1};
use omr_proto::v1::registration_header::Start;
use omr_test_support::{insecure_keys, test_each_backend, wait_for, RawClient, TestDb, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

test_each_backend!(
    light_digests_are_exact_through_the_service,
    an_offline_key_is_detected_batch_by_batch,
    keys_and_clues_of_the_other_scheme_are_refused,
);

/// How long detection of a batch may take on a slow CI machine.
const CATCH_UP: Duration = Duration::from_secs(120);

/// An omr-light-v1 server detecting quickly.
async fn light_server(db: &TestDb) -> TestServer {
    TestServer::start_configured(db, |c| {
        c.param_set = OMR_LIGHT_V1.name.to_string();
        c.allow_insecure_params = false;
        c.epoch_len = OMR_LIGHT_V1.batch as u64;
        c.poll_interval_ms = 200;
        c.worker_threads = 2;
    })
    .await
}

/// A light recipient: its secret key and the server's id and token for it.
struct LightRecipient {
    secret: SecretKey,
    key_id: String,
    token: String,
}

/// Register a fresh light key over the gRPC upload stream.
async fn register(api: &RawClient, secret: SecretKey) -> LightRecipient {
    let key = secret.detection_key().to_bytes();
    let requests = omr_proto::registration_stream(
        OMR_LIGHT_V1.name,
        1,
        Start::StartIndex(0),
        None,
        key.into(),
    );
    let registered = api
        .detector()
        .await
        .register_detection_key(tokio_stream::iter(requests))
        .await
        .unwrap_or_else(|e| panic!("register a light key: {e:?}"))
        .into_inner();
    LightRecipient {
        secret,
        key_id: registered.key_id,
        token: registered.access_token,
    }
}

fn message(to: &Address, payload: &[u8]) -> Value {
    json!({ "clue": B64.encode(to.clue().to_bytes()), "payload": B64.encode(payload) })
}

/// Post `messages` in batches of at most 1,000; the index of the first.
async fn post_all(api: &RawClient, messages: Vec<Value>) -> u64 {
    let mut first = None;
    for chunk in messages.chunks(1000) {
        let (status, body) = api
            .post_json("/v1/messages/batch", &json!({ "messages": chunk }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        first.get_or_insert(body["first_index"].as_u64().expect("first_index"));
    }
    first.expect("at least one message")
}

/// The recipient's digest once detection has reached the board head: its range and the board
/// indices it finds pertinent.
async fn caught_up(api: &RawClient, r: &LightRecipient) -> (u64, u64, Vec<u64>) {
    let what = format!("light key {} has detected the whole board", r.key_id);
    let (start, end, bytes) = wait_for(CATCH_UP, what, || async {
        let response = api
            .http()
            .get(api.url(&format!("/v1/digests/{}", r.key_id)))
            .bearer_auth(&r.token)
            .send()
            .await
            .expect("GET /v1/digests");
        assert_eq!(response.status(), StatusCode::OK, "GET /v1/digests");
        let header = |name: &str| -> u64 {
            response.headers()[name]
                .to_str()
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("header {name} is not a number"))
        };
        let (start, end) = (header("omr-range-start"), header("omr-range-end"));
        let (head, lag) = (header("omr-board-head"), header("omr-lag"));
        if lag == 0 && end == head {
            Some((start, end, response.bytes().await.expect("digest bytes")))
        } else {
            None
        }
    })
    .await;
    let digest = Digest::from_bytes(&bytes).expect("a light digest decodes");
    assert_eq!(
        digest.messages(),
        end - start,
        "the digest covers its range"
    );
    (start, end, r.secret.pertinent(&digest))
}

async fn light_digests_are_exact_through_the_service(db: &TestDb) {
    let s = light_server(db).await;
    let api = s.client();
    let params = api.get("/v1/params").await.json::<Value>().await.unwrap();
    assert_eq!(params["param_set"], OMR_LIGHT_V1.name);
    assert_eq!(params["epoch_len"], OMR_LIGHT_V1.batch as u64);
    let r1 = register(&api, SecretKey::generate(&OMR_LIGHT_V1)).await;
    let r2 = register(&api, SecretKey::generate(&OMR_LIGHT_V1)).await;
    let r3 = register(&api, SecretKey::generate(&OMR_LIGHT_V1)).await;
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let to = |i: u64| match i {
        0 | 21 | 42 | 63 => 1,
        7 | 50 => 2,
        3 | 13 | 23 | 33 | 43 => 3,
        _ => 0,
    };
    let addresses = [
        stranger,
        r1.secret.address(),
        r2.secret.address(),
        r3.secret.address(),
    ];
    let mut want: [Vec<u64>; 4] = Default::default();
    let mut messages = Vec::new();
    for i in 0..64u64 {
        let payload: Vec<u8> = if i == 63 {
            vec![0xa5; OMR_LIGHT_V1.payload_bytes]
        } else {
            format!("light message {i}").into_bytes()
        };
        messages.push(message(&addresses[to(i)], &payload));
        want[to(i)].push(i);
    }
    // The first half, a digest (its recipient is now online), then the rest: the open batch is
    // detected again as it grows.
    let rest = messages.split_off(32);
    assert_eq!(post_all(&api, messages).await, 0);
    let (start, end, got) = caught_up(&api, &r1).await;
    assert_eq!((start, end), (0, 32));
    assert_eq!(got, [0, 21]);
    assert_eq!(post_all(&api, rest).await, 32);
    for (r, want) in [(&r1, &want[1]), (&r2, &want[2]), (&r3, &want[3])] {
        let (start, end, got) = caught_up(&api, r).await;
        assert_eq!((start, end), (0, 64));
        assert_eq!(&got, want, "key {}", r.key_id);
    }
    // gRPC serves the same digest bytes.
    let http = api
        .http()
        .get(api.url(&format!("/v1/digests/{}", r2.key_id)))
        .bearer_auth(&r2.token)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let (header, grpc) = crate::detection::grpc_digest(&api, &r2.key_id, &r2.token).await;
    assert_eq!((header.range_start, header.range_end), (0, 64));
    assert_eq!(grpc, http.to_vec());
}

async fn an_offline_key_is_detected_batch_by_batch(db: &TestDb) {
    let s = light_server(db).await;
    let api = s.client();
    let r = register(&api, SecretKey::generate(&OMR_LIGHT_V1)).await;
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let d = OMR_LIGHT_V1.batch as u64;
    let mine = [5, d - 1, d, d + 2];
    let messages = (0..d + 3)
        .map(|i| {
            let to = if mine.contains(&i) {
                r.secret.address()
            } else {
                stranger.clone()
            };
            message(&to, format!("m{i}").as_bytes())
        })
        .collect();
    post_all(&api, messages).await;
    // Never asked for a digest: the full batch is detected, the open one waits for its
    // recipient (or for the batch to fill).
    let lag = format!("omr_key_lag{{key_id=\"{}\"}}", r.key_id);
    wait_for(CATCH_UP, "the full batch is detected", || async {
        (api.metric(&lag).await == Some(3.0)).then_some(())
    })
    .await;
    let (start, end, got) = caught_up(&api, &r).await;
    assert_eq!((start, end), (0, d + 3));
    assert_eq!(got, mine);
}

async fn keys_and_clues_of_the_other_scheme_are_refused(db: &TestDb) {
    // A light server: a TFHE key and a TFHE clue are of another set; a light clue of the wrong
    // length or with bytes past its coefficients is malformed; a light key with a residue out
    // of range is invalid. Nothing is stored.
    let s = light_server(db).await;
    let api = s.client();
    let tfhe = insecure_keys(2);
    let tfhe_clue = json!({
        "clue": B64.encode(tfhe.clue_key.make_clue().to_bytes()),
        "payload": B64.encode(b"x"),
    });
    let refused = api
        .try_register(tfhe, Start::FromNow(true), None)
        .await
        .expect_err("a TFHE key on a light server");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("omr-light-v1"), "{refused:?}");
    let (status, body) = api.post_json("/v1/messages", &tfhe_clue).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["code"], "param_set_mismatch", "{body}");
    let good = SecretKey::generate(&OMR_LIGHT_V1)
        .address()
        .clue()
        .to_bytes();
    for bad in [good[..good.len() - 1].to_vec(), [&good[..], &[0]].concat()] {
        let m = json!({ "clue": B64.encode(&bad), "payload": B64.encode(b"x") });
        let (status, body) = api.post_json("/v1/messages", &m).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["code"], "malformed_clue", "{body}");
    }
    let long = json!({
        "clue": B64.encode(&good),
        "payload": B64.encode(vec![0u8; OMR_LIGHT_V1.payload_bytes + 1]),
    });
    let (status, body) = api.post_json("/v1/messages", &long).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let mut key = SecretKey::generate(&OMR_LIGHT_V1)
        .detection_key()
        .to_bytes();
    let end = key.len();
    // The last 62-bit residue all ones: 2^62 − 1 ≥ Q.
    key[end - 8..].fill(0xff);
    let requests = omr_proto::registration_stream(
        OMR_LIGHT_V1.name,
        1,
        Start::FromNow(true),
        None,
        key.into(),
    );
    let refused = api
        .detector()
        .await
        .register_detection_key(tokio_stream::iter(requests))
        .await
        .expect_err("a key with a residue out of range");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    let params = api.get("/v1/params").await.json::<Value>().await.unwrap();
    assert_eq!(params["board_head"], 0, "nothing was posted");
    assert_eq!(s.state().service.store.key_count().await.unwrap(), 0);
    s.stop().await;

    // A TFHE server: a light key and a light clue are of another set.
    let t = TestServer::start(db).await;
    let api = t.client();
    let key = SecretKey::generate(&OMR_LIGHT_V1)
        .detection_key()
        .to_bytes();
    let requests = omr_proto::registration_stream(
        OMR_LIGHT_V1.name,
        1,
        Start::FromNow(true),
        None,
        key.into(),
    );
    let refused = api
        .detector()
        .await
        .register_detection_key(tokio_stream::iter(requests))
        .await
        .expect_err("a light key on a TFHE server");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    let light_clue = json!({ "clue": B64.encode(&good), "payload": B64.encode(b"x") });
    let (status, body) = api.post_json("/v1/messages", &light_clue).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["code"], "param_set_mismatch", "{body}");
    let store = t.state().service.store.clone();
    assert_eq!(store.key_count().await.unwrap(), 0);
    assert_eq!(store.board_head().await.unwrap(), 0);
}
