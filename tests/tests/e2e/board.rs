//! The bulletin board over real HTTP, on both stores: posting (JSON and binary), reading back,
//! batches, every kind of bad input, concurrent posters, and restarts.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_core::{keygen, ClueKey, Message, INSECURE_TEST};
use omr_test_support::{test_each_backend, TestDb, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

fn clue_key() -> &'static ClueKey {
    static K: OnceLock<ClueKey> = OnceLock::new();
    K.get_or_init(|| keygen(&INSECURE_TEST, 4).unwrap().clue_key)
}

fn json_message(payload: &[u8]) -> Value {
    json!({"clue": B64.encode(clue_key().make_clue().to_bytes()), "payload": B64.encode(payload)})
}

async fn board(s: &TestServer, from: u64, limit: u32) -> Value {
    s.client().board(from, limit).await
}

async fn head(s: &TestServer) -> u64 {
    board(s, 0, 1).await["head"].as_u64().unwrap()
}

test_each_backend!(
    post_and_read_back_json_binary_and_batches,
    bad_input_gets_a_clear_error_and_stores_nothing,
    concurrent_posters_get_a_gapless_ordered_board,
    acknowledged_messages_survive_a_restart,
);

async fn post_and_read_back_json_binary_and_batches(db: &TestDb) {
    let s = TestServer::start(db).await;
    let (st, body) = s
        .client()
        .post_json("/v1/messages", &json_message(b"first"))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{:?}: {body}", db.backend());
    assert_eq!(body["index"], 0);

    let msg = Message::new(clue_key().make_clue(), b"second".to_vec()).unwrap();
    let (st, body) = s
        .client()
        .post_bytes(
            "/v1/messages",
            Some("application/octet-stream"),
            msg.to_bytes(),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    assert_eq!(body["index"], 1);

    let batch =
        json!({"messages": [json_message(b"b0"), json_message(b""), json_message(&[7u8; 64])]});
    let (st, body) = s.client().post_json("/v1/messages/batch", &batch).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    assert_eq!(
        (body["first_index"].as_u64(), body["count"].as_u64()),
        (Some(2), Some(3))
    );

    let mut bin = Vec::new();
    for p in [&b"x"[..], b"yy"] {
        let m = Message::new(clue_key().make_clue(), p.to_vec())
            .unwrap()
            .to_bytes();
        bin.extend_from_slice(&(m.len() as u32).to_le_bytes());
        bin.extend_from_slice(&m);
    }
    let (st, body) = s
        .client()
        .post_bytes("/v1/messages/batch", Some("application/octet-stream"), bin)
        .await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    assert_eq!(body["first_index"], 5);

    let page = board(&s, 0, 1000).await;
    let payloads: Vec<Vec<u8>> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| B64.decode(m["payload"].as_str().unwrap()).unwrap())
        .collect();
    let want: Vec<Vec<u8>> = [
        &b"first"[..],
        b"second",
        b"b0",
        b"",
        &[7u8; 64],
        b"x",
        b"yy",
    ]
    .iter()
    .map(|p| p.to_vec())
    .collect();
    assert_eq!(payloads, want);
    let indices: Vec<u64> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, (0..7).collect::<Vec<_>>());
    assert_eq!(
        (page["next"].as_u64(), page["head"].as_u64()),
        (Some(7), Some(7))
    );
    // Clues read back decode.
    for m in page["messages"].as_array().unwrap() {
        omr_core::Clue::from_bytes(&B64.decode(m["clue"].as_str().unwrap()).unwrap()).unwrap();
    }
    let page = board(&s, 5, 1).await;
    assert_eq!(page["messages"][0]["index"], 5);
    assert_eq!(page["next"], 6);
    s.stop().await;
}

async fn bad_input_gets_a_clear_error_and_stores_nothing(db: &TestDb) {
    let s = TestServer::start(db).await;
    let good = json_message(b"ok");
    let prod_clue = B64.encode(
        keygen(&omr_core::OMR_V2, 1)
            .unwrap()
            .clue_key
            .make_clue()
            .to_bytes(),
    );
    // (path, content type, body, expected status, expected error code)
    type Case<'a> = (&'a str, Option<&'a str>, Vec<u8>, StatusCode, &'a str);
    let cases: Vec<Case> = vec![
        ("/v1/messages", Some("application/json"), b"{not json".to_vec(), StatusCode::BAD_REQUEST, "malformed_json"),
        ("/v1/messages", Some("application/json"), br#"{"clue":"!!","payload":""}"#.to_vec(), StatusCode::BAD_REQUEST, "malformed_clue"),
        ("/v1/messages", Some("application/json"), json!({"clue": B64.encode(b"OMR garbage"), "payload": ""}).to_string().into_bytes(), StatusCode::BAD_REQUEST, "malformed_clue"),
        ("/v1/messages", Some("application/json"), json!({"clue": good["clue"], "payload": "%%%"}).to_string().into_bytes(), StatusCode::BAD_REQUEST, "malformed_payload"),
        ("/v1/messages", Some("application/json"), json!({"clue": good["clue"], "payload": B64.encode(vec![0u8; INSECURE_TEST.payload_bytes + 1])}).to_string().into_bytes(), StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
        ("/v1/messages", Some("application/json"), json!({"clue": prod_clue, "payload": ""}).to_string().into_bytes(), StatusCode::BAD_REQUEST, "param_set_mismatch"),
        ("/v1/messages", Some("application/json"), json!({"clue": good["clue"], "payload": "", "extra": 1}).to_string().into_bytes(), StatusCode::BAD_REQUEST, "malformed_json"),
        ("/v1/messages", Some("application/json"), vec![b' '; 128 * 1024], StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
        ("/v1/messages", Some("application/octet-stream"), b"OMR\x06\x01\xc8junk".to_vec(), StatusCode::BAD_REQUEST, "malformed_message"),
        ("/v1/messages", Some("text/plain"), b"hello".to_vec(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
        ("/v1/messages", None, b"hello".to_vec(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
        ("/v1/messages/batch", Some("application/json"), json!({"messages": []}).to_string().into_bytes(), StatusCode::BAD_REQUEST, "empty_batch"),
        // One bad message poisons the whole batch: nothing stored.
        ("/v1/messages/batch", Some("application/json"), json!({"messages": [good, {"clue": "AAAA", "payload": ""}]}).to_string().into_bytes(), StatusCode::BAD_REQUEST, "malformed_clue"),
        ("/v1/messages/batch", Some("application/json"), json!({"messages": vec![good.clone(); 1001]}).to_string().into_bytes(), StatusCode::PAYLOAD_TOO_LARGE, "batch_too_large"),
        ("/v1/messages/batch", Some("application/octet-stream"), vec![9, 0, 0, 0, 1], StatusCode::BAD_REQUEST, "malformed_message"),
    ];
    for (path, ct, body, status, code) in cases {
        let (st, err) = s.client().post_bytes(path, ct, body).await;
        assert_eq!(st, status, "{:?} {path} {ct:?}: {err}", db.backend());
        assert_eq!(err["code"], code, "{path}: {err}");
        assert!(!err["message"].as_str().unwrap_or("").is_empty(), "{err}");
    }
    assert_eq!(
        head(&s).await,
        0,
        "{:?}: a refused request stored something",
        db.backend()
    );
    let r = reqwest::get(s.url("/v1/messages?limit=0")).await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = reqwest::get(s.url("/v1/messages?from=x")).await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    s.stop().await;
}

async fn concurrent_posters_get_a_gapless_ordered_board(db: &TestDb) {
    let s = TestServer::start(db).await;
    let posters = 8u64;
    let each = 40u64;
    let url = s.url("/v1/messages");
    let reader_url = s.url("/v1/messages?from=0&limit=1000");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A reader polling while posts commit: every page it sees must be a gapless prefix.
    let reader = {
        let done = done.clone();
        tokio::spawn(async move {
            let mut pages = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let page: Value = reqwest::get(&reader_url)
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let idx: Vec<u64> = page["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["index"].as_u64().unwrap())
                    .collect();
                assert_eq!(
                    idx,
                    (0..idx.len() as u64).collect::<Vec<_>>(),
                    "reader saw a gap"
                );
                pages += 1;
            }
            pages
        })
    };
    let mut tasks = Vec::new();
    for p in 0..posters {
        let url = url.clone();
        let clues: Vec<String> = (0..each)
            .map(|_| B64.encode(clue_key().make_clue().to_bytes()))
            .collect();
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut got = Vec::new();
            for (k, clue) in clues.into_iter().enumerate() {
                let payload = format!("{p}:{k}");
                let r = client
                    .post(&url)
                    .json(&json!({"clue": clue, "payload": B64.encode(&payload)}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::CREATED);
                let v: Value = r.json().await.unwrap();
                got.push((v["index"].as_u64().unwrap(), payload));
            }
            got
        }));
    }
    let mut acked = Vec::new();
    for t in tasks {
        let got = t.await.unwrap();
        // Each poster's own messages are ordered as it sent them.
        assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
        acked.extend(got);
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    assert!(reader.await.unwrap() > 0);
    let indices: BTreeSet<u64> = acked.iter().map(|(i, _)| *i).collect();
    assert_eq!(indices.len() as u64, posters * each, "duplicate index");
    assert_eq!(
        indices,
        (0..posters * each).collect(),
        "gap in acknowledged indices"
    );
    let page = board(&s, 0, 1000).await;
    for (i, payload) in &acked {
        let m = &page["messages"][*i as usize];
        assert_eq!(m["index"].as_u64(), Some(*i));
        assert_eq!(
            B64.decode(m["payload"].as_str().unwrap()).unwrap(),
            payload.as_bytes()
        );
    }
    s.stop().await;
}

async fn acknowledged_messages_survive_a_restart(db: &TestDb) {
    let s = TestServer::start(db).await;
    for k in 0..5u8 {
        let (st, _) = s
            .client()
            .post_json("/v1/messages", &json_message(&[k; 3]))
            .await;
        assert_eq!(st, StatusCode::CREATED);
    }
    let before = board(&s, 0, 1000).await;
    let s = s.restart().await;
    let after = board(&s, 0, 1000).await;
    assert_eq!(before["messages"], after["messages"], "{:?}", db.backend());
    let (st, body) = s
        .client()
        .post_json("/v1/messages", &json_message(b"after"))
        .await;
    assert_eq!((st, body["index"].as_u64()), (StatusCode::CREATED, Some(5)));
    s.stop().await;
}

#[tokio::test]
async fn params_probes_metrics_and_openapi_are_served() {
    let s = TestServer::start_sqlite().await;
    let p: Value = reqwest::get(s.url("/v1/params"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(p["param_set"], INSECURE_TEST.name);
    assert_eq!(p["max_payload_bytes"], INSECURE_TEST.payload_bytes);
    assert_eq!(p["clue_bytes"], INSECURE_TEST.clue_bytes());
    assert_eq!(
        reqwest::get(s.url("/livez")).await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        reqwest::get(s.url("/readyz")).await.unwrap().status(),
        StatusCode::OK
    );
    s.client()
        .post_json("/v1/messages", &json_message(b"m"))
        .await;
    let metrics = reqwest::get(s.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("omr_messages_accepted_total{route=\"single\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("omr_commit_seconds_bucket"), "{metrics}");
    assert!(metrics.contains("omr_board_head 1"), "{metrics}");
    let api: Value = reqwest::get(s.url("/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in ["/v1/messages", "/v1/messages/batch", "/v1/params"] {
        assert!(
            api["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    let addr: Value =
        serde_json::from_slice(&std::fs::read(s.config.addr_file()).unwrap()).unwrap();
    assert_eq!(addr["http"], s.http.to_string());
    assert_eq!(addr["grpc"], s.grpc.unwrap().to_string());
    s.stop().await;
}
