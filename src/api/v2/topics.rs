//! `/v2/topics`: topics (upsert, list, retrieve, rename, delete) and their subscriptions; and
//! `/v2/subscribers/{subscriberId}/subscriptions`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::{error_response, ApiResult};
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::pagination::{page_request, CursorPage};
use crate::api::wire::{json_response, IsoTime, Reply};
use crate::api::AppState;
use crate::domain::subscriber::Subscriber;
use crate::domain::topic::Topic;
use crate::domain::Tenant;
use crate::error::{Error, Validation};
use crate::service::topics::{
    self as service, SubscriptionOutcome, SubscriptionRequest, SubscriptionView, TopicChange,
};
use crate::store::topics::{TopicFilter, TopicOrder};

/// A topic.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub key: String,
    /// Absent when the topic has none (the SDKs' models refuse a `null` name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tidings' extension: present (`true`) when a subscriber may subscribe itself to the topic through
    /// the Inbox; absent when it may not (the default).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_self_subscription: bool,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

impl From<Topic> for TopicOut {
    fn from(t: Topic) -> Self {
        Self {
            id: t.id.into(),
            key: t.key,
            name: t.name,
            allow_self_subscription: t.allow_self_subscription,
            created_at: t.created_at.into(),
            updated_at: t.updated_at.into(),
        }
    }
}

/// What a subscription shows of its subscriber.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicSubscriberOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub subscriber_id: String,
    pub avatar: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub email: Option<String>,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

impl From<Subscriber> for TopicSubscriberOut {
    fn from(s: Subscriber) -> Self {
        Self {
            id: s.id.into(),
            subscriber_id: s.subscriber_id,
            avatar: s.profile.avatar,
            first_name: s.profile.first_name,
            last_name: s.profile.last_name,
            email: s.profile.email,
            created_at: s.created_at.into(),
            updated_at: s.updated_at.into(),
        }
    }
}

/// A subscription of a subscriber to a topic.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub identifier: String,
    pub topic: TopicOut,
    /// `null` when the subscriber is gone.
    pub subscriber: Option<TopicSubscriberOut>,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

impl From<SubscriptionView> for SubscriptionOut {
    fn from(v: SubscriptionView) -> Self {
        Self {
            id: v.subscription.id.into(),
            identifier: v.subscription.identifier,
            topic: v.topic.into(),
            subscriber: v.subscriber.map(Into::into),
            created_at: v.subscription.created_at.into(),
            updated_at: v.subscription.updated_at.into(),
        }
    }
}

/// One subscription by identifier.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriptionDetailsOut {
    pub id: String,
    pub identifier: String,
}

/// Counts of a subscribe or unsubscribe.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionMetaOut {
    pub total_count: usize,
    pub successful: usize,
    pub failed: usize,
}

/// One subscriber a subscribe or unsubscribe could not handle.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionErrorOut {
    pub subscriber_id: String,
    /// `SUBSCRIBER_NOT_FOUND`, or `SUBSCRIPTION_NOT_FOUND` (unsubscribe: not subscribed).
    pub code: String,
    pub message: String,
}

/// The body of a subscribe or unsubscribe (also the body of its 400 when every subscriber failed).
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriptionsResultOut {
    pub data: Vec<SubscriptionOut>,
    pub meta: SubscriptionMetaOut,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SubscriptionErrorOut>,
}

/// The answer of a subscribe or unsubscribe: `status`, or 400 with the same body when nothing succeeded.
fn outcome_reply(
    outcome: SubscriptionOutcome,
    status: StatusCode,
    what: &str,
) -> ApiResult<Response> {
    let refused = outcome.all_failed();
    let body = SubscriptionsResultOut {
        meta: SubscriptionMetaOut {
            total_count: outcome.total,
            successful: outcome.done.len(),
            failed: outcome.failed.len(),
        },
        data: outcome.done.into_iter().map(Into::into).collect(),
        errors: outcome
            .failed
            .into_iter()
            .map(|f| SubscriptionErrorOut {
                subscriber_id: f.subscriber_id,
                code: f.code.into(),
                message: f.message,
            })
            .collect(),
    };
    if refused {
        let Value::Object(fields) = serde_json::to_value(&body).map_err(Error::from)? else {
            return Err(Error::Internal(anyhow::anyhow!("a result body is an object")).into());
        };
        let message = format!("No subscription was {what}");
        return Ok(error_response(StatusCode::BAD_REQUEST, &message, fields));
    }
    let bytes = serde_json::to_vec(&body).map_err(Error::from)?;
    Ok(json_response(status, bytes))
}

const ORDER_BY: &[(&str, TopicOrder)] = &[
    ("_id", TopicOrder::Id),
    ("createdAt", TopicOrder::CreatedAt),
    ("updatedAt", TopicOrder::UpdatedAt),
];

/// Body of `POST /v2/topics`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicIn {
    pub key: String,
    pub name: Option<String>,
    /// Tidings' extension: whether a subscriber may subscribe itself to the topic through the Inbox
    /// (default `false`; on an existing topic, unchanged when absent).
    pub allow_self_subscription: Option<bool>,
}

/// Body of `PATCH /v2/topics/{topicKey}`: an absent field is unchanged, a `null` name clears it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicPatchIn {
    #[serde(default, deserialize_with = "crate::api::v2::subscribers::present")]
    #[schema(value_type = Option<String>)]
    pub name: Option<Option<String>>,
    /// Tidings' extension: whether a subscriber may subscribe itself to the topic through the Inbox.
    pub allow_self_subscription: Option<bool>,
}

/// Body of `DELETE /v2/topics/{topicKey}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicDeletedOut {
    pub acknowledged: bool,
}

/// List topics.
#[utoipa::path(get, path = "/v2/topics", tag = "Topics",
    params(
        ("key" = Option<String>, Query, description = "Exact key"),
        ("name" = Option<String>, Query, description = "Substring of the name (case-insensitive)"),
        ("after" = Option<String>, Query, description = "Cursor: items after this _id"),
        ("before" = Option<String>, Query, description = "Cursor: items before this _id"),
        ("limit" = Option<i64>, Query, description = "1..100, default 10"),
        ("orderDirection" = Option<String>, Query, description = "ASC or DESC (default)"),
        ("orderBy" = Option<String>, Query, description = "_id (default), createdAt or updatedAt"),
        ("includeCursor" = Option<bool>, Query, description = "Include the cursor item"),
    ),
    responses((status = 200, body = CursorPage<TopicOut>)))]
pub async fn list_topics(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let page = page_request(&q, &mut v, ORDER_BY)?;
    v.finish()?;
    let filter = TopicFilter {
        key: q.string("key"),
        name: q.string("name"),
    };
    let found = service::list(&state.store, &tenant, &filter, &page).await?;
    Ok(Reply::page(CursorPage::from_page(found, TopicOut::from)).into_response())
}

/// Create a topic, or rename the existing one with this key (201 created, 200 existing).
#[utoipa::path(post, path = "/v2/topics", tag = "Topics", request_body = TopicIn,
    params(("failIfExists" = Option<bool>, Query, description = "409 instead of answering an existing topic")),
    responses((status = 409, description = "Exists and failIfExists=true: the error body with the existing topic's fields"), (status = 201, body = TopicOut), (status = 200, body = TopicOut, description = "Existing topic"),
        (status = 422, description = "Invalid body")))]
pub async fn upsert_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
    AppJson(body): AppJson<TopicIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let fail_if_exists = q.bool(&mut v, "failIfExists").unwrap_or(false);
    v.finish()?;
    let change = TopicChange {
        name: body.name.map(Some),
        allow_self_subscription: body.allow_self_subscription,
    };
    let done = service::upsert(&state.store, &tenant, &body.key, change, fail_if_exists).await?;
    let out = TopicOut::from(done.topic);
    if done.refused {
        // The SDKs read the existing topic from the 409's body.
        let Value::Object(fields) = serde_json::to_value(&out).map_err(Error::from)? else {
            return Err(Error::Internal(anyhow::anyhow!("a topic is an object")).into());
        };
        let message = format!("Topic \"{}\" already exists", out.key);
        return Ok(error_response(StatusCode::CONFLICT, &message, fields));
    }
    Ok(if done.created {
        Reply::created(out).into_response()
    } else {
        Reply::ok(out).into_response()
    })
}

/// Retrieve a topic by key.
#[utoipa::path(get, path = "/v2/topics/{topicKey}", tag = "Topics", params(("topicKey" = String, Path)),
    responses((status = 200, body = TopicOut), (status = 404, description = "Unknown topic")))]
pub async fn get_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
) -> ApiResult<Response> {
    let topic = service::get(&state.store, &tenant, &key).await?;
    Ok(Reply::ok(TopicOut::from(topic)).into_response())
}

/// Rename a topic, or open or close it to self-subscription through the Inbox.
#[utoipa::path(patch, path = "/v2/topics/{topicKey}", tag = "Topics", request_body = TopicPatchIn,
    params(("topicKey" = String, Path)),
    responses((status = 200, body = TopicOut), (status = 404, description = "Unknown topic"),
        (status = 422, description = "Invalid body")))]
pub async fn patch_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
    AppJson(body): AppJson<TopicPatchIn>,
) -> ApiResult<Response> {
    let change = TopicChange {
        name: body.name,
        allow_self_subscription: body.allow_self_subscription,
    };
    let topic = service::update(&state.store, &tenant, &key, change).await?;
    Ok(Reply::ok(TopicOut::from(topic)).into_response())
}

/// Delete a topic and its subscriptions.
#[utoipa::path(delete, path = "/v2/topics/{topicKey}", tag = "Topics", params(("topicKey" = String, Path)),
    responses((status = 200, body = TopicDeletedOut), (status = 404, description = "Unknown topic")))]
pub async fn delete_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
) -> ApiResult<Response> {
    service::delete(&state.store, &tenant, &key).await?;
    Ok(Reply::ok(TopicDeletedOut { acknowledged: true }).into_response())
}

/// Body of `POST` and `DELETE /v2/topics/{topicKey}/subscriptions`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionsIn {
    /// Each a subscriberId or `{subscriberId, identifier}` (to unsubscribe, either field).
    #[schema(value_type = Option<Vec<Object>>)]
    pub subscriptions: Option<Vec<Value>>,
    /// Deprecated: subscriberIds.
    pub subscriber_ids: Option<Vec<Value>>,
    /// Subscribe only: the name of the topic if it is created.
    pub name: Option<String>,
    /// Not supported (refused).
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    /// Not supported (refused).
    #[schema(value_type = Option<Object>)]
    pub preferences: Option<Value>,
}

impl SubscriptionsIn {
    /// The entries and the field they came from; refuses what is not stored.
    fn entries(self, v: &mut Validation) -> (&'static str, Vec<SubscriptionRequest>) {
        for (field, value) in [
            ("context", &self.context),
            ("preferences", &self.preferences),
        ] {
            if let Some(value) = value.as_ref().filter(|x| !x.is_null()) {
                v.add(
                    field,
                    format!("{field} is not supported on topic subscriptions"),
                    value.clone(),
                );
            }
        }
        let (field, items) = match (self.subscriptions, self.subscriber_ids) {
            (Some(s), None) => ("subscriptions", s),
            (None, Some(s)) => ("subscriberIds", s),
            (None, None) => {
                v.add(
                    "subscriptions",
                    "subscriptions (or subscriberIds) is required",
                    Value::Null,
                );
                return ("subscriptions", Vec::new());
            }
            (Some(_), Some(_)) => {
                v.add(
                    "subscriberIds",
                    "give subscriptions or subscriberIds, not both",
                    Value::Null,
                );
                return ("subscriptions", Vec::new());
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let at = format!("{field}[{i}]");
            match item {
                Value::String(id) => out.push(SubscriptionRequest {
                    subscriber_id: Some(id),
                    identifier: None,
                }),
                Value::Object(map) if field == "subscriptions" => {
                    let mut text = |name: &str| match map.get(name) {
                        None | Some(Value::Null) => None,
                        Some(Value::String(s)) => Some(s.clone()),
                        Some(other) => {
                            let at = format!("{at}.{name}");
                            v.add(&at, format!("{at} must be a string"), other.clone());
                            None
                        }
                    };
                    let subscriber_id = text("subscriberId");
                    let identifier = text("identifier");
                    out.push(SubscriptionRequest {
                        subscriber_id,
                        identifier,
                    });
                }
                other => {
                    let expected = if field == "subscriptions" {
                        "a subscriberId or an object"
                    } else {
                        "a string"
                    };
                    v.add(&at, format!("{at} must be {expected}"), other);
                }
            }
        }
        (field, out)
    }
}

/// Subscribe subscribers to a topic (created if needed); up to 100 per request.
#[utoipa::path(post, path = "/v2/topics/{topicKey}/subscriptions", tag = "Topics", request_body = SubscriptionsIn,
    params(("topicKey" = String, Path)),
    responses((status = 201, body = SubscriptionsResultOut),
        (status = 400, description = "No subscriber was found (body as on success)"),
        (status = 422, description = "Invalid body")))]
pub async fn create_subscriptions(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
    AppJson(body): AppJson<SubscriptionsIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let name = body.name.clone();
    let (field, entries) = body.entries(&mut v);
    v.finish()?;
    let outcome = service::subscribe(&state.store, &tenant, &key, field, entries, name).await?;
    outcome_reply(outcome, StatusCode::CREATED, "created")
}

/// Unsubscribe subscribers from a topic.
#[utoipa::path(delete, path = "/v2/topics/{topicKey}/subscriptions", tag = "Topics", request_body = SubscriptionsIn,
    params(("topicKey" = String, Path)),
    responses((status = 200, body = SubscriptionsResultOut),
        (status = 400, description = "No subscription was removed (body as on success)"),
        (status = 404, description = "Unknown topic"), (status = 422, description = "Invalid body")))]
pub async fn delete_subscriptions(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
    AppJson(body): AppJson<SubscriptionsIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    if let Some(name) = &body.name {
        v.add(
            "name",
            "name is not accepted when unsubscribing",
            name.as_str(),
        );
    }
    let (field, entries) = body.entries(&mut v);
    v.finish()?;
    let outcome = service::unsubscribe(&state.store, &tenant, &key, field, entries).await?;
    outcome_reply(outcome, StatusCode::OK, "removed")
}

/// List a topic's subscriptions.
#[utoipa::path(get, path = "/v2/topics/{topicKey}/subscriptions", tag = "Topics",
    params(
        ("topicKey" = String, Path),
        ("subscriberId" = Option<String>, Query, description = "Only this subscriber's subscription"),
        ("after" = Option<String>, Query, description = "Cursor: items after this _id"),
        ("before" = Option<String>, Query, description = "Cursor: items before this _id"),
        ("limit" = Option<i64>, Query, description = "1..100, default 10"),
        ("orderDirection" = Option<String>, Query, description = "ASC or DESC (default)"),
        ("orderBy" = Option<String>, Query, description = "_id (default), createdAt or updatedAt"),
        ("includeCursor" = Option<bool>, Query, description = "Include the cursor item"),
    ),
    responses((status = 200, body = CursorPage<SubscriptionOut>), (status = 404, description = "Unknown topic")))]
pub async fn list_subscriptions(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let page = page_request(&q, &mut v, ORDER_BY)?;
    v.finish()?;
    let found = service::list_topic_subscriptions(
        &state.store,
        &tenant,
        &key,
        q.string("subscriberId"),
        &page,
    )
    .await?;
    Ok(Reply::page(CursorPage::from_page(found, SubscriptionOut::from)).into_response())
}

/// Retrieve one subscription of a topic by its identifier.
#[utoipa::path(get, path = "/v2/topics/{topicKey}/subscriptions/{identifier}", tag = "Topics",
    params(("topicKey" = String, Path), ("identifier" = String, Path)),
    responses((status = 200, body = SubscriptionDetailsOut), (status = 404, description = "Unknown topic or subscription")))]
pub async fn get_subscription(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((key, identifier)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    let found = service::get_subscription(&state.store, &tenant, &key, &identifier).await?;
    Ok(Reply::ok(SubscriptionDetailsOut {
        id: found.subscription.id.into(),
        identifier: found.subscription.identifier,
    })
    .into_response())
}

/// Body of `PATCH /v2/topics/{topicKey}/subscriptions/{identifier}`: nothing of it is stored.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionPatchIn {
    /// Not supported (refused).
    pub name: Option<String>,
    /// Not supported (refused).
    #[schema(value_type = Option<Object>)]
    pub preferences: Option<Value>,
}

/// Update a subscription. Its name and preferences are not supported: an empty body answers it unchanged.
#[utoipa::path(patch, path = "/v2/topics/{topicKey}/subscriptions/{identifier}", tag = "Topics",
    request_body = SubscriptionPatchIn,
    params(("topicKey" = String, Path), ("identifier" = String, Path)),
    responses((status = 200, body = SubscriptionOut), (status = 404, description = "Unknown topic or subscription"),
        (status = 422, description = "name or preferences given")))]
pub async fn patch_subscription(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((key, identifier)): AppPath<(String, String)>,
    AppJson(body): AppJson<SubscriptionPatchIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    if let Some(name) = &body.name {
        v.add(
            "name",
            "name is not supported on topic subscriptions",
            name.as_str(),
        );
    }
    if let Some(p) = body.preferences.filter(|p| !p.is_null()) {
        v.add(
            "preferences",
            "preferences is not supported on topic subscriptions",
            p,
        );
    }
    v.finish()?;
    let found = service::get_subscription(&state.store, &tenant, &key, &identifier).await?;
    Ok(Reply::ok(SubscriptionOut::from(found)).into_response())
}

/// List a subscriber's topic subscriptions.
#[utoipa::path(get, path = "/v2/subscribers/{subscriberId}/subscriptions", tag = "Subscribers",
    params(
        ("subscriberId" = String, Path),
        ("key" = Option<String>, Query, description = "Only the subscription to this topic key"),
        ("after" = Option<String>, Query, description = "Cursor: items after this _id"),
        ("before" = Option<String>, Query, description = "Cursor: items before this _id"),
        ("limit" = Option<i64>, Query, description = "1..100, default 10"),
        ("orderDirection" = Option<String>, Query, description = "ASC or DESC (default)"),
        ("orderBy" = Option<String>, Query, description = "_id (default), createdAt or updatedAt"),
        ("includeCursor" = Option<bool>, Query, description = "Include the cursor item"),
    ),
    responses((status = 200, body = CursorPage<SubscriptionOut>), (status = 404, description = "Unknown subscriber")))]
pub async fn list_subscriber_subscriptions(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let page = page_request(&q, &mut v, ORDER_BY)?;
    v.finish()?;
    let found = service::list_subscriber_subscriptions(
        &state.store,
        &tenant,
        &subscriber_id,
        q.string("key"),
        &page,
    )
    .await?;
    Ok(Reply::page(CursorPage::from_page(found, SubscriptionOut::from)).into_response())
}
