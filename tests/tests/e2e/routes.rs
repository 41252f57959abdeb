//! The HTTP routes as operators and clients see them: latency is recorded per route, labelled
//! with the route's path without its parameters (every key's digests share one series, every
//! epoch's PIR hints another), anything unrouted as `other`; and the OpenAPI document lists the
//! routes the router serves, from the same declaration.

use omr_proto::v1::registration_header::Start;
use omr_test_support::{insecure_keys, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

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
    // An epoch that has not begun: still the hint route's series.
    assert_eq!(
        api.get("/v1/pir/7/hint").await.status(),
        StatusCode::NOT_FOUND
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
        requests(&metrics, "/v1/pir/hint", 404),
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
        ("/v1/fetch", "get"),
        ("/v1/fetch/open", "get"),
        ("/v1/keys", "put"),
        ("/v1/keys/{key_id}", "delete"),
        ("/v1/keys/{key_id}/fetch", "post"),
        ("/v1/keys/{key_id}/fetch-key", "put"),
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
    // Every operation has an id of its own (OpenAPI requires it; generators name methods so).
    let ids: Vec<&str> = (api["paths"].as_object().unwrap().values())
        .flat_map(|item| item.as_object().unwrap().values())
        .map(|op| op["operationId"].as_str().expect("an operationId"))
        .collect();
    let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "repeated operation ids: {ids:?}");
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

#[tokio::test]
async fn unrouted_paths_and_wrong_methods_answer_in_the_one_error_shape() {
    let s = TestServer::start_sqlite().await;
    let api = s.client();
    let r = api.get("/v1/nothing/here").await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "unknown_route", "{body}");
    // An unknown query parameter is refused alike on every route.
    let r = api.get("/v1/messages?form=3").await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "malformed_query", "{body}");
    let r = (api.http().delete(api.url("/v1/messages")).send().await).unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "method_not_allowed", "{body}");
    s.stop().await;
}

#[tokio::test]
async fn query_parameters_are_documented_as_query_parameters_with_their_bounds() {
    let s = TestServer::start_sqlite().await;
    let api: Value = s.client().get("/openapi.json").await.json().await.unwrap();
    let params = |path: &str| -> Vec<Value> {
        api["paths"][path]["get"]["parameters"]
            .as_array()
            .expect("parameters")
            .clone()
    };
    let named = |path: &str, name: &str| {
        params(path)
            .into_iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{path} documents no {name}"))
    };
    for (path, name) in [
        ("/v1/messages", "from"),
        ("/v1/messages", "limit"),
        ("/v1/digests/{key_id}", "from"),
        ("/v1/digests/{key_id}", "to"),
        ("/v1/keys/{key_id}/status", "wait_past"),
        ("/v1/keys/{key_id}/status", "timeout_secs"),
    ] {
        assert_eq!(named(path, name)["in"], "query", "{path} {name}");
    }
    assert_eq!(named("/v1/digests/{key_id}", "key_id")["in"], "path");
    let limit = &named("/v1/messages", "limit")["schema"];
    assert_eq!(
        (&limit["minimum"], &limit["maximum"]),
        (&json!(1), &json!(1000))
    );
    s.stop().await;
}
