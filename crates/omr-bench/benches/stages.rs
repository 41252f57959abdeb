//! Per-stage detection time of each production parameter set, with criterion: level 1, the
//! keyswitch, level 2 and the prime stage, each on a batch of 4 clues (as `omr bench` runs
//! detection by default); whole detection on batches of 4 and of 16 (omrd's default
//! `detect_batch`); and tfhe-rs's own KS+PBS at PARAM_MESSAGE_2_CARRY_2_KS_PBS as the yardstick
//! a ratio is taken against (`omr bench` reports the same ratio for the whole detection).
//!
//!     cargo bench -p omr-bench --bench stages [-- omr-v2]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use omr_core::{keygen, Clue, OMR_V1, OMR_V2};

const BATCH: usize = 4;
/// omrd's default `detect_batch`.
const SERVICE_BATCH: usize = 16;

fn stages(c: &mut Criterion) {
    for p in [&OMR_V1, &OMR_V2] {
        let keys = keygen(p, 50).expect("keygen");
        let dk = keys.detection_key.expand();
        let all: Vec<Clue> = (0..SERVICE_BATCH)
            .map(|_| keys.clue_key.make_clue())
            .collect();
        let clues: Vec<&Clue> = all.iter().take(BATCH).collect();
        let service_batch: Vec<&Clue> = all.iter().collect();
        let level1 = dk.stage_level1(&clues).expect("level 1");
        let switched = dk.stage_keyswitch(&level1);
        let level2 = dk.stage_level2(&switched);
        let mut g = c.benchmark_group(p.name);
        g.sample_size(10);
        g.bench_function("level1 (batch of 4)", |b| {
            b.iter(|| dk.stage_level1(&clues).expect("level 1"))
        });
        g.bench_function("keyswitch (batch of 4)", |b| {
            b.iter(|| dk.stage_keyswitch(&level1))
        });
        g.bench_function("level2 (batch of 4)", |b| {
            b.iter(|| dk.stage_level2(&switched))
        });
        g.bench_function("prime stage (batch of 4)", |b| {
            b.iter(|| dk.stage_prime(&level2))
        });
        g.bench_function("detection (batch of 4)", |b| {
            b.iter_batched(
                || clues.clone(),
                |cl| dk.detect_batch(&cl),
                BatchSize::SmallInput,
            )
        });
        g.bench_function("detection (batch of 16)", |b| {
            b.iter(|| dk.detect_batch(&service_batch))
        });
        g.finish();
    }
    let mut g = c.benchmark_group("yardstick");
    g.sample_size(20);
    let mut pbs = omr_bench::Yardstick::new();
    g.bench_function("tfhe-rs KS+PBS (PARAM_MESSAGE_2_CARRY_2_KS_PBS)", |b| {
        b.iter(|| pbs.run())
    });
    g.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
