//! The gRPC API (`omr.v1.Detector`, tonic): every gRPC handler, each a thin adapter from the
//! proto messages to the service core (`crate::service`), and nothing else. The streamed key
//! upload is framed here (header first, then chunks, within `key_upload_timeout_secs`) and
//! admitted and stored by `service::registry`; `pir` serves attachment epochs, `deadline` the
//! request timeout (and the transport's own refusals' codes), `incoming` the listener's permitted
//! connections, `error` maps a service error to a status, `reflection` serves reflection v1 and
//! v1alpha.

mod deadline;
mod error;
mod fetch;
mod incoming;
mod pir;
mod reflection;

use std::sync::Arc;

use omr_api::ErrorCode;
use omr_proto::v1::detector_server::Detector;
use omr_proto::v1::register_detection_key_request::Part;
use omr_proto::v1::{
    get_digest_response::Part as DigestPart, AnswerPirQueryRequest, AnswerPirQueryResponse,
    DeleteDetectionKeyRequest, DeleteDetectionKeyResponse, DigestHeader, GetDigestRequest,
    GetDigestResponse, GetKeyStatusRequest, GetKeyStatusResponse, GetParamsRequest,
    GetParamsResponse, GetPirHintRequest, RegisterDetectionKeyRequest,
    RegisterDetectionKeyResponse, RegistrationHeader, WatchKeyStatusRequest,
};
use omr_proto::v1::{
    FetchRequest, FetchResponse, GetFetchRangeRequest, GetFetchRangeResponse, PutFetchKeyRequest,
    PutFetchKeyResponse,
};
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use crate::admission::{Limit, FORWARDED_FOR};
use crate::error::ServiceError;
use crate::service::{digests, registry, status};
use crate::state::ApiState;

pub use crate::service::registry::check_header;
pub use deadline::DeadlineLayer;
pub use error::{grpc_code, GRPC_ERROR_CODE};
pub use incoming::{grpc_incoming, Limited};
pub use reflection::{
    v1 as reflection_v1, v1alpha as reflection_v1alpha, Index as ReflectionIndex,
};

/// The service implementation.
#[derive(Debug, Clone)]
pub struct DetectorService {
    state: Arc<ApiState>,
}

impl DetectorService {
    pub fn new(state: Arc<ApiState>) -> Self {
        DetectorService { state }
    }

    /// The header (admitted: the parameters, the invite when one is needed, room under
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
            Some(Err(s)) => return Err(transport_error(s)),
            None => {
                return Err(malformed_upload(
                    "empty stream: send a header, then the key",
                ))
            }
        };
        let invite = registry::admit(&self.state.service, &header).await?;
        let mut key = registry::KeyBytes::new(&header);
        while let Some(msg) = stream.next().await {
            match msg.map_err(transport_error)?.part {
                Some(Part::Chunk(c)) => key.push(&c)?,
                Some(Part::Header(_)) => return Err(malformed_upload("a second header was sent")),
                None => return Err(malformed_upload("empty request message")),
            }
        }
        let key = key.finish()?;
        Ok((header, invite, key))
    }
}

/// The largest gRPC message the server decodes (a key chunk, a PIR query; a 4.5 MiB query at the
/// default epoch shape fits).
pub const MAX_MESSAGE_BYTES: usize = 5 * 1024 * 1024;

/// A stream error from the transport, with an `omr-error-code` where it is the client's doing:
/// tonic refuses a message over the server's limit as OUT_OF_RANGE before any handler sees it.
fn transport_error(s: Status) -> Status {
    if s.code() == tonic::Code::OutOfRange && s.metadata().get("omr-error-code").is_none() {
        return ServiceError::new(
            ErrorCode::BodyTooLarge,
            format!(
                "a message of the upload is over the server's gRPC message limit ({} MiB): send \
                 the key in smaller chunks (the SDK sends {} MiB); nothing was stored ({})",
                MAX_MESSAGE_BYTES >> 20,
                omr_api::CHUNK_BYTES >> 20,
                s.message()
            ),
        )
        .into();
    }
    s
}

/// The `authorization` metadata of a call (see `service::auth::authorize`).
fn authorization<T>(req: &Request<T>) -> Option<&str> {
    let value = req.metadata().get("authorization")?;
    Some(value.to_str().unwrap_or(""))
}

/// Take one from the rate limit `limit` of the client of `request` (its peer, and
/// `x-forwarded-for` metadata from a trusted proxy), or refuse it; a call whose peer the
/// transport does not know passes.
fn admit<T>(
    state: &ApiState,
    limit: Limit,
    route: &str,
    request: &Request<T>,
) -> Result<(), ServiceError> {
    let Some(peer) = request.remote_addr() else {
        return Ok(());
    };
    let forwarded =
        (request.metadata().get_all(FORWARDED_FOR).iter()).filter_map(|v| v.to_str().ok());
    let client = state.admission.client(peer.ip(), forwarded);
    state.admission.check(limit, route, client, 1)
}

#[tonic::async_trait]
impl Detector for DetectorService {
    async fn register_detection_key(
        &self,
        request: Request<Streaming<RegisterDetectionKeyRequest>>,
    ) -> Result<Response<RegisterDetectionKeyResponse>, Status> {
        let svc = &self.state.service;
        let r = registry::upload(svc, self.receive(request.into_inner())).await?;
        Ok(Response::new(RegisterDetectionKeyResponse {
            key_id: r.key_id,
            access_token: r.access_token,
            start_index: r.start_index,
        }))
    }

    async fn delete_detection_key(
        &self,
        request: Request<DeleteDetectionKeyRequest>,
    ) -> Result<Response<DeleteDetectionKeyResponse>, Status> {
        let key_id = &request.get_ref().key_id;
        registry::delete(&self.state.service, key_id, authorization(&request)).await?;
        Ok(Response::new(DeleteDetectionKeyResponse {}))
    }

    async fn get_key_status(
        &self,
        request: Request<GetKeyStatusRequest>,
    ) -> Result<Response<GetKeyStatusResponse>, Status> {
        let key_id = &request.get_ref().key_id;
        let auth = authorization(&request);
        let status = status::get(&self.state.service, key_id, auth, None).await?;
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
        let auth = authorization(&request);
        let statuses = status::watch_authorized(&self.state.service, key_id, auth).await?;
        let statuses = statuses.map(|s| s.map(GetKeyStatusResponse::from).map_err(Status::from));
        Ok(Response::new(Box::pin(statuses)))
    }

    type GetDigestStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<GetDigestResponse, Status>> + Send + 'static>,
    >;

    async fn get_digest(
        &self,
        request: Request<GetDigestRequest>,
    ) -> Result<Response<Self::GetDigestStream>, Status> {
        let svc = &self.state.service;
        let result = async {
            let r = request.get_ref();
            let charge = || admit(&self.state, Limit::Digests, "GetDigest", &request);
            digests::get(
                svc,
                &r.key_id,
                authorization(&request),
                r.from,
                r.to,
                charge,
            )
            .await
        }
        .await;
        // The same outcome labels as the HTTP route: the error codes.
        let unchanged = (result.as_ref()).is_ok_and(|d| d.held(request.get_ref().etag.as_deref()));
        digests::count(svc, &result, unchanged);
        let d = result?;
        let header = GetDigestResponse {
            part: Some(DigestPart::Header(DigestHeader {
                range_start: d.range_start,
                range_end: d.range_end,
                board_head: d.board_head,
                lag: d.lag,
                next_from: d.next_from,
                total_bytes: d.bytes.len() as u64,
                detected_up_to: d.detected_up_to,
                refresh_at: d.refresh_at,
                etag: d.etag(),
                unchanged,
            })),
        };
        let body = if unchanged { &[][..] } else { &d.bytes[..] };
        let chunks: Vec<Result<GetDigestResponse, Status>> = std::iter::once(Ok(header))
            .chain(body.chunks(omr_api::CHUNK_BYTES).map(|c| {
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
        // gRPC's answer carries no board head.
        let p = crate::service::params::params(&self.state.service, 0);
        Ok(Response::new(GetParamsResponse {
            param_set: p.param_set,
            clue_bytes: p.clue_bytes as u32,
            max_payload_bytes: p.max_payload_bytes as u32,
            max_kbar: p.max_kbar as u32,
            max_range: p.max_range,
            max_key_bytes: p.max_key_bytes,
            postage_bits: p.postage_bits,
            invite_required: p.invite_required,
            max_attachment_bytes: p.max_attachment_bytes as u64,
            epoch_len: p.epoch_len,
        }))
    }

    type GetPirHintStream = pir::HintStream;

    async fn get_pir_hint(
        &self,
        request: Request<GetPirHintRequest>,
    ) -> Result<Response<Self::GetPirHintStream>, Status> {
        pir::hint(&self.state, request).await
    }

    async fn answer_pir_query(
        &self,
        request: Request<AnswerPirQueryRequest>,
    ) -> Result<Response<AnswerPirQueryResponse>, Status> {
        pir::answer(&self.state, request).await
    }

    async fn get_fetch_range(
        &self,
        request: Request<GetFetchRangeRequest>,
    ) -> Result<Response<GetFetchRangeResponse>, Status> {
        fetch::range(&self.state, request).await
    }

    async fn put_fetch_key(
        &self,
        request: Request<PutFetchKeyRequest>,
    ) -> Result<Response<PutFetchKeyResponse>, Status> {
        fetch::put_key(&self.state, request).await
    }

    async fn fetch(
        &self,
        request: Request<FetchRequest>,
    ) -> Result<Response<FetchResponse>, Status> {
        fetch::round(&self.state, request).await
    }
}

/// A malformed key upload, as a gRPC status.
fn malformed_upload(message: impl Into<String>) -> Status {
    ServiceError::new(ErrorCode::MalformedUpload, message).into()
}
