//! Expanded detection keys on local disk, so that loading a key is a file read instead of a
//! store fetch and an expansion (for omr-v1 several times faster; docs/benchmarks.md, "Loading a
//! detection key"). [`KeyFiles::load`] reads `<data_dir>/expanded-keys/<key id>.key`
//! when it is there and sound (`DetectionKey::read_expanded` checks version, parameter set,
//! transforms and checksum); otherwise it fetches the compressed key from the store, expands it
//! on the detection pool and, after returning it, writes the file on a blocking thread.
//!
//! Files are written atomically (temporary file, fsync, rename, fsync of the directory); one that
//! fails to read is deleted and its key expanded again. Their total stays within
//! `key_disk_bytes` (least recently used deleted first), and files of keys no longer registered
//! are deleted at most a minute after a load notices. Several processes may share the
//! directory: each keeps its own account of the budget.

use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use omr_core::{DetectionKey, ParamSet};
use omr_store::Store;
use tokio::sync::Semaphore;

use super::key_dir::{safe_id, KeyDir, Written};
use super::pool::on_pool;
use crate::config::{Config, Role};
use crate::metrics::Metrics;

use super::key_dir::read_key_file;
use crate::scheme::{DetectionScheme, Tfhe};

/// Read the expanded omr-v1 / omr-v2 key at `path` (None when there is no file; its size with
/// it), as `KeyFiles` does.
pub fn read_file(
    path: &std::path::Path,
    params: &'static ParamSet,
) -> anyhow::Result<Option<(DetectionKey, u64)>> {
    read_key_file(path, &Tfhe::new(params))
}

/// The directory under `data_dir`.
pub const KEY_FILES_DIR: &str = "expanded-keys";
/// How often a load checks for files of keys no longer registered.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Where a loaded key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadSource {
    /// Its expanded file on local disk.
    Disk,
    /// The store: fetched and expanded.
    Store,
}

impl LoadSource {
    /// The `source` label of the load metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadSource::Disk => "disk",
            LoadSource::Store => "store",
        }
    }
}

/// The expanded-key files of this process (disabled when `key_disk_bytes` is 0 or the
/// directory cannot be used). Cheap to clone.
#[derive(Debug, Clone)]
pub struct KeyFiles<S> {
    inner: Option<Arc<Inner>>,
    metrics: Metrics,
    scheme: S,
}

#[derive(Debug)]
struct Inner {
    dir: KeyDir,
    /// One file read at a time (reads run on blocking threads).
    reads: Semaphore,
    /// One file write at a time; a write that finds it taken is skipped (the key's next load
    /// from the store, or its next eviction, writes it).
    writes: Arc<Semaphore>,
    last_sweep: Mutex<Option<Instant>>,
}

impl<S: DetectionScheme> KeyFiles<S> {
    /// The files of `scheme`'s keys under `config.data_dir`, within `config.key_disk_bytes`
    /// (unset: half the free space there now). Scans what a previous run left; never fails: a
    /// directory it cannot use disables the files (logged) and every load goes to the store.
    pub fn open(config: &Config, metrics: &Metrics, scheme: S) -> KeyFiles<S> {
        let metrics = metrics.clone();
        let dir = config.data_dir.join(KEY_FILES_DIR);
        let inner = match KeyDir::open(dir.clone(), config.key_disk_bytes) {
            Ok(Some(key_dir)) => {
                let inner = Inner {
                    dir: key_dir,
                    reads: Semaphore::new(1),
                    writes: Arc::new(Semaphore::new(1)),
                    last_sweep: Mutex::new(None),
                };
                let (count, bytes) = inner.dir.totals();
                metrics.key_file_bytes.set(bytes as i64);
                tracing::info!(dir = %dir.display(), budget_bytes = inner.dir.budget, files = count, bytes, "expanded-key files ready");
                Some(Arc::new(inner))
            }
            Ok(None) => {
                tracing::info!("expanded-key files disabled (key_disk_bytes = 0)");
                None
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), "expanded-key files disabled: {e:#}");
                None
            }
        };
        KeyFiles {
            inner,
            metrics,
            scheme,
        }
    }

    /// The scheme whose keys these are.
    pub fn scheme(&self) -> &S {
        &self.scheme
    }

    /// `key_id`'s expanded key: from its file when that is there and sound, else from the store
    /// (then its file is written in the background, without delaying the caller).
    pub async fn load(
        &self,
        store: &Store,
        pool: &rayon::ThreadPool,
        key_id: &str,
    ) -> anyhow::Result<(Arc<S::Key>, LoadSource)> {
        let inner = self.inner.as_ref().filter(|_| safe_id(key_id));
        if let Some(inner) = inner {
            self.maybe_sweep(inner, store);
            let started = Instant::now();
            if let Some((dk, bytes)) = self.read(inner, key_id).await {
                self.observe(LoadSource::Disk, started, bytes);
                tracing::info!(%key_id, source = "disk", ms = started.elapsed().as_millis() as u64, bytes, "detection key loaded");
                return Ok((Arc::new(dk), LoadSource::Disk));
            }
        }
        let started = Instant::now();
        let bytes = store
            .key_bytes(key_id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("key {key_id} has no stored bytes"))?;
        let fetch_ms = started.elapsed().as_millis() as u64;
        let len = bytes.len() as u64;
        let scheme = self.scheme.clone();
        let dk = on_pool(pool, move || scheme.expand_key(&bytes))
            .await?
            .with_context(|| format!("decoding stored key {key_id}"))?;
        self.observe(LoadSource::Store, started, len);
        tracing::info!(%key_id, source = "store", ms = started.elapsed().as_millis() as u64, fetch_ms, bytes = len, memory_bytes = S::key_memory_bytes(&dk), "detection key loaded");
        let dk = Arc::new(dk);
        if let Some(inner) = inner.filter(|_| self.scheme.key_file_at_load()) {
            self.spawn_write(inner, key_id, dk.clone());
        }
        Ok((dk, LoadSource::Store))
    }

    /// `key_id`'s key `dk` left memory (evicted to make room): write its file now unless it
    /// has one, for a scheme that does not write it at load
    /// ([`DetectionScheme::key_file_at_load`]).
    pub fn evicted(&self, key_id: &str, dk: Arc<S::Key>) {
        if self.scheme.key_file_at_load() {
            return;
        }
        let Some(inner) = self.inner.as_ref().filter(|_| safe_id(key_id)) else {
            return;
        };
        if !inner.dir.has(key_id) {
            self.spawn_write(inner, key_id, dk);
        }
    }

    /// Wait until no file is being written (tests and benchmarks).
    pub async fn flush(&self) {
        if let Some(inner) = &self.inner {
            let _ = inner.writes.acquire().await;
        }
    }

    /// The file `key_id`'s expanded key is kept in (None: files disabled, or an id that is
    /// not a safe file name).
    pub fn path(&self, key_id: &str) -> Option<PathBuf> {
        let inner = self.inner.as_ref().filter(|_| safe_id(key_id))?;
        Some(inner.dir.path(key_id))
    }

    fn observe(&self, source: LoadSource, started: Instant, bytes: u64) {
        let label = [source.as_str()];
        self.metrics
            .key_load_seconds
            .with_label_values(&label)
            .observe(started.elapsed().as_secs_f64());
        self.metrics
            .key_load_bytes
            .with_label_values(&label)
            .inc_by(bytes);
    }

    fn event(&self, event: &str) {
        self.metrics
            .key_file_events
            .with_label_values(&[event])
            .inc();
    }

    /// Read `key_id`'s file on a blocking thread; None when there is none or it is unusable
    /// (then it is deleted).
    async fn read(&self, inner: &Arc<Inner>, key_id: &str) -> Option<(S::Key, u64)> {
        let _permit = inner.reads.acquire().await.ok()?;
        let path = inner.dir.path(key_id);
        let scheme = self.scheme.clone();
        let read = tokio::task::spawn_blocking(move || read_key_file(&path, &scheme)).await;
        match read {
            Ok(Ok(Some((dk, bytes)))) => {
                inner.dir.record(key_id, bytes);
                Some((dk, bytes))
            }
            Ok(Ok(None)) => {
                inner.dir.forget(key_id);
                None
            }
            Ok(Err(e)) => {
                tracing::warn!(%key_id, "expanded key file unusable; deleting it and expanding the key from the store: {e:#}");
                self.event("discarded");
                inner.dir.remove(key_id);
                self.metrics.key_file_bytes.set(inner.dir.totals().1 as i64);
                None
            }
            Err(e) => {
                tracing::error!(%key_id, "reading the expanded key file failed: {e}");
                None
            }
        }
    }

    /// Write `dk`'s file on a blocking thread unless a write is in progress.
    fn spawn_write(&self, inner: &Arc<Inner>, key_id: &str, dk: Arc<S::Key>) {
        let Ok(permit) = inner.writes.clone().try_acquire_owned() else {
            tracing::debug!(%key_id, "expanded key file not written: another write in progress");
            self.event("write_skipped");
            return;
        };
        let (this, inner, key_id) = (self.clone(), inner.clone(), key_id.to_string());
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let started = Instant::now();
            match inner.dir.write::<S>(&key_id, &dk) {
                Ok(Written { bytes, evicted }) => {
                    (0..evicted).for_each(|_| this.event("evicted"));
                    if bytes > 0 {
                        this.event("written");
                        tracing::info!(%key_id, bytes, evicted, ms = started.elapsed().as_millis() as u64, "expanded key file written");
                    } else {
                        this.event("write_skipped");
                        tracing::info!(%key_id, budget_bytes = inner.dir.budget, "expanded key file not written: larger than key_disk_bytes");
                    }
                }
                Err(e) => {
                    this.event("write_failed");
                    tracing::warn!(%key_id, "writing the expanded key file failed: {e:#}");
                }
            }
            this.metrics.key_file_bytes.set(inner.dir.totals().1 as i64);
        });
    }

    /// At most every [`SWEEP_EVERY`], delete (in the background) the files of keys that are no
    /// longer registered.
    fn maybe_sweep(&self, inner: &Arc<Inner>, store: &Store) {
        {
            let mut last = inner.last_sweep.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < SWEEP_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let (this, inner, store) = (self.clone(), inner.clone(), store.clone());
        tokio::spawn(async move {
            let registered = match store.active_keys().await {
                Ok(keys) => keys,
                Err(e) => {
                    tracing::warn!("listing keys to sweep expanded key files: {e:#}");
                    return;
                }
            };
            let gone: Vec<String> = inner
                .dir
                .ids()
                .into_iter()
                .filter(|id| !registered.iter().any(|k| &k.key_id == id))
                .collect();
            for id in &gone {
                inner.dir.remove(id);
                this.event("unregistered");
                tracing::info!(key_id = %id, "expanded key file deleted: key no longer registered");
            }
            this.metrics.key_file_bytes.set(inner.dir.totals().1 as i64);
        });
    }
}

/// The FFT plans this process pinned, one `size algorithm base` line per size.
static PINNED_PLANS: Mutex<String> = Mutex::new(String::new());

/// Pin tfhe-rs's FFT plans to those recorded in `data_dir/expanded-keys/fft-plans` (measured
/// and recorded on the first run), so that the files one run of omrd writes are valid in the
/// next: the Fourier-domain layout of a key depends on the plans, which tfhe-rs otherwise picks
/// by timing in each process. `Application::build` calls it, before its worker transforms a
/// polynomial. Plans this process pinned already take precedence over the file (a process may
/// host several servers — tests, `omr demo` — and replacing a plan in use would spoil every key
/// expanded under it); the file then records what the process runs. Nothing to do when the
/// files are disabled or the process runs no worker.
pub fn pin_fft_plans(config: &Config) {
    if config.key_disk_bytes == Some(0) || config.role == Role::Api {
        return;
    }
    let Ok(params) = ParamSet::by_name(config.param_set_name()) else {
        return;
    };
    let dir = config.data_dir.join(KEY_FILES_DIR);
    let path = dir.join("fft-plans");
    let old = fs::read_to_string(&path).unwrap_or_default();
    let mut pinned = PINNED_PLANS.lock().expect("pinned FFT plans");
    let new = omr_core::pin_fft_plans(params, &format!("{pinned}{old}"));
    for line in new.lines() {
        let size = line.split_whitespace().next();
        if !pinned.lines().any(|l| l.split_whitespace().next() == size) {
            pinned.push_str(line);
            pinned.push('\n');
        }
    }
    drop(pinned);
    tracing::info!(plans = %new.trim().replace('\n', "; "), recorded = (new == old), "FFT plans pinned");
    if new != old {
        let tmp = dir.join("fft-plans.tmp");
        let written = fs::create_dir_all(&dir)
            .and_then(|()| fs::write(&tmp, &new))
            .and_then(|()| fs::rename(&tmp, &path));
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), "recording the FFT plans: {e}");
        }
    }
}
