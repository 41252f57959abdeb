//! omr-light-v1's per-key pass on an NVIDIA GPU.
//!
//! A key's pass over a prepared batch (`omr_light::Batch`) is n·ℓ = 2,048 modular products per
//! NTT position and a stream over the key's 32 MiB: memory-bound on a CPU, and on a GPU bound by
//! the card's memory bandwidth instead. [`CudaPass`] keeps keys resident in device memory (up to
//! a byte budget, least recently used evicted beyond it), uploads a batch's shared plaintexts
//! once per batch, runs the products there and returns each key's sums; the host does the two
//! inverse NTTs and the modulus switch (`Batch::finish_products`), so the digest is bit-for-bit
//! the CPU pass's.
//!
//! Nothing of CUDA is needed to build or to run on a machine without a GPU: the driver
//! (`libcuda.so`) and NVRTC (`libnvrtc.so`) are loaded at run time by `cudarc`, and the kernel
//! (`pass.cu`) is compiled by NVRTC for the device found. [`CudaPass::open`] fails with a
//! [`CudaError`] that says what is missing.

mod device;

pub use device::{CudaError, CudaPass, DeviceInfo, Stats};
