//! The run behind `omr bench-postage`: what postage costs. For each number of bits, the time to solve stamps
//! (the SDK's solver, `omr_client::postage::solve`) for the same random messages on one thread
//! and on several, and the cost of the server's check (`Postage::new` over the clue and payload
//! as posted, then one hash with the nonce: what omrd does per message before queueing).
//!
//! The smallest nonce that meets the bits does not depend on the thread count, so every thread
//! count does exactly the same search for a message and the speed-up is measured without the
//! luck of the draw. Solve times are geometric (standard deviation ≈ mean): the mean over
//! `--runs` messages is reported with the hash rate, which gives the expected time
//! (2^bits / rate) without that noise. Each series also reports the CPU time the process used
//! (from /proc/self/stat, 10 ms ticks): on a shared machine the hashes per CPU second are what a
//! sender pays, whatever else competes for the cores.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use omr_client::postage::{solve, Stamp};
use omr_core::{keygen, Message, ParamSet, Postage};
use rand::Rng;
use serde_json::{json, Value};

use crate::host::process_cpu_secs;

/// What to run: the CLI's `omr bench-postage` flags.
#[derive(Debug, Clone)]
pub struct PostageRun {
    /// Leading zero bits to solve for.
    pub bits: Vec<u32>,
    /// Messages solved per number of bits (each on every thread count).
    pub runs: usize,
    /// Thread counts (0: every core).
    pub threads: Vec<usize>,
    /// Stamp checks timed.
    pub checks: usize,
}

/// Solve stamps for `a.runs` random messages of `params` at each number of bits and thread
/// count (`solved` hears each solve), then time the server's check; the report as JSON.
pub fn run(
    a: &PostageRun,
    params: &'static ParamSet,
    solved: &(dyn Fn() + Sync),
) -> anyhow::Result<Value> {
    let clue_key = keygen(params, 1)?.clue_key;
    let mut rng = rand::thread_rng();
    let mut messages: Vec<Message> = (0..a.runs.max(1))
        .map(|_| {
            let payload: Vec<u8> = (0..params.payload_bytes).map(|_| rng.gen()).collect();
            Message::new(clue_key.make_clue(), payload)
        })
        .collect::<Result<_, _>>()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let never = AtomicBool::new(false);
    let mut solves = Vec::new();
    for &bits in &a.bits {
        for &threads in &a.threads {
            let mut stamps: Vec<Stamp> = Vec::new();
            let cpu = process_cpu_secs();
            for m in &mut messages {
                let stamp = solve(&m.postage(), bits, threads, &AtomicU64::new(0), &never)?;
                m.nonce = Some(stamp.nonce);
                stamps.push(stamp);
                solved();
            }
            let cpu_s = cpu.zip(process_cpu_secs()).map(|(a, b)| b - a);
            solves.push(summary(bits, &stamps, cpu_s));
        }
    }
    // The check, on messages stamped for the last number of bits (or unstamped).
    let bits = a.bits.last().copied().unwrap_or(0);
    let posted: Vec<(Vec<u8>, &[u8], Option<u64>)> = messages
        .iter()
        .map(|m| (m.clue.to_bytes(), &m.payload[..], m.nonce))
        .collect();
    let checks = a.checks.max(1);
    let cpu = process_cpu_secs();
    let started = Instant::now();
    let mut passed = 0usize;
    for i in 0..checks {
        let (clue, payload, nonce) = &posted[i % posted.len()];
        passed += usize::from(
            Postage::new(params, clue, payload)
                .check(bits, *nonce)
                .is_ok(),
        );
    }
    let check_ns = started.elapsed().as_nanos() as f64 / checks as f64;
    let check_cpu_us = cpu
        .zip(process_cpu_secs())
        .map(|(a, b)| (b - a) * 1e6 / checks as f64);
    anyhow::ensure!(
        bits == 0 || passed == checks,
        "a solved stamp failed its check"
    );
    Ok(json!({
        "param_set": params.name,
        "cpu": crate::host::cpu_model(),
        "cores": cores,
        "message_bytes": posted[0].0.len() + posted[0].1.len(),
        "runs": messages.len(),
        "solves": solves,
        "check_us": check_ns / 1e3,
        "check_cpu_us": check_cpu_us,
        "checks": checks,
    }))
}

/// Mean, median, min and max solve time and the hash rate of one (bits, threads) series;
/// `cpu_s`: the CPU seconds the series took.
fn summary(bits: u32, stamps: &[Stamp], cpu_s: Option<f64>) -> Value {
    let threads = stamps.first().map_or(0, |s| s.threads);
    let mut secs: Vec<f64> = stamps.iter().map(|s| s.elapsed.as_secs_f64()).collect();
    secs.sort_by(f64::total_cmp);
    let n = secs.len().max(1) as f64;
    let total: f64 = secs.iter().sum();
    let hashes: u64 = stamps.iter().map(|s| s.hashes).sum();
    let rate = hashes as f64 / total.max(1e-9);
    json!({
        "bits": bits,
        "threads": threads,
        "mean_s": total / n,
        "median_s": secs.get(secs.len() / 2).copied().unwrap_or(0.0),
        "min_s": secs.first().copied().unwrap_or(0.0),
        "max_s": secs.last().copied().unwrap_or(0.0),
        "mean_hashes": hashes as f64 / n,
        "hashes_per_s": rate,
        "expected_s": 2f64.powi(bits as i32) / rate,
        "cpu_s_per_solve": cpu_s.map(|c| c / n),
        "hashes_per_cpu_s": cpu_s.filter(|&c| c > 0.0).map(|c| hashes as f64 / c),
    })
}
