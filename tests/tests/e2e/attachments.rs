//! Attachments over real HTTP, on both stores: posted with their messages (binary version 3 and
//! JSON), refused past `max_attachment_bytes` with nothing stored, and fetched byte-exact by PIR
//! once their epoch closes (`omr-pir` as the recipient runs it), with clear errors for open,
//! retired and unknown epochs and for malformed queries; each epoch's database is built once.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_core::Message;
use omr_pir::attachment::{unframe, FRAME_BYTES};
use omr_pir::{Answer, Hint};
use omr_proto::v1::{AnswerPirQueryRequest, GetPirHintRequest};
use omr_test_support::{insecure_keys, test_each_backend, TestDb, TestServer};
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde_json::json;

/// Small epochs and attachments, so that the test's PIR databases are tiny.
pub(crate) const EPOCH: u64 = 8;
pub(crate) const MAX: usize = 2048;

test_each_backend!(
    attachments_come_back_through_pir_once_their_epoch_closes,
    oversized_attachments_are_refused_and_store_nothing,
);

async fn start(db: &TestDb, max_attachment_bytes: usize) -> TestServer {
    TestServer::start_configured(db, |c| {
        c.epoch_len = EPOCH;
        c.max_attachment_bytes = Some(max_attachment_bytes);
    })
    .await
}

pub(crate) const BINARY: Option<&str> = Some("application/octet-stream");

/// The hint of `epoch`, or the error's (status, code).
pub(crate) async fn hint(s: &TestServer, epoch: u64) -> Result<Hint, (StatusCode, String)> {
    let r = s.client().get(&format!("/v1/pir/{epoch}/hint")).await;
    let status = r.status();
    if status != StatusCode::OK {
        let body: serde_json::Value = r.json().await.unwrap();
        return Err((status, body["code"].as_str().unwrap().to_string()));
    }
    Ok(Hint::from_bytes(&r.bytes().await.unwrap()).expect("a hint"))
}

/// Fetch board index `index`'s attachment by PIR: the record, unframed.
pub(crate) async fn fetch(s: &TestServer, hint: &Hint, index: u64) -> Vec<u8> {
    let len = hint.shape().records as u64;
    let epoch = index / len;
    let (query, state) = hint
        .query((index % len) as usize, &mut rand::thread_rng())
        .unwrap();
    let answer = s.client().pir_answer(epoch, &query).await;
    let record = hint.decode(&state, &answer).unwrap();
    let attachment = unframe(&record).expect("a framed record").to_vec();
    let padding = &record[FRAME_BYTES + attachment.len()..];
    assert!(padding.iter().all(|&b| b == 0), "zero padding");
    attachment
}

async fn attachments_come_back_through_pir_once_their_epoch_closes(db: &TestDb) {
    let s = start(db, MAX).await;
    let params: serde_json::Value = s.client().get("/v1/params").await.json().await.unwrap();
    assert_eq!(params["max_attachment_bytes"], MAX);
    assert_eq!(params["epoch_len"], EPOCH);
    assert_eq!(params["pir_params"], "pir-v1");

    // Three recipients; attachments of random sizes (up to the limit) at random indices, some
    // posted binary, some JSON.
    let seed = rand::random();
    println!("SEED: attachments: {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let keys: Vec<_> = (0..3).map(|_| insecure_keys(4)).collect();
    let mut sent: Vec<Vec<u8>> = Vec::new();
    for i in 0..2 * EPOCH {
        let to = &keys[rng.gen_range(0..3)].clue_key;
        let attachment: Vec<u8> = match i {
            0 => vec![0xAB; MAX],
            _ if rng.gen_bool(0.6) => {
                let len = rng.gen_range(1..=MAX);
                (0..len).map(|_| rng.gen()).collect()
            }
            _ => Vec::new(),
        };
        let message = Message::new(to.make_clue(), b"p".to_vec())
            .unwrap()
            .with_attachment(attachment.clone())
            .unwrap();
        let (status, body) = if i % 2 == 0 {
            let mut json = json!({
                "clue": B64.encode(message.clue.to_bytes()),
                "payload": B64.encode(&message.payload),
            });
            if !attachment.is_empty() {
                json["attachment"] = json!(B64.encode(&attachment));
            }
            s.client().post_json("/v1/messages", &json).await
        } else {
            s.client()
                .post_bytes("/v1/messages", BINARY, message.to_bytes())
                .await
        };
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["index"], i);
        sent.push(attachment);
        if i == EPOCH - 2 {
            // One message short of closing the first epoch.
            assert_eq!(
                hint(&s, 0).await.unwrap_err(),
                (StatusCode::CONFLICT, "epoch_open".into())
            );
        }
    }
    // The board itself does not carry attachments.
    assert_eq!(
        s.client().board(0, 1).await["messages"][0]["payload"],
        B64.encode(b"p")
    );

    for epoch in 0..2 {
        let hint = hint(&s, epoch).await.unwrap();
        for index in epoch * EPOCH..(epoch + 1) * EPOCH {
            assert_eq!(
                fetch(&s, &hint, index).await,
                sent[index as usize],
                "index {index}"
            );
        }
    }
    // The same over gRPC: the hint in chunks, a fetch, the same errors.
    let mut grpc = s.client().detector().await;
    let http_hint = s
        .client()
        .get("/v1/pir/1/hint")
        .await
        .bytes()
        .await
        .unwrap();
    let mut stream = grpc
        .get_pir_hint(GetPirHintRequest { epoch: 1 })
        .await
        .unwrap()
        .into_inner();
    let mut grpc_hint = Vec::new();
    while let Some(part) = stream.message().await.unwrap() {
        assert_eq!(part.total_bytes, http_hint.len() as u64);
        grpc_hint.extend_from_slice(&part.chunk);
    }
    assert_eq!(grpc_hint, http_hint);
    let hint1 = Hint::from_bytes(&grpc_hint).unwrap();
    let index = 2 * EPOCH - 1;
    let (query, state) = hint1
        .query((index % EPOCH) as usize, &mut rand::thread_rng())
        .unwrap();
    let answer = grpc
        .answer_pir_query(AnswerPirQueryRequest {
            epoch: 1,
            query: query.to_bytes(),
        })
        .await
        .unwrap()
        .into_inner()
        .answer;
    let record = hint1
        .decode(&state, &Answer::from_bytes(&answer).unwrap())
        .unwrap();
    assert_eq!(unframe(&record), Some(&sent[index as usize][..]));
    for (epoch, code, grpc_code) in [
        (2, "epoch_open", tonic::Code::FailedPrecondition),
        (u64::MAX, "unknown_epoch", tonic::Code::NotFound),
    ] {
        let e = grpc
            .get_pir_hint(GetPirHintRequest { epoch })
            .await
            .err()
            .unwrap();
        assert_eq!(e.code(), grpc_code, "{e:?}");
        assert_eq!(e.metadata().get("omr-error-code").unwrap(), code);
    }
    let e = (grpc
        .answer_pir_query(AnswerPirQueryRequest {
            epoch: 0,
            query: vec![1, 2, 3],
        })
        .await)
        .unwrap_err();
    assert_eq!(
        e.metadata().get("omr-error-code").unwrap(),
        "malformed_pir_query"
    );
    let params = s.client().grpc_params().await;
    assert_eq!(
        (params.max_attachment_bytes, params.epoch_len),
        (MAX as u64, EPOCH)
    );

    // Each epoch's database was built once, whatever the number of requests (16 fetches over
    // HTTP, 1 over gRPC).
    let c = s.client();
    assert_eq!(
        c.metric(r#"omr_pir_builds_total{result="ok"}"#).await,
        Some(2.0)
    );
    assert_eq!(
        c.metric(r#"omr_pir_requests_total{outcome="ok",route="query"}"#)
            .await,
        Some(17.0)
    );

    // Open, unknown and malformed.
    assert_eq!(
        hint(&s, 2).await.unwrap_err(),
        (StatusCode::CONFLICT, "epoch_open".into())
    );
    assert_eq!(
        hint(&s, u64::MAX).await.unwrap_err(),
        (StatusCode::NOT_FOUND, "unknown_epoch".into())
    );
    let (status, body) = c
        .post_bytes("/v1/pir/0/query", BINARY, b"not a query".to_vec())
        .await;
    assert_eq!(
        (status, &body["code"]),
        (StatusCode::BAD_REQUEST, &json!("malformed_pir_query"))
    );
    // The epoch is checked before the query; an epoch that has not begun is unknown, not open;
    // a path that names no epoch number answers in the one error shape.
    let (status, body) = c
        .post_bytes("/v1/pir/2/query", BINARY, b"not a query".to_vec())
        .await;
    assert_eq!(
        (status, &body["code"]),
        (StatusCode::CONFLICT, &json!("epoch_open"))
    );
    assert_eq!(
        hint(&s, 1000).await.unwrap_err(),
        (StatusCode::NOT_FOUND, "unknown_epoch".into())
    );
    let r = c.get("/v1/pir/-1/hint").await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "malformed_query", "{body}");
    let hint0 = hint(&s, 0).await.unwrap();
    let (query, _) = hint0.query(1, &mut rand::thread_rng()).unwrap();
    let (status, body) = c
        .post_bytes("/v1/pir/2/query", BINARY, query.to_bytes())
        .await;
    assert_eq!(
        (status, &body["code"]),
        (StatusCode::CONFLICT, &json!("epoch_open"))
    );
    let (status, body) = c.post_json("/v1/pir/0/query", &json!({})).await;
    assert_eq!(
        (status, &body["code"]),
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &json!("unsupported_media_type")
        )
    );
    let mut too_long = query.to_bytes();
    too_long.push(0);
    let (status, body) = c.post_bytes("/v1/pir/0/query", BINARY, too_long).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
}

async fn oversized_attachments_are_refused_and_store_nothing(db: &TestDb) {
    let s = start(db, MAX).await;
    let to = insecure_keys(4).clue_key;
    let c = s.client();
    let message = |len: usize| {
        Message::new(to.make_clue(), b"p".to_vec())
            .unwrap()
            .with_attachment(vec![7; len])
            .unwrap()
    };
    let over = message(MAX + 1);
    let json = json!({
        "clue": B64.encode(over.clue.to_bytes()),
        "payload": "cA==",
        "attachment": B64.encode(&over.attachment),
    });
    for (status, body) in [
        c.post_bytes("/v1/messages", BINARY, over.to_bytes()).await,
        c.post_json("/v1/messages", &json).await,
    ] {
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
        assert_eq!(body["code"], "attachment_too_large", "{body}");
    }
    let (status, _) = c
        .post_bytes("/v1/messages", BINARY, message(MAX).to_bytes())
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        c.board(0, 10).await["head"],
        1,
        "only the message within the limit is stored"
    );
    s.stop().await;

    // A server that takes no attachments refuses any, and serves no epochs.
    let s = start(db, 0).await;
    let (status, body) = s
        .client()
        .post_bytes("/v1/messages", BINARY, message(1).to_bytes())
        .await;
    assert_eq!(
        (status, &body["code"]),
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            &json!("attachment_too_large")
        )
    );
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("max_attachment_bytes = 0"));
    assert_eq!(
        hint(&s, 0).await.unwrap_err(),
        (StatusCode::NOT_FOUND, "unknown_epoch".into())
    );
    assert_eq!(s.client().board(0, 10).await["head"], 1);
}

/// At the defaults, full size: an epoch of 4,096 messages, every eighth with an attachment of
/// random size up to 64 KiB (the last one exactly 64 KiB), fetched over HTTP as a recipient
/// would (a 10 MiB hint, a 4.7 MB query: past every default body and message limit on the way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_epoch_at_the_defaults_is_served_over_http() {
    let db = TestDb::sqlite().await;
    let s = TestServer::start_configured(&db, |c| {
        let defaults = omr_server::config::Config::default();
        c.epoch_len = defaults.epoch_len;
        c.max_attachment_bytes = defaults.max_attachment_bytes;
    })
    .await;
    let (epoch, max) = (4096u64, 64 * 1024);
    let seed = rand::random();
    println!("SEED: full epoch: {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let to = insecure_keys(4).clue_key;
    let mut sent: Vec<Vec<u8>> = Vec::new();
    for _ in 0..epoch / 256 {
        let mut framed = Vec::new();
        for _ in 0..256 {
            let i = sent.len() as u64;
            let len = match i {
                _ if i == epoch - 8 => max,
                _ if i.is_multiple_of(8) => rng.gen_range(1..=max),
                _ => 0,
            };
            let attachment: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let m = Message::new(to.make_clue(), b"p".to_vec())
                .unwrap()
                .with_attachment(attachment.clone())
                .unwrap()
                .to_bytes();
            framed.extend_from_slice(&(m.len() as u32).to_le_bytes());
            framed.extend_from_slice(&m);
            sent.push(attachment);
        }
        let (status, body) = s
            .client()
            .post_bytes("/v1/messages/batch", BINARY, framed)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let hint = hint(&s, 0).await.unwrap();
    assert_eq!(
        hint.shape().chunks,
        17,
        "64 KiB and its length: 17 chunks of 4 KiB"
    );
    for index in [epoch - 8, 8 * rng.gen_range(0..epoch / 8), 1] {
        assert_eq!(
            fetch(&s, &hint, index).await,
            sent[index as usize],
            "index {index}"
        );
    }
}
