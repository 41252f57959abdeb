//! Waiting for a key's next detected message, and presence, end to end on each store: the HTTP
//! long-poll (`GET /v1/keys/{key}/status?wait_past=`) answers when a message for the key is
//! detected, or at its timeout with the same cursor; gRPC `WatchKeyStatus` streams a status
//! each time the cursor moves; both need the key's token; digest, status and wait calls record
//! the recipient as online in the store; an API-only process hears of another process's
//! detection.

use std::time::{Duration, Instant};

use omr_proto::v1::registration_header::Start;
use omr_proto::v1::{
    GetDigestRequest, GetKeyStatusRequest, GetKeyStatusResponse, WatchKeyStatusRequest,
};
use omr_server::Role;
use omr_test_support::{
    insecure_keys, quick_detection, test_each_backend, wait_for, wait_until, with_token, RawClient,
    Recipient, TestDb, TestServer,
};
use reqwest::StatusCode;
use serde_json::Value;

test_each_backend!(
    a_long_poll_answers_when_the_keys_next_message_is_detected,
    a_watch_streams_a_status_each_time_the_cursor_moves,
    waiting_needs_the_keys_token,
    digest_status_and_wait_calls_mark_the_recipient_online,
    an_api_only_process_answers_a_wait_when_another_process_detects,
);

/// Long enough for the insecure set's detection on a small, busy machine.
const DETECTED: Duration = Duration::from_secs(60);

/// `GET /v1/keys/{key}/status{query}` with `token`: the status and the JSON body.
async fn status_with(
    api: &RawClient,
    key_id: &str,
    token: &str,
    query: &str,
) -> (StatusCode, Value) {
    let r = reqwest::Client::new()
        .get(api.url(&format!("/v1/keys/{key_id}/status{query}")))
        .bearer_auth(token)
        .send()
        .await
        .expect("GET /v1/keys/{key}/status");
    let code = r.status();
    (code, r.json().await.expect("a JSON body"))
}

/// The recipient's status (`query` may ask to wait); requires 200.
async fn status(api: &RawClient, r: &Recipient, query: &str) -> Value {
    let (code, body) = status_with(api, &r.key_id, &r.token, query).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    body
}

async fn a_long_poll_answers_when_the_keys_next_message_is_detected(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_detection).await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let now = status(&api, &r, "").await;
    assert_eq!(
        (now["cursor"].as_u64(), now["lag"].as_u64()),
        (Some(0), Some(0))
    );
    // The same fields as gRPC GetKeyStatus, from the same function.
    let grpc = api
        .detector()
        .await
        .get_key_status(with_token(
            GetKeyStatusRequest {
                key_id: r.key_id.clone(),
            },
            &r.token,
        ))
        .await
        .unwrap()
        .into_inner();
    let from_grpc = serde_json::to_value(omr_api::http::KeyStatus::from(grpc)).unwrap();
    assert_eq!(from_grpc, now);

    // Nothing happens: the answer comes at the timeout, with the same cursor.
    let started = Instant::now();
    let timed_out = status(&api, &r, "?wait_past=0&timeout_secs=1").await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "answered before the timeout"
    );
    assert_eq!(timed_out, now);

    // A message for the key: the waiting call answers once it is detected.
    let waiting = wait_in_background(&api, &r, "?wait_past=0&timeout_secs=60");
    let index = api.post(&r.keys.clue_key, b"wake up").await;
    let started = Instant::now();
    let answer = waiting.await.unwrap();
    assert!(answer["cursor"].as_u64().unwrap() > index, "{answer}");
    assert!(started.elapsed() < DETECTED, "answered only at the timeout");
    let digest = api.caught_up_digest(&r, None).await;
    assert_eq!(digest.messages, vec![(index, b"wake up".to_vec())]);
    // A cursor already past: at once.
    let at_once = status(&api, &r, "?wait_past=0&timeout_secs=60").await;
    assert!(at_once["cursor"].as_u64().unwrap() > index);

    // Bad queries are refused, naming the problem.
    for query in [
        "?wait_past=soon",
        "?wait_past=1&timeout_secs=-1",
        "?wait_for=1",
    ] {
        let (code, body) = status_with(&api, &r.key_id, &r.token, query).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["code"], "malformed_query", "{query}");
    }

    // Shutting down answers a waiting call at once, with the status as it is.
    let waiting = wait_in_background(&api, &r, "?wait_past=1000&timeout_secs=60");
    wait_until(
        Duration::from_secs(10),
        "the long-poll is waiting",
        || async { api.metrics().await.contains("\nomr_key_waiters 1\n") },
    )
    .await;
    let started = Instant::now();
    s.stop().await;
    let answer = waiting.await.unwrap();
    assert!(answer["cursor"].as_u64().unwrap() > index, "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the wait held up shutdown"
    );
}

/// [`status`] on a task of its own: the answer (requires 200) once it comes.
fn wait_in_background(
    api: &RawClient,
    r: &Recipient,
    query: &'static str,
) -> tokio::task::JoinHandle<Value> {
    let (api, key_id, token) = (api.clone(), r.key_id.clone(), r.token.clone());
    tokio::spawn(async move {
        let (code, body) = status_with(&api, &key_id, &token, query).await;
        assert_eq!(code, StatusCode::OK, "{body}");
        body
    })
}

async fn a_watch_streams_a_status_each_time_the_cursor_moves(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_detection).await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let mut watch = open_watch(&api, &r.key_id, Some(&r.token))
        .await
        .expect("WatchKeyStatus");
    let first = next(&mut watch, "the status at once").await;
    assert_eq!(
        (first.key_id.as_str(), first.cursor),
        (r.key_id.as_str(), 0)
    );
    wait_until(
        Duration::from_secs(10),
        "the watch is counted as waiting",
        || async { api.metrics().await.contains("\nomr_key_waiters 1\n") },
    )
    .await;

    // Each status says the cursor moved; together they reach every message posted.
    let mut last = first.cursor;
    for payload in [&b"one"[..], b"two", b"three"] {
        let index = api.post(&r.keys.clue_key, payload).await;
        while last <= index {
            let s = next(&mut watch, "the cursor moves past a new message").await;
            assert!(s.cursor > last, "a status without progress: {s:?}");
            assert_eq!(s.lag, s.board_head - s.cursor);
            last = s.cursor;
        }
    }
    // The client goes away: the server stops waiting for it.
    drop(watch);
    wait_until(
        Duration::from_secs(10),
        "the watch is no longer counted",
        || async { api.metrics().await.contains("\nomr_key_waiters 0\n") },
    )
    .await;

    // At shutdown a watch ends with UNAVAILABLE (watch again elsewhere or later).
    let mut watch = open_watch(&api, &r.key_id, Some(&r.token))
        .await
        .expect("WatchKeyStatus");
    assert_eq!(next(&mut watch, "the status at once").await.cursor, last);
    let stopping = tokio::spawn(s.stop());
    let end = tokio::time::timeout(Duration::from_secs(20), watch.message())
        .await
        .expect("the watch ends at shutdown");
    assert_eq!(
        end.expect_err("an error, not a status").code(),
        tonic::Code::Unavailable
    );
    stopping.await.unwrap();
}

/// `WatchKeyStatus` on `key_id`, with `token` when given.
async fn open_watch(
    api: &RawClient,
    key_id: &str,
    token: Option<&str>,
) -> Result<tonic::Streaming<GetKeyStatusResponse>, tonic::Status> {
    let msg = WatchKeyStatusRequest {
        key_id: key_id.to_string(),
    };
    let request = match token {
        Some(t) => with_token(msg, t),
        None => tonic::Request::new(msg),
    };
    let response = api.detector().await.watch_key_status(request).await?;
    Ok(response.into_inner())
}

/// The next status on a watch; panics naming `what` after [`DETECTED`].
async fn next(
    watch: &mut tonic::Streaming<GetKeyStatusResponse>,
    what: &str,
) -> GetKeyStatusResponse {
    tokio::time::timeout(DETECTED, watch.message())
        .await
        .unwrap_or_else(|_| panic!("no status within {DETECTED:?}: {what}"))
        .expect("the stream has no error")
        .expect("the stream goes on")
}

async fn waiting_needs_the_keys_token(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_detection).await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let other = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let http = reqwest::Client::new();
    let url = api.url(&format!(
        "/v1/keys/{}/status?wait_past=0&timeout_secs=60",
        r.key_id
    ));
    let resp = http.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let (code, body) = status_with(&api, &r.key_id, &other.token, "?wait_past=0").await;
    assert_eq!(
        (code, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden"))
    );
    let (code, _) = status_with(&api, "no-such-key", &r.token, "?wait_past=0").await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    let code = |result: Result<_, tonic::Status>| result.map(|_| ()).expect_err("refused").code();
    assert_eq!(
        code(open_watch(&api, &r.key_id, None).await),
        tonic::Code::Unauthenticated
    );
    assert_eq!(
        code(open_watch(&api, &r.key_id, Some(&other.token)).await),
        tonic::Code::PermissionDenied
    );
    assert_eq!(
        code(open_watch(&api, "no-such-key", Some(&r.token)).await),
        tonic::Code::NotFound
    );
    // Refused calls mark nobody online.
    assert_eq!(db.store().last_seen(&r.key_id).await.unwrap(), None);
    s.stop().await;
}

async fn digest_status_and_wait_calls_mark_the_recipient_online(db: &TestDb) {
    // Presence expires after 2 s here, so a waiting call re-marks its key every second.
    let s = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.online_secs = 2;
    })
    .await;
    let api = s.client();
    let (a, b, c) = (
        api.register(insecure_keys(4), Start::FromNow(true)).await,
        api.register(insecure_keys(4), Start::FromNow(true)).await,
        api.register(insecure_keys(4), Start::FromNow(true)).await,
    );
    let store = db.store();
    let seen = |key_id: String| async move { db.store().last_seen(&key_id).await.unwrap() };
    assert_eq!(seen(a.key_id.clone()).await, None);

    // An HTTP digest request, a gRPC digest request, a status call.
    let before = omr_server::presence::now_ms();
    assert_eq!(api.digest(&a, None).await.status(), StatusCode::OK);
    let mut digest = api
        .detector()
        .await
        .get_digest(with_token(
            GetDigestRequest {
                key_id: b.key_id.clone(),
                from: None,
                to: None,
                etag: None,
            },
            &b.token,
        ))
        .await
        .unwrap()
        .into_inner();
    while digest.message().await.unwrap().is_some() {}
    status(&api, &c, "").await;
    for r in [&a, &b, &c] {
        let at = wait_for(Duration::from_secs(10), "the call is recorded", || {
            let key_id = r.key_id.clone();
            async move { seen(key_id).await }
        })
        .await;
        assert!((before..=omr_server::presence::now_ms()).contains(&at));
    }
    let keys = store.active_keys().await.unwrap();
    let now = omr_server::presence::now_ms();
    assert!(keys
        .iter()
        .all(|k| omr_server::presence::is_online(&s.config, k, now)));

    // A call that waits 4 s keeps its key marked while it waits.
    let started = omr_server::presence::now_ms();
    let answer = status(&api, &a, "?wait_past=0&timeout_secs=4").await;
    assert_eq!(answer["cursor"], 0);
    wait_until(
        Duration::from_secs(10),
        "the wait re-marked its key after its first 2 s",
        || async { seen(a.key_id.clone()).await.unwrap() >= started + 2_000 },
    )
    .await;
    s.stop().await;
}

async fn an_api_only_process_answers_a_wait_when_another_process_detects(db: &TestDb) {
    // A worker-only process detects; the API-only process learns of its commits from the store
    // (a notification on PostgreSQL, its poll on SQLite).
    let worker = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.role = Role::Worker;
    })
    .await;
    let front = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.role = Role::Api;
    })
    .await;
    let api = front.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let waiting = wait_in_background(&api, &r, "?wait_past=0&timeout_secs=60");
    let index = api.post(&r.keys.clue_key, b"from afar").await;
    let started = Instant::now();
    let answer = waiting.await.unwrap();
    assert!(answer["cursor"].as_u64().unwrap() > index, "{answer}");
    assert!(started.elapsed() < DETECTED, "answered only at the timeout");
    let digest = api.caught_up_digest(&r, None).await;
    assert_eq!(digest.messages, vec![(index, b"from afar".to_vec())]);
    front.stop().await;
    worker.stop().await;
}
