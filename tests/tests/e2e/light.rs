//! omr-light-v1 through the service, on each store: three registered recipients and an
//! unregistered one share a board of 64 messages (the first and the last index among theirs);
//! each recipient's digest, asked for while the batch is still open, decodes to exactly its
//! messages. A full batch is detected for a key whose recipient is offline and the next batch's
//! messages once it comes online (`light_asks.rs`: once each time its recipient asks); keys behind load while others are detected, keys time-shared
//! through memory for one catch up a still board without waiting out their deadline (and
//! through memory for two, load ahead in place of keys caught up), and every digest is exact; the closed epoch's payloads and an attachment come back
//! byte-exact by PIR, the same number of queries whatever the recipient has there, and PIR
//! refuses the open epoch and one past the board. Keys and clues of the other scheme are refused, as are
//! malformed light clues and keys, and nothing is stored.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_light::{Address, SecretKey, OMR_LIGHT_V1};
use omr_pir::attachment::unframe_message;
use omr_proto::v1::registration_header::Start;
use omr_test_support::{
    insecure_keys, light_message, test_each_backend, wait_for, LightRecipient, RawClient, TestDb,
    TestServer,
};
use reqwest::StatusCode;
use serde_json::{json, Value};

test_each_backend!(
    light_digests_are_exact_through_the_service,
    an_offline_key_is_detected_batch_by_batch,
    offline_keys_load_while_others_are_detected,
    time_shared_keys_catch_up_a_still_board_without_waiting_out_their_deadline,
    time_shared_keys_load_ahead_in_place_of_keys_caught_up,
    keys_and_clues_of_the_other_scheme_are_refused,
);

/// How long detection of a batch may take on a slow CI machine.
pub(crate) const CATCH_UP: Duration = Duration::from_secs(120);

/// PIR queries a recipient makes per epoch it retrieves from, dummies where it has fewer
/// messages there.
const QUERIES_PER_EPOCH: usize = 4;

/// An omr-light-v1 server detecting quickly.
pub(crate) async fn light_server(db: &TestDb) -> TestServer {
    light_server_with(db, |_| {}).await
}

/// [`light_server`], its configuration changed by `configure`.
pub(crate) async fn light_server_with(
    db: &TestDb,
    configure: impl FnOnce(&mut omr_server::Config),
) -> TestServer {
    TestServer::start_configured(db, |c| {
        c.max_attachment_bytes = Some(1024);
        c.param_set = Some(OMR_LIGHT_V1.name.to_string());
        c.allow_insecure_params = false;
        c.epoch_len = OMR_LIGHT_V1.batch as u64;
        c.poll_interval_ms = 200;
        c.worker_threads = 2;
        configure(c);
    })
    .await
}

async fn light_digests_are_exact_through_the_service(db: &TestDb) {
    let s = light_server(db).await;
    let api = s.client();
    let params = api.get("/v1/params").await.json::<Value>().await.unwrap();
    assert_eq!(params["param_set"], OMR_LIGHT_V1.name);
    assert_eq!(params["epoch_len"], OMR_LIGHT_V1.batch as u64);
    let r1 = api.register_light().await;
    let r2 = api.register_light().await;
    let r3 = api.register_light().await;
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
        messages.push(light_message(&addresses[to(i)], &payload));
        want[to(i)].push(i);
    }
    // The first half, a digest (its recipient is now online), then the rest: the open batch is
    // detected again as it grows.
    let rest = messages.split_off(32);
    assert_eq!(api.post_all(messages).await, 0);
    let (start, end, got) = api.light_caught_up(&r1).await;
    assert_eq!((start, end), (0, 32));
    assert_eq!(got, [0, 21]);
    assert_eq!(api.post_all(rest).await, 32);
    for (r, want) in [(&r1, &want[1]), (&r2, &want[2]), (&r3, &want[3])] {
        let (start, end, got) = api.light_caught_up(r).await;
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
    let r = api.register_light().await;
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let d = OMR_LIGHT_V1.batch as u64;
    let mine = [5, d - 1, d, d + 2];
    let payload = |i: u64| -> Vec<u8> {
        if i == d - 1 {
            (0..OMR_LIGHT_V1.payload_bytes)
                .map(|b| (b * 7 + 1) as u8)
                .collect()
        } else {
            format!("m{i}").into_bytes()
        }
    };
    let photo = vec![0x5a; 1000];
    let messages = (0..d + 3)
        .map(|i| {
            let to = if mine.contains(&i) {
                r.secret.address()
            } else {
                stranger.clone()
            };
            let mut m = light_message(&to, &payload(i));
            if i == 5 {
                m["attachment"] = B64.encode(&photo).into();
            }
            m
        })
        .collect();
    api.post_all(messages).await;
    // Never asked for a digest: the full batch is detected, the open one waits for its
    // recipient (or for the batch to fill).
    let lag = format!("omr_key_lag{{key_id=\"{}\"}}", r.key_id);
    wait_for(CATCH_UP, "the full batch is detected", || async {
        (api.metric(&lag).await == Some(3.0)).then_some(())
    })
    .await;
    let (start, end, got) = api.light_caught_up(&r).await;
    assert_eq!((start, end), (0, d + 3));
    assert_eq!(got, mine);

    // The payloads of the closed epoch by PIR: two real queries and two dummies.
    let records = fetch_by_pir(&api, 0, &[5, d as usize - 1]).await;
    assert_eq!(records[0], (payload(5), photo));
    assert_eq!(records[1], (payload(d - 1), Vec::new()));
    // Epoch 1 is open; epoch 9 is past the board.
    for (epoch, status, code) in [
        (1, StatusCode::CONFLICT, "epoch_open"),
        (9, StatusCode::NOT_FOUND, "unknown_epoch"),
    ] {
        let response = api.get(&format!("/v1/pir/{epoch}/hint")).await;
        assert_eq!(response.status(), status, "epoch {epoch}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], code, "{body}");
    }
}

async fn offline_keys_load_while_others_are_detected(db: &TestDb) {
    // Five offline keys a full batch behind, on two threads. The first key loads alone (no key
    // size known yet), the second with the next in the queue beside it; that one is in memory
    // and first in the queue next, so its turn detects while the last two load ahead.
    let s = light_server(db).await;
    let api = s.client();
    let mut recipients = Vec::new();
    for _ in 0..5 {
        recipients.push(api.register_light().await);
    }
    let d = OMR_LIGHT_V1.batch as u64;
    let to = |i: u64| (i % 97 < 5).then_some((i % 97) as usize);
    let addresses: Vec<Address> = recipients.iter().map(|r| r.secret.address()).collect();
    api.post_all(batch_for(&addresses, to)).await;
    // Offline (no digest asked for yet): every key is detected once, batch by batch.
    wait_for(CATCH_UP, "every key detected the batch", || async {
        (api.metric("omr_detections_total").await >= Some(5.0 * d as f64)).then_some(())
    })
    .await;
    let ahead = api.metric("omr_key_loads_ahead_total").await.unwrap_or(0.0);
    assert!(ahead >= 1.0, "no key loaded beside another key's turn");
    assert_batch_digests(&api, &recipients, to).await;
}

async fn time_shared_keys_catch_up_a_still_board_without_waiting_out_their_deadline(db: &TestDb) {
    // Memory for one light key and three keys: the keys not in memory are served as soon as
    // nothing else is, each filling the idle pool in turn.
    let (fills, _) = time_shared_catch_up(db, 1, 3).await;
    assert!(fills >= 2.0, "{fills} keys filled an idle pool");
}

async fn time_shared_keys_load_ahead_in_place_of_keys_caught_up(db: &TestDb) {
    // Memory for two light keys and four keys: while one key's batch is detected the next
    // loads, the first beside it in the room memory has, the others in place of a key that
    // caught up.
    let (_, ahead) = time_shared_catch_up(db, 2, 4).await;
    assert!(
        ahead >= 2.0,
        "{ahead} loads ahead: none in place of a key caught up"
    );
}

/// `keys` offline light keys a full batch behind, memory for `memory_keys` of them, and an
/// hour's wait for a batch worth a load (a light key's load is worth hundreds of batches: never
/// on this board). The board is posted and the keys registered before the detection worker
/// starts, so the board is still from its first look (the rate is over the last minute) and it
/// lists every key at once: every key catches up within the catch-up's time, not the hour, its
/// digest exact. Returns the idle fills and the loads ahead.
async fn time_shared_catch_up(db: &TestDb, memory_keys: u64, keys: usize) -> (f64, f64) {
    let light_key = 32u64 << 20; // an omr-light-v1 key in memory, about
    let s = TestServer::start_configured(db, |c| {
        c.param_set = Some(OMR_LIGHT_V1.name.to_string());
        c.allow_insecure_params = false;
        c.epoch_len = OMR_LIGHT_V1.batch as u64;
        c.poll_interval_ms = 200;
        c.worker_threads = 2;
        c.key_memory_bytes = memory_keys * light_key + light_key / 4;
        c.key_max_wait_secs = 3600;
        c.role = omr_server::Role::Api;
    })
    .await;
    let api = s.client();
    let secrets: Vec<SecretKey> = (0..keys)
        .map(|_| SecretKey::generate(&OMR_LIGHT_V1))
        .collect();
    let d = OMR_LIGHT_V1.batch as u64;
    let n = keys as u64;
    let to = move |i: u64| (i % 61 < n).then_some((i % 61) as usize);
    let addresses: Vec<Address> = secrets.iter().map(SecretKey::address).collect();
    api.post_all(batch_for(&addresses, to)).await;
    let mut recipients = Vec::new();
    for secret in secrets {
        recipients.push(api.register_light_key(secret).await);
    }
    let s = s
        .restart_configured(|c| c.role = omr_server::Role::Both)
        .await;
    let api = s.client();
    wait_for(CATCH_UP, "every key detected the batch", || async {
        (api.metric("omr_detections_total").await >= Some((n * d) as f64)).then_some(())
    })
    .await;
    let metric = |name| {
        let api = &api;
        async move { api.metric(name).await.unwrap_or(0.0) }
    };
    let counts = (
        metric("omr_detect_idle_fills_total").await,
        metric("omr_key_loads_ahead_total").await,
    );
    assert_batch_digests(&api, &recipients, to).await;
    counts
}

/// A full batch: message `i` to `addresses[to(i)]`, or to a stranger.
fn batch_for(addresses: &[Address], to: impl Fn(u64) -> Option<usize>) -> Vec<Value> {
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    (0..OMR_LIGHT_V1.batch as u64)
        .map(|i| {
            let address = to(i).map_or(&stranger, |r| &addresses[r]);
            light_message(address, format!("m{i}").as_bytes())
        })
        .collect()
}

/// Each recipient's digest of the first batch, caught up: exactly its messages of
/// [`batch_for`]'s.
async fn assert_batch_digests(
    api: &RawClient,
    recipients: &[LightRecipient],
    to: impl Fn(u64) -> Option<usize>,
) {
    let d = OMR_LIGHT_V1.batch as u64;
    for (n, r) in recipients.iter().enumerate() {
        let (start, end, got) = api.light_caught_up(r).await;
        assert_eq!((start, end), (0, d));
        let want: Vec<u64> = (0..d).filter(|&i| to(i) == Some(n)).collect();
        assert_eq!(got, want, "key {}", r.key_id);
    }
}

/// Records `wanted` of epoch `epoch` fetched by PIR as (payload, attachment), in
/// [`QUERIES_PER_EPOCH`] queries whatever their number (the rest are dummies).
async fn fetch_by_pir(api: &RawClient, epoch: u64, wanted: &[usize]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let hint = api.pir_hint(epoch).await;
    let mut rng = rand::rngs::OsRng;
    let mut out = Vec::new();
    for slot in 0..QUERIES_PER_EPOCH {
        let (query, fetch) = match wanted.get(slot) {
            Some(&record) => hint.query(record, &mut rng).expect("a query"),
            None => hint.dummy_query(&mut rng),
        };
        let answer = api.pir_answer(epoch, &query).await;
        if slot < wanted.len() {
            let record = hint.decode(&fetch, &answer).expect("the answer decodes");
            let (payload, attachment) = unframe_message(&record).expect("a framed message");
            out.push((payload.to_vec(), attachment.to_vec()));
        }
    }
    out
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
    let refused = api
        .try_register_light_bytes(key, Start::FromNow(true))
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
    let refused = api
        .try_register_light_bytes(key, Start::FromNow(true))
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
