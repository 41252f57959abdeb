//! `omr bench --param-set omr-light-v1 --device cuda`: every key's pass on a GPU
//! (omr-light-cuda), the keys resident, with the same figures as the CPU run plus the device's.

use std::time::Instant;

use omr_light::{Batch, BatchDigest, ExpandedKey};
use omr_light_cuda::CudaPass;

/// Warm passes timed; the median is reported.
const ROUNDS: usize = 7;

/// What the GPU run measured.
#[derive(Debug)]
pub(crate) struct GpuRun {
    pub halves: Vec<BatchDigest>,
    /// Wall seconds of one warm pass of every key (products, sums back, host finish).
    pub detect_s: f64,
    /// Wall seconds of one warm pass of the first key alone.
    pub single_s: f64,
    pub report: serde_json::Value,
}

/// Every key's pass over `batch` on device 0: a first pass that uploads the keys and the
/// plaintexts, then [`ROUNDS`] passes with everything resident.
pub(crate) fn run(batch: &Batch, keys: &[ExpandedKey]) -> Result<GpuRun, String> {
    let key_bytes = keys[0].memory_bytes() as u64;
    let gpu = CudaPass::open(0, key_bytes * keys.len() as u64).map_err(|e| e.to_string())?;
    let resident = gpu.key_capacity(key_bytes as usize).min(keys.len());
    let refs: Vec<&ExpandedKey> = keys.iter().collect();
    let started = Instant::now();
    let halves = gpu.detect_many(batch, &refs).map_err(|e| e.to_string())?;
    let cold_s = started.elapsed().as_secs_f64();
    let cold = gpu.stats();
    let mut walls = Vec::with_capacity(ROUNDS);
    let mut kernels = Vec::with_capacity(ROUNDS);
    let mut finishes = Vec::with_capacity(ROUNDS);
    let mut downloads = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let before = gpu.stats();
        let started = Instant::now();
        let again = gpu.detect_many(batch, &refs).map_err(|e| e.to_string())?;
        walls.push(started.elapsed().as_secs_f64());
        let after = gpu.stats();
        kernels.push(after.kernel_seconds - before.kernel_seconds);
        finishes.push(after.finish_seconds - before.finish_seconds);
        downloads.push(after.download_seconds - before.download_seconds);
        if again != halves {
            return Err("a warm pass differs from the first".into());
        }
    }
    let started = Instant::now();
    drop(
        gpu.detect_many(batch, &refs[..1])
            .map_err(|e| e.to_string())?,
    );
    let single_s = started.elapsed().as_secs_f64();
    let p = batch.params();
    let pairs = (batch.len() * keys.len()) as f64;
    let kernel_s = median(&mut kernels);
    let wall_s = median(&mut walls);
    // What the products must read: every key once, and the plaintexts (n + 1 rows) once per
    // launch (from memory; their re-reads by other key pairs hit L2 at best). The kernel time
    // includes the inverse NTTs when they run on the card (reads of the sums: 64 KiB a key).
    let launches = keys.len().div_ceil(resident) as f64;
    let read_bytes = (keys.len() as f64 * key_bytes as f64)
        + launches * ((p.n + p.ell - 1) * p.batch * 8) as f64;
    let info = gpu.info();
    let report = serde_json::json!({
        "device": "cuda",
        "gpu": info.name,
        "gpu_compute_capability": format!("{}.{}", info.compute_capability.0, info.compute_capability.1),
        "gpu_memory_bytes": info.total_memory,
        "resident_keys": gpu.resident_keys(),
        "gpu_inverse_on_device": info.inverse_on_device,
        "gpu_kernel_ns_per_message_key": kernel_s * 1e9 / pairs,
        "gpu_kernel_gb_per_s": read_bytes / kernel_s / 1e9,
        "gpu_download_ns_per_message_key": median(&mut downloads) * 1e9 / pairs,
        "gpu_host_finish_ns_per_message_key": median(&mut finishes) * 1e9 / pairs,
        "gpu_wall_ns_per_message_key": wall_s * 1e9 / pairs,
        "gpu_first_pass_s": cold_s,
        "gpu_upload_gb_per_s": cold.upload_bytes as f64 / cold.upload_seconds / 1e9,
        "gpu_rounds": ROUNDS,
    });
    Ok(GpuRun {
        halves,
        detect_s: wall_s,
        single_s,
        report,
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
