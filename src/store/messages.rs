//! Messages: the inbox's list, mark-as, count and soft delete. They are written by job completions (see
//! `jobs`).

use serde_json::Value;
use sqlx::types::Json;

use super::page::PortableRow;
use super::row::{table, Table};
use super::sql::{bind_args, Sql};
use super::sqlite::rows::ReadRow;
use super::{on_db, Cost, Store};
use crate::domain::job::{Message, MessageDelivery};
use crate::domain::{EnvironmentId, MessageId, Timestamp};
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

/// Filters of `GET /v1/messages`.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    pub subscriber_id: Option<String>,
    pub channel: Option<String>,
    pub transaction_ids: Vec<String>,
    pub read: Option<bool>,
    pub seen: Option<bool>,
}

impl MessageFilter {
    /// `environment_id = … and deleted = false and …` for this filter.
    fn to_sql(&self, env: &EnvironmentId) -> Sql {
        let mut q = Sql::new("environment_id = ");
        q.bind(env.as_str()).push(" and deleted = false");
        if let Some(s) = &self.subscriber_id {
            q.push(" and subscriber_id = ").bind(s);
        }
        if let Some(c) = &self.channel {
            q.push(" and channel = ").bind(c);
        }
        if !self.transaction_ids.is_empty() {
            q.push_in("transaction_id", &self.transaction_ids);
        }
        if let Some(r) = self.read {
            q.push(" and read = ").bind(r);
        }
        if let Some(v) = self.seen {
            q.push(" and seen = ").bind(v);
        }
        q
    }
}

/// What `mark-as` sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkAs {
    Read,
    Seen,
    Unread,
    Unseen,
}

/// Runs `q` (a select without ordering) as page `page` of `limit` rows, newest first; `has_more` is exact
/// (reads `limit + 1`).
async fn newest_first_page<R: PortableRow + ReadRow + Into<T> + 'static, T>(
    store: &Store,
    mut q: Sql,
    page: i64,
    limit: i64,
) -> Result<(Vec<T>, bool)> {
    q.push(" order by created_at desc, id desc limit ")
        .bind(limit + 1)
        .push(" offset ")
        .bind(page * limit);
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
        let mut q = Sql::new("select ");
        q.push(Message::COLUMNS)
            .push(" from messages where ")
            .append(&f.to_sql(env));
        newest_first_page::<Message, Message>(self, q, page, limit).await
    }

    /// Marks the subscriber's messages among `ids`; others are left alone. Returns the updated messages.
    /// `read` also marks seen; `unread` leaves `seen` as it is; `seen`/`unseen` leave `read` as it is.
    pub async fn mark_messages(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
        ids: &[MessageId],
        mark: MarkAs,
    ) -> Result<Vec<Message>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let now = Timestamp::now().0;
        let mut q = Sql::new("update messages set ");
        push_mark(&mut q, mark, now);
        q.push(", updated_at = ").bind(now);
        q.push(" where environment_id = ")
            .bind(env.as_str())
            .push(" and subscriber_id = ")
            .bind(subscriber_id);
        q.push(" and deleted = false");
        q.push_in("id", ids);
        on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args.clone()).execute(p).await.map(|_| ()))?;
        let mut s = Sql::new("select ");
        s.push(Message::COLUMNS)
            .push(" from messages where environment_id = ")
            .bind(env.as_str());
        s.push(" and subscriber_id = ")
            .bind(subscriber_id)
            .push(" and deleted = false");
        s.push_in("id", ids);
        s.push(" order by created_at, id");
        Ok(
            on_db!(self.w(), p => bind_args!(sqlx::query_as::<_, Message>(&s.text), s.args.clone()).fetch_all(p).await)?,
        )
    }
}

impl Store {
    /// Counts the messages matching `f` (capped like cursor totals).
    pub async fn count_messages(&self, env: &EnvironmentId, f: &MessageFilter) -> Result<i64> {
        self.count_capped("messages", &f.to_sql(env)).await
    }

    /// Marks every message of the subscriber on `channel`; returns how many changed.
    pub async fn mark_all_messages(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
        channel: &str,
        mark: MarkAs,
    ) -> Result<u64> {
        let now = Timestamp::now().0;
        let mut q = Sql::new("update messages set ");
        let unchanged = push_mark(&mut q, mark, now);
        q.push(", updated_at = ").bind(now);
        q.push(" where environment_id = ").bind(env.as_str());
        q.push(" and subscriber_id = ").bind(subscriber_id);
        q.push(" and channel = ")
            .bind(channel)
            .push(" and deleted = false and ")
            .push(unchanged);
        let n = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args.clone())
            .execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n)
    }

    /// Soft-deletes a message; false when there is none.
    pub async fn delete_message(&self, env: &EnvironmentId, id: &MessageId) -> Result<bool> {
        let n = on_db!(self.w(), p => sqlx::query(
            "update messages set deleted = true, updated_at = $1 where environment_id = $2 and id = $3 and deleted = false")
            .bind(Timestamp::now().0).bind(env.as_str()).bind(id.as_str()).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }
}

/// Appends the `set` assignments for `mark` at `now`; returns the condition of rows it would change.
/// `read` also marks seen; `unread` leaves `seen` alone; `seen`/`unseen` leave `read` alone.
fn push_mark(q: &mut Sql, mark: MarkAs, now: i64) -> &'static str {
    match mark {
        MarkAs::Read => {
            q.push("read = true, seen = true, last_read_date = ")
                .bind(now);
            q.push(", last_seen_date = ").bind(now);
            "read = false"
        }
        MarkAs::Unread => {
            q.push("read = false, last_read_date = ").bind(now);
            "read = true"
        }
        MarkAs::Seen => {
            q.push("seen = true, last_seen_date = ").bind(now);
            "seen = false"
        }
        MarkAs::Unseen => {
            q.push("seen = false, last_seen_date = ").bind(now);
            "seen = true"
        }
    }
}
