//! [`Client`]: omrd's HTTP board and digests, and its gRPC key registry, with timeouts, typed
//! errors and retries with exponential backoff for calls that are safe to repeat.
//!
//! The calls are grouped by API:
//!
//! - `board`: the server's parameters, posting messages, postage;
//! - `prepare`: messages sealed, clued and stamped now, posted later;
//! - `attach`: attachments sent beside a letter, and fetched by PIR once their epoch closes;
//! - `registry`: the key registry over gRPC (register, status, delete);
//! - `digest`: downloading a key's digest and checking its headers;
//! - `tail`: omr-light-v1, an online recipient reading the board's newest messages itself;
//! - `fetch`: omr-light-v1 payloads by the batch fetch (a server that takes no attachments);
//! - `light`: omr-light-v1 payloads and attachments by per-epoch PIR (a server that takes them);
//! - `watch`: waiting for a key's next detected messages (HTTP long-poll, gRPC stream);
//! - `follow`: the follow loop's policy (wait, retry, follow on, announce), which the CLI and
//!   the bindings wrap;
//! - `transport`: the shared gRPC channel, authorization, HTTP and gRPC failures as [`Error`].

mod attach;
mod board;
mod digest;
mod fetch;
mod follow;
mod light;
mod prepare;
mod registry;
mod tail;
mod transport;
mod watch;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::Channel;

use crate::error::{Api, Error, Result};

pub use board::Sent;
pub use digest::FetchedDigest;
pub use follow::{Follow, FOLLOW_RETRY};
pub use light::{PirFetch, LIGHT_QUERIES_PER_EPOCH};
pub use prepare::Prepared;
pub use registry::KeyStatus;
pub(crate) use tail::FIRST_PAGE;
pub use tail::{TailRead, DEFAULT_TAIL_MESSAGES};
pub use watch::LIGHT_FOLLOW_POLL;

/// Called as a transfer goes: `(bytes done, bytes in all)`; for a postage search, `(hashes
/// done, hashes expected)`.
pub type Progress = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// The server's parameter set and limits (`GET /v1/params`).
pub type ServerParams = omr_api::http::Params;

/// The longest `Retry-After` the client waits for before a retry.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Timeouts and retry policy.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Establishing a connection.
    pub connect_timeout: Duration,
    /// One ordinary request (not a key upload).
    pub request_timeout: Duration,
    /// A whole detection-key upload.
    pub upload_timeout: Duration,
    /// Extra attempts for calls that are safe to repeat, after a transient failure.
    pub retries: u32,
    /// The first backoff; doubled after each failed attempt.
    pub backoff: Duration,
    /// Threads that search for a postage stamp (0: every core, rayon's global pool).
    pub postage_threads: usize,
    /// For `https://` URLs: the CA certificates (PEM) to trust instead of the system's, e.g. a
    /// self-signed server certificate. `None`: the system's trusted roots.
    pub ca_cert: Option<Vec<u8>>,
    /// omr-light-v1: a retrieval that is at most this many board messages behind reads them
    /// from the public board and checks their clues itself, instead of asking for a digest and
    /// fetching payloads by PIR (`client/tail.rs`); 0: never. Default
    /// [`DEFAULT_TAIL_MESSAGES`].
    pub tail_messages: u64,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            upload_timeout: Duration::from_secs(600),
            retries: 3,
            backoff: Duration::from_millis(200),
            postage_threads: 0,
            ca_cert: None,
            tail_messages: DEFAULT_TAIL_MESSAGES,
        }
    }
}

/// A client of one omrd: its HTTP base URL (board, digests) and its gRPC URL (key registry).
///
/// Cheap to clone; the gRPC channel is made on first use and shared.
#[derive(Debug, Clone)]
pub struct Client {
    http_url: String,
    grpc_url: String,
    pub(crate) options: ClientOptions,
    http: reqwest::Client,
    grpc: Arc<tokio::sync::OnceCell<Channel>>,
    /// The server's parameters as last asked (`GET /v1/params`): what does not change while
    /// it runs (postage, attachments, epoch length) is read from here after the first call.
    known_params: Arc<std::sync::Mutex<Option<ServerParams>>>,
}

impl Client {
    /// A client with default timeouts and retries. URLs are like `http://127.0.0.1:8080` and
    /// `http://127.0.0.1:50051`.
    pub fn new(http_url: &str, grpc_url: &str) -> Result<Client> {
        Self::with_options(http_url, grpc_url, ClientOptions::default())
    }

    pub fn with_options(http_url: &str, grpc_url: &str, options: ClientOptions) -> Result<Client> {
        let http_url = normalize(Api::Http, http_url)?;
        let grpc_url = normalize(Api::Grpc, grpc_url)?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .user_agent(concat!("omr/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &options.ca_cert {
            builder = builder.tls_built_in_root_certs(false);
            for cert in ca_certificates(pem)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| Error::BadUrl {
            api: Api::Http,
            url: http_url.clone(),
            message: e.to_string(),
        })?;
        Ok(Client {
            http_url,
            grpc_url,
            options,
            http,
            grpc: Arc::new(tokio::sync::OnceCell::new()),
            known_params: Arc::default(),
        })
    }

    pub fn http_url(&self) -> &str {
        &self.http_url
    }

    pub fn grpc_url(&self) -> &str {
        &self.grpc_url
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.http_url)
    }

    /// Run an idempotent call, retrying transient failures with exponential backoff.
    pub(super) async fn retrying<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retry_when(call, Error::is_transient).await
    }

    /// Run a call that must not reach the server twice: retried only if it never connected.
    pub(super) async fn retrying_unsent<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retry_when(call, |e| {
            matches!(e, Error::Unreachable { .. } | Error::Busy { .. })
        })
        .await
    }

    pub(super) async fn retry_when<T, F, Fut>(
        &self,
        call: F,
        retry: fn(&Error) -> bool,
    ) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut delay = self.options.backoff;
        let mut attempt = 0;
        loop {
            match call().await {
                Err(e) if attempt < self.options.retries && retry(&e) => {
                    // A server that says when to come back is heard (up to a minute).
                    let wait = match &e {
                        Error::Busy { retry_after, .. } => {
                            delay.max(*retry_after.min(&MAX_RETRY_AFTER))
                        }
                        _ => delay,
                    };
                    tracing::debug!(error = %e, attempt, "retrying after {wait:?}");
                    tokio::time::sleep(wait).await;
                    delay = delay.saturating_mul(2);
                    attempt += 1;
                }
                r => return r,
            }
        }
    }
}

/// The certificates in `pem` (one or more), or why there are none.
fn ca_certificates(pem: &[u8]) -> Result<Vec<reqwest::Certificate>> {
    let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| Error::BadCaCert {
        message: format!("not PEM certificates: {e}"),
    })?;
    if certs.is_empty() {
        return Err(Error::BadCaCert {
            message: "no PEM certificate (-----BEGIN CERTIFICATE-----) in it".into(),
        });
    }
    Ok(certs)
}

/// Check a base URL and drop a trailing slash.
fn normalize(api: Api, url: &str) -> Result<String> {
    let trimmed = url.trim_end_matches('/');
    let bad = |message: &str| Error::BadUrl {
        api,
        url: url.to_string(),
        message: message.to_string(),
    };
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))
        .ok_or_else(|| bad("must start with http:// or https://"))?;
    if rest.is_empty() || rest.contains('/') {
        return Err(bad(
            "must be a base URL like http://127.0.0.1:8080, with no path",
        ));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn urls_are_checked() {
        assert_eq!(normalize(Api::Http, "http://h:1/").unwrap(), "http://h:1");
        for bad in ["h:1", "ftp://h", "http://", "http://h/v1"] {
            assert!(normalize(Api::Grpc, bad).is_err(), "{bad}");
        }
    }
}
