//! Key registration over HTTP (`PUT /v1/keys`, for clients that cannot stream gRPC) and deletion
//! (`DELETE /v1/keys/{key_id}`) against the real server, on both stores: a key registered so is
//! stored byte for byte and detected; every refusal (bad headers, truncated, oversized or
//! wrong-length bodies, another set, a start past the head) has its documented status and code
//! and stores nothing; admission is the gRPC path's, decided from the headers before any key
//! byte (invites, `max_keys`), with the same upload permits and deadline.
//! Long: four tests of one route sharing its raw-request helpers; the refusals are one table.

use std::time::Duration;

use omr_api::http::{ErrorBody, KeyRegistered};
use omr_core::{INSECURE_TEST, OMR_V1};
use omr_light::{SecretKey, OMR_LIGHT_V1};
use omr_server::service::invites::new_code;
use omr_server::Registration;
use omr_test_support::{insecure_keys, quick_detection, test_each_backend, Recipient, TestDb};
use omr_test_support::{light_message, LightRecipient};
use omr_test_support::{wait_until, TestServer};
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

test_each_backend!(
    a_key_registered_over_http_is_stored_detected_and_deleted,
    a_light_key_registers_over_http_as_a_browser_sends_it,
    refused_http_uploads_store_nothing,
    http_registration_is_admitted_from_its_headers,
    http_uploads_share_the_permits_and_the_deadline,
);

/// The headers of a registration of an insecure-test key of k̄ = 4 starting `start`.
fn headers(start: &str) -> Vec<(&'static str, String)> {
    vec![
        ("omr-param-set", INSECURE_TEST.name.to_string()),
        ("omr-kbar", "4".to_string()),
        ("omr-start", start.to_string()),
    ]
}

/// `PUT /v1/keys` with `headers` and `body` as application/octet-stream: the status and the
/// JSON answer.
async fn put(
    s: &TestServer,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> (StatusCode, serde_json::Value) {
    put_as(s, "application/octet-stream", headers, body.into()).await
}

/// [`put`] with `body` (a stream: chunked) as `content_type`.
async fn put_as(
    s: &TestServer,
    content_type: &str,
    headers: &[(&str, String)],
    body: reqwest::Body,
) -> (StatusCode, serde_json::Value) {
    let mut request = reqwest::Client::new()
        .put(s.url("/v1/keys"))
        .header("content-type", content_type)
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.expect("PUT /v1/keys");
    let status = response.status();
    (status, response.json().await.unwrap_or_default())
}

/// The error code of an error answer.
fn error_code(answer: &serde_json::Value) -> String {
    let body: ErrorBody = serde_json::from_value(answer.clone()).expect("an error body");
    body.code
}

/// A raw `PUT /v1/keys` declaring `content_length` that sends `body` and then nothing (the
/// connection stays open): the open connection. With `expect`, the head asks
/// `Expect: 100-continue` (the body waits for the server's go-ahead).
async fn put_partly(
    s: &TestServer,
    headers: &[(&str, String)],
    content_length: usize,
    body: &[u8],
    expect: bool,
) -> TcpStream {
    let mut head = format!(
        "PUT /v1/keys HTTP/1.1\r\nhost: omrd\r\ncontent-type: application/octet-stream\r\n\
         content-length: {content_length}\r\n"
    );
    if expect {
        head.push_str("expect: 100-continue\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut tcp = TcpStream::connect(s.http).await.expect("connect");
    tcp.write_all(head.as_bytes()).await.expect("send the head");
    tcp.write_all(body).await.expect("send the body so far");
    tcp
}

/// The status and error code of the answer on `tcp`, read within `within`.
async fn answer(tcp: &mut TcpStream, within: Duration) -> (u16, String) {
    let mut bytes = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            let n = tcp.read(&mut buf).await.expect("read the answer");
            bytes.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&bytes);
            if n == 0 || (text.contains("\r\n\r\n") && text.trim_end().ends_with('}')) {
                break;
            }
        }
    };
    tokio::time::timeout(within, read)
        .await
        .expect("an answer in time");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text.split(' ').nth(1).expect("a status line");
    let body = text.split("\r\n\r\n").nth(1).expect("a body");
    let body: ErrorBody = serde_json::from_str(body).expect("an error body");
    (status.parse().unwrap(), body.code)
}

async fn key_count(db: &TestDb) -> u64 {
    db.store().key_count().await.unwrap()
}

async fn registrations(s: &TestServer, outcome: &str) -> f64 {
    let series = format!("omr_key_registrations_total{{outcome=\"{outcome}\"}}");
    s.client().metric(&series).await.unwrap_or(0.0)
}

async fn a_key_registered_over_http_is_stored_detected_and_deleted(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_detection).await;
    let api = s.client();
    let keys = insecure_keys(4);
    let key = keys.detection_key.to_bytes();
    let (status, body) = put(&s, &headers("now"), key.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let first: KeyRegistered = serde_json::from_value(body).expect("a KeyRegistered");
    assert_eq!((first.access_token.len(), first.start_index), (64, 0));
    assert_eq!(
        db.store().key_bytes(&first.key_id).await.unwrap(),
        Some(key.clone())
    );

    // A start index on the board, and detection from it: the message at 1 and the one after.
    api.post(&keys.clue_key, b"before").await;
    api.post(&keys.clue_key, b"at the start").await;
    let (status, body) = put(&s, &headers("1"), key.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let second: KeyRegistered = serde_json::from_value(body).unwrap();
    assert_eq!(second.start_index, 1);
    let after = api.post(&keys.clue_key, b"after").await;
    let recipient = Recipient {
        keys,
        key_id: second.key_id.clone(),
        token: second.access_token.clone(),
    };
    let digest = api.caught_up_digest(&recipient, None).await;
    assert_eq!(
        digest.messages,
        vec![(1, b"at the start".to_vec()), (after, b"after".to_vec())]
    );
    let status = api
        .http()
        .get(api.url(&format!("/v1/keys/{}/status", first.key_id)));
    let status = status
        .bearer_auth(&first.access_token)
        .send()
        .await
        .unwrap();
    let status: serde_json::Value = status.json().await.unwrap();
    assert_eq!(status["param_set"], INSECURE_TEST.name);
    assert_eq!(status["key_bytes"], key.len() as u64);
    assert_eq!(registrations(&s, "registered").await, 2.0);

    // Deletion wants the key's token.
    let delete = |token: Option<&str>| {
        let request = api
            .http()
            .delete(api.url(&format!("/v1/keys/{}", first.key_id)));
        let request = match token {
            Some(t) => request.bearer_auth(t),
            None => request,
        };
        async move { request.send().await.expect("DELETE").status() }
    };
    assert_eq!(delete(None).await, StatusCode::UNAUTHORIZED);
    assert_eq!(delete(Some(&"0".repeat(64))).await, StatusCode::FORBIDDEN);
    assert_eq!(key_count(db).await, 2);
    assert_eq!(
        delete(Some(&first.access_token)).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        delete(Some(&first.access_token)).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(key_count(db).await, 1);
    s.stop().await;
}

/// The light lane, the browser's: a 32.5 MB key in one body, then its messages detected.
async fn a_light_key_registers_over_http_as_a_browser_sends_it(db: &TestDb) {
    let s = crate::light::light_server(db).await;
    let api = s.client();
    let secret = SecretKey::generate(&OMR_LIGHT_V1);
    let light = vec![
        ("omr-param-set", OMR_LIGHT_V1.name.to_string()),
        ("omr-kbar", "1".to_string()),
        ("omr-start", "0".to_string()),
    ];
    let key = secret.detection_key().to_bytes();
    let (status, body) = put(&s, &light, key.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let registered: KeyRegistered = serde_json::from_value(body).unwrap();
    assert_eq!(
        db.store().key_bytes(&registered.key_id).await.unwrap(),
        Some(key)
    );
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let messages = (0..16u64)
        .map(|i| {
            let to = if i % 5 == 2 {
                secret.address()
            } else {
                stranger.clone()
            };
            light_message(&to, format!("message {i}").as_bytes())
        })
        .collect();
    assert_eq!(api.post_all(messages).await, 0);
    let recipient = LightRecipient {
        secret,
        key_id: registered.key_id,
        token: registered.access_token,
    };
    let (start, end, got) = api.light_caught_up(&recipient).await;
    assert_eq!((start, end, got), (0, 16, vec![2, 7, 12]));
    s.stop().await;
}

async fn refused_http_uploads_store_nothing(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| c.max_key_bytes = 8 * 1024 * 1024).await;
    let key = insecure_keys(4).detection_key.to_bytes();
    let other_kbar = insecure_keys(5).detection_key.to_bytes();
    let with = |changes: &[(&'static str, Option<&str>)]| {
        let mut h = headers("now");
        for (name, value) in changes {
            h.retain(|(n, _)| n != name);
            if let Some(v) = value {
                h.push((name, v.to_string()));
            }
        }
        h
    };
    let mut longer = key.clone();
    longer.extend_from_slice(&[0; 10]);
    let mut flipped = key.clone();
    flipped[3] = 1;
    type Case = (
        &'static str,
        Vec<(&'static str, String)>,
        Vec<u8>,
        u16,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        ("garbage", with(&[]), vec![0xAB; 1000], 400, "invalid_key"),
        ("longer than the key", with(&[]), longer, 400, "invalid_key"),
        ("flipped kind byte", with(&[]), flipped, 400, "invalid_key"),
        ("empty body", with(&[]), Vec::new(), 400, "malformed_upload"),
        (
            "key of another k̄",
            with(&[]),
            other_kbar,
            400,
            "invalid_key",
        ),
        (
            "k̄ differs",
            with(&[("omr-kbar", Some("5"))]),
            key.clone(),
            400,
            "invalid_key",
        ),
        (
            "k̄ not a number",
            with(&[("omr-kbar", Some("four"))]),
            key.clone(),
            400,
            "malformed_upload",
        ),
        (
            "k̄ 0",
            with(&[("omr-kbar", Some("0"))]),
            key.clone(),
            400,
            "malformed_upload",
        ),
        (
            "no k̄",
            with(&[("omr-kbar", None)]),
            key.clone(),
            400,
            "malformed_upload",
        ),
        (
            "no start",
            with(&[("omr-start", None)]),
            key.clone(),
            400,
            "malformed_upload",
        ),
        (
            "start neither now nor an index",
            with(&[("omr-start", Some("soon"))]),
            key.clone(),
            400,
            "malformed_upload",
        ),
        (
            "start past the head",
            with(&[("omr-start", Some("5"))]),
            key.clone(),
            409,
            "start_index_ahead",
        ),
        (
            "no parameter set",
            with(&[("omr-param-set", None)]),
            key.clone(),
            400,
            "malformed_upload",
        ),
        (
            "unknown parameter set",
            with(&[("omr-param-set", Some("omr-v0"))]),
            key.clone(),
            400,
            "param_set_mismatch",
        ),
        (
            "another parameter set",
            with(&[("omr-param-set", Some(OMR_V1.name))]),
            key.clone(),
            400,
            "param_set_mismatch",
        ),
    ];
    for (what, h, body, status, want) in cases {
        let (got, body) = put(&s, &h, body).await;
        assert_eq!(got.as_u16(), status, "{:?} {what}: {body}", db.backend());
        assert_eq!(error_code(&body), want, "{:?} {what}", db.backend());
    }

    // Not application/octet-stream.
    let (status, body) = put_as(&s, "application/json", &headers("now"), key.clone().into()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    assert_eq!(error_code(&body), "unsupported_media_type");
    // A chunked body, without Content-Length: the size must be declared.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        key.chunks(4096).map(|c| Ok(c.to_vec())).collect();
    let chunked = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
    let octets = "application/octet-stream";
    let (status, body) = put_as(&s, octets, &headers("now"), chunked).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_code(&body), "malformed_upload");
    assert!(
        body["message"].as_str().unwrap().contains("Content-Length"),
        "{body}"
    );

    // Larger than max_key_bytes: refused from the headers, no key byte sent.
    let mut tcp = put_partly(&s, &headers("now"), 9 * 1024 * 1024, &[], false).await;
    let refused = answer(&mut tcp, Duration::from_secs(30)).await;
    assert_eq!(refused, (413, "key_too_large".to_string()));
    // Truncated: half the key, then the client goes away.
    let mut tcp = put_partly(&s, &headers("now"), key.len(), &key[..key.len() / 2], false).await;
    tcp.shutdown().await.expect("end the upload early");
    drop(tcp);
    // Every refusal counted: 10 headers of the table, the media type, the chunked body, the
    // oversized and the truncated uploads; the 5 keys that do not decode as their header says.
    wait_until(
        Duration::from_secs(10),
        "the truncated upload is counted",
        || async { registrations(&s, "refused").await == 14.0 },
    )
    .await;
    assert_eq!(registrations(&s, "invalid").await, 5.0);

    assert_eq!(
        key_count(db).await,
        0,
        "{:?}: a refused upload stored something",
        db.backend()
    );
    assert_eq!(registrations(&s, "registered").await, 0.0);
    s.stop().await;
}

async fn http_registration_is_admitted_from_its_headers(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        c.registration = Registration::Invite;
        c.max_keys = 1;
    })
    .await;
    let key = insecure_keys(4).detection_key.to_bytes();
    let with_code = |code: &str| {
        let mut h = headers("now");
        h.push(("omr-invite-code", code.to_string()));
        h
    };
    // No code, an unknown one: refused from the headers. A client that asks to continue is
    // answered before it sends any key byte; one that sends the whole key reads the refusal.
    for (h, status, want) in [
        (headers("now"), 401, "invite_required"),
        (with_code(&new_code().0), 403, "invite_invalid"),
    ] {
        let mut tcp = put_partly(&s, &h, key.len(), &[], true).await;
        let refused = answer(&mut tcp, Duration::from_secs(30)).await;
        assert_eq!(refused, (status, want.to_string()), "{:?}", db.backend());
        let (got, body) = put(&s, &h, key.clone()).await;
        assert_eq!(
            (got.as_u16(), error_code(&body)),
            (status, want.to_string())
        );
    }
    // A code of two uses admits a key.
    let (code, hash) = new_code();
    let store = db.store();
    let two = std::num::NonZeroU32::new(2).unwrap();
    store.create_invite(&hash, two, None).await.unwrap();
    let (status, body) = put(&s, &with_code(&code), key.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(key_count(db).await, 1);
    // max_keys = 1: the next is refused from its headers, and takes no use of the code.
    let mut tcp = put_partly(&s, &with_code(&code), key.len(), &[], true).await;
    let refused = answer(&mut tcp, Duration::from_secs(30)).await;
    assert_eq!(refused, (507, "too_many_keys".to_string()));
    let (got, body) = put(&s, &with_code(&code), key.clone()).await;
    assert_eq!(
        (got.as_u16(), error_code(&body)),
        (507, "too_many_keys".to_string())
    );
    let left = store.invite(&hash).await.unwrap().unwrap();
    assert_eq!(left.uses_left, 1);
    assert_eq!(key_count(db).await, 1);
    s.stop().await;
}

async fn http_uploads_share_the_permits_and_the_deadline(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        c.max_concurrent_uploads = 1;
        c.key_upload_timeout_secs = 2;
    })
    .await;
    let key = insecure_keys(4).detection_key.to_bytes();
    // One upload that stalls halfway holds the only permit: the next, over HTTP or gRPC, is
    // refused at once as busy.
    let mut stalled = put_partly(&s, &headers("now"), key.len(), &key[..100], false).await;
    wait_until(
        Duration::from_secs(10),
        "the upload holds the permit",
        || {
            let s = &s;
            let key = key.clone();
            async move {
                let (status, answer) = put(s, &headers("now"), key).await;
                status == StatusCode::SERVICE_UNAVAILABLE && error_code(&answer) == "busy"
            }
        },
    )
    .await;
    let grpc = s
        .client()
        .try_register(
            insecure_keys(4),
            omr_proto::v1::registration_header::Start::FromNow(true),
            None,
        )
        .await
        .expect_err("the gRPC upload finds no permit either");
    assert_eq!(grpc.code(), tonic::Code::Unavailable, "{grpc:?}");
    // The stalled upload ends at the deadline with 408, and frees its permit.
    let timed_out = answer(&mut stalled, Duration::from_secs(30)).await;
    assert_eq!(timed_out, (408, "upload_timeout".to_string()));
    let (status, body) = put(&s, &headers("now"), key.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(registrations(&s, "timeout").await, 1.0);
    assert!(registrations(&s, "busy").await >= 2.0);
    assert_eq!(key_count(db).await, 1);
    s.stop().await;
}
