//! TLS end to end (the store plays no part: SQLite): HTTPS and gRPC over TLS serve the whole
//! flow to a client that trusts the certificate; a renewed certificate is served from the same
//! files without a restart, and fresh connections that trust only the old one fail; a broken
//! key is refused at reload, counted, while the current certificate keeps serving; a client that
//! connects and never starts its handshake is closed after the header-read timeout, on both
//! listeners.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use omr_proto::v1::registration_header::Start;
use omr_test_support::{
    insecure_keys, quick_detection, wait_until, RawClient, TestCert, TestDb, TestServer,
};
use tokio::io::AsyncReadExt;

/// Whether a fresh client trusting only `pem` gets `/v1/params` over HTTPS.
async fn trusted(s: &TestServer, pem: &[u8]) -> bool {
    let c = RawClient::with_tls(s.http, s.grpc, pem);
    c.http().get(c.url("/v1/params")).send().await.is_ok()
}

/// A TCP connection to `addr` that sends nothing: how long until the server closes it.
async fn closed_after(addr: SocketAddr) -> Duration {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(30), tcp.read(&mut [0u8; 64]))
        .await
        .expect("the server closes an idle handshake");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_the_flow_and_reloads_a_renewed_certificate() {
    let cert = TestCert::localhost();
    let db = TestDb::sqlite().await;
    let s = TestServer::start_configured(&db, |c| {
        quick_detection(c);
        c.tls_cert = Some(cert.cert.clone());
        c.tls_key = Some(cert.key.clone());
        c.header_read_timeout_secs = 2;
    })
    .await;
    // Unpooled: the 2 s header timeout closes idle keep-alive connections under a pool.
    let api = s.client().unpooled();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let index = api.post(&r.keys.clue_key, b"over TLS").await;
    let digest = api.caught_up_digest(&r, None).await;
    assert_eq!(digest.messages, vec![(index, b"over TLS".to_vec())]);

    // Renewal: a new key and certificate in the same files, read when they change.
    let first = cert.pem();
    cert.renew();
    let renewed = cert.pem();
    wait_until(
        Duration::from_secs(30),
        "omrd serves the renewed certificate",
        || trusted(&s, &renewed),
    )
    .await;
    assert!(!trusted(&s, &first).await, "the old certificate is served");
    let fresh = RawClient::with_tls(s.http, s.grpc, &renewed).unpooled();
    assert_eq!(fresh.grpc_params().await.param_set, "insecure-test");
    let reloads = |result: &'static str| {
        let api = fresh.clone();
        async move {
            let series = format!("omr_tls_reloads_total{{result=\"{result}\"}}");
            api.metric(&series).await.unwrap_or(0.0)
        }
    };
    assert!(reloads("ok").await >= 1.0);

    // A broken key: refused at reload and counted; the renewed certificate keeps serving.
    let errors = reloads("error").await;
    std::fs::write(&cert.key, "not a key").unwrap();
    wait_until(
        Duration::from_secs(30),
        "the failed reload is counted",
        || async { reloads("error").await > errors },
    )
    .await;
    assert!(trusted(&s, &renewed).await);

    // A connection that never starts its handshake holds its permit no longer than the
    // header-read timeout (2 s), on both listeners.
    for addr in [s.http, s.grpc.unwrap()] {
        let waited = closed_after(addr).await;
        assert!(waited >= Duration::from_millis(1500), "{addr}: {waited:?}");
    }
    let timeouts = |listener: &'static str| {
        let api = fresh.clone();
        async move {
            let series = format!(
                "omr_tls_handshake_failures_total{{listener=\"{listener}\",reason=\"timeout\"}}"
            );
            api.metric(&series).await.unwrap_or(0.0)
        }
    };
    assert!(timeouts("http").await >= 1.0);
    assert!(timeouts("grpc").await >= 1.0);
    drop(api);
    s.stop().await;
    db.cleanup().await;
}
