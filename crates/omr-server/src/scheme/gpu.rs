//! The light pass on a GPU (omr-light-cuda) as omrd runs it: `detect_device` resolved once when
//! omrd starts, and a detector that runs on the card until it fails, then sends every later pass
//! to the CPU for good. A failed pass is run again on the CPU before its keys commit, so a
//! failure loses and doubles no fold: the caller receives digests either way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use omr_light::{Batch, BatchDigest, ExpandedKey};
use omr_light_cuda::CudaPass;

use crate::config::{Config, DetectDevice, Role};
use crate::metrics::{Device, DeviceMetrics};
use crate::set::Set;

/// The GPU a light worker detects on.
#[derive(Debug)]
pub struct GpuDetector {
    pass: CudaPass,
    /// Set by the first failure: from then on every pass runs on the CPU.
    failed: AtomicBool,
    /// Tests: fail the next pass as a broken card would.
    fail_next: AtomicBool,
    metrics: DeviceMetrics,
}

impl GpuDetector {
    /// The detector `config` asks for, opened now: `None` to detect on the CPU. `cuda` that finds
    /// no usable GPU, or asked of a TFHE set, is an error (omrd refuses to start); `auto` then
    /// says why it detects on the CPU. An API-only process detects nothing and opens no GPU.
    pub fn resolve(
        config: &Config,
        set: Set,
        metrics: &DeviceMetrics,
    ) -> anyhow::Result<Option<Arc<GpuDetector>>> {
        let wanted = config.detect_device;
        if wanted == DetectDevice::Cpu || config.role == Role::Api {
            return Ok(None);
        }
        if !matches!(set, Set::Light(_)) {
            if wanted == DetectDevice::Cuda {
                anyhow::bail!(
                    "detect_device = \"cuda\" runs omr-light-v1's pass only; {} detects on the \
                     CPU: use detect_device = \"cpu\" (or \"auto\")",
                    set.name()
                );
            }
            tracing::info!(
                param_set = set.name(),
                "detect_device = \"auto\": this parameter set detects on the CPU"
            );
            return Ok(None);
        }
        let budget = config.gpu_key_memory_bytes.unwrap_or(u64::MAX);
        match CudaPass::open(0, budget) {
            Ok(pass) => {
                let i = pass.info();
                tracing::info!(
                    device = "cuda",
                    gpu = %i.name,
                    compute_capability = ?i.compute_capability,
                    gpu_memory_bytes = i.total_memory,
                    gpu_key_memory_bytes = i.key_memory_bytes,
                    "the light pass runs on the GPU"
                );
                metrics.set_device(Device::Cuda);
                (metrics.gpu_key_memory_budget_bytes).set(i.key_memory_bytes as i64);
                Ok(Some(Arc::new(GpuDetector {
                    pass,
                    failed: AtomicBool::new(false),
                    fail_next: AtomicBool::new(false),
                    metrics: metrics.clone(),
                })))
            }
            Err(e) if wanted == DetectDevice::Cuda => anyhow::bail!(
                "detect_device = \"cuda\" but no usable GPU: {e}. Use detect_device = \"auto\" \
                 to detect on the CPU when there is none, or \"cpu\""
            ),
            Err(e) => {
                tracing::info!(device = "cpu", reason = %e, "detect_device = \"auto\": no usable GPU, detecting on the CPU");
                Ok(None)
            }
        }
    }

    /// Whether passes still run on the GPU (false after a failure).
    pub fn is_active(&self) -> bool {
        !self.failed.load(Ordering::Acquire)
    }

    /// Tests: make the next pass fail as a card that broke mid-run would.
    #[doc(hidden)]
    pub fn fail_next_pass(&self) {
        self.fail_next.store(true, Ordering::Release);
    }

    /// The keys' halves of `batch` from the GPU; `None` when the detector has failed (now or
    /// before): the caller runs the CPU pass.
    pub fn detect_many(&self, batch: &Batch, keys: &[&ExpandedKey]) -> Option<Vec<BatchDigest>> {
        if self.failed.load(Ordering::Acquire) {
            return None;
        }
        let before = self.pass.stats();
        let result = if self.fail_next.swap(false, Ordering::AcqRel) {
            Err(omr_light_cuda::CudaError::Driver(
                "injected failure (tests)".into(),
            ))
        } else {
            self.pass.detect_many(batch, keys)
        };
        match result {
            Ok(halves) => {
                let after = self.pass.stats();
                let m = &self.metrics;
                m.gpu_key_passes
                    .inc_by(after.key_passes - before.key_passes);
                m.gpu_key_uploads
                    .inc_by(after.key_uploads - before.key_uploads);
                m.gpu_resident_keys.set(self.pass.resident_keys() as i64);
                Some(halves)
            }
            Err(e) => {
                if !self.failed.swap(true, Ordering::AcqRel) {
                    tracing::error!(error = %e, keys = keys.len(), "the GPU pass failed: detecting on the CPU from now on (this pass too; nothing is lost)");
                    self.metrics.set_device(Device::Cpu);
                    self.metrics.gpu_resident_keys.set(0);
                }
                self.metrics.gpu_failures.inc();
                None
            }
        }
    }
}
