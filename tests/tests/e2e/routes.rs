//! The HTTP routes as operators and clients see them: latency is recorded per route, labelled
//! with the route's path without its parameters (every key's digests share one series, every
//! epoch's PIR hints another), anything unrouted as `other`; and the OpenAPI document lists the
//! routes the router serves, from the same declaration.

use omr_proto::v1::registration_header::Start;
use omr_test_support::{insecure_keys, TestServer};
use reqwest::StatusCode;
use serde_json::Value;

/// The count of `omr_http_request_seconds` for `route` and `status` in `metrics`.
fn requests(metrics: &str, route: &str, status: u16) -> Option<f64> {
    let sample =
        format!("omr_http_request_seconds_count{{route=\"{route}\",status=\"{status}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&sample)?.trim().parse().ok())
}

#[tokio::test]
async fn latency_is_labelled_by_route_without_its_parameters() {
    let s = TestServer::start_sqlite().await;
    let api = s.client();
    let a = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let b = api.register(insecure_keys(4), Start::FromNow(true)).await;
    for r in [&a, &b] {
        assert_eq!(api.digest(r, None).await.status(), StatusCode::OK);
        let status = (api
            .http()
            .get(api.url(&format!("/v1/keys/{}/status", r.key_id))))
        .bearer_auth(&r.token)
        .send()
        .await
        .expect("GET status");
        assert_eq!(status.status(), StatusCode::OK);
    }
    assert_eq!(api.get("/v1/params").await.status(), StatusCode::OK);
    assert_eq!(
        api.get("/v1/nothing/here").await.status(),
        StatusCode::NOT_FOUND
    );
    // An epoch that does not exist yet: still the hint route's series.
    assert_eq!(
        api.get("/v1/pir/7/hint").await.status(),
        StatusCode::CONFLICT
    );

    let metrics = api.metrics().await;
    assert_eq!(
        requests(&metrics, "/v1/digests", 200),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        requests(&metrics, "/v1/keys/status", 200),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        requests(&metrics, "/v1/params", 200),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        requests(&metrics, "/v1/pir/hint", 409),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(requests(&metrics, "other", 404), Some(1.0), "{metrics}");
    assert!(
        !metrics.contains(&a.key_id),
        "a key id became a label: {metrics}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_openapi_document_lists_every_api_route_the_router_serves() {
    let s = TestServer::start_sqlite().await;
    let api: Value = s.client().get("/openapi.json").await.json().await.unwrap();
    let mut paths: Vec<(String, String)> = api["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| {
            let methods = item.as_object().expect("a path item").keys();
            methods.map(move |m| (path.clone(), m.clone()))
        })
        .collect();
    paths.sort();
    let want = [
        ("/v1/admin/invites", "post"),
        ("/v1/digests/{key_id}", "get"),
        ("/v1/keys/{key_id}/status", "get"),
        ("/v1/messages", "get"),
        ("/v1/messages", "post"),
        ("/v1/messages/batch", "post"),
        ("/v1/params", "get"),
        ("/v1/pir/{epoch}/hint", "get"),
        ("/v1/pir/{epoch}/query", "post"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(p, m)| (p.to_string(), m.to_string()))
        .collect();
    assert_eq!(paths, want);
    // Schemas and the admin token's security scheme come with it.
    assert!(
        api["components"]["schemas"]["ErrorBody"].is_object(),
        "{api}"
    );
    assert_eq!(
        api["components"]["securitySchemes"]["admin_token"]["scheme"],
        "bearer"
    );
    s.stop().await;
}
