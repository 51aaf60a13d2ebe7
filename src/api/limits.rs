//! Per-request limits, applied in one place before any handler, extractor or idempotency record sees the
//! request: the body limit ([`MAX_BODY`], refused with 413 from `Content-Length` alone, before a byte of the
//! body is read), the body-read timeout (408) and the request timeout (503).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::Response;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Map;

use super::error::error_response;

/// The largest request body, in bytes (2 MiB).
pub const MAX_BODY: usize = 2 * 1024 * 1024;

/// How long a request may take (README "Limits and timeouts").
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// From the end of the request head to the end of its body.
    pub body_timeout: Duration,
    /// From the end of the request head to the response.
    pub request_timeout: Duration,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            body_timeout: Duration::from_secs(15),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Applies [`RequestLimits`] and [`MAX_BODY`] (inside the wire context: refusals are ordinary error bodies).
#[derive(Debug, Clone, Copy)]
pub struct LimitsLayer(pub RequestLimits);

impl<S> tower::Layer<S> for LimitsLayer {
    type Service = WithLimits<S>;

    fn layer(&self, inner: S) -> WithLimits<S> {
        WithLimits {
            inner,
            limits: self.0,
        }
    }
}

/// [`LimitsLayer`]'s service.
#[derive(Debug, Clone)]
pub struct WithLimits<S> {
    inner: S,
    limits: RequestLimits,
}

impl<S> tower::Service<Request> for WithLimits<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // The clone is the ready one's twin; the ready one goes into the future (tower's usual swap).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let limits = self.limits;
        Box::pin(async move {
            let within = tokio::time::timeout(limits.request_timeout, async move {
                match read_body(req, limits.body_timeout).await {
                    Ok(req) => match inner.call(req).await {
                        Ok(resp) => resp,
                        Err(never) => match never {},
                    },
                    Err(refused) => refused,
                }
            })
            .await;
            Ok(within.unwrap_or_else(|_| {
                let secs = limits.request_timeout.as_secs_f64();
                error_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("The request was not completed within {secs} s"),
                    Map::new(),
                )
            }))
        })
    }
}

/// The request with its body read into memory, or the answer that refuses it: 413 past [`MAX_BODY`]
/// (from `Content-Length` when it is given), 408 when the body is not in within `timeout`, 400 when the
/// client broke the body off.
async fn read_body(req: Request, timeout: Duration) -> Result<Request, Response> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    if declared == Some(0) || http_body::Body::is_end_stream(req.body()) {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    let collected = tokio::time::timeout(timeout, Limited::new(body, MAX_BODY).collect()).await;
    match collected {
        Ok(Ok(collected)) => Ok(Request::from_parts(parts, Body::from(collected.to_bytes()))),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(error_response(
            StatusCode::BAD_REQUEST,
            "The request body could not be read",
            Map::new(),
        )),
        Err(_) => Err(error_response(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "The request body was not received within {} s",
                timeout.as_secs_f64()
            ),
            Map::new(),
        )),
    }
}

fn too_large() -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("The request body exceeds the limit of {MAX_BODY} bytes (2 MiB)"),
        Map::new(),
    )
}
