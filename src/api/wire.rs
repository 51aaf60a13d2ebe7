//! The wire profile (design.md §3), applied in one place: a task-local set per request by [`request_context`]
//! that [`Reply`] (the envelope) and [`WireName`] (the `svc`/`novu` spelling) read while serializing.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Serialize, Serializer};

use crate::config::WireProfile;
use crate::domain::channel::ProviderId;
use crate::domain::Timestamp;

#[derive(Debug, Clone)]
pub struct RequestContext {
    pub profile: WireProfile,
    /// Path and query of the request, for error bodies.
    pub path: String,
}

tokio::task_local! {
    static CONTEXT: RequestContext;
}

/// Middleware: makes the profile and the request path available to everything that renders the response.
pub async fn request_context(
    State(profile): State<WireProfile>,
    req: Request,
    next: Next,
) -> Response {
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| req.uri().path().to_owned());
    CONTEXT
        .scope(RequestContext { profile, path }, next.run(req))
        .await
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

pub fn current() -> Option<RequestContext> {
    CONTEXT.try_with(Clone::clone).ok()
}

pub fn profile() -> WireProfile {
    CONTEXT.try_with(|c| c.profile).unwrap_or_default()
}

pub fn request_path() -> String {
    CONTEXT.try_with(|c| c.path.clone()).unwrap_or_default()
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
enum Shape {
    /// A single object or plain array: wrapped as `{"data": …}` under the `novu` profile.
    Single,
    /// A page (`{data, next, …}` or `{data, hasMore, …}`): never wrapped.
    Page,
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
            Shape::Single => 1024,
            Shape::Page => 16 * 1024,
        });
        let rendered = match (self.shape, profile()) {
            (Shape::Single, WireProfile::Novu) => {
                serde_json::to_writer(&mut bytes, &Envelope { data: &self.body })
            }
            _ => serde_json::to_writer(&mut bytes, &self.body),
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
