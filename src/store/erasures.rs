//! Erasing a deleted subscriber (issue 35). The delete removes, in one transaction, the subscriber's
//! record and what is keyed by its reusable subscriberId or bounded per subscriber — preferences, topic
//! subscriptions, channel endpoints and connections — and records a pending erasure. Workers then erase the
//! rest, which may be large, in bounded batches (`engine::erasure`): the notifications lose their recipient
//! (`to`, subscriberId) and their unfinished jobs, and the messages go.

use super::inbox_events::InboxEvent;
use super::row::sql_row;
use super::sql::{bind_args, Sql};
use super::{on_db, Store};
use crate::domain::subscriber::Subscriber;
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::Result;

sql_row! {
    /// A pending erasure, as a worker holds it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Erasure {
        pub subscriber_ref: String,
        pub environment_id: EnvironmentId,
        pub subscriber_id: String,
        /// When the subscriber was deleted (Unix ms).
        pub created_at: i64,
    }
}

/// A batch of the erased subscriber's notifications that still name it (`$1` environment, `$2`
/// subscriberId, `$3` its `_id`, `$4` the batch's size): a range of `notifications_subscriber`.
const ERASED_NOTIFICATIONS: &str = "select id from notifications where environment_id = $1 \
    and subscriber_id = $2 and subscriber_ref = $3 limit $4";

/// Deletes a batch of the erased subscriber's messages (`$1` environment, `$2` its `_id`, `$3` the batch's
/// size): a range of `messages_subscriber`.
const ERASED_MESSAGES: &str = "delete from messages where id in (select id from messages \
    where environment_id = $1 and subscriber_ref = $2 limit $3)";

/// A table of pending erasures, each claimed with a lease (`locked_by`, `locked_until`), oldest
/// (`created_at`) first: the table and its key column.
#[derive(Debug, Clone, Copy)]
pub(super) struct Queue {
    pub table: &'static str,
    pub key: &'static str,
}

/// The deleted subscribers being erased.
const SUBSCRIBERS: Queue = Queue {
    table: "subscriber_erasures",
    key: "subscriber_ref",
};

impl Store {
    /// Deletes the subscriber `s` and what is keyed by its subscriberId or small per subscriber, and
    /// records its erasure, in one transaction. `false` when the record was gone already (deleted by a
    /// concurrent request).
    pub async fn delete_subscriber(&self, s: &Subscriber) -> Result<bool> {
        let (env, r, id) = (
            s.environment_id.as_str(),
            s.id.as_str(),
            s.subscriber_id.as_str(),
        );
        let now = Timestamp::now().0;
        let deleted = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let n = sqlx::query("delete from subscribers where environment_id = $1 and id = $2 and deleted = false")
                .bind(env).bind(r).execute(&mut *tx).await?.rows_affected();
            if n == 1 {
                sqlx::query("delete from subscriber_preferences where environment_id = $1 and subscriber_ref = $2")
                    .bind(env).bind(r).execute(&mut *tx).await?;
                sqlx::query("delete from topic_subscriptions where environment_id = $1 and subscriber_ref = $2")
                    .bind(env).bind(r).execute(&mut *tx).await?;
                sqlx::query("delete from channel_endpoints where environment_id = $1 and subscriber_id = $2")
                    .bind(env).bind(id).execute(&mut *tx).await?;
                sqlx::query("delete from channel_connections where environment_id = $1 and subscriber_id = $2")
                    .bind(env).bind(id).execute(&mut *tx).await?;
                sqlx::query("insert into subscriber_erasures (subscriber_ref, environment_id, subscriber_id, created_at) \
                             values ($1, $2, $3, $4)")
                    .bind(r).bind(env).bind(id).bind(now).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok::<bool, sqlx::Error>(n == 1)
        })?;
        if deleted {
            // Its sessions end: their sockets are closed wherever they are held.
            self.inbox_events()
                .publish(vec![InboxEvent::subscriber_deleted(
                    &s.environment_id,
                    &s.id,
                )]);
        }
        Ok(deleted)
    }

    /// Claims a pending erasure whose lease is free (none, or run out at `now`) for `worker` until
    /// `now + lease_ms`. Atomic: processes claiming together each get a different one.
    pub async fn claim_erasure(
        &self,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<Option<Erasure>> {
        self.claim_queued(SUBSCRIBERS, Erasure::COLUMNS, worker, now, lease_ms)
            .await
    }

    /// Extends the lease of an erasure `worker` holds to `until`; `false` when it holds it no more.
    pub async fn renew_erasure(&self, e: &Erasure, worker: &str, until: i64) -> Result<bool> {
        self.renew_queued(SUBSCRIBERS, &e.subscriber_ref, worker, until)
            .await
    }

    /// Lets the erasure go until `until`: no worker claims it before.
    pub async fn postpone_erasure(&self, e: &Erasure, worker: &str, until: i64) -> Result<()> {
        self.postpone_queued(SUBSCRIBERS, &e.subscriber_ref, worker, until)
            .await
    }

    /// Claims the oldest pending erasure of `queue` whose lease is free (none, or run out at `now`) for
    /// `worker` until `now + lease_ms`, as a row of `columns`. Atomic: processes claiming together each get a
    /// different one.
    pub(super) async fn claim_queued<R>(
        &self,
        queue: Queue,
        columns: &str,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<Option<R>>
    where
        R: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
            + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
            + Send
            + Unpin,
    {
        let Queue { table, key } = queue;
        let mut q = Sql::new(&format!("update {table} set locked_by = "));
        q.bind(worker)
            .push(", locked_until = ")
            .bind(now + lease_ms);
        q.push(&format!(
            " where {key} = (select {key} from {table} where locked_until is null or locked_until <= "
        ))
        .bind(now)
        .push(" order by created_at limit 1)");
        q.push(" and (locked_until is null or locked_until <= ")
            .bind(now)
            .push(&format!(") returning {columns}"));
        Ok(
            on_db!(self.w(), p => bind_args!(sqlx::query_as::<_, R>(&q.text), q.args).fetch_optional(p).await)?,
        )
    }

    /// Extends the lease `worker` holds on the erasure `id` of `queue` to `until`; `false` when it holds it
    /// no more.
    pub(super) async fn renew_queued(
        &self,
        queue: Queue,
        id: &str,
        worker: &str,
        until: i64,
    ) -> Result<bool> {
        let Queue { table, key } = queue;
        let sql =
            format!("update {table} set locked_until = $1 where {key} = $2 and locked_by = $3");
        let n = on_db!(self.w(), p => sqlx::query(&sql)
            .bind(until).bind(id).bind(worker).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Lets the erasure `id` of `queue` go until `until`: no worker claims it before.
    pub(super) async fn postpone_queued(
        &self,
        queue: Queue,
        id: &str,
        worker: &str,
        until: i64,
    ) -> Result<()> {
        let Queue { table, key } = queue;
        let sql = format!(
            "update {table} set locked_by = null, locked_until = $1 where {key} = $2 and locked_by = $3"
        );
        on_db!(self.w(), p => sqlx::query(&sql)
            .bind(until).bind(id).bind(worker).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// Strips at most `limit` of the erased subscriber's notifications of their recipient (`to` and the
    /// subscriberId; activity keeps them with no subscriber) and their execution details of the providers'
    /// raw answers, and cancels their jobs not started yet, in one transaction; answers how many it stripped. Found through `notifications_subscriber`: a stripped one
    /// leaves its range, so the next batch starts afresh.
    pub async fn strip_erased_notifications(&self, e: &Erasure, limit: i64) -> Result<u64> {
        let now = Timestamp::now().0;
        let n = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let ids: Vec<String> = sqlx::query_scalar(ERASED_NOTIFICATIONS)
                .bind(&e.environment_id).bind(&e.subscriber_id).bind(&e.subscriber_ref).bind(limit)
                .fetch_all(&mut *tx).await?;
            if !ids.is_empty() {
                let mut q = Sql::new("update notifications set to_value = null, subscriber_id = '', updated_at = ");
                q.bind(now).push(" where environment_id = ").bind(e.environment_id.as_str());
                q.push_in("id", &ids);
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
                // What providers answered may name the recipient (a phone number, an address).
                let mut q = Sql::new("update execution_details set raw = null where raw is not null");
                q.push_in("notification_id", &ids);
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
                let mut q = Sql::new("update jobs set status = 'canceled', updated_at = ");
                q.bind(now).push(" where status in ('queued', 'pending')");
                q.push_in("notification_id", &ids);
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok::<u64, sqlx::Error>(ids.len() as u64)
        })?;
        Ok(n)
    }

    /// Deletes at most `limit` of the erased subscriber's messages (any channel, deleted or not, through
    /// `messages_subscriber`); answers how many.
    pub async fn delete_erased_messages(&self, e: &Erasure, limit: i64) -> Result<u64> {
        let mut q = Sql::new(ERASED_MESSAGES);
        q.args = vec![
            e.environment_id.as_str().into(),
            e.subscriber_ref.clone().into(),
            limit.into(),
        ];
        self.write_messages(q, None).await
    }

    /// Ends an erasure `worker` holds: what a subscriber deleted by an earlier build (only marked deleted)
    /// still has — its record, preferences and topic subscriptions — goes, then the erasure's row.
    pub async fn finish_erasure(&self, e: &Erasure, worker: &str) -> Result<()> {
        let (env, r) = (e.environment_id.as_str(), e.subscriber_ref.as_str());
        on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            sqlx::query("delete from subscribers where environment_id = $1 and id = $2 and deleted = true")
                .bind(env).bind(r).execute(&mut *tx).await?;
            sqlx::query("delete from subscriber_preferences where environment_id = $1 and subscriber_ref = $2")
                .bind(env).bind(r).execute(&mut *tx).await?;
            sqlx::query("delete from topic_subscriptions where environment_id = $1 and subscriber_ref = $2")
                .bind(env).bind(r).execute(&mut *tx).await?;
            sqlx::query("delete from subscriber_erasures where subscriber_ref = $1 and locked_by = $2")
                .bind(r).bind(worker).execute(&mut *tx).await?;
            tx.commit().await
        })?;
        Ok(())
    }

    /// How many erasures are pending in the environment (tests and operators).
    pub async fn pending_erasures(&self, env: &EnvironmentId) -> Result<i64> {
        Ok(on_db!(self.w(), p => sqlx::query_scalar::<_, i64>(
            "select count(*) from subscriber_erasures where environment_id = $1")
            .bind(env.as_str()).fetch_one(p).await)?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::plans::{migrated, plan};
    use super::*;

    #[test]
    fn batches_read_a_range_of_an_index() {
        let conn = migrated();
        assert_eq!(
            plan(&conn, ERASED_NOTIFICATIONS),
            "SEARCH notifications USING INDEX notifications_subscriber (environment_id=? AND subscriber_id=?)"
        );
        let p = plan(&conn, ERASED_MESSAGES);
        assert!(
            p.contains(
                "USING COVERING INDEX messages_subscriber (environment_id=? AND subscriber_ref=?)"
            ),
            "{p}"
        );
        assert!(!p.contains("SCAN messages"), "{p}");
    }
}
