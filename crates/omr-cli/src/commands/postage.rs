//! `omr bench-postage`: what postage costs (the run is omr-bench's, `omr_bench::postage`; this is
//! its flags and its report). For each number of bits, the time to solve stamps
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

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use omr_bench::postage::PostageRun;
use omr_core::ParamSet;
use serde_json::Value;

use crate::print_json;
use crate::ui::{self, Ui};

#[derive(Debug, Args)]
pub struct PostageBenchArgs {
    /// Leading zero bits to solve for, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [16, 20, 24])]
    bits: Vec<u32>,
    /// Messages solved per number of bits (each on every thread count).
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Thread counts, comma-separated (0: every core).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 0])]
    threads: Vec<usize>,
    /// Stamp checks timed.
    #[arg(long, default_value_t = 200_000)]
    checks: usize,
    /// Parameter set of the messages (the clue's size sets the check's cost).
    #[arg(long, default_value = omr_api::param_sets::DEFAULT_PARAM_SET)]
    param_set: String,
}

pub async fn bench_postage(a: PostageBenchArgs, ui: Ui, json_out: bool) -> anyhow::Result<()> {
    let params = ParamSet::by_name(&a.param_set)
        .with_context(|| format!("unknown parameter set {:?}", a.param_set))?;
    let total = (a.bits.len() * a.runs.max(1) * a.threads.len()) as u64;
    let pb = ui.items("solving stamps", total, "solves");
    let pb2 = pb.clone();
    let run = PostageRun {
        bits: a.bits,
        runs: a.runs,
        threads: a.threads,
        checks: a.checks,
    };
    let report =
        tokio::task::spawn_blocking(move || omr_bench::postage::run(&run, params, &|| pb2.inc(1)))
            .await??;
    pb.finish_and_clear();
    if json_out {
        print_json(&report);
    } else {
        print_text(&report);
    }
    Ok(())
}

fn print_text(r: &Value) {
    println!(
        "postage on {} ({} cores), {} messages of {} bytes per series ({}):",
        r["cpu"].as_str().unwrap_or("?"),
        r["cores"],
        r["runs"],
        r["message_bytes"],
        r["param_set"].as_str().unwrap_or("?"),
    );
    println!(
        "  {:>4} {:>7} {:>10} {:>10} {:>10} {:>10} {:>12} {:>11} {:>10} {:>14}",
        "bits",
        "threads",
        "mean",
        "median",
        "min",
        "max",
        "hashes/s",
        "2^bits/rate",
        "CPU/solve",
        "hashes/CPU s"
    );
    let d = |v: &Value| ui::secs_ms(Duration::from_secs_f64(v.as_f64().unwrap_or(0.0)));
    for s in r["solves"].as_array().into_iter().flatten() {
        println!(
            "  {:>4} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10.2} M {:>11} {:>10} {:>12.2} M",
            s["bits"].as_u64().unwrap_or(0),
            s["threads"].as_u64().unwrap_or(0),
            d(&s["mean_s"]),
            d(&s["median_s"]),
            d(&s["min_s"]),
            d(&s["max_s"]),
            s["hashes_per_s"].as_f64().unwrap_or(0.0) / 1e6,
            d(&s["expected_s"]),
            d(&s["cpu_s_per_solve"]),
            s["hashes_per_cpu_s"].as_f64().unwrap_or(0.0) / 1e6,
        );
    }
    println!(
        "  check (what omrd does per message): {:.2} µs ({:.2} µs of CPU) over {} checks",
        r["check_us"].as_f64().unwrap_or(0.0),
        r["check_cpu_us"].as_f64().unwrap_or(f64::NAN),
        r["checks"]
    );
}
