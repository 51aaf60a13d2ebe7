//! The Inbox's notifications: the list and counts, marks, snoozes, actions, deletes and the bulk routes.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::InboxSubscriber;
use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::v2::preferences::InboxWorkflowOut;
use crate::api::wire::{no_content, IsoTime, Reply};
use crate::api::AppState;
use crate::domain::job::Message;
use crate::domain::subscriber::Subscriber;
use crate::domain::MessageId;
use crate::error::{Error, Validation};
use crate::service::inbox_notifications::{
    self as notifications, Bulk, InboxMessage, BULK_IDS, COUNT_FILTERS,
};
use crate::store::messages::MarkAs;

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

impl InboxSubscriberOut {
    /// The recipient of `m`, with the profile fields the Inbox shows when its record was read.
    pub fn of(m: &Message, subscriber: Option<&Subscriber>) -> Self {
        let profile = subscriber.map(|s| &s.profile);
        Self {
            id: m.subscriber_ref.as_str().to_owned(),
            subscriber_id: m.subscriber_id.clone(),
            first_name: profile.and_then(|p| p.first_name.clone()),
            last_name: profile.and_then(|p| p.last_name.clone()),
            avatar: profile.and_then(|p| p.avatar.clone()),
        }
    }
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
    #[schema(value_type = String)]
    pub severity: crate::domain::workflow::Severity,
}

impl From<InboxMessage> for InboxNotificationOut {
    /// The Inbox's view of a message, with its subscriber's profile and its workflow.
    fn from(
        InboxMessage {
            message: m,
            workflow,
            subscriber,
        }: InboxMessage,
    ) -> Self {
        let to = InboxSubscriberOut::of(&m, subscriber.as_deref());
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
            workflow: workflow.as_deref().map(InboxWorkflowOut::from),
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
    let messages =
        notifications::with_context(&state.store, env, &who.subscriber_id, messages).await?;
    Ok(messages.into_iter().map(Into::into).collect())
}

/// `{data: notification}`: the Inbox's view of `m`.
pub(crate) async fn one_out(
    state: &AppState,
    who: &InboxSubscriber,
    m: Message,
) -> ApiResult<Response> {
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
    page(&state, &who, &q).await
}

/// A page of `who`'s notifications as the query string asks (see [`list_notifications`]).
pub(crate) async fn page(
    state: &AppState,
    who: &InboxSubscriber,
    q: &QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let limit = q.int(&mut v, "limit", 1, 100).unwrap_or(10);
    let offset = q.int(&mut v, "offset", 0, 1_000_000).unwrap_or(0);
    let after = q.string("after").map(|a| MessageId::from(a.as_str()));
    let raw = query_filter(&mut v, q);
    let f = notifications::parse_filter(&mut v, who, &raw);
    v.finish()?;
    let (messages, has_more) =
        notifications::list(&state.store, who, f, after, offset, limit).await?;
    let data = notifications_out(state, who, messages).await?;
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
    counts(&state, &who, &q).await
}

/// The counts of `who`'s notifications the query's `filters` ask for (see [`count_notifications`]).
pub(crate) async fn counts(
    state: &AppState,
    who: &InboxSubscriber,
    q: &QueryMap,
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
            Value::Object(m) => filters.push(notifications::parse_filter(&mut v, who, m)),
            other => v.add("filters", "each filter must be an object", other.clone()),
        }
    }
    v.finish()?;
    let counts = notifications::count(&state.store, who, &filters).await?;
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
    let m = notifications::action(
        &state.store,
        &who,
        &id,
        body.action_type.as_ref(),
        true,
        None,
    )
    .await?;
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
    let m = notifications::action(
        &state.store,
        &who,
        &id,
        body.action_type.as_ref(),
        false,
        None,
    )
    .await?;
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
pub(crate) async fn bulk(
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
