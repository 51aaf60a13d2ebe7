//! In-app messages: listing, a subscriber's feed and unseen count, marking, deleting.

use crate::domain::id::is_object_id;
use crate::domain::job::Message;
use crate::domain::{Channel, Tenant};
use crate::error::{Error, Result};
use crate::store::engine::{MarkAs, MessageFilter};
use crate::store::Store;

async fn require_subscriber(store: &Store, tenant: &Tenant, subscriber_id: &str) -> Result<()> {
    match store
        .get_subscriber(&tenant.environment_id, subscriber_id)
        .await?
    {
        Some(_) => Ok(()),
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

/// The subscriber's in-app feed.
pub async fn feed(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    read: Option<bool>,
    seen: Option<bool>,
    page: i64,
    limit: i64,
) -> Result<(Vec<Message>, bool, i64)> {
    require_subscriber(store, tenant, subscriber_id).await?;
    let f = MessageFilter {
        subscriber_id: Some(subscriber_id.to_owned()),
        channel: Some(Channel::InApp.as_str().to_owned()),
        read,
        seen,
        ..Default::default()
    };
    list(store, tenant, &f, page, limit).await
}

/// How many in-app messages the subscriber has not seen (or not read, with `read_only`).
pub async fn unseen_count(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    unread: bool,
) -> Result<i64> {
    require_subscriber(store, tenant, subscriber_id).await?;
    let f = MessageFilter {
        subscriber_id: Some(subscriber_id.to_owned()),
        channel: Some(Channel::InApp.as_str().to_owned()),
        seen: (!unread).then_some(false),
        read: unread.then_some(false),
        ..Default::default()
    };
    store.count_messages(&tenant.environment_id, &f).await
}

/// `read`, `seen`, `unread` or `unseen`; anything else is a 422 on `markAs`.
pub fn parse_mark(s: &str) -> Result<MarkAs> {
    match s {
        "read" => Ok(MarkAs::Read),
        "seen" => Ok(MarkAs::Seen),
        "unread" => Ok(MarkAs::Unread),
        "unseen" => Ok(MarkAs::Unseen),
        _ => Err(Error::invalid(
            "markAs",
            "markAs must be read, seen, unread or unseen",
            s,
        )),
    }
}

/// Marks the subscriber's own messages among `ids`; other ids are ignored. Returns the updated messages.
pub async fn mark_as(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    ids: &[String],
    mark: MarkAs,
) -> Result<Vec<Message>> {
    if ids.is_empty() || ids.iter().any(|id| !is_object_id(id)) {
        return Err(Error::invalid(
            "messageId",
            "messageId must be a database id or a non-empty array of database ids",
            serde_json::json!(ids),
        ));
    }
    require_subscriber(store, tenant, subscriber_id).await?;
    store
        .mark_messages(&tenant.environment_id, subscriber_id, ids, mark)
        .await
}

/// Marks all the subscriber's in-app messages; returns how many changed.
pub async fn mark_all(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    mark: MarkAs,
) -> Result<u64> {
    require_subscriber(store, tenant, subscriber_id).await?;
    store
        .mark_all_messages(
            &tenant.environment_id,
            subscriber_id,
            Channel::InApp.as_str(),
            mark,
        )
        .await
}

pub async fn delete(store: &Store, tenant: &Tenant, message_id: &str) -> Result<()> {
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
