//! Per-request limits, applied in one place before any handler, extractor or idempotency record sees the
//! request: the body limit ([`MAX_BODY`]: 413, and no more than that is ever kept), the body-read timeout
//! (408) and the request timeout (503). The timeouts apply where a request can wait: on its body, or on a
//! write (any method but `GET`, `HEAD` and `OPTIONS`); a read without a body runs as it is.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::response::Response;
use http_body_util::BodyExt;
use serde_json::Map;

use super::error::error_response;

/// The largest request body, in bytes (2 MiB).
pub const MAX_BODY: usize = 2 * 1024 * 1024;

/// How long a request may take, declared with the other settings (`TIDINGS_BODY_TIMEOUT`, …).
pub use crate::config::RequestLimits;

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
    S::Future: Send + Unpin + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Limited<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // A read without a body cannot wait on its client, nor on a write: it goes straight on, without a
        // timer or an allocation (the database's own timeouts bound it).
        if is_read(&req) && has_no_body(&req) {
            return Limited::Direct(self.inner.call(req));
        }
        // The clone is the ready one's twin; the ready one goes into the future (tower's usual swap).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let limits = self.limits;
        Limited::Timed(Box::pin(async move {
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
        }))
    }
}

/// [`WithLimits`]'s future: a read without a body as the inner service answers it, anything else under the
/// limits.
pub enum Limited<F> {
    Direct(F),
    Timed(Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>),
}

impl<F> Future for Limited<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Self::Direct(f) => Pin::new(f).poll(cx),
            Self::Timed(f) => f.as_mut().poll(cx),
        }
    }
}

/// `GET`, `HEAD` or `OPTIONS`: nothing is written.
fn is_read(req: &Request) -> bool {
    matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The request declares an empty body, or has none.
fn has_no_body(req: &Request) -> bool {
    declared_length(req) == Some(0) || http_body::Body::is_end_stream(req.body())
}

/// The `Content-Length` the request declares.
fn declared_length(req: &Request) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// The request with its body read into memory, or the answer that refuses it: 413 past [`MAX_BODY`], 408
/// when the body is not in within `timeout`, 400 when the client broke it off.
///
/// A body over the limit is never kept. A client that asked `Expect: 100-continue`, or declared more than
/// [`DRAIN_MAX`], is answered at once, before it sends the body. Otherwise the rest of the body is read and
/// discarded (up to [`DRAIN_MAX`], within `timeout`) so that a client that writes its whole body before
/// reading gets the 413 instead of a reset connection.
async fn read_body(req: Request, timeout: Duration) -> Result<Request, Response> {
    let declared = declared_length(&req);
    if has_no_body(&req) {
        return Ok(req);
    }
    let expects = req
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if declared.is_some_and(|n| n > MAX_BODY as u64 && (expects || n > DRAIN_MAX as u64)) {
        return Err(too_large());
    }
    let (parts, body) = req.into_parts();
    let over = declared.is_some_and(|n| n > MAX_BODY as u64);
    let capacity = declared.map_or(0, |n| n.min(MAX_BODY as u64) as usize);
    match tokio::time::timeout(timeout, read_within(body, capacity, over)).await {
        Ok(Ok(Some(bytes))) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Ok(Ok(None)) => Err(too_large()),
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

/// Most of a body over the limit that is read and discarded before the 413 (16 MiB).
pub const DRAIN_MAX: usize = 16 * 1024 * 1024;

/// The body, or `None` when it passed [`MAX_BODY`] (then the rest, up to [`DRAIN_MAX`], is read and dropped).
/// `over`: its declared length is already past the limit (nothing is kept).
async fn read_within(
    mut body: Body,
    capacity: usize,
    over: bool,
) -> Result<Option<Vec<u8>>, axum::Error> {
    let mut kept = Vec::with_capacity(if over { 0 } else { capacity });
    let mut seen = if over { MAX_BODY } else { 0 };
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        seen += data.len();
        if seen <= MAX_BODY {
            kept.extend_from_slice(&data);
        } else if seen > DRAIN_MAX {
            break;
        } else {
            kept = Vec::new();
        }
    }
    Ok((seen <= MAX_BODY).then_some(kept))
}

fn too_large() -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("The request body exceeds the limit of {MAX_BODY} bytes (2 MiB)"),
        Map::new(),
    )
}
