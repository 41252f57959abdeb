//! The supervised worker end to end on each store: detection jobs that panic (injected) restart
//! the worker loop with backoff; after three restarts `/readyz` answers 503 naming the reason,
//! and once the worker works again it is ready, and the key's digest is exact: every message
//! posted decodes, none twice; the restarted loop kept its lease.

use std::sync::atomic::Ordering;
use std::time::Duration;

use omr_proto::v1::registration_header::Start;
use omr_test_support::{
    insecure_keys, quick_detection, test_each_backend, wait_for, wait_until, RawClient, TestDb,
    TestServer,
};
use reqwest::StatusCode;

/// `/readyz`'s status and body.
async fn readiness(api: &RawClient) -> (StatusCode, String) {
    let resp = api.get("/readyz").await;
    (resp.status(), resp.text().await.unwrap_or_default())
}

/// The value of the counter line `name` in `/metrics` (0 when absent).
async fn counter(api: &RawClient, name: &str) -> u64 {
    let metrics = api.metrics().await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

test_each_backend!(panicking_detection_restarts_the_worker_and_loses_nothing);

async fn panicking_detection_restarts_the_worker_and_loses_nothing(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_detection).await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let noise = insecure_keys(4);
    let mut want = Vec::new();
    let first = api.post(&r.keys.clue_key, b"before").await;
    want.push((first, b"before".to_vec()));
    assert_eq!(api.caught_up_digest(&r, None).await.messages, want);

    // The next three detection jobs panic: three restarts, 1 s then 2 s apart.
    s.faults()
        .inject_detection_panics
        .store(3, Ordering::SeqCst);
    api.post(&noise.clue_key, b"noise").await;
    let mine = api.post(&r.keys.clue_key, b"after").await;
    want.push((mine, b"after".to_vec()));
    let restarts = "omr_worker_restarts_total{reason=\"panic\"}";
    let unready = wait_for(
        Duration::from_secs(30),
        "/readyz answers 503 after the third restart",
        || async {
            let (status, body) = readiness(&api).await;
            (status == StatusCode::SERVICE_UNAVAILABLE).then_some(body)
        },
    )
    .await;
    assert!(
        unready.contains("restarted 3 times") && unready.contains("injected detection panic"),
        "{unready}"
    );
    assert_eq!(counter(&api, restarts).await, 3);

    // The injected panics are spent: the worker works again, readiness recovers, and the
    // digest holds every message exactly once.
    wait_until(
        Duration::from_secs(30),
        "/readyz answers 200 again",
        || async { readiness(&api).await.0 == StatusCode::OK },
    )
    .await;
    let digest = api.caught_up_digest(&r, None).await;
    assert_eq!(digest.messages, want);
    assert_eq!(s.faults().inject_detection_panics.load(Ordering::SeqCst), 0);
    assert_eq!(
        counter(&api, restarts).await,
        3,
        "restarted without a panic"
    );
    // A restarted loop kept its lease: it was acquired once, never lost or taken again.
    let acquired = "omr_lease_changes_total{change=\"acquired\"}";
    assert_eq!(counter(&api, acquired).await, 1, "{acquired}");
    let released = "omr_lease_changes_total{change=\"released\"}";
    assert_eq!(counter(&api, released).await, 0, "{released}");
    s.stop().await;
}
