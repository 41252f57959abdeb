//! Transport plumbing: the shared gRPC channel, authorization metadata, and the mapping of
//! HTTP and gRPC failures to [`Error`].

use omr_api::http::ErrorBody;
use omr_api::ErrorCode;
use omr_proto::v1::detector_client::DetectorClient;
use tonic::transport::{Channel, Endpoint};

use super::Client;
use crate::error::{Api, Error, Result};
use crate::keydir::Registration;

impl Client {
    pub(super) async fn grpc(&self) -> Result<DetectorClient<Channel>> {
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
            Error::Unreachable {
                api: Api::Http,
                url,
                reason: root_cause(&e),
            }
        } else {
            self.protocol(Api::Http, source_chain(&e))
        }
    }

    pub(super) fn protocol(&self, api: Api, message: String) -> Error {
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

    pub(super) async fn http_json<T: serde::de::DeserializeOwned>(
        &self,
        r: reqwest::Response,
    ) -> Result<T> {
        let r = self.http_check(r, "").await?;
        r.json().await.map_err(|e| self.http_error(e))
    }
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
