//! A recipient's key directory: the files `omr keygen` writes and the other commands read.
//!
//! | file | contents | mode |
//! |---|---|---|
//! | `secret.key` | the secret key (decrypts digests) | 0600 |
//! | `clue.key` | the public clue key (also inside `address`) | 0644 |
//! | `seal.key` | the seal key: opens payloads sealed to the address | 0600 |
//! | `address` | the recipient's address, one line, given to senders (`crate::address`) | 0644 |
//! | `detection.key` | the detection key uploaded to omrd (≈ 107 MB for omr-v1, 32.5 MB for omr-light-v1) | 0644 |
//! | `registration.json` | key id and access token from `omr register` | 0600 |
//! | `digest-state.json` | the last index retrieved and the indices already seen | 0600 |
//!
//! The keys are of either scheme (TFHE or omr-light-v1): each file's header says which.
//!
//! Files are written to a temporary name in the directory and renamed, so a crash never leaves a
//! half-written key; the directory itself is created 0700.
//!
//! ```
//! use omr_client::KeyDir;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! # let path = tmp.path().join("alice");
//! let keys = omr_core::keygen(&omr_core::INSECURE_TEST, 4)?;
//! let dir = KeyDir::create(&path, &keys, false)?;
//! // What a sender needs, and what only the recipient may read.
//! let address = dir.address()?;
//! let secret = dir.secret_key()?;
//! assert_eq!(secret.kbar(), 4);
//! let sealed = address.seal.seal(b"hi");
//! assert_eq!(dir.seal_key()?.open(&sealed).bytes(), Some(&b"hi"[..]));
//! // Not registered yet: commands that need a registration say how to make one.
//! assert!(dir.registration()?.is_none());
//! // A second keygen into the same directory would lose the secret key: refused.
//! assert!(KeyDir::create(&path, &keys, false).is_err());
//! # Ok(())
//! # }
//! ```

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use omr_core::keys::{CLUE_KEY_LIMIT, DETECTION_KEY_LIMIT, SECRET_KEY_LIMIT};
use omr_core::KeySet;
use serde::{Deserialize, Serialize};

use crate::address::{Address, MAX_ADDRESS_CHARS};
use crate::error::{Error, Result};
use crate::scheme::{ClueKey, Keys, SecretKey};
use crate::seal::{SealKey, SEAL_KEY_LEN};

pub const SECRET_KEY_FILE: &str = "secret.key";
pub const SEAL_KEY_FILE: &str = "seal.key";
pub const ADDRESS_FILE: &str = "address";
pub const CLUE_KEY_FILE: &str = "clue.key";
pub const DETECTION_KEY_FILE: &str = "detection.key";
pub const REGISTRATION_FILE: &str = "registration.json";
pub const DIGEST_STATE_FILE: &str = "digest-state.json";

/// What `omr register` learned from the server. The access token is the only credential for
/// the key's digests: [`std::fmt::Debug`] never prints it.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Registration {
    pub key_id: String,
    pub access_token: String,
    /// The first board index the key's digests cover.
    pub start_index: u64,
    pub param_set: String,
    pub kbar: usize,
    /// The servers it was registered with (defaults for later commands).
    pub grpc_url: String,
    #[serde(default)]
    pub http_url: Option<String>,
    /// RFC 3339.
    pub registered_at: String,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("key_id", &self.key_id)
            .field("access_token", &"<redacted>")
            .field("start_index", &self.start_index)
            .field("param_set", &self.param_set)
            .field("kbar", &self.kbar)
            .field("grpc_url", &self.grpc_url)
            .field("http_url", &self.http_url)
            .finish()
    }
}

/// A recipient's key directory.
#[derive(Debug, Clone)]
pub struct KeyDir {
    path: PathBuf,
}

impl KeyDir {
    /// The directory at `path` (nothing is read until asked).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        KeyDir { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Write a freshly generated TFHE key set (see [`KeyDir::create_keys`]).
    pub fn create(path: impl Into<PathBuf>, keys: &KeySet, overwrite: bool) -> Result<KeyDir> {
        Self::create_keys(path, &Keys::from(keys), overwrite)
    }

    /// Write freshly generated keys of either scheme. Refuses to overwrite an existing secret
    /// key unless `overwrite` (losing a secret key loses every digest made for it).
    pub fn create_keys(path: impl Into<PathBuf>, keys: &Keys, overwrite: bool) -> Result<KeyDir> {
        let dir = KeyDir::new(path);
        let secret = dir.file(SECRET_KEY_FILE);
        if secret.exists() && !overwrite {
            return Err(Error::bad_file(
                secret,
                "a secret key is already there; choose another directory or pass --force to replace it (its registration and digests become useless)",
            ));
        }
        create_private_dir(&dir.path)?;
        dir.write(SECRET_KEY_FILE, &keys.secret.to_bytes(), true)?;
        dir.write(CLUE_KEY_FILE, &keys.clue_key.to_bytes(), false)?;
        dir.write(DETECTION_KEY_FILE, &keys.detection_key, false)?;
        let seal = SealKey::generate();
        dir.write(SEAL_KEY_FILE, &seal.to_bytes(), true)?;
        let address = Address {
            clue_key: keys.clue_key.clone(),
            seal: seal.public().clone(),
        };
        dir.write(
            ADDRESS_FILE,
            format!("{}\n", address.encode()).as_bytes(),
            false,
        )?;
        // A new secret key invalidates any earlier registration and digest state.
        for stale in [REGISTRATION_FILE, DIGEST_STATE_FILE] {
            remove_if_exists(&dir.file(stale))?;
        }
        Ok(dir)
    }

    /// The TFHE secret key (an omr-light-v1 directory is refused: see [`KeyDir::secret`]).
    pub fn secret_key(&self) -> Result<omr_core::SecretKey> {
        match self.secret()? {
            SecretKey::Tfhe(k) => Ok(k),
            SecretKey::Light(_) => Err(Error::bad_file(
                self.file(SECRET_KEY_FILE),
                "an omr-light-v1 secret key, not a TFHE one (KeyDir::secret reads either)",
            )),
        }
    }

    /// The secret key, of either scheme.
    pub fn secret(&self) -> Result<SecretKey> {
        let path = self.file(SECRET_KEY_FILE);
        let bytes = read(&path, SECRET_KEY_LIMIT, "secret key")?;
        SecretKey::from_bytes(&bytes)
            .map_err(|e| Error::bad_file(path, format!("not a secret key: {e}")))
    }

    pub fn clue_key(&self) -> Result<ClueKey> {
        read_clue_key(&self.file(CLUE_KEY_FILE))
    }

    /// The seal key, which opens payloads sealed to this directory's address.
    pub fn seal_key(&self) -> Result<SealKey> {
        let path = self.file(SEAL_KEY_FILE);
        if !path.exists() {
            return Err(Error::bad_file(
                path,
                "missing: this key directory was made before sealed payloads; sealed messages to \
                 it cannot be opened. Make a new one with `omr keygen` (and register it)",
            ));
        }
        let bytes = read(&path, SEAL_KEY_LEN, "seal key")?;
        SealKey::from_bytes(&bytes).map_err(|e| Error::bad_file(path, e.to_string()))
    }

    /// The seal key, or `None` for a directory made before sealed payloads (its sealed
    /// messages cannot be opened; unsealed ones still can).
    pub fn seal_key_if_any(&self) -> Result<Option<SealKey>> {
        match self.file(SEAL_KEY_FILE).exists() {
            true => self.seal_key().map(Some),
            false => Ok(None),
        }
    }

    /// The recipient's address (what `omr address` prints).
    pub fn address(&self) -> Result<Address> {
        let path = self.file(ADDRESS_FILE);
        if !path.exists() && self.file(CLUE_KEY_FILE).exists() {
            return Err(Error::bad_file(
                path,
                "missing: this key directory was made before addresses; senders can only use \
                 its clue.key, with --plaintext. Make a new one with `omr keygen`",
            ));
        }
        read_address(&path)
    }

    /// The encoded detection key, as uploaded.
    pub fn detection_key_bytes(&self) -> Result<Vec<u8>> {
        read(
            &self.file(DETECTION_KEY_FILE),
            DETECTION_KEY_LIMIT,
            "detection key",
        )
    }

    /// The registration, if the key was registered.
    pub fn registration(&self) -> Result<Option<Registration>> {
        self.read_json(REGISTRATION_FILE)
    }

    /// The registration, or an error telling how to make one.
    pub fn require_registration(&self) -> Result<Registration> {
        self.registration()?.ok_or_else(|| {
            Error::bad_file(
                self.file(REGISTRATION_FILE),
                "not registered yet: run `omr register --keys DIR` first",
            )
        })
    }

    pub fn save_registration(&self, reg: &Registration) -> Result<()> {
        self.write_json(REGISTRATION_FILE, reg)?;
        // Digest state belongs to the previous registration, if any.
        remove_if_exists(&self.file(DIGEST_STATE_FILE))
    }

    /// Forget the registration (after the key was deleted on the server).
    pub fn remove_registration(&self) -> Result<()> {
        remove_if_exists(&self.file(REGISTRATION_FILE))?;
        remove_if_exists(&self.file(DIGEST_STATE_FILE))
    }

    /// The digest state for `reg`: the stored one if it is for this key, else a fresh one.
    pub fn digest_state(&self, reg: &Registration) -> Result<DigestState> {
        Ok(self
            .read_json::<DigestState>(DIGEST_STATE_FILE)?
            .filter(|s| s.key_id == reg.key_id)
            .unwrap_or_else(|| DigestState::new(reg)))
    }

    pub fn save_digest_state(&self, state: &DigestState) -> Result<()> {
        self.write_json(DIGEST_STATE_FILE, state)
    }

    fn read_json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Option<T>> {
        let path = self.file(name);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Error::bad_file(path, format!("not valid: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::file("cannot read", path, e)),
        }
    }

    fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value).expect("serializable");
        bytes.push(b'\n');
        self.write(name, &bytes, true)
    }

    /// Write `name` atomically (temporary file + rename), mode 0600 when `private`.
    fn write(&self, name: &str, bytes: &[u8], private: bool) -> Result<()> {
        let path = self.file(name);
        let tmp = self.file(&format!(".{name}.tmp"));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(if private { 0o600 } else { 0o644 });
        }
        let mut f = opts
            .open(&tmp)
            .map_err(|e| Error::file("cannot create", &tmp, e))?;
        #[cfg(unix)]
        if private {
            // The mode above only applies to new files; an old temporary may have another.
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| Error::file("cannot protect", &tmp, e))?;
        }
        f.write_all(bytes)
            .and_then(|_| f.sync_all())
            .map_err(|e| Error::file("cannot write", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::file("cannot write", &path, e))
    }
}

/// Read an address file (one line, as `omr keygen` writes it).
pub fn read_address(path: &Path) -> Result<Address> {
    let bytes = read(path, MAX_ADDRESS_CHARS, "address")?;
    let text =
        String::from_utf8(bytes).map_err(|_| Error::bad_file(path, "not an address: not text"))?;
    Address::parse(&text).map_err(|e| Error::bad_file(path, e.to_string()))
}

/// Read a clue key file.
pub fn read_clue_key(path: &Path) -> Result<ClueKey> {
    let bytes = read(path, CLUE_KEY_LIMIT, "clue key")?;
    ClueKey::from_bytes(&bytes).map_err(|e| Error::bad_file(path, format!("not a clue key: {e}")))
}

/// Read a key file of at most `limit` bytes (its decoder's limit), allocating no more however
/// large the file is: a clue key comes from someone else, and gigabytes must not be read.
fn read(path: &Path, limit: usize, what: &str) -> Result<Vec<u8>> {
    let too_large = |len: u64| {
        Error::bad_file(
            path,
            format!("{len} bytes is more than any {what} ({limit} bytes): not a {what}"),
        )
    };
    let file = std::fs::File::open(path).map_err(|e| Error::file("cannot read", path, e))?;
    let len = file
        .metadata()
        .map_err(|e| Error::file("cannot read", path, e))?
        .len();
    if len > limit as u64 {
        return Err(too_large(len));
    }
    // The file may grow meanwhile: read at most one byte past the limit.
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::file("cannot read", path, e))?;
    if bytes.len() > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::file("cannot remove", path, e))
        }
        _ => Ok(()),
    }
}

fn create_private_dir(path: &Path) -> Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(path)
        .map_err(|e| Error::file("cannot create directory", path, e))
}

mod state;
#[cfg(test)]
mod tests;

pub use state::{DigestState, PendingAttachment};
