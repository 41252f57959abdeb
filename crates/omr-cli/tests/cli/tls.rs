//! The `omr` binary against an omrd that serves TLS with a self-signed certificate: `register`,
//! `send`, `status` and `digest` with `--ca-cert` work end to end; without it the error says to
//! pass it and nothing is registered; plain-text clients are refused (HTTP: `400 tls_required`,
//! gRPC: no connection).

use std::io::{Read, Write};
use std::time::Duration;

use crate::common::{keygen, omr, omr_fails, omr_json, payloads, register_with, s};
use omr_test_support::{quick_detection, wait_until_blocking, TestCert, TestDb, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_send_digest_over_tls_with_ca_cert_and_plain_text_is_refused() {
    let cert = TestCert::localhost();
    let db = TestDb::sqlite().await;
    let server = TestServer::start_configured(&db, |c| {
        quick_detection(c);
        c.tls_cert = Some(cert.cert.clone());
        c.tls_key = Some(cert.key.clone());
    })
    .await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    assert!(http.starts_with("https://") && grpc.starts_with("https://"));
    let (plain_http, plain_grpc) = (
        format!("http://{}", server.http),
        format!("http://{}", server.grpc.unwrap()),
    );
    let ca = cert.cert.clone();
    let tmp = tempfile::tempdir().unwrap();
    let alice = tmp.path().join("alice");
    tokio::task::spawn_blocking(move || {
        keygen(&alice, "4");
        let base = ["register", "--keys", s(&alice)];

        // The system's roots do not trust a self-signed certificate: a clear error, nothing
        // registered.
        let e = omr_fails(&[&base[..], &["--http", &http, "--grpc", &grpc]].concat());
        assert!(e.contains("TLS") && e.contains("--ca-cert"), "{e}");
        assert!(!alice.join("registration.json").exists());
        // Plain-text gRPC to the TLS port: no connection, nothing registered.
        let e = omr_fails(&[&base[..], &["--http", &http, "--grpc", &plain_grpc]].concat());
        assert!(e.contains(&plain_grpc), "{e}");
        assert!(!alice.join("registration.json").exists());

        let ca = s(&ca);
        register_with(&alice, &http, &grpc, &["--ca-cert", ca]);

        // Plain-text HTTP to the TLS port: the server's answer says to use https://.
        let address = alice.join("address");
        let send = |url: &str, text: &str| {
            let args = ["send", "--to", s(&address), "--http", url, "--ca-cert", ca];
            omr(&[&args[..], &["--message", text, "--json"]].concat())
        };
        let out = send(&plain_http, "never stored");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{e}");
        assert!(e.contains("tls_required") && e.contains("https://"), "{e}");
        let out = send(&http, "over TLS");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sent: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let index = sent["index"].as_u64().expect("an index");

        // Status and digest: the servers from registration.json, the CA from the flag.
        let dir = s(&alice);
        wait_until_blocking(Duration::from_secs(60), "the key catches up", || {
            omr_json(&["status", "--keys", dir, "--ca-cert", ca, "--json"])["lag"] == 0
        });
        let d = omr_json(&["digest", "--keys", dir, "--ca-cert", ca, "--json"]);
        assert_eq!(payloads(&d), vec![(index, "over TLS".to_string())], "{d}");
    })
    .await
    .unwrap();

    // A raw plain-HTTP request gets the JSON error and the connection closes.
    let addr = server.http;
    let answer = tokio::task::spawn_blocking(move || {
        let mut tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        tcp.write_all(b"GET /v1/params HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).expect("the server closes");
        answer
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("\"code\":\"tls_required\""), "{answer}");

    // The refused message was never stored: the board holds the one sent over TLS.
    assert_eq!(db.store().board_head().await.unwrap(), 1);
    let api = server.client();
    let failures = |listener: &'static str, reason: &'static str| {
        let api = api.clone();
        async move {
            let series = format!(
                "omr_tls_handshake_failures_total{{listener=\"{listener}\",reason=\"{reason}\"}}"
            );
            api.metric(&series).await.unwrap_or(0.0)
        }
    };
    assert!(failures("http", "plain_http").await >= 2.0);
    assert!(failures("grpc", "error").await >= 1.0);
    server.stop().await;
    db.cleanup().await;
}
