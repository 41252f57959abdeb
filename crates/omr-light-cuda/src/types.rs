//! What the crate reports: why there is no GPU pass (or why one failed), the device found, and
//! the counters of its work.

use cudarc::driver::DriverError;

/// Why the GPU pass is not available, or failed.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error(
        "the CUDA driver library (libcuda.so) was not found: this machine has no NVIDIA driver, \
         or its folder is not on the loader's path (LD_LIBRARY_PATH)"
    )]
    NoDriver,
    #[error(
        "NVRTC (libnvrtc.so, from the CUDA toolkit or the nvidia-cuda-nvrtc package) was not \
         found: put its folder on LD_LIBRARY_PATH (e.g. /usr/local/cuda/lib64)"
    )]
    NoNvrtc,
    #[error("no CUDA device {ordinal}: {reason}")]
    NoDevice { ordinal: usize, reason: String },
    #[error("CUDA driver: {0}")]
    Driver(String),
    #[error("compiling the light pass with NVRTC: {0}")]
    Compile(String),
}

impl From<DriverError> for CudaError {
    fn from(e: DriverError) -> Self {
        CudaError::Driver(e.to_string())
    }
}

/// What was found when a device was opened.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub ordinal: usize,
    /// As the driver names it ("NVIDIA H200").
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_memory: u64,
    /// Free when it was opened.
    pub free_memory: u64,
    /// Bytes of resident keys allowed (the configured budget, clamped to what was free).
    pub key_memory_bytes: u64,
    /// Whether the inverse NTTs run on the card (only the batch's coefficients come back);
    /// false when tfhe-ntt's order could not be matched, and the host transforms instead.
    pub inverse_on_device: bool,
}

/// Counters since the device was opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// Keys' passes run (one per key and batch).
    pub key_passes: u64,
    /// Keys copied to the card (first use, or again after eviction).
    pub key_uploads: u64,
    /// Batches whose plaintexts were copied to the card.
    pub batch_uploads: u64,
    /// Bytes copied to the card (keys and plaintexts).
    pub upload_bytes: u64,
    /// Seconds spent copying to the card.
    pub upload_seconds: f64,
    /// Seconds from the launches to their completion (the products, and the inverse NTTs
    /// when they run on the card).
    pub kernel_seconds: f64,
    /// Seconds copying back what the host finishes (the switched values, or the whole sums).
    pub download_seconds: f64,
    /// Seconds of the host's part: the values into digests (the inverse NTTs and the switches
    /// too when they do not run on the card), wall time on the calling pool.
    pub finish_seconds: f64,
}
