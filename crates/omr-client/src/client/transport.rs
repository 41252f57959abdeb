//! Transport plumbing: the shared gRPC channel, authorization metadata, and the mapping of
//! HTTP and gRPC failures to [`Error`].

use omr_api::http::ErrorBody;
use omr_api::ErrorCode;
use omr_proto::v1::detector_client::DetectorClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use futures::StreamExt as _;

use super::{Client, Progress};
use crate::error::{Api, Error, Result};
use crate::keydir::Registration;

/// The largest JSON answer read (a board page of 1,000 omr-v1 messages is ≈ 3 MB).
const MAX_JSON_BYTES: u64 = 16 << 20;
/// The largest error body read.
const MAX_ERROR_BYTES: u64 = 64 << 10;

impl Client {
    pub(super) async fn grpc(&self) -> Result<DetectorClient<Channel>> {
        let channel = self
            .grpc
            .get_or_try_init(|| async {
                let mut endpoint =
                    Endpoint::from_shared(self.grpc_url.clone()).map_err(|e| Error::BadUrl {
                        api: Api::Grpc,
                        url: self.grpc_url.clone(),
                        message: e.to_string(),
                    })?;
                if self.grpc_url.starts_with("https://") {
                    let tls = match &self.options.ca_cert {
                        Some(pem) => {
                            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem))
                        }
                        None => ClientTlsConfig::new().with_native_roots(),
                    };
                    endpoint = endpoint.tls_config(tls).map_err(|e| Error::BadUrl {
                        api: Api::Grpc,
                        url: self.grpc_url.clone(),
                        message: root_cause(&e),
                    })?;
                }
                endpoint
                    .connect_timeout(self.options.connect_timeout)
                    .timeout(
                        self.options
                            .request_timeout
                            .max(self.options.upload_timeout),
                    )
                    .connect()
                    .await
                    .map_err(|e| unreachable(Api::Grpc, &self.grpc_url, root_cause(&e)))
            })
            .await?
            .clone();
        Ok(DetectorClient::new(channel)
            .max_decoding_message_size(8 << 20)
            .max_encoding_message_size(8 << 20))
    }

    /// `msg` with the key's token and the request timeout.
    pub(super) fn authorized<T>(&self, reg: &Registration, msg: T) -> Result<tonic::Request<T>> {
        let mut req = self.with_token(reg, msg)?;
        req.set_timeout(self.options.request_timeout);
        Ok(req)
    }

    /// `msg` with the key's token and no deadline (a stream that lasts as long as the caller
    /// reads it).
    pub(super) fn with_token<T>(&self, reg: &Registration, msg: T) -> Result<tonic::Request<T>> {
        let mut req = tonic::Request::new(msg);
        let value = format!("Bearer {}", reg.access_token)
            .parse()
            .map_err(|_| Error::BadFile {
                path: crate::keydir::REGISTRATION_FILE.into(),
                message: "the access token is not a valid header value".into(),
            })?;
        req.metadata_mut().insert("authorization", value);
        Ok(req)
    }

    pub(super) fn grpc_error(&self, s: tonic::Status, key_id: &str) -> Error {
        use tonic::Code;
        let (api, url) = (Api::Grpc, self.grpc_url.clone());
        let message = s.message().to_string();
        let meta = |key: &str| s.metadata().get(key).and_then(|v| v.to_str().ok());
        if let Some(code @ ("rate_limited" | "overloaded")) = meta("omr-error-code") {
            let secs = meta("retry-after")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            return Error::Busy {
                api,
                url,
                code: code.to_string(),
                message,
                retry_after: std::time::Duration::from_secs(secs),
            };
        }
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
            Code::Unavailable if message.contains("connect") => unreachable(api, &url, message),
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

    pub(super) async fn http_send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response> {
        req.send().await.map_err(|e| self.http_error(e))
    }

    pub(super) fn http_error(&self, e: reqwest::Error) -> Error {
        let url = self.http_url.clone();
        if e.is_timeout() {
            Error::Timeout {
                api: Api::Http,
                url,
                secs: self.options.request_timeout.as_secs(),
            }
        } else if e.is_connect() {
            unreachable(Api::Http, &url, root_cause(&e))
        } else {
            self.protocol(Api::Http, source_chain(&e))
        }
    }

    pub(crate) fn protocol(&self, api: Api, message: String) -> Error {
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
    pub(super) async fn http_check(
        &self,
        r: reqwest::Response,
        key_id: &str,
    ) -> Result<reqwest::Response> {
        let status = r.status();
        if status.is_success() {
            return Ok(r);
        }
        let retry_after = (r.headers().get(reqwest::header::RETRY_AFTER))
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .map(std::time::Duration::from_secs);
        let text = match self.read_capped(r, MAX_ERROR_BYTES, None).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => String::new(),
        };
        let body: ErrorBody = serde_json::from_str(&text).unwrap_or_else(|_| ErrorBody {
            code: status.as_u16().to_string(),
            message: text.chars().take(200).collect(),
            index: None,
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
            429 | 503
                if matches!(
                    body.error_code(),
                    Some(ErrorCode::RateLimited | ErrorCode::Overloaded)
                ) =>
            {
                Error::Busy {
                    api,
                    url,
                    code: body.code,
                    message: body.message,
                    retry_after: retry_after.unwrap_or(std::time::Duration::from_secs(1)),
                }
            }
            409 if body.error_code() == Some(ErrorCode::DuplicateMessage)
                && body.index.is_some() =>
            {
                Error::AlreadyPosted {
                    index: body.index.unwrap_or_default(),
                }
            }
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

    pub(super) async fn http_json<T: serde::de::DeserializeOwned>(
        &self,
        r: reqwest::Response,
    ) -> Result<T> {
        let r = self.http_check(r, "").await?;
        self.json_body(r).await
    }

    /// A successful response's JSON body, read up to [`MAX_JSON_BYTES`].
    pub(super) async fn json_body<T: serde::de::DeserializeOwned>(
        &self,
        r: reqwest::Response,
    ) -> Result<T> {
        let bytes = self.read_capped(r, MAX_JSON_BYTES, None).await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            self.protocol(
                Api::Http,
                format!("the answer is not the JSON expected: {e}"),
            )
        })
    }

    /// A response body of at most `max` bytes, whatever its `Content-Length` says: a larger
    /// declared length is refused before anything is read, and a body that runs past `max` is
    /// cut off with an error, so a server cannot make the client allocate more than `max`.
    /// `progress` sees `(bytes read, bytes expected)`.
    pub(super) async fn read_capped(
        &self,
        r: reqwest::Response,
        max: u64,
        progress: Option<&Progress>,
    ) -> Result<Vec<u8>> {
        let too_large = |what: String| {
            self.protocol(
                Api::Http,
                format!("{what}, more than the {max} bytes this answer can be: refusing it"),
            )
        };
        let declared = r.content_length();
        if let Some(n) = declared.filter(|&n| n > max) {
            return Err(too_large(format!(
                "the server declares a body of {n} bytes"
            )));
        }
        let mut body = Vec::with_capacity(declared.unwrap_or(0).min(max) as usize);
        let mut stream = r.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.http_error(e))?;
            if (body.len() + chunk.len()) as u64 > max {
                return Err(too_large("the server sent a longer body".to_string()));
            }
            body.extend_from_slice(&chunk);
            if let Some(p) = progress {
                let done = body.len() as u64;
                p(done, declared.unwrap_or(done).max(done));
            }
        }
        Ok(body)
    }
}

/// Why a connection failed: the innermost cause, e.g. "Connection refused (os error 111)".
/// A failed connection: [`Error::Tls`] when the cause is the TLS handshake (its certificate,
/// most often), else [`Error::Unreachable`].
fn unreachable(api: Api, url: &str, reason: String) -> Error {
    let lower = reason.to_ascii_lowercase();
    let tls = url.starts_with("https://")
        && ["certificate", "tls", "handshake", "alert"]
            .iter()
            .any(|w| lower.contains(w));
    let url = url.to_string();
    if tls {
        Error::Tls { api, url, reason }
    } else {
        Error::Unreachable { api, url, reason }
    }
}

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
