//! The HTTP API (axum): every HTTP handler, each a thin adapter from HTTP to the service core
//! (`crate::service`), and nothing else. This module declares the routes once — each handler with
//! its `#[utoipa::path]`, so that the router and the OpenAPI document come from the same list — and
//! records latency per matched route. `board` posts and reads messages, `body` reads and validates
//! request bodies, `digests` and `status` answer on a key (status with its long-poll), `probes`
//! answers readiness and metrics, `about` the parameters and the OpenAPI document, `admin` mints
//! invite codes (admin token), `pir` serves attachment epochs by PIR, `keys` registers (a streamed
//! upload) and deletes keys, `error` maps a service error to an answer, `overload` sheds load and
//! times requests out on the API routes, and `serve` runs the router on a listener (connection
//! bound, header timeout).

mod about;
mod admin;
mod board;
pub mod body;
pub mod cors;
mod digests;
mod error;
mod fetch;
mod keys;
mod overload;
mod pir;
mod probes;
pub mod serve;
mod status;

use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::admission::{Limit, FORWARDED_FOR};
use crate::error::ServiceError;
use crate::state::ApiState;

/// What the HTTP handlers read: the state both APIs share, and what only HTTP has.
#[derive(Debug)]
pub struct HttpState {
    pub api: Arc<ApiState>,
    /// The SHA-256 of the admin API's token (`admin_token` / `admin_token_file`); `None`: the
    /// admin API is off. The token itself is not kept.
    pub admin_token_hash: Option<[u8; 32]>,
}

impl Deref for HttpState {
    type Target = ApiState;

    fn deref(&self) -> &ApiState {
        &self.api
    }
}

impl HttpState {
    /// Take `cost` from the rate limit `limit` of the client of a request from `peer` with
    /// `headers` (`X-Forwarded-For` counts from a trusted proxy), or refuse it.
    fn admit(
        &self,
        limit: Limit,
        route: &str,
        peer: SocketAddr,
        headers: &HeaderMap,
        cost: u32,
    ) -> Result<(), ServiceError> {
        let forwarded = (headers.get_all(FORWARDED_FOR).iter()).filter_map(|v| v.to_str().ok());
        let client = self.admission.client(peer.ip(), forwarded);
        self.admission.check(limit, route, client, cost)
    }
}

/// The `Authorization` header's value, if it is text.
fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
}

/// The API routes, and the OpenAPI document of exactly those routes.
struct Routes {
    /// Answered within `request_timeout_secs`.
    api: Router<Arc<HttpState>>,
    /// Long-polls: their wait on top.
    long_poll: Router<Arc<HttpState>>,
    /// Key uploads: `key_upload_timeout_secs` to upload, then a request's time to register.
    uploads: Router<Arc<HttpState>>,
    document: utoipa::openapi::OpenApi,
}

/// Every API route, declared once: each handler's `#[utoipa::path]` gives both its place in
/// the router and its entry in the document.
fn routes() -> Routes {
    let (api, mut document) = OpenApiRouter::with_openapi(about::ApiDoc::openapi())
        .routes(routes!(board::post_message, board::get_messages))
        .routes(routes!(board::post_batch))
        .routes(routes!(about::get_params))
        .routes(routes!(digests::get_digest))
        .routes(routes!(admin::create_invite))
        .routes(routes!(pir::get_hint))
        .routes(routes!(pir::post_query))
        .routes(routes!(fetch::get_range))
        .routes(routes!(fetch::get_open_range))
        .routes(routes!(fetch::put_key))
        .routes(routes!(fetch::post_round))
        .routes(routes!(keys::delete_key))
        .split_for_parts();
    // A long-poll waits up to MAX_WAIT_SECS for detection before its answer.
    let (long_poll, long_poll_document) = OpenApiRouter::new()
        .routes(routes!(status::get_key_status))
        .split_for_parts();
    document.merge(long_poll_document);
    let (uploads, uploads_document) = OpenApiRouter::new()
        .routes(routes!(keys::put_key))
        .split_for_parts();
    document.merge(uploads_document);
    Routes {
        api,
        long_poll,
        uploads,
        document,
    }
}

/// The OpenAPI document `/openapi.json` serves (`omrd openapi` prints it).
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    routes().document
}

/// The OpenAPI document as served: utoipa's, with unsigned integers declared as such. utoipa
/// writes a `u64` as `format: int64, minimum: 0`, but the server takes values up to 2^64 − 1
/// (and a `u32` up to 2^32 − 1), so those become `uint64` / `uint32` with their maximum.
pub fn openapi_json() -> serde_json::Value {
    served_document(&openapi_document())
}

fn served_document(document: &utoipa::openapi::OpenApi) -> serde_json::Value {
    let mut doc = serde_json::to_value(document).expect("the OpenAPI document encodes");
    declare_unsigned(&mut doc);
    doc
}

fn declare_unsigned(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            let unsigned = map.get("minimum").and_then(|m| m.as_u64()) == Some(0);
            let widened = match map.get("format").and_then(|f| f.as_str()) {
                Some("int64") if unsigned => Some(("uint64", u64::MAX)),
                Some("int32") if unsigned => Some(("uint32", u64::from(u32::MAX))),
                _ => None,
            };
            if let Some((format, max)) = widened {
                map.insert("format".into(), format.into());
                map.entry("maximum").or_insert(max.into());
            }
            map.values_mut().for_each(declare_unsigned);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(declare_unsigned),
        _ => {}
    }
}

pub fn router(state: Arc<HttpState>) -> Router {
    let probes = Router::new()
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(probes::readyz))
        .route("/metrics", get(probes::metrics));
    if state.config.role == crate::config::Role::Worker {
        return probes
            .fallback(unknown_route)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(middleware::from_fn_with_state(state.clone(), observe))
            .with_state(state);
    }
    let Routes {
        api,
        long_poll,
        uploads,
        document,
    } = routes();
    let api = api.route(
        "/openapi.json",
        get(about::openapi(&served_document(&document))),
    );
    let overload =
        overload::Overload::new(state.config.max_concurrent_requests, state.metrics.clone());
    let timeout = Duration::from_secs(state.config.request_timeout_secs.max(1));
    let long_poll_timeout = timeout + Duration::from_secs(omr_api::http::MAX_WAIT_SECS);
    let upload_timeout = timeout + Duration::from_secs(state.config.key_upload_timeout_secs);
    let origins = (state.config.cors_origins())
        .expect("cors_allowed_origins checked at start-up (Config::validate)");
    let cors = cors::layer(origins);
    let router = probes
        .merge(overload.guard(api, timeout))
        .merge(overload.guard(long_poll, long_poll_timeout))
        .merge(overload.guard(uploads, upload_timeout))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state);
    // Outermost: a preflight is answered before any route, limit or timeout sees it.
    match cors {
        Some(cors) => router.layer(cors),
        None => router,
    }
}

/// A path no route serves: `404 unknown_route`, in the one error shape.
async fn unknown_route(uri: axum::http::Uri) -> ServiceError {
    ServiceError::new(
        omr_api::ErrorCode::UnknownRoute,
        format!("no route {}; /openapi.json lists them", uri.path()),
    )
}

/// A route called with a method it does not take: `405 method_not_allowed`.
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ServiceError {
    ServiceError::new(
        omr_api::ErrorCode::MethodNotAllowed,
        format!(
            "{} does not take {method}; /openapi.json lists its methods",
            uri.path()
        ),
    )
}

/// Record latency per route and status.
async fn observe(State(state): State<Arc<HttpState>>, req: Request, next: Next) -> Response {
    let route = (req.extensions().get::<MatchedPath>())
        .map_or_else(|| "other".to_string(), |p| route_label(p.as_str()));
    let started = Instant::now();
    let resp = next.run(req).await;
    state
        .metrics
        .http_seconds
        .with_label_values(&[route.as_str(), resp.status().as_str()])
        .observe(started.elapsed().as_secs_f64());
    resp
}

/// The metric label of a matched route: its path without the parameters
/// (`/v1/digests/{key_id}` → `/v1/digests`), so that keys and epochs do not multiply series.
fn route_label(route: &str) -> String {
    let kept: Vec<&str> = route
        .split('/')
        .filter(|s| !(s.starts_with('{') && s.ends_with('}')))
        .collect();
    kept.join("/")
}

#[cfg(test)]
mod tests {
    use super::route_label;

    #[test]
    fn route_labels_drop_the_parameters() {
        assert_eq!(route_label("/v1/messages"), "/v1/messages");
        assert_eq!(route_label("/v1/digests/{key_id}"), "/v1/digests");
        assert_eq!(route_label("/v1/keys/{key_id}/status"), "/v1/keys/status");
        assert_eq!(route_label("/v1/pir/{epoch}/hint"), "/v1/pir/hint");
        assert_eq!(route_label("/livez"), "/livez");
    }

    #[test]
    fn the_documented_invite_expiry_bound_is_the_enforced_one() {
        let doc = super::openapi_json();
        let bound = &doc["components"]["schemas"]["NewInvite"]["properties"]["expires_secs"];
        assert_eq!(
            bound["maximum"].as_u64(),
            Some(crate::service::invites::MAX_EXPIRY.as_secs()),
            "{bound}"
        );
    }

    #[test]
    fn json_bodies_are_objects_not_arrays_of_the_fields() {
        use super::body::Object;
        use omr_api::http::NewInvite;
        let parse = |s: &str| serde_json::from_str::<Object<NewInvite>>(s).map(|o| o.0);
        assert_eq!(parse(r#"{"uses": 2}"#).unwrap().uses, Some(2));
        assert!(parse("[null, null]").is_err());
        assert!(parse("[2]").is_err());
        assert!(parse(r#"{"uses": 2, "other": 1}"#).is_err());
    }
}
