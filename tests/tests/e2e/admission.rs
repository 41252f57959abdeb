//! Key admission end to end, on each store: with `registration = "invite"` a key is registered
//! only with a code that admits it now, decided from the registration's header; a code admits
//! exactly its uses, and a refused or failed registration takes none; an expired code is
//! refused; the admin API that mints codes wants the admin token (401 without, 403 with a wrong
//! one, 404 when none is configured).

use omr_api::http::{CreatedInvite, ErrorBody};
use omr_proto::v1::registration_header::Start;
use omr_server::service::invites::{code_hash, new_code};
use omr_server::{AdminToken, Registration};
use omr_test_support::{insecure_keys, test_each_backend, TestDb, TestServer};
use reqwest::StatusCode;
use serde_json::json;
use tokio_stream::StreamExt as _;
use tonic::Code;

const ADMIN_TOKEN: &str = "test-admin-token-0123456789abcdef";

test_each_backend!(
    invite_mode_registers_only_with_a_valid_code,
    a_code_admits_its_uses_and_refused_registrations_take_none,
    an_expired_code_is_refused,
    the_admin_api_wants_the_admin_token,
);

/// omrd on `db` with `registration = "invite"` and the admin API on.
async fn invite_server(db: &TestDb, max_keys: u64) -> TestServer {
    TestServer::start_configured(db, |c| {
        c.registration = Registration::Invite;
        c.admin_token = Some(AdminToken::new(ADMIN_TOKEN));
        c.max_keys = max_keys;
    })
    .await
}

/// `POST /v1/admin/invites` with `body` and, when given, `Authorization: Bearer <token>`.
async fn post_invite(
    s: &TestServer,
    token: Option<&str>,
    body: serde_json::Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(s.url("/v1/admin/invites"))
        .json(&body);
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    request.send().await.expect("POST /v1/admin/invites")
}

/// Mint a code through the admin API.
async fn mint(s: &TestServer, body: serde_json::Value) -> CreatedInvite {
    let response = post_invite(s, Some(ADMIN_TOKEN), body).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    response.json().await.expect("a CreatedInvite")
}

/// Register fresh keys with `code`: the server's answer.
async fn register(s: &TestServer, code: Option<&str>) -> Result<String, tonic::Status> {
    s.client()
        .try_register(insecure_keys(4), Start::FromNow(true), code)
        .await
        .map(|r| r.key_id)
}

async fn keys(db: &TestDb) -> u64 {
    db.store().key_count().await.unwrap()
}

async fn uses_left(db: &TestDb, code: &str) -> u32 {
    let invite = db.store().invite(&code_hash(code)).await.unwrap();
    invite.expect("the invite is stored").uses_left
}

async fn invite_mode_registers_only_with_a_valid_code(db: &TestDb) {
    let s = invite_server(db, 100).await;
    // Clients can tell before uploading that they need a code (HTTP and gRPC).
    let params: serde_json::Value = s.client().get("/v1/params").await.json().await.unwrap();
    assert_eq!(params["invite_required"], true, "{params}");
    assert!(s.client().grpc_params().await.invite_required);

    // No code: refused from the header alone, before any key byte (the stream never sends one).
    let keys_set = insecure_keys(4);
    let header_only = omr_proto::registration_stream(
        keys_set.secret.params().name,
        4,
        Start::FromNow(true),
        None,
        keys_set.detection_key.to_bytes().into(),
    )
    .take(1);
    let pending = tokio_stream::iter(header_only).chain(futures::stream::pending());
    let mut detector = s.client().detector().await;
    let refused = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        detector.register_detection_key(pending),
    )
    .await
    .expect("refused without waiting for key bytes")
    .expect_err("no invite code");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(
        refused.message().contains("omr register --invite"),
        "{refused:?}"
    );
    assert_eq!(keys(db).await, 0, "nothing stored");

    // A code from the admin API works once.
    let invite = mint(&s, json!({})).await;
    assert_eq!((invite.uses, invite.expires_at.as_deref()), (1, None));
    let key_id = register(&s, Some(&invite.code)).await.expect("admitted");
    assert_eq!(keys(db).await, 1);
    assert!(db.store().key(&key_id).await.unwrap().is_some());

    // Used again: refused, saying why.
    let again = register(&s, Some(&invite.code)).await.unwrap_err();
    assert_eq!(again.code(), Code::PermissionDenied, "{again:?}");
    assert!(
        again.message().contains("used up (all 1 of its uses"),
        "{again:?}"
    );
    // Typed in upper case it is the same code, and as used up.
    let upper = register(&s, Some(&invite.code.to_uppercase()))
        .await
        .unwrap_err();
    assert!(upper.message().contains("used up"), "{upper:?}");

    // Unknown and malformed codes.
    let (unknown, _) = new_code();
    let status = register(&s, Some(&unknown)).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(status.message().contains("unknown"), "{status:?}");
    let status = register(&s, Some("not-a-code")).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(
        status.message().contains("32 hexadecimal digits"),
        "{status:?}"
    );
    assert_eq!(keys(db).await, 1, "refusals stored nothing");

    let metrics = s.client().metrics().await;
    assert!(
        metrics.contains(r#"omr_key_registrations_total{outcome="refused"} 5"#),
        "{metrics}"
    );

    // A server with open registration (the default) ignores codes and wants none.
    let s = s
        .restart_configured(|c| c.registration = Registration::Open)
        .await;
    register(&s, None).await.expect("open registration");
    register(&s, Some(&unknown))
        .await
        .expect("a code is ignored");
    assert_eq!(keys(db).await, 3);
    s.stop().await;
}

async fn a_code_admits_its_uses_and_refused_registrations_take_none(db: &TestDb) {
    let s = invite_server(db, 4).await;
    let invite = mint(&s, json!({"uses": 3})).await;
    assert_eq!(invite.uses, 3);
    for left in [2, 1, 0] {
        register(&s, Some(&invite.code))
            .await
            .expect("a use is left");
        assert_eq!(uses_left(db, &invite.code).await, left);
    }
    let status = register(&s, Some(&invite.code)).await.unwrap_err();
    assert!(
        status.message().contains("used up (all 3 of its uses"),
        "{status:?}"
    );
    assert_eq!(keys(db).await, 3);

    // A second code: an upload whose key does not decode is refused after the header passed,
    // and takes no use.
    let second = mint(&s, json!({"uses": 1})).await;
    let requests = omr_proto::registration_stream(
        omr_core::INSECURE_TEST.name,
        4,
        Start::FromNow(true),
        Some(&second.code),
        vec![0xABu8; 1000].into(),
    );
    let bad = s
        .client()
        .detector()
        .await
        .register_detection_key(tokio_stream::iter(requests))
        .await
        .expect_err("not a key");
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
    assert_eq!(uses_left(db, &second.code).await, 1);

    // Refused for max_keys (4): no use taken either.
    let fourth = register(&s, Some(&second.code))
        .await
        .expect("the fourth key");
    let third = mint(&s, json!({"uses": 2})).await;
    let full = register(&s, Some(&third.code)).await.unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted, "{full:?}");
    assert_eq!(uses_left(db, &third.code).await, 2);
    assert_eq!(keys(db).await, 4);

    // Room again after a deletion: the code still has both uses.
    assert!(db.store().delete_key(&fourth).await.unwrap());
    register(&s, Some(&third.code)).await.expect("room again");
    assert_eq!(uses_left(db, &third.code).await, 1);
    s.stop().await;
}

async fn an_expired_code_is_refused(db: &TestDb) {
    let s = invite_server(db, 100).await;
    // A code that expired a minute ago, stored as omrd stores minted ones.
    let (code, hash) = new_code();
    let expired_ms = now_ms() - 60_000;
    let five = std::num::NonZeroU32::new(5).unwrap();
    db.store()
        .create_invite(&hash, five, Some(expired_ms))
        .await
        .unwrap();
    let status = register(&s, Some(&code)).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("expired at"), "{status:?}");
    assert_eq!(uses_left(db, &code).await, 5);
    assert_eq!(keys(db).await, 0);

    // A code that expires in an hour works now, and says when it expires.
    let invite = mint(&s, json!({"expires_secs": 3600})).await;
    let expires_at = invite.expires_at.as_deref().expect("an expiry");
    assert!(expires_at.ends_with('Z'), "{expires_at}");
    register(&s, Some(&invite.code))
        .await
        .expect("not expired yet");
    let stored = db.store().invite(&code_hash(&invite.code)).await.unwrap();
    let ms = stored.unwrap().expires_ms.expect("stored with its expiry");
    let in_an_hour = now_ms() + 3_600_000;
    assert!((in_an_hour - 60_000..=in_an_hour).contains(&ms), "{ms}");
    s.stop().await;
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn the_admin_api_wants_the_admin_token(db: &TestDb) {
    let s = invite_server(db, 100).await;
    let error = |r: reqwest::Response| async move {
        let status = r.status();
        (
            status,
            r.json::<ErrorBody>().await.expect("a JSON error body"),
        )
    };
    let (status, body) = error(post_invite(&s, None, json!({})).await).await;
    assert_eq!(
        (status, body.code.as_str()),
        (StatusCode::UNAUTHORIZED, "admin_unauthorized")
    );
    let (status, body) = error(post_invite(&s, Some("not-the-token"), json!({})).await).await;
    assert_eq!(
        (status, body.code.as_str()),
        (StatusCode::FORBIDDEN, "admin_forbidden")
    );
    // A recipient's access token is not the admin token either.
    let invite = mint(&s, json!({})).await;
    let r = s
        .client()
        .try_register(insecure_keys(4), Start::FromNow(true), Some(&invite.code))
        .await
        .unwrap();
    let (status, _) = error(post_invite(&s, Some(&r.token), json!({})).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Bad requests with the right token: 400, nothing minted.
    for body in [
        json!({"uses": 0}),
        json!({"expires_secs": 0}),
        json!({"usse": 2}),
    ] {
        let (status, err) = error(post_invite(&s, Some(ADMIN_TOKEN), body.clone()).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err:?}");
        assert_eq!(err.code, "malformed_json", "{body}: {err:?}");
    }
    let api: serde_json::Value = reqwest::get(s.url("/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        api["paths"]["/v1/admin/invites"]["post"].is_object(),
        "{api}"
    );

    // Without a configured token the admin API is off: 404, whatever is presented.
    let s = s.restart_configured(|c| c.admin_token = None).await;
    for token in [None, Some(ADMIN_TOKEN)] {
        let (status, body) = error(post_invite(&s, token, json!({})).await).await;
        assert_eq!(
            (status, body.code.as_str()),
            (StatusCode::NOT_FOUND, "admin_disabled")
        );
        assert!(body.message.contains("admin_token_file"), "{body:?}");
    }
    s.stop().await;
}
