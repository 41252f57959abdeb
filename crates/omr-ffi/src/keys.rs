//! A recipient's keys as the bindings see them: [`generate_keys`] writes a key directory (the
//! same files `omr keygen` writes, so either reads the other's), [`KeyDirectory`] opens one, and
//! [`Address`] is a recipient's address as text and back.

use std::sync::Arc;

use omr_client::keydir::{self, KeyDir};
use omr_client::seal::SEAL_OVERHEAD;
use omr_client::Keys;

use crate::error::{OmrError, Result};
use crate::runtime;

/// Generate a recipient's keys for `param_set` (`omr-v1`, `omr-v2`, `omr-light-v1`; the
/// insecure `insecure-test` only with `allow_insecure_params`, for tests) and write them to
/// the directory `path` (created mode 0700; secret files 0600), as `omr keygen --out PATH`
/// does. `kbar`: most messages one digest decodes (TFHE only; default 50, or the set's
/// maximum if lower). An existing secret key there is kept unless `overwrite`.
///
/// TFHE keys take seconds to generate (omr-v1's detection key is 107 MB); it runs on the SDK's
/// threads, not the caller's.
///
/// ```python
/// keys = await omr.generate_keys("wallet/omr", "omr-light-v1")
/// print(keys.address())      # omr1…: give it to senders
/// ```
#[uniffi::export(default(kbar = None, allow_insecure_params = false, overwrite = false))]
pub async fn generate_keys(
    path: String,
    param_set: String,
    kbar: Option<u32>,
    allow_insecure_params: bool,
    overwrite: bool,
) -> Result<Arc<KeyDirectory>> {
    let (name, insecure, max_kbar) = omr_client::scheme::param_set(&param_set).map_err(|_| {
        OmrError::invalid(
            "bad_param_set",
            format!(
                "unknown parameter set {param_set:?} (known: {}; insecure-test for tests)",
                omr_client::param_sets::param_set_list()
            ),
        )
    })?;
    if insecure && !allow_insecure_params {
        return Err(OmrError::invalid(
            "insecure_params",
            format!("parameter set {name} is insecure (for tests only); pass allow_insecure_params to use it anyway"),
        ));
    }
    let light = name == omr_client::scheme::LIGHT_SET;
    if light && kbar.is_some_and(|k| k != 1) {
        return Err(OmrError::invalid(
            "invalid",
            format!("kbar does not apply to {name}: its digest names every message of its range"),
        ));
    }
    let kbar = kbar.map_or(50.min(max_kbar), |k| k as usize);
    if kbar == 0 || kbar > max_kbar {
        return Err(OmrError::invalid(
            "invalid",
            format!("kbar must be 1 to {max_kbar} for {name}, not {kbar}"),
        ));
    }
    runtime::run_blocking(move || {
        let keys = Keys::generate(name, kbar).map_err(omr_client::Error::from)?;
        let dir = KeyDir::create_keys(&path, &keys, overwrite)?;
        Ok(Arc::new(KeyDirectory::from(dir)))
    })
    .await
}

/// A recipient's key directory (as `omr keygen` writes it): keys, address, registration and
/// where retrieval stands (moved by [`KeyDirectory::acknowledge`]). Retrievals of one directory
/// through one `KeyDirectory` object run one at a time; use one object per directory.
#[derive(Debug, uniffi::Object)]
pub struct KeyDirectory {
    pub(crate) dir: KeyDir,
    /// Held across a retrieval: two at once would make the same rounds twice.
    pub(crate) retrieving: Arc<tokio::sync::Mutex<()>>,
    /// Held while an acknowledgement compares and saves the state.
    pub(crate) saving: std::sync::Mutex<()>,
}

impl From<KeyDir> for KeyDirectory {
    fn from(dir: KeyDir) -> Self {
        KeyDirectory {
            dir,
            retrieving: Arc::default(),
            saving: std::sync::Mutex::default(),
        }
    }
}

#[uniffi::export]
impl KeyDirectory {
    /// Open the key directory at `path` (made by [`generate_keys`] or `omr keygen`); its secret
    /// key must be readable.
    #[uniffi::constructor]
    pub fn open(path: String) -> Result<Arc<Self>> {
        let dir = KeyDir::new(path);
        dir.secret()?;
        Ok(Arc::new(KeyDirectory::from(dir)))
    }

    pub fn path(&self) -> String {
        self.dir.path().display().to_string()
    }

    /// The keys' parameter set (`omr-v1`, `omr-v2`, `omr-light-v1`, `insecure-test`).
    pub fn param_set(&self) -> Result<String> {
        Ok(self.dir.clue_key()?.param_set().to_string())
    }

    /// The recipient's address, one line of text to give to senders (what `omr address`
    /// prints).
    pub fn address(&self) -> Result<String> {
        Ok(self.dir.address()?.encode())
    }

    /// The encoded detection key, as [`crate::Client::register`] uploads it.
    pub fn detection_key(&self) -> Result<Vec<u8>> {
        Ok(self.dir.detection_key_bytes()?)
    }

    /// The registration made with [`crate::Client::register`] (or `omr register`), if any.
    pub fn registration(&self) -> Result<Option<Registration>> {
        Ok(self.dir.registration()?.as_ref().map(Registration::from))
    }
}

impl KeyDirectory {
    pub(crate) fn require_registration(&self) -> Result<keydir::Registration> {
        self.dir.registration()?.ok_or_else(|| {
            OmrError::local(
                "not_registered",
                format!(
                    "{} is not registered yet: call Client.register first",
                    self.dir.path().display()
                ),
            )
        })
    }
}

/// A key's registration with omrd (its access token stays in the key directory, mode 0600).
#[derive(Debug, Clone, uniffi::Record)]
pub struct Registration {
    pub key_id: String,
    /// The first board index the key's digests cover.
    pub start_index: u64,
    pub param_set: String,
    pub kbar: u32,
    pub grpc_url: String,
    pub http_url: Option<String>,
    /// RFC 3339.
    pub registered_at: String,
}

impl From<&keydir::Registration> for Registration {
    fn from(r: &keydir::Registration) -> Self {
        Registration {
            key_id: r.key_id.clone(),
            start_index: r.start_index,
            param_set: r.param_set.clone(),
            kbar: r.kbar as u32,
            grpc_url: r.grpc_url.clone(),
            http_url: r.http_url.clone(),
            registered_at: r.registered_at.clone(),
        }
    }
}

/// A recipient's address: its clue key and seal public key, one line of text (`omr1…`).
#[derive(Debug, uniffi::Object)]
pub struct Address {
    pub(crate) inner: omr_client::Address,
}

#[uniffi::export]
impl Address {
    /// Parse an address (white space around it and line breaks inside it are ignored); a
    /// mistyped or truncated one is refused (`bad_address`): its last 4 bytes check the rest.
    ///
    /// ```python
    /// try:
    ///     room = omr.Address.parse(text).max_payload_bytes()
    /// except omr.OmrError.Invalid as e:
    ///     print(e.code)      # bad_address
    /// ```
    #[uniffi::constructor]
    pub fn parse(text: String) -> Result<Arc<Self>> {
        let inner =
            omr_client::Address::parse(&text).map_err(|e| OmrError::invalid("bad_address", e))?;
        Ok(Arc::new(Address { inner }))
    }

    /// The address as one line of text, as `omr address` prints it.
    pub fn text(&self) -> String {
        self.inner.encode()
    }

    /// Its parameter set (the recipient's keys', and the server's).
    pub fn param_set(&self) -> String {
        self.inner.clue_key.param_set().to_string()
    }

    /// The longest payload [`crate::Client::send`] can seal to it (the parameter set's payload
    /// less the seal's 50 bytes).
    pub fn max_payload_bytes(&self) -> u64 {
        (self.inner.clue_key.payload_bytes()).saturating_sub(SEAL_OVERHEAD) as u64
    }
}
