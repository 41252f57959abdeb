//! [`ServiceError`] as an HTTP answer: the code's status (from `ErrorCode`'s table),
//! `Retry-After` when the error says when to retry, and the `{code, message}` JSON body; and the
//! refusal of a query string that does not parse.

use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use omr_api::http::ErrorBody;
use omr_api::ErrorCode;

use crate::error::ServiceError;

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut body = ErrorBody::new(self.code, self.message);
        body.index = self.index;
        let mut resp = (status, Json(body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        resp
    }
}

/// A query string that does not parse, as `malformed_query`.
pub(super) fn malformed_query(e: QueryRejection) -> ServiceError {
    ServiceError::new(ErrorCode::MalformedQuery, e.body_text())
}
