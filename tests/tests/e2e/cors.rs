//! Browsers on other origins (`cors_allowed_origins`): off by default, no CORS header on any
//! answer; with origins named, a preflight from one of them is answered with the methods and
//! headers the API takes (a key registration's too), every answer to it (a refusal too) says it may be read and exposes
//! the digest's headers, and another origin gets no CORS header.

use omr_proto::v1::registration_header::Start;
use omr_test_support::{insecure_keys, TestDb, TestServer};
use reqwest::{Method, RequestBuilder, Response, StatusCode};

const WALLET: &str = "https://wallet.example";

fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

/// `request` sent from a page of `origin`: its status and its `Access-Control-Allow-Origin`, and
/// the answer.
async fn from(origin: &str, request: RequestBuilder) -> (StatusCode, Option<String>, Response) {
    let r = (request.header("origin", origin).send().await).expect("a request from a page");
    let allowed = header(&r, "access-control-allow-origin").map(str::to_string);
    (r.status(), allowed, r)
}

/// A preflight for a `GET` of `url` with `headers` (none when empty).
fn preflight(api: &omr_test_support::RawClient, url: &str, headers: &str) -> RequestBuilder {
    let pre =
        (api.http().request(Method::OPTIONS, url)).header("access-control-request-method", "GET");
    match headers {
        "" => pre,
        h => pre.header("access-control-request-headers", h),
    }
}

#[tokio::test]
async fn cors_is_off_by_default() {
    let s = TestServer::start_sqlite().await;
    let api = s.client();
    let (status, allowed, _) = from(WALLET, api.http().get(api.url("/v1/params"))).await;
    assert_eq!((status, allowed), (StatusCode::OK, None));
    let (status, allowed, _) = from(WALLET, preflight(&api, &api.url("/v1/params"), "")).await;
    assert_eq!((status, allowed), (StatusCode::METHOD_NOT_ALLOWED, None));
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
    let wallet = Some(WALLET.to_string());

    let asked = preflight(&api, &digest, "authorization, if-none-match");
    let (status, allowed, pre) = from(WALLET, asked).await;
    assert_eq!((status, allowed), (StatusCode::OK, wallet.clone()));
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
    // A key registration's headers (`PUT /v1/keys`).
    let register = "content-type, omr-param-set, omr-kbar, omr-start, omr-invite-code";
    let asked = preflight(&api, &api.url("/v1/keys"), register);
    let (status, allowed, pre) = from(WALLET, asked).await;
    assert_eq!((status, allowed), (StatusCode::OK, wallet.clone()));
    let headers = header(&pre, "access-control-allow-headers").unwrap_or_default();
    for h in register.split(", ") {
        assert!(headers.contains(h), "{h} not allowed: {headers}");
    }

    let (status, allowed, got) = from(WALLET, api.http().get(&digest).bearer_auth(&r.token)).await;
    assert_eq!((status, allowed), (StatusCode::OK, wallet.clone()));
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
    let wrong = api.http().get(&digest).bearer_auth("not-the-token");
    let (status, allowed, _) = from(WALLET, wrong).await;
    assert_eq!((status, allowed), (StatusCode::FORBIDDEN, wallet.clone()));

    // Another origin: no CORS header, so its browser keeps the answer from its page.
    let params = || api.http().get(api.url("/v1/params"));
    let (status, allowed, _) = from("https://elsewhere.example", params()).await;
    assert_eq!((status, allowed), (StatusCode::OK, None));
    let (status, allowed, _) = from(WALLET, params()).await;
    assert_eq!((status, allowed), (StatusCode::OK, wallet));
    s.stop().await;
}
