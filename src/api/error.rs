//! The one mapping from [`crate::Error`] to HTTP: status plus the JSON error body of design.md §3.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::wire::{json_response, request_path};
use crate::domain::Timestamp;
use crate::error::Error;

/// Wrapper so handlers can `?` crate errors into responses.
#[derive(Debug)]
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        Self(e)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// Builds an error body: `{statusCode, timestamp, path, message, error}` plus `extra` keys.
pub fn error_body(status: StatusCode, message: &str, extra: Map<String, Value>) -> Vec<u8> {
    let mut body = Map::new();
    body.insert("statusCode".into(), status.as_u16().into());
    body.insert("timestamp".into(), Timestamp::now().to_iso().into());
    body.insert("path".into(), request_path().into());
    body.insert("message".into(), message.into());
    body.insert(
        "error".into(),
        status.canonical_reason().unwrap_or("Error").into(),
    );
    for (k, v) in extra {
        body.entry(k).or_insert(v);
    }
    serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
}

pub fn error_response(status: StatusCode, message: &str, extra: Map<String, Value>) -> Response {
    json_response(status, error_body(status, message, extra))
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self.0 {
            Error::Validation(v) => {
                let mut errors = Map::new();
                for e in &v.0 {
                    errors.insert(
                        e.field.clone(),
                        json!({ "messages": e.messages, "value": e.value }),
                    );
                }
                let mut extra = Map::new();
                extra.insert("errors".into(), Value::Object(errors));
                error_response(StatusCode::UNPROCESSABLE_ENTITY, &v.to_string(), extra)
            }
            Error::BadRequest { message, extra } => {
                error_response(StatusCode::BAD_REQUEST, &message, extra)
            }
            Error::Unauthorized(m) => error_response(StatusCode::UNAUTHORIZED, &m, Map::new()),
            Error::Forbidden(m) => error_response(StatusCode::FORBIDDEN, &m, Map::new()),
            Error::NotFound(m) => error_response(StatusCode::NOT_FOUND, &m, Map::new()),
            Error::Conflict(m) => error_response(StatusCode::CONFLICT, &m, Map::new()),
            e @ Error::Duplicate => {
                error_response(StatusCode::CONFLICT, &e.to_string(), Map::new())
            }
            Error::Internal(e) => {
                let error_id = uuid::Uuid::new_v4().to_string();
                tracing::error!(error_id = %error_id, path = %request_path(), error = ?e, "internal error");
                let mut extra = Map::new();
                extra.insert("errorId".into(), error_id.into());
                error_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Internal server error, contact support and provide them with the errorId",
                    extra,
                )
            }
        }
    }
}
