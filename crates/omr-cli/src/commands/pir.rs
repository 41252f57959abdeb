//! `omr bench-pir`: what fetching an attachment by PIR costs (omr-pir, no server needed); the run
//! is omr-bench's (`omr_bench::pir`), this is its flags and its report.
//!
//! Builds a database of `--records` random records of `--record-bytes` (the shape of one epoch of
//! attachments), times the server's preprocessing (the hint) once, then `--fetches` fetches of
//! random records: the client's queries, the server's answer and the client's decoding, each
//! checked byte for byte against the record. Reports the bytes of the hint, a query and an
//! answer as encoded, wall and CPU time of each step (CPU from /proc/self/stat), the process's
//! peak memory (VmHWM), and the predicted failure probability per record.

use clap::Args;
use omr_pir::Shape;
use serde_json::Value;

use crate::print_json;
use crate::ui::{self, Ui};

#[derive(Debug, Args)]
pub struct PirBenchArgs {
    /// Records in the database (messages of one epoch).
    #[arg(long, default_value_t = 4096)]
    records: usize,
    /// Bytes of every record (`max_attachment_bytes`).
    #[arg(long, default_value_t = 65536)]
    record_bytes: usize,
    /// Columns per record; by default what omrd uses for attachments (16 for 64 KiB).
    #[arg(long)]
    chunks: Option<usize>,
    /// Fetches timed (each a random record, checked byte for byte).
    #[arg(long, default_value_t = 3)]
    fetches: usize,
}

pub async fn bench_pir(a: PirBenchArgs, ui: Ui, json_out: bool) -> anyhow::Result<()> {
    let mut shape = Shape::for_records(a.records, a.record_bytes)?;
    if let Some(chunks) = a.chunks {
        shape.chunks = chunks;
        shape.check()?;
    }
    let pb = ui.spinner("preprocessing (the hint)");
    let pb2 = pb.clone();
    let fetches = a.fetches.max(1);
    let report = tokio::task::spawn_blocking(move || {
        omr_bench::pir::run(shape, fetches, &|step: &str| {
            pb2.set_message(step.to_string())
        })
    })
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
    let mib = |v: &Value| v.as_f64().unwrap_or(0.0) / (1u64 << 20) as f64;
    let s = |v: &Value| match v.as_f64() {
        Some(x) => ui::secs_ms(std::time::Duration::from_secs_f64(x)),
        None => "?".into(),
    };
    println!(
        "PIR ({}) on {} ({} cores, {} kernels): {} records of {} bytes, {} chunks each",
        r["params"].as_str().unwrap_or("?"),
        r["cpu"].as_str().unwrap_or("?"),
        r["cores"],
        r["vector_extension"].as_str().unwrap_or("?"),
        r["records"],
        r["record_bytes"],
        r["chunks"],
    );
    println!(
        "  preprocessing: {} ({} of CPU), peak memory {:.0} MiB",
        s(&r["preprocess_s"]),
        s(&r["preprocess_cpu_s"]),
        r["peak_rss_mib"].as_f64().unwrap_or(f64::NAN),
    );
    println!(
        "  one fetch: hint {:.2} MiB + query {:.2} MiB + answer {:.1} KiB = {:.2} MiB",
        mib(&r["hint_bytes"]),
        mib(&r["query_bytes"]),
        r["answer_bytes"].as_f64().unwrap_or(0.0) / 1024.0,
        mib(&r["fetch_bytes"]),
    );
    println!(
        "  median of {} fetches: server {} ({} of CPU), client query {}, decode {}",
        r["fetches"].as_array().map_or(0, Vec::len),
        s(&r["median_answer_s"]),
        s(&r["median_answer_cpu_s"]),
        s(&r["median_query_s"]),
        s(&r["median_decode_s"]),
    );
    println!(
        "  every fetch came back byte for byte; predicted failure per record 2^{:.0}",
        r["log2_record_failure"].as_f64().unwrap_or(0.0)
    );
}
