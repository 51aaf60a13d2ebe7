//! `/v1/topics`: the routes of Novu's first topic API that the current SDKs still call.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::AppPath;
use crate::api::wire::Reply;
use crate::api::AppState;
use crate::domain::Tenant;
use crate::service::topics as service;

/// A subscriber's membership of a topic, in the v1 shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicSubscriberOut {
    #[serde(rename = "_organizationId")]
    pub organization_id: String,
    #[serde(rename = "_environmentId")]
    pub environment_id: String,
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
    responses((status = 200, body = TopicSubscriberOut),
        (status = 404, description = "Unknown topic, or the subscriber is not subscribed")))]
pub async fn get_topic_subscriber(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((key, subscriber_id)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    let s = service::subscription_of(&state.store, &tenant, &key, &subscriber_id).await?;
    Ok(Reply::ok(TopicSubscriberOut {
        organization_id: s.organization_id,
        environment_id: s.environment_id,
        subscriber_ref: s.subscriber_ref.into(),
        topic_id: s.topic_id.into(),
        topic_key: s.topic_key,
        subscriber_id: s.subscriber_id,
    })
    .into_response())
}
