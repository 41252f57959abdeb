//! Probes: `/readyz` (ready once migrations ran and both servers listen, the store answers, and
//! the detection worker is not failing: 503 names the reason) and `/metrics` (Prometheus text,
//! with the deployment-wide lag gauges and the live workers read from the store at each
//! scrape). `/livez` is a constant in the router.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::HttpState;

pub(super) async fn readyz(State(state): State<Arc<HttpState>>) -> Response {
    if !state.ready.load(Ordering::Acquire) || state.store.ping().await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response();
    }
    match state.worker_health.unready_reason() {
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}"),
        )
            .into_response(),
        None => (StatusCode::OK, "ready").into_response(),
    }
}

pub(super) async fn metrics(State(state): State<Arc<HttpState>>) -> Response {
    refresh_overview(&state).await;
    refresh_fleet(&state).await;
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

/// Read detection over every registered key from the store into the lag gauges, so they cover
/// keys no worker holds and tell the truth in every process. When the store does not answer the
/// gauges keep their last values (and readiness reports the store).
async fn refresh_overview(state: &HttpState) {
    match state.store.detection_overview().await {
        Ok(o) => {
            let m = &state.metrics;
            m.active_keys.set(o.keys as i64);
            m.max_lag.set(o.max_lag as i64);
            m.detection.keys_behind.set(o.keys_behind as i64);
            m.detection.keys_unassigned.set(o.keys_unassigned as i64);
            let age = o.oldest_undetected_ms.map_or(0.0, |t| {
                (chrono::Utc::now().timestamp_millis() - t).max(0) as f64 / 1000.0
            });
            m.detection.oldest_undetected_seconds.set(age);
        }
        Err(e) => tracing::warn!(error = %e, "reading the detection overview for /metrics failed"),
    }
}

/// Read the live workers (unexpired heartbeats) from the store, so every process reports the
/// fleet as it is; when the store does not answer the gauge keeps its last value.
async fn refresh_fleet(state: &HttpState) {
    match state.store.live_workers().await {
        Ok(n) => state.metrics.live_workers.set(n as i64),
        Err(e) => tracing::warn!(error = %e, "reading the live workers for /metrics failed"),
    }
}
