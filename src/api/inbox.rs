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
use super::extract::{AppJson, AppPath, QueryMap};
use super::ratelimit::{self, Verdict};
use super::v2::preferences::{ChannelsOut, InboxPreferenceOut, InboxWorkflowOut};
use super::wire::{no_content, IsoTime, Reply};
use super::AppState;
use crate::domain::job::Message;
use crate::domain::preference::ChannelChoices;
use crate::domain::subscriber::ProfileInput;
use crate::domain::{Channel, MessageId};
use crate::error::{Error, Validation};
use crate::service::inbox_notifications::{self as notifications, Bulk, BULK_IDS, COUNT_FILTERS};
use crate::service::inbox_session::{self as session, InboxSubscriber, SessionRequest};
use crate::service::inbox_topics as topics;
use crate::service::preferences::{
    self, Change, Changed, Criticality, GlobalPreference, BULK_ITEMS,
};
use crate::store::messages::MarkAs;

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
            max_snooze_duration_hours: notifications::MAX_SNOOZE_HOURS,
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

// ---------------------------------------------------------------------------------------------------------
// Notifications

/// A button of a notification.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionOut {
    pub label: String,
    pub is_completed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<RedirectOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RedirectOut {
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl RedirectOut {
    /// `{url, target?}` from an object holding them; `None` without a string `url`.
    fn of(v: &Value) -> Option<Self> {
        Some(Self {
            url: v.get("url")?.as_str()?.to_owned(),
            target: v.get("target").and_then(Value::as_str).map(str::to_owned),
        })
    }
}

/// The subscriber a notification is for.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboxSubscriberOut {
    pub id: String,
    pub subscriber_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
}

/// A notification as the Inbox shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboxNotificationOut {
    pub id: String,
    pub transaction_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub body: String,
    pub to: InboxSubscriberOut,
    pub is_read: bool,
    pub is_seen: bool,
    pub is_archived: bool,
    pub is_snoozed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snoozed_until: Option<IsoTime>,
    pub delivered_at: Vec<IsoTime>,
    pub created_at: IsoTime,
    pub read_at: Option<IsoTime>,
    pub first_seen_at: Option<IsoTime>,
    pub archived_at: Option<IsoTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_action: Option<ActionOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secondary_action: Option<ActionOut>,
    pub channel_type: &'static str,
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<RedirectOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<InboxWorkflowOut>,
    pub severity: String,
}

impl InboxNotificationOut {
    /// The Inbox's view of `m`, for `to`, with its workflow when it still exists.
    fn of(
        m: Message,
        to: InboxSubscriberOut,
        workflow: Option<&crate::domain::workflow::Workflow>,
    ) -> Self {
        let now = crate::domain::Timestamp::now();
        let snoozed_until = m.snoozed_until.filter(|t| t.0 > now.0);
        let action = m.cta.get("action");
        let done_type = action
            .filter(|a| a.get("status").and_then(Value::as_str) == Some("done"))
            .and_then(|a| a.get("result"))
            .and_then(|r| r.get("type"))
            .and_then(Value::as_str);
        let button = |kind: &str| {
            let b = action?
                .get("buttons")?
                .as_array()?
                .iter()
                .find(|b| b.get("type").and_then(Value::as_str) == Some(kind))?;
            Some(ActionOut {
                label: b.get("content")?.as_str()?.to_owned(),
                is_completed: done_type == Some(kind),
                redirect: RedirectOut::of(b),
            })
        };
        Self {
            primary_action: button("primary"),
            secondary_action: button("secondary"),
            redirect: m.cta.get("data").and_then(RedirectOut::of),
            id: m.id.into(),
            transaction_id: m.transaction_id,
            subject: m.subject,
            body: m.content,
            to,
            is_read: m.read,
            is_seen: m.seen,
            is_archived: m.archived,
            is_snoozed: snoozed_until.is_some(),
            snoozed_until: snoozed_until.map(IsoTime),
            delivered_at: vec![IsoTime(m.created_at)],
            created_at: IsoTime(m.created_at),
            read_at: m.last_read_date.filter(|_| m.read).map(IsoTime),
            first_seen_at: m.first_seen_date.map(IsoTime),
            archived_at: m.archived_at.map(IsoTime),
            avatar: m.avatar,
            channel_type: "in_app",
            tags: m.tags,
            data: m.data,
            workflow: workflow.map(InboxWorkflowOut::from),
            severity: m.severity,
        }
    }
}

/// The Inbox's view of each of `who`'s messages, with `who`'s profile and the message's workflow (read
/// through the workflow cache).
async fn notifications_out(
    state: &AppState,
    who: &InboxSubscriber,
    messages: Vec<Message>,
) -> ApiResult<Vec<InboxNotificationOut>> {
    let env = &who.tenant.environment_id;
    let profile = state.store.get_subscriber(env, &who.subscriber_id).await?;
    let to = InboxSubscriberOut {
        id: who.subscriber_ref.as_str().to_owned(),
        subscriber_id: who.subscriber_id.clone(),
        first_name: profile.as_ref().and_then(|p| p.profile.first_name.clone()),
        last_name: profile.as_ref().and_then(|p| p.profile.last_name.clone()),
        avatar: profile.as_ref().and_then(|p| p.profile.avatar.clone()),
    };
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let workflow = state
            .store
            .get_workflow_cached(env, m.workflow_ref.as_str())
            .await?;
        out.push(InboxNotificationOut::of(m, to.clone(), workflow.as_deref()));
    }
    Ok(out)
}

async fn one_out(state: &AppState, who: &InboxSubscriber, m: Message) -> ApiResult<Response> {
    let out = notifications_out(state, who, vec![m]).await?.pop();
    Ok(Reply::enveloped(StatusCode::OK, out).into_response())
}

/// A page of notifications.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationsPageOut {
    pub data: Vec<InboxNotificationOut>,
    pub has_more: bool,
    /// The filter, as understood.
    #[schema(value_type = Object)]
    pub filter: Value,
}

/// The Inbox filter of a query string: `read`, `seen`, `archived`, `snoozed` (`true`/`false`), `tags[]=a`
/// (one of them) or `tags[0][]=a&tags[1][]=b` (one of each group), `severity` / `severity[]`, `data` (JSON
/// object), `createdGte` / `createdLte` (ms since 1970), as the JSON object [`notifications::parse_filter`]
/// reads.
fn query_filter(v: &mut Validation, q: &QueryMap) -> Map<String, Value> {
    let mut m = Map::new();
    for key in ["read", "seen", "archived", "snoozed"] {
        if let Some(b) = q.bool(v, key) {
            m.insert(key.into(), Value::Bool(b));
        }
    }
    let mut groups: std::collections::BTreeMap<u32, Vec<Value>> = Default::default();
    let mut flat = Vec::new();
    for (key, value) in q.pairs() {
        if let Some(rest) = key.strip_prefix("tags[") {
            match rest
                .split_once("][]")
                .and_then(|(n, tail)| tail.is_empty().then_some(n))
            {
                Some(n) => match n.parse::<u32>() {
                    Ok(n) if n < 30 => groups.entry(n).or_default().push(Value::from(value)),
                    _ => v.add(key, "a tags group is numbered 0 to 29", value),
                },
                None if rest == "]" => flat.push(Value::from(value)),
                None => v.add(key, "tags must be given as tags[]=… or tags[0][]=…", value),
            }
        } else if key == "tags" {
            flat.push(Value::from(value));
        }
    }
    if !groups.is_empty() {
        let and: Vec<Value> = groups
            .into_values()
            .map(|g| serde_json::json!({ "or": g }))
            .collect();
        m.insert("tags".into(), serde_json::json!({ "and": and }));
    } else if !flat.is_empty() {
        m.insert("tags".into(), Value::Array(flat));
    }
    let severity = q.list(v, "severity");
    if !severity.is_empty() {
        m.insert("severity".into(), Value::from(severity));
    }
    if let Some(data) = q.string("data") {
        m.insert("data".into(), Value::String(data));
    }
    for key in ["createdGte", "createdLte"] {
        if let Some(n) = q.int(v, key, 0, 1 << 50) {
            m.insert(key.into(), Value::from(n));
        }
    }
    m
}

/// The subscriber's notifications, newest first, `limit` (1–100, default 10) at a time: after the
/// notification `after` (the last one shown), else after the first `offset`.
#[utoipa::path(get, path = "/v1/inbox/notifications", tag = "Inbox", security(("InboxSession" = [])),
    params(("limit" = Option<i64>, Query), ("after" = Option<String>, Query), ("offset" = Option<i64>, Query),
        ("read" = Option<bool>, Query), ("seen" = Option<bool>, Query), ("archived" = Option<bool>, Query),
        ("snoozed" = Option<bool>, Query), ("tags[]" = Option<Vec<String>>, Query), ("severity[]" = Option<Vec<String>>, Query),
        ("data" = Option<String>, Query, description = "A JSON object of conditions on the notification's data"),
        ("createdGte" = Option<i64>, Query), ("createdLte" = Option<i64>, Query)),
    responses((status = 200, body = NotificationsPageOut), (status = 401, description = "No valid session"),
        (status = 422, description = "Invalid query")))]
pub async fn list_notifications(
    State(state): State<AppState>,
    who: InboxSubscriber,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let limit = q.int(&mut v, "limit", 1, 100).unwrap_or(10);
    let offset = q.int(&mut v, "offset", 0, 1_000_000).unwrap_or(0);
    let after = q.string("after").map(|a| MessageId::from(a.as_str()));
    let raw = query_filter(&mut v, &q);
    let f = notifications::parse_filter(&mut v, &who, &raw);
    v.finish()?;
    let (messages, has_more) =
        notifications::list(&state.store, &who, f, after, offset, limit).await?;
    let data = notifications_out(&state, &who, messages).await?;
    Ok(Reply::page(NotificationsPageOut {
        data,
        has_more,
        filter: Value::Object(raw),
    })
    .into_response())
}

/// One count and the filter it counted.
#[derive(Debug, Serialize, ToSchema)]
pub struct CountOut {
    pub count: i64,
    #[schema(value_type = Object)]
    pub filter: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CountsOut {
    pub data: Vec<CountOut>,
}

/// How many notifications each filter selects (up to 100 each), in order, each with its filter as sent.
#[utoipa::path(get, path = "/v1/inbox/notifications/count", tag = "Inbox", security(("InboxSession" = [])),
    params(("filters" = String, Query, description = "A JSON array of up to 30 filters")),
    responses((status = 200, body = CountsOut), (status = 401, description = "No valid session"),
        (status = 422, description = "Invalid filters")))]
pub async fn count_notifications(
    State(state): State<AppState>,
    who: InboxSubscriber,
    q: QueryMap,
) -> ApiResult<Response> {
    let text = q.string("filters").unwrap_or_else(|| "[{}]".into());
    let Ok(Value::Array(raw)) = serde_json::from_str::<Value>(&text) else {
        return Err(Error::invalid(
            "filters",
            "filters must be a JSON array of filter objects",
            text,
        )
        .into());
    };
    let mut v = Validation::new();
    crate::service::over_cap(&mut v, "filters", raw.len(), COUNT_FILTERS);
    let mut filters = Vec::with_capacity(raw.len());
    for item in &raw {
        match item {
            Value::Object(m) => filters.push(notifications::parse_filter(&mut v, &who, m)),
            other => v.add("filters", "each filter must be an object", other.clone()),
        }
    }
    v.finish()?;
    let counts = notifications::count(&state.store, &who, &filters).await?;
    let data = counts
        .into_iter()
        .zip(raw)
        .map(|(count, filter)| CountOut { count, filter })
        .collect();
    Ok(Reply::page(CountsOut { data }).into_response())
}

macro_rules! mark_route {
    ($name:ident, $path:literal, $mark:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(patch, path = $path, tag = "Inbox", security(("InboxSession" = [])),
            params(("id" = String, Path, description = "The notification's id")),
            responses((status = 200, description = "`{data: notification}`", body = InboxNotificationOut),
                (status = 401, description = "No valid session"), (status = 404, description = "Not one of the subscriber's notifications")))]
        pub async fn $name(
            State(state): State<AppState>,
            who: InboxSubscriber,
            AppPath(id): AppPath<String>,
        ) -> ApiResult<Response> {
            let m = notifications::mark(&state.store, &who, &id, $mark).await?;
            one_out(&state, &who, m).await
        }
    };
}

mark_route!(
    read,
    "/v1/inbox/notifications/{id}/read",
    MarkAs::Read,
    "Marks a notification read (and seen)."
);
mark_route!(
    unread,
    "/v1/inbox/notifications/{id}/unread",
    MarkAs::Unread,
    "Marks a notification unread (and not archived)."
);
mark_route!(
    archive,
    "/v1/inbox/notifications/{id}/archive",
    MarkAs::Archive,
    "Archives a notification (and marks it read)."
);
mark_route!(
    unarchive,
    "/v1/inbox/notifications/{id}/unarchive",
    MarkAs::Unarchive,
    "Takes a notification out of the archive."
);
mark_route!(
    unsnooze,
    "/v1/inbox/notifications/{id}/unsnooze",
    MarkAs::Unsnooze,
    "Ends a notification's snooze."
);

/// Body of the snooze route.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnoozeIn {
    /// Until when (ISO 8601): at least a minute ahead, at most 30 days.
    #[schema(value_type = String)]
    pub snooze_until: Option<Value>,
}

/// Hides a notification until `snoozeUntil`.
#[utoipa::path(patch, path = "/v1/inbox/notifications/{id}/snooze", tag = "Inbox", security(("InboxSession" = [])),
    params(("id" = String, Path)), request_body = SnoozeIn,
    responses((status = 200, body = InboxNotificationOut), (status = 400, description = "Too soon or too far"),
        (status = 401, description = "No valid session"), (status = 404, description = "Not one of the subscriber's notifications"),
        (status = 422, description = "Invalid body")))]
pub async fn snooze(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath(id): AppPath<String>,
    AppJson(body): AppJson<SnoozeIn>,
) -> ApiResult<Response> {
    let m = notifications::snooze(&state.store, &who, &id, body.snooze_until.as_ref()).await?;
    one_out(&state, &who, m).await
}

/// Body of the complete and revert routes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionIn {
    /// `primary` or `secondary`.
    #[schema(value_type = String)]
    pub action_type: Option<Value>,
}

/// Marks a notification's primary or secondary action done.
#[utoipa::path(patch, path = "/v1/inbox/notifications/{id}/complete", tag = "Inbox", security(("InboxSession" = [])),
    params(("id" = String, Path)), request_body = ActionIn,
    responses((status = 200, body = InboxNotificationOut), (status = 401, description = "No valid session"),
        (status = 404, description = "Not one of the subscriber's notifications"), (status = 422, description = "Invalid body")))]
pub async fn complete(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath(id): AppPath<String>,
    AppJson(body): AppJson<ActionIn>,
) -> ApiResult<Response> {
    let m = notifications::action(&state.store, &who, &id, body.action_type.as_ref(), true).await?;
    one_out(&state, &who, m).await
}

/// Marks a notification's primary or secondary action pending again.
#[utoipa::path(patch, path = "/v1/inbox/notifications/{id}/revert", tag = "Inbox", security(("InboxSession" = [])),
    params(("id" = String, Path)), request_body = ActionIn,
    responses((status = 200, body = InboxNotificationOut), (status = 401, description = "No valid session"),
        (status = 404, description = "Not one of the subscriber's notifications"), (status = 422, description = "Invalid body")))]
pub async fn revert(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath(id): AppPath<String>,
    AppJson(body): AppJson<ActionIn>,
) -> ApiResult<Response> {
    let m =
        notifications::action(&state.store, &who, &id, body.action_type.as_ref(), false).await?;
    one_out(&state, &who, m).await
}

/// Deletes a notification.
#[utoipa::path(delete, path = "/v1/inbox/notifications/{id}/delete", tag = "Inbox", security(("InboxSession" = [])),
    params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, description = "No valid session"),
        (status = 404, description = "Not one of the subscriber's notifications")))]
pub async fn delete(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath(id): AppPath<String>,
) -> ApiResult<Response> {
    notifications::delete(&state.store, &who, &id).await?;
    Ok(no_content())
}

/// Body of the bulk routes.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkIn {
    /// Only notifications with these tags: `["a", "b"]` (one of them), `{or: [...]}` or `{and: [{or: [...]}]}`.
    #[schema(value_type = Option<Object>)]
    pub tags: Option<Value>,
    /// Only notifications whose data matches this JSON object (sent as its JSON text).
    pub data: Option<String>,
    /// `seen` only: these notifications (up to 100).
    pub notification_ids: Option<Vec<String>>,
}

/// Applies `op` to the subscriber's notifications the body selects.
async fn bulk(
    state: AppState,
    who: InboxSubscriber,
    body: BulkIn,
    op: Bulk,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let mut raw = Map::new();
    if let Some(tags) = body.tags {
        raw.insert("tags".into(), tags);
    }
    if let Some(data) = body.data {
        raw.insert("data".into(), Value::String(data));
    }
    let mut f = notifications::parse_filter(&mut v, &who, &raw);
    if let Some(ids) = body.notification_ids {
        if !crate::service::over_cap(&mut v, "notificationIds", ids.len(), BULK_IDS) {
            f.ids = ids.iter().map(|i| MessageId::from(i.as_str())).collect();
        }
        if ids.is_empty() {
            // No ids: nothing to mark (not every notification).
            return Ok(no_content());
        }
    }
    v.finish()?;
    notifications::bulk(&state.store, &who, f, op).await?;
    Ok(no_content())
}

macro_rules! bulk_route {
    ($name:ident, $path:literal, $op:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(post, path = $path, tag = "Inbox", security(("InboxSession" = [])), request_body = BulkIn,
            responses((status = 204, description = "Done"), (status = 401, description = "No valid session"),
                (status = 422, description = "Invalid body")))]
        pub async fn $name(
            State(state): State<AppState>,
            who: InboxSubscriber,
            AppJson(body): AppJson<BulkIn>,
        ) -> ApiResult<Response> {
            bulk(state, who, body, $op).await
        }
    };
}

bulk_route!(
    seen_many,
    "/v1/inbox/notifications/seen",
    Bulk::Seen,
    "Marks notifications seen: those named, else all the filter selects."
);
bulk_route!(
    read_all,
    "/v1/inbox/notifications/read",
    Bulk::Read,
    "Marks every notification the filter selects read."
);
bulk_route!(
    archive_all,
    "/v1/inbox/notifications/archive",
    Bulk::Archive,
    "Archives every notification the filter selects."
);
bulk_route!(
    archive_read,
    "/v1/inbox/notifications/read-archive",
    Bulk::ArchiveRead,
    "Archives every read notification the filter selects."
);
bulk_route!(
    delete_all,
    "/v1/inbox/notifications/delete",
    Bulk::Delete,
    "Deletes every notification the filter selects."
);

// ---------------------------------------------------------------------------------------------------------
// Preferences

fn global_out(g: &GlobalPreference) -> InboxPreferenceOut {
    InboxPreferenceOut {
        level: "global",
        enabled: g.enabled,
        channels: ChannelsOut::of(Channel::ALL.into_iter().zip(g.channels)),
        workflow: None,
        overrides: Vec::new(),
    }
}

/// The subscriber's preferences: the global one first, then one per workflow with a channel step, oldest
/// first; `criticality` (`nonCritical` by default, `critical`, `all`), `tags[]` (a workflow with one of them)
/// and `severity[]` narrow the workflows.
#[utoipa::path(get, path = "/v1/inbox/preferences", tag = "Inbox", security(("InboxSession" = [])),
    params(("criticality" = Option<String>, Query), ("tags[]" = Option<Vec<String>>, Query), ("severity[]" = Option<Vec<String>>, Query)),
    responses((status = 200, description = "`{data: [preference]}`", body = Vec<InboxPreferenceOut>),
        (status = 401, description = "No valid session"), (status = 422, description = "Invalid query")))]
pub async fn list_preferences(
    State(state): State<AppState>,
    who: InboxSubscriber,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let criticality = q
        .one_of(&mut v, "criticality", &["nonCritical", "critical", "all"])
        .and_then(|c| Criticality::parse(&c))
        .unwrap_or_default();
    let tags = q.list(&mut v, "tags");
    let severity = q.list(&mut v, "severity");
    v.finish()?;
    let found =
        preferences::get(&state.store, &who.tenant, &who.subscriber_id, criticality).await?;
    let mut out = vec![global_out(&found.global)];
    out.extend(
        found
            .workflows
            .iter()
            .filter(|p| tags.is_empty() || p.workflow.tags.iter().any(|t| tags.contains(t)))
            .filter(|p| {
                severity.is_empty() || severity.iter().any(|s| s == p.workflow.severity.as_str())
            })
            .map(InboxPreferenceOut::from),
    );
    Ok(Reply::enveloped(StatusCode::OK, out).into_response())
}

/// The subscriber's global preference.
#[utoipa::path(get, path = "/v1/inbox/preferences/global", tag = "Inbox", security(("InboxSession" = [])),
    responses((status = 200, body = InboxPreferenceOut), (status = 401, description = "No valid session")))]
pub async fn global_preference(
    State(state): State<AppState>,
    who: InboxSubscriber,
) -> ApiResult<Response> {
    let g = preferences::global(&state.store, &who.tenant, &who.subscriber_id).await?;
    Ok(Reply::enveloped(StatusCode::OK, global_out(&g)).into_response())
}

/// Body of the preference changes: channels as flat keys, and `enabled`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct PreferenceIn {
    pub email: Option<bool>,
    pub sms: Option<bool>,
    pub in_app: Option<bool>,
    pub chat: Option<bool>,
    pub push: Option<bool>,
    pub enabled: Option<bool>,
    /// Delivery schedules are not supported: a schedule is refused.
    #[schema(value_type = Option<Object>)]
    pub schedule: Option<Value>,
    /// Conditions are not supported: a condition is refused.
    #[schema(value_type = Option<Object>)]
    pub condition: Option<Value>,
}

impl PreferenceIn {
    fn change(self, v: &mut Validation) -> Change {
        for (field, value) in [("schedule", &self.schedule), ("condition", &self.condition)] {
            if value.as_ref().is_some_and(|s| !s.is_null()) {
                v.add(
                    field,
                    format!("{field} is not supported by Tidings"),
                    value.clone().unwrap_or_default(),
                );
            }
        }
        Change {
            enabled: self.enabled,
            channels: ChannelChoices {
                in_app: self.in_app,
                email: self.email,
                sms: self.sms,
                chat: self.chat,
                push: self.push,
            },
        }
    }
}

/// Changes the subscriber's global preference; answers it.
#[utoipa::path(patch, path = "/v1/inbox/preferences", tag = "Inbox", security(("InboxSession" = [])),
    request_body = PreferenceIn,
    responses((status = 200, body = InboxPreferenceOut), (status = 401, description = "No valid session"),
        (status = 422, description = "Invalid body")))]
pub async fn patch_global_preference(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppJson(body): AppJson<PreferenceIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let change = body.change(&mut v);
    v.finish()?;
    let changed =
        preferences::change(&state.store, &who.tenant, &who.subscriber_id, None, change).await?;
    Ok(Reply::enveloped(StatusCode::OK, changed_out(&changed)).into_response())
}

fn changed_out(c: &Changed) -> InboxPreferenceOut {
    match c {
        Changed::Global(g) => global_out(g),
        Changed::Workflow(w) => InboxPreferenceOut::from(w),
    }
}

/// Changes the subscriber's preference for one workflow (by `_id` or identifier); answers it.
#[utoipa::path(patch, path = "/v1/inbox/preferences/{workflowId}", tag = "Inbox", security(("InboxSession" = [])),
    params(("workflowId" = String, Path)), request_body = PreferenceIn,
    responses((status = 200, body = InboxPreferenceOut), (status = 400, description = "A critical or read-only workflow"),
        (status = 401, description = "No valid session"), (status = 404, description = "Unknown workflow"),
        (status = 422, description = "Invalid body")))]
pub async fn patch_workflow_preference(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath(workflow_id): AppPath<String>,
    AppJson(body): AppJson<PreferenceIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let change = body.change(&mut v);
    v.finish()?;
    let changed = preferences::change(
        &state.store,
        &who.tenant,
        &who.subscriber_id,
        Some(&workflow_id),
        change,
    )
    .await?;
    Ok(Reply::enveloped(StatusCode::OK, changed_out(&changed)).into_response())
}

/// One item of a bulk preference change.
#[derive(Debug, Deserialize, ToSchema)]
pub struct BulkPreferenceItemIn {
    #[serde(rename = "workflowId")]
    pub workflow_id: String,
    pub email: Option<bool>,
    pub sms: Option<bool>,
    pub in_app: Option<bool>,
    pub chat: Option<bool>,
    pub push: Option<bool>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct BulkPreferencesIn {
    pub preferences: Vec<BulkPreferenceItemIn>,
}

/// Changes the subscriber's preferences for several workflows at once (all or nothing).
#[utoipa::path(patch, path = "/v1/inbox/preferences/bulk", tag = "Inbox", security(("InboxSession" = [])),
    request_body = BulkPreferencesIn,
    responses((status = 200, body = Vec<InboxPreferenceOut>), (status = 400, description = "A critical or read-only workflow"),
        (status = 401, description = "No valid session"), (status = 404, description = "Unknown workflow"),
        (status = 422, description = "Invalid body")))]
pub async fn bulk_preferences(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppJson(body): AppJson<BulkPreferencesIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    if body.preferences.is_empty() {
        v.add(
            "preferences",
            "preferences must hold at least one item",
            Value::Array(vec![]),
        );
    }
    crate::service::over_cap(&mut v, "preferences", body.preferences.len(), BULK_ITEMS);
    v.finish()?;
    let items = body
        .preferences
        .into_iter()
        .map(|p| {
            let channels = ChannelChoices {
                in_app: p.in_app,
                email: p.email,
                sms: p.sms,
                chat: p.chat,
                push: p.push,
            };
            (p.workflow_id, channels)
        })
        .collect();
    let changed =
        preferences::change_many(&state.store, &who.tenant, &who.subscriber_id, items).await?;
    let out: Vec<InboxPreferenceOut> = changed.iter().map(Into::into).collect();
    Ok(Reply::enveloped(StatusCode::OK, out).into_response())
}

// ---------------------------------------------------------------------------------------------------------
// Topic subscriptions

/// One of the subscriber's topic subscriptions.
#[derive(Debug, Serialize, ToSchema)]
pub struct InboxSubscriptionOut {
    /// The subscription's `_id`.
    pub id: String,
    pub identifier: String,
}

impl From<crate::domain::topic::TopicSubscription> for InboxSubscriptionOut {
    fn from(s: crate::domain::topic::TopicSubscription) -> Self {
        Self {
            id: s.id.as_str().to_owned(),
            identifier: s.identifier,
        }
    }
}

/// The subscriber's subscriptions to a topic (none when the topic does not exist).
#[utoipa::path(get, path = "/v1/inbox/topics/{topicKey}/subscriptions", tag = "Inbox", security(("InboxSession" = [])),
    params(("topicKey" = String, Path)),
    responses((status = 200, description = "`{data: [subscription]}`", body = Vec<InboxSubscriptionOut>),
        (status = 401, description = "No valid session")))]
pub async fn list_subscriptions(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath(key): AppPath<String>,
) -> ApiResult<Response> {
    let found = topics::list(&state.store, &who, &key).await?;
    let out: Vec<InboxSubscriptionOut> = found.into_iter().map(Into::into).collect();
    Ok(Reply::enveloped(StatusCode::OK, out).into_response())
}

/// The subscriber's subscription to a topic by its identifier; 204 without a body when it has none by that
/// identifier (as Novu answers; `@novu/js` reads it as "not subscribed").
#[utoipa::path(get, path = "/v1/inbox/topics/{topicKey}/subscriptions/{identifier}", tag = "Inbox",
    security(("InboxSession" = [])), params(("topicKey" = String, Path), ("identifier" = String, Path)),
    responses((status = 200, description = "`{data: subscription}`", body = InboxSubscriptionOut),
        (status = 204, description = "The subscriber has no subscription by this identifier to this topic"),
        (status = 401, description = "No valid session")))]
pub async fn get_subscription(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath((key, identifier)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    Ok(
        match topics::get(&state.store, &who, &key, &identifier).await? {
            Some(found) => {
                Reply::enveloped(StatusCode::OK, InboxSubscriptionOut::from(found)).into_response()
            }
            None => no_content(),
        },
    )
}

/// Body of a subscription's creation or update.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionIn {
    /// Assigned by the server (`tk_<topicKey>:si_<subscriberId>`): empty, or that one.
    pub identifier: Option<String>,
    /// Refused: the Inbox never creates or names a topic (the operator does, with the API key).
    #[schema(value_type = Option<Object>)]
    pub topic: Option<Value>,
    /// Not supported (a subscription has no name of its own): refused.
    pub name: Option<String>,
    /// Not supported (preferences are per subscriber and workflow): refused unless empty.
    #[schema(value_type = Option<Vec<Object>>)]
    pub preferences: Option<Vec<Value>>,
}

impl SubscriptionIn {
    /// Refuses what a subscription cannot hold here, rather than dropping it.
    fn refuse_unsupported(&self, v: &mut Validation) {
        if let Some(name) = &self.name {
            v.add(
                "name",
                "a subscription's name is not supported by Tidings",
                name.as_str(),
            );
        }
        if self.preferences.as_ref().is_some_and(|p| !p.is_empty()) {
            v.add(
                "preferences",
                "subscription preferences are not supported by Tidings: preferences are per subscriber and workflow",
                Value::Array(self.preferences.clone().unwrap_or_default()),
            );
        }
    }
}

/// Subscribes the subscriber to a topic that the operator opened to self-subscription, under the identifier
/// the server assigns; a subscriber already subscribed keeps its subscription.
#[utoipa::path(post, path = "/v1/inbox/topics/{topicKey}/subscriptions", tag = "Inbox", security(("InboxSession" = [])),
    params(("topicKey" = String, Path)), request_body = SubscriptionIn,
    responses((status = 201, description = "`{data: subscription}`", body = InboxSubscriptionOut),
        (status = 401, description = "No valid session"),
        (status = 404, description = "No such topic, or one not open to self-subscription"),
        (status = 409, description = "The assigned identifier is another subscriber's (the operator gave it)"),
        (status = 422, description = "Invalid body: a topic, an identifier other than the assigned one, a name or preferences")))]
pub async fn create_subscription(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath(key): AppPath<String>,
    AppJson(body): AppJson<SubscriptionIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    body.refuse_unsupported(&mut v);
    if let Some(topic) = body.topic.filter(|t| !t.is_null()) {
        v.add(
            "topic",
            "the Inbox subscribes to topics that exist; only the operator creates or names a topic",
            topic,
        );
    }
    v.finish()?;
    // `@novu/js` sends `""` when its caller names no identifier.
    let identifier = body.identifier.filter(|i| !i.is_empty());
    let s = topics::create(&state.store, &who, &key, identifier).await?;
    Ok(Reply::enveloped(StatusCode::CREATED, InboxSubscriptionOut::from(s)).into_response())
}

/// Updates a subscription: nothing of it can change here (its name and preferences are not supported), so
/// an empty body answers it as it is.
#[utoipa::path(patch, path = "/v1/inbox/topics/{topicKey}/subscriptions/{identifier}", tag = "Inbox",
    security(("InboxSession" = [])), params(("topicKey" = String, Path), ("identifier" = String, Path)),
    request_body = SubscriptionIn,
    responses((status = 200, body = InboxSubscriptionOut), (status = 401, description = "No valid session"),
        (status = 404, description = "Not one of the subscriber's subscriptions"), (status = 422, description = "Invalid body")))]
pub async fn update_subscription(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath((key, identifier)): AppPath<(String, String)>,
    AppJson(body): AppJson<SubscriptionIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    body.refuse_unsupported(&mut v);
    v.finish()?;
    let found = topics::get(&state.store, &who, &key, &identifier)
        .await?
        .ok_or_else(|| {
            Error::NotFound(format!(
                "Subscription \"{identifier}\" to topic \"{key}\" was not found"
            ))
        })?;
    Ok(Reply::enveloped(StatusCode::OK, InboxSubscriptionOut::from(found)).into_response())
}

/// Ends one of the subscriber's subscriptions.
#[utoipa::path(delete, path = "/v1/inbox/topics/{topicKey}/subscriptions/{identifier}", tag = "Inbox",
    security(("InboxSession" = [])), params(("topicKey" = String, Path), ("identifier" = String, Path)),
    responses((status = 204, description = "Unsubscribed"), (status = 401, description = "No valid session"),
        (status = 404, description = "Not one of the subscriber's subscriptions")))]
pub async fn delete_subscription(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath((key, identifier)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    topics::delete(&state.store, &who, &key, &identifier).await?;
    Ok(no_content())
}
