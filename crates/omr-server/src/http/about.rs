//! What the server says about itself: `GET /v1/params` (parameter set and limits, from
//! `service::params`) and the OpenAPI document of the public API, whose paths the router adds
//! from the routes it serves (`http/mod.rs`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use omr_api::http::{
    BatchIn, BatchPosted, BoardMessage, BoardPage, CreatedInvite, ErrorBody, KeyRegistered,
    KeyStatus, MessageIn, NewInvite, Params, Posted,
};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::HttpState;
use crate::error::ServiceError;

/// The document's title, description, schemas and security schemes; its paths are the routes'.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "omrd",
        description = "Oblivious message retrieval detector: the public bulletin board, key \
                       registration, status and digests, and the admin API."
    ),
    components(schemas(
        MessageIn,
        BatchIn,
        Posted,
        BatchPosted,
        BoardPage,
        BoardMessage,
        Params,
        KeyStatus,
        KeyRegistered,
        NewInvite,
        CreatedInvite,
        ErrorBody
    )),
    modifiers(&TokenSchemes)
)]
pub(super) struct ApiDoc;

/// The two bearer tokens as OpenAPI security schemes: a key's access token (from its
/// registration) and the admin API's token.
struct TokenSchemes;

impl Modify for TokenSchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer = |what: &str| {
            let scheme = HttpBuilder::new().scheme(HttpAuthScheme::Bearer);
            SecurityScheme::Http(scheme.description(Some(what)).build())
        };
        components.add_security_scheme(
            "key_token",
            bearer("A detection key's access token, returned once by its registration"),
        );
        components.add_security_scheme("admin_token", bearer("The admin API's token"));
    }
}

/// `GET /openapi.json`: `document`, encoded once.
pub(super) fn openapi(
    document: &serde_json::Value,
) -> impl Fn() -> std::future::Ready<axum::response::Response> + Clone + Send + 'static {
    let body = Bytes::from(serde_json::to_vec(document).expect("the OpenAPI document encodes"));
    move || {
        let answer = ([(header::CONTENT_TYPE, "application/json")], body.clone());
        std::future::ready(answer.into_response())
    }
}

/// The parameter set and limits of this server.
#[utoipa::path(get, tag = "about", path = "/v1/params", responses((status = 200, body = Params)))]
pub(super) async fn get_params(
    State(state): State<Arc<HttpState>>,
) -> Result<Json<Params>, ServiceError> {
    let head = state.board_head().await?;
    Ok(Json(crate::service::params::params(&state.service, head)))
}
