//! `/v2/subscribers/{subscriberId}/notifications…`: a subscriber's Inbox notifications read and changed with
//! the API key (novu-py's `subscribers.notifications`, @novu/api's `subscribers.notifications`). They are the
//! Inbox's routes (`api::inbox`) seen for the subscriber named in the path: the same service functions, the
//! same filters and the same notification shape; only the subscriber comes from the path (a 404 when it
//! does not exist) and the context from `contextKeys` (every context without it).

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::inbox::{
    self, BulkIn, CountsOut, InboxNotificationOut, NotificationsPageOut, SnoozeIn,
};
use crate::api::wire::no_content;
use crate::api::AppState;
use crate::domain::Tenant;
use crate::error::Validation;
use crate::service::inbox_notifications::{self as notifications, Bulk};
use crate::service::inbox_session::InboxSubscriber;
use crate::store::messages::MarkAs;

/// The Inbox's view of the subscriber `subscriber_id`, narrowed to the query's `contextKeys` when given.
async fn subscriber(
    state: &AppState,
    tenant: &Tenant,
    subscriber_id: &str,
    q: &QueryMap,
) -> ApiResult<InboxSubscriber> {
    let mut v = Validation::new();
    let keys = q.context_keys(&mut v);
    v.finish()?;
    Ok(notifications::api_subscriber(&state.store, tenant, subscriber_id, keys).await?)
}

/// The subscriber's notifications, newest first, `limit` (1–100, default 10) at a time: after the
/// notification `after` (the last one shown), else after the first `offset`; the Inbox's filters.
#[utoipa::path(get, path = "/v2/subscribers/{subscriberId}/notifications", tag = "Subscribers",
    params(("subscriberId" = String, Path), ("limit" = Option<i64>, Query), ("after" = Option<String>, Query),
        ("offset" = Option<i64>, Query), ("read" = Option<bool>, Query), ("seen" = Option<bool>, Query),
        ("archived" = Option<bool>, Query), ("snoozed" = Option<bool>, Query),
        ("tags" = Option<Vec<String>>, Query), ("severity" = Option<Vec<String>>, Query),
        ("data" = Option<String>, Query, description = "A JSON object of conditions on the notification's data"),
        ("createdGte" = Option<i64>, Query), ("createdLte" = Option<i64>, Query),
        ("contextKeys" = Option<Vec<String>>, Query, description = "Only this exact context (type:id); every context without it")),
    responses((status = 200, body = NotificationsPageOut), (status = 400, description = "Unread and archived"),
        (status = 404, description = "Unknown subscriber"), (status = 422, description = "Invalid query")))]
pub async fn list_notifications(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    q: QueryMap,
) -> ApiResult<Response> {
    let who = subscriber(&state, &tenant, &subscriber_id, &q).await?;
    inbox::page(&state, &who, &q).await
}

/// How many of the subscriber's notifications each filter selects (up to 100 each), in order, each with
/// its filter as sent.
#[utoipa::path(get, path = "/v2/subscribers/{subscriberId}/notifications/count", tag = "Subscribers",
    params(("subscriberId" = String, Path),
        ("filters" = String, Query, description = "A JSON array of up to 30 filters"),
        ("contextKeys" = Option<Vec<String>>, Query, description = "Only this exact context (type:id)")),
    responses((status = 200, body = CountsOut), (status = 400, description = "Unread and archived"),
        (status = 404, description = "Unknown subscriber"), (status = 422, description = "Invalid filters")))]
pub async fn count_notifications(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    q: QueryMap,
) -> ApiResult<Response> {
    let who = subscriber(&state, &tenant, &subscriber_id, &q).await?;
    inbox::counts(&state, &who, &q).await
}

/// The path of a route on one notification.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationPath {
    subscriber_id: String,
    notification_id: String,
}

macro_rules! mark_route {
    ($name:ident, $path:literal, $mark:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(patch, path = $path, tag = "Subscribers",
            params(("subscriberId" = String, Path), ("notificationId" = String, Path),
                ("contextKeys" = Option<Vec<String>>, Query, description = "Only this exact context (type:id)")),
            responses((status = 200, description = "`{data: notification}`", body = InboxNotificationOut),
                (status = 404, description = "Unknown subscriber, or not one of its notifications"),
                (status = 422, description = "Invalid query")))]
        pub async fn $name(
            State(state): State<AppState>,
            tenant: Tenant,
            AppPath(p): AppPath<NotificationPath>,
            q: QueryMap,
        ) -> ApiResult<Response> {
            let who = subscriber(&state, &tenant, &p.subscriber_id, &q).await?;
            let m = notifications::mark(&state.store, &who, &p.notification_id, $mark).await?;
            inbox::one_out(&state, &who, m).await
        }
    };
}

mark_route!(
    read,
    "/v2/subscribers/{subscriberId}/notifications/{notificationId}/read",
    MarkAs::Read,
    "Marks a notification read (and seen)."
);
mark_route!(
    unread,
    "/v2/subscribers/{subscriberId}/notifications/{notificationId}/unread",
    MarkAs::Unread,
    "Marks a notification unread (and not archived)."
);
mark_route!(
    archive,
    "/v2/subscribers/{subscriberId}/notifications/{notificationId}/archive",
    MarkAs::Archive,
    "Archives a notification (and marks it read)."
);
mark_route!(
    unarchive,
    "/v2/subscribers/{subscriberId}/notifications/{notificationId}/unarchive",
    MarkAs::Unarchive,
    "Takes a notification out of the archive."
);
mark_route!(
    unsnooze,
    "/v2/subscribers/{subscriberId}/notifications/{notificationId}/unsnooze",
    MarkAs::Unsnooze,
    "Ends a notification's snooze."
);

/// Hides a notification until `snoozeUntil` (at least a minute ahead, at most 30 days).
#[utoipa::path(patch, path = "/v2/subscribers/{subscriberId}/notifications/{notificationId}/snooze", tag = "Subscribers",
    params(("subscriberId" = String, Path), ("notificationId" = String, Path),
        ("contextKeys" = Option<Vec<String>>, Query, description = "Only this exact context (type:id)")),
    request_body = SnoozeIn,
    responses((status = 200, description = "`{data: notification}`", body = InboxNotificationOut),
        (status = 400, description = "Too soon or too far"),
        (status = 404, description = "Unknown subscriber, or not one of its notifications"),
        (status = 422, description = "Invalid body")))]
pub async fn snooze(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(p): AppPath<NotificationPath>,
    q: QueryMap,
    AppJson(body): AppJson<SnoozeIn>,
) -> ApiResult<Response> {
    let who = subscriber(&state, &tenant, &p.subscriber_id, &q).await?;
    let until = body.snooze_until.as_ref();
    let m = notifications::snooze(&state.store, &who, &p.notification_id, until).await?;
    inbox::one_out(&state, &who, m).await
}

/// The path of the action routes.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionPath {
    subscriber_id: String,
    notification_id: String,
    action_type: String,
}

/// Completes (`done`) or reverts the notification's `actionType` action.
async fn action(
    state: AppState,
    tenant: Tenant,
    p: ActionPath,
    q: QueryMap,
    done: bool,
) -> ApiResult<Response> {
    let who = subscriber(&state, &tenant, &p.subscriber_id, &q).await?;
    let kind = serde_json::Value::from(p.action_type);
    let id = &p.notification_id;
    let m = notifications::action(&state.store, &who, id, Some(&kind), done, None).await?;
    inbox::one_out(&state, &who, m).await
}

/// Marks the notification's primary or secondary action done.
#[utoipa::path(patch, path = "/v2/subscribers/{subscriberId}/notifications/{notificationId}/actions/{actionType}/complete",
    tag = "Subscribers",
    params(("subscriberId" = String, Path), ("notificationId" = String, Path),
        ("actionType" = String, Path, description = "primary or secondary"),
        ("contextKeys" = Option<Vec<String>>, Query, description = "Only this exact context (type:id)")),
    responses((status = 200, description = "`{data: notification}`", body = InboxNotificationOut),
        (status = 404, description = "Unknown subscriber, or not one of its notifications"),
        (status = 422, description = "Not primary or secondary")))]
pub async fn complete_action(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(p): AppPath<ActionPath>,
    q: QueryMap,
) -> ApiResult<Response> {
    action(state, tenant, p, q, true).await
}

/// Marks the notification's primary or secondary action pending again.
#[utoipa::path(patch, path = "/v2/subscribers/{subscriberId}/notifications/{notificationId}/actions/{actionType}/revert",
    tag = "Subscribers",
    params(("subscriberId" = String, Path), ("notificationId" = String, Path),
        ("actionType" = String, Path, description = "primary or secondary"),
        ("contextKeys" = Option<Vec<String>>, Query, description = "Only this exact context (type:id)")),
    responses((status = 200, description = "`{data: notification}`", body = InboxNotificationOut),
        (status = 404, description = "Unknown subscriber, or not one of its notifications"),
        (status = 422, description = "Not primary or secondary")))]
pub async fn revert_action(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(p): AppPath<ActionPath>,
    q: QueryMap,
) -> ApiResult<Response> {
    action(state, tenant, p, q, false).await
}

/// Deletes one of the subscriber's notifications.
#[utoipa::path(delete, path = "/v2/subscribers/{subscriberId}/notifications/{notificationId}", tag = "Subscribers",
    params(("subscriberId" = String, Path), ("notificationId" = String, Path),
        ("contextKeys" = Option<Vec<String>>, Query, description = "Only this exact context (type:id)")),
    responses((status = 204, description = "Deleted"),
        (status = 404, description = "Unknown subscriber, or not one of its notifications"),
        (status = 422, description = "Invalid query")))]
pub async fn delete_notification(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(p): AppPath<NotificationPath>,
    q: QueryMap,
) -> ApiResult<Response> {
    let who = subscriber(&state, &tenant, &p.subscriber_id, &q).await?;
    notifications::delete(&state.store, &who, &p.notification_id).await?;
    Ok(no_content())
}

/// Body of the bulk routes: the Inbox's, and the context whose notifications it selects.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriberBulkIn {
    #[serde(flatten)]
    pub filter: BulkIn,
    /// Only this exact context (type:id); every context without it.
    pub context_keys: Option<Vec<String>>,
}

/// Applies `op` to the subscriber's notifications the body selects.
async fn bulk(
    state: AppState,
    tenant: Tenant,
    subscriber_id: String,
    body: SubscriberBulkIn,
    op: Bulk,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let keys = body.context_keys.map(|keys| {
        let most = crate::service::limits::QUERY_VALUES;
        crate::service::over_cap(&mut v, "contextKeys", keys.len(), most);
        crate::domain::context::parse_context_keys(&mut v, "contextKeys", &keys)
    });
    v.finish()?;
    let who = notifications::api_subscriber(&state.store, &tenant, &subscriber_id, keys).await?;
    inbox::bulk(state, who, body.filter, op).await
}

macro_rules! bulk_route {
    ($name:ident, $path:literal, $op:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(post, path = $path, tag = "Subscribers", request_body = SubscriberBulkIn,
            params(("subscriberId" = String, Path)),
            responses((status = 204, description = "Done"), (status = 404, description = "Unknown subscriber"),
                (status = 422, description = "Invalid body")))]
        pub async fn $name(
            State(state): State<AppState>,
            tenant: Tenant,
            AppPath(subscriber_id): AppPath<String>,
            AppJson(body): AppJson<SubscriberBulkIn>,
        ) -> ApiResult<Response> {
            bulk(state, tenant, subscriber_id, body, $op).await
        }
    };
}

bulk_route!(
    mark_as_seen,
    "/v2/subscribers/{subscriberId}/notifications/seen",
    Bulk::Seen,
    "Marks notifications seen: those named (`notificationIds`, up to 100), else all the filter selects."
);
bulk_route!(
    mark_all_as_read,
    "/v2/subscribers/{subscriberId}/notifications/read",
    Bulk::Read,
    "Marks every notification the filter selects read."
);
bulk_route!(
    archive_all,
    "/v2/subscribers/{subscriberId}/notifications/archive",
    Bulk::Archive,
    "Archives every notification the filter selects."
);
bulk_route!(
    archive_all_read,
    "/v2/subscribers/{subscriberId}/notifications/read-archive",
    Bulk::ArchiveRead,
    "Archives every read notification the filter selects."
);
bulk_route!(
    delete_all,
    "/v2/subscribers/{subscriberId}/notifications/delete",
    Bulk::Delete,
    "Deletes every notification the filter selects."
);
