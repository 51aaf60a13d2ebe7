//! The outbox of outbound webhooks (issue 39): a write that changes a message, a workflow or a preference
//! records the events it emits in its own transaction, as one `webhook_messages` row per endpoint that
//! receives each, so that a crash can neither lose an event nor report a change that was rolled back. The
//! endpoints are read in that transaction too ([`record_events!`]); an environment without any costs the
//! write one indexed lookup and no event is even built. A message this process's sender has room for is
//! recorded already leased to it and handed over once committed ([`Handover`]); the others wait, pending,
//! for a claim.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::insert::insert_rows;
use super::sql::{Arg, Sql};
use super::webhook_messages::Outgoing;
use super::Dialect;
use crate::domain::job::Message;
use crate::domain::webhook::{envelope, message_data, new_message_events, types_receive};
use crate::domain::{new_object_id, EnvironmentId, OrganizationId, Timestamp};

/// The heads of the inserts of webhook events and messages (the columns each row gives, in order).
pub(super) const INSERT_EVENTS: &str =
    "insert into webhook_events (id, environment_id, body, created_at)";
pub(super) const INSERT_MESSAGES: &str =
    "insert into webhook_messages (id, endpoint_id, environment_id, \
     event_type, status, attempts, next_at, locked_until, created_at, updated_at)";

/// The rows of [`INSERT_EVENTS`] and [`INSERT_MESSAGES`] for message `id` of `event` with `body`, to
/// `endpoints`, due at `now`: pending, or (with `Some(until)`) already leased to this process's sender
/// until then.
pub(super) fn event_rows<'a>(
    id: &str,
    event: &Event,
    body: String,
    endpoints: impl Iterator<Item = (&'a str, Option<i64>)>,
    now: Timestamp,
) -> (Vec<Arg>, Vec<Vec<Arg>>) {
    let env = event.environment_id.as_str();
    let messages = endpoints
        .map(|(endpoint, leased)| {
            vec![
                Arg::Text(id.to_owned()),
                Arg::Text(endpoint.to_owned()),
                Arg::Text(env.to_owned()),
                Arg::Text(event.kind.to_owned()),
                Arg::Text(
                    if leased.is_some() {
                        "sending"
                    } else {
                        "pending"
                    }
                    .into(),
                ),
                Arg::Int(0),
                Arg::Int(now.0),
                Arg::OptInt(leased),
                Arg::Int(now.0),
                Arg::Int(now.0),
            ]
        })
        .collect();
    let event = vec![
        Arg::Text(id.to_owned()),
        Arg::Text(env.to_owned()),
        Arg::Text(body),
        Arg::Int(now.0),
    ];
    (event, messages)
}

/// The inserts of event rows and message rows.
pub(super) fn insert_event_rows(
    dialect: Dialect,
    events: Vec<Vec<Arg>>,
    messages: Vec<Vec<Arg>>,
) -> Vec<Sql> {
    let mut out = insert_rows(dialect, INSERT_EVENTS, "", events);
    out.extend(insert_rows(dialect, INSERT_MESSAGES, "", messages));
    out
}

/// An event a change emits, before it is addressed to endpoints.
#[derive(Debug, Clone)]
pub struct Event {
    pub environment_id: EnvironmentId,
    pub organization_id: OrganizationId,
    /// Novu's name: `message.sent`, `workflow.updated`, …
    pub kind: &'static str,
    pub data: Value,
}

/// The enabled endpoints of some environments, read in the transaction that records their events.
#[derive(Debug, Default)]
pub struct Receivers {
    /// By environment id.
    by_env: HashMap<String, EnvReceivers>,
}

/// An environment's public identifier, and its endpoints.
#[derive(Debug, Default)]
struct EnvReceivers {
    identifier: String,
    endpoints: Vec<Receiver>,
}

/// An endpoint: its id, the types it filters on (`None`: all) and its rate limit (messages a second).
#[derive(Debug)]
struct Receiver {
    id: String,
    types: Option<Vec<String>>,
    throttle_rate: Option<i64>,
}

/// A row of [`Receivers::query`]: endpoint id, environment id, event types (JSON), rate limit, the
/// environment's identifier.
pub type ReceiverRow = (String, String, Option<String>, Option<i64>, Option<String>);

impl Receivers {
    /// The enabled endpoints of the environments `envs` (one range of `webhook_endpoints_list` each).
    pub fn query(envs: &[&str]) -> Sql {
        let mut q = Sql::new(
            "select w.id, w.environment_id, cast(w.event_types as text), w.throttle_rate, e.identifier \
             from webhook_endpoints w join environments e on e.id = w.environment_id \
             where w.disabled = false",
        );
        q.push_in("w.environment_id", envs);
        q
    }

    pub fn from_rows(rows: Vec<ReceiverRow>) -> Self {
        let mut by_env: HashMap<String, EnvReceivers> = HashMap::new();
        for (id, env, types, throttle_rate, identifier) in rows {
            let types = types.and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok());
            by_env
                .entry(env)
                .or_insert_with(|| EnvReceivers {
                    identifier: identifier.unwrap_or_default(),
                    endpoints: Vec::new(),
                })
                .endpoints
                .push(Receiver {
                    id,
                    types,
                    throttle_rate,
                });
        }
        Self { by_env }
    }

    pub fn is_empty(&self) -> bool {
        self.by_env.is_empty()
    }

    /// Whether some endpoint of `env` receives events of type `kind`.
    pub fn want(&self, env: &EnvironmentId, kind: &str) -> bool {
        self.endpoints(env, kind).next().is_some()
    }

    fn endpoints<'a>(
        &'a self,
        env: &EnvironmentId,
        kind: &'a str,
    ) -> impl Iterator<Item = &'a Receiver> + 'a {
        self.by_env
            .get(env.as_str())
            .into_iter()
            .flat_map(|r| r.endpoints.iter())
            .filter(move |r| types_receive(r.types.as_deref(), kind))
    }

    /// The public identifier (`applicationIdentifier`) of `env`, when it has an enabled endpoint.
    pub fn identifier(&self, env: &str) -> Option<&str> {
        self.by_env.get(env).map(|r| r.identifier.as_str())
    }

    /// The inserts of `events`' messages, one row per event and endpoint that receives it, due at once;
    /// with `sender` (this process's), those it has room for are recorded already leased to it, and
    /// handed to it once committed ([`Handover::announce`]).
    pub fn deliveries(
        &self,
        dialect: Dialect,
        events: &[Event],
        now: Timestamp,
        sender: Option<&Arc<dyn Sender>>,
    ) -> (Vec<Sql>, Handover) {
        let (mut event_args, mut message_args) = (Vec::new(), Vec::new());
        let mut handover = Handover::new(sender);
        let until = sender.map(|s| now.0 + s.lease_ms());
        for e in events {
            let mut endpoints = self.endpoints(&e.environment_id, e.kind).peekable();
            if endpoints.peek().is_none() {
                continue;
            }
            let oid = new_object_id();
            let id = format!("msg_{oid}");
            let identifier = self.identifier(e.environment_id.as_str()).unwrap_or("");
            let body = envelope(&oid, e.kind, &e.data, now, identifier);
            let mut rows = Vec::new();
            for r in endpoints {
                let leased = handover.take(&id, e, r, &body);
                rows.push((r.id.as_str(), until.filter(|_| leased)));
            }
            let (event, messages) = event_rows(&id, e, body, rows.into_iter(), now);
            event_args.push(event);
            message_args.extend(messages);
        }
        (
            insert_event_rows(dialect, event_args, message_args),
            handover,
        )
    }
}

/// This process's webhook sender, as the outbox sees it: a transaction records the messages the sender has
/// room for already leased to it, and hands them over once committed — the sender then neither claims
/// them nor reads their bodies.
pub trait Sender: Send + Sync {
    /// Takes a slot of `endpoint` (rate limited to `throttle_rate` messages a second) for one message now;
    /// false when it has none free.
    fn take(&self, endpoint: &str, throttle_rate: Option<i64>) -> bool;
    /// Gives back the slot taken for a message whose transaction did not commit.
    fn give_back(&self, endpoint: &str);
    /// Hands over messages recorded leased to it, once committed.
    fn hand(&self, messages: Vec<Outgoing>);
    /// How long the lease of a message recorded for it lasts (ms).
    fn lease_ms(&self) -> i64;
}

/// This process's link from the outbox to its webhook sender, held by the [`super::Store`]: wakes it for
/// messages recorded pending, and holds it while it runs, for messages recorded leased to it.
#[derive(Default)]
pub struct SenderLink {
    pub(super) due: tokio::sync::Notify,
    sender: std::sync::RwLock<Option<Arc<dyn Sender>>>,
}

impl std::fmt::Debug for SenderLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SenderLink").finish_non_exhaustive()
    }
}

impl SenderLink {
    pub(super) fn current(&self) -> Option<Arc<dyn Sender>> {
        self.sender
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes `sender` the one (`on`), or no longer (if it is the one).
    pub(super) fn set(&self, sender: &Arc<dyn Sender>, on: bool) {
        let mut current = self.sender.write().unwrap_or_else(|p| p.into_inner());
        if on {
            *current = Some(sender.clone());
        } else if current
            .as_ref()
            .is_some_and(|c| std::ptr::addr_eq(Arc::as_ptr(c), Arc::as_ptr(sender)))
        {
            *current = None;
        }
    }
}

/// The webhook messages a transaction recorded: those recorded pending, to be claimed, and those recorded
/// leased to this process's sender, to be handed to it once the transaction committed
/// ([`Handover::announce`]). Dropped without that (the transaction failed), it gives their slots back.
#[must_use = "announce the messages once the transaction committed"]
pub struct Handover {
    sender: Option<Arc<dyn Sender>>,
    leased: Vec<Outgoing>,
    pending: u64,
}

impl Handover {
    pub fn new(sender: Option<&Arc<dyn Sender>>) -> Self {
        Self {
            sender: sender.cloned(),
            leased: Vec::new(),
            pending: 0,
        }
    }

    /// Whether message `id` of `event` to endpoint `r` is recorded leased to the sender (which had room).
    fn take(&mut self, id: &str, event: &Event, r: &Receiver, body: &str) -> bool {
        let taken = self
            .sender
            .as_ref()
            .is_some_and(|s| s.take(&r.id, r.throttle_rate));
        if taken {
            self.leased.push(Outgoing {
                id: id.to_owned(),
                endpoint_id: r.id.clone(),
                environment_id: event.environment_id.as_str().to_owned(),
                event_type: event.kind.to_owned(),
                body: body.to_owned(),
                attempts: 0,
            });
        } else {
            self.pending += 1;
        }
        taken
    }

    /// Adds what another write of the same transaction recorded.
    pub fn join(&mut self, mut other: Handover) {
        self.leased.append(&mut other.leased);
        self.pending += other.pending;
        if self.sender.is_none() {
            self.sender = other.sender.take();
        }
    }

    /// Once the transaction committed: hands the leased messages to the sender, and wakes it for the
    /// pending ones.
    pub fn announce(mut self, store: &super::Store) {
        if let Some(sender) = &self.sender {
            if !self.leased.is_empty() {
                sender.hand(std::mem::take(&mut self.leased));
            }
        }
        announce(store, self.pending);
    }
}

impl Drop for Handover {
    fn drop(&mut self) {
        if let Some(sender) = &self.sender {
            for m in &self.leased {
                sender.give_back(&m.endpoint_id);
            }
        }
    }
}

/// The events of `messages` that some endpoint receives: those of `kind`, or (`None`) those of new
/// messages ([`new_message_events`]).
pub fn message_events(
    r: &Receivers,
    messages: &[&Message],
    kind: Option<&'static str>,
) -> Vec<Event> {
    let mut out = Vec::new();
    for m in messages {
        let one;
        let kinds: &[&'static str] = match kind {
            Some(k) => {
                one = [k];
                &one
            }
            None => new_message_events(m),
        };
        for &k in kinds {
            if r.want(&m.environment_id, k) {
                out.push(Event {
                    environment_id: m.environment_id.clone(),
                    organization_id: m.organization_id.clone(),
                    kind: k,
                    data: message_data(k, m),
                });
            }
        }
    }
    out
}

/// Wakes this process's sender when a committed transaction recorded `pending` webhook messages.
pub fn announce(store: &super::Store, pending: u64) {
    if pending > 0 {
        store.webhooks_due().notify_one();
    }
}

/// The [`Receivers`] of the environments `$envs` (`&[&str]`), read in the transaction `$tx`. A macro, as
/// the transaction's type differs by database.
macro_rules! receivers {
    ($tx:expr, $envs:expr) => {{
        use $crate::store::outbox::{ReceiverRow, Receivers};
        let q = Receivers::query($envs);
        let rows: Vec<ReceiverRow> =
            $crate::store::sql::bind_args!(sqlx::query_as(&q.text), q.args)
                .fetch_all(&mut *$tx)
                .await?;
        Receivers::from_rows(rows)
    }};
}
pub(crate) use receivers;

/// Writes, in the transaction `$tx`, the messages of the events `$events` to the endpoints of `$receivers`
/// that receive them, those `$sender` (`Option<&Arc<dyn Sender>>`) has room for leased to it; evaluates
/// to the [`Handover`] to announce once committed.
macro_rules! insert_events {
    ($tx:expr, $dialect:expr, $sender:expr, $receivers:expr, $events:expr, $now:expr) => {{
        let (inserts, handover) = $receivers.deliveries($dialect, $events, $now, $sender);
        for q in inserts {
            $crate::store::sql::bind_args!(sqlx::query(&q.text), q.args)
                .execute(&mut *$tx)
                .await?;
        }
        handover
    }};
}
pub(crate) use insert_events;

/// Records, in the transaction `$tx`, the events that `$build` (called with the [`Receivers`] of the
/// environments `$envs`, only when one of them has an enabled endpoint) returns, as [`insert_events!`]
/// does; evaluates to the [`Handover`] the caller announces once committed.
macro_rules! record_events {
    ($tx:expr, $dialect:expr, $sender:expr, $envs:expr, $now:expr, $build:expr) => {{
        let receivers = $crate::store::outbox::receivers!($tx, $envs);
        if receivers.is_empty() {
            $crate::store::outbox::Handover::new(None)
        } else {
            let events: Vec<$crate::store::outbox::Event> = ($build)(&receivers);
            $crate::store::outbox::insert_events!($tx, $dialect, $sender, receivers, &events, $now)
        }
    }};
}
pub(crate) use record_events;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// A sender with room for `room` messages, counting what it gets back.
    struct Room {
        room: AtomicUsize,
        given_back: AtomicUsize,
    }

    impl Sender for Room {
        fn take(&self, _: &str, _: Option<i64>) -> bool {
            self.room
                .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                .is_ok()
        }
        fn give_back(&self, _: &str) {
            self.given_back.fetch_add(1, SeqCst);
        }
        fn hand(&self, _: Vec<Outgoing>) {}
        fn lease_ms(&self) -> i64 {
            20_000
        }
    }

    fn event(kind: &'static str) -> Event {
        Event {
            environment_id: EnvironmentId::from("env"),
            organization_id: OrganizationId::from("org"),
            kind,
            data: serde_json::json!({}),
        }
    }

    /// Of three messages (two endpoints, one of them filtering), the sender's room takes two; a transaction
    /// that fails (the handover dropped unannounced) gives their slots back.
    #[test]
    fn the_room_decides_and_a_failed_transaction_gives_it_back() {
        let receivers = Receivers::from_rows(vec![
            ("ep_a".into(), "env".into(), None, None, Some("app".into())),
            (
                "ep_b".into(),
                "env".into(),
                Some(r#"["message.read"]"#.into()),
                Some(10),
                Some("app".into()),
            ),
        ]);
        let counted = Arc::new(Room {
            room: AtomicUsize::new(2),
            given_back: AtomicUsize::new(0),
        });
        let room: Arc<dyn Sender> = counted.clone();
        let events = [event("message.read"), event("message.seen")];
        let (inserts, handover) =
            receivers.deliveries(Dialect::Sqlite, &events, Timestamp(1_000), Some(&room));
        assert_eq!(inserts.len(), 2, "the events, then the messages");
        assert_eq!(handover.leased.len(), 2);
        assert_eq!(handover.pending, 1);
        let statuses: Vec<String> = inserts[1]
            .args
            .iter()
            .filter_map(|a| match a {
                Arg::Text(t) if t == "sending" || t == "pending" => Some(t.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(statuses, ["sending", "sending", "pending"]);
        drop(handover);
        assert_eq!(counted.given_back.load(SeqCst), 2);
    }
}
