//! `omr bench`: the scheme's benchmark (omr-bench) with a progress bar and JSON output.

use anyhow::Context;
use clap::Args;
use omr_bench::light::{LightOptions, LightPhase};
use omr_bench::{BenchOptions, BenchPhase};
use omr_core::ParamSet;
use omr_light::LightParams;

use crate::print_json;
use crate::ui::{self, Ui};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Parameter set(s) to measure: one name, or several separated by commas
    /// (`omr-v1,omr-v2,omr-light-v1`), measured one after the other and shown side by side, each
    /// TFHE set against its own tfhe-rs KS+PBS yardstick. omr-light-v1 (linear detection) is
    /// measured over one batch of up to 4,096 messages and --keys keys.
    #[arg(long, default_value = omr_api::param_sets::DEFAULT_PARAM_SET)]
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
    /// omr-light-v1: registered keys detected over its batch (--messages is then the batch's
    /// size, default 4,096).
    #[arg(long, default_value_t = 8)]
    keys: usize,
    /// omr-light-v1: keys that share one pass over the batch's shared plaintexts.
    #[arg(long, default_value_t = 8)]
    group: usize,
    /// omr-light-v1: where the keys' passes run: `cpu` (--threads threads, --group keys a
    /// pass) or `cuda` (GPU 0, every key resident, one launch; the CUDA driver and NVRTC are
    /// loaded at run time, so put libnvrtc's folder on LD_LIBRARY_PATH). The TFHE sets run on
    /// the CPU only.
    #[arg(long, value_enum, default_value_t = BenchDevice::Cpu)]
    device: BenchDevice,
}

/// `--device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BenchDevice {
    Cpu,
    Cuda,
}

/// One set named by --param-set: a TFHE set or a linear one.
enum Set {
    Tfhe(&'static ParamSet),
    Light(&'static LightParams),
}

pub async fn bench(a: BenchArgs, ui: Ui, json: bool) -> anyhow::Result<()> {
    // Measuring an insecure set is harmless: no flag needed.
    let named = a
        .param_set
        .split(',')
        .map(|name| {
            let name = name.trim();
            match LightParams::by_name(name) {
                Some(p) => Ok(Set::Light(p)),
                None => ParamSet::by_name(name)
                    .map(Set::Tfhe)
                    .with_context(|| format!("unknown parameter set {name:?}")),
            }
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if a.device == BenchDevice::Cuda && named.iter().any(|s| matches!(s, Set::Tfhe(_))) {
        anyhow::bail!("--device cuda measures omr-light-v1 only; the TFHE sets run on the CPU");
    }
    let sets: Vec<&'static ParamSet> = named
        .iter()
        .filter_map(|s| match s {
            Set::Tfhe(p) => Some(*p),
            Set::Light(_) => None,
        })
        .collect();
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
    let mut light_reports = Vec::new();
    let mut all = Vec::with_capacity(named.len());
    for set in &named {
        match set {
            Set::Tfhe(params) => {
                let mut report = run_one(&a, params, &ui).await?;
                report["fft_plans"] = serde_json::json!(plans);
                reports.push(report.clone());
                all.push(report);
            }
            Set::Light(params) => {
                let report = run_light(&a, params, &ui).await?;
                light_reports.push(report.clone());
                all.push(report);
            }
        }
    }
    if json {
        if let [one] = all.as_slice() {
            print_json(one);
        } else {
            print_json(&serde_json::Value::Array(all));
        }
        return Ok(());
    }
    if reports.is_empty() {
        print_light_table(&light_reports);
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
    print_light_table(&light_reports);
    Ok(())
}

/// Run the linear scheme's benchmark under a progress bar.
async fn run_light(
    a: &BenchArgs,
    params: &'static LightParams,
    ui: &Ui,
) -> anyhow::Result<serde_json::Value> {
    let mut o = LightOptions::new(params);
    o.threads = a.threads;
    // --messages defaults to 8 for the TFHE sets; the linear set detects whole batches.
    o.messages = if a.messages == 8 {
        params.batch
    } else {
        a.messages
    };
    o.keys = a.keys;
    o.group = a.group;
    o.device = match a.device {
        BenchDevice::Cpu => omr_bench::light::Device::Cpu,
        BenchDevice::Cuda => omr_bench::light::Device::Cuda,
    };
    o.pertinent = (o.messages / o.keys).min(16);
    let pb = ui.items(format!("benchmark {}", params.name), 1, "");
    let pb2 = pb.clone();
    let report = tokio::task::spawn_blocking(move || {
        omr_bench::light::run(&o, &move |phase, done, total| {
            let name = match phase {
                LightPhase::Keygen => "generating keys",
                LightPhase::Clues => "making clues",
                LightPhase::Shared => "preparing the batch",
                LightPhase::Detect => "detecting",
                LightPhase::Decode => "decoding",
            };
            pb2.set_message(name);
            pb2.set_length(total);
            pb2.set_position(done);
        })
    })
    .await?
    .map_err(|e| anyhow::anyhow!("omr-light benchmark: {e}"))?;
    pb.finish_and_clear();
    Ok(report)
}

/// One column per linear-scheme report.
fn print_light_table(reports: &[serde_json::Value]) {
    if reports.is_empty() {
        return;
    }
    let row = |label: &str, cell: &dyn Fn(&serde_json::Value) -> String| {
        let cells: String = reports.iter().map(|r| format!("{:>16}", cell(r))).collect();
        println!("  {label:<30}{cells}");
    };
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap_or(0);
    row("", &|r| r["param_set"].as_str().unwrap_or("?").to_string());
    row("messages × keys (group)", &|r| {
        format!(
            "{} × {} ({})",
            n(r, "messages"),
            n(r, "keys"),
            n(r, "group")
        )
    });
    row("device", &|r| match r["gpu"].as_str() {
        Some(gpu) => gpu.to_string(),
        None => format!("cpu ×{}", n(r, "threads")),
    });
    row("detection µs/(message, key)", &|r| {
        format!("{:.4}", f(r, "detect_us_per_message_key"))
    });
    if reports.iter().any(|r| r["gpu"].is_string()) {
        row("  GPU kernel ns", &|r| {
            format!("{:.2}", f(r, "gpu_kernel_ns_per_message_key"))
        });
        row("  GPU kernel GB/s", &|r| {
            format!("{:.0}", f(r, "gpu_kernel_gb_per_s"))
        });
        row("  host finish ns", &|r| {
            format!("{:.2}", f(r, "gpu_host_finish_ns_per_message_key"))
        });
        row("  resident keys", &|r| n(r, "resident_keys").to_string());
    }
    row("  one key alone", &|r| {
        format!("{:.2}", f(r, "detect_us_per_message_key_alone"))
    });
    row("shared µs/message", &|r| {
        format!("{:.1}", f(r, "shared_us_per_message"))
    });
    row("  in a spent batch's buffers", &|r| {
        format!("{:.1}", f(r, "shared_us_per_message_reused"))
    });
    row("digest B/message", &|r| {
        format!("{:.2}", f(r, "digest_bytes_per_message"))
    });
    row("false positives (log2)", &|r| {
        format!("{:.2}", f(r, "false_positive_log2"))
    });
    row("clue", &|r| ui::size(n(r, "clue_bytes")));
    row("detection key", &|r| ui::size(n(r, "detection_key_bytes")));
    row("  in memory", &|r| {
        ui::size(n(r, "detection_key_memory_bytes"))
    });
    row("sync k = 50 among 2^16", &|r| {
        ui::size(n(r, "sync_bytes_k50_2p16"))
    });
    row("keygen ms", &|r| format!("{:.0}", f(r, "keygen_ms")));
    row("decode ms for 2^16", &|r| {
        format!("{:.1}", f(r, "decode_ms_2p16"))
    });
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
