//! Measure the service around detection, in one process on the embedded store and a TFHE
//! parameter set (omr-v1 unless named): freshness (time from `201` to "the digest covers it",
//! one message per second) and throughput (a backlog detected for one key), plus the expanded
//! key's memory. Every message has a clue of its own (the board refuses a replayed one). Prints
//! JSON. CI runs it at a tiny size on `insecure-test` (tests/omrd/examples.rs).
//!
//! cargo run --release -p omr-server --example service_bench -- [fresh_messages] [backlog] \
//!     [param_set]

use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_proto::v1::detector_client::DetectorClient;
use omr_proto::v1::registration_header::Start;
use omr_server::{Application, Config};
use omr_test_support::measure::percentile;

async fn covered(client: &reqwest::Client, url: &str, token: &str) -> u64 {
    let r = client.get(url).bearer_auth(token).send().await.unwrap();
    r.headers()["omr-range-end"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let fresh: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(20);
    let backlog: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(48);
    let params = omr_core::ParamSet::by_name(&args.next().unwrap_or_else(|| "omr-v1".into()))?;
    let dir = tempfile::tempdir()?;
    let config = Config {
        http_addr: "127.0.0.1:0".parse()?,
        grpc_addr: "127.0.0.1:0".parse()?,
        data_dir: dir.path().to_path_buf(),
        poll_interval_ms: 1000,
        param_set: Some(params.name.into()),
        allow_insecure_params: params.insecure,
        ..Config::default()
    }
    .without_rate_limits();
    let app = Application::build(config).await?;
    let http = app.http_addr();
    let grpc = app.grpc_addr().expect("role both serves gRPC");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));

    let kbar = params.max_kbar.min(50);
    let keys = omr_core::keygen(params, kbar)?;
    let key = keys.detection_key.to_bytes();
    let msgs =
        omr_proto::registration_requests(params.name, kbar as u32, Start::FromNow(true), &key);
    let mut g = DetectorClient::connect(format!("http://{grpc}"))
        .await?
        .max_encoding_message_size(8 << 20);
    let reg = g
        .register_detection_key(tokio_stream::iter(msgs))
        .await?
        .into_inner();
    let client = reqwest::Client::new();
    let digest_url = format!("http://{http}/v1/digests/{}", reg.key_id);
    // A message with a fresh clue: the board refuses a clue it already holds.
    let message = || {
        serde_json::json!({
            "clue": B64.encode(keys.clue_key.make_clue().to_bytes()),
            "payload": B64.encode(vec![7u8; params.payload_bytes]),
        })
    };
    let post = || async {
        let r = client
            .post(format!("http://{http}/v1/messages"))
            .json(&message())
            .send()
            .await
            .unwrap();
        r.json::<serde_json::Value>().await.unwrap()["index"]
            .as_u64()
            .unwrap()
    };

    // Warm-up: the first message makes the worker expand the key.
    let started = Instant::now();
    let i = post().await;
    while covered(&client, &digest_url, &reg.access_token).await <= i {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first_ms = started.elapsed().as_secs_f64() * 1e3;

    // Freshness: one message per second.
    let mut lat = Vec::new();
    for _ in 0..fresh {
        let t = Instant::now();
        let i = post().await;
        while covered(&client, &digest_url, &reg.access_token).await <= i {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        tokio::time::sleep(Duration::from_secs(1).saturating_sub(t.elapsed())).await;
    }

    // Throughput: a backlog for one key.
    let mut batch = Vec::new();
    for _ in 0..backlog {
        batch.push(message());
    }
    let r = client
        .post(format!("http://{http}/v1/messages/batch"))
        .json(&serde_json::json!({"messages": batch}))
        .send()
        .await?;
    let status = r.status();
    let r = r.json::<serde_json::Value>().await?;
    anyhow::ensure!(status.is_success(), "the backlog was refused: {status} {r}");
    let end = r["first_index"].as_u64().unwrap() + backlog as u64;
    let t = Instant::now();
    while covered(&client, &digest_url, &reg.access_token).await < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let secs = t.elapsed().as_secs_f64();
    let rss_kb = std::fs::read_to_string("/proc/self/status")?
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let (p50, p95) = (
        percentile(&mut lat.clone(), 0.5),
        percentile(&mut lat, 0.95),
    );
    println!(
        "{}",
        serde_json::json!({
            "param_set": params.name,
            "first_message_ms_including_key_expansion": first_ms,
            "freshness_messages": fresh,
            "freshness_p50_ms": p50,
            "freshness_p95_ms": p95,
            "backlog_messages": backlog,
            "backlog_ms_per_message": secs * 1e3 / backlog as f64,
            "backlog_messages_per_second": backlog as f64 / secs,
            "process_peak_rss_bytes": rss_kb * 1024,
        })
    );
    let _ = stop.send(());
    server.await??;
    Ok(())
}
