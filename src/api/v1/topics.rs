//! `/v1/topics`: Novu's first topic API (older SDKs; the membership read is still in the current ones).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::wire::{no_content, Reply};
use crate::api::AppState;
use crate::domain::topic::Topic;
use crate::domain::{EnvironmentId, OrganizationId, Tenant};
use crate::error::{Error, Validation};
use crate::service::topics::{self as service, SubscriptionRequest};

/// A subscriber's membership of a topic, in the v1 shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicMembershipOut {
    #[serde(rename = "_organizationId")]
    #[schema(value_type = String)]
    pub organization_id: OrganizationId,
    #[serde(rename = "_environmentId")]
    #[schema(value_type = String)]
    pub environment_id: EnvironmentId,
    /// The subscriber's `_id`.
    #[serde(rename = "_subscriberId")]
    pub subscriber_ref: String,
    #[serde(rename = "_topicId")]
    pub topic_id: String,
    #[serde(rename = "topicKey")]
    pub topic_key: String,
    /// The subscriber's subscriberId.
    #[serde(rename = "externalSubscriberId")]
    pub subscriber_id: String,
}

/// Whether a subscriber is subscribed to a topic (404 when not).
#[utoipa::path(get, path = "/v1/topics/{topicKey}/subscribers/{externalSubscriberId}", tag = "Topics",
    params(("topicKey" = String, Path), ("externalSubscriberId" = String, Path)),
    responses((status = 200, body = TopicMembershipOut),
        (status = 404, description = "Unknown topic, or the subscriber is not subscribed")))]
pub async fn get_topic_subscriber(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((key, subscriber_id)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    let s = service::subscription_of(&state.store, &tenant, &key, &subscriber_id).await?;
    Ok(Reply::ok(TopicMembershipOut {
        organization_id: s.organization_id,
        environment_id: s.environment_id,
        subscriber_ref: s.subscriber_ref.into(),
        topic_id: s.topic_id.into(),
        topic_key: s.topic_key,
        subscriber_id: s.subscriber_id,
    })
    .into_response())
}

/// A topic in the v1 shape. `subscribers` is always empty: a topic may hold a hundred thousand subscribers;
/// they are listed, page by page, by `GET /v2/topics/{topicKey}/subscriptions`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicV1Out {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(rename = "_organizationId")]
    #[schema(value_type = String)]
    pub organization_id: OrganizationId,
    #[serde(rename = "_environmentId")]
    #[schema(value_type = String)]
    pub environment_id: EnvironmentId,
    pub key: String,
    pub name: Option<String>,
    pub subscribers: Vec<String>,
}

impl From<Topic> for TopicV1Out {
    fn from(t: Topic) -> Self {
        Self {
            id: t.id.into(),
            organization_id: t.organization_id,
            environment_id: t.environment_id,
            key: t.key,
            name: t.name,
            subscribers: Vec::new(),
        }
    }
}

/// Body of `POST /v1/topics`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TopicV1In {
    pub key: String,
    pub name: Option<String>,
}

/// Answer of `POST /v1/topics`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicCreatedV1Out {
    #[serde(rename = "_id")]
    pub id: String,
    pub key: String,
}

/// Body of `PATCH /v1/topics/{topicKey}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TopicRenameV1In {
    pub name: Option<String>,
}

/// Body of `POST /v1/topics/{topicKey}/subscribers` and `…/subscribers/removal`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TopicSubscribersV1In {
    pub subscribers: Vec<String>,
}

/// Subscribers the v1 add could not subscribe.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddFailedV1Out {
    pub not_found: Vec<String>,
}

/// Answer of `POST /v1/topics/{topicKey}/subscribers`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AddSubscribersV1Out {
    pub succeeded: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<AddFailedV1Out>,
}

/// `{data, page, pageSize, totalCount}`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicPageV1Out {
    pub data: Vec<TopicV1Out>,
    pub page: i64,
    pub page_size: i64,
    pub total_count: i64,
}

fn entries(subscribers: Vec<String>) -> Vec<SubscriptionRequest> {
    subscribers
        .into_iter()
        .map(|id| SubscriptionRequest {
            subscriber_id: Some(id),
            identifier: None,
        })
        .collect()
}

/// Create a topic (409 when the key is taken).
#[utoipa::path(post, path = "/v1/topics", tag = "Topics", request_body = TopicV1In,
    responses((status = 201, body = TopicCreatedV1Out), (status = 409, description = "The key is taken"),
        (status = 422, description = "Invalid body")))]
pub async fn create_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<TopicV1In>,
) -> ApiResult<Response> {
    let done = service::upsert(
        &state.store,
        &tenant,
        &body.key,
        service::TopicChange::named(body.name),
        true,
    )
    .await?;
    if done.refused {
        return Err(Error::Conflict(format!("Topic \"{}\" already exists", body.key)).into());
    }
    Ok(Reply::created(TopicCreatedV1Out {
        id: done.topic.id.into(),
        key: done.topic.key,
    })
    .into_response())
}

/// List topics by page (`page` from 0, `pageSize` up to 100), optionally of one key.
#[utoipa::path(get, path = "/v1/topics", tag = "Topics",
    params(("page" = Option<i64>, Query), ("pageSize" = Option<i64>, Query), ("key" = Option<String>, Query)),
    responses((status = 200, body = TopicPageV1Out)))]
pub async fn list_topics(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let page = q.int(&mut v, "page", 0, 10_000).unwrap_or(0);
    let page_size = q.int(&mut v, "pageSize", 1, 100).unwrap_or(10);
    v.finish()?;
    let key = q.string("key");
    let (topics, total) =
        service::list_by_offset(&state.store, &tenant, key.as_deref(), page, page_size).await?;
    Ok(Reply::page(TopicPageV1Out {
        data: topics.into_iter().map(Into::into).collect(),
        page,
        page_size,
        total_count: total,
    })
    .into_response())
}

/// Retrieve a topic.
#[utoipa::path(get, path = "/v1/topics/{topicKey}", tag = "Topics", params(("topicKey" = String, Path)),
    responses((status = 200, body = TopicV1Out), (status = 404, description = "Unknown topic")))]
pub async fn get_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
) -> ApiResult<Response> {
    let topic = service::get(&state.store, &tenant, &key).await?;
    Ok(Reply::ok(TopicV1Out::from(topic)).into_response())
}

/// Rename a topic.
#[utoipa::path(patch, path = "/v1/topics/{topicKey}", tag = "Topics", request_body = TopicRenameV1In,
    params(("topicKey" = String, Path)),
    responses((status = 200, body = TopicV1Out), (status = 404, description = "Unknown topic"),
        (status = 422, description = "Invalid body")))]
pub async fn rename_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
    AppJson(body): AppJson<TopicRenameV1In>,
) -> ApiResult<Response> {
    let change = service::TopicChange {
        name: Some(body.name),
        ..Default::default()
    };
    let topic = service::update(&state.store, &tenant, &key, change).await?;
    Ok(Reply::ok(TopicV1Out::from(topic)).into_response())
}

/// Delete a topic and its subscriptions.
#[utoipa::path(delete, path = "/v1/topics/{topicKey}", tag = "Topics", params(("topicKey" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, description = "Unknown topic")))]
pub async fn delete_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
) -> ApiResult<Response> {
    service::delete(&state.store, &tenant, &key).await?;
    Ok(no_content())
}

/// Subscribe subscribers to a topic (created if needed); unknown ones are listed as not found.
#[utoipa::path(post, path = "/v1/topics/{topicKey}/subscribers", tag = "Topics", request_body = TopicSubscribersV1In,
    params(("topicKey" = String, Path)),
    responses((status = 200, body = AddSubscribersV1Out), (status = 422, description = "Invalid body")))]
pub async fn add_subscribers(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
    AppJson(body): AppJson<TopicSubscribersV1In>,
) -> ApiResult<Response> {
    let entries = entries(body.subscribers);
    let outcome =
        service::subscribe(&state.store, &tenant, &key, "subscribers", entries, None).await?;
    let not_found: Vec<String> = outcome
        .failed
        .into_iter()
        .map(|f| f.subscriber_id)
        .collect();
    Ok(Reply::ok(AddSubscribersV1Out {
        succeeded: outcome
            .done
            .into_iter()
            .map(|d| d.subscription.subscriber_id)
            .collect(),
        failed: (!not_found.is_empty()).then_some(AddFailedV1Out { not_found }),
    })
    .into_response())
}

/// Unsubscribe subscribers from a topic (those not subscribed are ignored).
#[utoipa::path(post, path = "/v1/topics/{topicKey}/subscribers/removal", tag = "Topics",
    request_body = TopicSubscribersV1In, params(("topicKey" = String, Path)),
    responses((status = 204, description = "Removed"), (status = 404, description = "Unknown topic"),
        (status = 422, description = "Invalid body")))]
pub async fn remove_subscribers(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(key): AppPath<String>,
    AppJson(body): AppJson<TopicSubscribersV1In>,
) -> ApiResult<Response> {
    let entries = entries(body.subscribers);
    service::unsubscribe(&state.store, &tenant, &key, "subscribers", entries).await?;
    Ok(no_content())
}
