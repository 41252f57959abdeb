//! omrd's HTTP and gRPC APIs called directly (reqwest and the generated tonic client, not the
//! SDK): register a detection key, post a message, read the board, fetch and decode a digest.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_core::{ClueKey, Digest, KeySet};
use omr_pir::{Answer, Hint, Query};
use omr_proto::v1::detector_client::DetectorClient;
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::{GetParamsRequest, GetParamsResponse};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tonic::transport::Channel;

use crate::wait::wait_for;

/// How long [`RawClient::caught_up_digest`] waits for detection to reach the board head.
const CATCH_UP: Duration = Duration::from_secs(120);

/// The gRPC messages a key upload or a digest may need (key chunks are ≤ 4 MiB).
const GRPC_MESSAGE_LIMIT: usize = 8 << 20;

/// Calls one omrd over HTTP and gRPC.
#[derive(Debug, Clone)]
pub struct RawClient {
    http: String,
    /// `None` for a process that serves no gRPC (`role = "worker"`).
    grpc: Option<String>,
    client: reqwest::Client,
    /// The CA (PEM) the gRPC channel trusts, when the server speaks TLS.
    ca: Option<Vec<u8>>,
}

/// A registered recipient: its keys and what registration returned.
#[derive(Debug)]
pub struct Recipient {
    pub keys: KeySet,
    pub key_id: String,
    pub token: String,
}

/// A digest that covered the whole board, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedDigest {
    /// The range `[start, end)` it covers.
    pub start: u64,
    pub end: u64,
    /// The recipient's messages in it: (index, payload), in board order.
    pub messages: Vec<(u64, Vec<u8>)>,
}

/// The value of the sample `name` (with its labels) in the Prometheus `text` of `/metrics`
/// ([`RawClient::metrics`]), if it is there: several samples from one scrape.
pub fn metric_in(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// `msg` with `authorization: Bearer <token>`.
pub fn with_token<T>(msg: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(msg);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}")
            .parse()
            .expect("a token is valid metadata"),
    );
    request
}

impl RawClient {
    /// A client of the omrd serving HTTP at `http` and gRPC at `grpc` (`host:port`; `None`
    /// when it serves no gRPC: gRPC calls then panic).
    pub fn new<G: std::fmt::Display>(http: impl std::fmt::Display, grpc: Option<G>) -> RawClient {
        RawClient {
            http: format!("http://{http}"),
            grpc: grpc.map(|g| format!("http://{g}")),
            client: reqwest::Client::new(),
            ca: None,
        }
    }

    /// [`RawClient::new`] for an omrd that speaks TLS with a certificate `ca_pem` signed (or
    /// is): `https://` URLs, and only that CA trusted.
    pub fn with_tls<G: std::fmt::Display>(
        http: impl std::fmt::Display,
        grpc: Option<G>,
        ca_pem: &[u8],
    ) -> RawClient {
        let ca = reqwest::Certificate::from_pem(ca_pem).expect("a PEM certificate");
        RawClient {
            http: format!("https://{http}"),
            grpc: grpc.map(|g| format!("https://{g}")),
            client: reqwest::Client::builder()
                .tls_built_in_root_certs(false)
                .add_root_certificate(ca)
                .build()
                .expect("an HTTPS client"),
            ca: Some(ca_pem.to_vec()),
        }
    }

    /// This client without a pool of idle connections: every request on a connection of its
    /// own. For servers with a short header timeout, which close an idle keep-alive connection
    /// while a pooled client may be sending on it.
    pub fn unpooled(&self) -> RawClient {
        let mut builder = reqwest::Client::builder().pool_max_idle_per_host(0);
        if let Some(pem) = &self.ca {
            let ca = reqwest::Certificate::from_pem(pem).expect("a PEM certificate");
            builder = builder
                .tls_built_in_root_certs(false)
                .add_root_certificate(ca);
        }
        RawClient {
            client: builder.build().expect("an HTTP client"),
            ..self.clone()
        }
    }

    /// The HTTP client (reqwest), with the CA when the server speaks TLS.
    pub fn http(&self) -> &reqwest::Client {
        &self.client
    }

    /// The URL of `path` (starting with `/`) on the HTTP server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.http)
    }

    /// The gRPC server's URL.
    pub fn grpc_url(&self) -> &str {
        self.grpc
            .as_deref()
            .expect("this omrd serves no gRPC (role = \"worker\")")
    }

    /// A gRPC client that may send and receive messages up to 8 MiB.
    pub async fn detector(&self) -> DetectorClient<Channel> {
        let url = self.grpc_url().to_string();
        let mut endpoint = tonic::transport::Endpoint::from_shared(url.clone()).expect("a URL");
        if let Some(ca) = &self.ca {
            let tls = tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(ca));
            endpoint = endpoint.tls_config(tls).expect("a TLS configuration");
        }
        let channel = endpoint
            .connect()
            .await
            .unwrap_or_else(|e| panic!("connect to gRPC at {url}: {e}"));
        DetectorClient::new(channel)
            .max_encoding_message_size(GRPC_MESSAGE_LIMIT)
            .max_decoding_message_size(GRPC_MESSAGE_LIMIT)
    }

    /// Register `keys`' detection key (streamed in chunks), starting at `start`.
    pub async fn register(&self, keys: KeySet, start: Start) -> Recipient {
        self.try_register(keys, start, None)
            .await
            .unwrap_or_else(|e| panic!("register a detection key: {e:?}"))
    }

    /// Register `keys`' detection key with `invite_code` in the header (when given): the
    /// recipient, or the server's refusal.
    pub async fn try_register(
        &self,
        keys: KeySet,
        start: Start,
        invite_code: Option<&str>,
    ) -> Result<Recipient, tonic::Status> {
        let requests = omr_proto::registration_stream(
            keys.secret.params().name,
            keys.secret.kbar() as u32,
            start,
            invite_code,
            keys.detection_key.to_bytes().into(),
        );
        let registered = self
            .detector()
            .await
            .register_detection_key(tokio_stream::iter(requests))
            .await?
            .into_inner();
        Ok(Recipient {
            keys,
            key_id: registered.key_id,
            token: registered.access_token,
        })
    }

    /// Post `payload` with a fresh clue for `to` (JSON); require `201` and return its index.
    pub async fn post(&self, to: &ClueKey, payload: &[u8]) -> u64 {
        let body = json!({
            "clue": B64.encode(to.make_clue().to_bytes()),
            "payload": B64.encode(payload),
        });
        let response = self
            .client
            .post(self.url("/v1/messages"))
            .json(&body)
            .send()
            .await
            .expect("POST /v1/messages");
        assert_eq!(response.status(), StatusCode::CREATED, "POST /v1/messages");
        let posted: Value = response.json().await.expect("a JSON answer");
        posted["index"].as_u64().expect("an index")
    }

    /// `GET /v1/messages?from=…&limit=…`, parsed.
    pub async fn board(&self, from: u64, limit: u32) -> Value {
        self.get(&format!("/v1/messages?from={from}&limit={limit}"))
            .await
            .json()
            .await
            .expect("a JSON board page")
    }

    /// `GET path`, whatever its status.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// `POST path` with a JSON body, whatever the answer: its status and its JSON body (`Null`
    /// when it has none).
    pub async fn post_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let r = self.client.post(self.url(path)).json(body).send().await;
        answer(path, r).await
    }

    /// `POST path` with `body` as it is, under `content_type` (`None`: no Content-Type),
    /// whatever the answer: its status and its JSON body (`Null` when it has none).
    pub async fn post_bytes(
        &self,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> (StatusCode, Value) {
        let mut req = self.client.post(self.url(path)).body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        answer(path, req.send().await).await
    }

    /// `GET /v1/pir/{epoch}/hint`, required to succeed.
    pub async fn pir_hint(&self, epoch: u64) -> Hint {
        let response = self.get(&format!("/v1/pir/{epoch}/hint")).await;
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "GET the hint of epoch {epoch}"
        );
        Hint::from_bytes(&response.bytes().await.expect("hint bytes")).expect("a hint")
    }

    /// `POST /v1/pir/{epoch}/query` with `query`, required to succeed: the answer.
    pub async fn pir_answer(&self, epoch: u64, query: &Query) -> Answer {
        let response = self
            .client
            .post(self.url(&format!("/v1/pir/{epoch}/query")))
            .header("content-type", "application/octet-stream")
            .body(query.to_bytes())
            .send()
            .await
            .expect("POST a PIR query");
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "a PIR query to epoch {epoch}"
        );
        Answer::from_bytes(&response.bytes().await.expect("answer bytes")).expect("an answer")
    }

    /// gRPC `GetParams`.
    pub async fn grpc_params(&self) -> GetParamsResponse {
        self.detector()
            .await
            .get_params(GetParamsRequest {})
            .await
            .unwrap_or_else(|e| panic!("GetParams: {e:?}"))
            .into_inner()
    }

    /// The value of the sample `name` (with its labels, e.g. `omr_key_lag{key_id="…"}`) in
    /// `/metrics`, if it is there.
    pub async fn metric(&self, name: &str) -> Option<f64> {
        metric_in(&self.metrics().await, name)
    }

    /// The values of the samples `names` in one read of `/metrics` (0 for one that is not
    /// there).
    pub async fn metric_values<const N: usize>(&self, names: [&str; N]) -> [f64; N] {
        let text = self.metrics().await;
        names.map(|name| metric_in(&text, name).unwrap_or(0.0))
    }

    /// The Prometheus text at `/metrics`.
    pub async fn metrics(&self) -> String {
        self.get("/metrics").await.text().await.expect("metrics")
    }

    /// `GET /v1/digests/{key}` (with `?from=` when given) with the recipient's token.
    pub async fn digest(&self, r: &Recipient, from: Option<u64>) -> reqwest::Response {
        self.digest_of(&r.key_id, &r.token, from).await
    }

    /// `GET /v1/digests/{key_id}` (with `?from=` when given) with `token`, of either scheme.
    pub async fn digest_of(
        &self,
        key_id: &str,
        token: &str,
        from: Option<u64>,
    ) -> reqwest::Response {
        let query = from.map(|f| format!("?from={f}")).unwrap_or_default();
        self.client
            .get(self.url(&format!("/v1/digests/{key_id}{query}")))
            .bearer_auth(token)
            .send()
            .await
            .expect("GET /v1/digests")
    }

    /// Poll `key_id`'s digest until detection has reached the board head (`omr-lag: 0` and the
    /// range ends at `omr-board-head`): its range and its bytes. Panics after two minutes.
    pub async fn caught_up_bytes(
        &self,
        key_id: &str,
        token: &str,
        from: Option<u64>,
    ) -> (u64, u64, Vec<u8>) {
        let what = format!("key {key_id} has detected the whole board");
        wait_for(CATCH_UP, what, || async {
            let response = self.digest_of(key_id, token, from).await;
            assert_eq!(response.status(), StatusCode::OK, "GET /v1/digests");
            let header = |name: &str| -> u64 {
                response.headers()[name]
                    .to_str()
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("header {name} is not a number"))
            };
            let (start, end) = (header("omr-range-start"), header("omr-range-end"));
            let (head, lag) = (header("omr-board-head"), header("omr-lag"));
            if lag == 0 && end == head {
                Some((
                    start,
                    end,
                    response.bytes().await.expect("digest bytes").to_vec(),
                ))
            } else {
                None
            }
        })
        .await
    }

    /// Poll the recipient's digest until detection has reached the board head (`omr-lag: 0`
    /// and the range ends at `omr-board-head`), then check that the digest covers the range its
    /// headers name and decode it. Panics after two minutes.
    pub async fn caught_up_digest(&self, r: &Recipient, from: Option<u64>) -> DecodedDigest {
        let (start, end, bytes) = self.caught_up_bytes(&r.key_id, &r.token, from).await;
        let digest = Digest::from_bytes(&bytes).expect("the digest decodes");
        assert_eq!((digest.start(), digest.end()), (start, end));
        let messages = r
            .keys
            .secret
            .decode(&digest)
            .expect("the digest decodes with the secret key")
            .into_iter()
            .map(|m| (m.index, m.payload))
            .collect();
        DecodedDigest {
            start,
            end,
            messages,
        }
    }
}

/// The status and JSON body (`Null` when there is none) of a POST to `path`.
async fn answer(path: &str, response: reqwest::Result<reqwest::Response>) -> (StatusCode, Value) {
    let r = response.unwrap_or_else(|e| panic!("POST {path}: {e}"));
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}
