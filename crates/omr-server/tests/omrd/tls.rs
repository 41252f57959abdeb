//! The `omrd` binary with `--tls-cert` / `--tls-key`: the address file says TLS; a renewed
//! certificate whose files keep their modification times (so that only the signal can tell
//! omrd) is served after SIGHUP, without a restart; a key without a certificate is refused at
//! start with the reason.

use std::process::Command;
use std::time::{Duration, SystemTime};

use omr_test_support::{wait_until, Omrd, RawClient, TestCert};

const OMRD: &str = env!("CARGO_BIN_EXE_omrd");

fn modified(path: &std::path::Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

fn set_modified(path: &std::path::Path, when: SystemTime) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(when).unwrap();
}

/// Whether a fresh client trusting only `pem` gets `/v1/params` over HTTPS.
async fn trusted(omrd: &Omrd, pem: &[u8]) -> bool {
    let c = RawClient::with_tls(&omrd.http, omrd.grpc.as_ref(), pem);
    c.http().get(c.url("/v1/params")).send().await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_certificate() {
    let cert = TestCert::localhost();
    let dir = tempfile::tempdir().unwrap();
    let omrd = Omrd::spawn(OMRD, dir.path(), |cmd| {
        cmd.arg("--tls-cert")
            .arg(&cert.cert)
            .arg("--tls-key")
            .arg(&cert.key);
    });
    let addr: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("omrd.addr")).unwrap()).unwrap();
    assert_eq!(addr["tls"], true, "{addr}");
    let first = cert.pem();
    assert!(trusted(&omrd, &first).await);

    let (cert_time, key_time) = (modified(&cert.cert), modified(&cert.key));
    cert.renew();
    set_modified(&cert.cert, cert_time);
    set_modified(&cert.key, key_time);
    let renewed = cert.pem();
    let sent = Command::new("kill")
        .args(["-HUP", &omrd.pid().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    wait_until(
        Duration::from_secs(30),
        "omrd serves the renewed certificate after SIGHUP",
        || trusted(&omrd, &renewed),
    )
    .await;
    assert!(!trusted(&omrd, &first).await);
}

#[test]
fn a_key_without_a_certificate_is_refused_at_start() {
    let cert = TestCert::localhost();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(OMRD)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("OMR_DATABASE_URL")
        .env("OMR_TLS_KEY", &cert.key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tls_key is set but tls_cert is not"), "{err}");
    assert!(!dir.path().join("omrd.addr").exists());
}
