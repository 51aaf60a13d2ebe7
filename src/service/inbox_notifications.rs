//! The Inbox's notifications (`/v1/inbox/notifications…`): one subscriber's in-app messages, listed and
//! counted with the Inbox's filters, and changed one by one or in bulk. Every read and write is scoped to the
//! session's subscriber: another subscriber's message id is not found.

use serde_json::{Map, Value};

use super::inbox_session::{InboxSubscriber, INBOX_COUNT_CAP};
use crate::domain::job::Message;
use crate::domain::{MessageId, Tenant, Timestamp};
use crate::error::{Error, Result, Validation};
use crate::store::messages::{plain_key, DataCondition, MarkAs, MessageFilter};
use crate::store::Store;

/// An in-app message with what its audiences show beside it: its workflow and its subscriber's profile
/// (each when it still exists). The one source of the Inbox's notification (`api::inbox`) and of the
/// socket's message (`api::socket`), each derived from it with `From`.
#[derive(Debug, Clone)]
pub struct InboxMessage {
    pub message: Message,
    pub workflow: Option<std::sync::Arc<crate::domain::workflow::Workflow>>,
    pub subscriber: Option<std::sync::Arc<crate::domain::subscriber::Subscriber>>,
}

/// Each of `messages`, all of the subscriber `subscriber_id`, as an [`InboxMessage`]: the subscriber read
/// once, the workflows through the workflow cache.
pub async fn with_context(
    store: &Store,
    env: &crate::domain::EnvironmentId,
    subscriber_id: &str,
    messages: Vec<Message>,
) -> Result<Vec<InboxMessage>> {
    let subscriber = store
        .get_subscriber(env, subscriber_id)
        .await?
        .map(std::sync::Arc::new);
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let workflow = store
            .get_workflow_cached(env, message.workflow_ref.as_str())
            .await?;
        out.push(InboxMessage {
            message,
            workflow,
            subscriber: subscriber.clone(),
        });
    }
    Ok(out)
}

/// The most filters one count request may hold (Novu's).
pub const COUNT_FILTERS: usize = 30;
/// The longest snooze, in hours (the session's `maxSnoozeDurationHours`).
pub const MAX_SNOOZE_HOURS: i64 = 24 * 30;
/// The shortest snooze: a minute.
const MIN_SNOOZE_MS: i64 = 60_000;
/// The most ids one bulk request may name.
pub const BULK_IDS: usize = 100;
/// The most conditions a `data` filter may hold.
const DATA_CONDITIONS: usize = 30;
const SEVERITIES: [&str; 4] = ["high", "medium", "low", "none"];

/// The subscriber's in-app messages of the session's context (of every context without one), not deleted.
fn own(who: &InboxSubscriber) -> MessageFilter {
    match &who.context_keys {
        Some(keys) => MessageFilter::inbox_of(&who.subscriber_ref, keys),
        None => MessageFilter::in_app_of(&who.subscriber_ref),
    }
}

/// The Inbox's view of the environment's subscriber `subscriber_id` for a caller holding the API key (the
/// v2 subscriber notifications, `POST …/messages/{id}/actions/{type}`): its messages of the context
/// `context_keys` (sorted), of every context when `None`. An unknown subscriber is a 404.
pub async fn api_subscriber(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    context_keys: Option<Vec<String>>,
) -> Result<InboxSubscriber> {
    let found = super::subscribers::get(store, tenant, subscriber_id).await?;
    Ok(InboxSubscriber {
        tenant: tenant.clone(),
        subscriber_ref: found.id,
        subscriber_id: found.subscriber_id,
        context_keys,
    })
}

/// The Inbox filter of a JSON object (`{read?, seen?, archived?, snoozed?, tags?, severity?, data?,
/// createdGte?, createdLte?}`) over the subscriber's messages; problems are added to `v`. `data` may be an
/// object or, as the bulk routes send it, the JSON text of one.
pub fn parse_filter(
    v: &mut Validation,
    who: &InboxSubscriber,
    raw: &Map<String, Value>,
) -> MessageFilter {
    let mut f = own(who);
    let boolean = |v: &mut Validation, key: &str| match raw.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            v.add(key, format!("{key} must be a boolean"), other.clone());
            None
        }
    };
    f.read = boolean(v, "read");
    f.seen = boolean(v, "seen");
    f.archived = boolean(v, "archived");
    f.snoozed = boolean(v, "snoozed");
    if let Some(tags) = raw.get("tags").filter(|t| !t.is_null()) {
        f.tags = parse_tags(v, tags);
    }
    match raw.get("severity") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => f.severity = vec![s.clone()],
        Some(Value::Array(items)) => {
            f.severity = items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect();
            if f.severity.len() != items.len() {
                v.add(
                    "severity",
                    "severity must be a string or an array of strings",
                    Value::Array(items.clone()),
                );
            }
        }
        Some(other) => v.add(
            "severity",
            "severity must be a string or an array of strings",
            other.clone(),
        ),
    }
    if let Some(bad) = f
        .severity
        .iter()
        .find(|s| !SEVERITIES.contains(&s.as_str()))
    {
        v.add(
            "severity",
            "severity must be one of: high, medium, low, none",
            bad.as_str(),
        );
    }
    match raw.get("data") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => f.data = parse_data(v, &m),
            _ => v.add("data", "data must be a JSON object", text.as_str()),
        },
        Some(Value::Object(m)) => f.data = parse_data(v, m),
        Some(other) => v.add("data", "data must be a JSON object", other.clone()),
    }
    for (key, slot) in [
        ("createdGte", &mut f.created_gte),
        ("createdLte", &mut f.created_lte),
    ] {
        match raw.get(key) {
            None | Some(Value::Null) => {}
            Some(n) => match n.as_f64().filter(|t| t.is_finite() && t.abs() < 1e15) {
                Some(t) => *slot = Some(t as i64),
                None => v.add(
                    key,
                    format!("{key} must be a time in milliseconds since 1970"),
                    n.clone(),
                ),
            },
        }
    }
    f
}

/// A tags filter: `["a", "b"]` or `{or: [...]}` (one of them), or `{and: [{or: [...]}, ...]}` (one of each
/// group).
fn parse_tags(v: &mut Validation, raw: &Value) -> Vec<Vec<String>> {
    fn group(raw: &Value) -> Option<Vec<String>> {
        let items = match raw {
            Value::String(s) => return Some(vec![s.clone()]),
            Value::Array(items) => items,
            Value::Object(m) if m.len() == 1 => m.get("or")?.as_array()?,
            _ => return None,
        };
        items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect()
    }
    let groups = match raw {
        Value::Object(m) if m.len() == 1 && m.contains_key("and") => m["and"]
            .as_array()
            .and_then(|groups| groups.iter().map(group).collect::<Option<Vec<_>>>()),
        other => group(other).map(|g| vec![g]),
    };
    match groups {
        Some(groups)
            if groups.iter().map(Vec::len).sum::<usize>() <= super::limits::QUERY_VALUES =>
        {
            groups.into_iter().filter(|g| !g.is_empty()).collect()
        }
        Some(_) => {
            v.add(
                "tags",
                format!("tags may name at most {} tags", super::limits::QUERY_VALUES),
                raw.clone(),
            );
            Vec::new()
        }
        None => {
            v.add(
                "tags",
                "tags must be an array of strings, {\"or\": [...]} or {\"and\": [{\"or\": [...]}, ...]}",
                raw.clone(),
            );
            Vec::new()
        }
    }
}

/// A `data` filter: per key, a value (equal), an array or `{or: [...]}` (one of them), `{and: [...]}` (each
/// of its items, themselves a value or a set), or an object of such keys (one level down).
fn parse_data(v: &mut Validation, raw: &Map<String, Value>) -> Vec<DataCondition> {
    let mut out = Vec::new();
    collect_data(v, raw, &[], &mut out);
    if out.len() > DATA_CONDITIONS {
        v.add(
            "data",
            format!("data may hold at most {DATA_CONDITIONS} conditions"),
            Value::Object(raw.clone()),
        );
    }
    out
}

fn collect_data(
    v: &mut Validation,
    raw: &Map<String, Value>,
    parent: &[String],
    out: &mut Vec<DataCondition>,
) {
    for (key, value) in raw {
        let at = if parent.is_empty() {
            format!("data.{key}")
        } else {
            format!("data.{}.{key}", parent.join("."))
        };
        if !plain_key(key) {
            v.add(&at, "a data key must be 1 to 100 characters, not start with $ or . and hold no quote or backslash", key.as_str());
            continue;
        }
        let mut path = parent.to_vec();
        path.push(key.clone());
        let any_of = |items: &[Value]| -> Option<Vec<Value>> {
            items.iter().all(is_scalar).then(|| items.to_vec())
        };
        let conditions: Option<Vec<Vec<Value>>> = match value {
            v if is_scalar(v) => Some(vec![vec![v.clone()]]),
            Value::Array(items) => any_of(items).map(|a| vec![a]),
            Value::Object(m) if m.len() == 1 && m.get("or").is_some_and(Value::is_array) => {
                any_of(m["or"].as_array().map_or(&[][..], Vec::as_slice)).map(|a| vec![a])
            }
            Value::Object(m) if m.len() == 1 && m.get("and").is_some_and(Value::is_array) => m
                ["and"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .map(|item| match item {
                    i if is_scalar(i) => Some(vec![i.clone()]),
                    Value::Array(items) => any_of(items),
                    Value::Object(o) if o.len() == 1 => {
                        o.get("or")?.as_array().and_then(|a| any_of(a))
                    }
                    _ => None,
                })
                .collect(),
            Value::Object(m) if parent.is_empty() => {
                collect_data(v, m, &path, out);
                continue;
            }
            _ => None,
        };
        match conditions {
            Some(groups) => out.extend(
                groups
                    .into_iter()
                    .filter(|g| !g.is_empty())
                    .map(|any_of| DataCondition { path: path.clone(), any_of }),
            ),
            None => v.add(
                &at,
                "a data filter is a value, an array of values, {\"or\": [...]}, {\"and\": [...]} or an object of these (one level)",
                value.clone(),
            ),
        }
    }
}

fn is_scalar(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

/// Novu's refusal of a filter for unread archived notifications (archiving marks read: there are none).
fn supported(f: &MessageFilter) -> Result<()> {
    if f.read == Some(false) && f.archived == Some(true) {
        return Err(Error::bad_request(
            "Filtering for unread and archived notifications is not supported.",
        ));
    }
    Ok(())
}

/// A page of the subscriber's notifications matching `f`, newest first: after the message `after` (the last
/// one shown) when given, else after the first `offset`. `has_more` is exact.
pub async fn list(
    store: &Store,
    who: &InboxSubscriber,
    mut f: MessageFilter,
    after: Option<MessageId>,
    offset: i64,
    limit: i64,
) -> Result<(Vec<Message>, bool)> {
    supported(&f)?;
    let offset = if after.is_some() { 0 } else { offset };
    f.older_than = after;
    store
        .list_messages_from(&who.tenant.environment_id, &f, offset, limit)
        .await
}

/// How many of the subscriber's notifications each filter selects, each counted up to [`INBOX_COUNT_CAP`].
pub async fn count(
    store: &Store,
    who: &InboxSubscriber,
    filters: &[MessageFilter],
) -> Result<Vec<i64>> {
    filters.iter().try_for_each(supported)?;
    let mut out = Vec::with_capacity(filters.len());
    for f in filters {
        out.push(
            store
                .count_up_to(&who.tenant.environment_id, f, INBOX_COUNT_CAP)
                .await?,
        );
    }
    Ok(out)
}

/// Marks one of the subscriber's notifications and answers it; another's, or an unknown id, is a 404.
pub async fn mark(store: &Store, who: &InboxSubscriber, id: &str, mark: MarkAs) -> Result<Message> {
    let f = MessageFilter {
        ids: vec![MessageId::from(id)],
        ..own(who)
    };
    store
        .mark_messages(&who.tenant.environment_id, &f, mark)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| not_found(id))
}

/// Snoozes a notification until `until` (ISO 8601): at least a minute ahead and at most
/// [`MAX_SNOOZE_HOURS`].
pub async fn snooze(
    store: &Store,
    who: &InboxSubscriber,
    id: &str,
    until: Option<&Value>,
) -> Result<Message> {
    let text = until.and_then(Value::as_str).unwrap_or_default();
    let Some(at) = chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
    else {
        return Err(Error::invalid(
            "snoozeUntil",
            "snoozeUntil must be a date (ISO 8601)",
            until.cloned().unwrap_or(Value::Null),
        ));
    };
    let now = Timestamp::now().0;
    if at < now + MIN_SNOOZE_MS {
        return Err(Error::bad_request(
            "snoozeUntil must be at least a minute in the future",
        ));
    }
    if at > now + MAX_SNOOZE_HOURS * 3_600_000 {
        return Err(Error::bad_request(format!(
            "snoozeUntil must be at most {MAX_SNOOZE_HOURS} hours in the future"
        )));
    }
    mark(store, who, id, MarkAs::Snooze(at)).await
}

/// Completes (`done`) or reverts (`pending`) the notification's primary or secondary action, recording
/// `payload` (`{}` when `None`) as the action's result.
pub async fn action(
    store: &Store,
    who: &InboxSubscriber,
    id: &str,
    action_type: Option<&Value>,
    done: bool,
    payload: Option<Map<String, Value>>,
) -> Result<Message> {
    let kind = match action_type.and_then(Value::as_str) {
        Some(k @ ("primary" | "secondary")) => k,
        _ => {
            return Err(Error::invalid(
                "actionType",
                "actionType must be primary or secondary",
                action_type.cloned().unwrap_or(Value::Null),
            ))
        }
    };
    let f = MessageFilter {
        ids: vec![MessageId::from(id)],
        ..own(who)
    };
    let env = &who.tenant.environment_id;
    let (found, _) = store.list_messages_from(env, &f, 0, 1).await?;
    let mut message = found.into_iter().next().ok_or_else(|| not_found(id))?;
    let cta = &mut message.cta;
    if !cta.is_object() {
        *cta = Value::Object(Map::new());
    }
    let action = cta
        .as_object_mut()
        .expect("an object")
        .entry("action")
        .or_insert_with(|| Value::Object(Map::new()));
    if !action.is_object() {
        *action = Value::Object(Map::new());
    }
    action["status"] = Value::from(if done { "done" } else { "pending" });
    action["result"] = serde_json::json!({"type": kind, "payload": payload.unwrap_or_default()});
    if store.set_message_cta(env, &f, &message.cta).await? == 0 {
        return Err(not_found(id));
    }
    Ok(message)
}

/// Deletes one of the subscriber's notifications.
pub async fn delete(store: &Store, who: &InboxSubscriber, id: &str) -> Result<()> {
    let f = MessageFilter {
        ids: vec![MessageId::from(id)],
        ..own(who)
    };
    match store.delete_where(&who.tenant.environment_id, &f).await? {
        0 => Err(not_found(id)),
        _ => Ok(()),
    }
}

/// What a bulk route does to the notifications its filter selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bulk {
    Seen,
    Read,
    Archive,
    /// Archives the read ones.
    ArchiveRead,
    Delete,
}

/// Applies `op` to the subscriber's notifications that `f` selects; answers how many changed.
pub async fn bulk(
    store: &Store,
    who: &InboxSubscriber,
    mut f: MessageFilter,
    op: Bulk,
) -> Result<u64> {
    let env = &who.tenant.environment_id;
    Ok(match op {
        Bulk::Seen => store.mark_where(env, &f, MarkAs::Seen).await?,
        Bulk::Read => store.mark_where(env, &f, MarkAs::Read).await?,
        Bulk::Archive => store.mark_where(env, &f, MarkAs::Archive).await?,
        Bulk::ArchiveRead => {
            f.read = Some(true);
            store.mark_where(env, &f, MarkAs::Archive).await?
        }
        Bulk::Delete => store.delete_where(env, &f).await?,
    })
}

fn not_found(id: &str) -> Error {
    Error::NotFound(format!("Notification with id {id} not found"))
}
