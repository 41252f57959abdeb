//! [`Client`]: omrd's HTTP board and digests, and its gRPC key registry, with timeouts, typed
//! errors and retries with exponential backoff for calls that are safe to repeat.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt as _;
use omr_api::http::{BatchIn, BatchPosted, ErrorBody, MessageIn, Posted};
use omr_api::{headers, ErrorCode, StartAt};
use omr_core::{ClueKey, Message};
use omr_proto::v1::detector_client::DetectorClient;
use omr_proto::v1::{DeleteDetectionKeyRequest, GetKeyStatusRequest, GetParamsRequest};
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};

use crate::error::{Api, Error, Result};
use crate::keydir::Registration;

/// Most bytes preallocated for a response body on the strength of its `Content-Length`.
const MAX_PREALLOC: u64 = 4 << 20;

/// Called as a transfer goes: `(bytes done, bytes in all)`.
pub type Progress = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// The server's parameter set and limits (`GET /v1/params`).
pub type ServerParams = omr_api::http::Params;

/// Where detection stands for a key (gRPC `GetKeyStatus`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct KeyStatus {
    pub key_id: String,
    pub param_set: String,
    pub kbar: u32,
    pub start_index: u64,
    /// Next board index to detect.
    pub cursor: u64,
    pub board_head: u64,
    /// Messages on the board not yet detected for this key.
    pub lag: u64,
    pub key_bytes: u64,
    pub registered_at: String,
}

/// A downloaded digest and the range it covers (`GET /v1/digests/{key_id}`).
#[derive(Debug, Clone)]
pub struct FetchedDigest {
    pub digest: omr_core::Digest,
    pub encoded_bytes: usize,
    pub range_start: u64,
    pub range_end: u64,
    pub board_head: u64,
    pub lag: u64,
    /// Epoch length of the server's accumulators (digests start on epoch boundaries).
    pub epoch_length: u64,
    /// Set when the key's detected range continues beyond this digest.
    pub next_from: Option<u64>,
}

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
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            upload_timeout: Duration::from_secs(600),
            retries: 3,
            backoff: Duration::from_millis(200),
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
    options: ClientOptions,
    http: reqwest::Client,
    grpc: Arc<tokio::sync::OnceCell<Channel>>,
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
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .user_agent(concat!("omr/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::BadUrl {
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
        })
    }

    pub fn http_url(&self) -> &str {
        &self.http_url
    }

    pub fn grpc_url(&self) -> &str {
        &self.grpc_url
    }

    /// The server's parameter set and limits.
    pub async fn params(&self) -> Result<ServerParams> {
        self.retrying(|| async {
            let r = self
                .http_send(self.http.get(self.url("/v1/params")))
                .await?;
            self.http_json(r).await
        })
        .await
    }

    /// Make a clue for the recipient whose public clue key is `to`, and post it with `payload`.
    /// Returns the message's board index.
    pub async fn send(&self, to: &ClueKey, payload: &[u8]) -> Result<u64> {
        let message = Message::new(to.make_clue(), payload.to_vec())?;
        self.post(&message).await
    }

    /// Post one message; returns its board index. Retried only when no connection could be made
    /// (a request that reached the server is never sent twice: it would post twice).
    pub async fn post(&self, message: &Message) -> Result<u64> {
        let body = message.to_bytes();
        let posted: Posted = self
            .retrying_unsent(|| async {
                let req = self
                    .http
                    .post(self.url("/v1/messages"))
                    .header("content-type", "application/octet-stream")
                    .body(body.clone());
                let r = self.http_send(req).await?;
                self.http_json(r).await
            })
            .await?;
        Ok(posted.index)
    }

    /// Post messages in one atomic batch; returns their board indices, in order.
    pub async fn post_batch(&self, messages: &[Message]) -> Result<std::ops::Range<u64>> {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let body = BatchIn {
            messages: messages
                .iter()
                .map(|m| MessageIn {
                    clue: b64(&m.clue.to_bytes()),
                    payload: b64(&m.payload),
                })
                .collect(),
        };
        let posted: BatchPosted = self
            .retrying_unsent(|| async {
                let r = self
                    .http_send(self.http.post(self.url("/v1/messages/batch")).json(&body))
                    .await?;
                self.http_json(r).await
            })
            .await?;
        Ok(posted.first_index..posted.first_index + posted.count)
    }

    /// Upload an encoded detection key (gRPC client stream, 1 MiB chunks). `progress` sees the
    /// bytes handed to the transport. A failed upload stores nothing on the server, so a
    /// transient failure restarts the upload from the beginning (up to `retries` times).
    pub async fn register(
        &self,
        detection_key: &[u8],
        start: StartAt,
        progress: Option<Progress>,
    ) -> Result<Registration> {
        let key = omr_core::CompressedDetectionKey::from_bytes(detection_key)?;
        let (param_set, kbar) = (key.params().name, key.kbar());
        drop(key);
        let bytes: Arc<[u8]> = Arc::from(detection_key);
        let total = bytes.len() as u64;
        let start = start.into();
        let r = self
            .retrying(|| {
                let bytes = bytes.clone();
                let progress = progress.clone();
                async move {
                    use omr_proto::v1::register_detection_key_request::Part;
                    let mut sent = 0u64;
                    let stream =
                        omr_proto::registration_stream(param_set, kbar as u32, start, bytes)
                            .inspect(move |req| {
                                if let Some(Part::Chunk(c)) = &req.part {
                                    sent += c.len() as u64;
                                    if let Some(p) = &progress {
                                        p(sent, total);
                                    }
                                }
                            });
                    let mut request = tonic::Request::new(tokio_stream::iter(stream));
                    request.set_timeout(self.options.upload_timeout);
                    let mut c = self.grpc().await?;
                    c.register_detection_key(request)
                        .await
                        .map(|r| r.into_inner())
                        .map_err(|s| self.grpc_error(s, ""))
                }
            })
            .await?;
        Ok(Registration {
            key_id: r.key_id,
            access_token: r.access_token,
            start_index: r.start_index,
            param_set: param_set.to_string(),
            kbar,
            grpc_url: self.grpc_url.clone(),
            http_url: Some(self.http_url.clone()),
            registered_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        })
    }

    /// Where detection stands for a registered key.
    pub async fn key_status(&self, reg: &Registration) -> Result<KeyStatus> {
        let s = self
            .retrying(|| async {
                let mut c = self.grpc().await?;
                let req = self.authorized(
                    reg,
                    GetKeyStatusRequest {
                        key_id: reg.key_id.clone(),
                    },
                )?;
                c.get_key_status(req)
                    .await
                    .map(|r| r.into_inner())
                    .map_err(|s| self.grpc_error(s, &reg.key_id))
            })
            .await?;
        Ok(KeyStatus {
            key_id: s.key_id,
            param_set: s.param_set,
            kbar: s.kbar,
            start_index: s.start_index,
            cursor: s.cursor,
            board_head: s.board_head,
            lag: s.lag,
            key_bytes: s.key_bytes,
            registered_at: s.registered_at,
        })
    }

    /// The server's parameter set over gRPC (a cheap check that the gRPC listener answers).
    pub async fn grpc_params(&self) -> Result<String> {
        self.retrying(|| async {
            let mut c = self.grpc().await?;
            c.get_params(GetParamsRequest {})
                .await
                .map(|r| r.into_inner().param_set)
                .map_err(|s| self.grpc_error(s, ""))
        })
        .await
    }

    /// Delete a registered key and everything the server derived from it.
    pub async fn delete_key(&self, reg: &Registration) -> Result<()> {
        let mut c = self.grpc().await?;
        let req = self.authorized(
            reg,
            DeleteDetectionKeyRequest {
                key_id: reg.key_id.clone(),
            },
        )?;
        c.delete_detection_key(req)
            .await
            .map(|_| ())
            .map_err(|s| self.grpc_error(s, &reg.key_id))
    }

    /// Download the key's digest from the epoch holding `from` (default: the key's start) up to
    /// the first epoch boundary at or after `to` (default: everything detected, at most the
    /// parameter set's range per digest). `progress` sees the bytes received.
    pub async fn digest(
        &self,
        reg: &Registration,
        from: Option<u64>,
        to: Option<u64>,
        progress: Option<Progress>,
    ) -> Result<FetchedDigest> {
        let mut query = Vec::new();
        if let Some(f) = from {
            query.push(("from", f));
        }
        if let Some(t) = to {
            query.push(("to", t));
        }
        self.retrying(|| async {
            let req = self
                .http
                .get(self.url(&format!("/v1/digests/{}", reg.key_id)))
                .query(&query)
                .bearer_auth(&reg.access_token);
            let r = self.http_send(req).await?;
            let r = self.http_check(r, &reg.key_id).await?;
            let header = |name: &str| -> Result<Option<u64>> {
                r.headers()
                    .get(name)
                    .map(|v| {
                        v.to_str().ok().and_then(|s| s.parse().ok()).ok_or_else(|| {
                            self.protocol(Api::Http, format!("header {name} is not a number"))
                        })
                    })
                    .transpose()
            };
            let required = |name: &str| -> Result<u64> {
                header(name)?
                    .ok_or_else(|| self.protocol(Api::Http, format!("header {name} is missing")))
            };
            let (range_start, range_end) = (
                required(headers::RANGE_START)?,
                required(headers::RANGE_END)?,
            );
            let (board_head, lag) = (required(headers::BOARD_HEAD)?, required(headers::LAG)?);
            let epoch_length = required(headers::EPOCH_LENGTH)?;
            let next_from = header(headers::NEXT_FROM)?;
            let total = r.content_length().unwrap_or(0);
            // Content-Length is the server's word: preallocate at most a few MiB on it.
            let mut body = Vec::with_capacity(total.min(MAX_PREALLOC) as usize);
            let mut stream = r.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| self.http_error(e))?;
                body.extend_from_slice(&chunk);
                if let Some(p) = &progress {
                    p(body.len() as u64, total.max(body.len() as u64));
                }
            }
            let digest = omr_core::Digest::from_bytes(&body)?;
            if (digest.start(), digest.end()) != (range_start, range_end) {
                return Err(self.protocol(
                    Api::Http,
                    format!(
                        "digest covers [{}, {}) but the headers say [{range_start}, {range_end})",
                        digest.start(),
                        digest.end()
                    ),
                ));
            }
            Ok(FetchedDigest {
                digest,
                encoded_bytes: body.len(),
                range_start,
                range_end,
                board_head,
                lag,
                epoch_length,
                next_from,
            })
        })
        .await
    }

    // ---- plumbing ----

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.http_url)
    }

    async fn grpc(&self) -> Result<DetectorClient<Channel>> {
        let channel = self
            .grpc
            .get_or_try_init(|| async {
                Endpoint::from_shared(self.grpc_url.clone())
                    .map_err(|e| Error::BadUrl {
                        api: Api::Grpc,
                        url: self.grpc_url.clone(),
                        message: e.to_string(),
                    })?
                    .connect_timeout(self.options.connect_timeout)
                    .timeout(
                        self.options
                            .request_timeout
                            .max(self.options.upload_timeout),
                    )
                    .connect()
                    .await
                    .map_err(|e| Error::Unreachable {
                        api: Api::Grpc,
                        url: self.grpc_url.clone(),
                        reason: root_cause(&e),
                    })
            })
            .await?
            .clone();
        Ok(DetectorClient::new(channel)
            .max_decoding_message_size(8 << 20)
            .max_encoding_message_size(8 << 20))
    }

    fn authorized<T>(&self, reg: &Registration, msg: T) -> Result<tonic::Request<T>> {
        let mut req = tonic::Request::new(msg);
        req.set_timeout(self.options.request_timeout);
        let value = format!("Bearer {}", reg.access_token)
            .parse()
            .map_err(|_| Error::BadFile {
                path: crate::keydir::REGISTRATION_FILE.into(),
                message: "the access token is not a valid header value".into(),
            })?;
        req.metadata_mut().insert("authorization", value);
        Ok(req)
    }

    fn grpc_error(&self, s: tonic::Status, key_id: &str) -> Error {
        use tonic::Code;
        let (api, url) = (Api::Grpc, self.grpc_url.clone());
        let message = s.message().to_string();
        match s.code() {
            Code::Unauthenticated => Error::Unauthenticated { api, url, message },
            Code::PermissionDenied => Error::Forbidden {
                api,
                url,
                key_id: key_id.to_string(),
                message,
            },
            Code::NotFound => Error::UnknownKey {
                api,
                url,
                key_id: key_id.to_string(),
            },
            Code::DeadlineExceeded => Error::Timeout {
                api,
                url,
                secs: self.options.request_timeout.as_secs(),
            },
            Code::Unavailable if message.contains("connect") => Error::Unreachable {
                api,
                url,
                reason: message,
            },
            Code::InvalidArgument
            | Code::FailedPrecondition
            | Code::OutOfRange
            | Code::AlreadyExists
            | Code::ResourceExhausted => Error::Rejected {
                api,
                url,
                code: format!("{:?}", s.code()),
                message,
            },
            code => Error::Server {
                api,
                url,
                code: format!("{code:?}"),
                message,
            },
        }
    }

    async fn http_send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        req.send().await.map_err(|e| self.http_error(e))
    }

    fn http_error(&self, e: reqwest::Error) -> Error {
        let url = self.http_url.clone();
        if e.is_timeout() {
            Error::Timeout {
                api: Api::Http,
                url,
                secs: self.options.request_timeout.as_secs(),
            }
        } else if e.is_connect() {
            Error::Unreachable {
                api: Api::Http,
                url,
                reason: root_cause(&e),
            }
        } else {
            self.protocol(Api::Http, source_chain(&e))
        }
    }

    fn protocol(&self, api: Api, message: String) -> Error {
        Error::Protocol {
            api,
            url: match api {
                Api::Http => self.http_url.clone(),
                Api::Grpc => self.grpc_url.clone(),
            },
            message,
        }
    }

    /// Map an error status to [`Error`] using the server's `{code, message}` body.
    async fn http_check(&self, r: reqwest::Response, key_id: &str) -> Result<reqwest::Response> {
        let status = r.status();
        if status.is_success() {
            return Ok(r);
        }
        let text = r.text().await.unwrap_or_default();
        let body: ErrorBody = serde_json::from_str(&text).unwrap_or_else(|_| ErrorBody {
            code: status.as_u16().to_string(),
            message: text.chars().take(200).collect(),
        });
        let (api, url) = (Api::Http, self.http_url.clone());
        Err(match status.as_u16() {
            401 => Error::Unauthenticated {
                api,
                url,
                message: body.message,
            },
            403 => Error::Forbidden {
                api,
                url,
                key_id: key_id.to_string(),
                message: body.message,
            },
            404 if body.error_code() == Some(ErrorCode::UnknownKey) => Error::UnknownKey {
                api,
                url,
                key_id: key_id.to_string(),
            },
            400..=499 => Error::Rejected {
                api,
                url,
                code: body.code,
                message: body.message,
            },
            _ => Error::Server {
                api,
                url,
                code: body.code,
                message: body.message,
            },
        })
    }

    async fn http_json<T: serde::de::DeserializeOwned>(&self, r: reqwest::Response) -> Result<T> {
        let r = self.http_check(r, "").await?;
        r.json().await.map_err(|e| self.http_error(e))
    }

    /// Run an idempotent call, retrying transient failures with exponential backoff.
    async fn retrying<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retry_when(call, Error::is_transient).await
    }

    /// Run a call that must not reach the server twice: retried only if it never connected.
    async fn retrying_unsent<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retry_when(call, |e| matches!(e, Error::Unreachable { .. }))
            .await
    }

    async fn retry_when<T, F, Fut>(&self, call: F, retry: fn(&Error) -> bool) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut delay = self.options.backoff;
        let mut attempt = 0;
        loop {
            match call().await {
                Err(e) if attempt < self.options.retries && retry(&e) => {
                    tracing::debug!(error = %e, attempt, "retrying after {delay:?}");
                    tokio::time::sleep(delay).await;
                    delay = delay.saturating_mul(2);
                    attempt += 1;
                }
                r => return r,
            }
        }
    }
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

/// Why a connection failed: the innermost cause, e.g. "Connection refused (os error 111)".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(s) = cur.source() {
        cur = s;
    }
    cur.to_string()
}

/// An error with its causes, e.g. "error decoding response body: expected value at line 1".
fn source_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert_eq!(normalize(Api::Http, "http://h:1/").unwrap(), "http://h:1");
        for bad in ["h:1", "ftp://h", "http://", "http://h/v1"] {
            assert!(normalize(Api::Grpc, bad).is_err(), "{bad}");
        }
    }
}
