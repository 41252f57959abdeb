//! A load test of omr-light-v1's digest endpoint on one omrd node (the real executable, its CPU
//! read from /proc, the embedded SQLite store): `keys` registered recipients, of which all but
//! `quiet` are polled through the raw API (`GET /v1/digests/{key_id}` over HTTP and `GetDigest`
//! over gRPC, alternately, as a client written from the OpenAPI document or the proto would),
//! round robin at `request_rate` requests per second in all (open loop: a request starts on
//! its tick whether or not the ones before it have been answered), while a sender posts at each
//! of `rates` messages per second for `seconds`. Per rate:
//! - requests answered per second, latency p50 / p99, errors;
//! - omrd's CPU per (new message, polled key): the node's CPU over the run minus the same run's
//!   posting alone (measured first, with nobody polling), over messages × polled keys; and its
//!   cores busy;
//! - what the refresh policy did (`light_refresh_messages`): refreshes, passes over keys, the
//!   pool seconds they took;
//! - the pollers' freshness: in each answer, the messages posted but not yet detected for the
//!   key (its lag), and the age of the newest detected message (p50 / p95);
//! - the quiet keys (nobody asks for theirs): after the run, how many have detected every
//!   closed batch, and how far the furthest is behind the last one.
//!
//! Before the rates, a warm-up: the board crosses one refresh mark and every polled key is asked
//! until it is detected up to it, so that the polled keys are loaded (each key's first load
//! reads its 32.5 MB upload from the store and lays it out, a cost paid once) and the rates
//! measure the steady state; its time and CPU are reported apart.
//!
//! With `conditional` = 1 (the default) each client names the digest it holds, as the API
//! documents (HTTP `If-None-Match` with the last `ETag`, gRPC `etag`): an unchanged digest
//! comes back as its headers alone. With 0 every answer carries the whole digest.
//!
//! cargo build --release -p omr-server --bin omrd
//! cargo run --release -p omr-server --example light_digest_load -- \
//!     [keys] [quiet] [seconds] [request_rate] [rates,comma,separated] [omrd] [refresh_messages]
//!     [conditional]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use omr_client::{Client, Keys, Registration, StartAt};
use omr_light::OMR_LIGHT_V1;
use omr_proto::v1::detector_client::DetectorClient;
use omr_proto::v1::{get_digest_response, GetDigestRequest};
use omr_test_support::measure::{cpu_model, cpu_secs, percentile, Pace};
use omr_test_support::{metric_in, with_token, Omrd, RawClient};
use serde_json::json;
use tonic::transport::Channel;

/// When each message was acknowledged, by board index.
type Posted = Arc<Mutex<std::collections::HashMap<u64, Instant>>>;
/// The tag of the digest each client holds, by (key id, over gRPC); `None`: unconditional.
type Held = Option<Arc<Mutex<std::collections::HashMap<(String, bool), String>>>>;

/// Most requests in flight at once (past it a tick waits: the load is no longer open).
const IN_FLIGHT: usize = 512;
/// gRPC connections the requests share (each an HTTP/2 connection carrying many calls).
const GRPC_CONNECTIONS: usize = 4;

/// What one answer said.
struct Answered {
    latency: f64,
    /// Messages on the board not yet detected for the key.
    lag: u64,
    /// Seconds since the newest detected message was acknowledged (when it was posted during
    /// the run).
    age: Option<f64>,
}

/// One digest request for `reg` over HTTP, or over gRPC when `grpc` is given: (lag, detected
/// up to), or an error.
async fn ask(
    api: &RawClient,
    reg: &Registration,
    grpc: Option<DetectorClient<Channel>>,
    held: &Held,
) -> anyhow::Result<(u64, u64)> {
    let slot = (reg.key_id.clone(), grpc.is_some());
    let tag = (held.as_ref()).and_then(|h| h.lock().unwrap().get(&slot).cloned());
    let keep = |etag: String| {
        if let Some(h) = held {
            h.lock().unwrap().insert(slot.clone(), etag);
        }
    };
    if let Some(mut detector) = grpc {
        let request = GetDigestRequest {
            key_id: reg.key_id.clone(),
            from: None,
            to: None,
            etag: tag,
        };
        let call = detector.get_digest(with_token(request, &reg.access_token));
        let mut stream = call.await?.into_inner();
        let mut header = None;
        while let Some(m) = stream.message().await? {
            if let Some(get_digest_response::Part::Header(h)) = m.part {
                header = Some(h);
            }
        }
        let h = header.ok_or_else(|| anyhow::anyhow!("no header"))?;
        keep(h.etag);
        return Ok((h.lag, h.detected_up_to));
    }
    let url = api.url(&format!("/v1/digests/{}", reg.key_id));
    let mut request = api.http().get(url).bearer_auth(&reg.access_token);
    if let Some(tag) = tag {
        request = request.header(reqwest::header::IF_NONE_MATCH, tag);
    }
    let response = request.send().await?;
    let status = response.status();
    anyhow::ensure!(status.is_success() || status.as_u16() == 304, "{status}");
    if let Some(etag) = response.headers().get(reqwest::header::ETAG) {
        keep(etag.to_str()?.to_string());
    }
    let number = |name: &str| -> anyhow::Result<u64> {
        let value = (response.headers().get(name)).ok_or_else(|| anyhow::anyhow!("no {name}"))?;
        Ok(value.to_str()?.parse()?)
    };
    let (lag, detected) = (number("omr-lag")?, number("omr-detected-up-to")?);
    response.bytes().await?;
    Ok((lag, detected))
}

/// Requests at `rate` per second in all until `stop`, round robin over `polled`, alternately
/// over HTTP and gRPC: every answer, and the errors.
async fn load(
    api: RawClient,
    (detectors, held): (Vec<DetectorClient<Channel>>, Held),
    polled: Arc<Vec<Registration>>,
    rate: f64,
    posted: Posted,
    stop: Arc<AtomicBool>,
) -> (Vec<Answered>, u64) {
    let answers = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(AtomicU64::new(0));
    let permits = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = tokio::task::JoinSet::new();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let permit = permits.clone().acquire_owned().await.expect("open");
        let (api, polled, posted) = (api.clone(), polled.clone(), posted.clone());
        let grpc = (n % 2 == 1).then(|| detectors[n / 2 % detectors.len()].clone());
        let (answers, errors, held) = (answers.clone(), errors.clone(), held.clone());
        tasks.spawn(async move {
            let reg = &polled[n % polled.len()];
            let started = Instant::now();
            match ask(&api, reg, grpc, &held).await {
                Ok((lag, detected)) => {
                    let now = Instant::now();
                    let newest = detected.checked_sub(1);
                    let at = newest.and_then(|i| posted.lock().unwrap().get(&i).copied());
                    answers.lock().unwrap().push(Answered {
                        latency: now.duration_since(started).as_secs_f64(),
                        lag,
                        age: at.map(|t| now.duration_since(t).as_secs_f64()),
                    });
                }
                Err(e) => {
                    if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                        eprintln!("request failed: {e:#}");
                    }
                }
            }
            drop(permit);
        });
        n += 1;
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    (answers, errors.load(Ordering::Relaxed))
}

/// Post at `rate` messages per second for `seconds` to `to` (round robin), in batches every
/// 100 ms (one message at a time below 10/s). Returns the messages posted.
async fn post(sender: &Client, to: &[Keys], rate: f64, seconds: f64, posted: &Posted) -> u64 {
    let mut pace = Pace::new(rate, seconds);
    while pace.running() {
        let n = pace.count();
        let batch: Vec<_> = (0..pace.per_tick())
            .map(|i| {
                let k = &to[(n as usize + i) % to.len()];
                (k.clue_key.clone(), format!("payload {n} {i}").into_bytes())
            })
            .collect();
        let range = sender.send_batch(&batch).await.expect("posted");
        let now = Instant::now();
        posted.lock().unwrap().extend(range.map(|i| (i, now)));
        pace.tick().await;
    }
    pace.count()
}

/// omrd's refresh counters: refreshes, passes over keys' open batches, their pool seconds,
/// digests answered with their bytes and as unchanged, group turns and the keys they served.
async fn counted(api: &RawClient) -> [f64; 7] {
    api.metric_values([
        "omr_light_refreshes_total",
        "omr_detect_open_batches_total",
        "omr_light_refresh_seconds_total",
        "omr_digest_requests_total{outcome=\"ok\"}",
        "omr_digest_requests_total{outcome=\"not_modified\"}",
        "omr_detect_group_turns_total",
        "omr_detect_group_keys_total",
    ])
    .await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let keys: usize = args.next().map_or(Ok(200), |s| s.parse())?;
    let quiet: usize = args.next().map_or(Ok(20), |s| s.parse())?;
    let seconds: f64 = args.next().map_or(Ok(30.0), |s| s.parse())?;
    let request_rate: f64 = args.next().map_or(Ok(200.0), |s| s.parse())?;
    let rates: Vec<f64> = (args.next().unwrap_or_else(|| "1,100".into()))
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let omrd: PathBuf = args
        .next()
        .unwrap_or_else(|| "target/release/omrd".into())
        .into();
    let refresh: Option<String> = args.next().filter(|m| m != "-");
    let conditional = args.next().is_none_or(|c| c != "0");
    anyhow::ensure!(
        quiet < keys,
        "quiet ({quiet}) must leave a polled key of {keys}"
    );
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let o = Omrd::spawn(&omrd, dir.path(), |cmd| {
        cmd.args(["--param-set", OMR_LIGHT_V1.name])
            .env("OMR_MAX_KEYS", (keys + 10).to_string())
            .env("OMR_MAX_BATCH_MESSAGES", "1000")
            .env("OMR_MAX_ATTACHMENT_BYTES", "0")
            .env("RUST_LOG", "warn");
        if let Some(m) = &refresh {
            cmd.env("OMR_LIGHT_REFRESH_MESSAGES", m);
        }
    });
    let (pid, api) = (o.pid(), o.client());
    let sender = Client::new(&api.url(""), api.grpc_url())?;
    // Registration, four uploads at a time (each key made on a blocking thread).
    let registering = Instant::now();
    let mut recipients: Vec<(Keys, Registration)> = Vec::new();
    while recipients.len() < keys {
        let uploads = (recipients.len()..keys.min(recipients.len() + 4)).map(|_| async {
            let make = || Keys::generate(OMR_LIGHT_V1.name, 1);
            let mut k = tokio::task::spawn_blocking(make).await??;
            let reg = (sender.register(&k.detection_key, StartAt::Now, None)).await?;
            k.detection_key = Vec::new(); // uploaded: 32.5 MB the bench does not need again
            anyhow::Ok((k, reg))
        });
        for r in futures::future::join_all(uploads).await {
            recipients.push(r?);
        }
    }
    eprintln!(
        "registered {keys} keys in {:.1} s",
        registering.elapsed().as_secs_f64()
    );
    let to: Vec<Keys> = recipients.iter().map(|(k, _)| k.clone()).collect();
    let polled: Arc<Vec<Registration>> =
        Arc::new(recipients[quiet..].iter().map(|(_, r)| r.clone()).collect());
    let quiet_regs: Vec<Registration> =
        recipients[..quiet].iter().map(|(_, r)| r.clone()).collect();
    let refresh_messages = metric_in(&api.metrics().await, "omr_light_refresh_messages");
    let every = refresh_messages.ok_or_else(|| anyhow::anyhow!("no omr_light_refresh_messages"))?;
    let every = every as u64;
    // The warm-up: one refresh mark, every polled key asked until it is detected up to it.
    let (warming, c0) = (Instant::now(), cpu_secs(pid));
    let batch: Vec<_> = (0..every)
        .map(|i| (to[i as usize % to.len()].clue_key.clone(), b"warm".to_vec()))
        .collect();
    let last = sender.send_batch(&batch).await?.end;
    let mark = last / every * every;
    let mut waiting: Vec<&Registration> = polled.iter().collect();
    while !waiting.is_empty() {
        anyhow::ensure!(
            warming.elapsed() < Duration::from_secs(600),
            "the warm-up timed out"
        );
        let mut still = Vec::new();
        for reg in waiting {
            if ask(&api, reg, None, &None).await?.1 < mark {
                still.push(reg);
            }
        }
        waiting = still;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let warm_up = json!({
        "keys": polled.len(),
        "wall_s": warming.elapsed().as_secs_f64(),
        "omrd_cpu_s": cpu_secs(pid) - c0,
    });
    eprintln!("warmed up: {warm_up}");
    let mut runs = Vec::new();
    for &rate in &rates {
        // Posting alone, nobody polling: the baseline.
        let base_posted: Posted = Posted::default();
        let c0 = cpu_secs(pid);
        let base_n = post(&sender, &to, rate, seconds, &base_posted).await;
        let base_cpu = cpu_secs(pid) - c0;
        // The same under the load.
        let posted: Posted = Posted::default();
        let stop = Arc::new(AtomicBool::new(false));
        let counted0 = counted(&api).await;
        let mut detectors = Vec::new();
        for _ in 0..GRPC_CONNECTIONS {
            detectors.push(api.detector().await);
        }
        let held: Held = conditional.then(Arc::default);
        let driver = tokio::spawn(load(
            api.clone(),
            (detectors, held),
            polled.clone(),
            request_rate,
            posted.clone(),
            stop.clone(),
        ));
        let (c1, t1) = (cpu_secs(pid), Instant::now());
        let n = post(&sender, &to, rate, seconds, &posted).await;
        stop.store(true, Ordering::Relaxed);
        let (answers, errors) = driver.await?;
        let (cpu, wall) = (cpu_secs(pid) - c1, t1.elapsed().as_secs_f64());
        let counts: Vec<f64> = (counted(&api).await.iter().zip(counted0))
            .map(|(a, b)| a - b)
            .collect();
        let extra_cpu = cpu - base_cpu * (n as f64 / base_n.max(1) as f64);
        let mut latency: Vec<f64> = answers.iter().map(|a| a.latency).collect();
        let mut lag: Vec<f64> = answers.iter().map(|a| a.lag as f64).collect();
        let mut age: Vec<f64> = answers.iter().filter_map(|a| a.age).collect();
        // The quiet keys, read once now (a status call marks its key online: not before).
        let (mut behind, mut head) = (Vec::new(), 0);
        for reg in &quiet_regs {
            let status = sender.key_status(reg).await?;
            head = status.board_head;
            let closed = status.board_head / OMR_LIGHT_V1.batch as u64 * OMR_LIGHT_V1.batch as u64;
            behind.push(closed.saturating_sub(status.cursor));
        }
        runs.push(json!({
            "board_rate_per_s": rate,
            "messages": n,
            "board_head": head,
            "requests_answered": answers.len(),
            "requests_per_s": answers.len() as f64 / wall,
            "errors": errors,
            "latency_p50_ms": percentile(&mut latency, 0.5) * 1e3,
            "latency_p99_ms": percentile(&mut latency, 0.99) * 1e3,
            "omrd_cpu_s": cpu,
            "omrd_cpu_posting_alone_s": base_cpu,
            "omrd_cores_busy": cpu / wall,
            "cpu_ms_per_message_polled_key": extra_cpu * 1e3 / (n as f64 * polled.len() as f64),
            "refreshes": counts[0],
            "refresh_passes": counts[1],
            "keys_per_refresh": counts[1] / counts[0].max(1.0),
            "refresh_pool_s": counts[2],
            "digests_answered": counts[3],
            "digests_unchanged": counts[4],
            "group_turns": counts[5],
            "keys_per_group_turn": counts[6] / counts[5].max(1.0),
            "polled_lag_p50_messages": percentile(&mut lag, 0.5),
            "polled_lag_p95_messages": percentile(&mut lag, 0.95),
            "polled_newest_detected_age_p50_s": percentile(&mut age, 0.5),
            "polled_newest_detected_age_p95_s": percentile(&mut age, 0.95),
            "quiet_keys_behind_a_closed_batch": behind.iter().filter(|&&b| b > 0).count(),
            "quiet_keys_most_behind_messages": behind.iter().max(),
        }));
        eprintln!("{}", runs.last().unwrap());
    }
    let out = json!({
        "cpu": cpu_model(),
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "keys": keys,
        "polled_keys": polled.len(),
        "quiet_keys": quiet,
        "light_refresh_messages": refresh_messages,
        "conditional": conditional,
        "request_rate_per_s": request_rate,
        "seconds_per_rate": seconds,
        "warm_up": warm_up,
        "rates": runs,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
