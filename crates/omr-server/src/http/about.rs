//! What the server says about itself: `GET /v1/params` (parameter set and limits) and the
//! OpenAPI document of the public API.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use omr_api::http::{
    BatchIn, BatchPosted, BoardMessage, BoardPage, CreatedInvite, ErrorBody, KeyStatus, MessageIn,
    NewInvite, Params, Posted,
};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{admin, board, pir};
use crate::error::ServiceError;
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "omrd",
        description = "Oblivious message retrieval detector: the public bulletin board, key status \
                       and digests, and the admin API."
    ),
    paths(
        board::post_message,
        board::post_batch,
        board::get_messages,
        get_params,
        crate::digests::get_digest,
        crate::status::get_key_status,
        admin::create_invite,
        pir::get_hint,
        pir::post_query
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
        NewInvite,
        CreatedInvite,
        ErrorBody
    )),
    modifiers(&AdminTokenScheme)
)]
struct ApiDoc;

/// The admin API's bearer token, as an OpenAPI security scheme.
struct AdminTokenScheme;

impl Modify for AdminTokenScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// `GET /openapi.json`.
pub(super) async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// The parameter set and limits of this server.
#[utoipa::path(get, path = "/v1/params", responses((status = 200, body = Params)))]
pub(super) async fn get_params(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Params>, ServiceError> {
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
        postage_bits: state.config.postage_bits,
        invite_required: state.config.registration == crate::config::Registration::Invite,
        max_attachment_bytes: state.config.max_attachment_bytes,
        epoch_len: state.config.epoch_len.clamp(1, p.max_range),
        pir_params: (state.config.max_attachment_bytes > 0)
            .then(|| omr_pir::PIR_V1.name.to_string()),
    }))
}
