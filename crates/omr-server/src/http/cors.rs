//! Cross-origin requests from browsers (CORS): off unless the operator names the origins
//! (`cors_allowed_origins`), so that a web wallet served from one of them may call the HTTP API.
//! tower-http's `CorsLayer` answers preflights and adds the headers; this module says which
//! methods and headers (the origins are checked with the configuration: `Config::cors_origins`).

use std::time::Duration;

use axum::http::{header, HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::config::CorsOrigins;

/// How long a browser may cache a preflight's answer.
const MAX_AGE: Duration = Duration::from_secs(600);

/// The layer for the configured origins; `None` when CORS is off (no header is added and a
/// preflight is an ordinary `OPTIONS` request).
pub fn layer(origins: CorsOrigins) -> Option<CorsLayer> {
    let allow = match origins {
        CorsOrigins::Off => return None,
        CorsOrigins::Any => AllowOrigin::any(),
        CorsOrigins::List(list) => AllowOrigin::list(list.iter().map(|o| {
            HeaderValue::from_str(o).expect("an origin is visible ASCII (Config::cors_origins)")
        })),
    };
    // What a page may read of an answer besides the simple headers: the digest's headers,
    // its ETag, and when to retry.
    let exposed = [
        omr_api::headers::RANGE_START,
        omr_api::headers::RANGE_END,
        omr_api::headers::BOARD_HEAD,
        omr_api::headers::LAG,
        omr_api::headers::EPOCH_LENGTH,
        omr_api::headers::NEXT_FROM,
        omr_api::headers::DETECTED_UP_TO,
        omr_api::headers::REFRESH_AT,
    ]
    .into_iter()
    .map(HeaderName::from_static)
    .chain([header::ETAG, header::RETRY_AFTER]);
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::IF_NONE_MATCH,
                // A key registration's (`PUT /v1/keys`).
                HeaderName::from_static(omr_api::headers::PARAM_SET),
                HeaderName::from_static(omr_api::headers::KBAR),
                HeaderName::from_static(omr_api::headers::START),
                HeaderName::from_static(omr_api::headers::INVITE_CODE),
            ])
            .expose_headers(exposed.collect::<Vec<_>>())
            .max_age(MAX_AGE),
    )
}
