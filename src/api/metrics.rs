//! `GET /metrics`: the Prometheus text of [`crate::metrics`], behind the optional bearer token
//! `TIDINGS_METRICS_TOKEN`. An operator's route, not part of the API: it is left out of the OpenAPI document.
//! `tidings serve` answers it on the API's address; `tidings worker --metrics-listen` on an address of its
//! own ([`worker_routes`]).

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
use crate::metrics::QueueFigures;
use crate::store::Store;

/// Prometheus' text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn routes() -> Router<AppState> {
    crate::metrics::install();
    Router::new().route("/metrics", get(scrape).layer(RouteLayer::new("/metrics")))
}

/// The router of a `tidings worker`'s `--metrics-listen` address: `/metrics` alone, with the same token
/// rule as the API's. Installs the recorder, so that the worker's jobs are counted from then on.
pub fn worker_routes(store: Store, metrics_token: Option<&str>) -> Router {
    crate::metrics::install();
    let token: Option<[u8; 32]> = metrics_token.map(|t| Sha256::digest(t.as_bytes()).into());
    let figures = std::sync::Arc::new(QueueFigures::default());
    Router::new()
        .route(
            "/metrics",
            get(
                move |State(store): State<Store>, headers: HeaderMap| async move {
                    answer(&store, &figures, token.as_ref(), &headers).await
                },
            ),
        )
        .with_state(store)
}

async fn scrape(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let expected = state.metrics_token.as_ref();
    answer(&state.store, &state.queue_figures, expected, &headers).await
}

/// The metrics' text, or a 401 when a token is required (`expected`, its SHA-256) and not given.
async fn answer(
    store: &Store,
    figures: &QueueFigures,
    expected: Option<&[u8; 32]>,
    headers: &HeaderMap,
) -> Response {
    if let Some(expected) = expected {
        if !bearer_matches(headers.get(AUTHORIZATION), expected) {
            let mut resp = error_response(StatusCode::UNAUTHORIZED, "Unauthorized", Map::new());
            resp.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return resp;
        }
    }
    let text = crate::metrics::render(store, figures).await;
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
