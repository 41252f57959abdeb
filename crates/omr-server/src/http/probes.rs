//! Probes: `/readyz` (ready once migrations ran and both servers listen, and the store answers)
//! and `/metrics` (Prometheus text). `/livez` is a constant in the router.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

pub(super) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.ready.load(Ordering::Acquire) && state.store.ping().await.is_ok() {
        (StatusCode::OK, "ready").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response()
    }
}

pub(super) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}
