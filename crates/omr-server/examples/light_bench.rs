//! Measure one omrd node running omr-light-v1 (the real executable, its CPU read from /proc, on
//! the embedded SQLite store): `keys` registered keys and a board of `board` messages posted to
//! an omrd without a detection worker, then omrd restarted with one, every key the whole board
//! behind: the catch-up (wall time, the node's CPU and cores busy, per message and per
//! (message, key), with and without the ingest), disk and memory per key, every digest checked
//! exact; one recipient with `k` messages
//! syncing the board through the SDK (`omr_client::Client::retrieve`: its digests, then its
//! payloads by the batch fetch, in rounds of 50: wall time, the node's CPU, bytes both ways; the
//! one-time fetch key and the snapshot built once per closed epoch apart); and freshness for
//! that recipient, online,
//! with the other keys offline (post to "the digest shows it", p50 and p95); then, every key
//! online and the open batch half full, the CPU a new message costs. Prints JSON.
//!
//! cargo build --release -p omr-server --bin omrd
//! cargo run --release -p omr-server --example light_bench -- [keys] [board] [k] [fresh] [omrd]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use omr_light::{Address, SecretKey, OMR_LIGHT_V1};
use omr_test_support::measure::{cpu_model, cpu_secs, percentile, status_bytes};
use omr_test_support::{light_message, LightRecipient, Omrd, RawClient};
use rand::seq::index::sample;
use rayon::prelude::*;
use serde_json::{json, Value};

fn du(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(path)
            .map(|d| d.flatten().map(|e| du(&e.path())).sum())
            .unwrap_or(0)
    } else {
        meta.len()
    }
}

async fn metric(api: &RawClient, name: &str) -> f64 {
    api.metric(name).await.unwrap_or(0.0)
}

/// One digest page from `from`: (range end, board head, bytes).
async fn digest_page(api: &RawClient, r: &LightRecipient, from: u64) -> (u64, u64, Vec<u8>) {
    let response = api.digest_of(&r.key_id, &r.token, Some(from)).await;
    assert!(response.status().is_success(), "{}", response.status());
    let h = |n: &str| -> u64 { response.headers()[n].to_str().unwrap().parse().unwrap() };
    let (end, head) = (h("omr-range-end"), h("omr-board-head"));
    (end, head, response.bytes().await.unwrap().to_vec())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut num = |d: usize| -> anyhow::Result<usize> {
        Ok(args.next().map(|s| s.parse()).transpose()?.unwrap_or(d))
    };
    let (keys, board, k, fresh) = (num(200)?, num(1 << 16)?, num(50)?, num(20)?);
    let omrd: PathBuf = std::env::args()
        .nth(5)
        .unwrap_or_else(|| "target/release/omrd".into())
        .into();
    let d = OMR_LIGHT_V1.batch;
    // Uploads at once: omrd's default (2) up to 8 on a larger machine.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let uploads = (threads / 2).clamp(2, 8);
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let spawn = |role: &str| {
        Omrd::spawn(&omrd, dir.path(), |cmd| {
            cmd.args(["--param-set", OMR_LIGHT_V1.name])
                .env("OMR_ROLE", role)
                .env("OMR_MAX_KEYS", (keys + 10).to_string())
                .env("OMR_MAX_CONCURRENT_UPLOADS", uploads.to_string())
                .env("OMR_MAX_BATCH_MESSAGES", "1000")
                // Payloads only: attachments of up to 64 KiB would make every record 100 times
                // larger.
                .env("OMR_MAX_ATTACHMENT_BYTES", "0")
                // A pass per ask (the refresh policy is measured by `light_digest_load`).
                .env("OMR_LIGHT_REFRESH_MESSAGES", "1")
                .env("RUST_LOG", "warn");
        })
    };
    // Registration and the board on an omrd without a detection worker, so that every key is
    // the whole board behind when detection starts: the catch-up is measured alone.
    let mut o = spawn("api");
    let (pid, api) = (o.pid(), o.client());
    let idle_rss = status_bytes(pid, "VmRSS");

    // The board: `k` messages to the recipient (key 0), the rest to strangers.
    let me = SecretKey::generate(&OMR_LIGHT_V1);
    let strangers: Vec<Address> = (0..8)
        .map(|_| SecretKey::generate(&OMR_LIGHT_V1).address())
        .collect();
    let mine: Vec<u64> = {
        let mut v: Vec<u64> = sample(&mut rand::thread_rng(), board, k)
            .into_iter()
            .map(|i| i as u64)
            .collect();
        v.sort_unstable();
        v
    };
    let payload = |i: u64| format!("message {i:08} ").repeat(40).into_bytes()[..480].to_vec();
    let my_address = me.address();
    let messages: Vec<Value> = (0..board as u64)
        .into_par_iter()
        .map(|i| {
            let to = match mine.binary_search(&i) {
                Ok(_) => &my_address,
                Err(_) => &strangers[i as usize % strangers.len()],
            };
            light_message(to, &payload(i))
        })
        .collect();
    // The keys: the recipient's first, then `keys - 1` others, generated `uploads` at a time
    // and uploaded side by side (omrd takes that many at once).
    let (cpu1, t1) = (cpu_secs(pid), Instant::now());
    let mut recipients = vec![api.register_light_key(me).await];
    while recipients.len() < keys {
        let n = (keys - recipients.len()).min(uploads);
        let batch: Vec<SecretKey> = (0..n)
            .into_par_iter()
            .map(|_| SecretKey::generate(&OMR_LIGHT_V1))
            .collect();
        let registered = batch.into_iter().map(|s| api.register_light_key(s));
        recipients.extend(futures::future::join_all(registered).await);
    }
    let registered = (cpu_secs(pid) - cpu1, t1.elapsed().as_secs_f64());
    let store = |dir: &Path| du(&dir.join("omr.sqlite3")) + du(&dir.join("omr.sqlite3-wal"));
    let store_keys = store(dir.path());
    // The board, ingested.
    let (cpu0, t0) = (cpu_secs(pid), Instant::now());
    api.post_all(messages).await;
    let ingest = (cpu_secs(pid) - cpu0, t0.elapsed().as_secs_f64());
    o.terminate();

    // Detection from a cold start (every key loaded from the store, then the board).
    let t0 = Instant::now();
    let o = spawn("both");
    let (pid, api) = (o.pid(), o.client());
    let want = (keys * board) as f64;
    loop {
        if metric(&api, "omr_detections_total").await >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let detect_wall = t0.elapsed().as_secs_f64();
    let detect_cpu = cpu_secs(pid);
    let pool_secs = metric(&api, "omr_detect_seconds_total").await;
    // The keys' first loads (from the store): how many, and their wall times added up.
    let loads = (
        metric(&api, "omr_key_load_seconds_count{source=\"store\"}").await,
        metric(&api, "omr_key_load_seconds_sum{source=\"store\"}").await,
    );
    let (rss, hwm) = (status_bytes(pid, "VmRSS"), status_bytes(pid, "VmHWM"));

    // Sync: the recipient's digests over the whole board, then its payloads by PIR.
    let r = &recipients[0];
    let (cpu2, t2) = (cpu_secs(pid), Instant::now());
    let (mut from, mut digest_bytes, mut calls) = (0u64, 0usize, 0usize);
    let mut found = Vec::new();
    loop {
        let (end, head, bytes) = digest_page(&api, r, from).await;
        calls += 1;
        digest_bytes += bytes.len();
        let digest = omr_light::Digest::from_bytes(&bytes)?;
        found.extend(r.secret.pertinent(&digest));
        if end >= head || end == from {
            break;
        }
        from = end;
    }
    let digest_phase = (cpu_secs(pid) - cpu2, t2.elapsed().as_secs_f64());
    assert_eq!(found, mine, "the recipient's digest is exact");
    // The sync as a recipient's SDK makes it (omr-client's `Client::retrieve`): the digests,
    // then the payloads by the batch fetch, one round of 75 buckets per 50 records.
    let client = omr_client::Client::new(&api.url(""), api.grpc_url())?;
    let reg = omr_client::Registration {
        key_id: r.key_id.clone(),
        access_token: r.token.clone(),
        start_index: 0,
        param_set: OMR_LIGHT_V1.name.into(),
        kbar: 1,
        grpc_url: api.grpc_url().into(),
        http_url: Some(api.url("")),
        registered_at: String::new(),
    };
    // Once per key: its fetch key. Once per closed epoch, for every recipient: the snapshot.
    let fetch_secret = r.secret.fetch_secret();
    let mut key_upload = omr_client::PirFetch::default();
    let (cpu_k, t_k) = (cpu_secs(pid), Instant::now());
    client
        .upload_fetch_key(&fetch_secret, &reg, &mut key_upload)
        .await?;
    let key_phase = (cpu_secs(pid) - cpu_k, t_k.elapsed().as_secs_f64());
    let (cpu_s, t_s) = (cpu_secs(pid), Instant::now());
    let range: Value = api.get("/v1/fetch").await.json().await?;
    let snapshot_phase = (cpu_secs(pid) - cpu_s, t_s.elapsed().as_secs_f64());
    let mut state = omr_client::DigestState::new(&reg);
    let (cpu3, t3) = (cpu_secs(pid), Instant::now());
    let (mut sdk_calls, mut sdk_digest_bytes, mut pir) = (0, 0, omr_client::PirFetch::default());
    let mut got = BTreeMap::new();
    loop {
        let g = client.retrieve(&r.secret, &reg, &mut state, None).await?;
        sdk_calls += 1;
        sdk_digest_bytes += g.digest_bytes;
        if let Some(p) = g.pir {
            pir.epochs += p.epochs;
            pir.queries += p.queries;
            pir.bytes_up += p.bytes_up;
            pir.bytes_down += p.bytes_down;
        }
        got.extend(g.messages.into_iter().map(|m| (m.index, m.payload)));
        if g.pending.is_empty() {
            break;
        }
    }
    let pir_phase = (cpu_secs(pid) - cpu3, t3.elapsed().as_secs_f64());
    assert_eq!(
        got.keys().copied().collect::<Vec<_>>(),
        mine,
        "every payload fetched"
    );
    assert!(got.iter().all(|(&i, p)| *p == payload(i)), "payloads exact");
    // One more round alone (nothing wanted): what every recipient's round costs the server.
    let (start, end) = (
        range["start"].as_u64().unwrap(),
        range["end"].as_u64().unwrap(),
    );
    let geometry = omr_light::fetch::Geometry::new(start..end, omr_light::fetch::BUCKETS);
    let query = fetch_secret.query(&geometry, &[], &mut rand::rngs::OsRng);
    let (cpu4, t4) = (cpu_secs(pid), Instant::now());
    let answered = (api
        .http()
        .post(api.url(&format!("/v1/keys/{}/fetch", r.key_id))))
    .bearer_auth(&r.token)
    .header("content-type", "application/octet-stream")
    .body(query.to_bytes(&OMR_LIGHT_V1))
    .send()
    .await?;
    assert!(answered.status().is_success());
    answered.bytes().await?;
    let round_warm = (cpu_secs(pid) - cpu4, t4.elapsed().as_secs_f64());

    // Freshness: one message to the recipient at a time, the recipient online.
    let mut lat = Vec::new();
    for _ in 0..fresh {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let m = light_message(&r.secret.address(), b"fresh");
        let posted = Instant::now();
        let index = api.post_all(vec![m]).await;
        loop {
            let (end, _, _) = digest_page(&api, r, index).await;
            if end > index {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        lat.push(posted.elapsed().as_secs_f64());
    }
    // Every other key's digest is exact too (none of the board's messages is theirs); last,
    // because asking makes a recipient online, and every online key detects the open batch.
    let mut others_bytes = 0;
    for other in &recipients[1..] {
        let (mut from, mut pertinent) = (0u64, Vec::new());
        loop {
            let (end, head, bytes) = digest_page(&api, other, from).await;
            others_bytes += bytes.len();
            pertinent.extend(
                other
                    .secret
                    .pertinent(&omr_light::Digest::from_bytes(&bytes)?),
            );
            if end >= head || end == from {
                break;
            }
            from = end;
        }
        assert!(pertinent.is_empty(), "key {}: {pertinent:?}", other.key_id);
    }

    // Every key has just asked for its digest: all are online (`online_secs`, 300 s). Half fill
    // the open batch, then time new messages one at a time, every recipient asking after each
    // (a status call that finds its key behind, as a client polling its digest itself would;
    // an SDK recipient near the head reads the tail and asks for nothing): the CPU each costs.
    let fill = (d / 2).saturating_sub((board + fresh) % d);
    // Ask (again each second) until every key has detected the whole board (`omr_max_key_lag`,
    // read from the store at each scrape, is 0): an asking key's cursor is the board head.
    let caught_up = || {
        let (api, recipients) = (&api, &recipients);
        async move {
            let deadline = Instant::now() + Duration::from_secs(600);
            let mut asked: Option<Instant> = None;
            while metric(api, "omr_max_key_lag").await > 0.0 {
                assert!(Instant::now() < deadline, "online keys did not catch up");
                if asked.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    for r in recipients.iter() {
                        let path = format!("/v1/keys/{}/status", r.key_id);
                        let ask = api.http().get(api.url(&path)).bearer_auth(&r.token);
                        assert!(ask.send().await.expect("status").status().is_success());
                    }
                    asked = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let strangers_message = |i: u64| light_message(&strangers[i as usize % 8], &payload(i));
    api.post_all((0..fill as u64).map(strangers_message).collect())
        .await;
    caught_up().await;
    let online_keys = metric(&api, "omr_keys_online").await;
    let singles = 10;
    let (cpu5, pool5) = (
        cpu_secs(pid),
        metric(&api, "omr_detect_seconds_total").await,
    );
    for i in 0..singles {
        api.post_all(vec![strangers_message(i)]).await;
        caught_up().await;
    }
    let online_cpu = cpu_secs(pid) - cpu5;
    let online_pool = metric(&api, "omr_detect_seconds_total").await - pool5;

    let store_bytes = store(dir.path());
    // What a key stores per batch: its own half and the batch's shared half, encoded.
    let part = omr_light::Digest::encoded_len(&OMR_LIGHT_V1, &[d]) as f64;
    let key_files = du(&dir.path().join("expanded-keys"));
    let pairs = (keys * board) as f64;
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "cpu": cpu_model(),
            "threads": threads,
            "keys": keys, "board": board, "k": k,
            "register": { "cpu_s": registered.0, "wall_s": registered.1, "uploads_at_once": uploads,
                          "cpu_s_per_key": registered.0 / keys as f64,
                          "wall_s_per_key": registered.1 / keys as f64 },
            "ingest": { "cpu_s": ingest.0, "wall_s": ingest.1 },
            // Every key the whole board behind, from omrd's start to the last detection.
            "detection": {
                "wall_s": detect_wall,
                "cpu_s": detect_cpu,
                // omrd's cores while the keys were behind (its CPU over the wall time), and
                // the catch-up criterion: wall time ≤ 1.25 × CPU time / cores.
                "omrd_cores_busy": detect_cpu / detect_wall,
                "cores_busy_fraction": detect_cpu / detect_wall / threads as f64,
                "within_1_25_cpu_per_core": detect_wall <= 1.25 * detect_cpu / threads as f64,
                // The pool's jobs' wall time (each job spreads over every thread).
                "pool_s": pool_secs,
                "key_loads_from_store": loads.0,
                "key_load_s_sum": loads.1,
                // All in: the board's ingest and its detection.
                "cpu_us_per_message_all_keys": (ingest.0 + detect_cpu) / board as f64 * 1e6,
                "cpu_us_per_message_key": (ingest.0 + detect_cpu) / pairs * 1e6,
                "catch_up_cpu_us_per_message_key": detect_cpu / pairs * 1e6,
                "pool_us_per_message_key": pool_secs / pairs * 1e6,
            },
            "memory": { "idle_rss": idle_rss, "rss": rss, "hwm": hwm,
                        "per_key": (rss.saturating_sub(idle_rss)) as f64 / keys as f64 },
            "disk": {
                "store_after_keys_bytes": store_keys, "store_bytes": store_bytes,
                "detection_key_bytes": OMR_LIGHT_V1.detection_key_bytes(),
                "stored_part_bytes_per_key_per_message": part / d as f64,
                "key_files_bytes": key_files,
            },
            "every_digest_exact": true,
            "other_keys_digest_bytes": others_bytes,
            "sync": {
                "digest_calls": calls, "digest_bytes": digest_bytes,
                "digest_cpu_s": digest_phase.0, "digest_wall_s": digest_phase.1,
                // The SDK's whole sync (its digests again, then the payloads).
                "sdk_calls": sdk_calls, "sdk_digest_bytes": sdk_digest_bytes,
                "fetch_epochs": pir.epochs, "fetch_rounds": pir.queries,
                "fetch_down_bytes": pir.bytes_down, "fetch_up_bytes": pir.bytes_up,
                "sdk_sync_cpu_s": pir_phase.0, "sdk_sync_wall_s": pir_phase.1,
                "fetch_round_cpu_s_alone": round_warm.0, "fetch_round_wall_s_alone": round_warm.1,
                "fetch_key_bytes_once": key_upload.key_bytes_up,
                "fetch_key_upload_cpu_s": key_phase.0,
                "snapshot_build_cpu_s_once_per_epoch": snapshot_phase.0,
                "snapshot_build_wall_s": snapshot_phase.1,
            },
            "freshness_s": { "p50": percentile(&mut lat, 0.5), "p95": percentile(&mut lat, 0.95),
                             "max": percentile(&mut lat, 1.0), "samples": fresh },
            // Every key online, the open batch half full: one new message at a time.
            "online": {
                "keys": keys, "keys_online": online_keys,
                "open_batch_messages": d / 2, "messages": singles,
                "cpu_ms_per_message": online_cpu / singles as f64 * 1e3,
                "cpu_ms_per_message_per_online_key": online_cpu / (singles * keys as u64) as f64 * 1e3,
                "pool_ms_per_message_per_online_key": online_pool / (singles * keys as u64) as f64 * 1e3,
            },
        }))?
    );
    drop(o);
    Ok(())
}
