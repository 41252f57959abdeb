//! omr-light-v1's per-key pass on an NVIDIA GPU.
//!
//! A key's pass over a prepared batch (`omr_light::Batch`) is n·ℓ = 2,048 modular products per
//! NTT position and a stream over the key's 32 MiB: memory-bound on a CPU, and on a GPU bound by
//! the card's memory bandwidth instead. [`CudaPass`] keeps keys resident in device memory (up to
//! a byte budget, least recently used evicted beyond it), uploads a batch's shared plaintexts
//! once per batch, runs the products and the two inverse NTTs per key there, and brings back
//! only the batch's coefficients; the host does the modulus switch
//! (`Batch::finish_coefficients`), so the digest is bit-for-bit the CPU pass's. (Should
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

pub use device::CudaPass;
pub use types::{CudaError, DeviceInfo, Stats};

/// The host mirror of what the card does to a key's sums (the inverse NTTs as `light_inverse`
/// runs them, then the batch's coefficients finished): equal to the CPU pass when the card's
/// algorithm is right, which tests check on machines without a GPU. `None` where tfhe-ntt's
/// order is not matched.
#[doc(hidden)]
pub fn host_mirror(batch: &omr_light::Batch, sums: &[u64]) -> Option<omr_light::BatchDigest> {
    let p = batch.params();
    let tables = inverse::InverseTables::new(p.batch, p.q)?;
    let mut coefficients = Vec::with_capacity(p.ell * batch.len());
    for row in sums.chunks_exact(p.batch) {
        let mut row = row.to_vec();
        tables.inverse(&mut row, p.q);
        coefficients.extend_from_slice(&row[..batch.len()]);
    }
    Some(batch.finish_coefficients(&coefficients))
}
