//! The Inbox's topic subscriptions (`/v1/inbox/topics/{topicKey}/subscriptions…`): the session's subscriber
//! subscribes itself to a topic the operator opened to self-subscription, lists and reads its own
//! subscriptions, and ends them. It never sees or touches another subscriber's, never creates a topic and
//! never chooses a subscription's identifier. Subscription preferences (per-workflow filters of a
//! subscription) are not supported: Tidings' preferences are per subscriber and workflow.

use super::inbox_session::InboxSubscriber;
use super::topics::{self, SubscriptionRequest};
use crate::domain::topic::{default_identifier, TopicSubscription};
use crate::error::{Error, Result, Validation};
use crate::store::Store;

/// The subscriber's subscriptions to the topic `key` (none when there is no such topic).
pub async fn list(
    store: &Store,
    who: &InboxSubscriber,
    key: &str,
) -> Result<Vec<TopicSubscription>> {
    let env = &who.tenant.environment_id;
    let Some(topic) = store.get_topic(env, key).await? else {
        return Ok(Vec::new());
    };
    store
        .subscriptions_of(env, &topic.id, &[who.subscriber_id.as_str()])
        .await
}

/// The subscriber's subscription `identifier` to the topic `key`; `None` when it has none by that
/// identifier (another subscriber's is none of its own).
pub async fn get(
    store: &Store,
    who: &InboxSubscriber,
    key: &str,
    identifier: &str,
) -> Result<Option<TopicSubscription>> {
    let env = &who.tenant.environment_id;
    let Some(topic) = store.get_topic(env, key).await? else {
        return Ok(None);
    };
    Ok(store
        .get_subscription(env, &topic.id, identifier)
        .await?
        .filter(|s| s.subscriber_id == who.subscriber_id))
}

/// The identifier the server gives the subscriber's subscription to the topic `key`: the default one, which
/// names the subscriber itself, so it can never be another subscriber's.
pub fn assigned_identifier(who: &InboxSubscriber, key: &str) -> String {
    default_identifier(key, &who.subscriber_id)
}

/// Subscribes the subscriber to the topic `key`, which must exist and be open to self-subscription (either
/// way a 404, so that the Inbox learns nothing of the operator's other topics), under the identifier the
/// server assigns ([`assigned_identifier`]; `identifier`, when given, must be that one); a subscriber already
/// subscribed keeps its subscription.
pub async fn create(
    store: &Store,
    who: &InboxSubscriber,
    key: &str,
    identifier: Option<String>,
) -> Result<TopicSubscription> {
    let assigned = assigned_identifier(who, key);
    if let Some(other) = identifier.filter(|i| *i != assigned) {
        let mut v = Validation::new();
        v.add(
            "identifier",
            format!("a subscription's identifier is assigned by the server (\"{assigned}\")"),
            other,
        );
        v.finish()?;
    }
    let env = &who.tenant.environment_id;
    let topic = store
        .get_topic(env, key)
        .await?
        .filter(|t| t.allow_self_subscription)
        .ok_or_else(|| {
            Error::NotFound(format!(
                "Topic \"{key}\" was not found or is not open to self-subscription"
            ))
        })?;
    let request = SubscriptionRequest {
        subscriber_id: Some(who.subscriber_id.clone()),
        identifier: Some(assigned),
    };
    let outcome =
        topics::subscribe_existing(store, &who.tenant, topic, "identifier", vec![request]).await?;
    match (
        outcome.done.into_iter().next(),
        outcome.failed.into_iter().next(),
    ) {
        (Some(done), _) => Ok(done.subscription),
        (None, Some(failed)) => Err(Error::bad_request(failed.message)),
        (None, None) => Err(Error::Internal(anyhow::anyhow!(
            "a subscribe answered nothing"
        ))),
    }
}

/// Ends the subscriber's subscription `identifier` to the topic `key`; one it does not have is a 404.
pub async fn delete(
    store: &Store,
    who: &InboxSubscriber,
    key: &str,
    identifier: &str,
) -> Result<()> {
    if get(store, who, key, identifier).await?.is_none() {
        return Err(Error::NotFound(format!(
            "Subscription \"{identifier}\" to topic \"{key}\" was not found"
        )));
    }
    let request = SubscriptionRequest {
        subscriber_id: Some(who.subscriber_id.clone()),
        identifier: None,
    };
    topics::unsubscribe(store, &who.tenant, key, "identifier", vec![request]).await?;
    Ok(())
}
