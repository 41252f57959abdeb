//! Browsers on other origins (`cors_allowed_origins`): off by default, no CORS header on any
//! answer; with origins named, a preflight from one of them is answered with the methods and
//! headers the API takes, every answer to it (a refusal too) says it may be read and exposes
//! the digest's headers, and another origin gets no CORS header.

use omr_proto::v1::registration_header::Start;
use omr_test_support::{insecure_keys, TestDb, TestServer};
use reqwest::{Method, StatusCode};

const WALLET: &str = "https://wallet.example";

fn header<'a>(r: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

/// `GET /v1/params` from a page of `origin`: its status and its `Access-Control-Allow-Origin`.
async fn params_from(
    api: &omr_test_support::RawClient,
    origin: &str,
) -> (StatusCode, Option<String>) {
    let r = (api.http().get(api.url("/v1/params")))
        .header("origin", origin)
        .send()
        .await
        .expect("GET /v1/params");
    let allowed = header(&r, "access-control-allow-origin").map(str::to_string);
    (r.status(), allowed)
}

#[tokio::test]
async fn cors_is_off_by_default() {
    let s = TestServer::start_sqlite().await;
    let api = s.client();
    assert_eq!(params_from(&api, WALLET).await, (StatusCode::OK, None));
    let pre = (api.http().request(Method::OPTIONS, api.url("/v1/params")))
        .header("origin", WALLET)
        .header("access-control-request-method", "GET")
        .send()
        .await
        .expect("OPTIONS /v1/params");
    assert_eq!(pre.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(header(&pre, "access-control-allow-origin"), None);
    s.stop().await;
}

#[tokio::test]
async fn named_origins_may_call_the_api_and_read_the_digest_headers() {
    let db = TestDb::sqlite().await;
    let s = TestServer::start_configured(&db, |c| {
        c.cors_allowed_origins = vec![WALLET.into(), "http://127.0.0.1:8000".into()];
    })
    .await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let digest = api.url(&format!("/v1/digests/{}", r.key_id));

    let pre = (api.http().request(Method::OPTIONS, &digest))
        .header("origin", WALLET)
        .header("access-control-request-method", "GET")
        .header(
            "access-control-request-headers",
            "authorization, if-none-match",
        )
        .send()
        .await
        .expect("preflight");
    assert_eq!(pre.status(), StatusCode::OK);
    assert_eq!(header(&pre, "access-control-allow-origin"), Some(WALLET));
    let methods = header(&pre, "access-control-allow-methods").unwrap_or_default();
    assert!(
        methods.contains("GET") && methods.contains("PUT"),
        "{methods}"
    );
    let headers = header(&pre, "access-control-allow-headers").unwrap_or_default();
    assert!(
        headers.contains("authorization") && headers.contains("if-none-match"),
        "{headers}"
    );
    assert_eq!(header(&pre, "access-control-max-age"), Some("600"));

    let got = (api.http().get(&digest))
        .header("origin", WALLET)
        .bearer_auth(&r.token)
        .send()
        .await
        .expect("GET digest");
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(header(&got, "access-control-allow-origin"), Some(WALLET));
    let exposed = header(&got, "access-control-expose-headers").unwrap_or_default();
    for h in [
        "omr-range-start",
        "omr-detected-up-to",
        "etag",
        "retry-after",
    ] {
        assert!(exposed.contains(h), "{h} not exposed: {exposed}");
    }

    // A refusal carries the header too, so that the page can read its error.
    let refused = (api.http().get(&digest))
        .header("origin", WALLET)
        .bearer_auth("not-the-token")
        .send()
        .await
        .expect("GET digest with a wrong token");
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        header(&refused, "access-control-allow-origin"),
        Some(WALLET)
    );

    // Another origin: no CORS header, so its browser keeps the answer from its page.
    let other = params_from(&api, "https://elsewhere.example").await;
    assert_eq!(other, (StatusCode::OK, None));
    let allowed = params_from(&api, WALLET).await;
    assert_eq!(allowed, (StatusCode::OK, Some(WALLET.to_string())));
    s.stop().await;
}
