//! The benchmarks in `crates/omr-server/examples`, run at a tiny size so that a change that
//! breaks one fails CI instead of being found by the next person who measures. `cargo test`
//! builds every example; a run that filtered them out is told how to build them. Each must exit
//! 0 and print its JSON with its main figures present and consistent. The sizes measure nothing.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const OMRD: &str = env!("CARGO_BIN_EXE_omrd");

/// The example's executable, next to this test's profile directory (`target/<profile>/examples`):
/// the newest of `<name>` (as `cargo build --example` leaves it) and `<name>-<hash>` (as
/// `cargo test` builds it).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = (exe.parent().and_then(|deps| deps.parent()))
        .expect("target/<profile>/deps")
        .join("examples");
    let prefix = format!("{name}-");
    let built = std::fs::read_dir(&dir).into_iter().flatten().flatten();
    let newest = built
        .filter(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            file == name || (file.starts_with(&prefix) && !file.contains('.'))
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok());
    match newest {
        Some(e) => e.path(),
        None => panic!(
            "example {name} is not built in {}: `cargo test` builds the examples; after a \
             filtered run, `cargo build --release -p omr-server --examples`",
            dir.display()
        ),
    }
}

/// Run example `name` with `args` in a fresh working directory; its JSON output.
fn run(name: &str, args: &[&str]) -> Value {
    let dir = tempfile::tempdir().expect("a working directory");
    let out = Command::new(example(name))
        .args(args)
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .output()
        .expect("the example starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} {args:?} failed:\n{stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        let stdout = String::from_utf8_lossy(&out.stdout);
        panic!("{name} printed no JSON ({e}):\n{stdout}\n{stderr}")
    })
}

fn positive(v: &Value, path: &[&str]) -> f64 {
    let x = path.iter().fold(v, |v, k| &v[*k]);
    let x = x
        .as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number: {v}"));
    assert!(x > 0.0, "{path:?} = {x}: {v}");
    x
}

#[test]
fn service_bench_runs() {
    let r = run("service_bench", &["1", "3", "insecure-test"]);
    assert_eq!(r["param_set"], "insecure-test", "{r}");
    assert_eq!(r["backlog_messages"], 3, "{r}");
    positive(&r, &["freshness_p50_ms"]);
    positive(&r, &["backlog_messages_per_second"]);
}

#[test]
fn key_load_bench_runs() {
    for set in ["insecure-test", "omr-light-v1"] {
        let r = run("key_load_bench", &["1", set]);
        assert_eq!(r["runs"], 1, "{r}");
        positive(&r, &["cold_load_ms"]);
        positive(&r, &["stored_key_bytes"]);
        positive(&r, &["expanded_file_bytes"]);
        positive(&r, &["warm_load_page_cache_ms"]);
    }
}

#[test]
fn light_bench_runs() {
    // Two keys, one closed epoch, two messages for the syncing recipient, two freshness samples.
    let r = run("light_bench", &["2", "4096", "2", "2", OMRD]);
    assert_eq!(r["every_digest_exact"], true, "{r}");
    assert_eq!(
        (r["keys"].as_u64(), r["board"].as_u64()),
        (Some(2), Some(4096))
    );
    positive(&r, &["detection", "cpu_us_per_message_key"]);
    positive(&r, &["sync", "fetch_rounds"]);
    positive(&r, &["freshness_s", "p95"]);
}

#[test]
fn light_stream_bench_runs() {
    // Two online recipients, 2 s at 5 messages/s (every tenth with a 512-byte attachment),
    // then the quiet board's five posts.
    let r = run("light_stream_bench", &["2", "2", "0.2", "5", OMRD, "512"]);
    let rate = &r["rates"][0];
    assert_eq!(rate["payloads_received"], rate["messages"], "{r}");
    assert_eq!(
        rate["attachments_received"], rate["attachments_posted"],
        "{r}"
    );
    positive(rate, &["attachments_received"]);
    positive(rate, &["latency_p95_s"]);
    positive(rate, &["bytes_per_online_key_per_message"]);
    assert_eq!(r["quiet_board"]["payloads"], 5, "{r}");
    assert_eq!(r["registration"]["keys"], 2, "{r}");
}

#[test]
fn light_stream_bench_follows() {
    // The same, the recipients following as `omr digest --follow` does, no attachments.
    let r = run(
        "light_stream_bench",
        &["2", "2", "0.2", "5", OMRD, "0", "0", "1"],
    );
    assert_eq!(r["following"], true, "{r}");
    let rate = &r["rates"][0];
    assert_eq!(rate["payloads_received"], rate["messages"], "{r}");
    positive(rate, &["latency_p95_s"]);
    assert_eq!(r["quiet_board"]["payloads"], 5, "{r}");
}

#[test]
fn light_digest_load_runs() {
    // Three keys (one quiet), 3 s at 5 messages/s with 20 raw digest requests a second over
    // HTTP and gRPC, a refresh every 4 messages.
    let r = run("light_digest_load", &["3", "1", "3", "20", "5", OMRD, "4"]);
    assert_eq!(
        (r["polled_keys"].as_u64(), r["quiet_keys"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(r["light_refresh_messages"], 4.0, "{r}");
    let rate = &r["rates"][0];
    assert_eq!(rate["errors"], 0, "{r}");
    positive(rate, &["requests_answered"]);
    positive(rate, &["latency_p99_ms"]);
    // At most one pass per polled key and refresh mark on the board (the baseline's posts and
    // the run's, 4 apart), however many requests asked.
    let passes = positive(rate, &["refresh_passes"]);
    let head = positive(rate, &["board_head"]);
    assert!(passes <= 2.0 * (head / 4.0).ceil(), "{r}");
    assert_eq!(rate["quiet_keys_behind_a_closed_batch"], 0, "{r}");
}

#[test]
fn plan_bench_runs() {
    // Fifty stand-in keys, three plans idle and three with every key waiting: the worker holds
    // them all and its plans are timed.
    let r = run("plan_bench", &["50", "3"]);
    assert_eq!(r["keys"], 50, "{r}");
    positive(&r, &["store_calls", "sum", "p50_ms"]);
    for phase in ["idle", "every_key_waiting"] {
        assert_eq!(r["worker_plan"][phase]["keys_leased"], 50.0, "{r}");
        positive(&r, &["worker_plan", phase, "mean_ms"]);
    }
}
