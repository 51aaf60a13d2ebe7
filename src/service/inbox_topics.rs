//! The Inbox's topic subscriptions (`/v1/inbox/topics/{topicKey}/subscriptions…`): the session's subscriber
//! subscribes itself to a topic, lists and reads its own subscriptions, and ends them. It never sees or
//! touches another subscriber's. Subscription preferences (per-workflow filters of a subscription) are not
//! supported: Tidings' preferences are per subscriber and workflow.

use super::inbox_session::InboxSubscriber;
use super::topics::{self, SubscriptionRequest};
use crate::domain::topic::TopicSubscription;
use crate::error::{Error, Result};
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

/// Subscribes the subscriber to the topic `key` (created, named `topic_name`, when missing), under
/// `identifier` (by default the topic's and subscriber's); a subscriber already subscribed keeps its
/// subscription.
pub async fn create(
    store: &Store,
    who: &InboxSubscriber,
    key: &str,
    identifier: Option<String>,
    topic_name: Option<String>,
) -> Result<TopicSubscription> {
    let request = SubscriptionRequest {
        subscriber_id: Some(who.subscriber_id.clone()),
        identifier,
    };
    let outcome = topics::subscribe(
        store,
        &who.tenant,
        key,
        "identifier",
        vec![request],
        topic_name,
    )
    .await?;
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
