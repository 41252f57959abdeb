//! omr-light-v1 as a streaming service, measured on one omrd node (the real executable, its CPU
//! read from /proc, the embedded SQLite store, no attachments): `online` recipients, each an SDK
//! client polling `Client::retrieve` every second (the default client: at most 256 messages
//! behind, it reads the board's tail itself), while a sender posts at each of `rates` messages
//! per second for `seconds`, every message to one of the recipients. Per rate:
//! - payload latency, from the post's 201 to the payload in the recipient's hands (p50, p95);
//! - omrd's CPU per (new message, online key): the node's CPU over the run minus the same run's
//!   posting alone (measured first, with nobody polling), over messages × recipients;
//! - bytes a recipient downloads per new board message;
//! - omrd's cores busy and resident memory while they are online (and per online key, against
//!   the same process idle after the registrations).
//!
//! The registrations (four uploads at a time) are timed first.
//!
//! With `attach` > 0 the server takes attachments (up to 64 KiB) and every tenth message is a
//! sealed letter with an attachment of `attach` bytes, posted on its own: the recipients read
//! them from the tail's pages, and each rate also reports the attachments' latency (post's 201
//! to the sealed attachment in the recipient's hands).
//!
//! With `returning` = 1 each rate's recipients come back from their registration's start, the
//! board having grown since (every run before this one posted to it): each one's first sync is
//! more than the tail behind, so it asks for its digest (which tells the server it is online)
//! and a fetch round, then it polls as the others do. This measures what a recipient that was
//! away costs the server afterwards.
//!
//! With `follow` = 1 every recipient follows instead, as `omr digest --follow` does: it waits
//! for news with `Client::wait_for_news` (on this lane a pause of `LIGHT_FOLLOW_POLL`), then
//! retrieves, so the latencies are those of a following recipient.
//!
//! Then a quiet board: single messages posted `quiet_gap` seconds apart, plus a random part of a
//! second so that posts and polls do not run in step (latency only). Prints JSON.
//!
//! cargo build --release -p omr-server --bin omrd
//! cargo run --release -p omr-server --example light_stream_bench -- \
//!     [online] [seconds] [quiet_gap] [rates,comma,separated] [omrd] [attach] [returning] [follow]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use omr_client::{Address, Client, DigestState, Keys, Registration, SealKey, StartAt};
use omr_light::OMR_LIGHT_V1;
use omr_test_support::measure::{cpu_model, cpu_secs, percentile, status_bytes, Pace};
use omr_test_support::Omrd;
use serde_json::json;

/// When each message was acknowledged, by board index.
type Posted = Arc<Mutex<std::collections::HashMap<u64, Instant>>>;

/// How a recipient learns of new messages: `Poll`, a retrieval every second; `Follow`, the loop
/// of `omr digest --follow` (`Client::wait_for_news` after each retrieval).
#[derive(Clone, Copy)]
enum Mode {
    Poll,
    Follow,
}

/// One recipient polling (or following) until `stop`, from the board's head (or, `returning`,
/// from its registration's start): the latencies of its payloads and of its attachments
/// (`attached`: when each message with one was acknowledged), in seconds, and the bytes it
/// downloaded.
async fn poll(
    client: Client,
    (keys, reg, returning, mode): (Keys, Registration, bool, Mode),
    (posted, attached): (Posted, Posted),
    stop: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
) -> (Vec<f64>, Vec<f64>) {
    let mut state = DigestState::new(&reg);
    if !returning {
        state.next_from = client.params().await.expect("params").board_head;
    }
    let (mut latencies, mut attachments) = (Vec::new(), Vec::new());
    while !stop.load(Ordering::Relaxed) {
        let got = (client.retrieve(&keys.secret, &reg, &mut state, None).await).expect("sync");
        let now = Instant::now();
        let pir = got.pir.map_or(0, |p| p.bytes_down);
        let tail = got.tail.map_or(0, |t| t.bytes);
        bytes.fetch_add(got.digest_bytes as u64 + pir + tail, Ordering::Relaxed);
        for m in &got.messages {
            let p = posted.lock().unwrap();
            if let Some(t) = p.get(&m.index).or(attached.lock().unwrap().get(&m.index)) {
                latencies.push(now.duration_since(*t).as_secs_f64());
            }
        }
        for index in got.attachments.keys() {
            if let Some(t) = attached.lock().unwrap().get(index) {
                attachments.push(now.duration_since(*t).as_secs_f64());
            }
        }
        match mode {
            Mode::Poll => tokio::time::sleep(Duration::from_secs(1)).await,
            Mode::Follow => {
                let news = client.wait_for_news(&keys.secret, &reg, state.next_from);
                news.await.expect("wait for news");
            }
        }
    }
    (latencies, attachments)
}

/// Every tenth message of a run with attachments: a sealed letter to `to` with `attachment`.
struct Attaching<'a> {
    to: &'a [Address],
    attachment: &'a [u8],
}

/// Post at `rate` messages per second for `seconds`, each to one of `to` (round robin), in
/// batches every 100 ms (one message at a time below 10/s); with `attaching`, every tenth
/// message has an attachment and is posted on its own (its time in `attached`). Returns the
/// messages posted.
async fn post(
    client: &Client,
    to: &[Keys],
    rate: f64,
    seconds: f64,
    (posted, attached): (&Posted, &Posted),
    attaching: Option<&Attaching<'_>>,
) -> u64 {
    let mut pace = Pace::new(rate, seconds);
    while pace.running() {
        let (n, per_tick) = (pace.count(), pace.per_tick());
        let with = |i: usize| attaching.filter(|_| (n as usize + i).is_multiple_of(10));
        let batch: Vec<_> = (0..per_tick)
            .filter(|&i| with(i).is_none())
            .map(|i| {
                let k = &to[(n as usize + i) % to.len()];
                (k.clue_key.clone(), format!("payload {n} {i}").into_bytes())
            })
            .collect();
        for i in (0..per_tick).filter(|&i| with(i).is_some()) {
            let a = with(i).expect("filtered");
            let address = &a.to[(n as usize + i) % a.to.len()];
            let sent = client.send_with_attachment(address, b"see attached", a.attachment, None);
            let index = sent.await.expect("posted").index;
            attached.lock().unwrap().insert(index, Instant::now());
        }
        if !batch.is_empty() {
            let range = client.send_batch(&batch).await.expect("posted");
            let now = Instant::now();
            posted
                .lock()
                .unwrap()
                .extend(range.map(|index| (index, now)));
        }
        pace.tick().await;
    }
    pace.count()
}

/// omrd's counters over a run (from the recipients coming online to the end): messages
/// detected (summed over keys), open batches detected because a recipient asked (each a pass
/// over its key; 0 from an omrd that does not count them), digests served, payload fetch rounds
/// answered and their seconds.
async fn counted(api: &omr_test_support::RawClient) -> [f64; 5] {
    api.metric_values([
        "omr_detections_total",
        "omr_detect_open_batches_total",
        "omr_digest_requests_total{outcome=\"ok\"}",
        "omr_pir_answer_seconds_count",
        "omr_pir_answer_seconds_sum",
    ])
    .await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let online: usize = args.next().map_or(Ok(50), |s| s.parse())?;
    let seconds: f64 = args.next().map_or(Ok(20.0), |s| s.parse())?;
    let quiet_gap: f64 = args.next().map_or(Ok(5.0), |s| s.parse())?;
    let rates: Vec<f64> = (args.next().unwrap_or_else(|| "1,10,100".into()))
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let omrd: PathBuf = args
        .next()
        .unwrap_or_else(|| "target/release/omrd".into())
        .into();
    let attach: usize = args.next().map_or(Ok(0), |s| s.parse())?;
    let returning = args.next().is_some_and(|s| s == "1");
    let mode = match args.next().as_deref() {
        Some("1") => Mode::Follow,
        _ => Mode::Poll,
    };
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let o = Omrd::spawn(&omrd, dir.path(), |cmd| {
        cmd.args(["--param-set", OMR_LIGHT_V1.name])
            .env("OMR_MAX_KEYS", (online + 10).to_string())
            .env("OMR_MAX_BATCH_MESSAGES", "1000")
            .env(
                "OMR_MAX_ATTACHMENT_BYTES",
                if attach > 0 { "65536" } else { "0" },
            )
            .env("RUST_LOG", "warn");
    });
    let (pid, api) = (o.pid(), o.client());
    let (http, grpc) = (api.url(""), api.grpc_url().to_string());
    let sender = Client::new(&http, &grpc)?;
    // Registration, four uploads at a time (each key made on a blocking thread).
    let (registering, c0) = (Instant::now(), cpu_secs(pid));
    let mut recipients = Vec::new();
    while recipients.len() < online {
        let uploads = (recipients.len()..online.min(recipients.len() + 4)).map(|_| async {
            let make = || Keys::generate(OMR_LIGHT_V1.name, 1);
            let mut keys = tokio::task::spawn_blocking(make).await??;
            let reg = (sender.register(&keys.detection_key, StartAt::Now, None)).await?;
            // Uploaded: 32.5 MB a key that the bench does not need again (500 of them do not
            // fit in 24 GiB beside the rest).
            keys.detection_key = Vec::new();
            anyhow::Ok((keys, reg))
        });
        for r in futures::future::join_all(uploads).await {
            recipients.push(r?);
        }
    }
    let registration = json!({
        "keys": online,
        "wall_s": registering.elapsed().as_secs_f64(),
        "omrd_cpu_s": cpu_secs(pid) - c0,
    });
    eprintln!("registered: {registration}");
    let rss_idle = status_bytes(pid, "VmRSS");
    let to: Vec<Keys> = recipients.iter().map(|(k, _)| k.clone()).collect();
    // Sealed letters with attachments go to these addresses (the keys' clue keys and seals of
    // their own; the bench times the attachments' arrival, it does not open them).
    let addresses: Vec<Address> = (to.iter())
        .map(|k| Address {
            clue_key: k.clue_key.clone(),
            seal: SealKey::generate().public().clone(),
        })
        .collect();
    let attachment: Vec<u8> = (0..attach).map(|i| (i % 251) as u8).collect();
    let attaching = Attaching {
        to: &addresses,
        attachment: &attachment,
    };
    let attaching = (attach > 0).then_some(&attaching);
    let mut runs = Vec::new();
    for &rate in &rates {
        // Posting alone, nobody polling: the baseline.
        let (posted, attached): (Posted, Posted) = Default::default();
        let c0 = cpu_secs(pid);
        let times = (&posted, &attached);
        let base_n = post(&sender, &to, rate, seconds, times, attaching).await;
        let base_cpu = cpu_secs(pid) - c0;
        // The same with every recipient online.
        let (posted, attached): (Posted, Posted) = Default::default();
        let stop = Arc::new(AtomicBool::new(false));
        let bytes = Arc::new(AtomicU64::new(0));
        let pollers: Vec<_> = (recipients.iter())
            .map(|(k, r)| {
                let client = Client::new(&http, &grpc).expect("client");
                let times = (posted.clone(), attached.clone());
                let who = (k.clone(), r.clone(), returning, mode);
                tokio::spawn(poll(client, who, times, stop.clone(), bytes.clone()))
            })
            .collect();
        let counted0 = counted(&api).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (c1, b1, t1) = (cpu_secs(pid), bytes.load(Ordering::Relaxed), Instant::now());
        let n = post(&sender, &to, rate, seconds, (&posted, &attached), attaching).await;
        let rss_online = status_bytes(pid, "VmRSS");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (cpu, got_bytes) = (cpu_secs(pid) - c1, bytes.load(Ordering::Relaxed) - b1);
        let cores_busy = cpu / t1.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let (mut latencies, mut attachments) = (Vec::new(), Vec::new());
        for p in pollers {
            let (l, a) = p.await?;
            latencies.extend(l);
            attachments.extend(a);
        }
        let counted1 = counted(&api).await;
        let counts: Vec<f64> = (counted1.iter().zip(counted0))
            .map(|(a, b)| a - b)
            .collect();
        let extra_cpu = cpu - base_cpu * (n as f64 / base_n.max(1) as f64);
        runs.push(json!({
            "rate_per_s": rate,
            "messages": n,
            "payloads_received": latencies.len(),
            "latency_p50_s": percentile(&mut latencies, 0.5),
            "latency_p95_s": percentile(&mut latencies, 0.95),
            "attachment_bytes": attach,
            "attachments_posted": attached.lock().unwrap().len(),
            "attachments_received": attachments.len(),
            "attachment_latency_p50_s": percentile(&mut attachments, 0.5),
            "attachment_latency_p95_s": percentile(&mut attachments, 0.95),
            "omrd_cpu_s": cpu,
            "omrd_cpu_posting_alone_s": base_cpu,
            "omrd_cores_busy": cores_busy,
            "omrd_rss_bytes": rss_online,
            "rss_bytes_per_online_key": (rss_online as f64 - rss_idle as f64) / online as f64,
            "cpu_ms_per_message_online_key": extra_cpu * 1e3 / (n as f64 * online as f64),
            "bytes_per_online_key_per_message": got_bytes as f64 / (n as f64 * online as f64),
            "detections": counts[0],
            "open_batch_passes": counts[1],
            "digest_requests": counts[2],
            "fetch_rounds": counts[3],
            "fetch_round_seconds": counts[4],
        }));
        eprintln!("{}", runs.last().unwrap());
    }
    // A quiet board: one message at a time, `quiet_gap` seconds apart, one recipient polling
    // (or following).
    let (posted, attached): (Posted, Posted) = Default::default();
    let stop = Arc::new(AtomicBool::new(false));
    let (k, r) = recipients[0].clone();
    let client = Client::new(&http, &grpc)?;
    let bytes = Arc::new(AtomicU64::new(0));
    let poller = tokio::spawn(poll(
        client,
        (k.clone(), r, false, mode),
        (posted.clone(), attached.clone()),
        stop.clone(),
        bytes,
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    for _ in 0..5 {
        // At a random point of the poller's second, so that the two do not run in step.
        let phase = rand::random::<f64>();
        tokio::time::sleep(Duration::from_secs_f64(quiet_gap + phase)).await;
        let times = (&posted, &attached);
        post(&sender, std::slice::from_ref(&k), 1.0, 0.5, times, None).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut quiet, _) = poller.await?;
    let out = json!({
        "cpu": cpu_model(),
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "online_keys": online,
        "returning": returning,
        "following": matches!(mode, Mode::Follow),
        "registration": registration,
        "omrd_rss_idle_bytes": rss_idle,
        "seconds_per_rate": seconds,
        "rates": runs,
        "quiet_board": {
            "gap_s": quiet_gap,
            "payloads": quiet.len(),
            "latency_p50_s": percentile(&mut quiet, 0.5),
            "latency_p95_s": percentile(&mut quiet, 0.95),
        },
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
