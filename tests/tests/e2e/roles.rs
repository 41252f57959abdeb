//! Process roles end to end on each store: an API-only process serves the API and detects
//! nothing; a worker-only process on the same store detects, serves only probes and metrics,
//! and binds no gRPC port.

use omr_proto::v1::registration_header::Start;
use omr_server::Role;
use omr_test_support::{
    insecure_keys, quick_detection, test_each_backend, wait_until, TestDb, TestServer,
};
use reqwest::StatusCode;
use std::time::Duration;

test_each_backend!(api_only_and_worker_only_roles_do_only_their_part);

async fn api_only_and_worker_only_roles_do_only_their_part(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.role = Role::Api;
    })
    .await;
    // A control: a process with both roles, configured alike, on a store of its own. Once it
    // has detected a message posted after ours, a worker in the API-only process would have
    // detected ours too.
    let control_db = TestDb::sqlite().await;
    let control = TestServer::start_configured(&control_db, quick_detection).await;
    let (api, control_api) = (s.client(), control.client());
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let c = control_api
        .register(insecure_keys(4), Start::FromNow(true))
        .await;
    api.post(&r.keys.clue_key, b"waits for a worker").await;
    control_api.post(&c.keys.clue_key, b"detected").await;
    control_api.caught_up_digest(&c, None).await;
    let resp = api.digest(&r, None).await;
    assert_eq!(
        resp.headers()["omr-lag"],
        "1",
        "an API-only process detected"
    );
    let metrics = api.metrics().await;
    assert!(
        !metrics.contains("omr_key_lag{"),
        "an API-only process runs a worker: {metrics}"
    );
    control.stop().await;
    control_db.cleanup().await;

    // The same store served by a worker-only process: it detects; its HTTP has only probes.
    let w = s.restart_configured(|c| c.role = Role::Worker).await;
    assert_eq!(w.grpc, None, "a worker-only process bound a gRPC port");
    let api = w.client();
    for path in [
        "/v1/params",
        "/v1/messages",
        "/openapi.json",
        &format!("/v1/digests/{}", r.key_id),
    ] {
        assert_eq!(
            api.get(path).await.status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    assert_eq!(api.get("/livez").await.status(), StatusCode::OK);
    wait_until(
        Duration::from_secs(30),
        "the worker-only process detects the message",
        || async { db.store().cursor(&r.key_id).await.unwrap() == Some(1) },
    )
    .await;
    let metrics = api.metrics().await;
    assert!(metrics.contains("omr_key_lag{key_id="), "{metrics}");
    // It folded the message itself: nothing had detected it before.
    assert!(metrics.contains("\nomr_detections_total 1\n"), "{metrics}");
    w.stop().await;
}
