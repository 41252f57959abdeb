//! Streaming detection end to end on both stores: recipients register real keys, messages are
//! posted interleaved, the worker detects and folds them, digests are fetched over HTTP and
//! decoded to exactly the expected (index, payload) sets, across epochs and a restart.

use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_core::{keygen, Digest, KeySet, INSECURE_TEST};
use omr_e2e::{StoreKind, TestServer};
use omr_proto::v1::detector_client::DetectorClient;
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::{get_digest_response, DeleteDetectionKeyRequest, GetDigestRequest};
use reqwest::StatusCode;
use serde_json::json;

struct Recipient {
    keys: KeySet,
    key_id: String,
    token: String,
}

async fn register(s: &TestServer, keys: KeySet, start: Start) -> Recipient {
    let msgs = omr_proto::registration_requests(
        INSECURE_TEST.name,
        keys.secret.kbar() as u32,
        start,
        &keys.detection_key.to_bytes(),
    );
    let mut c = DetectorClient::connect(s.grpc_url())
        .await
        .unwrap()
        .max_encoding_message_size(8 << 20);
    let r = c
        .register_detection_key(tokio_stream::iter(msgs))
        .await
        .unwrap()
        .into_inner();
    Recipient {
        keys,
        key_id: r.key_id,
        token: r.access_token,
    }
}

async fn post(s: &TestServer, to: &KeySet, payload: &[u8]) -> u64 {
    let body = json!({"clue": B64.encode(to.clue_key.make_clue().to_bytes()), "payload": B64.encode(payload)});
    let r = reqwest::Client::new()
        .post(s.url("/v1/messages"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    r.json::<serde_json::Value>().await.unwrap()["index"]
        .as_u64()
        .unwrap()
}

async fn get_digest(s: &TestServer, r: &Recipient, from: Option<u64>) -> reqwest::Response {
    let q = from.map(|f| format!("?from={f}")).unwrap_or_default();
    reqwest::Client::new()
        .get(s.url(&format!("/v1/digests/{}{q}", r.key_id)))
        .bearer_auth(&r.token)
        .send()
        .await
        .unwrap()
}

/// Wait until the key's digest covers the whole board, then decode it.
async fn decode_when_caught_up(
    s: &TestServer,
    r: &Recipient,
    from: Option<u64>,
) -> (u64, Vec<(u64, Vec<u8>)>) {
    let started = Instant::now();
    loop {
        let resp = get_digest(s, r, from).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let h = |name: &str| {
            resp.headers()[name]
                .to_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        let (start, end, head, lag) = (
            h("omr-range-start"),
            h("omr-range-end"),
            h("omr-board-head"),
            h("omr-lag"),
        );
        if lag == 0 && end == head {
            let digest = Digest::from_bytes(&resp.bytes().await.unwrap()).unwrap();
            assert_eq!((digest.start(), digest.end()), (start, end));
            let got = r.keys.secret.decode(&digest).unwrap();
            return (
                start,
                got.into_iter().map(|m| (m.index, m.payload)).collect(),
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "detection did not catch up (lag {lag})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn test_config(kind: &StoreKind, dir: &std::path::Path) -> omr_server::Config {
    let mut c = TestServer::config(kind, dir.to_path_buf());
    c.epoch_len = 8;
    c.detect_batch = 3;
    c.poll_interval_ms = 200;
    c.worker_threads = 2;
    c
}

#[tokio::test]
async fn recipients_get_exactly_their_messages_across_epochs_and_restarts() {
    for kind in StoreKind::all().await {
        let dir = tempfile::tempdir().unwrap();
        let s = TestServer::start_with(test_config(&kind, dir.path())).await;
        let noise = keygen(&INSECURE_TEST, 4).unwrap();
        let r1 = register(&s, keygen(&INSECURE_TEST, 4).unwrap(), Start::StartIndex(0)).await;
        let r2 = register(&s, keygen(&INSECURE_TEST, 4).unwrap(), Start::FromNow(true)).await;
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
            let idx = post(&s, keys, &payload).await;
            assert_eq!(idx, i);
            if to < 3 {
                want[to].push((i, payload));
            }
        }
        // r3 registers mid-board, "from now": it must see only what comes after.
        let r3 = register(&s, keygen(&INSECURE_TEST, 4).unwrap(), Start::FromNow(true)).await;
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
            post(&s, keys, &payload).await;
            if to < 3 {
                want[to].push((i, payload));
            }
        }
        for (r, w) in [&r1, &r2, &r3].iter().zip(&want) {
            let (_, got) = decode_when_caught_up(&s, r, None).await;
            assert_eq!(&got, w, "{}", kind.name());
        }
        // `from` rounds down to the epoch start (epochs of 8): from 12 covers [8, 20).
        let (start, got) = decode_when_caught_up(&s, &r1, Some(12)).await;
        assert_eq!(start, 8);
        assert_eq!(got, vec![want[0][2].clone()]);

        // Restart; more messages; everything exactly once.
        let s = s.restart().await;
        let payload = b"after restart".to_vec();
        let idx = post(&s, &r1.keys, &payload).await;
        want[0].push((idx, payload));
        let (_, got) = decode_when_caught_up(&s, &r1, None).await;
        assert_eq!(got, want[0], "{}", kind.name());
        let metrics = reqwest::get(s.url("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(metrics.contains("omr_detections_total"), "{metrics}");
        s.stop().await;
    }
}

#[tokio::test]
async fn digests_need_the_right_token_and_deleted_keys_are_gone() {
    for kind in StoreKind::all().await {
        let dir = tempfile::tempdir().unwrap();
        let s = TestServer::start_with(test_config(&kind, dir.path())).await;
        let r = register(&s, keygen(&INSECURE_TEST, 4).unwrap(), Start::FromNow(true)).await;
        post(&s, &r.keys, b"hello").await;
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
        let (_, got) = decode_when_caught_up(&s, &r, None).await;
        assert_eq!(got, vec![(0, b"hello".to_vec())]);
        // gRPC GetDigest streams the same bytes as HTTP.
        let http_bytes = get_digest(&s, &r, None)
            .await
            .bytes()
            .await
            .unwrap()
            .to_vec();
        let mut c = DetectorClient::connect(s.grpc_url()).await.unwrap();
        let mut req = tonic::Request::new(GetDigestRequest {
            key_id: r.key_id.clone(),
            from: None,
            to: None,
        });
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", r.token).parse().unwrap(),
        );
        let mut stream = c.get_digest(req).await.unwrap().into_inner();
        let mut grpc_bytes = Vec::new();
        let mut header = None;
        while let Some(m) = stream.message().await.unwrap() {
            match m.part.unwrap() {
                get_digest_response::Part::Header(h) => header = Some(h),
                get_digest_response::Part::Chunk(b) => grpc_bytes.extend_from_slice(&b),
            }
        }
        let header = header.expect("a header first");
        assert_eq!(
            (header.range_start, header.range_end, header.total_bytes),
            (0, 1, http_bytes.len() as u64)
        );
        assert_eq!(grpc_bytes, http_bytes);
        let e = c
            .get_digest(GetDigestRequest {
                key_id: r.key_id.clone(),
                from: None,
                to: None,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);

        let mut c = DetectorClient::connect(s.grpc_url()).await.unwrap();
        let mut req = tonic::Request::new(DeleteDetectionKeyRequest {
            key_id: r.key_id.clone(),
        });
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", r.token).parse().unwrap(),
        );
        c.delete_detection_key(req).await.unwrap();
        let resp = get_digest(&s, &r, None).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        // The worker keeps going for nobody and the server stays healthy.
        post(&s, &r.keys, b"after delete").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            reqwest::get(s.url("/readyz")).await.unwrap().status(),
            StatusCode::OK
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn retention_deletes_only_what_every_key_has_detected() {
    for kind in StoreKind::all().await {
        let dir = tempfile::tempdir().unwrap();
        let mut config = test_config(&kind, dir.path());
        config.retain_messages = Some(4);
        config.retention_interval_secs = 1;
        let s = TestServer::start_with(config).await;
        let r = register(&s, keygen(&INSECURE_TEST, 4).unwrap(), Start::FromNow(true)).await;
        let mut want = Vec::new();
        for i in 0..12u64 {
            let payload = format!("m{i}").into_bytes();
            let noise = keygen(&INSECURE_TEST, 1);
            if i % 5 == 0 {
                post(&s, &r.keys, &payload).await;
                want.push((i, payload));
            } else {
                post(&s, noise.as_ref().unwrap(), &payload).await;
            }
        }
        let (_, got) = decode_when_caught_up(&s, &r, None).await;
        assert_eq!(got, want);
        // The board keeps the newest 4; the digest (accumulators) is untouched.
        let started = Instant::now();
        loop {
            let page: serde_json::Value = reqwest::get(s.url("/v1/messages?from=0"))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let first = page["messages"][0]["index"].as_u64().unwrap();
            if first == 8 {
                assert_eq!(page["messages"].as_array().unwrap().len(), 4);
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "retention did not run (first {first})"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (_, got) = decode_when_caught_up(&s, &r, None).await;
        assert_eq!(got, want, "{}", kind.name());
        s.stop().await;
    }
}

#[tokio::test]
async fn api_only_and_worker_only_roles_do_only_their_part() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&StoreKind::Sqlite, dir.path());
    config.role = omr_server::Role::Api;
    let s = TestServer::start_with(config).await;
    let r = register(&s, keygen(&INSECURE_TEST, 4).unwrap(), Start::FromNow(true)).await;
    post(&s, &r.keys, b"waits for a worker").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let resp = get_digest(&s, &r, None).await;
    assert_eq!(
        resp.headers()["omr-lag"],
        "1",
        "an API-only process detected"
    );
    // The same store served by a worker-only process: it detects; its HTTP has only probes.
    let (mut config, dir) = s.stop().await;
    config.role = omr_server::Role::Worker;
    config.http_addr = "127.0.0.1:0".parse().unwrap();
    config.grpc_addr = "127.0.0.1:0".parse().unwrap();
    let w = TestServer::start_with(config).await;
    assert_eq!(
        reqwest::get(w.url("/v1/params")).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        reqwest::get(w.url("/livez")).await.unwrap().status(),
        StatusCode::OK
    );
    let store = omr_store::Store::open_embedded(&w.config.data_dir)
        .await
        .unwrap();
    let started = Instant::now();
    while store.cursor(&r.key_id).await.unwrap() != Some(1) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "worker-only process did not detect"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = reqwest::get(w.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("omr_key_lag{key_id="), "{metrics}");
    store.close().await;
    w.stop().await;
    drop(dir);
}
