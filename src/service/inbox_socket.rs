//! What the Inbox's real-time socket (`api::socket`) and its background loops (`background`) read and
//! record: a subscriber's presence (online, heartbeats, stale ones recorded offline), the snoozes that are
//! over, and a message and the counts as a socket is told them. The socket layer itself holds no store
//! reads.

use std::collections::HashMap;

use crate::domain::{EnvironmentId, MessageId, SubscriberRef, Timestamp};
use crate::error::Result;
use crate::service::inbox_notifications::{with_context, InboxMessage};
use crate::service::inbox_session::{self, UnreadCounts, INBOX_COUNT_CAP};
use crate::store::inbox_events::InboxEvent;
use crate::store::messages::MessageFilter;
use crate::store::Store;

/// A subscriber (environment, record) is online or not; a failure is logged, not returned (presence is
/// best effort).
pub async fn set_online(
    store: &Store,
    env: &EnvironmentId,
    subscriber: &SubscriberRef,
    online: bool,
) {
    if let Err(e) = store.set_subscriber_online(env, subscriber, online).await {
        tracing::warn!(error = ?e, "a subscriber's online state was not saved");
    }
}

/// The subscribers `held` (environment, record) lost their last socket on this process: each is recorded
/// offline and announced so, so that another process holding one of their sockets records it online again.
pub async fn went_offline(store: &Store, held: &[(String, SubscriberRef)]) {
    let mut events = Vec::with_capacity(held.len());
    for (env, subscriber) in held {
        set_online(store, &EnvironmentId(env.clone()), subscriber, false).await;
        events.push(InboxEvent::offline(env, subscriber));
    }
    store.inbox_events().publish(events);
}

/// Refreshes the heartbeat of the subscribers this process holds sockets of (`held`, sorted by
/// environment) and answers the session epoch of each of their environments (environment id → epoch).
pub async fn heartbeat(store: &Store, held: &[(String, SubscriberRef)]) -> HashMap<String, i64> {
    let now = Timestamp::now().0;
    let mut envs = Vec::new();
    for env in held.chunk_by(|a, b| a.0 == b.0) {
        let ids: Vec<SubscriberRef> = env.iter().map(|(_, s)| s.clone()).collect();
        let env = EnvironmentId(env[0].0.clone());
        if let Err(e) = store.refresh_presence(&env, &ids, now).await {
            tracing::warn!(error = ?e, "a heartbeat of online subscribers was not saved");
        }
        envs.push(env);
    }
    match store.session_epochs(&envs).await {
        Ok(epochs) => epochs.into_iter().collect(),
        Err(e) => {
            tracing::warn!(error = ?e, "the session epochs could not be read");
            HashMap::new()
        }
    }
}

/// Records offline the subscribers whose heartbeat is older than `stale_ms` (at most a thousand), and
/// announces each, so that a process still holding one of their sockets records it online again.
pub async fn expire_presence(store: &Store, stale_ms: i64) {
    let stale_before = Timestamp::now().0 - stale_ms;
    match store.expire_presence(stale_before, 1_000).await {
        Ok(gone) => store.inbox_events().publish(
            gone.iter()
                .map(|(env, subscriber)| InboxEvent::offline(env, subscriber))
                .collect(),
        ),
        Err(e) => tracing::warn!(error = ?e, "recording stale subscribers offline failed"),
    }
}

/// Ends the snoozes that are over (at most a thousand); the store announces each message as new again.
pub async fn end_snoozes(store: &Store) {
    if let Err(e) = store.end_snoozes(Timestamp::now().0, 1_000).await {
        tracing::warn!(error = ?e, "ending the snoozes that are over failed");
    }
}

/// The in-app message `id` of the subscriber, with what a socket is told of it; `None` when it is gone.
pub async fn message(
    store: &Store,
    env: &EnvironmentId,
    subscriber: &SubscriberRef,
    id: &str,
) -> Result<Option<InboxMessage>> {
    let f = MessageFilter {
        ids: vec![MessageId::from(id)],
        ..MessageFilter::in_app_of(subscriber)
    };
    let Some(message) = store
        .list_messages_from(env, &f, 0, 1)
        .await?
        .0
        .into_iter()
        .next()
    else {
        return Ok(None);
    };
    let subscriber_id = message.subscriber_id.clone();
    Ok(with_context(store, env, &subscriber_id, vec![message])
        .await?
        .pop())
}

/// The counts a socket of the subscriber's context is told: unseen (counted up to one past
/// [`INBOX_COUNT_CAP`]) and unread.
pub async fn counts(
    store: &Store,
    env: &EnvironmentId,
    subscriber: &SubscriberRef,
    context_keys: &[String],
) -> Result<(i64, UnreadCounts)> {
    let unseen = store
        .count_up_to(
            env,
            &MessageFilter {
                seen: Some(false),
                ..MessageFilter::inbox_of(subscriber, context_keys)
            },
            INBOX_COUNT_CAP + 1,
        )
        .await?;
    let unread = inbox_session::unread_counts(store, env, subscriber, context_keys).await?;
    Ok((unseen, unread))
}
