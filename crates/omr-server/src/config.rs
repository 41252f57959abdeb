//! Configuration: built-in defaults, then an optional TOML file, then `OMR_*` environment
//! variables, then command-line flags.
//! Long: every configuration key is declared here once, with its documentation, type and default, beside its validation; splitting them would scatter the one list operators read.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

pub use crate::admin_token::{AdminToken, MIN_ADMIN_TOKEN_LEN};
pub use crate::memory::available_memory;

/// The least `light_fetch_open_rebuild_ms`.
pub const MIN_OPEN_REBUILD_MS: u64 = 50;

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Human,
    Json,
}

/// Declares [`Config`] from one list in which every field appears once, with its docs,
/// attributes, type and default value: generates the struct, its `Default` and [`KEYS`] (the
/// field names, in order).
macro_rules! declare_config {
    (
        $(#[$meta:meta])*
        pub struct Config {
            $( $(#[$attr:meta])* pub $field:ident: $ty:ty = $default:expr, )*
        }
    ) => {
        $(#[$meta])*
        pub struct Config {
            $( $(#[$attr])* pub $field: $ty, )*
        }

        impl Default for Config {
            fn default() -> Self {
                Config { $( $field: $default, )* }
            }
        }

        /// Every configuration key (the fields of [`Config`]).
        pub const KEYS: &[&str] = &[$( stringify!($field) ),*];
    };
}

declare_config! {
/// Everything omrd can be told. Field names are the TOML keys; `OMR_<FIELD>` (upper case) sets
/// each from the environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// HTTP listen address (port 0: any free port).
    pub http_addr: SocketAddr = "127.0.0.1:8080".parse().expect("literal"),
    /// gRPC listen address (port 0: any free port).
    pub grpc_addr: SocketAddr = "127.0.0.1:50051".parse().expect("literal"),
    /// Data directory: the embedded SQLite file and `omrd.addr` live here.
    pub data_dir: PathBuf = PathBuf::from("./omr-data"),
    /// `postgres://…` selects PostgreSQL; unset uses SQLite under `data_dir`.
    pub database_url: Option<String> = None,
    /// The parameter set this server runs (`omr_api::param_sets::PARAM_SETS`). Unset: the set
    /// the store already holds, or `DEFAULT_PARAM_SET` (omr-v2) on a new store. omrd refuses
    /// to start on a store holding keys or messages of another set.
    pub param_set: Option<String> = None,
    /// Allow a parameter set marked insecure (tests only).
    pub allow_insecure_params: bool = false,
    pub log_format: LogFormat = LogFormat::Human,
    /// Largest detection key accepted, in bytes.
    pub max_key_bytes: u64 = 128 * 1024 * 1024,
    /// Longest a key upload may take, in seconds.
    pub key_upload_timeout_secs: u64 = 600,
    /// Concurrent key uploads, gRPC and HTTP together (each holds the key in memory while it
    /// is checked).
    pub max_concurrent_uploads: usize = 2,
    /// Most detection keys registered at once (the whole deployment, every process on one
    /// store). Past it, registration is refused `too_many_keys` (gRPC RESOURCE_EXHAUSTED, HTTP
    /// 507) before any key byte is read. Every key costs one detection per message posted, and ≈ 107 MB of storage (omr-v1).
    pub max_keys: u64 = 100,
    /// Who may register a detection key: `open` (anyone who reaches the API) or `invite`
    /// (only with an invite code from `omrd invite create` or the admin API).
    pub registration: Registration = Registration::Open,
    /// The bearer token of the admin API (`POST /v1/admin/invites`). Unset (and no
    /// `admin_token_file`): the admin API is off. Never serialized, never printed.
    #[serde(skip_serializing)]
    pub admin_token: Option<AdminToken> = None,
    /// A file holding the admin token (a mounted secret), instead of `admin_token`.
    pub admin_token_file: Option<PathBuf> = None,
    /// Most messages in one `POST /v1/messages/batch`.
    pub max_batch_messages: usize = 1000,
    /// Postage: every posted message must carry a stamp whose hash has at least this many
    /// leading zero bits (a proof of work of 2^bits hashes on average; at most 32). 0 (default):
    /// no postage.
    pub postage_bits: u32 = 0,
    /// Largest attachment a message may carry, in bytes (maximum 65,536; 0: no attachments;
    /// default 65,536 on omr-v1/omr-v2 and 0 on omr-light-v1, whose PIR records are whole
    /// messages: each would be padded to this, and every recipient's payload fetch with it).
    /// Attachments are fetched by PIR once their epoch (`epoch_len` messages) closes; every
    /// epoch's PIR database pads each to this size. Read it with
    /// [`Config::attachment_limit`].
    pub max_attachment_bytes: Option<usize> = None,
    /// Attachment epochs whose PIR database (`epoch_len` × about `max_attachment_bytes`, plus
    /// the hint) a process keeps built in memory (default 2); others are rebuilt on demand.
    pub pir_cached_epochs: usize = 2,
    /// omr-light-v1: MiB the payload fetch's snapshot may keep transformed (every plaintext of
    /// its buckets: 806 MiB per 2^16 retained messages), which makes a recipient's round about
    /// a quarter cheaper in CPU; a larger snapshot is answered without (default 2048; 0: never).
    pub light_fetch_prepared_mb: usize = 2048,
    /// omr-light-v1: the least time, in milliseconds, between two rebuilds of the open epoch's
    /// fetch snapshot (its payloads so far). A round or `GET /v1/fetch/open` that needs a
    /// message past the snapshot waits for the next rebuild, so a payload is fetchable at most
    /// this long (plus the rebuild) after its post, and a busy board costs at most one rebuild
    /// per interval however many recipients ask (default 1000; at least 50).
    pub light_fetch_open_rebuild_ms: u64 = 1000,
    /// omr-light-v1: new messages between two detections of an online recipient's open batch
    /// (its refreshes). A recipient asks for its open batch with a digest, status or wait call
    /// that finds its key behind; the worker then detects it up to the last *refresh mark* (every
    /// this many messages from the batch's first) at or below the board head, never once per
    /// request: a pass over a key (its 32 MiB) is spread over at least this many new messages
    /// however often its recipient asks, and the online keys refreshed to one mark share one
    /// preparation of the batch. A digest then trails the board by fewer than this many
    /// messages; its answer says where the next refresh comes (`omr-refresh-at`). 1: every
    /// ask detects up to the head, a pass per new message a polling client sees. The SDK reads
    /// the newest messages from the board's tail and does not wait for refreshes (default 256,
    /// the SDK's tail; 1 to the batch of 4,096; what each costs: docs/benchmarks.md).
    pub light_refresh_messages: u64 = 256,
    /// How long, in milliseconds, a board read near the head may be answered from the tail
    /// this process keeps in memory (its newest 1,024 messages) instead of the store. Posts
    /// through this process show at once whatever the bound; a post committed by another
    /// process on the same store shows within it. 0: every read goes to the store (default
    /// 100).
    pub board_read_cache_ms: u64 = 100,
    /// Most messages the group-commit writer puts in one transaction.
    pub max_commit_messages: usize = 4096,
    /// Seconds to wait for in-flight work at shutdown.
    pub shutdown_timeout_secs: u64 = 30,
    /// `both` (default): serve the API and run detection; `api`: no detection worker; `worker`:
    /// detection only (HTTP serves just the probes and metrics; no gRPC).
    pub role: Role = Role::Both,
    /// Detection threads (0: one per core).
    pub worker_threads: usize = 0,
    /// Messages detected per key per batch (one transaction each).
    pub detect_batch: usize = 16,
    /// Board indices per accumulator epoch (at most the parameter set's range M).
    pub epoch_len: u64 = 4096,
    /// Bytes of expanded detection keys one worker keeps in memory (≈ 362 MB per omr-v1 key, 192 MB per omr-v2 key).
    /// 0 (default): half of the memory this process may use (its cgroup limit, else the
    /// machine's). A worker serves every key it leases however many fit: past the budget it
    /// time-shares them (see worker/schedule.rs).
    pub key_memory_bytes: u64 = 0,
    /// Where omr-light-v1's per-key pass runs: `cpu` (default); `cuda`, an NVIDIA GPU (device
    /// 0; omrd refuses to start without a usable one, or with a TFHE set); `auto`, the GPU when
    /// one is found, else the CPU. The log and `omr_detect_device` say which detects. The CUDA
    /// driver and NVRTC are loaded at run time: put libnvrtc's folder on LD_LIBRARY_PATH. A GPU
    /// that fails while running sends detection to the CPU for good (nothing lost or doubled).
    pub detect_device: DetectDevice = DetectDevice::Cpu,
    /// Bytes of GPU memory for resident detection keys (32 MiB each for omr-light-v1). Keys past
    /// it are time-shared: the least recently used are evicted and copied again when next
    /// served (a copy over PCIe). Unset: the card's free memory when omrd starts, less
    /// 1 GiB (also the most it is clamped to).
    pub gpu_key_memory_bytes: Option<u64> = None,
    /// Deprecated (use `key_memory_bytes`): when set, also caps how many expanded keys are kept.
    pub max_cached_keys: Option<usize> = None,
    /// The longest a waiting key that is not in memory is deferred to collect a batch worth its
    /// load, in seconds: past it the key is loaded whatever its backlog. Bounds the lag of
    /// offline recipients when a worker time-shares keys.
    pub key_max_wait_secs: u64 = 300,
    /// Bytes of local disk for expanded detection keys under `data_dir/expanded-keys` (each
    /// ≈ 362 MB for omr-v1): a key loaded again is read from there instead of fetched from the
    /// store and expanded. Least recently used files go first. Unset: half the free space
    /// under `data_dir` when omrd starts (the files already there counted as free); 0: no files.
    pub key_disk_bytes: Option<u64> = None,
    /// Safety-net poll for new messages, in milliseconds.
    pub poll_interval_ms: u64 = 1000,
    /// This worker's name in the lease table (default: host name, process id and a random part).
    pub worker_id: Option<String> = None,
    /// How long a worker's hold on a key lasts without renewal, in seconds.
    pub lease_secs: u64 = 30,
    /// Keep at least this many newest board messages; older ones are deleted once every key has
    /// detected them. Unset: keep the board forever.
    pub retain_messages: Option<u64> = None,
    /// Delete accumulator epochs that end more than this many messages below the board head.
    /// Unset: keep them forever.
    pub retain_digest_messages: Option<u64> = None,
    /// Seconds between retention passes.
    pub retention_interval_secs: u64 = 60,
    /// A recipient whose digest, status or wait call came within this many seconds counts as
    /// online (its key is scheduled first); one waiting for its next message is online while
    /// it waits. 0: no recipient counts as online.
    pub online_secs: u64 = 300,
    /// Messages one client address may post per second (`POST /v1/messages` and
    /// `/v1/messages/batch`, a batch counting its messages), refilled continuously; 0: no limit.
    pub rate_limit_per_second: f64 = 1.0,
    /// Messages one client address may post at once before the rate applies (also the largest
    /// batch a rate-limited client can post).
    pub rate_limit_burst: u32 = 60,
    /// Board reads (`GET /v1/messages`) per second per client address; 0: no limit.
    pub read_rate_limit_per_second: f64 = 5.0,
    pub read_rate_limit_burst: u32 = 50,
    /// Digest requests (`GET /v1/digests/{key}`, gRPC `GetDigest`) per second per client
    /// address; 0: no limit.
    pub digest_rate_limit_per_second: f64 = 5.0,
    pub digest_rate_limit_burst: u32 = 50,
    /// Peers (IP addresses or CIDR ranges) whose `X-Forwarded-For` names the client; from any
    /// other peer the header is ignored and the socket's address is the client's.
    pub trusted_proxies: Vec<String> = Vec::new(),
    /// Browser origins (`scheme://host[:port]`) allowed to call the HTTP API from another
    /// origin (CORS), e.g. a web wallet's; `["*"]` allows any. Empty: CORS off, no browser on
    /// another origin may read the answers.
    pub cors_allowed_origins: Vec<String> = Vec::new(),
    /// An HTTP client must send a request's headers within this many seconds of connecting or
    /// of its previous response, or the connection is closed.
    pub header_read_timeout_secs: u64 = 10,
    /// Longest an HTTP request may take, body included (long-polls: their wait on top); past
    /// it the answer is 408 `request_timeout`.
    pub request_timeout_secs: u64 = 30,
    /// Open HTTP and gRPC connections, together; past it a new connection is closed at once
    /// (HTTP: after a 503 `overloaded`).
    pub max_connections: usize = 4096,
    /// HTTP API requests in progress at once (probes and metrics not counted); past it a
    /// request is answered 503 `overloaded` with `Retry-After` at once instead of queueing.
    pub max_concurrent_requests: usize = 512,
    /// gRPC: send an HTTP/2 ping after this many idle seconds (0: never) …
    pub grpc_keepalive_interval_secs: u64 = 60,
    /// … and close the connection when its answer takes longer than this.
    pub grpc_keepalive_timeout_secs: u64 = 20,
    /// gRPC: concurrent streams (calls) on one HTTP/2 connection.
    pub grpc_max_concurrent_streams: u32 = 100,
    /// gRPC: calls served at once per connection; more wait for a slot.
    pub grpc_concurrency_per_connection: usize = 32,
    /// gRPC: longest a call may take to answer (key uploads have `key_upload_timeout_secs`
    /// instead; streamed answers are bounded until their first message).
    pub grpc_request_timeout_secs: u64 = 30,
    /// PEM certificate chain (leaf first): with `tls_key`, both listeners speak TLS only
    /// (HTTPS, gRPC over TLS). Re-read on SIGHUP and when the file changes.
    pub tls_cert: Option<PathBuf> = None,
    /// PEM private key of `tls_cert` (PKCS#8, PKCS#1 or SEC1).
    pub tls_key: Option<PathBuf> = None,
}
}

/// Who may register a detection key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Registration {
    Open,
    Invite,
}

/// Where omr-light-v1's pass runs (`detect_device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DetectDevice {
    Cpu,
    Cuda,
    Auto,
}

/// Which browser origins may call the HTTP API across origins (`cors_allowed_origins`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorsOrigins {
    /// CORS off.
    Off,
    /// Any origin (`["*"]`).
    Any,
    /// These origins, each `scheme://host[:port]` in visible ASCII.
    List(Vec<String>),
}

/// What this process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Both,
    Api,
    Worker,
}

impl Config {
    /// The parameter set's name: `param_set`, or the default until `Application::build` has
    /// settled it from the store.
    pub fn param_set_name(&self) -> &str {
        self.param_set
            .as_deref()
            .unwrap_or(omr_api::param_sets::DEFAULT_PARAM_SET)
    }

    /// `max_attachment_bytes`, or its default for the parameter set (see its docs).
    pub fn attachment_limit(&self) -> usize {
        self.max_attachment_bytes.unwrap_or_else(|| {
            match crate::set::Set::by_name(self.param_set_name()) {
                Some(crate::set::Set::Light(_)) => 0,
                _ => crate::epochs::MAX_ATTACHMENT_BYTES,
            }
        })
    }

    /// Defaults, then `file` (if given; it must exist), then `OMR_*` variables.
    pub fn load(file: Option<&Path>) -> Result<Config, Box<figment::Error>> {
        let mut fig = Figment::new().merge(Serialized::defaults(Config::default()));
        if let Some(f) = file {
            if !f.exists() {
                return Err(Box::new(figment::Error::from(format!(
                    "config file {} does not exist",
                    f.display()
                ))));
            }
            fig = fig.merge(Toml::file(f));
        }
        // Only the variables that name a config key: other OMR_* variables (test settings,
        // other tools) are not omrd's business.
        Ok(fig.merge(Env::prefixed("OMR_").only(KEYS)).extract()?)
    }

    /// The start-up checks: the parameter set exists (and is not an insecure one unless
    /// `allow_insecure_params`), `postage_bits` and `max_attachment_bytes` are within their
    /// maximums, an attachment epoch fits the PIR database's shape, and a batch scheme's epoch
    /// is its batch. Returns the set.
    pub fn validate(&self) -> anyhow::Result<crate::set::Set> {
        let set = crate::set::Set::by_name(self.param_set_name()).with_context(|| {
            format!(
                "parameter set {:?} (known: {})",
                self.param_set_name(),
                crate::set::Set::names()
            )
        })?;
        if set.insecure() && !self.allow_insecure_params {
            anyhow::bail!(
                "parameter set {} is insecure (for tests only); refusing to start. \
                 Pass --allow-insecure-params (OMR_ALLOW_INSECURE_PARAMS=true) to override",
                set.name()
            );
        }
        if let Some(batch) = set.batch().filter(|&b| b != self.epoch_len) {
            anyhow::bail!(
                "epoch_len = {} but {} detects in batches of {batch} messages, one batch per \
                 epoch: set epoch_len = {batch}",
                self.epoch_len,
                set.name()
            );
        }
        if self.postage_bits > omr_core::MAX_POSTAGE_BITS {
            anyhow::bail!(
                "postage_bits = {} is over the maximum of {}: every message would cost its \
                 sender 2^{} hashes. Use 0 (no postage) up to {}",
                self.postage_bits,
                omr_core::MAX_POSTAGE_BITS,
                self.postage_bits,
                omr_core::MAX_POSTAGE_BITS
            );
        }
        if self.attachment_limit() > crate::epochs::MAX_ATTACHMENT_BYTES {
            anyhow::bail!(
                "max_attachment_bytes = {} is over the maximum of {} (64 KiB): a PIR fetch's \
                 upload grows with the square of the attachment size (4.5 MiB at 64 KiB, 18 MiB \
                 at 128 KiB). Use 0 (no attachments) up to {}",
                self.attachment_limit(),
                crate::epochs::MAX_ATTACHMENT_BYTES,
                crate::epochs::MAX_ATTACHMENT_BYTES
            );
        }
        self.cors_origins()?;
        if self.light_fetch_open_rebuild_ms < MIN_OPEN_REBUILD_MS {
            anyhow::bail!(
                "light_fetch_open_rebuild_ms = {} is under the minimum of {MIN_OPEN_REBUILD_MS}: \
                 a busy board would rebuild the open epoch's fetch snapshot (up to 4,096 \
                 payloads) for nearly every round. Use {MIN_OPEN_REBUILD_MS} or more",
                self.light_fetch_open_rebuild_ms
            );
        }
        if let Some(batch) = set.batch() {
            if !(1..=batch).contains(&self.light_refresh_messages) {
                anyhow::bail!(
                    "light_refresh_messages = {} is outside 1 ..= {batch}: an online recipient's \
                     open batch is detected again every this many new messages (1: on every \
                     ask; {batch}: only when the batch is full)",
                    self.light_refresh_messages
                );
            }
        }
        if self.attachment_limit() > 0 || set.batch().is_some() {
            (crate::epochs::Epochs::new(self.epoch_len, set))
                .pir_shape(set, self.attachment_limit())
                .map_err(anyhow::Error::msg)?;
        }
        Ok(set)
    }

    /// `cors_allowed_origins`, checked: each `scheme://host[:port]` (http or https, nothing
    /// after), or `"*"` alone.
    pub fn cors_origins(&self) -> anyhow::Result<CorsOrigins> {
        let origins = &self.cors_allowed_origins;
        if origins.is_empty() {
            return Ok(CorsOrigins::Off);
        }
        if origins.iter().any(|o| o == "*") {
            anyhow::ensure!(
                origins.len() == 1,
                "cors_allowed_origins: \"*\" (any origin) stands alone, without other origins"
            );
            return Ok(CorsOrigins::Any);
        }
        let origin = |o: &String| {
            let (scheme, rest) = o.split_once("://").unwrap_or(("", o));
            let well_formed = matches!(scheme, "http" | "https")
                && !rest.is_empty()
                && rest.bytes().all(|b| b.is_ascii_graphic())
                && !rest.contains(['/', '?', '#', '*']);
            anyhow::ensure!(
                well_formed,
                "cors_allowed_origins: {o:?} is not an origin (scheme://host[:port], e.g. \
                 \"https://wallet.example\"; or \"*\" alone for any origin)"
            );
            Ok(o.clone())
        };
        Ok(CorsOrigins::List(
            origins.iter().map(origin).collect::<anyhow::Result<_>>()?,
        ))
    }

    /// The key memory budget in bytes: `key_memory_bytes`, or half of the memory available to
    /// this process when it is 0.
    pub fn key_memory_budget(&self) -> u64 {
        match self.key_memory_bytes {
            0 => available_memory().map_or(4 << 30, |m| m / 2),
            n => n,
        }
    }

    /// The admin token, from `admin_token` or the file `admin_token_file` (its first line; at
    /// most one of the two may be set), checked to be at least [`MIN_ADMIN_TOKEN_LEN`]
    /// characters; `None` when neither is set, or `admin_token` is empty (the admin API is
    /// off).
    pub fn resolve_admin_token(&self) -> anyhow::Result<Option<AdminToken>> {
        // An empty `admin_token` (`OMR_ADMIN_TOKEN=`, as compose passes an unset variable) is
        // no token; an empty file is an error (a secret that did not arrive).
        let inline = self.admin_token.as_ref().filter(|t| t.char_count() > 0);
        let token = match (inline, &self.admin_token_file) {
            (Some(_), Some(_)) => anyhow::bail!(
                "both admin_token and admin_token_file are set: keep one (the file, for a secret)"
            ),
            (Some(t), None) => t.clone(),
            (None, Some(file)) => {
                let text = SecretString::from(
                    std::fs::read_to_string(file)
                        .with_context(|| format!("reading admin_token_file {}", file.display()))?,
                );
                let first = text.expose_secret().lines().next().unwrap_or("").trim();
                AdminToken::new(first)
            }
            (None, None) => return Ok(None),
        };
        if token.char_count() < MIN_ADMIN_TOKEN_LEN {
            anyhow::bail!(
                "the admin token has {} characters, fewer than {MIN_ADMIN_TOKEN_LEN}: use a long \
                 random one, e.g. `openssl rand -hex 32`",
                token.char_count()
            );
        }
        Ok(Some(token))
    }

    /// The same configuration with no per-client rate limits: for an omrd that only this
    /// process talks to (`omr demo`, benchmarks, tests), where every request comes from one
    /// address.
    pub fn without_rate_limits(mut self) -> Config {
        self.rate_limit_per_second = 0.0;
        self.read_rate_limit_per_second = 0.0;
        self.digest_rate_limit_per_second = 0.0;
        self
    }

    /// The TLS acceptors of `tls_cert` and `tls_key`, read now; `None` when neither is set.
    pub fn load_tls(&self) -> anyhow::Result<Option<crate::tls::Tls>> {
        match (&self.tls_cert, &self.tls_key) {
            (None, None) => Ok(None),
            (Some(cert), Some(key)) => crate::tls::Tls::load(cert, key).map(Some),
            (Some(_), None) => anyhow::bail!(
                "tls_cert is set but tls_key is not: give both (OMR_TLS_CERT, OMR_TLS_KEY) to serve TLS"
            ),
            (None, Some(_)) => anyhow::bail!(
                "tls_key is set but tls_cert is not: give both (OMR_TLS_CERT, OMR_TLS_KEY) to serve TLS"
            ),
        }
    }

    /// The address file scripts read to find the bound ports.
    pub fn addr_file(&self) -> PathBuf {
        self.data_dir.join("omrd.addr")
    }
}

#[cfg(test)]
mod tests;
