//! The HTTP API (axum): the public board, parameters, probes, metrics and the OpenAPI document.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{to_bytes, Body};
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_api::http::{
    BatchIn, BatchPosted, BoardMessage, BoardPage, ErrorBody, MessageIn, Params, Posted, ReadQuery,
};
use omr_api::ErrorCode;
use omr_core::{validate_payload, Clue, Message};
use omr_store::NewMessage;
use utoipa::OpenApi;

use crate::error::ServiceError;
use crate::ingest::IngestError;
use crate::state::AppState;

/// Largest single-message body (JSON base64 of the largest clue and payload, with room).
const SINGLE_BODY_LIMIT: usize = 16 * 1024;
/// Most board messages one GET returns.
const MAX_READ: u32 = 1000;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "omrd",
        description = "Oblivious message retrieval detector: the public bulletin board."
    ),
    paths(
        post_message,
        post_batch,
        get_messages,
        get_params,
        crate::digests::get_digest
    ),
    components(schemas(
        MessageIn,
        BatchIn,
        Posted,
        BatchPosted,
        BoardPage,
        BoardMessage,
        Params,
        ErrorBody
    ))
)]
struct ApiDoc;

pub fn router(state: Arc<AppState>) -> Router {
    let probes = Router::new()
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics));
    if state.config.role == crate::config::Role::Worker {
        return probes
            .layer(middleware::from_fn_with_state(state.clone(), observe))
            .with_state(state);
    }
    probes
        .route("/v1/messages", post(post_message).get(get_messages))
        .route("/v1/messages/batch", post(post_batch))
        .route("/v1/params", get(get_params))
        .route("/v1/digests/{key_id}", get(crate::digests::get_digest))
        .route("/openapi.json", get(|| async { Json(ApiDoc::openapi()) }))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// Record latency per route and status.
async fn observe(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req.uri().path().to_string();
    let route = match route.as_str() {
        "/v1/messages" | "/v1/messages/batch" | "/v1/params" | "/livez" | "/readyz"
        | "/metrics" | "/openapi.json" => route,
        r if r.starts_with("/v1/digests/") => "/v1/digests".to_string(),
        _ => "other".to_string(),
    };
    let started = Instant::now();
    let resp = next.run(req).await;
    state
        .metrics
        .http_seconds
        .with_label_values(&[route.as_str(), resp.status().as_str()])
        .observe(started.elapsed().as_secs_f64());
    resp
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.ready.load(Ordering::Acquire) && state.store.ping().await.is_ok() {
        (StatusCode::OK, "ready").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response()
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

enum BodyKind {
    Json,
    Binary,
}

fn body_kind(headers: &HeaderMap) -> Result<BodyKind, ServiceError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match ct.as_str() {
        "application/json" => Ok(BodyKind::Json),
        "application/octet-stream" => Ok(BodyKind::Binary),
        "" => Err(ServiceError::new(
            ErrorCode::UnsupportedMediaType,
            "missing Content-Type: use application/json or application/octet-stream",
        )),
        other => Err(ServiceError::new(
            ErrorCode::UnsupportedMediaType,
            format!("Content-Type {other} is not supported: use application/json or application/octet-stream"),
        )),
    }
}

/// Read the whole body, refusing more than `limit` bytes with 413.
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Vec<u8>, ServiceError> {
    let too_large = || {
        ServiceError::new(
            ErrorCode::BodyTooLarge,
            format!("request body exceeds {limit} bytes"),
        )
    };
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
    {
        if len > limit {
            return Err(too_large());
        }
    }
    to_bytes(body, limit)
        .await
        .map(|b| b.to_vec())
        .map_err(|_| too_large())
}

/// Decode and validate one JSON message against the server's parameter set.
fn from_json(state: &AppState, m: &MessageIn) -> Result<NewMessage, ServiceError> {
    let clue = B64.decode(m.clue.as_bytes()).map_err(|e| {
        ServiceError::new(ErrorCode::MalformedClue, format!("clue is not base64: {e}"))
    })?;
    let payload = B64.decode(m.payload.as_bytes()).map_err(|e| {
        ServiceError::new(
            ErrorCode::MalformedPayload,
            format!("payload is not base64: {e}"),
        )
    })?;
    let decoded = Clue::from_bytes(&clue).map_err(|e| ServiceError::from_omr("clue", e))?;
    check_params(state, decoded.params().name)?;
    validate_payload(state.params, &payload).map_err(|e| ServiceError::from_omr("payload", e))?;
    Ok(NewMessage { clue, payload })
}

/// Decode and validate one binary message (`omr_core::Message` encoding).
fn from_binary(state: &AppState, bytes: &[u8]) -> Result<NewMessage, ServiceError> {
    let m = Message::from_bytes(bytes).map_err(|e| ServiceError::from_omr("message", e))?;
    check_params(state, m.params().name)?;
    Ok(NewMessage {
        clue: m.clue.to_bytes(),
        payload: m.payload,
    })
}

fn check_params(state: &AppState, got: &str) -> Result<(), ServiceError> {
    if got != state.params.name {
        return Err(ServiceError::new(
            ErrorCode::ParamSetMismatch,
            format!(
                "clue uses parameter set {got}; this server runs {}",
                state.params.name
            ),
        ));
    }
    Ok(())
}

fn reject(state: &AppState, err: ServiceError) -> ServiceError {
    state
        .metrics
        .messages_rejected
        .with_label_values(&[err.code.as_str()])
        .inc();
    err
}

async fn commit(
    state: &AppState,
    messages: Vec<NewMessage>,
    route: &str,
) -> Result<u64, ServiceError> {
    let count = messages.len() as u64;
    let bytes: usize = messages
        .iter()
        .map(|m| m.clue.len() + m.payload.len())
        .sum();
    let first = state.ingestor.submit(messages).await.map_err(|e| match e {
        IngestError::Closed => ServiceError::new(
            ErrorCode::Unavailable,
            "the server is shutting down; nothing was stored, retry",
        ),
        IngestError::Store(e) => ServiceError::internal("appending to the board", e),
    })?;
    state
        .metrics
        .messages_accepted
        .with_label_values(&[route])
        .inc_by(count);
    state.metrics.message_bytes.inc_by(bytes as u64);
    Ok(first)
}

/// Post one message. Answers only after the message is durably committed.
#[utoipa::path(
    post, path = "/v1/messages",
    request_body(content = MessageIn, description = "JSON, or application/octet-stream with the omr-core Message encoding"),
    responses(
        (status = 201, body = Posted, description = "Committed"),
        (status = 400, body = ErrorBody, description = "Malformed clue, payload or JSON; wrong parameter set"),
        (status = 413, body = ErrorBody, description = "Body or payload too large"),
        (status = 415, body = ErrorBody, description = "Unsupported Content-Type"),
    )
)]
async fn post_message(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let kind = body_kind(&headers)?;
        let bytes = read_body(&headers, body, SINGLE_BODY_LIMIT).await?;
        let message = match kind {
            BodyKind::Json => {
                let m: MessageIn = serde_json::from_slice(&bytes)
                    .map_err(|e| ServiceError::new(ErrorCode::MalformedJson, e.to_string()))?;
                from_json(&state, &m)?
            }
            BodyKind::Binary => from_binary(&state, &bytes)?,
        };
        commit(&state, vec![message], "single").await
    }
    .await;
    match result {
        Ok(index) => (StatusCode::CREATED, Json(Posted { index })).into_response(),
        Err(e) => reject(&state, e).into_response(),
    }
}

/// Post several messages in one transaction (all or nothing). The binary form is a sequence of
/// (u32 little-endian length, Message encoding).
#[utoipa::path(
    post, path = "/v1/messages/batch",
    request_body(content = BatchIn),
    responses(
        (status = 201, body = BatchPosted, description = "All committed, in request order"),
        (status = 400, body = ErrorBody, description = "A message is malformed: nothing stored"),
        (status = 413, body = ErrorBody, description = "Too many messages or too large"),
        (status = 415, body = ErrorBody, description = "Unsupported Content-Type"),
    )
)]
async fn post_batch(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let kind = body_kind(&headers)?;
        let max = state.config.max_batch_messages;
        let bytes = read_body(&headers, body, max * SINGLE_BODY_LIMIT).await?;
        let too_many = |n: usize| {
            ServiceError::new(
                ErrorCode::BatchTooLarge,
                format!("{n} messages in one batch; the limit is {max}"),
            )
        };
        let messages = match kind {
            BodyKind::Json => {
                let b: BatchIn = serde_json::from_slice(&bytes)
                    .map_err(|e| ServiceError::new(ErrorCode::MalformedJson, e.to_string()))?;
                if b.messages.len() > max {
                    return Err(too_many(b.messages.len()));
                }
                b.messages
                    .iter()
                    .enumerate()
                    .map(|(i, m)| {
                        from_json(&state, m).map_err(|e| e.at(format_args!("message {i}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
            BodyKind::Binary => {
                let mut out = Vec::new();
                let mut rest = &bytes[..];
                while !rest.is_empty() {
                    if out.len() == max {
                        return Err(too_many(max + 1));
                    }
                    let i = out.len();
                    if rest.len() < 4 {
                        return Err(ServiceError::new(
                            ErrorCode::MalformedMessage,
                            "truncated length prefix",
                        )
                        .at(format_args!("message {i}")));
                    }
                    let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
                    if rest.len() - 4 < len {
                        return Err(ServiceError::new(
                            ErrorCode::MalformedMessage,
                            "truncated message",
                        )
                        .at(format_args!("message {i}")));
                    }
                    out.push(
                        from_binary(&state, &rest[4..4 + len])
                            .map_err(|e| e.at(format_args!("message {i}")))?,
                    );
                    rest = &rest[4 + len..];
                }
                out
            }
        };
        if messages.is_empty() {
            return Err(ServiceError::new(
                ErrorCode::EmptyBatch,
                "the batch holds no messages",
            ));
        }
        let count = messages.len() as u64;
        let first = commit(&state, messages, "batch").await?;
        Ok((first, count))
    }
    .await;
    match result {
        Ok((first_index, count)) => (
            StatusCode::CREATED,
            Json(BatchPosted { first_index, count }),
        )
            .into_response(),
        Err(e) => reject(&state, e).into_response(),
    }
}

/// Read the public board.
#[utoipa::path(
    get, path = "/v1/messages", params(ReadQuery),
    responses((status = 200, body = BoardPage), (status = 400, body = ErrorBody))
)]
async fn get_messages(
    State(state): State<Arc<AppState>>,
    query: Result<Query<ReadQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<BoardPage>, ServiceError> {
    let Query(q) =
        query.map_err(|e| ServiceError::new(ErrorCode::MalformedQuery, e.body_text()))?;
    let from = q.from.unwrap_or(0);
    let limit = q.limit.unwrap_or(MAX_READ);
    if limit == 0 || limit > MAX_READ {
        return Err(ServiceError::new(
            ErrorCode::MalformedQuery,
            format!("limit must be 1..={MAX_READ}"),
        ));
    }
    let head = state
        .store
        .board_head()
        .await
        .map_err(|e| ServiceError::internal("reading the board head", e))?;
    let rows = state
        .store
        .read(from, limit)
        .await
        .map_err(|e| ServiceError::internal("reading the board", e))?;
    let next = rows.last().map(|m| m.index + 1).unwrap_or(from);
    Ok(Json(BoardPage {
        messages: rows
            .into_iter()
            .map(|m| BoardMessage {
                index: m.index,
                clue: B64.encode(&m.clue),
                payload: B64.encode(&m.payload),
                received_ms: m.received_ms,
            })
            .collect(),
        next,
        head,
    }))
}

/// The parameter set and limits of this server.
#[utoipa::path(get, path = "/v1/params", responses((status = 200, body = Params)))]
async fn get_params(State(state): State<Arc<AppState>>) -> Result<Json<Params>, ServiceError> {
    let p = state.params;
    let head = state
        .store
        .board_head()
        .await
        .map_err(|e| ServiceError::internal("reading the board head", e))?;
    Ok(Json(Params {
        param_set: p.name.to_string(),
        clue_bytes: p.clue_bytes(),
        max_payload_bytes: p.payload_bytes,
        max_kbar: p.max_kbar,
        max_range: p.max_range,
        max_key_bytes: state.config.max_key_bytes,
        max_batch_messages: state.config.max_batch_messages,
        board_head: head,
    }))
}
