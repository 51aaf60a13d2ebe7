//! Messages: the inbox's list, mark-as, count and soft delete. They are written by job completions (see
//! `jobs`). Every change to a stored message goes through [`Store::write_messages`], which announces the
//! in-app ones to the Inbox's sockets.

use serde_json::Value;
use sqlx::types::Json;

use super::inbox_events::InboxEvent;
use super::outbox::{insert_events, message_events, receivers, Handover};
use super::page::PortableRow;
use super::row::{table, Table};
use super::sql::{bind_args, Sql};
use super::sqlite::rows::ReadRow;
use super::{on_db, Cost, Dialect, Store};
use crate::crypto::Cipher;
use crate::domain::job::{Message, MessageDelivery};
use crate::domain::{Channel, EnvironmentId, MessageId, SubscriberRef, Timestamp};
use crate::error::Result;

table! {
    Message => "messages" {
        id: String,
        organization_id: String,
        environment_id: String,
        notification_id: String,
        subscriber_ref: String,
        subscriber_id: String,
        workflow_ref: String,
        workflow_identifier: String,
        job_id: String,
        transaction_id: String,
        channel: String,
        subject: Option<String>,
        content: String,
        avatar: Option<String>,
        cta: Json<Value>,
        data: Option<Json<Value>>,
        payload: Json<Value>,
        overrides: Option<Json<Value>>,
        read: bool,
        seen: bool,
        last_read_date: Option<i64>,
        last_seen_date: Option<i64>,
        archived: bool,
        archived_at: Option<i64>,
        first_seen_date: Option<i64>,
        snoozed_until: Option<i64>,
        tags: Json<Vec<String>>,
        severity: String,
        status: String,
        provider_id: String,
        context_keys: Json<Vec<String>>,
        deleted: bool,
        created_at: i64,
        updated_at: i64,
    }
    nested delivery: MessageDelivery {
        email: Option<String>,
        phone: Option<String>,
        direct_webhook_url: Option<String>,
        device_tokens: Option<Json<Vec<String>>>,
        delivered_at: Option<i64>,
        error_id: Option<String>,
        error_text: Option<String>,
    }
}

/// A message as stored, when it records destinations that are subscribers' channel credentials — a chat's
/// webhook URL, a push's device tokens — with each of them sealed (a token each, so the column keeps its
/// JSON list); `None` for a message without any (in-app, email, SMS), written as it is.
pub(super) fn sealed_message(cipher: &Cipher, m: &Message) -> Option<Message> {
    let d = &m.delivery;
    if d.direct_webhook_url.is_none() && d.device_tokens.is_none() {
        return None;
    }
    let mut sealed = m.clone();
    sealed.delivery = sealed_delivery(cipher, d);
    Some(sealed)
}

/// A delivery record as stored: its webhook URL and each device token sealed.
pub(super) fn sealed_delivery(cipher: &Cipher, d: &MessageDelivery) -> MessageDelivery {
    let seal = |s: &String| cipher.encrypt(s.as_bytes());
    MessageDelivery {
        direct_webhook_url: d.direct_webhook_url.as_ref().map(seal),
        device_tokens: d
            .device_tokens
            .as_ref()
            .map(|tokens| tokens.iter().map(seal).collect()),
        ..d.clone()
    }
}

impl Store {
    /// A message read from its row, what [`sealed_message`] sealed opened.
    fn open_message(&self, mut m: Message) -> Result<Message> {
        let open = |s: &String| {
            self.cipher()
                .decrypt_string(s)
                .map_err(|e| anyhow::anyhow!("a message's destination: {e}"))
        };
        let d = &mut m.delivery;
        if let Some(url) = &d.direct_webhook_url {
            d.direct_webhook_url = Some(open(url)?);
        }
        if let Some(tokens) = &d.device_tokens {
            d.device_tokens = Some(tokens.iter().map(open).collect::<anyhow::Result<_>>()?);
        }
        Ok(m)
    }
}

/// Which messages: the filters of `GET /v1/messages`, of a subscriber's feed and of the Inbox. Every field
/// narrows; the default is every message of the environment that is not deleted.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    /// The subscriber's record (`_id`), never the reusable subscriberId: a subscriber deleted and created
    /// again under the same subscriberId is another record and sees none of the first one's messages.
    pub subscriber_ref: Option<SubscriberRef>,
    pub channel: Option<String>,
    pub transaction_ids: Vec<String>,
    pub ids: Vec<MessageId>,
    pub read: Option<bool>,
    pub seen: Option<bool>,
    pub archived: Option<bool>,
    /// Snoozed now (`snoozed_until` still ahead).
    pub snoozed: Option<bool>,
    /// Each group is a set of tags of which the message must have one.
    pub tags: Vec<Vec<String>>,
    /// One of these severities.
    pub severity: Vec<String>,
    /// Conditions on the message's `data`, all of which must hold.
    pub data: Vec<DataCondition>,
    /// Conditions on the message's trigger `payload`, all of which must hold (the feed's `payload`).
    pub payload: Vec<DataCondition>,
    /// Created at or after / at or before (Unix ms).
    pub created_gte: Option<i64>,
    pub created_lte: Option<i64>,
    /// Older than this message of the same environment (the Inbox's `after` cursor: the last one shown).
    pub older_than: Option<MessageId>,
    /// Exactly these context keys (sorted; empty: messages of triggers without a context), as an Inbox
    /// session's context and `GET /v1/messages?contextKeys=` narrow messages. An equality on the stored
    /// sorted array, checked per row of the subscriber's range of `messages_subscriber`.
    pub context_keys: Option<Vec<String>>,
}

/// The value at `path` in a message's `data` or `payload` (a key, or keys of the objects under it) is one of
/// `any_of` (JSON values compared as JSON). Each key must be [`plain_key`].
#[derive(Debug, Clone, PartialEq)]
pub struct DataCondition {
    pub path: Vec<String>,
    pub any_of: Vec<Value>,
}

/// Longest key of a [`DataCondition`]'s path.
pub const MAX_PATH_KEY: usize = 100;

/// A key a [`DataCondition`]'s path may hold: 1 to [`MAX_PATH_KEY`] bytes, not starting with `$` or `.`, with
/// no quote, backslash or NUL (SQLite's JSON path quotes each key as it is).
pub fn plain_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_PATH_KEY
        && !key.starts_with(['$', '.'])
        && !key.contains(['"', '\\', '\0'])
}

impl MessageFilter {
    /// The in-app messages of one subscriber record (the Inbox's and the feed's scope).
    pub fn in_app_of(subscriber: &SubscriberRef) -> Self {
        Self {
            subscriber_ref: Some(subscriber.clone()),
            channel: Some(crate::domain::Channel::InApp.as_str().to_owned()),
            ..Default::default()
        }
    }

    /// The in-app messages of one subscriber in one context (sorted keys; none: messages without a context),
    /// as an Inbox session sees them.
    pub fn inbox_of(subscriber: &SubscriberRef, context_keys: &[String]) -> Self {
        Self {
            context_keys: Some(context_keys.to_vec()),
            ..Self::in_app_of(subscriber)
        }
    }

    /// `environment_id = … and deleted = false and …` for this filter, with `now` deciding what is snoozed.
    fn to_sql(&self, env: &EnvironmentId, dialect: Dialect, now: i64) -> Sql {
        let mut q = Sql::new("environment_id = ");
        q.bind(env.as_str()).push(" and deleted = false");
        if let Some(s) = &self.subscriber_ref {
            q.push(" and subscriber_ref = ").bind(s.as_str());
        }
        if let Some(c) = &self.channel {
            q.push(" and channel = ").bind(c);
        }
        if let Some(keys) = &self.context_keys {
            // JSON on both: SQLite compares the stored text, PostgreSQL the `jsonb`.
            q.push(" and context_keys = ")
                .bind(Value::from(keys.clone()));
        }
        if !self.transaction_ids.is_empty() {
            q.push_in("transaction_id", &self.transaction_ids);
        }
        if !self.ids.is_empty() {
            q.push_in("id", &self.ids);
        }
        for (column, value) in [
            ("read", self.read),
            ("seen", self.seen),
            ("archived", self.archived),
        ] {
            if let Some(value) = value {
                q.push(" and ").push(column).push(" = ").bind(value);
            }
        }
        match self.snoozed {
            Some(true) => q.push(" and snoozed_until > ").bind(now),
            Some(false) => q
                .push(" and (snoozed_until is null or snoozed_until <= ")
                .bind(now)
                .push(")"),
            None => &mut q,
        };
        for group in &self.tags {
            q.push_any_element(dialect, "messages.tags", group);
        }
        if !self.severity.is_empty() {
            q.push_in("severity", &self.severity);
        }
        for (column, conditions) in [("data", &self.data), ("payload", &self.payload)] {
            for c in conditions {
                q.push(" and (");
                for (i, value) in c.any_of.iter().enumerate() {
                    if i > 0 {
                        q.push(" or ");
                    }
                    push_json_path(&mut q, dialect, column, &c.path);
                    q.push(" = ").bind(value.clone());
                }
                q.push(")");
            }
        }
        if let Some(t) = self.created_gte {
            q.push(" and created_at >= ").bind(t);
        }
        if let Some(t) = self.created_lte {
            q.push(" and created_at <= ").bind(t);
        }
        if let Some(id) = &self.older_than {
            // Newest first is (created_at, id) descending: what follows the cursor is below it in that order.
            let mut anchor = Sql::new("(select created_at from messages where environment_id = ");
            anchor
                .bind(env.as_str())
                .push(" and id = ")
                .bind(id.as_str())
                .push(")");
            q.push(" and (created_at < ").append(&anchor);
            q.push(" or (created_at = ").append(&anchor);
            q.push(" and id < ").bind(id.as_str()).push("))");
        }
        q
    }
}

/// The JSON value at `path` in the JSON `column` (`data`, `payload`), comparable with a bound JSON value:
/// SQLite's `->` answers JSON text (bound values are JSON text too), PostgreSQL's `->` a `jsonb`.
fn push_json_path(q: &mut Sql, dialect: Dialect, column: &'static str, path: &[String]) {
    match dialect {
        Dialect::Sqlite => {
            // A path of quoted keys; `plain_key` refuses quotes and backslashes.
            let mut p = String::from("$");
            for key in path {
                p.push_str(&format!(".\"{key}\""));
            }
            q.push("(").push(column).push(" -> ").bind(p).push(")");
        }
        Dialect::Postgres => {
            q.push("(").push(column);
            for key in path {
                q.push(" -> ").bind(key.as_str());
            }
            q.push(")");
        }
    }
}

/// What a mark sets. `Read` also marks seen; `Unread` also unarchives (an unread message is never archived);
/// `Archive` also marks read and seen; `Unarchive` leaves the message read. Seeing a message the first time
/// records `first_seen_date`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkAs {
    Read,
    Seen,
    Unread,
    Unseen,
    Archive,
    Unarchive,
    /// Hidden from the Inbox until then (Unix ms).
    Snooze(i64),
    Unsnooze,
}

impl MarkAs {
    /// The webhook event the mark emits (Novu has none for unseen).
    pub fn event(self) -> Option<&'static str> {
        Some(match self {
            Self::Read => "message.read",
            Self::Seen => "message.seen",
            Self::Unread => "message.unread",
            Self::Unseen => return None,
            Self::Archive => "message.archived",
            Self::Unarchive => "message.unarchived",
            Self::Snooze(_) => "message.snoozed",
            Self::Unsnooze => "message.unsnoozed",
        })
    }
}

/// Runs `q` (a select without ordering) for `limit` rows after the first `offset`, newest first; `has_more`
/// is exact (reads `limit + 1`).
async fn newest_first_page<R: PortableRow + ReadRow + Into<T> + 'static, T>(
    store: &Store,
    mut q: Sql,
    offset: i64,
    limit: i64,
) -> Result<(Vec<T>, bool)> {
    q.push(" order by created_at desc, id desc limit ")
        .bind(limit + 1)
        .push(" offset ")
        .bind(offset);
    let mut rows: Vec<T> = store
        .rows::<R>(Cost::Scan, q)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let has_more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    Ok((rows, has_more))
}
impl Store {
    /// A page of non-deleted messages, newest first; `has_more` is exact.
    pub async fn list_messages(
        &self,
        env: &EnvironmentId,
        f: &MessageFilter,
        page: i64,
        limit: i64,
    ) -> Result<(Vec<Message>, bool)> {
        self.list_messages_from(env, f, page * limit, limit).await
    }

    /// `limit` non-deleted messages after the first `offset`, newest first; `has_more` is exact.
    pub async fn list_messages_from(
        &self,
        env: &EnvironmentId,
        f: &MessageFilter,
        offset: i64,
        limit: i64,
    ) -> Result<(Vec<Message>, bool)> {
        let mut q = Sql::new("select ");
        q.push(Message::COLUMNS)
            .push(" from messages where ")
            .append(&f.to_sql(env, self.dialect(), Timestamp::now().0));
        let (rows, has_more) =
            newest_first_page::<Message, Message>(self, q, offset, limit).await?;
        let rows = rows
            .into_iter()
            .map(|m| self.open_message(m))
            .collect::<Result<_>>()?;
        Ok((rows, has_more))
    }

    /// Marks the messages `f` selects and answers them (oldest first), marked.
    pub async fn mark_messages(
        &self,
        env: &EnvironmentId,
        f: &MessageFilter,
        mark: MarkAs,
    ) -> Result<Vec<Message>> {
        self.mark_where(env, f, mark).await?;
        let mut s = Sql::new("select ");
        s.push(Message::COLUMNS)
            .push(" from messages where ")
            .append(&f.to_sql(env, self.dialect(), Timestamp::now().0));
        s.push(" order by created_at, id");
        let rows: Vec<Message> = on_db!(self.w(), p => bind_args!(sqlx::query_as::<_, Message>(&s.text), s.args.clone()).fetch_all(p).await)?;
        rows.into_iter().map(|m| self.open_message(m)).collect()
    }
}

impl Store {
    /// Counts the messages matching `f` (capped like cursor totals).
    pub async fn count_messages(&self, env: &EnvironmentId, f: &MessageFilter) -> Result<i64> {
        self.count_capped(
            "messages",
            &f.to_sql(env, self.dialect(), Timestamp::now().0),
        )
        .await
    }

    /// Marks the messages `f` selects; returns how many changed (those already so are left alone).
    pub async fn mark_where(
        &self,
        env: &EnvironmentId,
        f: &MessageFilter,
        mark: MarkAs,
    ) -> Result<u64> {
        let now = Timestamp::now().0;
        let mut q = Sql::new("update messages set ");
        let unchanged = push_mark(&mut q, mark, now);
        q.push(", updated_at = ").bind(now);
        q.push(" where ")
            .append(&f.to_sql(env, self.dialect(), now))
            .push(" and ")
            .push(unchanged);
        self.write_messages(q, mark.event().map(|kind| (env, kind)))
            .await
    }

    /// Soft-deletes the messages `f` selects; returns how many.
    pub async fn delete_where(&self, env: &EnvironmentId, f: &MessageFilter) -> Result<u64> {
        let now = Timestamp::now().0;
        let mut q = Sql::new("update messages set deleted = true, updated_at = ");
        q.bind(now)
            .push(" where ")
            .append(&f.to_sql(env, self.dialect(), now));
        self.write_messages(q, Some((env, "message.deleted"))).await
    }

    /// Replaces the `cta` of the messages `f` selects; answers how many.
    pub async fn set_message_cta(
        &self,
        env: &EnvironmentId,
        f: &MessageFilter,
        cta: &Value,
    ) -> Result<u64> {
        let now = Timestamp::now().0;
        let mut q = Sql::new("update messages set cta = ");
        q.bind(cta.clone()).push(", updated_at = ").bind(now);
        q.push(" where ")
            .append(&f.to_sql(env, self.dialect(), now));
        self.write_messages(q, None).await
    }

    /// How many messages `f` selects, by severity: `[high, medium, low, none]`.
    pub async fn count_by_severity(
        &self,
        env: &EnvironmentId,
        f: &MessageFilter,
    ) -> Result<[i64; 4]> {
        let mut q = Sql::new("select severity, count(*) from messages where ");
        q.append(&f.to_sql(env, self.dialect(), Timestamp::now().0));
        q.push(" group by severity");
        let mut out = [0; 4];
        for (severity, n) in self.rows::<(String, i64)>(Cost::Scan, q).await? {
            let i = ["high", "medium", "low", "none"]
                .iter()
                .position(|s| *s == severity)
                .unwrap_or(3);
            out[i] += n;
        }
        Ok(out)
    }

    /// How many messages `f` selects, counting no further than `cap`.
    pub async fn count_up_to(
        &self,
        env: &EnvironmentId,
        f: &MessageFilter,
        cap: i64,
    ) -> Result<i64> {
        let filter = f.to_sql(env, self.dialect(), Timestamp::now().0);
        self.count_at_most("messages", &filter, cap).await
    }

    /// Ends the snoozes that are over at `now` (at most `limit`): each message whose `snoozed_until` has
    /// passed gets none, and is announced as new again (its subscriber's sockets get it, as when it was first
    /// delivered). Atomic per message, so that processes sweeping together each end (and announce) a
    /// different one. Answers how many ended.
    pub async fn end_snoozes(&self, now: i64, limit: i64) -> Result<usize> {
        let mut q = Sql::new("update messages set snoozed_until = null where id in (select id from messages where snoozed_until <= ");
        q.bind(now)
            .push(" and snoozed_until is not null limit ")
            .bind(limit);
        q.push(") and snoozed_until <= ")
            .bind(now)
            .push(" returning environment_id, subscriber_ref, id");
        let ended: Vec<(EnvironmentId, String, String)> = on_db!(self.w(), p => bind_args!(sqlx::query_as(&q.text), q.args.clone()).fetch_all(p).await)?;
        let n = ended.len();
        self.inbox_events().publish(
            ended
                .into_iter()
                .map(|(env, subscriber, id)| InboxEvent {
                    created: Some(id),
                    ..InboxEvent::changed(&env, &SubscriberRef::from(subscriber))
                })
                .collect(),
        );
        Ok(n)
    }

    /// Soft-deletes a message; `false` when there is no such message.
    pub async fn delete_message(&self, env: &EnvironmentId, id: &MessageId) -> Result<bool> {
        let mut q = Sql::new("update messages set deleted = true, updated_at = ");
        q.bind(Timestamp::now().0)
            .push(" where environment_id = ")
            .bind(env.as_str())
            .push(" and id = ")
            .bind(id.as_str())
            .push(" and deleted = false");
        Ok(self
            .write_messages(q, Some((env, "message.deleted")))
            .await?
            > 0)
    }

    /// Runs `q`, a write of messages (an `update` or a `delete` without `returning`), and announces the
    /// subscribers whose in-app messages it changed (`store::inbox_events`); answers how many rows it
    /// changed. Every change to the state of stored messages (marks, snoozes, actions, deletes, erasures)
    /// takes this one path, so that none has to be announced by its caller; messages are created by job
    /// completions, which announce them in the same way (`jobs::created`).
    pub(super) async fn write_messages(
        &self,
        mut q: Sql,
        event: Option<(&EnvironmentId, &'static str)>,
    ) -> Result<u64> {
        q.push(" returning environment_id, subscriber_ref, channel, id");
        let dialect = self.dialect();
        let sender = self.webhook_sender();
        let (rows, webhooks) = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let mut webhooks = Handover::new(None);
            let rows: Vec<(EnvironmentId, String, String, String)> =
                bind_args!(sqlx::query_as(&q.text), q.args.clone()).fetch_all(&mut *tx).await?;
            // The event of the change (`message.read`, …), in the outbox, with the messages as they are now.
            if let Some((env, kind)) = event.filter(|_| !rows.is_empty()) {
                let receivers = receivers!(tx, &[env.as_str()]);
                if receivers.want(env, kind) {
                    // In bounded statements: a mark of a whole feed may change thousands of messages.
                    for chunk in rows.chunks(500) {
                        let ids: Vec<&str> = chunk.iter().map(|r| r.3.as_str()).collect();
                        let mut s = Sql::new("select ");
                        s.push(Message::COLUMNS).push(" from messages where environment_id = ").bind(env.as_str());
                        s.push_in("id", &ids);
                        s.push(" order by created_at, id");
                        let changed: Vec<Message> =
                            bind_args!(sqlx::query_as::<_, Message>(&s.text), s.args).fetch_all(&mut *tx).await?;
                        let changed: Vec<&Message> = changed.iter().collect();
                        let events = message_events(&receivers, &changed, Some(kind));
                        webhooks.join(insert_events!(tx, dialect, sender.as_ref(), receivers, &events, Timestamp::now()));
                    }
                }
            }
            tx.commit().await.map(|_| (rows, webhooks))
        })?;
        webhooks.announce(self);
        let n = rows.len() as u64;
        let mut changed: Vec<(EnvironmentId, String)> = rows
            .into_iter()
            .filter(|(_, _, channel, _)| channel == Channel::InApp.as_str())
            .map(|(env, subscriber, _, _)| (env, subscriber))
            .collect();
        changed.sort_unstable();
        changed.dedup();
        self.inbox_events().publish(
            changed
                .into_iter()
                .map(|(env, subscriber)| {
                    InboxEvent::changed(&env, &SubscriberRef::from(subscriber))
                })
                .collect(),
        );
        Ok(n)
    }
}

/// Appends the `set` assignments for `mark` at `now`; returns the condition of rows it would change.
fn push_mark(q: &mut Sql, mark: MarkAs, now: i64) -> &'static str {
    const FIRST_SEEN: &str = ", first_seen_date = coalesce(first_seen_date, ";
    match mark {
        MarkAs::Read => {
            q.push("read = true, seen = true, last_read_date = ")
                .bind(now);
            q.push(", last_seen_date = ").bind(now);
            q.push(FIRST_SEEN).bind(now).push(")");
            "read = false"
        }
        MarkAs::Unread => {
            q.push("read = false, last_read_date = null, archived = false, archived_at = null");
            "read = true"
        }
        MarkAs::Seen => {
            q.push("seen = true, last_seen_date = ").bind(now);
            q.push(FIRST_SEEN).bind(now).push(")");
            "seen = false"
        }
        MarkAs::Unseen => {
            q.push("seen = false, last_seen_date = ").bind(now);
            "seen = true"
        }
        MarkAs::Archive => {
            q.push("archived = true, archived_at = ").bind(now);
            q.push(", read = true, seen = true, last_read_date = coalesce(last_read_date, ")
                .bind(now)
                .push(")");
            q.push(", last_seen_date = coalesce(last_seen_date, ")
                .bind(now)
                .push(")");
            q.push(FIRST_SEEN).bind(now).push(")");
            "archived = false"
        }
        MarkAs::Unarchive => {
            q.push("archived = false, archived_at = null");
            "archived = true"
        }
        MarkAs::Snooze(until) => {
            q.push("snoozed_until = ").bind(until);
            "true"
        }
        MarkAs::Unsnooze => {
            q.push("snoozed_until = null");
            "snoozed_until is not null"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::plans::{migrated, plan};
    use super::*;

    /// A subscriber's feed, counts and marks select its messages by record through `messages_subscriber`,
    /// newest first without a sort.
    #[test]
    fn a_subscribers_messages_are_a_range_of_their_index() {
        let conn = migrated();
        let f = MessageFilter {
            read: Some(false),
            ..MessageFilter::in_app_of(&SubscriberRef::from("6b06cf4f733d86000000004d"))
        };
        let mut q = Sql::new("select id from messages where ");
        q.append(&f.to_sql(&EnvironmentId("e".into()), Dialect::Sqlite, 0));
        q.push(" order by created_at desc, id desc limit 11");
        assert_eq!(
            plan(&conn, &q.text),
            "SEARCH messages USING INDEX messages_subscriber (environment_id=? AND subscriber_ref=? AND deleted=?)"
        );
    }

    /// An Inbox session's messages (its subscriber's record and context) are read from the subscriber's range
    /// of `messages_subscriber`, newest first without a sort, the context checked per row.
    #[test]
    fn an_inbox_sessions_messages_are_a_range_of_their_index() {
        let conn = migrated();
        let f = MessageFilter::inbox_of(
            &SubscriberRef::from("6b06cf4f733d86000000004d"),
            &["tenant:acme".to_owned()],
        );
        let mut q = Sql::new("select id from messages where ");
        q.append(&f.to_sql(&EnvironmentId("e".into()), Dialect::Sqlite, 0));
        q.push(" order by created_at desc, id desc limit 11");
        let p = plan(&conn, &q.text);
        assert_eq!(
            p,
            "SEARCH messages USING INDEX messages_subscriber (environment_id=? AND subscriber_ref=? AND deleted=?)"
        );
        assert!(!p.contains("TEMP B-TREE"), "{p}");
    }
}
