//! Admission end to end on each store: per-client rate limits on posting (a burst past the
//! limit gets 429 with `Retry-After` and stores nothing; another client, named by a trusted
//! proxy's `X-Forwarded-For`, has a bucket of its own; an untrusted peer's header is ignored),
//! on board reads and on digests (HTTP and gRPC); load shedding past `max_concurrent_requests`
//! while the probes answer; the whole-request timeout; a slow key upload outlasting the gRPC
//! request timeout.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use omr_core::ClueKey;
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::GetDigestRequest;
use omr_test_support::{
    insecure_keys, test_each_backend, wait_until, with_token, TestDb, TestServer,
};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

test_each_backend!(
    a_burst_past_the_post_limit_is_refused_and_stores_nothing,
    board_reads_and_digests_have_limits_of_their_own,
    requests_past_the_concurrency_bound_are_shed_while_probes_answer,
    a_request_that_outlasts_the_request_timeout_is_answered_408,
    a_slow_key_upload_outlasts_the_grpc_request_timeout,
);

/// One token every 100 s: nothing refills while a test runs.
const SLOW_RATE: f64 = 0.01;

/// A client whose connections come from the loopback address `from`.
fn client_from(from: Ipv4Addr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::V4(from))
        .build()
        .expect("an HTTP client")
}

fn message(to: &ClueKey, n: usize) -> Value {
    json!({
        "clue": B64.encode(to.make_clue().to_bytes()),
        "payload": B64.encode(format!("message {n}")),
    })
}

/// POST `body` to `path` from `client`, with `X-Forwarded-For: forwarded` when given.
async fn post(
    client: &reqwest::Client,
    s: &TestServer,
    path: &str,
    body: &Value,
    forwarded: Option<&str>,
) -> reqwest::Response {
    let mut req = client.post(s.url(path)).json(body);
    if let Some(f) = forwarded {
        req = req.header("x-forwarded-for", f);
    }
    req.send().await.expect("POST")
}

/// A 429 `rate_limited` with a whole number of seconds in `Retry-After`.
async fn assert_rate_limited(resp: reqwest::Response, what: &str) -> u64 {
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS, "{what}");
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{what}: Retry-After is not whole seconds"));
    assert!(retry_after >= 1, "{what}: Retry-After {retry_after}");
    let body: Value = resp.json().await.expect("a JSON error body");
    assert_eq!(body["code"], "rate_limited", "{what}: {body}");
    assert!(
        body["message"].as_str().unwrap().contains("rate_limit"),
        "{what}: {body}"
    );
    retry_after
}

async fn board_head(s: &TestServer) -> u64 {
    s.client().board(0, 1).await["head"].as_u64().unwrap()
}

async fn a_burst_past_the_post_limit_is_refused_and_stores_nothing(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        c.rate_limit_per_second = SLOW_RATE;
        c.rate_limit_burst = 5;
        c.trusted_proxies = vec!["127.0.0.1".into()];
    })
    .await;
    let keys = insecure_keys(4);
    let to = &keys.clue_key;
    let local = client_from(Ipv4Addr::LOCALHOST);

    // 127.0.0.1 posts 8 messages: the burst of 5 is accepted, the rest refused.
    let mut accepted = 0;
    for n in 0..8 {
        let resp = post(&local, &s, "/v1/messages", &message(to, n), None).await;
        if n < 5 {
            assert_eq!(resp.status(), StatusCode::CREATED, "message {n}");
            accepted += 1;
        } else {
            let wait = assert_rate_limited(resp, &format!("message {n}")).await;
            assert!(wait > 60, "one token per 100 s, Retry-After {wait}");
        }
    }
    // A batch costs its messages: refused as a whole, nothing stored.
    let batch = json!({ "messages": [message(to, 10), message(to, 11)] });
    let resp = post(&local, &s, "/v1/messages/batch", &batch, None).await;
    assert_rate_limited(resp, "a batch from an exhausted client").await;
    assert_eq!(
        board_head(&s).await,
        accepted,
        "the board grew by what was accepted"
    );

    // Another client behind the trusted proxy (127.0.0.1) has a bucket of its own: its batch
    // of 3 and 2 messages pass, a batch larger than the whole burst never could.
    let other = Some("203.0.113.5, 198.51.100.7");
    let batch3 = json!({ "messages": [message(to, 20), message(to, 21), message(to, 22)] });
    let resp = post(&local, &s, "/v1/messages/batch", &batch3, other).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    for n in 0..2 {
        let resp = post(&local, &s, "/v1/messages", &message(to, 30 + n), other).await;
        assert_eq!(resp.status(), StatusCode::CREATED, "forwarded message {n}");
    }
    accepted += 5;
    let resp = post(&local, &s, "/v1/messages", &message(to, 40), other).await;
    assert_rate_limited(resp, "the forwarded client's sixth message").await;
    let batch6 = json!({ "messages": (0..6).map(|n| message(to, 50 + n)).collect::<Vec<_>>() });
    let resp = post(
        &local,
        &s,
        "/v1/messages/batch",
        &batch6,
        Some("198.51.100.8"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "batch_too_large", "{body}");
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("rate_limit_burst"));

    // 127.0.0.2 is not a trusted proxy: its X-Forwarded-For is ignored, so naming a fresh
    // address does not give it a fresh bucket.
    let untrusted = client_from(Ipv4Addr::new(127, 0, 0, 2));
    for n in 0..5 {
        let fresh = format!("192.0.2.{n}");
        let resp = post(
            &untrusted,
            &s,
            "/v1/messages",
            &message(to, 60 + n),
            Some(&fresh),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::CREATED, "untrusted message {n}");
    }
    accepted += 5;
    let resp = post(
        &untrusted,
        &s,
        "/v1/messages",
        &message(to, 70),
        Some("192.0.2.99"),
    )
    .await;
    assert_rate_limited(resp, "an untrusted peer naming a fresh address").await;

    assert_eq!(
        board_head(&s).await,
        accepted,
        "the board grew by what was accepted"
    );
    let api = s.client();
    let refused = api
        .metric("omr_rate_limited_total{limit=\"messages\",route=\"/v1/messages\"}")
        .await;
    assert_eq!(refused, Some(5.0));
    let refused = api
        .metric("omr_messages_rejected_total{code=\"rate_limited\"}")
        .await;
    assert_eq!(refused, Some(6.0), "5 single posts and 1 batch");
    s.stop().await;
}

async fn board_reads_and_digests_have_limits_of_their_own(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        c.read_rate_limit_per_second = SLOW_RATE;
        c.read_rate_limit_burst = 2;
        c.digest_rate_limit_per_second = SLOW_RATE;
        c.digest_rate_limit_burst = 2;
    })
    .await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    // Posting is not limited here, and does not count against reads.
    api.post(&r.keys.clue_key, b"one").await;

    // Refused reads (a malformed query) take no token.
    for _ in 0..3 {
        let malformed = api.get("/v1/messages?limit=0").await.status();
        assert_eq!(malformed, StatusCode::BAD_REQUEST);
    }
    for _ in 0..2 {
        assert_eq!(api.get("/v1/messages").await.status(), StatusCode::OK);
    }
    assert_rate_limited(api.get("/v1/messages").await, "the third board read").await;

    // Refused digest requests (wrong token, unknown key) take no token from the bucket.
    let refused = |key_id: String, token: String| {
        let url = api.url(&format!("/v1/digests/{key_id}"));
        let request = api.http().get(url).bearer_auth(token);
        async move { request.send().await.expect("GET /v1/digests").status() }
    };
    for _ in 0..3 {
        let wrong = refused(r.key_id.clone(), "0".repeat(64)).await;
        assert_eq!(wrong, StatusCode::FORBIDDEN);
        let unknown = refused("no-such-key".into(), r.token.clone()).await;
        assert_eq!(unknown, StatusCode::NOT_FOUND);
    }
    // Digests: one over HTTP, one over gRPC (the same bucket), then both refused.
    let first = api.digest(&r, None).await.status();
    assert_ne!(first, StatusCode::TOO_MANY_REQUESTS);
    let mut grpc = api.detector().await;
    let request = || {
        with_token(
            GetDigestRequest {
                key_id: r.key_id.clone(),
                ..Default::default()
            },
            &r.token,
        )
    };
    if let Err(e) = grpc.get_digest(request()).await {
        assert_ne!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    }
    assert_rate_limited(api.digest(&r, None).await, "the third digest").await;
    let refused = grpc.get_digest(request()).await.expect_err("refused");
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("digest_rate_limit"),
        "{refused:?}"
    );
    let meta = |key: &str| {
        refused
            .metadata()
            .get(key)
            .map(|v| v.to_str().unwrap().to_string())
    };
    assert_eq!(meta("omr-error-code").as_deref(), Some("rate_limited"));
    let wait: u64 = meta("retry-after").expect("retry-after").parse().unwrap();
    assert!(wait >= 1, "{refused:?}");
    let limited = |route: &str, limit: &str| {
        format!("omr_rate_limited_total{{limit=\"{limit}\",route=\"{route}\"}}")
    };
    assert_eq!(
        api.metric(&limited("/v1/messages", "board_reads")).await,
        Some(1.0)
    );
    assert_eq!(
        api.metric(&limited("/v1/digests", "digests")).await,
        Some(1.0)
    );
    assert_eq!(
        api.metric(&limited("GetDigest", "digests")).await,
        Some(1.0)
    );
    s.stop().await;
}

async fn requests_past_the_concurrency_bound_are_shed_while_probes_answer(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| c.max_concurrent_requests = 1).await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    // A long-poll for a message nobody posts holds the one request slot while it waits (5 s).
    let poll = {
        let url = s.url(&format!(
            "/v1/keys/{}/status?wait_past=0&timeout_secs=5",
            r.key_id
        ));
        let token = r.token.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .map(|r| r.status())
        })
    };
    wait_until(Duration::from_secs(10), "the long-poll waits", || async {
        api.metric("omr_key_waiters").await == Some(1.0)
    })
    .await;
    let resp = reqwest::Client::new()
        .post(s.url("/v1/messages"))
        .json(&message(&r.keys.clue_key, 0))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "overloaded", "{body}");
    // Probes and metrics are outside the bound.
    assert_eq!(api.get("/readyz").await.status(), StatusCode::OK);
    assert_eq!(api.get("/livez").await.status(), StatusCode::OK);
    // Every API route shares the bound: a board read is shed too.
    let read = api.get("/v1/messages").await;
    assert_eq!(read.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        api.metric("omr_requests_shed_total{reason=\"overloaded\"}")
            .await,
        Some(2.0)
    );
    // The long-poll ends at its timeout and frees the slot.
    assert_eq!(poll.await.unwrap().unwrap(), StatusCode::OK);
    api.post(&r.keys.clue_key, b"after").await;
    assert_eq!(board_head(&s).await, 1, "the shed post stored nothing");
    s.stop().await;
}

async fn a_request_that_outlasts_the_request_timeout_is_answered_408(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| c.request_timeout_secs = 1).await;
    // Headers promising 100 bytes of body, then only 10 of them.
    let mut conn = tokio::net::TcpStream::connect(s.http).await.unwrap();
    conn.write_all(
        b"POST /v1/messages HTTP/1.1\r\nhost: omrd\r\ncontent-type: application/json\r\n\
          content-length: 100\r\n\r\n{\"clue\": \"",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // The answer comes in one piece; stop reading once its body is there.
    while !answer.ends_with(b"}") {
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        assert!(n > 0, "closed without an answer");
        answer.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"code\":\"request_timeout\""), "{text}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(board_head(&s).await, 0);
    s.stop().await;
}

async fn a_slow_key_upload_outlasts_the_grpc_request_timeout(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| c.grpc_request_timeout_secs = 1).await;
    let keys = insecure_keys(4);
    let requests = omr_proto::registration_requests(
        keys.secret.params().name,
        keys.secret.kbar() as u32,
        Start::FromNow(true),
        &keys.detection_key.to_bytes(),
    );
    // Spread the upload over ≈ 2.5 s: more than twice the request timeout.
    let pause = Duration::from_millis(2500 / requests.len().max(1) as u64);
    let slow = futures::StreamExt::then(tokio_stream::iter(requests), move |r| async move {
        tokio::time::sleep(pause).await;
        r
    });
    let started = Instant::now();
    let registered = s
        .client()
        .detector()
        .await
        .register_detection_key(slow)
        .await
        .expect("a slow upload registers")
        .into_inner();
    assert!(started.elapsed() > Duration::from_secs(2));
    assert!(!registered.key_id.is_empty());
    s.stop().await;
}
