//! The admin API: `POST /v1/admin/invites` mints an invite code. Every admin call carries
//! `Authorization: Bearer <admin token>` (`admin_token` / `admin_token_file`), compared through
//! its SHA-256 in constant time; without a configured token the admin API is off.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use omr_api::http::{CreatedInvite, ErrorBody, NewInvite};
use omr_api::ErrorCode;

use super::body::{read_body, Object};
use super::HttpState;
use crate::error::ServiceError;

/// Largest admin request body.
const ADMIN_BODY_LIMIT: usize = 4 * 1024;

/// Mint an invite code for `registration = "invite"`.
#[utoipa::path(
    post, tag = "admin", path = "/v1/admin/invites",
    request_body(content = Option<NewInvite>, content_type = "application/json", description = "JSON; an empty body (or `null`) means one use, no expiry"),
    responses(
        (status = 201, body = CreatedInvite, description = "Minted; the code is shown only here"),
        (status = 400, body = ErrorBody, description = "Malformed JSON, uses or expiry out of range (`malformed_json`)"),
        (status = 401, body = ErrorBody, description = "No admin token (admin_unauthorized)"),
        (status = 403, body = ErrorBody, description = "Not the admin token (admin_forbidden)"),
        (status = 404, body = ErrorBody, description = "The admin API is off: no admin token configured (admin_disabled)"),
    ),
    security(("admin_token" = []))
)]
pub(super) async fn create_invite(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<CreatedInvite>), ServiceError> {
    authorize_admin(&state, &headers)?;
    let bytes = read_body(&headers, body, ADMIN_BODY_LIMIT).await?;
    let request: NewInvite = if bytes.iter().all(u8::is_ascii_whitespace) {
        NewInvite::default()
    } else {
        // JSON `null` is the document's "no body" too (the body is optional).
        serde_json::from_slice::<Option<Object<NewInvite>>>(&bytes)
            .map(|o| o.map(|o| o.0).unwrap_or_default())
            .map_err(|e| {
                ServiceError::new(
                    ErrorCode::MalformedJson,
                    format!("expected {{\"uses\": N, \"expires_secs\": S}} (both optional): {e}"),
                )
            })?
    };
    let expires = request.expires_secs.map(std::time::Duration::from_secs);
    let created =
        crate::service::invites::mint(&state.store, request.uses.unwrap_or(1), expires).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Check `Authorization: Bearer <admin token>`.
fn authorize_admin(state: &HttpState, headers: &HeaderMap) -> Result<(), ServiceError> {
    let Some(expected) = &state.admin_token_hash else {
        return Err(ServiceError::new(
            ErrorCode::AdminDisabled,
            "the admin API is off on this server: its operator sets admin_token_file (or \
             admin_token, OMR_ADMIN_TOKEN) to turn it on, or mints invite codes with \
             `omrd invite create`",
        ));
    };
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::tokens::bearer)
        .ok_or_else(|| {
            ServiceError::new(
                ErrorCode::AdminUnauthorized,
                "the admin API needs Authorization: Bearer <admin token>",
            )
        })?;
    if !crate::tokens::token_matches(presented, expected) {
        return Err(ServiceError::new(
            ErrorCode::AdminForbidden,
            "that is not this server's admin token",
        ));
    }
    Ok(())
}
