//! The HTTP API's error type: a status and a JSON body `{code, message}`. Bad input gets a
//! precise message; internal failures are logged once here and shown to clients generically.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use omr_core::OmrError;
use serde::Serialize;

/// An error answered to an HTTP client.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

/// The JSON body of every error response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code, e.g. `malformed_clue`.
    pub code: &'static str,
    /// What was wrong, for humans.
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// An internal failure: logged with its cause, answered generically.
    pub fn internal(context: &str, err: impl std::fmt::Display) -> Self {
        tracing::error!(error = %err, "{context}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see server logs",
        )
    }

    /// Map a decoding error of client-supplied bytes (`what` names the field).
    pub fn from_omr(what: &'static str, err: OmrError) -> Self {
        match err {
            OmrError::PayloadTooLarge { .. } => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                err.to_string(),
            ),
            OmrError::TooLarge { .. } => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                err.to_string(),
            ),
            OmrError::UnknownParamSet(_) | OmrError::ParamMismatch { .. } => {
                Self::bad_request("param_set_mismatch", format!("{what}: {err}"))
            }
            _ => Self::bad_request(
                match what {
                    "clue" => "malformed_clue",
                    _ => "malformed_message",
                },
                format!("{what}: {err}"),
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                code: self.code,
                message: self.message,
            }),
        )
            .into_response()
    }
}
