//! The API contract as clients we did not write meet it: the `Bearer` scheme in any case (RFC
//! 9110) on HTTP and gRPC; a registration that starts past the board head refused from its
//! header (`start_index_ahead`), storing nothing; a digest `from` inside the epoch being folded
//! rounded down to its start; unsigned integers documented as such; a gRPC message over the
//! limit refused with its `omr-error-code`; reflection for v1 and v1alpha clients.

use omr_proto::v1::registration_header::Start;
use omr_proto::v1::GetKeyStatusRequest;
use omr_test_support::{insecure_keys, TestServer};
use reqwest::StatusCode;
use tonic_reflection::pb::{v1, v1alpha};

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_on_both_apis() {
    let s = TestServer::start_sqlite().await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let digest = (api
            .http()
            .get(api.url(&format!("/v1/digests/{}", r.key_id))))
        .header("authorization", format!("{scheme} {}", r.token))
        .send()
        .await
        .unwrap();
        assert_eq!(digest.status(), StatusCode::OK, "{scheme}");
        let mut request = tonic::Request::new(GetKeyStatusRequest {
            key_id: r.key_id.clone(),
        });
        let value = format!("{scheme} {}", r.token).parse().unwrap();
        request.metadata_mut().insert("authorization", value);
        let status = api.detector().await.get_key_status(request).await;
        assert!(status.is_ok(), "{scheme}: {status:?}");
    }
    let other = (api
        .http()
        .get(api.url(&format!("/v1/digests/{}", r.key_id))))
    .header("authorization", format!("Basic {}", r.token))
    .send()
    .await
    .unwrap();
    assert_eq!(other.status(), StatusCode::UNAUTHORIZED);
    s.stop().await;
}

#[tokio::test]
async fn a_start_past_the_board_head_is_refused_and_stores_nothing() {
    let s = TestServer::start_sqlite().await;
    let api = s.client();
    let keys = insecure_keys(4);
    for payload in [b"a", b"b"] {
        api.post(&keys.clue_key, payload).await;
    }
    let e = api
        .try_register(insecure_keys(4), Start::StartIndex(1_000_000_000_000), None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert_eq!(
        e.metadata().get("omr-error-code").unwrap(),
        "start_index_ahead"
    );
    assert!(e.message().contains("board head (2)"), "{e:?}");
    assert_eq!(s.state().store.key_count().await.unwrap(), 0);
    // At the head it registers: its first message is the next one posted.
    let r = api.register(keys, Start::StartIndex(2)).await;
    let next = api.post(&r.keys.clue_key, b"c").await;
    let digest = api.caught_up_digest(&r, None).await;
    assert_eq!(digest.messages, vec![(next, b"c".to_vec())]);
    s.stop().await;
}

#[tokio::test]
async fn a_digest_from_inside_the_folded_epoch_is_rounded_down_to_its_start() {
    let s = TestServer::start_sqlite().await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::StartIndex(0)).await;
    let mut sent = Vec::new();
    for payload in [&b"a"[..], b"b", b"c"] {
        sent.push((api.post(&r.keys.clue_key, payload).await, payload.to_vec()));
    }
    let whole = api.caught_up_digest(&r, None).await;
    assert_eq!((whole.start, whole.end), (0, 3));
    // From the cursor itself, and from inside the range: the epoch's digest, not an empty one.
    for from in [3, 1] {
        let d = api.caught_up_digest(&r, Some(from)).await;
        assert_eq!((d.start, d.end), (0, 3), "from = {from}");
        assert_eq!(d.messages, sent, "from = {from}");
    }
    s.stop().await;
}

#[tokio::test]
async fn unsigned_integers_are_documented_with_their_whole_range() {
    let s = TestServer::start_sqlite().await;
    let doc: serde_json::Value = s.client().get("/openapi.json").await.json().await.unwrap();
    let index = &doc["components"]["schemas"]["Posted"]["properties"]["index"];
    assert_eq!(index["format"], "uint64", "{index}");
    assert_eq!(index["maximum"].as_u64(), Some(u64::MAX), "{index}");
    // No unsigned value is declared as a signed 64- or 32-bit one.
    fn signed_unsigned(v: &serde_json::Value, found: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                let format = m.get("format").and_then(|f| f.as_str());
                if matches!(format, Some("int64" | "int32")) && m.get("minimum") == Some(&0.into())
                {
                    found.push(v.to_string());
                }
                m.values().for_each(|x| signed_unsigned(x, found));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| signed_unsigned(x, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    signed_unsigned(&doc, &mut found);
    assert!(found.is_empty(), "{found:?}");
    s.stop().await;
}

#[tokio::test]
async fn a_message_over_the_grpc_limit_is_refused_with_its_code() {
    use omr_proto::v1::register_detection_key_request::Part;
    use omr_proto::v1::{RegisterDetectionKeyRequest, RegistrationHeader};
    let db = omr_test_support::TestDb::sqlite().await;
    let s = TestServer::start_configured(&db, |c| c.max_key_bytes = 8 << 20).await;
    let total = 6 << 20;
    let upload = vec![
        RegisterDetectionKeyRequest {
            part: Some(Part::Header(RegistrationHeader {
                param_set: omr_core::INSECURE_TEST.name.into(),
                kbar: 4,
                total_bytes: total as u64,
                start: Some(Start::FromNow(true)),
                invite_code: String::new(),
            })),
        },
        // One chunk larger than the server's 5 MiB message limit.
        RegisterDetectionKeyRequest {
            part: Some(Part::Chunk(vec![0; total])),
        },
    ];
    let e = (s.client().detector().await)
        .register_detection_key(tokio_stream::iter(upload))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    assert_eq!(
        e.metadata().get("omr-error-code").unwrap(),
        "body_too_large"
    );
    assert!(e.message().contains("5 MiB"), "{e:?}");
    assert_eq!(s.state().store.key_count().await.unwrap(), 0);
    s.stop().await;
    db.cleanup().await;
}

#[tokio::test]
async fn reflection_answers_v1_and_v1alpha_clients() {
    let s = TestServer::start_sqlite().await;
    let channel = tonic::transport::Channel::from_shared(s.client().grpc_url().to_string())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut alpha = v1alpha::server_reflection_client::ServerReflectionClient::new(channel.clone());
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
        ),
    };
    let mut answers = alpha
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.message().await.unwrap().expect("an answer");
    let Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        answer.message_response
    else {
        panic!("not a service list: {answer:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.iter().any(|n| n == "omr.v1.Detector"), "{names:?}");

    // v1: an unknown symbol is an error answer inside the stream, and the stream goes on to
    // answer the next request.
    let mut current = v1::server_reflection_client::ServerReflectionClient::new(channel);
    let ask = |symbol: &str| v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1::server_reflection_request::MessageRequest::FileContainingSymbol(symbol.into()),
        ),
    };
    let mut answers = current
        .server_reflection_info(tokio_stream::iter([
            ask("omr.v1.NoSuchThing"),
            ask("omr.v1.Detector"),
        ]))
        .await
        .unwrap()
        .into_inner();
    let unknown = answers.message().await.unwrap().expect("an answer");
    let Some(v1::server_reflection_response::MessageResponse::ErrorResponse(e)) =
        unknown.message_response
    else {
        panic!("not an error answer: {unknown:?}");
    };
    assert_eq!(e.error_code, tonic::Code::NotFound as i32);
    assert!(e.error_message.contains("omr.v1.NoSuchThing"), "{e:?}");
    let known = answers.message().await.unwrap().expect("a second answer");
    let Some(v1::server_reflection_response::MessageResponse::FileDescriptorResponse(files)) =
        known.message_response
    else {
        panic!("not a file: {known:?}");
    };
    assert!(!files.file_descriptor_proto.is_empty());
    assert!(answers.message().await.unwrap().is_none());
    s.stop().await;
}
