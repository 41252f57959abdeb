//! What a detection worker's planning costs as the registered keys grow, against a store
//! holding `KEYS` key rows:
//!
//! - the store calls the loop makes to plan a turn, timed one by one: renew its heartbeat and
//!   leases, list the keys with their cursors and presence, read the board head;
//! - the whole plan as the worker makes it (those calls, then its views of the keys, the queue,
//!   the pick of the next key and the published schedule), from `omr_detect_plan_seconds` of an
//!   omrd (in-process, the real worker) started on that store for `ROUNDS` plans: first idle (an
//!   empty board), then with every key waiting (a full batch of 4,096 stand-in messages on the
//!   board, which no key has detected).
//!
//! The rows belong to stand-in keys of omr-light-v1 (a few bytes each instead of 32.5 MB): what
//! planning reads is the keys' metadata, leases, cursors and presence, never their bytes, and
//! with an empty board no key is ever loaded. With every key waiting the worker picks one each
//! turn, publishes the schedule of all of them, and fails to load the one it picked (its bytes
//! are a stand-in), which sends it to the back of the queue: the turns are all planning. One
//! worker holds every lease, as a single node does.
//!
//!     cargo run --release -p omr-server --example plan_bench -- [KEYS] [ROUNDS] [DATABASE_URL]
//!
//! Defaults: 10,000 keys, 50 rounds, an embedded SQLite store in a temporary directory (a
//! `postgres://` URL of an empty database measures PostgreSQL; its keys are deleted at the
//! end; its stand-in board messages stay). Prints one JSON object; times in milliseconds.

use std::time::{Duration, Instant};

use omr_server::{Application, Config};
use omr_store::{NewKey, NewMessage, StartAt, Store};
use omr_test_support::measure::cpu_model;
use serde_json::{json, Value};

const OWNER: &str = "plan-bench";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let keys: usize = args.first().map_or(Ok(10_000), |s| s.parse())?;
    let rounds: usize = args.get(1).map_or(Ok(50), |s| s.parse())?.max(1);
    let url = args.get(2).cloned();
    let tmp = tempfile::tempdir()?;
    let store = match &url {
        Some(url) => Store::connect(url).await?,
        None => Store::open_embedded(tmp.path()).await?,
    };
    let prefix = format!("plan-bench-{}-", std::process::id());
    let started = Instant::now();
    for i in 0..keys {
        store.insert_key(&stand_in(&prefix, i)).await?;
    }
    let insert_s = started.elapsed().as_secs_f64();
    let calls = store_calls(&store, rounds).await?;
    store.release_leases(OWNER).await?;

    let idle = worker_plans(tmp.path(), url.clone(), keys, rounds).await?;
    let board: Vec<NewMessage> = (0..omr_light::OMR_LIGHT_V1.batch as u32)
        .map(|i| NewMessage {
            clue: format!("{prefix}{i}").into_bytes(),
            payload: b"stand-in".to_vec(),
            attachment: Vec::new(),
        })
        .collect();
    store.append(&board).await?;
    let waiting = worker_plans(tmp.path(), url.clone(), keys, rounds).await?;
    if url.is_some() {
        for i in 0..keys {
            store.delete_key(&format!("{prefix}{i:06}")).await?;
        }
    }
    let report = json!({
        "cpu": cpu_model(),
        "backend": if url.is_some() { "postgres" } else { "sqlite" },
        "keys": keys,
        "rounds": rounds,
        "insert_seconds": insert_s,
        "store_calls": calls,
        "worker_plan": { "idle": idle, "every_key_waiting": waiting },
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// Stand-in key `i`: an omr-light-v1 row whose bytes are never read.
fn stand_in(prefix: &str, i: usize) -> NewKey<'static> {
    NewKey {
        key_id: format!("{prefix}{i:06}"),
        param_set: omr_light::OMR_LIGHT_V1.name,
        kbar: 50,
        start: StartAt::Index(0),
        token_hash: [7; 32],
        key: b"stand-in key",
        digest_key: b"",
        invite_hash: None,
    }
}

/// The planning store calls, `rounds` times: p50 and p95 of each and of their sum.
async fn store_calls(store: &Store, rounds: usize) -> anyhow::Result<Value> {
    let lease = Duration::from_secs(30);
    let mut times = [vec![], vec![], vec![], vec![]];
    for _ in 0..rounds {
        let t0 = Instant::now();
        store.acquire_leases(OWNER, lease).await?;
        let t1 = Instant::now();
        store.active_keys().await?;
        let t2 = Instant::now();
        store.board_head().await?;
        let t3 = Instant::now();
        for (v, (a, b)) in times
            .iter_mut()
            .zip([(t0, t1), (t1, t2), (t2, t3), (t0, t3)])
        {
            v.push((b - a).as_secs_f64() * 1e3);
        }
    }
    let [renew, list, head, all] = times.map(stats);
    Ok(json!({ "renew_leases": renew, "list_keys": list, "board_head": head, "sum": all }))
}

fn stats(mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    json!({ "p50_ms": at(0.5), "p95_ms": at(0.95) })
}

/// An omrd on the store, planning every 10 ms, until it planned `rounds` times holding all
/// `keys`: the mean of its `omr_detect_plan_seconds`.
async fn worker_plans(
    dir: &std::path::Path,
    database_url: Option<String>,
    keys: usize,
    rounds: usize,
) -> anyhow::Result<Value> {
    let config = Config {
        http_addr: "127.0.0.1:0".parse()?,
        grpc_addr: "127.0.0.1:0".parse()?,
        data_dir: dir.to_path_buf(),
        database_url,
        param_set: Some(omr_light::OMR_LIGHT_V1.name.to_string()),
        poll_interval_ms: 10,
        worker_id: Some(OWNER.to_string()),
        ..Default::default()
    };
    let app = Application::build(config).await?;
    let url = format!("http://{}/metrics", app.http_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let metric = |text: &str, name: &str| -> f64 {
        (text.lines())
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    };
    // The first plans take the leases, list the keys and publish all of them; count from the
    // fifth plan after the leases are all held.
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut leased_at = None;
    let mut base = None;
    let last = loop {
        anyhow::ensure!(
            Instant::now() < deadline,
            "omrd did not plan {rounds} times"
        );
        let text = reqwest::get(&url).await?.text().await?;
        let count = metric(&text, "omr_detect_plan_seconds_count");
        let sum = metric(&text, "omr_detect_plan_seconds_sum");
        let leased = metric(&text, "omr_leased_keys");
        match (leased_at, base) {
            (None, _) if leased >= keys as f64 => leased_at = Some(count),
            (Some(c), None) if count >= c + 5.0 => base = Some((count, sum)),
            (_, Some((c0, _))) if count - c0 >= rounds as f64 => break (count, sum, leased),
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = stop.send(());
    server.await??;
    let (c0, s0) = base.expect("counted from a plan");
    let (count, sum, leased) = last;
    Ok(json!({
        "plans": count - c0,
        "keys_leased": leased,
        "mean_ms": (sum - s0) / (count - c0) * 1e3,
    }))
}
