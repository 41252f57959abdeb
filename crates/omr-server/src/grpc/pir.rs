//! The gRPC face of attachments by PIR (`GetPirHint`, `AnswerPirQuery`): the same bytes, rate
//! limit, errors and metrics as the HTTP routes (`http/pir.rs`; both call `service::pir`), the hint streamed in 1 MiB
//! chunks.

use std::pin::Pin;

use futures::Stream;
use omr_proto::v1::{
    AnswerPirQueryRequest, AnswerPirQueryResponse, GetPirHintRequest, GetPirHintResponse,
};
use tonic::{Request, Response, Status};

use super::admit;
use crate::admission::Limit;
use crate::service::pir::{self, count_request};
use crate::state::ApiState;

pub type HintStream = Pin<Box<dyn Stream<Item = Result<GetPirHintResponse, Status>> + Send>>;

pub async fn hint(
    state: &ApiState,
    request: Request<GetPirHintRequest>,
) -> Result<Response<HintStream>, Status> {
    let result = async {
        let charge = || admit(state, Limit::Digests, "GetPirHint", &request);
        pir::hint(&state.service, request.get_ref().epoch, charge).await
    }
    .await;
    count_request(&state.metrics.pir, "hint", &result);
    let hint = result?;
    let total_bytes = hint.len() as u64;
    let chunks: Vec<Result<GetPirHintResponse, Status>> = (0..hint.len())
        .step_by(omr_api::CHUNK_BYTES)
        .map(|at| {
            let end = (at + omr_api::CHUNK_BYTES).min(hint.len());
            Ok(GetPirHintResponse {
                total_bytes,
                chunk: hint.slice(at..end).to_vec(),
            })
        })
        .collect();
    Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
}

pub async fn answer(
    state: &ApiState,
    request: Request<AnswerPirQueryRequest>,
) -> Result<Response<AnswerPirQueryResponse>, Status> {
    let result = async {
        let r = request.get_ref();
        let charge = || admit(state, Limit::Digests, "AnswerPirQuery", &request);
        pir::answer(&state.service, r.epoch, &r.query, charge).await
    }
    .await;
    count_request(&state.metrics.pir, "query", &result);
    Ok(Response::new(AnswerPirQueryResponse { answer: result? }))
}
