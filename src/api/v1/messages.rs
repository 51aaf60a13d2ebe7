//! In-app messages: `GET /v1/messages`, a subscriber's feed and unseen count, `mark-as` (spec §4.9),
//! `mark-all`, and `DELETE /v1/messages/{messageId}`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::wire::{no_content, IsoTime, Reply, WireName};
use crate::api::AppState;
use crate::domain::job::Message;
use crate::domain::{Channel, EnvironmentId, MessageId, OrganizationId, Tenant};
use crate::error::Validation;
use crate::service::inbox as service;
use crate::store::messages::MessageFilter;

/// Message (spec §2.6).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageOut {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(rename = "_templateId")]
    pub template_id: Option<String>,
    #[serde(rename = "_environmentId")]
    #[schema(value_type = String)]
    pub environment_id: EnvironmentId,
    /// Always `null` here (spec §2.6: "or null"): Tidings has no message templates apart from the workflow's
    /// steps. A feed item leaves it out instead (`None`), because the TS SDK's feed item takes a string or
    /// nothing.
    #[serde(rename = "_messageTemplateId", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub message_template_id: Option<Option<String>>,
    #[serde(rename = "_organizationId")]
    #[schema(value_type = String)]
    pub organization_id: OrganizationId,
    #[serde(rename = "_notificationId")]
    pub notification_id: String,
    #[serde(rename = "_subscriberId")]
    pub subscriber_ref: String,
    #[serde(rename = "_feedId")]
    pub feed_id: Option<String>,
    pub subscriber_id: String,
    pub template_identifier: String,
    pub transaction_id: String,
    #[schema(value_type = String)]
    pub channel: Channel,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
    #[schema(value_type = Object)]
    pub cta: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
    pub read: bool,
    pub seen: bool,
    /// Whether the subscriber archived it (in-app messages; always false for the other channels).
    pub archived: bool,
    /// When it was archived, while it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<IsoTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_read_date: Option<IsoTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen_date: Option<IsoTime>,
    /// Until when the subscriber snoozed it in the Inbox (only while that is ahead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snoozed_until: Option<IsoTime>,
    #[schema(value_type = String)]
    pub status: crate::domain::job::MessageStatus,
    pub provider_id: WireName,
    /// When the message reached its provider (in-app: when it was created); empty when it was not delivered.
    pub delivered_at: Vec<IsoTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_webhook_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_tokens: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_text: Option<String>,
    #[schema(value_type = Object)]
    pub payload: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub overrides: Option<Value>,
    pub context_keys: Vec<String>,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

impl From<Message> for MessageOut {
    fn from(m: Message) -> Self {
        let delivered_at = if m.channel == Channel::InApp {
            vec![IsoTime(m.created_at)]
        } else {
            m.delivery
                .delivered_at
                .iter()
                .copied()
                .map(IsoTime)
                .collect()
        };
        Self {
            id: m.id.into(),
            template_id: Some(m.workflow_ref.into()),
            environment_id: m.environment_id,
            message_template_id: Some(None),
            organization_id: m.organization_id,
            notification_id: m.notification_id.into(),
            subscriber_ref: m.subscriber_ref.into(),
            feed_id: None,
            subscriber_id: m.subscriber_id,
            template_identifier: m.workflow_identifier,
            transaction_id: m.transaction_id,
            channel: m.channel,
            subject: m.subject,
            content: m.content,
            avatar: m.avatar,
            cta: m.cta,
            data: m.data,
            read: m.read,
            seen: m.seen,
            archived: m.archived,
            archived_at: m.archived_at.filter(|_| m.archived).map(IsoTime),
            last_read_date: m.last_read_date.map(IsoTime),
            last_seen_date: m.last_seen_date.map(IsoTime),
            snoozed_until: m
                .snoozed_until
                .filter(|t| t.0 > crate::domain::Timestamp::now().0)
                .map(IsoTime),
            status: m.status,
            provider_id: WireName::from(m.provider_id),
            delivered_at,
            email: m.delivery.email,
            phone: m.delivery.phone,
            direct_webhook_url: m.delivery.direct_webhook_url,
            device_tokens: m.delivery.device_tokens,
            error_id: m.delivery.error_id,
            error_text: m.delivery.error_text,
            payload: m.payload,
            overrides: m.overrides,
            context_keys: m.context_keys,
            created_at: m.created_at.into(),
            updated_at: m.updated_at.into(),
        }
    }
}

/// An item of a subscriber's feed (NotificationFeedItemDto): the message (with every field of
/// `GET /v1/messages`' items, `archived` and `archivedAt` too) plus the job that created it.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedItemOut {
    #[serde(flatten)]
    pub message: MessageOut,
    #[serde(rename = "_jobId")]
    pub job_id: String,
}

impl From<Message> for FeedItemOut {
    fn from(m: Message) -> Self {
        let job_id = m.job_id.clone().into();
        let mut message = MessageOut::from(m);
        message.message_template_id = None;
        Self { message, job_id }
    }
}

/// `{hasMore, data, pageSize, page, totalCount}`: a page of messages (`GET /v1/messages`) or of feed items.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PageOf<T> {
    pub has_more: bool,
    pub data: Vec<T>,
    pub page_size: i64,
    pub page: i64,
    pub total_count: i64,
}

fn page_params(v: &mut Validation, q: &QueryMap, max_limit: i64) -> (i64, i64) {
    (
        q.int(v, "page", 0, 1_000_000).unwrap_or(0),
        q.int(v, "limit", 1, max_limit).unwrap_or(10),
    )
}

fn page_body<T: From<Message>>(
    (messages, has_more, total): (Vec<Message>, bool, i64),
    page: i64,
    limit: i64,
) -> PageOf<T> {
    PageOf {
        has_more,
        data: messages.into_iter().map(Into::into).collect(),
        page_size: limit,
        page,
        total_count: total,
    }
}

/// The `channel` query parameter, which must name a channel.
fn channel_param(v: &mut Validation, q: &QueryMap) -> Option<String> {
    let channel = q.string("channel");
    if let Some(c) = &channel {
        if Channel::parse(c).is_none() {
            v.add(
                "channel",
                "channel must be one of in_app, email, sms, chat, push",
                c.as_str(),
            );
        }
    }
    channel
}

/// List messages, newest first.
#[utoipa::path(get, path = "/v1/messages", tag = "Messages",
    params(("subscriberId" = Option<String>, Query), ("channel" = Option<String>, Query), ("transactionId" = Option<Vec<String>>, Query),
        ("contextKeys" = Option<Vec<String>>, Query, description = "Exact set of the trigger's contexts, type:id; `contextKeys=` for none"),
        ("page" = Option<i64>, Query), ("limit" = Option<i64>, Query, description = "1..1000, default 10")),
    responses((status = 200, body = PageOf<MessageOut>)))]
pub async fn list_messages(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let (page, limit) = page_params(&mut v, &q, 1000);
    let channel = channel_param(&mut v, &q);
    let transaction_ids = q.list(&mut v, "transactionId");
    let context_keys = q.context_keys(&mut v);
    v.finish()?;
    let f = MessageFilter {
        channel,
        transaction_ids,
        context_keys,
        ..Default::default()
    };
    let subscriber_id = q.string("subscriberId");
    let found = service::list_of(
        &state.store,
        &tenant,
        subscriber_id.as_deref(),
        f,
        page,
        limit,
    )
    .await?;
    Ok(Reply::page(page_body::<MessageOut>(found, page, limit)).into_response())
}

/// A subscriber's in-app feed, newest first; filter by `read` / `seen`.
#[utoipa::path(get, path = "/v1/subscribers/{subscriberId}/notifications/feed", tag = "Messages",
    params(("subscriberId" = String, Path), ("page" = Option<i64>, Query), ("limit" = Option<i64>, Query, description = "1..100, default 10"),
        ("read" = Option<bool>, Query), ("seen" = Option<bool>, Query),
        ("payload" = Option<String>, Query, description = "A JSON object, as it is or in base64: each (dotted) key's value in the trigger payload must equal the given one")),
    responses((status = 200, body = PageOf<FeedItemOut>), (status = 404, description = "Unknown subscriber")))]
pub async fn subscriber_feed(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let (page, limit) = page_params(&mut v, &q, 100);
    let read = q.bool(&mut v, "read");
    let seen = q.bool(&mut v, "seen");
    v.finish()?;
    let query = service::FeedQuery {
        read,
        seen,
        payload: q.string("payload"),
        page,
        limit,
    };
    let found = service::feed(&state.store, &tenant, &subscriber_id, &query).await?;
    Ok(Reply::page(page_body::<FeedItemOut>(found, page, limit)).into_response())
}

/// `{count}`: how many of the subscriber's in-app messages are unseen (default), or match `seen` / `read` as
/// given (`read=false`: unread ones), counting at most `limit` when it is given (as upstream: 1..100).
#[utoipa::path(get, path = "/v1/subscribers/{subscriberId}/notifications/unseen", tag = "Messages",
    params(("subscriberId" = String, Path), ("seen" = Option<bool>, Query, description = "default false, unless `read` is given"),
        ("read" = Option<bool>, Query), ("limit" = Option<i64>, Query, description = "1..100: the most that is counted")),
    responses((status = 200, description = "{count}"), (status = 404, description = "Unknown subscriber")))]
pub async fn unseen_count(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let read = q.bool(&mut v, "read");
    let seen = q.bool(&mut v, "seen");
    let limit = q.int(&mut v, "limit", 1, 100);
    v.finish()?;
    let seen = seen.or(if read.is_none() { Some(false) } else { None });
    let count = service::count(&state.store, &tenant, &subscriber_id, read, seen).await?;
    let count = limit.map_or(count, |l| count.min(l));
    Ok(Reply::ok(CountOut { count }).into_response())
}

/// `{count}`: how many of a subscriber's messages are unseen (or as asked).
#[derive(Debug, Serialize)]
pub struct CountOut {
    pub count: i64,
}

/// Body of `POST …/messages/mark-as`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MarkAsIn {
    /// A message id or an array of them.
    #[schema(value_type = Object)]
    pub message_id: Value,
    /// read, seen, unread or unseen.
    pub mark_as: String,
}

/// Mark the subscriber's messages as read, seen, unread or unseen. `read` also marks seen; `unread` leaves
/// seen as it is; `seen` / `unseen` leave read as it is. Messages of other subscribers are not changed.
#[utoipa::path(post, path = "/v1/subscribers/{subscriberId}/messages/mark-as", tag = "Messages", request_body = MarkAsIn,
    params(("subscriberId" = String, Path)),
    responses((status = 201, body = Vec<MessageOut>), (status = 404, description = "Unknown subscriber"), (status = 422, description = "Invalid body")))]
pub async fn mark_as(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    AppJson(body): AppJson<MarkAsIn>,
) -> ApiResult<Response> {
    let updated = service::mark_as(
        &state.store,
        &tenant,
        &subscriber_id,
        &body.message_id,
        &body.mark_as,
    )
    .await?;
    let out: Vec<MessageOut> = updated.into_iter().map(Into::into).collect();
    Ok(Reply::created(out).into_response())
}

/// Body of `POST …/messages/{messageId}/actions/{type}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MessageActionIn {
    /// `pending` or `done`.
    #[schema(value_type = String)]
    pub status: Option<Value>,
    /// What the action produced (an object), kept as its result's `payload`.
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
}

/// The path of `POST …/messages/{messageId}/actions/{type}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageActionPath {
    subscriber_id: String,
    message_id: String,
    r#type: String,
}

/// Sets the status of an in-app message's primary or secondary action (`type`) and its result's payload;
/// answers the message.
#[utoipa::path(post, path = "/v1/subscribers/{subscriberId}/messages/{messageId}/actions/{type}", tag = "Messages",
    request_body = MessageActionIn,
    params(("subscriberId" = String, Path), ("messageId" = String, Path),
        ("type" = String, Path, description = "primary or secondary")),
    responses((status = 201, body = MessageOut), (status = 404, description = "Unknown subscriber, or not one of its in-app messages"),
        (status = 422, description = "Invalid type or body")))]
pub async fn message_action(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(p): AppPath<MessageActionPath>,
    AppJson(body): AppJson<MessageActionIn>,
) -> ApiResult<Response> {
    let m = service::message_action(
        &state.store,
        &tenant,
        &p.subscriber_id,
        &p.message_id,
        &p.r#type,
        body.status.as_ref(),
        body.payload.as_ref(),
    )
    .await?;
    Ok(Reply::created(MessageOut::from(m)).into_response())
}

/// Body of `POST …/messages/mark-all`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MarkAllIn {
    pub mark_as: String,
}

/// Mark all the subscriber's in-app messages; answers how many changed.
#[utoipa::path(post, path = "/v1/subscribers/{subscriberId}/messages/mark-all", tag = "Messages", request_body = MarkAllIn,
    params(("subscriberId" = String, Path)),
    responses((status = 201, body = u64, content_type = "application/json"), (status = 404, description = "Unknown subscriber"), (status = 422, description = "Invalid body")))]
pub async fn mark_all(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    AppJson(body): AppJson<MarkAllIn>,
) -> ApiResult<Response> {
    let n = service::mark_all(&state.store, &tenant, &subscriber_id, &body.mark_as).await?;
    Ok(Reply::created(n).into_response())
}

/// `{acknowledged, status: "deleted"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageDeletedOut {
    pub acknowledged: bool,
    pub status: &'static str,
}

/// Delete a message (soft: it leaves every list).
#[utoipa::path(delete, path = "/v1/messages/{messageId}", tag = "Messages", params(("messageId" = String, Path)),
    responses((status = 200, body = MessageDeletedOut), (status = 404, description = "Unknown message")))]
pub async fn delete_message(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<MessageId>,
) -> ApiResult<Response> {
    service::delete(&state.store, &tenant, &id).await?;
    Ok(Reply::ok(MessageDeletedOut {
        acknowledged: true,
        status: "deleted",
    })
    .into_response())
}

/// Delete the messages of a trigger (soft: they leave every list and the subscribers' Inbox), of one channel
/// when `channel` is given.
#[utoipa::path(delete, path = "/v1/messages/transaction/{transactionId}", tag = "Messages",
    params(("transactionId" = String, Path), ("channel" = Option<String>, Query, description = "in_app, email, sms, chat or push")),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No message of this transaction (and channel)"),
        (status = 422, description = "Unknown channel")))]
pub async fn delete_by_transaction(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(transaction_id): AppPath<String>,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let channel = channel_param(&mut v, &q);
    v.finish()?;
    let f = MessageFilter {
        channel,
        transaction_ids: vec![transaction_id],
        ..Default::default()
    };
    service::delete_where(&state.store, &tenant, &f).await?;
    Ok(no_content())
}
