//! `omr bench`: the scheme's benchmark (omr-bench) with a progress bar and JSON output.

use anyhow::Context;
use clap::Args;
use omr_bench::{BenchOptions, BenchPhase};
use omr_core::ParamSet;

use crate::print_json;
use crate::ui::{self, Ui};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Parameter set to measure.
    #[arg(long, default_value = "omr-v1")]
    param_set: String,
    /// Detection threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Messages detected.
    #[arg(long, default_value_t = 8)]
    messages: usize,
    /// k̄ of the benchmarked key [default: 50, or the parameter set's maximum if lower].
    #[arg(long)]
    kbar: Option<usize>,
    /// Messages for the benchmarked recipient [default: half, at most k̄].
    #[arg(long)]
    pertinent: Option<usize>,
    /// Clues detected together (they share key loads; the server uses up to detect_batch).
    #[arg(long, default_value_t = 4)]
    batch: usize,
}

pub async fn bench(a: BenchArgs, ui: Ui, json: bool) -> anyhow::Result<()> {
    // Measuring an insecure set is harmless: no flag needed.
    let params = ParamSet::by_name(&a.param_set)
        .with_context(|| format!("unknown parameter set {:?}", a.param_set))?;
    let mut o = BenchOptions::new(params);
    o.threads = a.threads;
    o.messages = a.messages;
    o.kbar = a.kbar.unwrap_or(o.kbar);
    o.pertinent = a.pertinent.unwrap_or((a.messages / 2).min(o.kbar));
    o.batch = a.batch;
    let kbar = o.kbar;
    let pb = ui.items("benchmark", 1, "");
    let pb2 = pb.clone();
    let report = tokio::task::spawn_blocking(move || {
        omr_bench::run(&o, &move |phase, done, total| {
            let name = match phase {
                BenchPhase::Keygen => "generating keys",
                BenchPhase::Reference => "timing the reference PBS",
                BenchPhase::Detect => "detecting",
                BenchPhase::Fold => "folding",
                BenchPhase::Decode => "decoding",
            };
            pb2.set_message(name);
            pb2.set_length(total);
            pb2.set_position(done);
        })
    })
    .await??;
    pb.finish_and_clear();
    if json {
        print_json(&report);
    } else {
        let f = |k: &str| report[k].as_f64().unwrap_or(f64::NAN);
        let st = |k: &str| report["stage_ms"][k].as_f64().unwrap_or(f64::NAN);
        let n = |k: &str| report[k].as_u64().unwrap_or(0);
        println!(
            "{} on {} thread{}, {} messages, batch {}, k̄ = {}:",
            params.name,
            a.threads,
            if a.threads == 1 { "" } else { "s" },
            a.messages,
            a.batch,
            kbar
        );
        println!(
            "  detection        {:>9.1} ms/message",
            f("detect_ms_per_message")
        );
        for s in ["level1", "keyswitch", "level2", "trace", "fold"] {
            println!("    {s:<14} {:>9.1} ms", st(s));
        }
        println!(
            "  reference PBS    {:>9.1} ms (tfhe-rs KS+PBS, for machine speed)",
            f("reference_pbs_ms")
        );
        println!("  digest encode    {:>9.1} ms", f("digest_encode_ms"));
        println!("  decode           {:>9.1} ms", f("decode_ms"));
        println!("  keygen           {:>9.1} ms", f("keygen_ms"));
        println!("  key expansion    {:>9.1} ms", f("expand_ms"));
        println!("  clue             {:>9}", ui::size(n("clue_bytes")));
        println!("  clue key         {:>9}", ui::size(n("clue_key_bytes")));
        println!(
            "  detection key    {:>9} (in memory {})",
            ui::size(n("detection_key_bytes")),
            ui::size(n("detection_key_memory_bytes"))
        );
        println!("  digest           {:>9}", ui::size(n("digest_bytes")));
    }
    Ok(())
}
