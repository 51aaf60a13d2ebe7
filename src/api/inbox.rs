//! `/v1/inbox/*`: the subscriber-facing API of Novu's Inbox (`@novu/js`, `<Inbox />`), for browsers. A
//! session (`POST /v1/inbox/session`, no credential but the environment's public identifier and, where the
//! environment demands it, an HMAC of the subscriber's id) hands out a token; every other route takes it as
//! `Authorization: Bearer <token>` ([`require_session`]) and acts for that subscriber only. Every answer is
//! `{"data": …}` whatever the wire profile, except the list and the counts, which `@novu/js` reads whole.

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::error::{ApiError, ApiResult};
use super::extract::AppJson;
use super::ratelimit::{self, Verdict};
use super::wire::Reply;
use super::AppState;
use crate::domain::subscriber::ProfileInput;
use crate::error::{Error, Validation};
use crate::service::inbox_session::{self as session, InboxSubscriber, SessionRequest};

mod notifications;
mod preferences;
mod subscriptions;

pub use notifications::*;
pub use preferences::*;
pub use subscriptions::*;

/// The browser origins allowed to call the Inbox (`TIDINGS_INBOX_ORIGINS`, exact, such as
/// `https://app.example.com`); empty: any.
#[derive(Clone, Default)]
pub struct Origins(std::sync::Arc<[axum::http::HeaderValue]>);

impl Origins {
    pub fn new(origins: &[String]) -> Self {
        Self(
            origins
                .iter()
                .filter_map(|o| axum::http::HeaderValue::from_str(o).ok())
                .collect(),
        )
    }

    /// Whether a page of `origin` may call the Inbox.
    pub fn allow(&self, origin: &axum::http::HeaderValue) -> bool {
        self.0.is_empty() || self.0.contains(origin)
    }
}

/// The CORS policy: the Inbox's routes and its socket (paths under `/v1/inbox/` and `/socket.io/`) answer
/// `origins`; other routes, meant for servers holding an API key, answer no browser. Preflight requests are
/// answered for the methods and headers `@novu/js` sends. No cookies are involved (the token travels in a
/// header), so credentials are not allowed. (A WebSocket is not subject to CORS: the socket refuses the
/// other origins itself, `socket::refuse_without_session`.)
pub fn cors(origins: &Origins) -> tower_http::cors::CorsLayer {
    use axum::http::{header, HeaderName, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let origins = origins.clone();
    let allow = AllowOrigin::predicate(move |origin, parts| {
        let path = parts.uri.path();
        (path.starts_with("/v1/inbox/") || path.starts_with("/socket.io/")) && origins.allow(origin)
    });
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PATCH,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("novu-api-version"),
            HeaderName::from_static("novu-client-version"),
            HeaderName::from_static("novu-application-identifier"),
        ])
        .max_age(std::time::Duration::from_secs(600))
}

/// The Inbox's limit per client address, on every Inbox route (the session's too), before anything of the
/// request is read.
pub async fn limit_address(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let from = state
        .limiter
        .client_address(req.headers(), req.extensions());
    match state.limiter.admit_address(from) {
        Ok(()) => next.run(req).await,
        Err(refused) => *refused,
    }
}

/// Checks the bearer token of every Inbox route but the session, rate-limits it (its subscriber, its
/// environment's `inbox` category) and hands the route the [`InboxSubscriber`].
pub async fn require_session(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let token = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return ApiError(Error::Unauthorized(
            "Missing or malformed bearer token".into(),
        ))
        .into_response();
    };
    let who = match session::authenticate(&state.store, token).await {
        Ok(Some(who)) => who,
        Ok(None) => {
            return ApiError(Error::Unauthorized(
                "The session is invalid or has expired".into(),
            ))
            .into_response()
        }
        Err(e) => return ApiError(e).into_response(),
    };
    let headers = match state
        .limiter
        .admit_inbox(who.tenant.environment_id.as_str(), &who.subscriber_id)
        .await
    {
        Verdict::Admitted(headers) => headers,
        Verdict::Refused(resp) => return resp,
    };
    req.extensions_mut().insert(who);
    let mut resp = next.run(req).await;
    ratelimit::stamp(&mut resp, headers);
    resp
}

/// The session's subscriber, which [`require_session`] put into the request.
impl<S: Send + Sync> FromRequestParts<S> for InboxSubscriber {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .remove::<InboxSubscriber>()
            .ok_or_else(|| ApiError(Error::Unauthorized("Unauthorized".into())))
    }
}

// ---------------------------------------------------------------------------------------------------------
// Session

/// Body of `POST /v1/inbox/session`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionIn {
    /// The environment's public identifier.
    pub application_identifier: Option<String>,
    /// Hex HMAC-SHA256 of the subscriberId keyed with the environment's secret API key.
    pub subscriber_hash: Option<String>,
    /// The subscriber: its id, or `{subscriberId, firstName?, lastName?, email?, phone?, avatar?, locale?,
    /// timezone?, data?}`.
    #[schema(value_type = Option<Object>)]
    pub subscriber: Option<Value>,
    /// The subscriber's id, as older clients send it.
    pub subscriber_id: Option<String>,
    /// The session's context (at most five entries of type → id or `{id, data?}`): the session sees only the
    /// notifications triggered with exactly this context.
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    /// Hex HMAC-SHA256 of the context's canonical JSON keyed with the environment's secret API key; required
    /// with a context where the subscriber's HMAC is.
    pub context_hash: Option<String>,
}

/// Unread notifications that are not snoozed, by severity.
#[derive(Debug, Serialize, ToSchema)]
pub struct SeverityCountsOut {
    pub high: i64,
    pub medium: i64,
    pub low: i64,
    pub none: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UnreadCountOut {
    pub total: i64,
    pub severity: SeverityCountsOut,
}

impl From<session::UnreadCounts> for UnreadCountOut {
    fn from(c: session::UnreadCounts) -> Self {
        let [high, medium, low, none] = c.severity;
        Self {
            total: c.total,
            severity: SeverityCountsOut {
                high,
                medium,
                low,
                none,
            },
        }
    }
}

/// An open session.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionOut {
    /// The bearer token of the other Inbox routes (15 days).
    pub token: String,
    pub total_unread_count: i64,
    pub unread_count: UnreadCountOut,
    pub remove_novu_branding: bool,
    pub is_development_mode: bool,
    pub max_snooze_duration_hours: i64,
    pub application_identifier: String,
    /// The session's context keys (`type:id`), when it has a context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_keys: Option<Vec<String>>,
}

/// Opens a subscriber's session: creates the subscriber when it does not exist, checks its HMAC when the
/// environment requires one, and answers a token for the other Inbox routes. The body must be sent as
/// `application/json` (as `@novu/js` sends it): a browser posts another type from any page without asking
/// (no CORS preflight), so anything else is a 415.
#[utoipa::path(post, path = "/v1/inbox/session", tag = "Inbox", security(()), request_body = SessionIn,
    responses((status = 201, description = "`{data: session}`", body = SessionOut),
        (status = 400, description = "An unknown application identifier, or a missing or wrong HMAC"),
        (status = 404, description = "The environment's in-app integrations are all inactive"),
        (status = 415, description = "The body is not sent as `application/json`"),
        (status = 422, description = "Invalid body"),
        (status = 429, description = "Rate limit exceeded; `Retry-After` says when to try again")))]
pub async fn open_session(State(state): State<AppState>, req: Request) -> ApiResult<Response> {
    if !is_json(req.headers()) {
        return Ok(super::error::error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "The session's body must be sent with Content-Type: application/json",
            Map::new(),
        ));
    }
    let AppJson(body) = AppJson::<SessionIn>::from_request(req, &state).await?;
    let mut v = Validation::new();
    let (subscriber_id, profile) = match body.subscriber {
        Some(Value::String(id)) => (id, ProfileInput::default()),
        Some(m @ Value::Object(_)) => {
            let profile = profile_of(&mut v, &m);
            (profile.subscriber_id.clone().unwrap_or_default(), profile)
        }
        None | Some(Value::Null) => (
            body.subscriber_id.unwrap_or_default(),
            ProfileInput::default(),
        ),
        Some(other) => {
            v.add(
                "subscriber",
                "subscriber must be a subscriberId or an object with one",
                other,
            );
            (String::new(), ProfileInput::default())
        }
    };
    let context = match body.context {
        None | Some(Value::Null) => None,
        Some(raw) => Some((
            crate::domain::context::parse_context(&mut v, "context", &raw),
            raw,
        )),
    };
    if subscriber_id.trim().is_empty() && v.is_empty() {
        v.add(
            "subscriber.subscriberId",
            "subscriberId is required",
            Value::Null,
        );
    }
    v.finish()?;
    let env = session::environment(
        &state.store,
        body.application_identifier.as_deref().unwrap_or_default(),
    )
    .await?;
    // Sessions are public: limited as the Inbox's routes are, never on an API key's budget.
    let headers = match state
        .limiter
        .admit_inbox(env.id.as_str(), &subscriber_id)
        .await
    {
        Verdict::Admitted(headers) => headers,
        Verdict::Refused(resp) => return Ok(resp),
    };
    let request = SessionRequest {
        subscriber_id,
        subscriber_hash: body.subscriber_hash,
        profile,
        context,
        context_hash: body.context_hash,
    };
    let opened = session::open(&state.store, env, request).await?;
    let mut resp = Reply::enveloped(
        StatusCode::CREATED,
        SessionOut {
            token: opened.token,
            total_unread_count: opened.unread.total,
            unread_count: opened.unread.into(),
            remove_novu_branding: true,
            is_development_mode: opened.development,
            max_snooze_duration_hours: crate::service::inbox_notifications::MAX_SNOOZE_HOURS,
            application_identifier: opened.application_identifier,
            context_keys: (!opened.context_keys.is_empty()).then_some(opened.context_keys),
        },
    )
    .into_response();
    ratelimit::stamp(&mut resp, headers);
    Ok(resp)
}

/// Whether the request's `Content-Type` is `application/json` (parameters such as `charset` allowed).
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// A session's subscriber object, read as the API reads a subscriber's body; each problem is added to `v`
/// under `subscriber.<field>`.
pub(crate) fn profile_of(v: &mut Validation, m: &Value) -> ProfileInput {
    let bytes = serde_json::to_vec(m).unwrap_or_default();
    match crate::api::extract::parse_json::<ProfileInput>(&bytes) {
        Ok(profile) => profile,
        Err(Error::Validation(problems)) => {
            for p in problems.0 {
                for message in p.messages {
                    v.add(&format!("subscriber.{}", p.field), message, p.value.clone());
                }
            }
            ProfileInput::default()
        }
        Err(_) => ProfileInput::default(),
    }
}
