//! How many keys one GPU thread should serve (`KEYS` in pass.cu; the crate compiles 2): for
//! each choice and each number of resident keys, the median of warm passes over a half-full
//! batch (the refresh of an online key's open batch looks the same to the card), the kernels
//! alone and the whole call, every result checked equal to the default's and the first key's
//! to the CPU pass. Prints one JSON line per (choice, keys). Needs a GPU.
//!
//! cargo run --release -p omr-light-cuda --example keys_per_thread -- [keys ...]

use std::time::Instant;

use omr_light::{Batch, Clue, ExpandedKey, SecretKey, OMR_LIGHT_V1};
use omr_light_cuda::{CudaPass, KEYS_PER_THREAD};
use rayon::prelude::*;

const ROUNDS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let p = &OMR_LIGHT_V1;
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    if sizes.is_empty() {
        sizes = vec![64, 512, 1000];
    }
    let most = *sizes.iter().max().expect("sizes");
    let secrets: Vec<SecretKey> = (0..most)
        .into_par_iter()
        .map(|_| SecretKey::generate(p))
        .collect();
    let keys: Vec<ExpandedKey> = secrets
        .par_iter()
        .map(|s| s.detection_key().expand())
        .collect();
    let addresses: Vec<_> = secrets.iter().take(8).map(SecretKey::address).collect();
    let clues: Vec<Clue> = (0..p.batch / 2)
        .map(|i| addresses[i % addresses.len()].clue())
        .collect();
    let batch = Batch::prepare(p, &clues.iter().collect::<Vec<_>>());
    let cpu_first = batch.detect(&keys[0]);
    let budget = (most * keys[0].memory_bytes()) as u64;
    let mut default = Vec::new();
    for keys_per_thread in [KEYS_PER_THREAD, 1, 4] {
        let gpu = CudaPass::open_tuned(0, budget, keys_per_thread)?;
        for &n in &sizes {
            let refs: Vec<&ExpandedKey> = keys[..n].iter().collect();
            let first = gpu.detect_many(&batch, &refs)?;
            assert_eq!(first[0], cpu_first, "the first key's half is the CPU's");
            if keys_per_thread == KEYS_PER_THREAD {
                default.push(first);
            } else {
                let at = sizes.iter().position(|&s| s == n).expect("a size");
                assert!(
                    first == default[at],
                    "{keys_per_thread} keys per thread: equal"
                );
            }
            let (mut walls, mut kernels) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                let before = gpu.stats().kernel_seconds;
                let started = Instant::now();
                drop(gpu.detect_many(&batch, &refs)?);
                walls.push(started.elapsed().as_secs_f64());
                kernels.push(gpu.stats().kernel_seconds - before);
            }
            let (wall, kernel) = (median(walls), median(kernels));
            let pairs = (p.batch * n) as f64;
            println!(
                "{}",
                serde_json::json!({
                    "gpu": gpu.info().name, "keys_per_thread": keys_per_thread, "keys": n,
                    "batch_messages": batch.len(),
                    "kernel_ms": kernel * 1e3, "wall_ms": wall * 1e3,
                    // Per NTT position: the pass covers D positions whatever the batch holds.
                    "kernel_ns_per_position_key": kernel * 1e9 / pairs,
                    "wall_ns_per_position_key": wall * 1e9 / pairs,
                    "key_read_gb_per_s": (n * keys[0].memory_bytes()) as f64 / kernel / 1e9,
                })
            );
        }
    }
    Ok(())
}
