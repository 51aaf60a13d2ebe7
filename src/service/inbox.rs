//! In-app messages: listing, a subscriber's feed and unseen count, marking, deleting.

use serde_json::Value;

use super::limits::MESSAGE_IDS;
use super::over_cap;
use crate::domain::id::is_object_id;
use crate::domain::job::Message;
use crate::domain::{MessageId, SubscriberRef, Tenant};
use crate::error::{Error, Result, Validation};
use crate::store::messages::{plain_key, DataCondition, MarkAs, MessageFilter};
use crate::store::Store;

/// The `_id` of the environment's current subscriber `subscriber_id`: what its messages are selected by, so
/// that a subscriber deleted and created again under the same subscriberId sees none of the first one's.
async fn require_subscriber(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
) -> Result<SubscriberRef> {
    match store
        .get_subscriber(&tenant.environment_id, subscriber_id)
        .await?
    {
        Some(s) => Ok(s.id),
        None => Err(Error::NotFound(format!(
            "Subscriber {subscriber_id} not found"
        ))),
    }
}

/// A page of messages (newest first), whether more follow, and the total count.
pub async fn list(
    store: &Store,
    tenant: &Tenant,
    f: &MessageFilter,
    page: i64,
    limit: i64,
) -> Result<(Vec<Message>, bool, i64)> {
    let (messages, has_more) = store
        .list_messages(&tenant.environment_id, f, page, limit)
        .await?;
    let total = store.count_messages(&tenant.environment_id, f).await?;
    Ok((messages, has_more, total))
}

/// [`list`], narrowed to the current subscriber `subscriber_id` when one is given (by its `_id`: a deleted
/// subscriber's messages are not another's of the same subscriberId); none such has no messages.
pub async fn list_of(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: Option<&str>,
    mut f: MessageFilter,
    page: i64,
    limit: i64,
) -> Result<(Vec<Message>, bool, i64)> {
    if let Some(subscriber_id) = subscriber_id {
        match store
            .get_subscriber(&tenant.environment_id, subscriber_id)
            .await?
        {
            Some(s) => f.subscriber_ref = Some(s.id),
            None => return Ok((Vec::new(), false, 0)),
        }
    }
    list(store, tenant, &f, page, limit).await
}

/// What a subscriber's feed shows: its messages of these `read` and `seen` states whose trigger payload
/// holds `payload`'s values (the query's, see [`payload_filter`]), a page of `limit` of them.
#[derive(Debug, Clone, Default)]
pub struct FeedQuery {
    pub read: Option<bool>,
    pub seen: Option<bool>,
    pub payload: Option<String>,
    pub page: i64,
    pub limit: i64,
}

/// The subscriber's in-app feed, as `q` narrows it.
pub async fn feed(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    q: &FeedQuery,
) -> Result<(Vec<Message>, bool, i64)> {
    let payload = match q.payload.as_deref() {
        Some(raw) => {
            let mut v = Validation::new();
            let conditions = payload_filter(&mut v, raw);
            v.finish()?;
            conditions
        }
        None => Vec::new(),
    };
    let subscriber = require_subscriber(store, tenant, subscriber_id).await?;
    let f = MessageFilter {
        read: q.read,
        seen: q.seen,
        payload,
        ..MessageFilter::in_app_of(&subscriber)
    };
    list(store, tenant, &f, q.page, q.limit).await
}

/// Most keys a feed's `payload` filter may hold.
pub const PAYLOAD_KEYS: usize = 10;
/// Most segments of one dotted key of a `payload` filter.
const PAYLOAD_DEPTH: usize = 5;

/// The feed's `payload` filter, as Novu takes it: a JSON object, sent as it is or encoded in base64
/// (`btoa(JSON.stringify({...}))`). Each key is a path into the trigger payload (`a.b` is `b` inside `a`,
/// as Novu's dotted keys are), and the value there must equal the given one (compared as JSON: an
/// object or an array must be equal as a whole).
pub fn payload_filter(v: &mut Validation, raw: &str) -> Vec<DataCondition> {
    use base64::Engine;
    let trimmed = raw.trim();
    let decoded = [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::URL_SAFE,
    ]
    .iter()
    .find_map(|engine| engine.decode(trimmed).ok())
    .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
    let object = match decoded.or_else(|| serde_json::from_str::<Value>(trimmed).ok()) {
        Some(Value::Object(o)) => o,
        _ => {
            v.add(
                "payload",
                "payload must be a JSON object, as it is or encoded in base64",
                raw,
            );
            return Vec::new();
        }
    };
    if object.len() > PAYLOAD_KEYS {
        v.add(
            "payload",
            format!("payload may hold at most {PAYLOAD_KEYS} keys"),
            Value::Object(object.clone()),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    for (key, value) in object {
        let path: Vec<String> = key.split('.').map(str::to_owned).collect();
        let bad = path.len() > PAYLOAD_DEPTH || !path.iter().all(|p| plain_key(p));
        if bad {
            v.add(
                &format!("payload.{key}"),
                format!(
                    "a payload key is 1 to {PAYLOAD_DEPTH} dot-separated names of 1 to 100 characters, none starting with $ or holding a quote or backslash"
                ),
                key.as_str(),
            );
            continue;
        }
        out.push(DataCondition {
            path,
            any_of: vec![value],
        });
    }
    out
}

/// How many of the subscriber's in-app messages have the given `read` and `seen` states.
pub async fn count(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    read: Option<bool>,
    seen: Option<bool>,
) -> Result<i64> {
    let subscriber = require_subscriber(store, tenant, subscriber_id).await?;
    let f = MessageFilter {
        seen,
        read,
        ..MessageFilter::in_app_of(&subscriber)
    };
    store.count_messages(&tenant.environment_id, &f).await
}

/// `read`, `seen`, `unread` or `unseen`; anything else is added to `v` as a bad `markAs`.
fn parse_mark(v: &mut Validation, s: &str) -> Option<MarkAs> {
    match s {
        "read" => Some(MarkAs::Read),
        "seen" => Some(MarkAs::Seen),
        "unread" => Some(MarkAs::Unread),
        "unseen" => Some(MarkAs::Unseen),
        _ => {
            v.add(
                "markAs",
                "markAs must be one of: read, seen, unread, unseen",
                s,
            );
            None
        }
    }
}

/// Marks the subscriber's own messages among `message_id` (one id or an array of ids); other ids are
/// ignored. Returns the updated messages.
pub async fn mark_as(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    message_id: &Value,
    mark_as: &str,
) -> Result<Vec<Message>> {
    let mut v = Validation::new();
    let ids: Option<Vec<MessageId>> = match message_id {
        Value::String(s) => Some(vec![MessageId::from(s.as_str())]),
        Value::Array(items) if over_cap(&mut v, "messageId", items.len(), MESSAGE_IDS) => None,
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(MessageId::from))
            .collect(),
        _ => None,
    };
    let ids = ids.filter(|ids| !ids.is_empty() && ids.iter().all(|id| is_object_id(id.as_str())));
    if ids.is_none() && v.is_empty() {
        v.add(
            "messageId",
            "messageId must be a message id (24 hexadecimal characters) or a non-empty array of them",
            message_id.clone(),
        );
    }
    let mark = parse_mark(&mut v, mark_as);
    let (Some(ids), Some(mark)) = (ids, mark) else {
        return Err(Error::Validation(v));
    };
    let subscriber = require_subscriber(store, tenant, subscriber_id).await?;
    let f = MessageFilter {
        subscriber_ref: Some(subscriber),
        ids,
        ..Default::default()
    };
    store.mark_messages(&tenant.environment_id, &f, mark).await
}

/// Sets the status (`pending` or `done`) of a message's `kind` (primary or secondary) action and its
/// result's `payload` (an object, `{}` without one): the Inbox's action change
/// ([`super::inbox_notifications::action`]) on the subscriber's messages of every context. An unknown
/// subscriber, or a message that is not one of its in-app messages, is a 404.
pub async fn message_action(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    message_id: &str,
    kind: &str,
    status: Option<&Value>,
    payload: Option<&Value>,
) -> Result<Message> {
    let mut v = Validation::new();
    let done = match status.and_then(Value::as_str) {
        Some("done") => Some(true),
        Some("pending") => Some(false),
        _ => {
            let got = status.cloned().unwrap_or(Value::Null);
            v.add("status", "status must be one of: pending, done", got);
            None
        }
    };
    let payload = match payload {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(other) => {
            v.add("payload", "payload must be an object", other.clone());
            None
        }
    };
    let Some(done) = done.filter(|_| v.is_empty()) else {
        return Err(Error::Validation(v));
    };
    let who =
        super::inbox_notifications::api_subscriber(store, tenant, subscriber_id, None).await?;
    let kind = Value::from(kind);
    super::inbox_notifications::action(store, &who, message_id, Some(&kind), done, payload).await
}

/// Marks all the subscriber's in-app messages; returns how many changed.
pub async fn mark_all(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    mark_as: &str,
) -> Result<u64> {
    let mut v = Validation::new();
    let Some(mark) = parse_mark(&mut v, mark_as) else {
        return Err(Error::Validation(v));
    };
    let subscriber = require_subscriber(store, tenant, subscriber_id).await?;
    let f = MessageFilter::in_app_of(&subscriber);
    store.mark_where(&tenant.environment_id, &f, mark).await
}

pub async fn delete(store: &Store, tenant: &Tenant, message_id: &MessageId) -> Result<()> {
    if store
        .delete_message(&tenant.environment_id, message_id)
        .await?
    {
        Ok(())
    } else {
        Err(Error::NotFound(format!(
            "Message with id {message_id} not found"
        )))
    }
}

/// Deletes the environment's messages `f` selects (a trigger's, by transaction id); none is a 404, as
/// Novu answers it.
pub async fn delete_where(store: &Store, tenant: &Tenant, f: &MessageFilter) -> Result<()> {
    if store.delete_where(&tenant.environment_id, f).await? == 0 {
        return Err(Error::NotFound("Invalid transactionId or channel".into()));
    }
    Ok(())
}
