//! The gRPC face of omr-light-v1's payload fetch (`GetFetchRange`, `PutFetchKey`, `Fetch`): the
//! same bytes, checks, errors and rate limit as the HTTP routes (`http/fetch.rs`; both call
//! `service::fetch`).

use omr_api::ErrorCode;
use omr_light::fetch::{FetchKey, BUCKETS, RECORDS_PER_FETCH};
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
    let s = fetch::current(&state.service).await?;
    let g = s.db.geometry();
    Ok(Response::new(GetFetchRangeResponse {
        start: g.range.0,
        end: g.range.1,
        rows: g.rows as u32,
        buckets: BUCKETS as u32,
        records_per_round: RECORDS_PER_FETCH as u32,
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
