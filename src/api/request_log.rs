//! The request log: one `info` event per request (target `tidings::request`) with its method, the route
//! template that served it, status, latency and request id, and the `X-Request-Id` response header.
//!
//! The route template is known without axum's `matched-path` feature (left out for speed): every route is
//! wrapped in a [`RouteLayer`] holding its template, which writes it into a task-local slot that the outer
//! [`LogLayer`] opens around each poll of the request; requests no route served (the 404 fallback) log `-`. Per request this costs
//! a clock read, the request id's header value, the log event itself and its latency's record in the
//! route's own histogram handle ([`crate::metrics::Route`]).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Method};
use axum::response::Response;

use crate::metrics::Route;

/// The request id header: taken from the client when it sent a usable one, echoed on every response.
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The route logged for a request that no route served.
pub const UNMATCHED: &str = "-";

/// [`UNMATCHED`] with its latency histograms.
static UNMATCHED_ROUTE: Route = Route::new(UNMATCHED);

/// A client's request id longer than this (or with other than visible ASCII) is replaced by a generated one.
const MAX_CLIENT_ID: usize = 128;

tokio::task_local! {
    static ROUTE: Cell<&'static Route>;
}

/// The route of the template (its name and latency histograms), each distinct template allocated once per
/// process (routers are built once per server, and once per test app in the tests).
fn intern(template: &str) -> &'static Route {
    static ROUTES: Mutex<Vec<&'static Route>> = Mutex::new(Vec::new());
    let mut routes = ROUTES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(route) = routes.iter().find(|r| r.template() == template) {
        return route;
    }
    let name: &'static str = Box::leak(template.to_owned().into_boxed_str());
    let route: &'static Route = Box::leak(Box::new(Route::new(name)));
    routes.push(route);
    route
}

/// Names the route it wraps (see the module's documentation).
#[derive(Debug, Clone, Copy)]
pub struct RouteLayer(&'static Route);

impl RouteLayer {
    pub fn new(template: &str) -> Self {
        Self(intern(template))
    }
}

impl<S> tower::Layer<S> for RouteLayer {
    type Service = Named<S>;

    fn layer(&self, inner: S) -> Named<S> {
        Named {
            inner,
            route: self.0,
        }
    }
}

/// [`RouteLayer`]'s service.
#[derive(Debug, Clone)]
pub struct Named<S> {
    inner: S,
    route: &'static Route,
}

impl<S> tower::Service<Request> for Named<S>
where
    S: tower::Service<Request>,
    S::Future: Unpin,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = NamedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        NamedFuture {
            inner: self.inner.call(req),
            route: self.route,
        }
    }
}

/// Writes the route into the request's slot when polled (polling runs inside [`LogLayer`]'s scope, building
/// the future may not).
pub struct NamedFuture<F> {
    inner: F,
    route: &'static Route,
}

impl<F: Future + Unpin> Future for NamedFuture<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let route = self.route;
        let _ = ROUTE.try_with(|slot| slot.set(route));
        Pin::new(&mut self.inner).poll(cx)
    }
}

/// Logs every request (see the module's documentation). Applied outside every other layer.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogLayer;

impl<S> tower::Layer<S> for LogLayer {
    type Service = Logged<S>;

    fn layer(&self, inner: S) -> Logged<S> {
        Logged { inner }
    }
}

/// [`LogLayer`]'s service.
#[derive(Debug, Clone)]
pub struct Logged<S> {
    inner: S,
}

impl<S> tower::Service<Request> for Logged<S>
where
    S: tower::Service<Request, Response = Response>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = S::Error;
    type Future = LoggedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let start = Instant::now();
        let request_id = req
            .headers()
            .get(&REQUEST_ID)
            .filter(|v| usable_client_id(v.as_bytes()))
            .cloned()
            .unwrap_or_else(new_request_id);
        let method = req.method().clone();
        LoggedFuture {
            inner: self.inner.call(req),
            route: &UNMATCHED_ROUTE,
            start,
            method,
            request_id: Some(request_id),
        }
    }
}

/// [`Logged`]'s future: polls the request inside its route slot, then logs it and echoes its id.
pub struct LoggedFuture<F> {
    inner: F,
    /// What the slot held after the last poll.
    route: &'static Route,
    start: Instant,
    method: Method,
    request_id: Option<HeaderValue>,
}

impl<F, E> Future for LoggedFuture<F>
where
    F: Future<Output = Result<Response, E>> + Unpin,
{
    type Output = Result<Response, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        // The slot lives for one poll (no allocation); its value is carried over to the next.
        let (poll, route) = ROUTE.sync_scope(Cell::new(this.route), || {
            let poll = Pin::new(&mut this.inner).poll(cx);
            (poll, ROUTE.with(Cell::get))
        });
        this.route = route;
        let Poll::Ready(mut result) = poll else {
            return Poll::Pending;
        };
        let Some(request_id) = this.request_id.take() else {
            return Poll::Ready(result);
        };
        if let Ok(resp) = &mut result {
            let elapsed = this.start.elapsed();
            route.request(&this.method, resp.status().as_u16(), elapsed);
            tracing::info!(
                target: "tidings::request",
                method = %this.method,
                route = %route.template(),
                status = resp.status().as_u16(),
                latency_us = elapsed.as_micros() as u64,
                request_id = %request_id.to_str().unwrap_or(UNMATCHED),
                "request"
            );
            resp.headers_mut().insert(REQUEST_ID.clone(), request_id);
        }
        Poll::Ready(result)
    }
}

/// Whether a client's `x-request-id` can be logged and echoed as it is: 1 to [`MAX_CLIENT_ID`] visible
/// ASCII characters (nothing that could forge a log line).
fn usable_client_id(id: &[u8]) -> bool {
    !id.is_empty() && id.len() <= MAX_CLIENT_ID && id.iter().all(|b| b.is_ascii_graphic())
}

/// A new request id: 20 lowercase hex characters, a random per-process prefix and a counter, so ids from
/// several instances do not collide and one instance's ids sort by arrival.
fn new_request_id() -> HeaderValue {
    static PREFIX: OnceLock<u32> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(rand::random);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff_ffff;
    let mut buf = [0u8; 20];
    hex::encode_to_slice(prefix.to_be_bytes(), &mut buf[..8]).unwrap_or_default();
    hex::encode_to_slice(&n.to_be_bytes()[2..], &mut buf[8..]).unwrap_or_default();
    HeaderValue::from_bytes(&buf).unwrap_or_else(|_| HeaderValue::from_static("0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_distinct_hex() {
        let a = new_request_id();
        let b = new_request_id();
        assert_ne!(a, b);
        for id in [&a, &b] {
            let s = id.to_str().unwrap();
            assert_eq!(s.len(), 20);
            assert!(s
                .bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        }
        assert_eq!(a.as_bytes()[..8], b.as_bytes()[..8]);
    }

    #[test]
    fn client_ids_are_checked() {
        assert!(usable_client_id(b"req-123_abc"));
        assert!(!usable_client_id(b""));
        assert!(!usable_client_id(b"two words"));
        assert!(!usable_client_id(b"line\nbreak"));
        assert!(!usable_client_id(&[b'a'; MAX_CLIENT_ID + 1]));
    }

    #[test]
    fn templates_are_interned_once() {
        let a = intern("/v2/subscribers/{subscriberId}");
        let b = intern(&String::from("/v2/subscribers/{subscriberId}"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(a.template(), "/v2/subscribers/{subscriberId}");
    }
}
