//! Erasing a deleted environment (issue 38). The delete removes, in one transaction, the environment and its
//! API keys (so its keys, its Inbox identifier and its sessions are refused at once, and its name is free
//! again) and records a pending erasure; workers then delete the environment's rows table by table in
//! bounded batches (`engine::erasure`, the loop that erases deleted subscribers), each batch a short
//! transaction of its own.

use super::erasures::Queue;
use super::inbox_events::InboxEvent;
use super::row::sql_row;
use super::sql::{bind_args, Sql};
use super::{on_db, Db, Store};
use crate::domain::{EnvironmentId, OrganizationId, Timestamp};
use crate::error::Result;

sql_row! {
    /// A pending environment erasure, as a worker holds it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct EnvironmentErasure {
        pub environment_id: EnvironmentId,
        pub organization_id: OrganizationId,
        /// When the environment was deleted (Unix ms).
        pub created_at: i64,
    }
}

/// The deleted environments being erased.
const ENVIRONMENTS: Queue = Queue {
    table: "environment_erasures",
    key: "environment_id",
};

/// The tables holding an environment's rows and how a row names it (`$1`: the environment's id), in the
/// order they are erased: what refers to a row goes before it. A notification's execution details and jobs
/// go with it first ([`Store::delete_erased_notifications`]: the details have no index by environment);
/// the details left over are looked for last. A new table with an `environment_id` column belongs here
/// (`tests/it/environments_api.rs` lists every such table of the schema and checks that none keeps a row).
const TABLES: &[(&str, &str)] = &[
    ("messages", "environment_id = $1"),
    ("jobs", "environment_id = $1"),
    ("notifications", "environment_id = $1"),
    ("trigger_transactions", "environment_id = $1"),
    ("fanouts", "environment_id = $1"),
    ("topic_subscriptions", "environment_id = $1"),
    ("topics", "environment_id = $1"),
    ("subscriber_preferences", "environment_id = $1"),
    ("subscriber_erasures", "environment_id = $1"),
    ("channel_endpoints", "environment_id = $1"),
    ("channel_connections", "environment_id = $1"),
    ("subscribers", "environment_id = $1"),
    ("integrations", "environment_id = $1"),
    ("workflows", "environment_id = $1"),
    ("contexts", "environment_id = $1"),
    ("webhook_attempts", "environment_id = $1"),
    ("webhook_messages", "environment_id = $1"),
    ("webhook_events", "environment_id = $1"),
    ("webhook_endpoints", "environment_id = $1"),
    ("idempotency_keys", "environment_id = $1"),
    ("rate_limit_buckets", "environment_id = $1"),
    // A throttle's key starts with its environment's id and `|` (`engine::plan`): a range of the key.
    (
        "throttle_passes",
        "throttle_key >= (cast($1 as text) || '|') and throttle_key < (cast($1 as text) || '}')",
    ),
    ("execution_details", "environment_id = $1"),
];

/// What [`Store::delete_environment`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvironmentDeletion {
    /// Deleted; its rows are being erased.
    Deleted,
    /// No such environment in the organization.
    NotFound,
    /// Refused: it is the organization's last environment.
    Last,
}

impl Store {
    /// Deletes the organization's environment `env` and its API keys, and records its erasure, in one
    /// transaction, unless it is the organization's last one. The organization's row is locked for the
    /// transaction on PostgreSQL (SQLite has one writer), so two deletes of its last two environments cannot
    /// both pass. Every Inbox socket of the environment is closed.
    pub async fn delete_environment(
        &self,
        org: &OrganizationId,
        env: &EnvironmentId,
    ) -> Result<EnvironmentDeletion> {
        let (o, e) = (org.as_str(), env.as_str());
        let now = Timestamp::now().0;
        let postgres = matches!(self.w(), Db::Postgres(_));
        let outcome = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            if postgres {
                sqlx::query("select id from organizations where id = $1 for update")
                    .bind(o).execute(&mut *tx).await?;
            }
            let (exists, count): (i64, i64) = sqlx::query_as(
                "select count(case when id = $2 then 1 end), count(*) from environments where organization_id = $1")
                .bind(o).bind(e).fetch_one(&mut *tx).await?;
            let outcome = if exists == 0 {
                EnvironmentDeletion::NotFound
            } else if count <= 1 {
                EnvironmentDeletion::Last
            } else {
                sqlx::query("delete from api_keys where environment_id = $1")
                    .bind(e).execute(&mut *tx).await?;
                sqlx::query("delete from environments where id = $1 and organization_id = $2")
                    .bind(e).bind(o).execute(&mut *tx).await?;
                sqlx::query("insert into environment_erasures (environment_id, organization_id, created_at) \
                             values ($1, $2, $3)")
                    .bind(e).bind(o).bind(now).execute(&mut *tx).await?;
                EnvironmentDeletion::Deleted
            };
            tx.commit().await?;
            Ok::<EnvironmentDeletion, sqlx::Error>(outcome)
        })?;
        if outcome == EnvironmentDeletion::Deleted {
            // Its sessions are refused already (they read the environment); their sockets close, and the
            // keys cached by every process are forgotten (`api::auth::forget_deleted_environments`).
            self.inbox_events()
                .publish(vec![InboxEvent::environment_deleted(env)]);
        }
        Ok(outcome)
    }

    /// Claims a pending environment erasure whose lease is free for `worker` until `now + lease_ms`.
    pub async fn claim_environment_erasure(
        &self,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<Option<EnvironmentErasure>> {
        self.claim_queued(
            ENVIRONMENTS,
            EnvironmentErasure::COLUMNS,
            worker,
            now,
            lease_ms,
        )
        .await
    }

    /// Extends the lease of an environment erasure `worker` holds to `until`; `false` when it holds it no
    /// more.
    pub async fn renew_environment_erasure(
        &self,
        e: &EnvironmentErasure,
        worker: &str,
        until: i64,
    ) -> Result<bool> {
        self.renew_queued(ENVIRONMENTS, e.environment_id.as_str(), worker, until)
            .await
    }

    /// Lets the environment erasure go until `until`: no worker claims it before.
    pub async fn postpone_environment_erasure(
        &self,
        e: &EnvironmentErasure,
        worker: &str,
        until: i64,
    ) -> Result<()> {
        self.postpone_queued(ENVIRONMENTS, e.environment_id.as_str(), worker, until)
            .await
    }

    /// Deletes at most `limit` rows of the erased environment, from the first table of [`TABLES`] that
    /// still holds some (its notifications first, each with its execution details and jobs); answers how
    /// many, 0 when none is left.
    pub async fn erase_environment_batch(&self, e: &EnvironmentErasure, limit: i64) -> Result<u64> {
        let n = self.delete_erased_notifications(e, limit).await?;
        if n > 0 {
            return Ok(n);
        }
        for (table, names) in TABLES {
            let n = self.delete_environment_rows(table, names, e, limit).await?;
            if n > 0 {
                return Ok(n);
            }
        }
        Ok(0)
    }

    /// Deletes at most `limit` of the erased environment's notifications with their execution details and
    /// jobs, in one transaction; answers how many notifications.
    async fn delete_erased_notifications(&self, e: &EnvironmentErasure, limit: i64) -> Result<u64> {
        let env = e.environment_id.as_str();
        let n = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let ids: Vec<String> = sqlx::query_scalar(
                "select id from notifications where environment_id = $1 limit $2")
                .bind(env).bind(limit).fetch_all(&mut *tx).await?;
            if !ids.is_empty() {
                for table in ["execution_details", "jobs"] {
                    let mut q = Sql::new(&format!("delete from {table} where true"));
                    q.push_in("notification_id", &ids);
                    bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
                }
                let mut q = Sql::new("delete from notifications where environment_id = ");
                q.bind(env);
                q.push_in("id", &ids);
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok::<u64, sqlx::Error>(ids.len() as u64)
        })?;
        Ok(n)
    }

    /// Deletes at most `limit` rows of `table` that `names` (a condition on `$1`, the environment's id)
    /// says are the erased environment's; answers how many.
    async fn delete_environment_rows(
        &self,
        table: &str,
        names: &str,
        e: &EnvironmentErasure,
        limit: i64,
    ) -> Result<u64> {
        let sql = match self.w() {
            Db::Sqlite(_) => format!(
                "delete from {table} where rowid in (select rowid from {table} where {names} limit $2)"
            ),
            // A list of row addresses: a TID scan, where `in (select …)` may scan the table.
            Db::Postgres(_) => format!(
                "delete from {table} where ctid = any(array(select ctid from {table} where {names} limit $2))"
            ),
        };
        Ok(on_db!(self.w(), p => sqlx::query(&sql)
            .bind(e.environment_id.as_str()).bind(limit).execute(p).await.map(|r| r.rows_affected()))?)
    }

    /// Ends an environment erasure `worker` holds: its row goes.
    pub async fn finish_environment_erasure(
        &self,
        e: &EnvironmentErasure,
        worker: &str,
    ) -> Result<()> {
        on_db!(self.w(), p => sqlx::query(
            "delete from environment_erasures where environment_id = $1 and locked_by = $2")
            .bind(e.environment_id.as_str()).bind(worker).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// How many environment erasures are pending in the organization (tests and operators).
    pub async fn pending_environment_erasures(&self, org: &OrganizationId) -> Result<i64> {
        Ok(on_db!(self.w(), p => sqlx::query_scalar::<_, i64>(
            "select count(*) from environment_erasures where organization_id = $1")
            .bind(org.as_str()).fetch_one(p).await)?)
    }
}
