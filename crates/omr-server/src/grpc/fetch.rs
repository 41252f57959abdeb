//! The gRPC face of omr-light-v1's payload fetch (`GetFetchRange`, `PutFetchKey`, `Fetch`): the
//! same bytes, checks, errors and rate limit as the HTTP routes (`http/fetch.rs`; both call
//! `service::fetch`).

use omr_api::ErrorCode;
use omr_light::fetch::FetchKey;
use omr_proto::v1::{
    FetchRequest, FetchResponse, GetFetchRangeRequest, GetFetchRangeResponse, PutFetchKeyRequest,
    PutFetchKeyResponse,
};
use tonic::{Request, Response, Status};

use super::{admit, authorization};
use crate::admission::Limit;
use crate::error::ServiceError;
use crate::service::fetch;
use crate::state::ApiState;

pub async fn range(
    state: &ApiState,
    request: Request<GetFetchRangeRequest>,
) -> Result<Response<GetFetchRangeResponse>, Status> {
    admit(state, Limit::Digests, "GetFetchRange", &request)?;
    let r = request.get_ref();
    let s = if r.open {
        fetch::open(&state.service, r.min_end).await?
    } else {
        fetch::current(&state.service).await?
    };
    let g = s.fetch_range();
    Ok(Response::new(GetFetchRangeResponse {
        start: g.start,
        end: g.end,
        rows: g.rows,
        buckets: g.buckets,
        records_per_round: g.records_per_round,
    }))
}

pub async fn put_key(
    state: &ApiState,
    request: Request<PutFetchKeyRequest>,
) -> Result<Response<PutFetchKeyResponse>, Status> {
    let r = request.get_ref();
    if r.fetch_key.len() > FetchKey::encoded_len() {
        return Err(ServiceError::new(
            ErrorCode::BodyTooLarge,
            format!("a fetch key is {} bytes", FetchKey::encoded_len()),
        )
        .into());
    }
    let auth = authorization(&request);
    fetch::put_key(&state.service, &r.key_id, auth, r.fetch_key.clone()).await?;
    Ok(Response::new(PutFetchKeyResponse {}))
}

pub async fn round(
    state: &ApiState,
    request: Request<FetchRequest>,
) -> Result<Response<FetchResponse>, Status> {
    let r = request.get_ref();
    let charge = || admit(state, Limit::Digests, "Fetch", &request);
    let auth = authorization(&request);
    let answers = fetch::answer(&state.service, &r.key_id, auth, &r.query, charge).await?;
    Ok(Response::new(FetchResponse { answers }))
}
