//! The capacity run behind `omr bench-capacity`: how one node serves many keys through a memory budget that holds few.
//! An embedded omrd (SQLite in a temporary directory, the given budget), one online recipient
//! (it fetches its digest every few seconds, as a client that is up does) and `--keys` keys in
//! all, and a slow board (one message every `--interval-ms`). It reads every key's cursor from
//! the store as it moves and reports:
//! - freshness of the online recipient (post acknowledged → its cursor passed the message),
//!   against the same node with that key alone ("one detection"): p50 and p95 and their ratios;
//! - coverage of every other key (how long each message waited to be detected for it): p50,
//!   p99 and max, and what was still waiting at the end;
//! - the time spent loading keys against the time spent detecting.
//!
//! On omr-light-v1 a key that is not online is detected a batch (4,096 messages) at a time:
//! the other keys' coverage counts up to the last full batch.
//!
//! By default a warm-up comes first (one message every key detects), so that every key's first
//! load from the store is not counted in the steady state; it is reported on its own.
//! Long: one benchmark's phases in order (keys, baseline, warm-up, slow board, report); splitting them would scatter one run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use omr_client::{Client, Keys, Registration, StartAt};
use rand::Rng;
use serde_json::{json, Value};

/// What to run: the CLI's `omr bench-capacity` flags, the parameter set resolved.
#[derive(Debug, Clone)]
pub struct CapacityRun {
    /// The parameter set (of either scheme) and whether it is the insecure test set.
    pub set: &'static str,
    pub insecure: bool,
    /// Registered keys in all (one of them online).
    pub keys: usize,
    /// The worker's memory budget, in expanded keys.
    pub memory_keys: u64,
    /// Milliseconds between two messages on the board.
    pub interval_ms: u64,
    /// Seconds of posting (then it waits for detection to catch up).
    pub duration_secs: u64,
    /// Messages timed with the online key alone ("one detection").
    pub baseline_messages: usize,
    /// One message every key detects before measuring (each key's first load behind).
    pub warmup: bool,
    /// key_max_wait_secs of the embedded omrd.
    pub max_wait_secs: u64,
    /// Distinct key sets generated (registered keys/distinct times each).
    pub distinct: usize,
    /// Detection threads (0: one per core).
    pub threads: usize,
    /// detect_batch of the embedded omrd (0: omrd's).
    pub detect_batch: usize,
    /// The embedded omrd's data directory (a temporary one when `None`).
    pub data_dir: Option<PathBuf>,
}

/// Where the run reports its phases (the CLI draws progress bars; a test may ignore them).
pub trait Progress {
    /// A phase of `total` steps begins.
    fn phase(&self, label: &str, total: u64) -> Box<dyn Phase>;
}

/// One phase's progress.
pub trait Phase {
    /// One step done.
    fn inc(&self);
    /// The phase is over.
    fn finish(&self);
}

/// When each board index was acknowledged.
type Posted = Arc<Mutex<HashMap<u64, Instant>>>;

/// Coverage latencies in seconds, per key.
type Covered = Arc<Mutex<HashMap<String, Vec<f64>>>>;

/// Run it and return the report (one JSON object; docs/benchmarks.md reads its fields).
pub async fn run(run: &CapacityRun, progress: &dyn Progress) -> anyhow::Result<Value> {
    let set = run.set;
    let light = omr_light::LightParams::by_name(set);
    let distinct = run.distinct.clamp(1, run.keys.max(1));
    let pb = progress.phase("generating keys", distinct as u64);
    let mut sets: Vec<Keys> = Vec::new();
    for _ in 0..distinct {
        sets.push(tokio::task::spawn_blocking(move || Keys::generate(set, 4)).await??);
        pb.inc();
    }
    pb.finish();
    let dk = sets[0].detection_key.clone();
    let key_bytes = match light {
        Some(p) => p.detection_key_memory(),
        // Off the runtime: an omr-v1 key takes seconds to decode and expand.
        None => {
            tokio::task::spawn_blocking(move || {
                omr_core::CompressedDetectionKey::from_bytes(&dk).map(|k| k.expand().memory_bytes())
            })
            .await??
        }
    } as u64;
    // An offline key is detected to the board head, on a batch scheme to its last full batch.
    let batch = light.map_or(1, |p| p.batch as u64);
    let full = move |head: u64| head / batch * batch;
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let data_dir = run
        .data_dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let threads = match run.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let config = omr_server::Config {
        http_addr: "127.0.0.1:0".parse()?,
        grpc_addr: "127.0.0.1:0".parse()?,
        data_dir,
        param_set: Some(set.to_string()),
        allow_insecure_params: run.insecure,
        worker_threads: threads,
        key_memory_bytes: run.memory_keys.max(1) * key_bytes + key_bytes / 2,
        key_max_wait_secs: run.max_wait_secs,
        max_keys: run.keys as u64 + 1,
        ..Default::default()
    }
    .without_rate_limits();
    let config = match run.detect_batch {
        0 => config,
        n => omr_server::Config {
            detect_batch: n,
            ..config
        },
    };
    let app = omr_server::Application::build(config).await?;
    let store = app.store();
    let client = Client::new(
        &format!("http://{}", app.http_addr()),
        &format!(
            "http://{}",
            app.grpc_addr().context("the embedded omrd serves gRPC")?
        ),
    )?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));

    // The online recipient, alone: "one detection".
    let online = register(&client, &sets[0]).await?;
    let keep_online = spawn_online_client(client.clone(), online.clone());
    let posted: Posted = Default::default();
    let covered: Covered = Default::default();
    let tracker = spawn_tracker(store.clone(), posted.clone(), covered.clone());
    // Its first message pays for the key's first load: not a detection time.
    let idx = post(&client, &sets, &posted).await?;
    wait_covered(&store, &online.key_id, idx).await?;
    while take(&covered, &online.key_id).is_empty() {
        tokio::time::sleep(Duration::from_millis(2)).await; // until the tracker recorded it
    }
    let pb = progress.phase("timing one detection", run.baseline_messages as u64);
    for _ in 0..run.baseline_messages {
        let idx = post(&client, &sets, &posted).await?;
        wait_covered(&store, &online.key_id, idx).await?;
        pb.inc();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    pb.finish();
    let baseline = take(&covered, &online.key_id);

    // The other keys, then the slow board.
    let pb = progress.phase("registering keys", run.keys.saturating_sub(1) as u64);
    for i in 1..run.keys {
        register(&client, &sets[i % distinct]).await?;
        pb.inc();
    }
    pb.finish();
    // Warm-up: one message that every key detects, so that each key's first load (from the
    // store, which writes its expanded file) is behind us; what follows is the steady state.
    let warmup = if run.warmup {
        let started = Instant::now();
        let before = counters(&client).await?;
        let pb = progress.phase("warming up: every key's first load", 1);
        let idx = post(&client, &sets, &posted).await?;
        let drained = wait_all_covered(&store, full(idx + 1), run.max_wait_secs).await?;
        pb.finish();
        let after = counters(&client).await?;
        anyhow::ensure!(drained, "warm-up: not every key detected message {idx}");
        Some(json!({
            "seconds": started.elapsed().as_secs_f64(),
            "key_loads": after.2 - before.2,
            "load_seconds": after.0 - before.0,
        }))
    } else {
        None
    };
    covered.lock().expect("lock").clear();
    let before = counters(&client).await?;
    let cpu_before = crate::host::process_cpu_secs();
    let started = Instant::now();
    let total = run.duration_secs * 1000 / run.interval_ms.max(1);
    let pb = progress.phase("posting a slow board", total);
    let mut tick = tokio::time::interval(Duration::from_millis(run.interval_ms.max(1)));
    let mut first = None;
    for _ in 0..total {
        tick.tick().await;
        let idx = post(&client, &sets, &posted).await?;
        first.get_or_insert(idx);
        pb.inc();
    }
    pb.finish();
    let head = store.board_head().await?;
    let pb = progress.phase("waiting for every key to catch up", 1);
    let drained = wait_all_covered(&store, full(head), run.max_wait_secs).await?;
    pb.finish();
    let elapsed = started.elapsed().as_secs_f64();
    // The whole process (the embedded omrd, the posting client, the cursor tracker): while
    // keys are behind, nearly all of it is detection.
    let cpu_secs = cpu_before
        .zip(crate::host::process_cpu_secs())
        .map(|(b, a)| a - b);
    let after = counters(&client).await?;
    tracker.abort();
    keep_online.abort();
    let mut pending = 0u64;
    for k in store.active_keys().await? {
        pending += full(head).saturating_sub(k.cursor);
    }
    let _ = stop.send(());
    server.await??;

    let online_lat = take(&covered, &online.key_id);
    let offline: Vec<f64> = covered
        .lock()
        .expect("lock")
        .values()
        .flatten()
        .copied()
        .collect();
    let one = percentile(&baseline, 0.5);
    let load_secs = after.0 - before.0;
    let detect_secs = after.1 - before.1;
    let report = json!({
        "cpu": crate::host::cpu_model(),
        "param_set": set,
        "offline_detected_to": if light.is_some() { "the last full batch" } else { "the board head" },
        "keys": run.keys,
        "memory_keys": run.memory_keys,
        "expanded_key_bytes": key_bytes,
        "interval_ms": run.interval_ms,
        "board_messages": head - first.unwrap_or(head),
        "seconds": elapsed,
        "threads": threads,
        "cpu_seconds": cpu_secs,
        "cores_busy": cpu_secs.map(|c| c / elapsed),
        "cores_busy_share": cpu_secs.map(|c| c / elapsed / threads as f64),
        "one_detection_p50_s": one,
        "one_detection_p95_s": percentile(&baseline, 0.95),
        "online_p50_s": percentile(&online_lat, 0.5),
        "online_p95_s": percentile(&online_lat, 0.95),
        "online_p50_ratio": percentile(&online_lat, 0.5) / one,
        "online_p95_ratio": percentile(&online_lat, 0.95) / one,
        "offline_p50_s": percentile(&offline, 0.5),
        "offline_p99_s": percentile(&offline, 0.99),
        "offline_max_s": percentile(&offline, 1.0),
        "offline_samples": offline.len(),
        "caught_up": drained,
        "pending_key_messages": pending,
        "key_loads": after.2 - before.2,
        "load_seconds": load_secs,
        "detect_seconds": detect_secs,
        "load_share": if detect_secs > 0.0 { load_secs / detect_secs } else { 0.0 },
        // Loads from local files only: a key's first load on a node comes from the store.
        "disk_load_seconds": after.3 - before.3,
        "disk_load_share": if detect_secs > 0.0 { (after.3 - before.3) / detect_secs } else { 0.0 },
        "warmup": warmup,
    });
    Ok(report)
}

async fn register(client: &Client, keys: &Keys) -> anyhow::Result<Registration> {
    Ok(client
        .register(&keys.detection_key, StartAt::Now, None)
        .await?)
}

/// Post one message to a random key set; remember when it was acknowledged.
async fn post(client: &Client, sets: &[Keys], posted: &Posted) -> anyhow::Result<u64> {
    let to = rand::thread_rng().gen_range(0..sets.len());
    let idx = client.send(&sets[to].clue_key, b"capacity").await?;
    posted.lock().expect("lock").insert(idx, Instant::now());
    Ok(idx)
}

/// A recipient that is up: fetches its digest every 5 s (which marks its key online).
fn spawn_online_client(client: Client, reg: Registration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let _ = client.digest(&reg, None, None, None).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    })
}

/// Read every key's cursor every 2 ms; record, for each index a cursor passed, how long after
/// its post that was.
fn spawn_tracker(
    store: omr_store::Store,
    posted: Posted,
    covered: Covered,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last: HashMap<String, u64> = HashMap::new();
        loop {
            if let Ok(keys) = store.active_keys().await {
                let now = Instant::now();
                let posted = posted.lock().expect("lock");
                let mut covered = covered.lock().expect("lock");
                for k in keys {
                    let from = *last.get(&k.key_id).unwrap_or(&k.start_index);
                    for idx in from..k.cursor {
                        if let Some(t) = posted.get(&idx) {
                            let lat = now.duration_since(*t).as_secs_f64();
                            covered.entry(k.key_id.clone()).or_default().push(lat);
                        }
                    }
                    last.insert(k.key_id, k.cursor);
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
}

/// Wait until every key's cursor reached `head` (at most 2 × `max_wait_secs` + 300 s); false
/// when some key had not.
async fn wait_all_covered(
    store: &omr_store::Store,
    head: u64,
    max_wait_secs: u64,
) -> anyhow::Result<bool> {
    let drain = Duration::from_secs(2 * max_wait_secs + 300);
    let all = async {
        loop {
            let keys = store.active_keys().await?;
            if keys.iter().all(|k| k.cursor >= head) {
                return Ok::<_, anyhow::Error>(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    match tokio::time::timeout(drain, all).await {
        Ok(r) => r.map(|()| true),
        Err(_) => Ok(false),
    }
}

/// Wait until `key_id`'s cursor passed `idx`.
async fn wait_covered(store: &omr_store::Store, key_id: &str, idx: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    while store.cursor(key_id).await?.unwrap_or(0) <= idx {
        anyhow::ensure!(
            Instant::now() < deadline,
            "message {idx} not detected in 10 min"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// The coverage latencies recorded for `key_id`, removed.
fn take(covered: &Covered, key_id: &str) -> Vec<f64> {
    covered
        .lock()
        .expect("lock")
        .remove(key_id)
        .unwrap_or_default()
}

/// (key load seconds, detection seconds, key loads, key load seconds from disk files) from
/// `/metrics`.
async fn counters(client: &Client) -> anyhow::Result<(f64, f64, f64, f64)> {
    let text = reqwest::get(format!("{}/metrics", client.http_url()))
        .await?
        .text()
        .await?;
    // Summed over label sets (the key load histogram has one per source).
    let value = |name: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| {
                l[name.len()..]
                    .rsplit(' ')
                    .next()?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .sum()
    };
    Ok((
        value("omr_key_load_seconds_sum"),
        value("omr_detect_seconds_total"),
        value("omr_key_load_seconds_count"),
        value("omr_key_load_seconds_sum{source=\"disk\"}"),
    ))
}

/// The `q`-quantile of `v`, 0 when empty (the report stays numeric).
fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    crate::host::percentile(&mut v.to_vec(), q)
}
