//! `GET /metrics`: the Prometheus text of [`crate::metrics`], behind the optional bearer token
//! `TIDINGS_METRICS_TOKEN`. An operator's route, not part of the API: it is left out of the OpenAPI document.

use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::Map;
use sha2::{Digest, Sha256};

use super::error::error_response;
use super::request_log::RouteLayer;
use super::AppState;

/// Prometheus' text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn routes() -> Router<AppState> {
    crate::metrics::install();
    Router::new().route("/metrics", get(scrape).layer(RouteLayer::new("/metrics")))
}

async fn scrape(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(expected) = &state.metrics_token {
        if !bearer_matches(headers.get(AUTHORIZATION), expected) {
            let mut resp = error_response(StatusCode::UNAUTHORIZED, "Unauthorized", Map::new());
            resp.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return resp;
        }
    }
    let text = crate::metrics::render(&state.store).await;
    ([(CONTENT_TYPE, TEXT_FORMAT)], text).into_response()
}

/// Whether the header is `Bearer <token>` for the token whose SHA-256 is `expected` (digests are compared,
/// so the comparison's time says nothing about the token).
fn bearer_matches(header: Option<&HeaderValue>, expected: &[u8; 32]) -> bool {
    let Some(token) = header
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    Sha256::digest(token.trim().as_bytes()).as_slice() == expected
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bearer_token_matches() {
        let expected: [u8; 32] = Sha256::digest(b"s3cret").into();
        let ok = HeaderValue::from_static("Bearer s3cret");
        assert!(bearer_matches(Some(&ok), &expected));
        for bad in ["Bearer other", "Basic s3cret", "s3cret", "Bearer "] {
            assert!(
                !bearer_matches(Some(&HeaderValue::from_static(bad)), &expected),
                "{bad}"
            );
        }
        assert!(!bearer_matches(None, &expected));
    }
}
