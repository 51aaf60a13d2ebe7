//! What the Inbox's real-time socket (`api::socket`) reads and records — a subscriber's presence (online,
//! heartbeats, stale ones recorded offline), a message and the counts as a socket is told them — and the
//! Inbox's loops ([`spawn_loops`]): the sweep that ends the snoozes that are over, and the presence loop.
//! Both stop when the process's one shutdown token is cancelled. The socket layer itself holds no store
//! reads and runs no loop; it answers the presence loop's questions through [`HeldSockets`].

use std::collections::HashMap;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

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
pub async fn went_offline(store: &Store, held: &[(EnvironmentId, SubscriberRef)]) {
    let mut events = Vec::with_capacity(held.len());
    for (env, subscriber) in held {
        set_online(store, env, subscriber, false).await;
        events.push(InboxEvent::offline(env, subscriber));
    }
    store.inbox_events().publish(events);
}

/// Refreshes the heartbeat of the subscribers this process holds sockets of (`held`, sorted by
/// environment) and answers the session epoch of each of their environments (environment id → epoch).
pub async fn heartbeat(
    store: &Store,
    held: &[(EnvironmentId, SubscriberRef)],
) -> HashMap<EnvironmentId, i64> {
    let now = Timestamp::now().0;
    let mut envs = Vec::new();
    for env in held.chunk_by(|a, b| a.0 == b.0) {
        let ids: Vec<SubscriberRef> = env.iter().map(|(_, s)| s.clone()).collect();
        let env = env[0].0.clone();
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

/// How often the snoozes that are over are ended.
const SNOOZE_SWEEP: Duration = Duration::from_secs(5);
/// How often a process refreshes the heartbeat of the subscribers whose sockets it holds.
pub const HEARTBEAT: Duration = Duration::from_secs(20);
/// A subscriber online whose heartbeat is older than this (ms) is recorded offline: four heartbeats and a
/// half missed, which a live process (even one whose database is slow for a while) does not miss.
pub const PRESENCE_STALE_MS: i64 = 90_000;
/// How often the subscribers left online by a stopped process are looked for (an indexed range read).
const PRESENCE_SWEEP: Duration = Duration::from_secs(5);

/// What the presence loop asks of this process's Inbox sockets (`api::socket` answers).
pub trait HeldSockets: Send + Sync + 'static {
    /// The subscribers (environment, record) this process holds sockets of, sorted, each once.
    fn held(&self) -> Vec<(EnvironmentId, SubscriberRef)>;
    /// Closes the sockets whose session is of an epoch older than their environment's in `epochs`
    /// (environment id → epoch).
    fn close_older_sessions(&self, epochs: &HashMap<EnvironmentId, i64>);
}

/// Starts the Inbox's loops; they end when `stop` is cancelled (the process is stopping). Every process with
/// sockets sweeps; each ended snooze is announced once (by the store).
pub fn spawn_loops(store: Store, sockets: impl HeldSockets, stop: CancellationToken) {
    let sweep = {
        let store = store.clone();
        async move {
            let mut every = tokio::time::interval(SNOOZE_SWEEP);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                end_snoozes(&store).await;
            }
        }
    };
    tokio::spawn(stop.clone().run_until_cancelled_owned(sweep));
    tokio::spawn(stop.run_until_cancelled_owned(presence(store, sockets)));
}

/// Every [`PRESENCE_SWEEP`]: records offline the subscribers whose heartbeat is stale, and every
/// [`HEARTBEAT`] refreshes the heartbeat of the subscribers this process holds sockets of (closing those
/// whose session epoch has ended: a raise whose announcement this process did not hear).
async fn presence(store: Store, sockets: impl HeldSockets) {
    let mut every = tokio::time::interval(PRESENCE_SWEEP);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_beat = tokio::time::Instant::now();
    loop {
        every.tick().await;
        if last_beat.elapsed() >= HEARTBEAT {
            last_beat = tokio::time::Instant::now();
            let held = sockets.held();
            if !held.is_empty() {
                let epochs = heartbeat(&store, &held).await;
                sockets.close_older_sessions(&epochs);
            }
        }
        expire_presence(&store, PRESENCE_STALE_MS).await;
    }
}
