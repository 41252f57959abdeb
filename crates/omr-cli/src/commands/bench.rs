//! `omr bench`: the scheme's benchmark (omr-bench) with a progress bar and JSON output.

use anyhow::Context;
use clap::Args;
use omr_bench::{BenchOptions, BenchPhase};
use omr_core::ParamSet;

use crate::print_json;
use crate::ui::{self, Ui};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Parameter set(s) to measure: one name, or several separated by commas
    /// (`omr-v1,omr-v2`), measured one after the other and shown side by side, each against its
    /// own tfhe-rs KS+PBS yardstick.
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
    let sets = a
        .param_set
        .split(',')
        .map(|name| {
            ParamSet::by_name(name.trim())
                .with_context(|| format!("unknown parameter set {:?}", name.trim()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // tfhe-rs's FFT plans, measured once for every size the sets use before anything transforms
    // (as omrd pins them), and reported: tfhe-rs times its candidates once each, so two runs on
    // one machine may not use the same plan, and a report should say which it used.
    let mut plans = String::new();
    for &params in &sets {
        let pinned = omr_core::pin_fft_plans(params, &plans);
        plans.push_str(&pinned);
    }
    let plans: Vec<&str> = {
        let mut lines: Vec<&str> = plans.lines().collect();
        lines.sort_unstable();
        lines.dedup();
        lines
    };
    let mut reports = Vec::with_capacity(sets.len());
    for &params in &sets {
        let mut report = run_one(&a, params, &ui).await?;
        report["fft_plans"] = serde_json::json!(plans);
        reports.push(report);
    }
    if json {
        if let [one] = reports.as_slice() {
            print_json(one);
        } else {
            print_json(&serde_json::Value::Array(reports));
        }
        return Ok(());
    }
    println!(
        "{} thread{}, {} messages, batch {}:",
        a.threads,
        if a.threads == 1 { "" } else { "s" },
        a.messages,
        a.batch,
    );
    print_table(&reports);
    println!("  FFT plans (size algorithm base): {}", plans.join(", "));
    Ok(())
}

/// Run the benchmark of one set under a progress bar.
async fn run_one(
    a: &BenchArgs,
    params: &'static ParamSet,
    ui: &Ui,
) -> anyhow::Result<serde_json::Value> {
    let mut o = BenchOptions::new(params);
    o.threads = a.threads;
    o.messages = a.messages;
    o.kbar = a.kbar.unwrap_or(o.kbar);
    o.pertinent = a.pertinent.unwrap_or((a.messages / 2).min(o.kbar));
    o.batch = a.batch;
    let pb = ui.items(format!("benchmark {}", params.name), 1, "");
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
    Ok(report)
}

/// One column per report.
fn print_table(reports: &[serde_json::Value]) {
    let row = |label: &str, cell: &dyn Fn(&serde_json::Value) -> String| {
        let cells: String = reports.iter().map(|r| format!("{:>16}", cell(r))).collect();
        println!("  {label:<22}{cells}");
    };
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap_or(0);
    row("", &|r| r["param_set"].as_str().unwrap_or("?").to_string());
    row("k̄", &|r| n(r, "kbar").to_string());
    row("detection ms/message", &|r| {
        format!("{:.1}", f(r, "detect_ms_per_message"))
    });
    row("  in KS+PBS", &|r| format!("{:.2} PBS", f(r, "detect_pbs")));
    for s in ["level1", "keyswitch", "level2", "trace", "fold"] {
        row(&format!("  {s} ms"), &|r| {
            format!("{:.1}", r["stage_ms"][s].as_f64().unwrap_or(f64::NAN))
        });
    }
    row("reference PBS ms", &|r| {
        format!("{:.1}", f(r, "reference_pbs_ms"))
    });
    row("digest encode ms", &|r| {
        format!("{:.1}", f(r, "digest_encode_ms"))
    });
    row("decode ms", &|r| format!("{:.1}", f(r, "decode_ms")));
    row("keygen ms", &|r| format!("{:.0}", f(r, "keygen_ms")));
    row("key expansion ms", &|r| format!("{:.0}", f(r, "expand_ms")));
    row("clue", &|r| ui::size(n(r, "clue_bytes")));
    row("clue key", &|r| ui::size(n(r, "clue_key_bytes")));
    row("detection key", &|r| ui::size(n(r, "detection_key_bytes")));
    row("  in memory", &|r| {
        ui::size(n(r, "detection_key_memory_bytes"))
    });
    row("digest", &|r| ui::size(n(r, "digest_bytes")));
    println!("  (reference PBS: one tfhe-rs KS+PBS at PARAM_MESSAGE_2_CARRY_2_KS_PBS, for machine speed)");
}
