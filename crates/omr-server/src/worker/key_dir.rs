//! The directory of expanded-key files behind `KeyFiles`: which files there are (size and last
//! use), the disk budget with least-recently-used eviction, atomic writes (temporary file,
//! fsync, rename, fsync of the directory) and checked reads.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, BufWriter, ErrorKind};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use crate::scheme::DetectionScheme;
use anyhow::Context;

const EXT: &str = "key";
/// A temporary file this old was left by a process that died while writing it.
const STALE_TMP: Duration = Duration::from_secs(600);

/// The files of one directory.
#[derive(Debug)]
pub(super) struct KeyDir {
    dir: PathBuf,
    pub(super) budget: u64,
    index: Mutex<Index>,
}

/// Each file's size and last use (a counter: files found at start are ordered by modification
/// time, which a read updates, so the order survives a restart).
#[derive(Debug, Default)]
struct Index {
    files: HashMap<String, (u64, u64)>,
    tick: u64,
}

impl Index {
    fn touch(&mut self, key_id: &str, bytes: u64) {
        self.tick += 1;
        self.files.insert(key_id.to_string(), (bytes, self.tick));
    }
}

/// What one write did: the file's bytes (0: not written, over the budget) and how many files
/// were deleted to make room.
pub(super) struct Written {
    pub(super) bytes: u64,
    pub(super) evicted: usize,
}

impl KeyDir {
    /// Create the directory, resolve the budget, index what is there; None when disabled.
    pub(super) fn open(dir: PathBuf, budget: Option<u64>) -> anyhow::Result<Option<KeyDir>> {
        if budget == Some(0) {
            return Ok(None);
        }
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut found = Vec::new();
        for entry in fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let entry = entry?;
            let (path, meta) = (entry.path(), entry.metadata()?);
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let name = entry.file_name().to_string_lossy().into_owned();
            match name.strip_suffix(&format!(".{EXT}")) {
                Some(id) if meta.is_file() && safe_id(id) => {
                    found.push((modified, id.to_string(), meta.len()));
                }
                _ if name.ends_with(".tmp")
                    && modified.elapsed().is_ok_and(|age| age > STALE_TMP) =>
                {
                    let _ = fs::remove_file(&path);
                }
                _ => {}
            }
        }
        // Unset: half of what the files could have, counting the files already there as free
        // (so that a restart does not shrink the budget below what the last run kept).
        let budget = match budget {
            Some(b) => b,
            None => {
                let st = rustix::fs::statvfs(&dir)
                    .with_context(|| format!("reading free space under {}", dir.display()))?;
                let kept: u64 = found.iter().map(|(_, _, b)| b).sum();
                st.f_bavail.saturating_mul(st.f_frsize).saturating_add(kept) / 2
            }
        };
        found.sort();
        let mut index = Index::default();
        for (_, id, bytes) in found {
            index.touch(&id, bytes);
        }
        let this = KeyDir {
            dir,
            budget,
            index: Mutex::new(index),
        };
        this.make_room(0, "");
        Ok(Some(this))
    }

    pub(super) fn path(&self, key_id: &str) -> PathBuf {
        self.dir.join(format!("{key_id}.{EXT}"))
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Note that `key_id`'s file of `bytes` was just used (read or found).
    pub(super) fn record(&self, key_id: &str, bytes: u64) {
        self.index().touch(key_id, bytes);
    }

    /// Forget `key_id`'s file (it is gone).
    pub(super) fn forget(&self, key_id: &str) {
        self.index().files.remove(key_id);
    }

    /// Whether `key_id` has a file.
    pub(super) fn has(&self, key_id: &str) -> bool {
        self.index().files.contains_key(key_id)
    }

    /// The key ids that have files.
    pub(super) fn ids(&self) -> Vec<String> {
        self.index().files.keys().cloned().collect()
    }

    /// (files, bytes) on disk.
    pub(super) fn totals(&self) -> (usize, u64) {
        let index = self.index();
        (
            index.files.len(),
            index.files.values().map(|(b, _)| b).sum(),
        )
    }

    pub(super) fn remove(&self, key_id: &str) {
        self.index().files.remove(key_id);
        match fs::remove_file(self.path(key_id)) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                tracing::warn!(%key_id, "deleting the expanded key file: {e}");
            }
            _ => {}
        }
    }

    /// Delete least recently used files (other than `keep`'s) until `incoming` more bytes fit
    /// the budget; returns how many were deleted.
    fn make_room(&self, incoming: u64, keep: &str) -> usize {
        let mut evicted = 0;
        loop {
            let victim = {
                let index = self.index();
                let used: u64 = index
                    .files
                    .iter()
                    .filter(|(id, _)| id.as_str() != keep)
                    .map(|(_, (b, _))| b)
                    .sum();
                if used.saturating_add(incoming) <= self.budget {
                    return evicted;
                }
                index
                    .files
                    .iter()
                    .filter(|(id, _)| id.as_str() != keep)
                    .min_by_key(|(_, (_, t))| *t)
                    .map(|(id, _)| id.clone())
            };
            let Some(victim) = victim else {
                return evicted;
            };
            self.remove(&victim);
            tracing::info!(key_id = %victim, "expanded key file evicted (key_disk_bytes)");
            evicted += 1;
        }
    }

    /// Write `dk` to `key_id`'s file atomically, first deleting least recently used files
    /// until it fits the budget.
    pub(super) fn write<S: DetectionScheme>(
        &self,
        key_id: &str,
        key: &S::Key,
    ) -> anyhow::Result<Written> {
        let bytes = S::key_file_len(key);
        if bytes > self.budget {
            return Ok(Written {
                bytes: 0,
                evicted: 0,
            });
        }
        let evicted = self.make_room(bytes, key_id);
        let path = self.path(key_id);
        let tmp = self.dir.join(format!(
            ".{key_id}.{}.{}.tmp",
            std::process::id(),
            rand::random::<u32>()
        ));
        let written = write_file::<S>(&tmp, &path, &self.dir, key);
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written?;
        self.index().touch(key_id, bytes);
        Ok(Written { bytes, evicted })
    }
}

/// Write `key` to `tmp` (mode 0600), fsync it, rename it to `path` and fsync `dir`.
fn write_file<S: DetectionScheme>(
    tmp: &Path,
    path: &Path,
    dir: &Path,
    key: &S::Key,
) -> anyhow::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options
        .open(tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    let mut w = BufWriter::with_capacity(1 << 16, file);
    S::write_key_file(key, &mut w).with_context(|| format!("writing {}", tmp.display()))?;
    let file = w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
        .with_context(|| format!("syncing {}", tmp.display()))?;
    fs::rename(tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))?;
    Ok(())
}

/// Read `scheme`'s key at `path`: None when there is no file; its size with it.
pub(super) fn read_key_file<S: DetectionScheme>(
    path: &Path,
    scheme: &S,
) -> anyhow::Result<Option<(S::Key, u64)>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let bytes = file.metadata()?.len();
    // Readahead for the whole file; advice only, so a failure changes nothing.
    let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::Sequential);
    let dk = (scheme.read_key_file(&mut BufReader::with_capacity(1 << 16, &file)))
        .with_context(|| format!("reading {}", path.display()))?;
    // The modification time is the last use, so that eviction order survives a restart.
    let _ = file.set_modified(SystemTime::now());
    Ok(Some((dk, bytes)))
}

/// Key ids that are safe file names as they are (omrd makes UUIDs); others are never cached.
pub(super) fn safe_id(key_id: &str) -> bool {
    !key_id.is_empty()
        && key_id.len() <= 128
        && key_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::Tfhe;
    use omr_core::{keygen, DetectionKey, INSECURE_TEST};

    fn key() -> DetectionKey {
        keygen(&INSECURE_TEST, 4).unwrap().detection_key.expand()
    }

    #[test]
    fn least_recently_used_files_go_past_the_budget() {
        let tmp = tempfile::tempdir().unwrap();
        let dk = key();
        let len = dk.expanded_len();
        let dir = KeyDir::open(tmp.path().to_path_buf(), Some(2 * len + len / 2))
            .unwrap()
            .unwrap();
        for id in ["a", "b"] {
            let w = dir.write::<Tfhe>(id, &dk).unwrap();
            assert_eq!((w.bytes, w.evicted), (len, 0));
        }
        // "a" is read again, so "b" is now the least recently used.
        let tfhe = Tfhe::new(&INSECURE_TEST);
        let (_, bytes) = read_key_file(&dir.path("a"), &tfhe).unwrap().unwrap();
        dir.record("a", bytes);
        let w = dir.write::<Tfhe>("c", &dk).unwrap();
        assert_eq!((w.bytes, w.evicted), (len, 1));
        assert!(!dir.path("b").exists());
        let mut ids = dir.ids();
        ids.sort();
        assert_eq!(ids, ["a", "c"]);
        assert_eq!(dir.totals(), (2, 2 * len));

        // A restart with room for one file keeps the most recently used ("c", written last).
        drop(dir);
        let dir = KeyDir::open(tmp.path().to_path_buf(), Some(len))
            .unwrap()
            .unwrap();
        assert_eq!(dir.ids(), ["c"]);
        assert!(!dir.path("a").exists());
        // A key larger than the budget is not written, and evicts nothing.
        let small = KeyDir::open(tmp.path().to_path_buf(), Some(len - 1))
            .unwrap()
            .unwrap();
        let w = small.write::<Tfhe>("d", &dk).unwrap();
        assert_eq!((w.bytes, w.evicted), (0, 0));
        assert!(!small.path("d").exists());
    }

    #[test]
    fn no_budget_means_no_files_and_odd_ids_are_never_file_names() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(KeyDir::open(tmp.path().join("x"), Some(0))
            .unwrap()
            .is_none());
        assert!(!tmp.path().join("x").exists());
        for bad in ["", "../etc", "a/b", ".hidden", "a.key", &"x".repeat(129)] {
            assert!(!safe_id(bad), "{bad:?}");
        }
        assert!(safe_id("0b4c9e2a-8f3e-4d7a-9c1b-2e5f6a7b8c9d"));
    }
}
