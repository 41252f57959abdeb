//! The HTTP API (axum): the public board, parameters, probes, metrics and the OpenAPI document,
//! and the routes on a key (digests: `crate::digests`; status and long-poll: `crate::status`).
//! This module builds the router and records latency; `board` posts and reads messages, `body`
//! reads and validates request bodies, `probes` answers readiness and metrics, `about` serves
//! the parameters and the OpenAPI document, `admin` mints invite codes (admin token),
//! `pir` serves attachment epochs by PIR, `overload` sheds load and times requests out on the
//! API routes, and `serve` runs the router on a listener (connection bound, header timeout).

mod about;
mod admin;
mod board;
pub mod body;
mod overload;
mod pir;
mod probes;
pub mod serve;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use crate::state::AppState;

pub fn router(state: Arc<AppState>) -> Router {
    let probes = Router::new()
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(probes::readyz))
        .route("/metrics", get(probes::metrics));
    if state.config.role == crate::config::Role::Worker {
        return probes
            .layer(middleware::from_fn_with_state(state.clone(), observe))
            .with_state(state);
    }
    let overload =
        overload::Overload::new(state.config.max_concurrent_requests, state.metrics.clone());
    let timeout = Duration::from_secs(state.config.request_timeout_secs.max(1));
    let api = Router::new()
        .route(
            "/v1/messages",
            post(board::post_message).get(board::get_messages),
        )
        .route("/v1/messages/batch", post(board::post_batch))
        .route("/v1/params", get(about::get_params))
        .route("/v1/digests/{key_id}", get(crate::digests::get_digest))
        .route("/v1/admin/invites", post(admin::create_invite))
        .route("/v1/pir/{epoch}/hint", get(pir::get_hint))
        .route("/v1/pir/{epoch}/query", post(pir::post_query))
        .route("/openapi.json", get(about::openapi));
    // A long-poll waits up to MAX_WAIT_SECS for detection before its answer.
    let long_poll = Router::new().route(
        "/v1/keys/{key_id}/status",
        get(crate::status::get_key_status),
    );
    let long_poll_timeout = timeout + Duration::from_secs(omr_api::http::MAX_WAIT_SECS);
    probes
        .merge(overload.guard(api, timeout))
        .merge(overload.guard(long_poll, long_poll_timeout))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// Record latency per route and status.
async fn observe(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = route_label(req.uri().path());
    let started = Instant::now();
    let resp = next.run(req).await;
    state
        .metrics
        .http_seconds
        .with_label_values(&[route.as_str(), resp.status().as_str()])
        .observe(started.elapsed().as_secs_f64());
    resp
}

/// The route label of `path`: the route itself, `/v1/digests` for any key's digest,
/// `/v1/keys/status` for any key's status (long-polls included), or `other`.
fn route_label(path: &str) -> String {
    match path {
        "/v1/messages" | "/v1/messages/batch" | "/v1/params" | "/livez" | "/readyz"
        | "/metrics" | "/openapi.json" | "/v1/admin/invites" => path.to_string(),
        r if r.starts_with("/v1/digests/") => "/v1/digests".to_string(),
        r if r.starts_with("/v1/keys/") && r.ends_with("/status") => "/v1/keys/status".to_string(),
        r if r.starts_with("/v1/pir/") && r.ends_with("/hint") => "/v1/pir/hint".to_string(),
        r if r.starts_with("/v1/pir/") && r.ends_with("/query") => "/v1/pir/query".to_string(),
        _ => "other".to_string(),
    }
}
