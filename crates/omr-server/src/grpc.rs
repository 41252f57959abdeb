//! The gRPC key registry (`omr.v1.Detector`): streamed detection-key upload (admitted from its
//! header: parameters, invite code, `max_keys`), status (and watching it: `status.rs`),
//! deletion, digests.

use std::sync::Arc;
use std::time::Duration;

use omr_api::{ErrorCode, StartAt};
use omr_core::CompressedDetectionKey;
use omr_proto::v1::detector_server::Detector;
use omr_proto::v1::register_detection_key_request::Part;
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::{
    get_digest_response::Part as DigestPart, AnswerPirQueryRequest, AnswerPirQueryResponse,
    DeleteDetectionKeyRequest, DeleteDetectionKeyResponse, DigestHeader, GetDigestRequest,
    GetDigestResponse, GetKeyStatusRequest, GetKeyStatusResponse, GetParamsRequest,
    GetParamsResponse, GetPirHintRequest, RegisterDetectionKeyRequest,
    RegisterDetectionKeyResponse, RegistrationHeader, WatchKeyStatusRequest,
};
use omr_store::{KeyMeta, NewKey, StoreError};
use tokio::sync::Semaphore;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use crate::config::Registration;
use crate::error::ServiceError;
use crate::state::AppState;

pub use crate::grpc_header::check_header;

/// The service implementation.
#[derive(Debug, Clone)]
pub struct DetectorService {
    state: Arc<AppState>,
    uploads: Arc<Semaphore>,
}

impl DetectorService {
    pub fn new(state: Arc<AppState>) -> Self {
        let uploads = Arc::new(Semaphore::new(state.config.max_concurrent_uploads.max(1)));
        DetectorService { state, uploads }
    }

    fn outcome(&self, outcome: &str) {
        self.state
            .metrics
            .registrations
            .with_label_values(&[outcome])
            .inc();
    }

    /// Refuse a registration when `max_keys` keys are registered already, or when it starts
    /// below the oldest board message retention kept, from the header alone: no key byte is
    /// read. (The insert checks both again, atomically, for uploads racing.)
    async fn check_room(&self, h: &RegistrationHeader) -> Result<(), ServiceError> {
        let store = &self.state.store;
        let keys =
            (store.key_count().await).map_err(|e| ServiceError::internal("counting keys", e))?;
        let cap = self.state.config.max_keys;
        if keys >= cap {
            return Err(ServiceError::too_many_keys(keys, cap));
        }
        let Some(Start::StartIndex(start)) = h.start else {
            return Ok(());
        };
        let oldest = (store.oldest_retained_index().await)
            .map_err(|e| ServiceError::internal("reading the oldest retained index", e))?;
        if start < oldest {
            return Err(ServiceError::start_index_retired(start, oldest));
        }
        Ok(())
    }

    /// The header (checked: the parameters, the invite when one is needed, room under
    /// `max_keys`), the invite's hash, and the key's bytes.
    async fn receive(
        &self,
        mut stream: Streaming<RegisterDetectionKeyRequest>,
    ) -> Result<(RegistrationHeader, Option<[u8; 32]>, Vec<u8>), Status> {
        let header = match stream.next().await {
            Some(Ok(RegisterDetectionKeyRequest {
                part: Some(Part::Header(h)),
            })) => h,
            Some(Ok(_)) => return Err(malformed_upload("the first message must be the header")),
            Some(Err(s)) => return Err(s),
            None => {
                return Err(malformed_upload(
                    "empty stream: send a header, then the key",
                ))
            }
        };
        check_header(&header, self.state.params, self.state.config.max_key_bytes)
            .map_err(Status::from)?;
        // With registration = "invite", a code that admits a registration now (the insert
        // takes the use); an open server ignores any code.
        let invite = match self.state.config.registration {
            Registration::Open => None,
            Registration::Invite => {
                Some(crate::invites::admit(&self.state.store, &header.invite_code).await?)
            }
        };
        self.check_room(&header).await.map_err(Status::from)?;
        let total = header.total_bytes as usize;
        let mut key = Vec::with_capacity(total);
        while let Some(msg) = stream.next().await {
            match msg?.part {
                Some(Part::Chunk(c)) => {
                    if key.len() + c.len() > total {
                        return Err(ServiceError::new(
                            ErrorCode::KeyTooLarge,
                            format!("stream carries more than the declared {total} bytes"),
                        )
                        .into());
                    }
                    key.extend_from_slice(&c);
                }
                Some(Part::Header(_)) => return Err(malformed_upload("a second header was sent")),
                None => return Err(malformed_upload("empty request message")),
            }
        }
        if key.len() != total {
            return Err(malformed_upload(format!(
                "truncated upload: received {} of {total} bytes",
                key.len()
            )));
        }
        Ok((header, invite, key))
    }

    /// Authenticate a call on `key_id` with its Bearer token (see [`crate::auth::authorize`]).
    async fn authorize<T>(&self, req: &Request<T>, key_id: &str) -> Result<KeyMeta, ServiceError> {
        let authorization = req
            .metadata()
            .get("authorization")
            .map(|v| v.to_str().unwrap_or(""));
        crate::auth::authorize(&self.state.store, key_id, authorization).await
    }

    async fn build_digest(
        &self,
        request: &Request<GetDigestRequest>,
    ) -> Result<crate::digests::BuiltDigest, ServiceError> {
        let limit = crate::admission::Limit::Digests;
        self.state
            .admission
            .check_grpc(limit, "GetDigest", request)?;
        let key_id = &request.get_ref().key_id;
        let (from, to) = (request.get_ref().from, request.get_ref().to);
        let meta = self.authorize(request, key_id).await?;
        self.state.presence.seen(&self.state.store, key_id);
        crate::digests::build(&self.state, &meta, from, to).await
    }
}

#[tonic::async_trait]
impl Detector for DetectorService {
    async fn register_detection_key(
        &self,
        request: Request<Streaming<RegisterDetectionKeyRequest>>,
    ) -> Result<Response<RegisterDetectionKeyResponse>, Status> {
        let _permit = self.uploads.clone().try_acquire_owned().map_err(|_| {
            self.outcome("busy");
            Status::from(ServiceError::new(
                ErrorCode::Busy,
                "too many key uploads in progress; retry shortly",
            ))
        })?;
        let deadline = Duration::from_secs(self.state.config.key_upload_timeout_secs);
        let received = tokio::time::timeout(deadline, self.receive(request.into_inner())).await;
        let (header, invite_hash, key) = match received {
            Ok(Ok(v)) => v,
            Ok(Err(status)) => {
                self.outcome("refused");
                return Err(status);
            }
            Err(_) => {
                self.outcome("timeout");
                return Err(ServiceError::new(
                    ErrorCode::UploadTimeout,
                    format!("key upload took longer than {} s", deadline.as_secs()),
                )
                .into());
            }
        };
        // Decode the whole key under the declared parameter set before storing anything.
        let limit = self.state.config.max_key_bytes as usize;
        let (key, decoded) = tokio::task::spawn_blocking(move || {
            let r = CompressedDetectionKey::from_bytes_with_limit(&key, limit)
                .map(|k| (k.params().name, k.kbar(), k.digest_key().to_bytes()));
            (key, r)
        })
        .await
        .map_err(|e| ServiceError::internal("decoding a key", e))?;
        let (param_set, kbar, digest_key) = decoded.map_err(|e| {
            self.outcome("invalid");
            ServiceError::new(
                ErrorCode::InvalidKey,
                format!("the detection key does not decode: {e}"),
            )
        })?;
        if param_set != header.param_set || kbar != header.kbar as usize {
            self.outcome("invalid");
            return Err(ServiceError::new(
                ErrorCode::InvalidKey,
                format!(
                    "the key is for {param_set} with k̄ = {kbar}, the header says {} with k̄ = {}",
                    header.param_set, header.kbar
                ),
            )
            .into());
        }
        let (token, token_hash) = crate::auth::new_token();
        let key_id = uuid::Uuid::new_v4().to_string();
        let start = header.start.map_or(StartAt::Now, StartAt::from);
        let start_index = self
            .state
            .store
            .insert_key_within(
                &NewKey {
                    key_id: key_id.clone(),
                    param_set: self.state.params.name,
                    kbar: header.kbar,
                    start,
                    token_hash,
                    key: &key,
                    digest_key: &digest_key,
                    invite_hash,
                },
                self.state.config.max_keys,
            )
            .await
            .map_err(|e| {
                let refusal = match e {
                    StoreError::KeyLimit { keys, cap } => ServiceError::too_many_keys(keys, cap),
                    StoreError::StartRetired { start, oldest } => {
                        ServiceError::start_index_retired(start, oldest)
                    }
                    StoreError::InviteRefused(r) => ServiceError::invite_refused(r),
                    e => return ServiceError::internal("storing a key", e),
                };
                self.outcome("refused");
                refusal
            })?;
        self.outcome("registered");
        let invited = invite_hash.is_some();
        tracing::info!(%key_id, bytes = key.len(), start_index, invited, "detection key registered");
        Ok(Response::new(RegisterDetectionKeyResponse {
            key_id,
            access_token: token,
            start_index,
        }))
    }

    async fn delete_detection_key(
        &self,
        request: Request<DeleteDetectionKeyRequest>,
    ) -> Result<Response<DeleteDetectionKeyResponse>, Status> {
        let key_id = request.get_ref().key_id.clone();
        self.authorize(&request, &key_id).await?;
        self.state
            .store
            .delete_key(&key_id)
            .await
            .map_err(|e| ServiceError::internal("deleting a key", e))?;
        tracing::info!(%key_id, "detection key deleted");
        Ok(Response::new(DeleteDetectionKeyResponse {}))
    }

    async fn get_key_status(
        &self,
        request: Request<GetKeyStatusRequest>,
    ) -> Result<Response<GetKeyStatusResponse>, Status> {
        let key_id = &request.get_ref().key_id;
        self.authorize(&request, key_id).await?;
        self.state.presence.seen(&self.state.store, key_id);
        let status = crate::status::key_status(&self.state, key_id).await?;
        Ok(Response::new(status.into()))
    }

    type WatchKeyStatusStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<GetKeyStatusResponse, Status>> + Send + 'static>,
    >;

    async fn watch_key_status(
        &self,
        request: Request<WatchKeyStatusRequest>,
    ) -> Result<Response<Self::WatchKeyStatusStream>, Status> {
        let key_id = request.get_ref().key_id.clone();
        self.authorize(&request, &key_id).await?;
        self.state.presence.seen(&self.state.store, &key_id);
        let statuses = crate::status::watch(self.state.clone(), key_id)
            .map(|s| s.map(GetKeyStatusResponse::from).map_err(Status::from));
        Ok(Response::new(Box::pin(statuses)))
    }

    type GetDigestStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<GetDigestResponse, Status>> + Send + 'static>,
    >;

    async fn get_digest(
        &self,
        request: Request<GetDigestRequest>,
    ) -> Result<Response<Self::GetDigestStream>, Status> {
        let result = self.build_digest(&request).await;
        // The same outcome labels as the HTTP route: the error codes.
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.code.as_str(),
        };
        self.state
            .metrics
            .digest_requests
            .with_label_values(&[outcome])
            .inc();
        let d = result?;
        self.state.metrics.digest_bytes.inc_by(d.bytes.len() as u64);
        let header = GetDigestResponse {
            part: Some(DigestPart::Header(DigestHeader {
                range_start: d.range_start,
                range_end: d.range_end,
                board_head: d.board_head,
                lag: d.lag,
                next_from: d.next_from,
                total_bytes: d.bytes.len() as u64,
            })),
        };
        let chunks: Vec<Result<GetDigestResponse, Status>> = std::iter::once(Ok(header))
            .chain(d.bytes.chunks(omr_api::CHUNK_BYTES).map(|c| {
                Ok(GetDigestResponse {
                    part: Some(DigestPart::Chunk(c.to_vec())),
                })
            }))
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }

    async fn get_params(
        &self,
        _: Request<GetParamsRequest>,
    ) -> Result<Response<GetParamsResponse>, Status> {
        let p = self.state.params;
        Ok(Response::new(GetParamsResponse {
            param_set: p.name.to_string(),
            clue_bytes: p.clue_bytes() as u32,
            max_payload_bytes: p.payload_bytes as u32,
            max_kbar: p.max_kbar as u32,
            max_range: p.max_range,
            max_key_bytes: self.state.config.max_key_bytes,
            postage_bits: self.state.config.postage_bits,
            invite_required: self.state.config.registration == Registration::Invite,
            max_attachment_bytes: self.state.config.max_attachment_bytes as u64,
            epoch_len: crate::pir::epoch_len(&self.state.config, p),
        }))
    }

    type GetPirHintStream = crate::grpc_pir::HintStream;

    async fn get_pir_hint(
        &self,
        request: Request<GetPirHintRequest>,
    ) -> Result<Response<Self::GetPirHintStream>, Status> {
        crate::grpc_pir::hint(&self.state, request).await
    }

    async fn answer_pir_query(
        &self,
        request: Request<AnswerPirQueryRequest>,
    ) -> Result<Response<AnswerPirQueryResponse>, Status> {
        crate::grpc_pir::answer(&self.state, request).await
    }
}

/// A malformed key upload, as a gRPC status.
fn malformed_upload(message: impl Into<String>) -> Status {
    ServiceError::new(ErrorCode::MalformedUpload, message).into()
}
