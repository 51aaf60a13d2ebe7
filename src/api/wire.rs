//! The wire profile (design.md §3), applied in one place: a task-local set per request by [`ContextLayer`]
//! that [`Reply`] (the envelope) and [`WireName`] (the `svc`/`novu` spelling) read while serializing.

use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::uri::PathAndQuery;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Serialize, Serializer};

use crate::config::WireProfile;
use crate::domain::channel::ProviderId;
use crate::domain::Timestamp;

#[derive(Debug, Clone)]
pub struct RequestContext {
    pub profile: WireProfile,
    /// Path and query of the request, for error bodies (shares the request's bytes).
    pub path: PathAndQuery,
}

tokio::task_local! {
    static CONTEXT: RequestContext;
}

/// The outermost layer: makes the profile and the request path available to everything that renders the
/// response, for as long as the request's future runs.
#[derive(Debug, Clone, Copy)]
pub struct ContextLayer(pub WireProfile);

impl<S> tower::Layer<S> for ContextLayer {
    type Service = WithContext<S>;

    fn layer(&self, inner: S) -> WithContext<S> {
        WithContext {
            inner,
            profile: self.0,
        }
    }
}

/// [`ContextLayer`]'s service: wraps the inner future without boxing it.
#[derive(Debug, Clone)]
pub struct WithContext<S> {
    inner: S,
    profile: WireProfile,
}

impl<S: tower::Service<Request>> tower::Service<Request> for WithContext<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = tokio::task::futures::TaskLocalFuture<RequestContext, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let path = req
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let ctx = RequestContext {
            profile: self.profile,
            path,
        };
        // The inner service's `call` only builds its future; everything that renders runs when it is polled,
        // inside the scope.
        CONTEXT.scope(ctx, self.inner.call(req))
    }
}

/// Wraps `fut` so it runs inside the current request's context (for work moved onto another task).
/// The context is captured now, not when the future is first polled.
pub fn in_current_context<F: std::future::Future>(
    fut: F,
) -> impl std::future::Future<Output = F::Output> {
    let ctx = current();
    async move {
        match ctx {
            Some(ctx) => CONTEXT.scope(ctx, fut).await,
            None => fut.await,
        }
    }
}

/// Runs `f` inside `ctx` (a context taken with [`current`], for work moved onto another thread).
pub fn within<T>(ctx: Option<RequestContext>, f: impl FnOnce() -> T) -> T {
    match ctx {
        Some(ctx) => CONTEXT.sync_scope(ctx, f),
        None => f(),
    }
}

pub fn current() -> Option<RequestContext> {
    CONTEXT.try_with(Clone::clone).ok()
}

pub fn profile() -> WireProfile {
    CONTEXT.try_with(|c| c.profile).unwrap_or_default()
}

pub fn request_path() -> String {
    CONTEXT
        .try_with(|c| c.path.as_str().to_owned())
        .unwrap_or_default()
}

/// Spells a canonical `svc…` identifier for the current profile: `svc-email` → `novu-email` under `novu`.
pub fn spell(canonical: &str) -> std::borrow::Cow<'_, str> {
    match profile() {
        WireProfile::Spec => canonical.into(),
        WireProfile::Novu => {
            if canonical == "svc" {
                "novu".into()
            } else if let Some(rest) = canonical.strip_prefix("svc-") {
                format!("novu-{rest}").into()
            } else {
                canonical.into()
            }
        }
    }
}

/// An identifier that carries the service's name (`providerId`, `origin`): serialized in the profile's spelling.
#[derive(Debug, Clone, PartialEq, Eq, utoipa::ToSchema)]
#[schema(value_type = String)]
pub struct WireName(pub std::borrow::Cow<'static, str>);

impl Serialize for WireName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&spell(&self.0))
    }
}

/// A timestamp on the wire: its ISO 8601 form (`2026-11-22T08:15:00.000Z`), written without a `String`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, utoipa::ToSchema)]
#[schema(value_type = String, format = DateTime)]
pub struct IsoTime(pub Timestamp);

impl Serialize for IsoTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 24];
        match self.0.iso_str(&mut buf) {
            Some(iso) => s.serialize_str(iso),
            None => s.serialize_str(&self.0.iso_outside_years()),
        }
    }
}

impl From<Timestamp> for IsoTime {
    fn from(t: Timestamp) -> Self {
        Self(t)
    }
}

impl From<&str> for WireName {
    fn from(s: &str) -> Self {
        Self(s.to_owned().into())
    }
}

impl From<String> for WireName {
    fn from(s: String) -> Self {
        Self(s.into())
    }
}

impl From<&ProviderId> for WireName {
    fn from(p: &ProviderId) -> Self {
        Self(match p.as_static() {
            Some(id) => id.into(),
            None => p.as_str().to_owned().into(),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A single object or plain array: wrapped as `{"data": …}` under the `novu` profile.
    Single,
    /// A page (`{data, next, …}` or `{data, hasMore, …}`): never wrapped.
    Page,
    /// Wrapped as `{"data": …}` under every profile: the Inbox's answers, which `@novu/js` always unwraps.
    Enveloped,
}

impl Shape {
    /// Whether the current profile wraps this shape as `{"data": …}`: the `novu` profile's single bodies.
    fn enveloped(self) -> bool {
        match self {
            Shape::Single => profile() == WireProfile::Novu,
            Shape::Page => false,
            Shape::Enveloped => true,
        }
    }
}

/// A JSON success response rendered for the current profile.
pub struct Reply<T> {
    status: StatusCode,
    shape: Shape,
    body: T,
}

impl<T: Serialize> Reply<T> {
    pub fn ok(body: T) -> Self {
        Self {
            status: StatusCode::OK,
            shape: Shape::Single,
            body,
        }
    }

    pub fn created(body: T) -> Self {
        Self {
            status: StatusCode::CREATED,
            shape: Shape::Single,
            body,
        }
    }

    /// `{"data": body}` whatever the profile (see [`Shape::Enveloped`]).
    pub fn enveloped(status: StatusCode, body: T) -> Self {
        Self {
            status,
            shape: Shape::Enveloped,
            body,
        }
    }

    pub fn page(body: T) -> Self {
        Self {
            status: StatusCode::OK,
            shape: Shape::Page,
            body,
        }
    }
}

#[derive(Serialize)]
struct Envelope<'a, T> {
    data: &'a T,
}

impl<T: Serialize> IntoResponse for Reply<T> {
    fn into_response(self) -> Response {
        // Pages run to tens of kilobytes: start them large enough to skip most of the doublings (and the
        // copies they make) on the way there.
        let mut bytes = Vec::with_capacity(match self.shape {
            Shape::Single | Shape::Enveloped => 1024,
            Shape::Page => 16 * 1024,
        });
        let rendered = if self.shape.enveloped() {
            serde_json::to_writer(&mut bytes, &Envelope { data: &self.body })
        } else {
            serde_json::to_writer(&mut bytes, &self.body)
        };
        match rendered {
            Ok(()) => json_response(self.status, bytes),
            Err(e) => crate::api::error::ApiError::from(crate::Error::from(e)).into_response(),
        }
    }
}

pub fn json_response(status: StatusCode, bytes: Vec<u8>) -> Response {
    let mut resp = Response::new(Body::from(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    resp
}

/// `204 No Content`.
pub fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// A JSON object written member by member into a byte buffer: for the hot pages that skip serde's
/// per-field work and write borrowed row views straight into the response. Keys are literals that need no
/// escaping; dropping it without [`JsonObject::close`] leaves the object open for later members.
pub struct JsonObject<'b> {
    out: &'b mut Vec<u8>,
    first: bool,
}

impl<'b> JsonObject<'b> {
    /// Writes `{` and starts the first member.
    pub fn open(out: &'b mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, first: true }
    }

    /// Continues an object whose `{` and first members were written earlier.
    pub fn continued(out: &'b mut Vec<u8>) -> Self {
        Self { out, first: false }
    }

    /// Writes the key of the next member; its value is written next into the buffer returned.
    pub fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        self.out.reserve(key.len() + 4);
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    pub fn str(&mut self, key: &'static str, v: &str) -> &mut Self {
        let out = self.key(key);
        write_str(out, v);
        self
    }

    /// A string, or `null`.
    pub fn opt_str(&mut self, key: &'static str, v: Option<&str>) -> &mut Self {
        match v {
            Some(v) => self.str(key, v),
            None => self.raw(key, "null"),
        }
    }

    /// A string, or nothing (the member is left out).
    pub fn some_str(&mut self, key: &'static str, v: Option<&str>) -> &mut Self {
        match v {
            Some(v) => self.str(key, v),
            None => self,
        }
    }

    /// A value that already is JSON text (a stored JSON column).
    pub fn raw(&mut self, key: &'static str, json: &str) -> &mut Self {
        self.key(key).extend_from_slice(json.as_bytes());
        self
    }

    pub fn bool(&mut self, key: &'static str, v: bool) -> &mut Self {
        self.raw(key, if v { "true" } else { "false" })
    }

    /// A boolean, or `null`.
    pub fn opt_bool(&mut self, key: &'static str, v: Option<bool>) -> &mut Self {
        match v {
            Some(v) => self.bool(key, v),
            None => self.raw(key, "null"),
        }
    }

    pub fn int(&mut self, key: &'static str, v: i64) -> &mut Self {
        let out = self.key(key);
        out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        self
    }

    /// A timestamp in its ISO 8601 form (as [`IsoTime`] writes it). The rows of a page share many
    /// timestamps (a job's creation, update and run, its details' creation), so the last one formatted on
    /// this thread is kept.
    pub fn time(&mut self, key: &'static str, t: Timestamp) -> &mut Self {
        thread_local! {
            static LAST: std::cell::Cell<(i64, [u8; 24])> = const { std::cell::Cell::new((i64::MIN, [0; 24])) };
        }
        let (at, mut iso) = LAST.get();
        if at != t.0 {
            if t.iso_str(&mut iso).is_none() {
                return self.str(key, &t.iso_outside_years());
            }
            LAST.set((t.0, iso));
        }
        let out = self.key(key);
        out.push(b'"');
        out.extend_from_slice(&iso);
        out.push(b'"');
        self
    }

    /// A timestamp, or `null`.
    pub fn opt_time(&mut self, key: &'static str, t: Option<Timestamp>) -> &mut Self {
        match t {
            Some(t) => self.time(key, t),
            None => self.raw(key, "null"),
        }
    }

    /// A canonical `svc…` identifier in the current profile's spelling (as [`WireName`] writes it).
    pub fn name(&mut self, key: &'static str, canonical: &str) -> &mut Self {
        self.str(key, &spell(canonical))
    }

    /// The buffer, to write a value after [`JsonObject::key`].
    pub fn out(&mut self) -> &mut Vec<u8> {
        self.out
    }

    /// Writes `}`.
    pub fn close(self) {
        self.out.push(b'}');
    }
}

/// Writes `s` as a JSON string, quoted and escaped exactly as serde_json escapes it (`"`, `\\` and the
/// control characters; nothing else), copying the runs in between whole.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// A success response whose JSON body is already written, enveloped as [`Reply`] envelopes its `shape`.
pub fn raw_reply(status: StatusCode, shape: Shape, body: Vec<u8>) -> Response {
    if shape.enveloped() {
        let mut wrapped = Vec::with_capacity(body.len() + 9);
        wrapped.extend_from_slice(b"{\"data\":");
        wrapped.extend_from_slice(&body);
        wrapped.push(b'}');
        return json_response(status, wrapped);
    }
    json_response(status, body)
}

/// Runs `f` as if inside a request under `profile` (tests of code that spells names).
#[cfg(test)]
pub(crate) fn with_profile<T>(profile: WireProfile, f: impl FnOnce() -> T) -> T {
    within(
        Some(RequestContext {
            profile,
            path: PathAndQuery::from_static("/"),
        }),
        f,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut all: String = (0u8..0x80).map(char::from).collect();
        all.push_str("é€😀 plain \\\" end");
        for s in [all.as_str(), "", "plain", "\"", "tail\n"] {
            let mut out = Vec::new();
            super::write_str(&mut out, s);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(s).unwrap()
            );
        }
    }
}
