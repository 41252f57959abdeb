//! Which device detects, and what the GPU detector does: set once when omrd starts (which device)
//! and by the GPU detector as it runs (its keys, uploads and failures).

use prometheus::{IntCounter, IntGauge, IntGaugeVec, Opts, Registry};

/// The detection device metrics.
#[derive(Debug, Clone)]
pub struct DeviceMetrics {
    /// 1 for the device detecting now (`cpu` or `cuda`), 0 for the other: a GPU detector that fails
    /// turns `cuda` to 0 and `cpu` to 1.
    pub detect_device: IntGaugeVec,
    /// Keys resident in GPU memory, and their budget (`gpu_key_memory_bytes`, clamped to the
    /// card's free memory).
    pub gpu_resident_keys: IntGauge,
    pub gpu_key_memory_budget_bytes: IntGauge,
    /// Keys' passes over a batch run on the GPU.
    pub gpu_key_passes: IntCounter,
    /// Keys copied to the GPU (first use, or again after eviction: a high rate against
    /// `gpu_key_passes` means keys are time-shared over PCIe).
    pub gpu_key_uploads: IntCounter,
    /// GPU passes that failed (each sends the detector to the CPU for good).
    pub gpu_failures: IntCounter,
}

impl DeviceMetrics {
    /// The metrics, registered in `registry`; `cpu` detects until a GPU detector says otherwise.
    pub fn new(registry: &Registry) -> Self {
        let m = DeviceMetrics {
            detect_device: IntGaugeVec::new(
                Opts::new(
                    "detect_device",
                    "1 for the device this worker detects on (cpu or cuda), 0 for the other",
                ),
                &["device"],
            )
            .expect("metric"),
            gpu_resident_keys: IntGauge::new(
                "gpu_resident_keys",
                "Detection keys resident in GPU memory",
            )
            .expect("metric"),
            gpu_key_memory_budget_bytes: IntGauge::new(
                "gpu_key_memory_budget_bytes",
                "GPU memory for resident keys (gpu_key_memory_bytes, clamped to the card's free memory)",
            )
            .expect("metric"),
            gpu_key_passes: IntCounter::new(
                "gpu_key_passes_total",
                "Keys' passes over a batch run on the GPU",
            )
            .expect("metric"),
            gpu_key_uploads: IntCounter::new(
                "gpu_key_uploads_total",
                "Detection keys copied to the GPU (first use, or again after eviction)",
            )
            .expect("metric"),
            gpu_failures: IntCounter::new(
                "gpu_failures_total",
                "GPU passes that failed (the worker then detects on the CPU)",
            )
            .expect("metric"),
        };
        m.set_device(Device::Cpu);
        for c in [
            Box::new(m.detect_device.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.gpu_resident_keys.clone()),
            Box::new(m.gpu_key_memory_budget_bytes.clone()),
            Box::new(m.gpu_key_passes.clone()),
            Box::new(m.gpu_key_uploads.clone()),
            Box::new(m.gpu_failures.clone()),
        ] {
            registry.register(c).expect("unique metric names");
        }
        m
    }

    /// Say that `device` detects now.
    pub fn set_device(&self, device: Device) {
        for d in [Device::Cpu, Device::Cuda] {
            (self.detect_device.with_label_values(&[d.name()])).set(i64::from(d == device));
        }
    }
}

/// A device detection runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda,
}

impl Device {
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        }
    }
}
