//! The outbox of outbound webhooks (issue 39): a write that changes a message, a workflow or a preference
//! records the events it emits in its own transaction, as one `webhook_messages` row per endpoint that
//! receives each, so that a crash can neither lose an event nor report a change that was rolled back. The
//! endpoints are read in that transaction too ([`record_events!`]); an environment without any costs the
//! write one indexed lookup and no event is even built.

use std::collections::HashMap;

use serde_json::Value;

use super::insert::insert_rows;
use super::sql::{Arg, Sql};
use super::Dialect;
use crate::domain::job::Message;
use crate::domain::webhook::{envelope, message_data, new_message_events};
use crate::domain::{new_object_id, EnvironmentId, OrganizationId, Timestamp};

/// The heads of the inserts of webhook events and messages (the columns each row gives, in order).
pub(super) const INSERT_EVENTS: &str =
    "insert into webhook_events (id, environment_id, body, created_at)";
pub(super) const INSERT_MESSAGES: &str =
    "insert into webhook_messages (id, endpoint_id, environment_id, \
     event_type, status, attempts, next_at, created_at, updated_at)";

/// The rows of [`INSERT_EVENTS`] and [`INSERT_MESSAGES`] for message `id` of `event` with `body`, to
/// `endpoints`, due at `now`.
pub(super) fn event_rows<'a>(
    id: &str,
    event: &Event,
    body: String,
    endpoints: impl Iterator<Item = &'a str>,
    now: Timestamp,
) -> (Vec<Arg>, Vec<Vec<Arg>>) {
    let env = event.environment_id.as_str();
    let messages = endpoints
        .map(|endpoint| {
            vec![
                Arg::Text(id.to_owned()),
                Arg::Text(endpoint.to_owned()),
                Arg::Text(env.to_owned()),
                Arg::Text(event.kind.to_owned()),
                Arg::Text("pending".into()),
                Arg::Int(0),
                Arg::Int(now.0),
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

/// An environment's public identifier, and its endpoints with the types they filter on (`None`: all).
#[derive(Debug, Default)]
struct EnvReceivers {
    identifier: String,
    endpoints: Vec<(String, Option<Vec<String>>)>,
}

/// A row of [`Receivers::query`]: endpoint id, environment id, event types (JSON), the environment's
/// identifier.
pub type ReceiverRow = (String, String, Option<String>, Option<String>);

impl Receivers {
    /// The enabled endpoints of the environments `envs` (one range of `webhook_endpoints_list` each).
    pub fn query(envs: &[&str]) -> Sql {
        let mut q = Sql::new(
            "select w.id, w.environment_id, cast(w.event_types as text), e.identifier \
             from webhook_endpoints w join environments e on e.id = w.environment_id \
             where w.disabled = false",
        );
        q.push_in("w.environment_id", envs);
        q
    }

    pub fn from_rows(rows: Vec<ReceiverRow>) -> Self {
        let mut by_env: HashMap<String, EnvReceivers> = HashMap::new();
        for (endpoint, env, types, identifier) in rows {
            let types = types.and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok());
            by_env
                .entry(env)
                .or_insert_with(|| EnvReceivers {
                    identifier: identifier.unwrap_or_default(),
                    endpoints: Vec::new(),
                })
                .endpoints
                .push((endpoint, types));
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
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.by_env
            .get(env.as_str())
            .into_iter()
            .flat_map(|r| r.endpoints.iter())
            .filter(move |(_, types)| types.as_ref().is_none_or(|t| t.iter().any(|t| t == kind)))
            .map(|(id, _)| id.as_str())
    }

    /// The inserts of `events`' messages, one row per event and endpoint that receives it, due at once.
    pub fn deliveries(&self, dialect: Dialect, events: &[Event], now: Timestamp) -> Vec<Sql> {
        let (mut event_args, mut message_args) = (Vec::new(), Vec::new());
        for e in events {
            let mut endpoints = self.endpoints(&e.environment_id, e.kind).peekable();
            if endpoints.peek().is_none() {
                continue;
            }
            let oid = new_object_id();
            let identifier = self
                .by_env
                .get(e.environment_id.as_str())
                .map_or("", |r| r.identifier.as_str());
            let body = envelope(&oid, e.kind, &e.data, now, identifier);
            let (event, messages) = event_rows(&format!("msg_{oid}"), e, body, endpoints, now);
            event_args.push(event);
            message_args.extend(messages);
        }
        insert_event_rows(dialect, event_args, message_args)
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

/// Wakes this process's sender when a committed transaction wrote `written` webhook messages.
pub fn announce(store: &super::Store, written: u64) {
    if written > 0 {
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
/// that receive them; evaluates to how many rows it wrote (`u64`, events and messages).
macro_rules! insert_events {
    ($tx:expr, $dialect:expr, $receivers:expr, $events:expr, $now:expr) => {{
        let mut written: u64 = 0;
        for q in $receivers.deliveries($dialect, $events, $now) {
            written += $crate::store::sql::bind_args!(sqlx::query(&q.text), q.args)
                .execute(&mut *$tx)
                .await?
                .rows_affected();
        }
        written
    }};
}
pub(crate) use insert_events;

/// Records, in the transaction `$tx`, the events that `$build` (called with the [`Receivers`] of the
/// environments `$envs`, only when one of them has an enabled endpoint) returns; evaluates to how many
/// messages it wrote (`u64`). The caller announces them once committed ([`announce`]).
macro_rules! record_events {
    ($tx:expr, $dialect:expr, $envs:expr, $now:expr, $build:expr) => {{
        let receivers = $crate::store::outbox::receivers!($tx, $envs);
        if receivers.is_empty() {
            0
        } else {
            let events: Vec<$crate::store::outbox::Event> = ($build)(&receivers);
            $crate::store::outbox::insert_events!($tx, $dialect, receivers, &events, $now)
        }
    }};
}
pub(crate) use record_events;
