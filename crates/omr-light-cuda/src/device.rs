//! One CUDA device running the light pass: its context and stream, the compiled kernel, the
//! resident keys and the batch whose plaintexts are on the card.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, PinnedHostSlice};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use omr_light::{Batch, BatchDigest, ExpandedKey};
use rayon::prelude::*;

use crate::inverse::InverseTables;
use crate::raw::{copy_back, pinned, Plain};
use crate::types::{CudaError, DeviceInfo, Stats};

mod launches;

/// The kernel's source (compiled by NVRTC when a device is opened).
const SOURCE: &str = include_str!("pass.cu");
/// Threads per block; the grid's x covers the D positions.
const THREADS: u32 = 128;
/// Threads per block of the inverse NTT (one block per row of D).
const INVERSE_THREADS: u32 = 512;
/// Keys one thread serves (`KEYS` in pass.cu): a plaintext word read once for all of them.
pub const KEYS_PER_THREAD: usize = 2;
/// Device memory left free beside the resident keys when the budget is clamped to what the
/// card has: the batch's plaintexts, the sums, the driver's own.
const HEADROOM: u64 = 1 << 30;

/// The light pass on one CUDA device. Calls are serialised (one stream); keys stay resident
/// between calls up to [`DeviceInfo::key_memory_bytes`].
pub struct CudaPass {
    info: DeviceInfo,
    stream: Arc<CudaStream>,
    kernel: CudaFunction,
    /// `KEYS` of the compiled kernel.
    keys_per_thread: usize,
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
    /// That batch's Δ·b′ (ℓ rows of D), for the switch on the card.
    scaled_b: Option<CudaSlice<u64>>,
    /// The sums of the last launch (grown as needed), and their copy in page-locked host
    /// memory (a copy to pageable memory is far slower).
    sums: Option<CudaSlice<u64>>,
    /// The digest's values of the batch's messages (ℓ rows of its length per key, switched to
    /// q0), when the inverse runs on the card; and their copy on the host.
    values: Option<CudaSlice<u32>>,
    host_values: Option<PinnedHostSlice<u32>>,
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
        CudaPass::open_tuned(ordinal, key_memory_bytes, KEYS_PER_THREAD)
    }

    /// [`open`](Self::open) with the kernel compiled for `keys_per_thread` keys per thread
    /// (1 to 8; the default is [`KEYS_PER_THREAD`]): for measuring the choice.
    #[doc(hidden)]
    pub fn open_tuned(
        ordinal: usize,
        key_memory_bytes: u64,
        keys_per_thread: usize,
    ) -> Result<CudaPass, CudaError> {
        assert!((1..=8).contains(&keys_per_thread), "1 to 8 keys per thread");
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
                options: vec![
                    format!("--gpu-architecture=compute_{major}{minor}"),
                    format!("-DKEYS={keys_per_thread}"),
                ],
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
            keys_per_thread,
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
        assert!(p.log_q0 <= 32, "the card's switched values are 32 bits");
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
        let on_card = self.inverse.is_some();
        if on_card {
            self.grow(&mut state.host_values, most)?;
        } else {
            self.grow(&mut state.host, most)?;
        }
        let mut digests = Vec::with_capacity(keys.len());
        for part in keys.chunks(capacity) {
            for key in part {
                self.make_resident(&mut state, key, part, capacity)?;
            }
            let started = Instant::now();
            self.launch(&mut state, part, n, d)?;
            // On the card the inverse NTTs and the switch leave the digest's values of the
            // batch's messages; otherwise the sums come back whole and the host finishes them.
            let words = match &self.inverse {
                Some(inverse) => self.launch_inverse(&mut state, inverse, part.len(), batch)?,
                None => part.len() * ell * d,
            };
            self.stream.synchronize()?;
            state.stats.kernel_seconds += started.elapsed().as_secs_f64();
            let State {
                sums,
                values,
                host,
                host_values,
                stats,
                ..
            } = &mut *state;
            let per_key = words / part.len();
            let finished = if on_card {
                let values = values.as_ref().expect("by the launch");
                self.bring_back(values, host_values, words, per_key, stats, |rows| {
                    batch.finish_switched(rows)
                })?
            } else {
                let sums = sums.as_ref().expect("by the launch");
                self.bring_back(sums, host, words, per_key, stats, |rows| {
                    batch.finish_products(rows)
                })?
            };
            digests.extend(finished);
            state.stats.key_passes += part.len() as u64;
        }
        Ok(digests)
    }

    /// Make `slot` hold at least `len` values of page-locked memory.
    fn grow<T: Plain>(
        &self,
        slot: &mut Option<PinnedHostSlice<T>>,
        len: usize,
    ) -> Result<(), CudaError> {
        if slot.as_ref().is_none_or(|h| h.len() < len) {
            // The old buffer goes first: the two need not fit at once.
            *slot = None;
            *slot = Some(pinned(self.stream.context(), len)?);
        }
        Ok(())
    }

    /// Copy the first `words` values of `src` into `host` (grown by [`grow`](Self::grow)) and
    /// `finish` each key's `per_key` of them into its digest, on the calling pool; the times
    /// go to `stats`.
    fn bring_back<T: Plain + Send + Sync>(
        &self,
        src: &CudaSlice<T>,
        host: &mut Option<PinnedHostSlice<T>>,
        words: usize,
        per_key: usize,
        stats: &mut Stats,
        finish: impl Fn(&mut [T]) -> BatchDigest + Sync + Send,
    ) -> Result<Vec<BatchDigest>, CudaError> {
        let started = Instant::now();
        let host = &mut host.as_mut().expect("grown first").as_mut_slice()?[..words];
        copy_back(&self.stream, src, host)?;
        stats.download_seconds += started.elapsed().as_secs_f64();
        let started = Instant::now();
        let digests = host.par_chunks_mut(per_key).map(finish).collect();
        stats.finish_seconds += started.elapsed().as_secs_f64();
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
        let (scaled_b, _, _) = batch.switch_inputs();
        match &mut state.scaled_b {
            Some(buf) if buf.len() == scaled_b.len() => self.stream.memcpy_htod(scaled_b, buf)?,
            slot => *slot = Some(self.stream.clone_htod(scaled_b)?),
        }
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
}
