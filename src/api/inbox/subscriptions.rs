//! The Inbox's topic subscriptions: the subscriber's own, listed, created, changed and deleted.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::InboxSubscriber;
use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath};
use crate::api::wire::{no_content, Reply};
use crate::api::AppState;
use crate::error::{Error, Validation};
use crate::service::inbox_topics as topics;

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
