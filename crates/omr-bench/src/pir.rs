//! The run behind `omr bench-pir`: what fetching an attachment by PIR costs (omr-pir, no server
//! needed).
//!
//! Builds a database of `--records` random records of `--record-bytes` (the shape of one epoch of
//! attachments), times the server's preprocessing (the hint) once, then `--fetches` fetches of
//! random records: the client's queries, the server's answer and the client's decoding, each
//! checked byte for byte against the record. Reports the bytes of the hint, a query and an
//! answer as encoded, wall and CPU time of each step (CPU from /proc/self/stat), the process's
//! peak memory (VmHWM), and the predicted failure probability per record.

use std::time::Instant;

use anyhow::ensure;
use omr_pir::{Answer, Database, Hint, Query, Shape, PIR_V1};
use rand::Rng;
use serde_json::{json, Value};

use crate::host::process_cpu_secs;

/// Wall and CPU seconds of `f`.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, Option<f64>) {
    let cpu = process_cpu_secs();
    let started = Instant::now();
    let out = f();
    let wall = started.elapsed().as_secs_f64();
    (out, wall, cpu.zip(process_cpu_secs()).map(|(a, b)| b - a))
}

/// Build a database of `shape` with random records, time its preprocessing once and `fetches`
/// fetches of random records, each checked byte for byte; `step` hears each fetch begin.
pub fn run(shape: Shape, fetches: usize, step: &(dyn Fn(&str) + Sync)) -> anyhow::Result<Value> {
    let params = &PIR_V1;
    let mut rng = rand::thread_rng();
    let mut db = Database::new(params, shape)?;
    let mut record = vec![0u8; shape.record_bytes];
    for i in 0..shape.records {
        rng.fill(&mut record[..]);
        db.set_record(i, &record)?;
    }
    let rss_before = crate::host::peak_rss_mib();
    let (hint, pre_s, pre_cpu) = timed(|| db.preprocess(rng.gen()));
    let hint_bytes = hint.to_bytes();
    let hint = Hint::from_bytes(&hint_bytes)?;
    let mut rows = Vec::new();
    for f in 0..fetches {
        step(&format!("fetch {} of {fetches}", f + 1));
        let index = rng.gen_range(0..shape.records);
        let (made, query_s, _) = timed(|| hint.query(index, &mut rand::thread_rng()));
        let (query, fetch) = made?;
        let query_bytes = query.to_bytes();
        let query = Query::from_bytes(&query_bytes)?;
        let (answer, answer_s, answer_cpu) = timed(|| db.answer(&query));
        let answer_bytes = answer?.to_bytes();
        let answer = Answer::from_bytes(&answer_bytes)?;
        let (got, decode_s, _) = timed(|| hint.decode(&fetch, &answer));
        ensure!(got? == db.record(index), "record {index} came back wrong");
        rows.push(json!({
            "record": index,
            "query_bytes": query_bytes.len(),
            "answer_bytes": answer_bytes.len(),
            "query_s": query_s,
            "answer_s": answer_s,
            "answer_cpu_s": answer_cpu,
            "decode_s": decode_s,
        }));
    }
    let median = |key: &str| {
        let mut v: Vec<f64> = rows.iter().filter_map(|r| r[key].as_f64()).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let (query_len, answer_len) = (shape.query_bytes(), shape.answer_bytes(params));
    Ok(json!({
        "params": params.name,
        "cpu": crate::host::cpu_model(),
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "vector_extension": omr_pir::vector_extension(),
        "records": shape.records,
        "record_bytes": shape.record_bytes,
        "chunks": shape.chunks,
        "database_bytes": shape.database_bytes(),
        "hint_bytes": hint_bytes.len(),
        "query_bytes": query_len,
        "answer_bytes": answer_len,
        "fetch_bytes": hint_bytes.len() + query_len + answer_len,
        "preprocess_s": pre_s,
        "preprocess_cpu_s": pre_cpu,
        "peak_rss_mib": crate::host::peak_rss_mib(),
        "peak_rss_before_preprocess_mib": rss_before,
        "median_query_s": median("query_s"),
        "median_answer_s": median("answer_s"),
        "median_answer_cpu_s": median("answer_cpu_s"),
        "median_decode_s": median("decode_s"),
        "log2_record_failure": params.log2_record_failure(&shape),
        "fetches": rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_reports_its_sizes_and_checks_every_fetch() {
        let shape = Shape::for_records(8, 4096).unwrap();
        let r = run(shape, 2, &|_| {}).unwrap();
        assert_eq!(
            r["hint_bytes"].as_u64(),
            Some(shape.hint_bytes(&PIR_V1) as u64)
        );
        assert_eq!(r["fetches"].as_array().map(Vec::len), Some(2));
        assert!(r["median_answer_s"].as_f64().unwrap() > 0.0);
        assert!(r["peak_rss_mib"].as_f64().unwrap() > 0.0);
    }
}
