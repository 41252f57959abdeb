//! One CUDA device running the light pass: its context and stream, the compiled kernel, the
//! resident keys and the batch whose plaintexts are on the card.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PinnedHostSlice,
    PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use omr_light::{Batch, BatchDigest, ExpandedKey};
use rayon::prelude::*;

use crate::inverse::InverseTables;
use crate::raw::{copy_back, launch, launch_inverse, pinned};
use crate::types::{CudaError, DeviceInfo, Stats};

/// The kernel's source (compiled by NVRTC when a device is opened).
const SOURCE: &str = include_str!("pass.cu");
/// Threads per block; the grid's x covers the D positions.
const THREADS: u32 = 128;
/// Threads per block of the inverse NTT (one block per row of D).
const INVERSE_THREADS: u32 = 512;
/// Keys one thread serves (`KEYS` in pass.cu): a plaintext word read once for both.
const KEYS_PER_THREAD: usize = 2;
/// Device memory left free beside the resident keys when the budget is clamped to what the
/// card has: the batch's plaintexts, the sums, the driver's own.
const HEADROOM: u64 = 1 << 30;

/// The light pass on one CUDA device. Calls are serialised (one stream); keys stay resident
/// between calls up to [`DeviceInfo::key_memory_bytes`].
pub struct CudaPass {
    info: DeviceInfo,
    stream: Arc<CudaStream>,
    kernel: CudaFunction,
    /// The inverse NTT kernel and its tables (on the card), when tfhe-ntt's order is matched.
    inverse: Option<Inverse>,
    state: Mutex<State>,
}

struct Inverse {
    kernel: CudaFunction,
    twiddles: CudaSlice<u64>,
    d_inv: u64,
}

impl std::fmt::Debug for CudaPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaPass")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// What the card holds, and the counters.
#[derive(Default)]
struct State {
    /// Resident keys by `ExpandedKey::id` (unique in the process, never reused).
    keys: HashMap<u64, Resident>,
    /// Uses so far: a resident key's last use is its recency.
    tick: u64,
    /// The batch on the card: its `Batch::id` and plaintexts.
    batch: Option<(u64, CudaSlice<u64>)>,
    /// The sums of the last launch (grown as needed), and their copy in page-locked host
    /// memory (a copy to pageable memory ran at 1.5 GB/s on an H200).
    sums: Option<CudaSlice<u64>>,
    /// The batch's coefficients of the sums (ℓ rows of its length per key), when the inverse
    /// runs on the card.
    coefficients: Option<CudaSlice<u64>>,
    host: Option<PinnedHostSlice<u64>>,
    stats: Stats,
}

struct Resident {
    words: CudaSlice<u64>,
    used: u64,
}

impl CudaPass {
    /// Open device `ordinal` and compile the kernel for it; keys resident up to
    /// `key_memory_bytes` (clamped to the card's free memory less 1 GiB).
    pub fn open(ordinal: usize, key_memory_bytes: u64) -> Result<CudaPass, CudaError> {
        if !crate::raw::driver_present() {
            return Err(CudaError::NoDriver);
        }
        if !crate::raw::nvrtc_present() {
            return Err(CudaError::NoNvrtc);
        }
        let count = CudaContext::device_count().map_err(|e| CudaError::NoDevice {
            ordinal,
            reason: e.to_string(),
        })?;
        if ordinal >= count.max(0) as usize {
            return Err(CudaError::NoDevice {
                ordinal,
                reason: format!("the driver sees {count} device(s)"),
            });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::NoDevice {
            ordinal,
            reason: e.to_string(),
        })?;
        let (major, minor) = ctx.compute_capability()?;
        let (free, total) = ctx.mem_get_info()?;
        let ptx = compile_ptx_with_opts(
            SOURCE,
            CompileOptions {
                options: vec![format!("--gpu-architecture=compute_{major}{minor}")],
                name: Some("pass.cu".into()),
                ..Default::default()
            },
        )
        .map_err(|e| CudaError::Compile(e.to_string()))?;
        let module = ctx.load_module(ptx)?;
        let kernel = module.load_function("light_pass")?;
        let stream = ctx.default_stream();
        let p = &omr_light::OMR_LIGHT_V1;
        let inverse = match InverseTables::new(p.batch, p.q) {
            Some(t) => Some(Inverse {
                kernel: module.load_function("light_inverse")?,
                twiddles: stream.clone_htod(&t.twiddles)?,
                d_inv: t.d_inv,
            }),
            None => {
                tracing::warn!("tfhe-ntt's transform order is not the one the GPU inverts: the host does the inverse NTTs");
                None
            }
        };
        let info = DeviceInfo {
            ordinal,
            name: ctx.name()?,
            compute_capability: (major, minor),
            total_memory: total as u64,
            free_memory: free as u64,
            key_memory_bytes: key_memory_bytes.min((free as u64).saturating_sub(HEADROOM)),
            inverse_on_device: inverse.is_some(),
        };
        Ok(CudaPass {
            info,
            stream,
            kernel,
            inverse,
            state: Mutex::default(),
        })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    pub fn stats(&self) -> Stats {
        self.lock().stats
    }

    /// Keys resident on the card now.
    pub fn resident_keys(&self) -> usize {
        self.lock().keys.len()
    }

    /// Keys that fit in the budget at once (at least one: a key beyond the budget is still
    /// served, one at a time).
    pub fn key_capacity(&self, key_bytes: usize) -> usize {
        ((self.info.key_memory_bytes / key_bytes.max(1) as u64) as usize).max(1)
    }

    /// Every key's half of `batch`'s digest, in the order of `keys`: equal to
    /// `batch.detect_many(keys)`. Keys not resident are uploaded (least recently used ones
    /// evicted beyond the budget); a group larger than the budget runs in parts.
    pub fn detect_many(
        &self,
        batch: &Batch,
        keys: &[&ExpandedKey],
    ) -> Result<Vec<BatchDigest>, CudaError> {
        let p = batch.params();
        assert!(
            keys.iter().all(|k| k.params().id == p.id),
            "every key is of the batch's set"
        );
        assert_eq!(p.ell, 2, "the kernel is written for ℓ = 2");
        assert_eq!(p.n % 16, 0, "the kernel reduces every 16 products");
        let Some(first) = keys.first() else {
            return Ok(Vec::new());
        };
        if batch.is_empty() {
            // Nothing to detect (the service never asks): the digests of no message.
            return Ok(batch.detect_many(keys));
        }
        let (n, d, ell) = (p.n, p.batch, p.ell);
        let capacity = self.key_capacity(first.memory_bytes());
        let mut state = self.lock();
        self.upload_batch(&mut state, batch)?;
        let most = capacity.min(keys.len()) * ell * d;
        if state.host.as_ref().is_none_or(|h| h.len() < most) {
            state.host = None;
            state.host = Some(pinned(self.stream.context(), most)?);
        }
        let mut digests = Vec::with_capacity(keys.len());
        for part in keys.chunks(capacity) {
            for key in part {
                self.make_resident(&mut state, key, part, capacity)?;
            }
            let started = Instant::now();
            self.launch(&mut state, part, n, d)?;
            // On the card the inverse NTTs leave the batch's coefficients; otherwise the sums
            // come back whole and the host transforms them.
            let on_card = self.inverse.is_some();
            let words = match &self.inverse {
                Some(inverse) => self.launch_inverse(&mut state, inverse, part.len(), batch)?,
                None => part.len() * ell * d,
            };
            self.stream.synchronize()?;
            state.stats.kernel_seconds += started.elapsed().as_secs_f64();
            let started = Instant::now();
            let State {
                sums,
                coefficients,
                host,
                stats,
                ..
            } = &mut *state;
            let host = &mut host.as_mut().expect("above").as_mut_slice()?[..words];
            let back = if on_card { coefficients } else { sums };
            copy_back(&self.stream, back.as_ref().expect("by the launches"), host)?;
            stats.download_seconds += started.elapsed().as_secs_f64();
            let started = Instant::now();
            digests.par_extend(host.par_chunks_mut(words / part.len()).map(|rows| {
                if on_card {
                    batch.finish_coefficients(rows)
                } else {
                    batch.finish_products(rows)
                }
            }));
            stats.finish_seconds += started.elapsed().as_secs_f64();
            state.stats.key_passes += part.len() as u64;
        }
        Ok(digests)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves counters at worst; the card's buffers are
        // rewritten before every use, so the state stays usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Put `batch`'s plaintexts on the card unless they are there.
    fn upload_batch(&self, state: &mut State, batch: &Batch) -> Result<(), CudaError> {
        if matches!(&state.batch, Some((id, _)) if *id == batch.id()) {
            return Ok(());
        }
        let started = Instant::now();
        let words = batch.plaintexts();
        match &mut state.batch {
            Some((id, buf)) if buf.len() == words.len() => {
                self.stream.memcpy_htod(words, buf)?;
                *id = batch.id();
            }
            slot => {
                // Forget the old one first: its id no longer names what the card holds.
                *slot = None;
                *slot = Some((batch.id(), self.stream.clone_htod(words)?));
            }
        }
        self.stream.synchronize()?;
        state.stats.batch_uploads += 1;
        state.stats.upload_bytes += (words.len() * 8) as u64;
        state.stats.upload_seconds += started.elapsed().as_secs_f64();
        Ok(())
    }

    /// Make `key` resident, evicting the least recently used keys outside `part` while more
    /// than `capacity` - 1 are resident.
    fn make_resident(
        &self,
        state: &mut State,
        key: &ExpandedKey,
        part: &[&ExpandedKey],
        capacity: usize,
    ) -> Result<(), CudaError> {
        state.tick += 1;
        let tick = state.tick;
        if let Some(r) = state.keys.get_mut(&key.id()) {
            r.used = tick;
            return Ok(());
        }
        while state.keys.len() >= capacity {
            let victim = (state.keys.iter())
                .filter(|(id, _)| !part.iter().any(|k| k.id() == **id))
                .min_by_key(|(_, r)| r.used)
                .map(|(id, _)| *id);
            match victim {
                Some(id) => drop(state.keys.remove(&id)),
                None => break,
            }
        }
        let started = Instant::now();
        let words = self.stream.clone_htod(key.blocks())?;
        self.stream.synchronize()?;
        state.stats.key_uploads += 1;
        state.stats.upload_bytes += (key.blocks().len() * 8) as u64;
        state.stats.upload_seconds += started.elapsed().as_secs_f64();
        state.keys.insert(key.id(), Resident { words, used: tick });
        Ok(())
    }

    /// Launch the products of the resident `part` over the batch on the card, into
    /// `state.sums` (ℓ rows of D per key, in the order of `part`).
    fn launch(
        &self,
        state: &mut State,
        part: &[&ExpandedKey],
        n: usize,
        d: usize,
    ) -> Result<(), CudaError> {
        let words = part.len() * 2 * d;
        if state.sums.as_ref().is_none_or(|s| s.len() < words) {
            state.sums = None;
            state.sums = Some(self.stream.alloc_zeros::<u64>(words)?);
        }
        let State {
            keys, batch, sums, ..
        } = state;
        let (_, plain) = batch.as_ref().expect("uploaded first");
        let sums = sums.as_mut().expect("allocated above");
        let mut pointers = Vec::with_capacity(part.len());
        let mut guards = Vec::with_capacity(part.len());
        for key in part {
            let resident = keys.get(&key.id()).expect("made resident first");
            let (ptr, guard) = resident.words.device_ptr(&self.stream);
            pointers.push(ptr);
            guards.push(guard);
        }
        let pointers = self.stream.clone_htod(&pointers)?;
        let config = LaunchConfig {
            grid_dim: (
                (d as u32).div_ceil(THREADS),
                part.len().div_ceil(KEYS_PER_THREAD) as u32,
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let (n, d, count) = (n as u32, d as u32, part.len() as u32);
        let mut args = self.stream.launch_builder(&self.kernel);
        args.arg(plain)
            .arg(&pointers)
            .arg(sums)
            .arg(&n)
            .arg(&d)
            .arg(&count);
        launch(args, config)?;
        drop(guards);
        Ok(())
    }
}

impl CudaPass {
    /// Launch the inverse NTTs of the `keys` keys' sums (2 rows each) into `state.coefficients`,
    /// the first `batch.len()` coefficients of each row; the words that holds.
    fn launch_inverse(
        &self,
        state: &mut State,
        inverse: &Inverse,
        keys: usize,
        batch: &Batch,
    ) -> Result<usize, CudaError> {
        let d = batch.params().batch;
        let (rows, count) = (keys * 2, batch.len().max(1));
        let words = rows * count;
        if state.coefficients.as_ref().is_none_or(|c| c.len() < words) {
            state.coefficients = None;
            state.coefficients = Some(self.stream.alloc_zeros::<u64>(words)?);
        }
        let sums = state.sums.as_ref().expect("launched first");
        let out = state.coefficients.as_mut().expect("allocated above");
        let config = LaunchConfig {
            grid_dim: (rows as u32, 1, 1),
            block_dim: (INVERSE_THREADS, 1, 1),
            shared_mem_bytes: (d * 8) as u32,
        };
        let (d32, count32) = (d as u32, count as u32);
        let mut args = self.stream.launch_builder(&inverse.kernel);
        args.arg(sums)
            .arg(&inverse.twiddles)
            .arg(out)
            .arg(&d32)
            .arg(&count32)
            .arg(&inverse.d_inv);
        launch_inverse(args, config)?;
        Ok(words)
    }
}
