//! The `omrd` binary itself: --help, refusing the insecure set, serving on port 0 with the
//! address file, a clean exit on SIGTERM, and `omrd openapi`.

use std::process::{Command, Stdio};
use std::time::Duration;

use omr_test_support::Omrd;

const OMRD: &str = env!("CARGO_BIN_EXE_omrd");

#[test]
fn help_explains_configuration() {
    let out = Command::new(OMRD).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "OMR_DATABASE_URL",
        "--data-dir",
        "--http-addr",
        "omrd.addr",
        "--allow-insecure-params",
        "invite create",
        "OMR_REGISTRATION",
    ] {
        assert!(
            text.contains(needle),
            "--help does not mention {needle}:\n{text}"
        );
    }
}

#[test]
fn openapi_prints_the_document_of_the_http_api() {
    let out = Command::new(OMRD).arg("openapi").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/messages",
        "/v1/digests/{key_id}",
        "/v1/keys/{key_id}/status",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing: {doc}");
    }
}

#[test]
fn refuses_the_insecure_set_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(OMRD)
        .args([
            "--param-set",
            "insecure-test",
            "--http-addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("OMR_DATABASE_URL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("insecure") && err.contains("--allow-insecure-params"),
        "{err}"
    );
    let out = Command::new(OMRD)
        .args(["--param-set", "omr-v9"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("omr-v9"));
}

#[test]
fn serves_on_ephemeral_ports_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut omrd = Omrd::spawn(OMRD, dir.path(), |cmd| {
        cmd.args(["--log-format", "json"]).stderr(Stdio::piped());
    });
    let http = omrd.http.clone();
    // A plain HTTP/1.1 request over a socket: /livez answers.
    let mut ok = false;
    for _ in 0..100 {
        if let Ok(mut s) = std::net::TcpStream::connect(&http) {
            use std::io::{Read, Write};
            s.write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut resp = String::new();
            s.read_to_string(&mut resp).unwrap();
            ok = resp.starts_with("HTTP/1.1 200");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ok, "livez did not answer 200");
    assert!(
        dir.path().join("omr.sqlite3").exists(),
        "embedded store not created"
    );
    let exit = omrd.terminate();
    let mut logs = String::new();
    use std::io::Read;
    omrd.take_stderr()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(exit.success(), "exit {exit:?}; logs:\n{logs}");
    assert!(
        logs.contains("SIGTERM received") && logs.contains("omrd stopped"),
        "{logs}"
    );
    // JSON logs: every line parses.
    for line in logs.lines().filter(|l| !l.trim().is_empty()) {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
}

#[test]
fn refuses_attachments_larger_than_pir_can_serve() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(OMRD)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("OMR_DATABASE_URL")
        .env("OMR_MAX_ATTACHMENT_BYTES", "65537")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("max_attachment_bytes = 65537") && err.contains("64 KiB"),
        "{err}"
    );
}
