//! What the `omr` binary's tests share: running it (never with the caller's OMR_* URLs) and
//! reading its output, making a key directory, waiting for detection.
#![allow(dead_code)] // each test file uses a different part

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use omr_test_support::wait_until_blocking;
use serde_json::Value;

/// Run `omr` with `args`; never inherits the caller's OMR_* URLs or CA.
pub fn omr(args: &[&str]) -> Output {
    omr_with_stdin(args, None)
}

pub fn omr_with_stdin(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_omr"));
    cmd.args(args)
        .env_remove("OMR_HTTP_URL")
        .env_remove("OMR_GRPC_URL")
        .env_remove("OMR_CA_CERT")
        .env_remove("RUST_LOG")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("omr runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().expect("omr finishes")
}

/// Run `omr`, require success, and parse its `--json` output.
pub fn omr_json(args: &[&str]) -> Value {
    let out = omr(args);
    assert!(
        out.status.success(),
        "omr {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "omr {args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Run `omr`, require failure, and return its stderr.
pub fn omr_fails(args: &[&str]) -> String {
    let out = omr(args);
    assert!(
        !out.status.success(),
        "omr {args:?} should fail but printed {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn keygen(dir: &Path, kbar: &str) {
    omr_json(&[
        "keygen",
        "--out",
        dir.to_str().unwrap(),
        "--kbar",
        kbar,
        "--param-set",
        "insecure-test",
        "--allow-insecure-params",
        "--json",
    ]);
}

/// `omr register --keys DIR --http HTTP --grpc GRPC --json`, required to succeed; its output.
pub fn register(dir: &Path, http: &str, grpc: &str) -> Value {
    register_with(dir, http, grpc, &[])
}

/// [`register`] with more arguments (`--invite CODE`).
pub fn register_with(dir: &Path, http: &str, grpc: &str, more: &[&str]) -> Value {
    let args = [
        "register",
        "--keys",
        s(dir),
        "--http",
        http,
        "--grpc",
        grpc,
        "--json",
    ];
    omr_json(&[&args[..], more].concat())
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Poll `omr status` until the key has detected the whole board.
pub fn wait_detected(keys: &Path) {
    let what = format!("omr status says {} has no lag", keys.display());
    wait_until_blocking(Duration::from_secs(60), what, || {
        omr_json(&["status", "--keys", s(keys), "--json"])["lag"] == 0
    });
}

pub fn payloads(digest: &Value) -> Vec<(u64, String)> {
    digest["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["index"].as_u64().unwrap(),
                m["text"].as_str().unwrap_or("<binary>").to_string(),
            )
        })
        .collect()
}
