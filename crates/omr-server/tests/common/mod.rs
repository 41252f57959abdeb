//! Shared by the tests that run the `omrd` executable: start it on ephemeral ports and wait
//! for its address file; wait for it to exit.
#![allow(dead_code)] // each test file uses a different part

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const OMRD: &str = env!("CARGO_BIN_EXE_omrd");

/// A running `omrd` process and the addresses it bound.
#[derive(Debug)]
pub struct Omrd {
    pub child: Child,
    pub http: String,
    pub grpc: String,
}

/// `omrd` on 127.0.0.1:0 (HTTP and gRPC) with its data in `dir`, never inheriting
/// OMR_DATABASE_URL; `configure` adds arguments, environment and stdio. Returns once
/// `dir/omrd.addr` names the bound addresses.
pub fn spawn(dir: &Path, configure: impl FnOnce(&mut Command)) -> Omrd {
    let addr = dir.join("omrd.addr");
    let _ = std::fs::remove_file(&addr);
    let mut cmd = Command::new(OMRD);
    cmd.args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir)
        .env_remove("OMR_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    configure(&mut cmd);
    let child = cmd.spawn().expect("omrd starts");
    let started = Instant::now();
    while !addr.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "omrd wrote no address file"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let a: serde_json::Value = serde_json::from_slice(&std::fs::read(&addr).unwrap()).unwrap();
    Omrd {
        child,
        http: a["http"].as_str().unwrap().into(),
        grpc: a["grpc"].as_str().unwrap().into(),
    }
}

/// Send SIGTERM and wait (at most 30 s) for the exit.
pub fn terminate(child: &mut Child) -> ExitStatus {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "omrd did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
