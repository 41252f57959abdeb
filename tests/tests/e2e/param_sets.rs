//! The production parameter sets through the service, on each store: an omr-v2 server detects
//! 64 messages for three recipients and their digests decode exactly (first and last index, k̄
//! pertinent messages; k̄ + 1 is an overflow, never a wrong answer); omr-v1 keys still register
//! and detect on an omr-v1 server; a server refuses to start on a store that holds keys or
//! messages of another set; with no set named, a store keeps its set and a new one runs omr-v2.

use omr_core::{keygen, Digest, OmrError, ParamSet, OMR_V1, OMR_V2};
use omr_proto::v1::registration_header::Start;
use omr_server::Application;
use omr_test_support::{insecure_keys, quick_detection, test_each_backend, TestDb, TestServer};
use reqwest::StatusCode;

test_each_backend!(
    omr_v2_digests_are_exact_through_the_service,
    omr_v1_keys_still_register_and_detect,
    a_server_refuses_a_store_of_another_parameter_set,
    a_new_store_runs_the_default_set,
);

/// A server on a production set, detecting quickly.
async fn production_server(db: &TestDb, p: &'static ParamSet) -> TestServer {
    TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.param_set = Some(p.name.to_string());
        c.allow_insecure_params = false;
    })
    .await
}

/// A new store with no set named runs the default, omr-v2.
async fn a_new_store_runs_the_default_set(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        c.param_set = None;
        c.allow_insecure_params = false;
    })
    .await;
    let p = s.client().grpc_params().await;
    assert_eq!(p.param_set, omr_api::param_sets::DEFAULT_PARAM_SET);
    assert_eq!(p.param_set, OMR_V2.name);
    s.stop().await;
}

async fn omr_v2_digests_are_exact_through_the_service(db: &TestDb) {
    const KBAR: usize = 4;
    let s = production_server(db, &OMR_V2).await;
    let api = s.client();
    let keys = || keygen(&OMR_V2, KBAR).expect("keygen");
    let r1 = api.register(keys(), Start::StartIndex(0)).await;
    let r2 = api.register(keys(), Start::StartIndex(0)).await;
    let r3 = api.register(keys(), Start::StartIndex(0)).await;
    let noise = keys();
    // r1: exactly k̄, the first and the last index among them; r2: two; r3: k̄ + 1.
    let to = |i: u64| match i {
        0 | 21 | 42 | 63 => 1,
        7 | 50 => 2,
        3 | 13 | 23 | 33 | 43 => 3,
        _ => 0,
    };
    let mut want: [Vec<(u64, Vec<u8>)>; 4] = Default::default();
    for i in 0..64u64 {
        let recipient = to(i);
        let clue_key = match recipient {
            1 => &r1.keys.clue_key,
            2 => &r2.keys.clue_key,
            3 => &r3.keys.clue_key,
            _ => &noise.clue_key,
        };
        // Full-size payloads for the first and the last message.
        let payload: Vec<u8> = if i == 0 || i == 63 {
            (0..OMR_V2.payload_bytes)
                .map(|b| (b as u64 * 31 + i) as u8)
                .collect()
        } else {
            format!("omr-v2 message {i}").into_bytes()
        };
        assert_eq!(api.post(clue_key, &payload).await, i);
        want[recipient].push((i, payload));
    }
    assert_eq!(api.caught_up_digest(&r1, None).await.messages, want[1]);
    assert_eq!(api.caught_up_digest(&r2, None).await.messages, want[2]);
    // r3's whole-board digest holds k̄ + 1 messages: the decoder says so. Once r1 and r2 have
    // caught up, r3 (registered with them) is polled until it has too.
    let bytes = loop {
        let response = api.digest(&r3, None).await;
        assert_eq!(response.status(), StatusCode::OK);
        let lag = response.headers()["omr-lag"].to_str().unwrap().to_string();
        if lag == "0" {
            break response.bytes().await.unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let digest = Digest::from_bytes(&bytes).unwrap();
    assert_eq!((digest.start(), digest.end()), (0, 64));
    assert!(
        matches!(
            r3.keys.secret.decode(&digest),
            Err(OmrError::Overflow { .. })
        ),
        "k̄ + 1 messages must be an overflow"
    );
    // From index 8 (epochs of 8) the range holds k̄ of them, and decodes exactly.
    let got = api.caught_up_digest(&r3, Some(8)).await;
    assert_eq!(got.start, 8);
    assert_eq!(got.messages, want[3][1..].to_vec());
    s.stop().await;
}

async fn omr_v1_keys_still_register_and_detect(db: &TestDb) {
    let s = production_server(db, &OMR_V1).await;
    let api = s.client();
    let r = api
        .register(keygen(&OMR_V1, 2).expect("keygen"), Start::FromNow(true))
        .await;
    let other = keygen(&OMR_V1, 2).expect("keygen");
    api.post(&other.clue_key, b"not for r").await;
    let i = api.post(&r.keys.clue_key, b"for r").await;
    api.post(&other.clue_key, b"not for r either").await;
    let got = api.caught_up_digest(&r, None).await.messages;
    assert_eq!(got, vec![(i, b"for r".to_vec())]);
    s.stop().await;
}

async fn a_server_refuses_a_store_of_another_parameter_set(db: &TestDb) {
    // A store with a key of the test set (and no messages).
    let s = TestServer::start(db).await;
    let r = s
        .client()
        .register(insecure_keys(4), Start::FromNow(true))
        .await;
    let config = s.config.clone();
    s.stop().await;
    // The stopped server's data directory may be gone (PostgreSQL keeps it in a temporary one).
    let dir = tempfile::tempdir().unwrap();
    let build_v2 = || {
        let mut c = config.clone();
        c.param_set = Some(OMR_V2.name.to_string());
        c.allow_insecure_params = false;
        if db.data_dir().is_none() {
            c.data_dir = dir.path().to_path_buf();
        }
        Application::build(c)
    };
    let Err(err) = build_v2().await else {
        panic!("an omr-v2 server on a store of insecure-test keys must not start");
    };
    let err = err.to_string();
    assert!(
        err.contains("detection keys of parameter set insecure-test") && err.contains("omr-v2"),
        "{err}"
    );
    // The same store still serves its own set, with the key and what is posted for it, also
    // when no set is named: an unset param_set runs the set the store holds.
    let s = TestServer::start_configured(db, |c| c.param_set = None).await;
    let api = s.client();
    assert_eq!(api.grpc_params().await.param_set, "insecure-test");
    api.post(&r.keys.clue_key, b"still here").await;
    let got = api.caught_up_digest(&r, None).await.messages;
    assert_eq!(got, vec![(0, b"still here".to_vec())]);
    s.stop().await;
    // Without the key, the board's newest message (a test-set clue) still refuses omr-v2.
    assert!(db.store().delete_key(&r.key_id).await.unwrap());
    let Err(err) = build_v2().await else {
        panic!("an omr-v2 server on a board of insecure-test messages must not start");
    };
    let err = err.to_string();
    assert!(
        err.contains("newest message") && err.contains("insecure-test"),
        "{err}"
    );
}
