//! The benchmark behind `omr bench`: per-stage detection timings, sizes, digest and decode time
//! on this machine, and one tfhe-rs KS+PBS as a machine-speed yardstick, as one JSON object (the
//! shape DESIGN.md specifies). Beside it, the runs behind the other `omr bench-*` commands:
//! [`capacity`] (an embedded omrd serving many keys through a small memory budget), [`pir`]
//! (fetching an attachment by PIR) and [`postage`] (solving and checking stamps); and [`host`],
//! what every benchmark report reads of the machine and the process.
//!
//! Apart from omr-core so that the scheme crate holds no benchmark runs, thread pools or JSON;
//! it uses only omr-core's public API (`DetectionKey::detect_timed` for the stage times).

use std::time::{Duration, Instant};

use rayon::prelude::*;

use omr_core::{keygen, Clue, FoldScratch, OmrError, ParamSet, Pertinency, StageTimes};

pub mod capacity;
mod cuda;
pub mod host;
pub mod light;
pub mod pir;
pub mod postage;
mod yardstick;

/// What to measure.
#[derive(Debug, Clone, Copy)]
pub struct BenchOptions {
    pub params: &'static ParamSet,
    /// Threads detecting in parallel (a rayon pool of this size).
    pub threads: usize,
    /// Board messages detected.
    pub messages: usize,
    pub kbar: usize,
    /// How many of the messages are for the benchmarked recipient (spread evenly).
    pub pertinent: usize,
    /// Clues detected together (they share the key loads).
    pub batch: usize,
}

impl BenchOptions {
    /// Defaults for `params`: 1 thread, 8 messages, k̄ = 50 (capped by the set), half pertinent.
    pub fn new(params: &'static ParamSet) -> Self {
        let kbar = 50.min(params.max_kbar);
        BenchOptions {
            params,
            threads: 1,
            messages: 8,
            kbar,
            pertinent: 4,
            batch: 1,
        }
    }
}

/// The phases [`run`] reports progress for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchPhase {
    Keygen,
    Reference,
    /// Detection; the progress callback counts messages.
    Detect,
    Fold,
    Decode,
}

/// Run the benchmark; `progress(phase, done, total)` is called as it goes. Checks that the
/// decoded indices are exactly the pertinent ones.
pub fn run(
    o: &BenchOptions,
    progress: &(dyn Fn(BenchPhase, u64, u64) + Sync),
) -> Result<serde_json::Value, OmrError> {
    let params = o.params;
    let (messages, kbar, pertinent) = (o.messages.max(1), o.kbar, o.pertinent);
    if pertinent > messages || pertinent > kbar {
        return Err(malformed(
            "benchmark options",
            format!("pertinent = {pertinent} must be at most messages = {messages} and k̄ = {kbar}"),
        ));
    }
    let batch = o.batch.max(1);
    let mine = |i: usize| (i * pertinent) % messages < pertinent;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(o.threads.max(1))
        .build()
        .map_err(|e| malformed("benchmark options", e.to_string()))?;

    progress(BenchPhase::Keygen, 0, 2);
    let t0 = Instant::now();
    let keys = keygen(params, kbar)?;
    let keygen_ms = ms(t0.elapsed());
    let dk_bytes = keys.detection_key.to_bytes();
    let t0 = Instant::now();
    let dk = keys.detection_key.expand();
    let expand_ms = ms(t0.elapsed());
    let other = keygen(params, kbar)?;
    progress(BenchPhase::Keygen, 2, 2);

    // `pertinent` messages of the board are for the recipient, spread evenly; the rest are for
    // someone else.
    let clues: Vec<Clue> = (0..messages)
        .map(|i| {
            if mine(i) {
                keys.clue_key.make_clue()
            } else {
                other.clue_key.make_clue()
            }
        })
        .collect();
    let payload = vec![0xA5u8; params.payload_bytes];

    // The yardstick is timed right before and right after detection, and the two averaged, so
    // that a machine whose speed drifts during the run drifts in both.
    progress(BenchPhase::Reference, 0, 2);
    let mut yardstick = Yardstick::new();
    let reference_before = yardstick.time_ms(10);
    progress(BenchPhase::Reference, 1, 2);

    let done = std::sync::atomic::AtomicU64::new(0);
    progress(BenchPhase::Detect, 0, messages as u64);
    let t0 = Instant::now();
    let chunks: Vec<Vec<&Clue>> = clues.chunks(batch).map(|c| c.iter().collect()).collect();
    let timed: Vec<(Vec<Pertinency>, StageTimes)> = pool.install(|| {
        chunks
            .par_iter()
            .map(|c| {
                let r = dk.detect_timed(c);
                let n = done.fetch_add(c.len() as u64, std::sync::atomic::Ordering::Relaxed);
                progress(BenchPhase::Detect, n + c.len() as u64, messages as u64);
                r
            })
            .collect::<Result<_, _>>()
    })?;
    let detect_wall = t0.elapsed();
    let reference_after = yardstick.time_ms(10);
    let reference = (reference_before + reference_after) / 2.0;
    progress(BenchPhase::Reference, 2, 2);
    let mut stages = StageTimes::default();
    for (_, s) in &timed {
        stages += *s;
    }
    let results: Vec<Pertinency> = timed.into_iter().flat_map(|(p, _)| p).collect();

    progress(BenchPhase::Fold, 0, 1);
    let mut acc = dk.new_accumulator(0);
    let mut scratch = FoldScratch::default();
    let t0 = Instant::now();
    for (i, pv) in results.iter().enumerate() {
        dk.fold(&mut acc, i as u64, pv, &payload, &mut scratch)?;
    }
    let fold_total = t0.elapsed();
    progress(BenchPhase::Fold, 1, 1);
    progress(BenchPhase::Decode, 0, 1);
    let t0 = Instant::now();
    let digest = dk.digest(&acc)?;
    let digest_encode_ms = ms(t0.elapsed());
    let digest_bytes = digest.to_bytes();
    let t0 = Instant::now();
    let got = keys.secret.decode(&digest)?;
    let decode_ms = ms(t0.elapsed());
    progress(BenchPhase::Decode, 1, 1);
    let expected: Vec<u64> = (0..messages)
        .filter(|&i| mine(i))
        .map(|i| i as u64)
        .collect();
    let got: Vec<u64> = got.iter().map(|r| r.index).collect();
    if got != expected {
        return Err(malformed(
            "benchmark digest",
            format!("decoded indices {got:?} differ from the pertinent ones {expected:?}"),
        ));
    }

    let n = messages as f64;
    Ok(serde_json::json!({
        "param_set": params.name,
        "threads": o.threads.max(1),
        "messages": messages,
        "kbar": kbar,
        "batch": batch,
        "pertinent": pertinent,
        "detect_ms_per_message": ms(detect_wall) / n,
        "reference_pbs_ms": reference,
        "reference_pbs_ms_before_after": [reference_before, reference_after],
        "detect_pbs": ms(detect_wall) / n / reference,
        "stage_ms": {
            "level1": ms(stages.level1) / n,
            "keyswitch": ms(stages.keyswitch) / n,
            "level2": ms(stages.level2) / n,
            "trace": ms(stages.trace) / n,
            "fold": ms(fold_total) / n,
        },
        "clue_bytes": clues[0].to_bytes().len(),
        "clue_key_bytes": keys.clue_key.to_bytes().len(),
        "detection_key_bytes": dk_bytes.len(),
        "detection_key_memory_bytes": dk.memory_bytes(),
        "digest_bytes": digest_bytes.len(),
        "digest_encode_ms": digest_encode_ms,
        "decode_ms": decode_ms,
        "keygen_ms": keygen_ms,
        "expand_ms": expand_ms,
    }))
}

/// The error for options or a result the benchmark cannot use (`OmrError::Malformed`).
fn malformed(what: &'static str, why: impl Into<String>) -> OmrError {
    OmrError::Malformed {
        what,
        why: why.into(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub use yardstick::{reference_pbs_ms, Yardstick};
