//! `idempotency-key` on POST, PUT, PATCH and DELETE (design.md §3), per environment, stored in the database.
//! The keyed request runs on its own task so that it finishes, and its response is stored, even if the
//! client goes away mid-request.

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::Route;
use serde_json::{json, Map};
use sha2::{Digest, Sha256};
use tower::Service;

use super::error::{error_response, ApiError};
use super::wire::in_current_context;
use super::AppState;
use crate::domain::Tenant;
use crate::error::Error;
use crate::store::idempotency::IdempotencyBegin;

pub const MAX_KEY_LEN: usize = 255;
const TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// Largest response an idempotency record keeps (the request body is bounded by [`super::limits::MAX_BODY`]).
const MAX_RESPONSE: usize = 8 * 1024 * 1024;

static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
static IDEMPOTENCY_REPLAY: HeaderName = HeaderName::from_static("idempotency-replay");

/// What a request that needs no idempotency record gets: `Some(echo)`, where `echo` is the key to echo on
/// the response, if any. `None` for a write that carries a key. Reads ignore the key (the Novu SDKs send
/// one on every request) but still echo it.
pub(super) fn passes_through(req: &Request) -> Option<Option<HeaderValue>> {
    let Some(key) = req.headers().get(&IDEMPOTENCY_KEY) else {
        return Some(None);
    };
    matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS).then(|| echo_value(key))
}

/// The key as it is echoed: as text, with invalid UTF-8 replaced.
fn echo_value(key: &HeaderValue) -> Option<HeaderValue> {
    HeaderValue::from_str(&String::from_utf8_lossy(key.as_bytes())).ok()
}

pub(super) fn echo(resp: &mut Response, key: Option<HeaderValue>) {
    if let Some(v) = key {
        resp.headers_mut().insert(IDEMPOTENCY_KEY.clone(), v);
    }
}

/// Runs an authenticated request through the idempotency record when it is a write with a key.
pub(super) async fn idempotency(state: AppState, req: Request, route: Route) -> Response {
    if let Some(echoed) = passes_through(&req) {
        let mut resp = run(route, req).await;
        echo(&mut resp, echoed);
        return resp;
    }
    let header = req.headers().get(&IDEMPOTENCY_KEY);
    let key = header
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let echoed = header.and_then(echo_value);
    let mut resp = keyed(state, key, req, route).await;
    echo(&mut resp, echoed);
    resp
}

async fn run(mut route: Route, req: Request) -> Response {
    match route.call(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

async fn keyed(state: AppState, key: String, req: Request, route: Route) -> Response {
    if key.chars().count() > MAX_KEY_LEN {
        return ApiError(Error::bad_request(format!(
            "idempotencyKey \"{key}\" has exceeded the maximum allowed length of {MAX_KEY_LEN} characters"
        )))
        .into_response();
    }
    let Some(tenant) = req.extensions().get::<Tenant>().cloned() else {
        return run(route, req).await;
    };
    let (parts, body) = req.into_parts();
    // Already in memory: the limits layer read it, within its bound.
    let bytes = match to_bytes(body, super::limits::MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Request body is too large",
                Map::new(),
            )
        }
    };
    let mut hasher = Sha256::new();
    hasher.update(parts.method.as_str());
    hasher.update(b"\n");
    hasher.update(parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or(""));
    hasher.update(b"\n");
    hasher.update(&bytes);
    let request_hash = hex::encode(hasher.finalize());

    let env = tenant.environment_id.clone();
    match state
        .store
        .begin_idempotent(&env, &key, &request_hash, TTL_MS)
        .await
    {
        Err(e) => ApiError(e).into_response(),
        Ok(IdempotencyBegin::InProgress) => {
            let mut resp = error_response(
                StatusCode::CONFLICT,
                &format!("Request with key \"{key}\" is currently being processed. Please retry after 1 second"),
                Map::new(),
            );
            resp.headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            resp
        }
        Ok(IdempotencyBegin::Mismatch) => {
            let message =
                format!("Request with key \"{key}\" is being reused for a different body");
            let mut extra = Map::new();
            extra.insert(
                "errors".into(),
                json!({ "idempotency-key": { "messages": [message], "value": key } }),
            );
            error_response(StatusCode::UNPROCESSABLE_ENTITY, &message, extra)
        }
        Ok(IdempotencyBegin::Done {
            status,
            content_type,
            body,
        }) => {
            let mut resp = Response::new(Body::from(body));
            *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            if let Some(ct) = content_type.and_then(|c| HeaderValue::from_str(&c).ok()) {
                resp.headers_mut().insert("content-type", ct);
            }
            resp.headers_mut()
                .insert(IDEMPOTENCY_REPLAY.clone(), HeaderValue::from_static("true"));
            resp
        }
        Ok(IdempotencyBegin::Started) => {
            let req = Request::from_parts(parts, Body::from(bytes));
            let task = tokio::spawn(in_current_context(run_and_store(
                state, env, key, req, route,
            )));
            match task.await {
                Ok(resp) => resp,
                Err(e) => ApiError(Error::Internal(anyhow::anyhow!(
                    "idempotent request task failed: {e}"
                )))
                .into_response(),
            }
        }
    }
}

async fn run_and_store(
    state: AppState,
    env: crate::domain::EnvironmentId,
    key: String,
    req: Request,
    route: Route,
) -> Response {
    let resp = run(route, req).await;
    let (parts, body) = resp.into_parts();
    let bytes = match to_bytes(body, MAX_RESPONSE).await {
        Ok(b) => b,
        Err(e) => {
            let _ = state.store.abandon_idempotent(&env, &key).await;
            return ApiError(Error::Internal(anyhow::anyhow!(
                "response body could not be buffered: {e}"
            )))
            .into_response();
        }
    };
    // Server errors are not stored: the client may retry the same key once the problem is gone.
    let stored = if parts.status.is_server_error() {
        state.store.abandon_idempotent(&env, &key).await
    } else {
        let ct = content_type(&parts.headers);
        state
            .store
            .complete_idempotent(
                &env,
                &key,
                parts.status.as_u16(),
                ct.as_deref(),
                &bytes,
                TTL_MS,
            )
            .await
    };
    if let Err(e) = stored {
        tracing::error!(error = ?e, "could not record the idempotent response");
    }
    Response::from_parts(parts, Body::from(bytes))
}

fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
