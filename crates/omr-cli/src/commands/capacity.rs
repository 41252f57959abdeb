//! `omr bench-capacity`: the flags, progress bars and report of the capacity run, which lives
//! in omr-bench (`omr_bench::capacity`): how one node serves many keys through a memory budget
//! that holds few.

use clap::Args;
use indicatif::ProgressBar;
use omr_bench::capacity::{CapacityRun, Phase, Progress};

use crate::print_json;
use crate::ui::Ui;

#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// Registered keys in all (one of them online).
    #[arg(long, default_value_t = 50)]
    keys: usize,
    /// The worker's memory budget, in expanded keys.
    #[arg(long, default_value_t = 4)]
    memory_keys: u64,
    /// Milliseconds between two messages on the board.
    #[arg(long, default_value_t = 4000)]
    interval_ms: u64,
    /// Seconds of posting (then it waits for detection to catch up).
    #[arg(long, default_value_t = 600)]
    duration_secs: u64,
    /// Messages timed with the online key alone ("one detection").
    #[arg(long, default_value_t = 10)]
    baseline_messages: usize,
    /// Before measuring, post one message and wait until every key detected it (each key's
    /// first load, from the store, is then behind; the figures are the steady state's).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    warmup: bool,
    /// key_max_wait_secs of the embedded omrd.
    #[arg(long, default_value_t = 300)]
    max_wait_secs: u64,
    /// Distinct key sets generated (each registered keys/distinct times: detection costs the
    /// same whoever the key belongs to, and keygen is slow).
    #[arg(long, default_value_t = 5)]
    distinct: usize,
    /// Detection threads [default: one per core].
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// detect_batch of the embedded omrd: messages a key's batch detects and commits at once
    /// [default: omrd's]. With as many as threads, two cores show the per-batch overhead a
    /// many-core node sees with omrd's default.
    #[arg(long, default_value_t = 0)]
    detect_batch: usize,
    /// Parameter set: omr-v2, omr-v1 or omr-light-v1.
    #[arg(long, default_value = omr_api::param_sets::DEFAULT_PARAM_SET)]
    param_set: String,
    /// Use the fast insecure-test parameter set (NOT secure; to try the benchmark quickly).
    #[arg(long, conflicts_with = "param_set")]
    insecure_test_params: bool,
    /// Keep the embedded omrd's data directory here instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<std::path::PathBuf>,
}

/// The run's phases as the CLI's progress bars.
struct Bars(Ui);

impl Progress for Bars {
    fn phase(&self, label: &str, total: u64) -> Box<dyn Phase> {
        Box::new(Bar(self.0.items(label, total, "")))
    }
}

struct Bar(ProgressBar);

impl Phase for Bar {
    fn inc(&self) {
        self.0.inc(1);
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

pub async fn bench_capacity(a: CapacityArgs, ui: Ui, json_out: bool) -> anyhow::Result<()> {
    let name = (a.insecure_test_params).then_some(omr_core::INSECURE_TEST.name);
    let (set, insecure, _) = super::known_set(name.unwrap_or(&a.param_set))?;
    let run = CapacityRun {
        set,
        insecure,
        keys: a.keys,
        memory_keys: a.memory_keys,
        interval_ms: a.interval_ms,
        duration_secs: a.duration_secs,
        baseline_messages: a.baseline_messages,
        warmup: a.warmup,
        max_wait_secs: a.max_wait_secs,
        distinct: a.distinct,
        threads: a.threads,
        detect_batch: a.detect_batch,
        data_dir: a.data_dir,
    };
    let report = omr_bench::capacity::run(&run, &Bars(ui)).await?;
    if json_out {
        print_json(&report);
    } else {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}
