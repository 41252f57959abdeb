//! The gRPC key registry against the real server, on both stores: registering real detection
//! keys in chunks, every refusal leaving nothing stored, tokens, health and reflection.

use std::sync::OnceLock;

use omr_core::{keygen, INSECURE_TEST, OMR_V1};
use omr_proto::v1::register_detection_key_request::Part;
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::{
    DeleteDetectionKeyRequest, GetKeyStatusRequest, RegisterDetectionKeyRequest, RegistrationHeader,
};
use omr_test_support::{test_each_backend, with_token as authed, TestDb, TestServer};
use tokio_stream::StreamExt as _;
use tonic::Code;

fn header(param_set: &str, kbar: u32, total: usize, start: Start) -> RegisterDetectionKeyRequest {
    RegisterDetectionKeyRequest {
        part: Some(Part::Header(RegistrationHeader {
            param_set: param_set.to_string(),
            kbar,
            total_bytes: total as u64,
            start: Some(start),
            invite_code: String::new(),
        })),
    }
}

fn chunks(key: &[u8]) -> Vec<RegisterDetectionKeyRequest> {
    key.chunks(omr_api::CHUNK_BYTES)
        .map(|c| RegisterDetectionKeyRequest {
            part: Some(Part::Chunk(c.to_vec())),
        })
        .collect()
}

async fn register(
    s: &TestServer,
    msgs: Vec<RegisterDetectionKeyRequest>,
) -> Result<omr_proto::v1::RegisterDetectionKeyResponse, tonic::Status> {
    s.client()
        .detector()
        .await
        .register_detection_key(tokio_stream::iter(msgs))
        .await
        .map(|r| r.into_inner())
}

async fn key_count(db: &TestDb) -> u64 {
    db.store().key_count().await.unwrap()
}

/// A production (omr-v1) detection key of k̄ = 50, ≈ 107 MB: generated once per test binary.
fn production_key() -> &'static [u8] {
    static KEY: OnceLock<Vec<u8>> = OnceLock::new();
    KEY.get_or_init(|| keygen(&OMR_V1, 50).unwrap().detection_key.to_bytes())
}

test_each_backend!(
    a_real_key_registers_in_chunks_and_its_token_guards_it,
    refused_uploads_store_nothing,
    a_production_key_registers,
    registration_past_max_keys_is_refused_from_the_header,
);

async fn registration_past_max_keys_is_refused_from_the_header(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| c.max_keys = 1).await;
    let first = keygen(&INSECURE_TEST, 4).unwrap().detection_key.to_bytes();
    let mut msgs = vec![header(
        INSECURE_TEST.name,
        4,
        first.len(),
        Start::FromNow(true),
    )];
    msgs.extend(chunks(&first));
    register(&s, msgs).await.expect("the first key fits");

    // The header alone, and a stream that never sends a key byte: the answer cannot wait for
    // the key, so it is decided from the header.
    let second = keygen(&INSECURE_TEST, 4).unwrap().detection_key.to_bytes();
    let only_header = tokio_stream::iter(vec![header(
        INSECURE_TEST.name,
        4,
        second.len(),
        Start::FromNow(true),
    )])
    .chain(futures::stream::pending());
    let mut detector = s.client().detector().await;
    let refused = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        detector.register_detection_key(only_header),
    )
    .await
    .expect("refused without waiting for key bytes")
    .expect_err("a second key is past max_keys = 1");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("max_keys"), "{refused:?}");
    assert!(refused.message().contains("at most 1"), "{refused:?}");
    assert_eq!(key_count(db).await, 1);
    let metrics = s.client().metrics().await;
    assert!(
        metrics.contains(r#"omr_key_registrations_total{outcome="refused"} 1"#),
        "{metrics}"
    );
}

async fn a_real_key_registers_in_chunks_and_its_token_guards_it(db: &TestDb) {
    let keys = keygen(&INSECURE_TEST, 4).unwrap();
    let key = keys.detection_key.to_bytes();
    let s = TestServer::start(db).await;
    // Put some messages on the board so "from now" means something.
    let mut msgs = vec![header(
        INSECURE_TEST.name,
        4,
        key.len(),
        Start::FromNow(true),
    )];
    msgs.extend(chunks(&key));
    let reg = register(&s, msgs).await.unwrap();
    assert_eq!(reg.access_token.len(), 64);
    assert_eq!(reg.start_index, 0);
    let mut c = s.client().detector().await;
    let st = c
        .get_key_status(authed(
            GetKeyStatusRequest {
                key_id: reg.key_id.clone(),
            },
            &reg.access_token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (st.param_set.as_str(), st.kbar, st.key_bytes),
        (INSECURE_TEST.name, 4, key.len() as u64)
    );
    assert_eq!((st.cursor, st.board_head, st.lag), (0, 0, 0));
    assert!(st.registered_at.ends_with('Z'));
    // The stored key is byte-identical and decodes.
    let stored = db.store().key_bytes(&reg.key_id).await.unwrap().unwrap();
    assert_eq!(stored, key);

    // Token required, and only the right one works.
    let e = c
        .get_key_status(GetKeyStatusRequest {
            key_id: reg.key_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let e = c
        .get_key_status(authed(
            GetKeyStatusRequest {
                key_id: reg.key_id.clone(),
            },
            &"0".repeat(64),
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = c
        .delete_detection_key(authed(
            DeleteDetectionKeyRequest {
                key_id: reg.key_id.clone(),
            },
            "nope",
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = c
        .delete_detection_key(DeleteDetectionKeyRequest {
            key_id: reg.key_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);

    // A start index on the board is honoured (one past the head is refused: contract.rs);
    // keys survive a restart.
    for payload in [b"a", b"b", b"c"] {
        s.client().post(&keys.clue_key, payload).await;
    }
    let mut msgs = vec![header(
        INSECURE_TEST.name,
        4,
        key.len(),
        Start::StartIndex(3),
    )];
    msgs.extend(chunks(&key));
    let reg2 = register(&s, msgs).await.unwrap();
    assert_eq!(reg2.start_index, 3);
    let s = s.restart().await;
    let mut c = s.client().detector().await;
    let st = c
        .get_key_status(authed(
            GetKeyStatusRequest {
                key_id: reg2.key_id.clone(),
            },
            &reg2.access_token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.cursor, 3);

    c.delete_detection_key(authed(
        DeleteDetectionKeyRequest {
            key_id: reg.key_id.clone(),
        },
        &reg.access_token,
    ))
    .await
    .unwrap();
    let e = c
        .get_key_status(authed(
            GetKeyStatusRequest {
                key_id: reg.key_id.clone(),
            },
            &reg.access_token,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(key_count(db).await, 1, "{:?}", db.backend());
    s.stop().await;
}

async fn refused_uploads_store_nothing(db: &TestDb) {
    let keys = keygen(&INSECURE_TEST, 4).unwrap();
    let key = keys.detection_key.to_bytes();
    let other_kbar = keygen(&INSECURE_TEST, 5).unwrap().detection_key.to_bytes();
    let s = TestServer::start_configured(db, |c| c.max_key_bytes = 8 * 1024 * 1024).await;
    let with = |h: RegisterDetectionKeyRequest, body: &[u8]| {
        let mut v = vec![h];
        v.extend(chunks(body));
        v
    };
    let n = key.len();
    let cases: Vec<(&str, Vec<RegisterDetectionKeyRequest>, Code)> = vec![
        (
            "truncated",
            with(
                header(INSECURE_TEST.name, 4, n, Start::FromNow(true)),
                &key[..n / 2],
            ),
            Code::InvalidArgument,
        ),
        (
            "longer than declared",
            with(
                header(INSECURE_TEST.name, 4, n - 10, Start::FromNow(true)),
                &key,
            ),
            Code::ResourceExhausted,
        ),
        (
            "oversized",
            with(
                header(INSECURE_TEST.name, 4, 9 * 1024 * 1024, Start::FromNow(true)),
                &key,
            ),
            Code::ResourceExhausted,
        ),
        (
            "garbage",
            with(
                header(INSECURE_TEST.name, 4, 1000, Start::FromNow(true)),
                &[0xAB; 1000],
            ),
            Code::InvalidArgument,
        ),
        (
            "flipped kind byte",
            {
                let mut bad = key.clone();
                bad[3] = 1;
                with(header(INSECURE_TEST.name, 4, n, Start::FromNow(true)), &bad)
            },
            Code::InvalidArgument,
        ),
        (
            "unknown parameter set",
            with(header("omr-v0", 4, n, Start::FromNow(true)), &key),
            Code::InvalidArgument,
        ),
        (
            "another parameter set",
            with(header(OMR_V1.name, 4, n, Start::FromNow(true)), &key),
            Code::InvalidArgument,
        ),
        (
            "k̄ differs from the key's",
            with(header(INSECURE_TEST.name, 5, n, Start::FromNow(true)), &key),
            Code::InvalidArgument,
        ),
        (
            "key of another k̄",
            with(
                header(
                    INSECURE_TEST.name,
                    4,
                    other_kbar.len(),
                    Start::FromNow(true),
                ),
                &other_kbar,
            ),
            Code::InvalidArgument,
        ),
        ("no header", chunks(&key), Code::InvalidArgument),
        (
            "no start",
            {
                let mut h = header(INSECURE_TEST.name, 4, n, Start::FromNow(true));
                if let Some(Part::Header(hh)) = &mut h.part {
                    hh.start = None;
                }
                with(h, &key)
            },
            Code::InvalidArgument,
        ),
        (
            "two headers",
            {
                let mut v = with(
                    header(INSECURE_TEST.name, 4, n, Start::FromNow(true)),
                    &key[..10],
                );
                v.push(header(INSECURE_TEST.name, 4, n, Start::FromNow(true)));
                v
            },
            Code::InvalidArgument,
        ),
        ("empty stream", vec![], Code::InvalidArgument),
    ];
    for (what, msgs, code) in cases {
        let e = register(&s, msgs).await.unwrap_err();
        assert_eq!(e.code(), code, "{:?} {what}: {e:?}", db.backend());
        assert!(!e.message().is_empty());
    }
    assert_eq!(
        key_count(db).await,
        0,
        "{:?}: a refused upload stored something",
        db.backend()
    );
    s.stop().await;
}

#[tokio::test]
async fn params_health_and_reflection_answer() {
    let s = TestServer::start_sqlite().await;
    let p = s.client().grpc_params().await;
    assert_eq!(p.param_set, INSECURE_TEST.name);
    assert_eq!(p.postage_bits, 0, "postage is off by default");
    assert_eq!(p.max_payload_bytes as usize, INSECURE_TEST.payload_bytes);
    let channel = tonic::transport::Channel::from_shared(s.grpc_url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let r = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "omr.v1.Detector".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    s.stop().await;
}

/// The production key (~107 MB) over the wire: time and the server-side check.
async fn a_production_key_registers(db: &TestDb) {
    let key = production_key();
    let s = TestServer::start_configured(db, |c| {
        c.param_set = Some(OMR_V1.name.to_string());
        c.allow_insecure_params = false;
    })
    .await;
    let mut msgs = vec![header(OMR_V1.name, 50, key.len(), Start::FromNow(true))];
    msgs.extend(chunks(key));
    let started = std::time::Instant::now();
    let reg = register(&s, msgs).await.unwrap();
    eprintln!(
        "{:?}: {} bytes registered in {:?}",
        db.backend(),
        key.len(),
        started.elapsed()
    );
    assert_eq!(reg.access_token.len(), 64);
    assert_eq!(key_count(db).await, 1);
    s.stop().await;
}
