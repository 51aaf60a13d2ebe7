//! Announcements that a subscriber's in-app messages changed — one was created, or their read, seen or
//! archived states changed — for the Inbox's real-time socket (`api::socket`), which tells the browsers of
//! that subscriber. Every process hears every announcement: on PostgreSQL through `NOTIFY` on a channel of
//! the database (so an event made by one instance reaches a socket held by another, with no other
//! infrastructure), on SQLite (one process) in memory. Announcements are best effort: one lost (a listener
//! reconnecting, a slow socket task) only delays a count until the next change, and the Inbox reads its
//! lists and counts afresh whenever it connects.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use tokio::sync::{broadcast, mpsc};

use crate::domain::{EnvironmentId, SubscriberRef};

/// Most bytes of one `NOTIFY` payload (PostgreSQL refuses 8,000 and more).
const PAYLOAD: usize = 7_000;
/// Announcements kept for a listener that fell behind before the oldest are dropped.
const BACKLOG: usize = 4_096;

/// What changed, for whom: a subscriber's record (`_id`), never its reusable subscriberId, so that a
/// subscriber deleted and created again under the same subscriberId hears nothing of the first one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxEvent {
    #[serde(rename = "e")]
    pub environment_id: EnvironmentId,
    #[serde(rename = "r")]
    pub subscriber_ref: SubscriberRef,
    /// The message just created; `None`: states changed.
    #[serde(rename = "m", default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Not about messages: the subscriber's last socket on one process closed, and the subscriber was
    /// recorded offline; a process that still holds one of its sockets records it online again.
    #[serde(rename = "o", default, skip_serializing_if = "std::ops::Not::not")]
    pub offline: bool,
    /// Not about messages: sessions ended, and their sockets are closed wherever they are held.
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Ended>,
}

/// Which sessions ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ended {
    /// The subscriber (the record) was deleted: all of its sessions.
    #[serde(rename = "s")]
    Subscriber,
    /// The environment's session epoch was raised to this: every session of an older epoch, whatever its
    /// subscriber (the event's `subscriber_ref` is empty).
    #[serde(rename = "e")]
    Epoch(i64),
}

impl InboxEvent {
    /// The subscriber's messages changed state.
    pub fn changed(environment_id: &EnvironmentId, subscriber: &SubscriberRef) -> Self {
        Self {
            environment_id: environment_id.clone(),
            subscriber_ref: subscriber.clone(),
            created: None,
            offline: false,
            ended: None,
        }
    }

    /// The subscriber was deleted: its sessions ended.
    pub fn subscriber_deleted(environment_id: &EnvironmentId, subscriber: &SubscriberRef) -> Self {
        Self {
            ended: Some(Ended::Subscriber),
            ..Self::changed(environment_id, subscriber)
        }
    }

    /// The environment's session epoch is now `epoch`: the sessions of older epochs ended.
    pub fn sessions_ended(environment_id: &EnvironmentId, epoch: i64) -> Self {
        Self {
            ended: Some(Ended::Epoch(epoch)),
            ..Self::changed(environment_id, &SubscriberRef::from(String::new()))
        }
    }

    /// The environment was deleted: every session of it ended, whatever its epoch.
    pub fn environment_deleted(environment_id: &EnvironmentId) -> Self {
        Self::sessions_ended(environment_id, i64::MAX)
    }

    /// Whether this announces that its environment was deleted.
    pub fn is_environment_deleted(&self) -> bool {
        self.ended == Some(Ended::Epoch(i64::MAX))
    }

    /// The subscriber was recorded offline by a process whose last socket of it closed.
    pub fn offline(environment_id: &EnvironmentId, subscriber: &SubscriberRef) -> Self {
        Self {
            offline: true,
            ..Self::changed(environment_id, subscriber)
        }
    }

    /// `m` was created; `None` for a message of another channel than in-app.
    pub fn created(m: &crate::domain::job::Message) -> Option<Self> {
        (m.channel == crate::domain::Channel::InApp).then(|| Self {
            environment_id: m.environment_id.clone(),
            subscriber_ref: m.subscriber_ref.clone(),
            created: Some(m.id.as_str().to_owned()),
            offline: false,
            ended: None,
        })
    }
}

/// The announcements of a store (see the module's documentation); cheap to clone.
#[derive(Debug, Clone)]
pub struct InboxEvents(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    local: broadcast::Sender<Arc<[InboxEvent]>>,
    /// PostgreSQL: the pool that sends and listens, and the channel's name.
    postgres: Option<(PgPool, String)>,
    /// PostgreSQL: the task that sends announcements, started by the first one.
    outbox: OnceLock<mpsc::UnboundedSender<Vec<InboxEvent>>>,
    /// PostgreSQL: the listener, started by the first subscriber.
    listening: OnceLock<()>,
}

impl InboxEvents {
    /// In memory (SQLite).
    pub fn local() -> Self {
        Self::new(None)
    }

    /// Through PostgreSQL's `NOTIFY` on `channel` (one per database schema: tests share a database).
    pub fn postgres(pool: PgPool, channel: String) -> Self {
        Self::new(Some((pool, channel)))
    }

    fn new(postgres: Option<(PgPool, String)>) -> Self {
        Self(Arc::new(Inner {
            local: broadcast::channel(BACKLOG).0,
            postgres,
            outbox: OnceLock::new(),
            listening: OnceLock::new(),
        }))
    }

    /// Announces `events` to every process; returns at once (a background task sends them on PostgreSQL).
    pub fn publish(&self, events: Vec<InboxEvent>) {
        if events.is_empty() {
            return;
        }
        match &self.0.postgres {
            None => {
                // Nobody listening (no socket layer in this process) is not an error.
                let _ = self.0.local.send(events.into());
            }
            Some((pool, channel)) => {
                let outbox = self.0.outbox.get_or_init(|| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tokio::spawn(send_notifications(pool.clone(), channel.clone(), rx));
                    tx
                });
                let _ = outbox.send(events);
            }
        }
    }

    /// Hears every process's announcements from now on (on PostgreSQL, starts listening).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<[InboxEvent]>> {
        let rx = self.0.local.subscribe();
        if let Some((pool, channel)) = &self.0.postgres {
            self.0.listening.get_or_init(|| {
                tokio::spawn(listen(pool.clone(), channel.clone(), self.0.local.clone()));
            });
        }
        rx
    }
}

/// Sends what `rx` receives as `NOTIFY`s of JSON arrays of at most [`PAYLOAD`] bytes, one statement per
/// array; what queued meanwhile goes together.
async fn send_notifications(
    pool: PgPool,
    channel: String,
    mut rx: mpsc::UnboundedReceiver<Vec<InboxEvent>>,
) {
    while let Some(mut events) = rx.recv().await {
        while let Ok(more) = rx.try_recv() {
            events.extend(more);
        }
        for payload in payloads(&events) {
            let sent = sqlx::query("select pg_notify($1, $2)")
                .bind(&channel)
                .bind(&payload)
                .execute(&pool)
                .await;
            match sent {
                // The process is stopping (a command that ended sessions closes its store at once); the
                // servers' heartbeats catch up with what it did not announce.
                Err(_) if pool.is_closed() => return,
                Err(e) => tracing::warn!(error = %e, "an Inbox announcement was not sent"),
                Ok(_) => {}
            }
        }
    }
}

/// `events` as JSON arrays of at most [`PAYLOAD`] bytes each.
fn payloads(events: &[InboxEvent]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::from("[");
    for e in events {
        let Ok(item) = serde_json::to_string(e) else {
            continue;
        };
        if current.len() > 1 && current.len() + item.len() + 2 > PAYLOAD {
            current.push(']');
            out.push(std::mem::replace(&mut current, String::from("[")));
        }
        if current.len() > 1 {
            current.push(',');
        }
        current.push_str(&item);
    }
    if current.len() > 1 {
        current.push(']');
        out.push(current);
    }
    out
}

/// Listens on `channel` until the pool closes, handing each announcement to this process's subscribers;
/// reconnects after an error (what was sent meanwhile is lost).
async fn listen(pool: PgPool, channel: String, local: broadcast::Sender<Arc<[InboxEvent]>>) {
    // Until the store closes its pool (the process is stopping).
    while !pool.is_closed() {
        let mut listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(_) if pool.is_closed() => return,
            Err(e) => {
                tracing::warn!(error = %e, "the Inbox listener could not connect; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(&channel).await {
            tracing::warn!(error = %e, "the Inbox listener could not listen; retrying");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        }
        loop {
            match listener.recv().await {
                Ok(n) => match serde_json::from_str::<Vec<InboxEvent>>(n.payload()) {
                    Ok(events) => {
                        let _ = local.send(events.into());
                    }
                    Err(e) => tracing::warn!(error = %e, "an Inbox announcement could not be read"),
                },
                Err(_) if pool.is_closed() => return,
                Err(e) => {
                    tracing::warn!(error = %e, "the Inbox listener lost its connection; reconnecting");
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_stay_under_the_limit_and_keep_every_event() {
        let events: Vec<InboxEvent> = (0..500)
            .map(|i| InboxEvent {
                environment_id: "65a1b2c3d4e5f60718293a4d".into(),
                subscriber_ref: SubscriberRef(format!("{i:024x}")),
                created: (i % 2 == 0).then(|| format!("{i:024}")),
                offline: i % 7 == 0,
                ended: match i % 11 {
                    0 => Some(Ended::Subscriber),
                    1 => Some(Ended::Epoch(i)),
                    _ => None,
                },
            })
            .collect();
        let out = payloads(&events);
        assert!(out.len() > 1);
        let mut back = Vec::new();
        for p in &out {
            assert!(p.len() <= PAYLOAD, "{}", p.len());
            back.extend(serde_json::from_str::<Vec<InboxEvent>>(p).unwrap());
        }
        assert_eq!(back, events);
        assert!(payloads(&[]).is_empty());
    }
}
