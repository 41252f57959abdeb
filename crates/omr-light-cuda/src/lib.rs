//! omr-light-v1's per-key pass on an NVIDIA GPU.
//!
//! A key's pass over a prepared batch (`omr_light::Batch`) is n·ℓ = 2,048 modular products per
//! NTT position and a stream over the key's 32 MiB: memory-bound on a CPU, and on a GPU bound by
//! the card's memory bandwidth instead. [`CudaPass`] keeps keys resident in device memory (up to
//! a byte budget, least recently used evicted beyond it), uploads a batch's shared plaintexts
//! once per batch, runs the products and the two inverse NTTs per key there, and brings back
//! only the digest's values of the batch's messages, switched there to 32 bits
//! (`Batch::switch_inputs`, `Batch::finish_switched`): the digest is bit-for-bit the CPU
//! pass's. (Should
//! tfhe-ntt's transform order ever not be the one the card inverts, checked when a device is
//! opened, the sums come back whole and the host transforms them: `Batch::finish_products`.)
//!
//! Nothing of CUDA is needed to build or to run on a machine without a GPU: the driver
//! (`libcuda.so`) and NVRTC (`libnvrtc.so`) are loaded at run time by `cudarc`, and the kernel
//! (`pass.cu`) is compiled by NVRTC for the device found. [`CudaPass::open`] fails with a
//! [`CudaError`] that says what is missing.

mod device;
mod inverse;
mod raw;
mod types;

pub use device::{CudaPass, KEYS_PER_THREAD};
pub use types::{CudaError, DeviceInfo, Stats};

/// The host mirror of what the card does to a key's sums (the inverse NTTs as `light_inverse`
/// runs them, then the switch of the batch's coefficients as it runs it): equal to the CPU
/// pass when the card's algorithm is right, which tests check on machines without a GPU.
/// `None` where tfhe-ntt's order is not matched.
#[doc(hidden)]
pub fn host_mirror(batch: &omr_light::Batch, sums: &[u64]) -> Option<omr_light::BatchDigest> {
    let p = batch.params();
    let tables = inverse::InverseTables::new(p.batch, p.q)?;
    let mut values = Vec::with_capacity(p.ell * batch.len());
    for (k, row) in sums.chunks_exact(p.batch).enumerate() {
        let mut row = row.to_vec();
        tables.inverse(&mut row, p.q);
        values.extend(mirror_switch(batch, k, &row[..batch.len()]));
    }
    Some(batch.finish_switched(&values))
}

/// The end of `light_inverse` on the host: output `k`'s values of the batch's coefficients
/// `c`, round((Δ·b′_k[i] − c[i] mod Q) · scale) mod 2^log_q0 (f64 arithmetic, as the card's).
fn mirror_switch<'a>(
    batch: &'a omr_light::Batch,
    k: usize,
    c: &'a [u64],
) -> impl Iterator<Item = u32> + 'a {
    let (q, d) = (batch.params().q, batch.params().batch);
    let (scaled_b, scale, log_q0) = batch.switch_inputs();
    let b = &scaled_b[k * d..][..d];
    c.iter().zip(b).map(move |(&c, &b)| {
        let x = if b >= c { b - c } else { b + (q - c) };
        (((x as f64 * scale).round() as u64) & ((1u64 << log_q0) - 1)) as u32
    })
}
