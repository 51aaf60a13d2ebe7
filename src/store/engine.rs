//! The delivery engine's tables: triggers, notifications, jobs (claimed with leases), execution details
//! and messages. Everything a step produces is written in the transaction that completes its job.

use serde_json::Value;
use sqlx::types::Json;

use super::page::PortableRow;
use super::sql::{bind_args, Sql};
use super::{on_db, Dialect, Store};
use crate::domain::context::context_set;
use crate::domain::job::{ExecutionDetail, Job, Message, Notification};
use crate::domain::workflow::Step;
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::Result;

const JOB_COLUMNS: &str = "id, organization_id, environment_id, notification_id, subscriber_ref, subscriber_id, \
    workflow_ref, transaction_id, step_index, step, status, provider_id, payload, overrides, digest, digest_key, run_at, \
    attempts, dedupe_key, schedule_extensions_count, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct JobRow {
    id: String,
    organization_id: String,
    environment_id: String,
    notification_id: String,
    subscriber_ref: String,
    subscriber_id: String,
    workflow_ref: String,
    transaction_id: String,
    step_index: i64,
    step: Json<Step>,
    status: String,
    provider_id: String,
    payload: Json<Value>,
    overrides: Option<Json<Value>>,
    digest: Option<Json<Value>>,
    digest_key: Option<String>,
    run_at: i64,
    attempts: i64,
    dedupe_key: String,
    schedule_extensions_count: i64,
    created_at: i64,
    updated_at: i64,
}

impl From<JobRow> for Job {
    fn from(r: JobRow) -> Self {
        Job {
            id: r.id,
            organization_id: r.organization_id,
            environment_id: r.environment_id,
            notification_id: r.notification_id,
            subscriber_ref: r.subscriber_ref,
            subscriber_id: r.subscriber_id,
            workflow_ref: r.workflow_ref,
            transaction_id: r.transaction_id,
            step_index: r.step_index,
            step: r.step.0,
            status: r.status,
            provider_id: r.provider_id,
            payload: r.payload.0,
            overrides: r.overrides.map(|j| j.0),
            digest: r.digest.map(|j| j.0),
            digest_key: r.digest_key,
            run_at: Timestamp(r.run_at),
            attempts: r.attempts,
            dedupe_key: r.dedupe_key,
            schedule_extensions_count: r.schedule_extensions_count,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
    }
}

/// Everything a finished job leaves behind, written atomically with its final status.
#[derive(Debug, Default)]
pub struct JobOutcome {
    /// `completed`, `failed`, `skipped`, …
    pub status: String,
    pub details: Vec<ExecutionDetail>,
    pub message: Option<Message>,
    /// The job of the next step, if the chain goes on.
    pub next: Option<Job>,
    /// A digest job that absorbs this job's event instead of running it separately.
    pub merge_into: Option<(String, Value)>,
}

/// Filters of `GET /v1/notifications`, combined with AND.
#[derive(Debug, Clone, Default)]
pub struct NotificationFilter {
    pub channels: Vec<String>,
    pub workflow_refs: Vec<String>,
    pub subscriber_ids: Option<Vec<String>>,
    pub severity: Vec<String>,
    pub transaction_id: Option<String>,
    pub context_set: Option<String>,
    pub after: Option<i64>,
    pub before: Option<i64>,
}

macro_rules! insert_job {
    ($conn:expr, $j:expr) => {
        sqlx::query(
            "insert into jobs (id, organization_id, environment_id, notification_id, subscriber_ref, subscriber_id,
               workflow_ref, transaction_id, step_index, step, step_type, status, provider_id, payload, overrides, digest,
               digest_key, run_at, attempts, dedupe_key, schedule_extensions_count, created_at, updated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, 0, $19, $20, $21, $22)
             on conflict (dedupe_key) do nothing",
        )
        .bind(&$j.id).bind(&$j.organization_id).bind(&$j.environment_id).bind(&$j.notification_id)
        .bind(&$j.subscriber_ref).bind(&$j.subscriber_id).bind(&$j.workflow_ref).bind(&$j.transaction_id)
        .bind($j.step_index).bind(Json(&$j.step)).bind($j.step.step_type.as_str()).bind(&$j.status)
        .bind(&$j.provider_id).bind(Json(&$j.payload)).bind($j.overrides.as_ref().map(Json))
        .bind($j.digest.as_ref().map(Json)).bind(&$j.digest_key).bind($j.run_at.0).bind(&$j.dedupe_key)
        .bind($j.schedule_extensions_count).bind($j.created_at.0).bind($j.updated_at.0)
        .execute($conn)
    };
}

macro_rules! insert_detail {
    ($conn:expr, $d:expr) => {
        sqlx::query(
            "insert into execution_details (id, environment_id, job_id, notification_id, status, detail, source, is_retry,
               is_test, provider_id, raw, created_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&$d.id).bind(&$d.environment_id).bind(&$d.job_id).bind(&$d.notification_id).bind(&$d.status)
        .bind(&$d.detail).bind(&$d.source).bind($d.is_retry).bind($d.is_test).bind(&$d.provider_id).bind(&$d.raw)
        .bind($d.created_at.0)
        .execute($conn)
    };
}

macro_rules! insert_message {
    ($conn:expr, $m:expr) => {
        sqlx::query(
            "insert into messages (id, organization_id, environment_id, notification_id, subscriber_ref, subscriber_id,
               workflow_ref, workflow_identifier, job_id, transaction_id, channel, subject, content, avatar, cta, data,
               payload, overrides, read, seen, last_read_date, last_seen_date, status, provider_id, context_keys, deleted,
               created_at, updated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
               $23, $24, $25, false, $26, $27)
             on conflict (job_id) do nothing",
        )
        .bind(&$m.id).bind(&$m.organization_id).bind(&$m.environment_id).bind(&$m.notification_id)
        .bind(&$m.subscriber_ref).bind(&$m.subscriber_id).bind(&$m.workflow_ref).bind(&$m.workflow_identifier)
        .bind(&$m.job_id).bind(&$m.transaction_id).bind(&$m.channel).bind(&$m.subject).bind(&$m.content)
        .bind(&$m.avatar).bind(Json(&$m.cta)).bind($m.data.as_ref().map(Json)).bind(Json(&$m.payload))
        .bind($m.overrides.as_ref().map(Json)).bind($m.read).bind($m.seen).bind($m.last_read_date.map(|t| t.0))
        .bind($m.last_seen_date.map(|t| t.0)).bind(&$m.status).bind(&$m.provider_id).bind(Json(&$m.context_keys))
        .bind($m.created_at.0).bind($m.updated_at.0)
        .execute($conn)
    };
}

/// Appends an event to the `digest.events` of a digest job that is still waiting.
macro_rules! append_digest_event {
    ($tx:expr, $job_id:expr, $event:expr, $now:expr) => {{
        let current: Option<Json<Value>> =
            sqlx::query_scalar("select digest from jobs where id = $1")
                .bind($job_id)
                .fetch_optional(&mut *$tx)
                .await?
                .flatten();
        let mut digest = current
            .map(|j| j.0)
            .unwrap_or_else(|| serde_json::json!({}));
        if let Some(events) = digest.get_mut("events").and_then(Value::as_array_mut) {
            events.push($event.clone());
        } else {
            digest["events"] = Value::Array(vec![$event.clone()]);
        }
        sqlx::query("update jobs set digest = $1, updated_at = $2 where id = $3")
            .bind(Json(&digest))
            .bind($now)
            .bind($job_id)
            .execute(&mut *$tx)
            .await?;
    }};
}

impl Store {
    /// Records a trigger: its transaction id, and per recipient the notification, its first job and the
    /// job's first execution details, all in one transaction. False when the transaction id was seen before.
    pub async fn insert_trigger(
        &self,
        env: &EnvironmentId,
        transaction_id: &str,
        batch: &[(Notification, Job, Vec<ExecutionDetail>)],
    ) -> Result<bool> {
        let now = Timestamp::now().0;
        let inserted = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let fresh = sqlx::query(
                "insert into trigger_transactions (environment_id, transaction_id, created_at) values ($1, $2, $3)
                 on conflict (environment_id, transaction_id) do nothing")
                .bind(env.as_str()).bind(transaction_id).bind(now).execute(&mut *tx).await?.rows_affected() == 1;
            if fresh {
                for (n, job, details) in batch {
                    sqlx::query(
                        "insert into notifications (id, organization_id, environment_id, subscriber_ref, subscriber_id,
                           workflow_ref, workflow_identifier, transaction_id, channels, payload, overrides, to_value, actor,
                           tags, severity, critical, context_keys, context_set, digested_notification_id, created_at,
                           updated_at, channel_set)
                         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
                           $20, $21, $22)")
                        .bind(&n.id).bind(&n.organization_id).bind(&n.environment_id).bind(&n.subscriber_ref)
                        .bind(&n.subscriber_id).bind(&n.workflow_ref).bind(&n.workflow_identifier).bind(&n.transaction_id)
                        .bind(Json(&n.channels)).bind(Json(&n.payload)).bind(n.overrides.as_ref().map(Json))
                        .bind(n.to.as_ref().map(Json)).bind(n.actor.as_ref().map(Json)).bind(Json(&n.tags))
                        .bind(&n.severity).bind(n.critical).bind(Json(&n.context_keys)).bind(context_set(&n.context_keys))
                        .bind(&n.digested_notification_id).bind(n.created_at.0).bind(n.updated_at.0)
                        .bind(format!(",{},", n.channels.join(",")))
                        .execute(&mut *tx).await?;
                    insert_job!(&mut *tx, job).await?;
                    if let Some(open) = job.digest.as_ref().and_then(|d| d.get("mergedInto")).and_then(Value::as_str) {
                        let event = serde_json::json!({
                            "id": job.transaction_id, "time": job.created_at.to_iso(), "payload": job.payload,
                        });
                        append_digest_event!(&mut *tx, open, event, now);
                    }
                    for d in details {
                        insert_detail!(&mut *tx, d).await?;
                    }
                }
            }
            tx.commit().await.map(|_| fresh)
        })?;
        Ok(inserted)
    }

    /// Claims up to `limit` due jobs for `worker` with a lease; jobs whose lease expired are claimed again.
    pub async fn claim_jobs(&self, worker: &str, limit: i64, lease_ms: i64) -> Result<Vec<Job>> {
        let now = Timestamp::now().0;
        // The dialects differ here: PostgreSQL skips rows other workers are claiming right now; SQLite has
        // a single writer, so the statement is already exclusive.
        let lock = match self.dialect() {
            Dialect::Postgres => " for update skip locked",
            Dialect::Sqlite => "",
        };
        let sql = format!(
            "update jobs set status = 'running', locked_by = $1, locked_until = $2, attempts = attempts + 1,
               updated_at = $3
             where id in (select id from jobs
               where (status = 'queued' and run_at <= $3) or (status = 'running' and locked_until < $3)
               order by run_at limit $4{lock})
             returning {JOB_COLUMNS}"
        );
        let rows: Vec<JobRow> = on_db!(self.w(), p => sqlx::query_as::<_, JobRow>(&sql)
            .bind(worker).bind(now + lease_ms).bind(now).bind(limit).fetch_all(p).await)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// The earliest `run_at` of a queued job, to know how long a worker may sleep.
    pub async fn next_job_due(&self) -> Result<Option<i64>> {
        Ok(on_db!(self.r(), p => sqlx::query_scalar::<_, Option<i64>>(
            "select min(run_at) from jobs where status = 'queued'").fetch_one(p).await)?)
    }

    /// Finishes a job this worker holds, with everything it produced, atomically. False when the lease was
    /// lost (another worker took the job over): then nothing is written.
    pub async fn complete_job(
        &self,
        job: &Job,
        worker: &str,
        outcome: &JobOutcome,
    ) -> Result<bool> {
        let now = Timestamp::now().0;
        let done = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let owned = sqlx::query(
                "update jobs set status = $1, locked_until = null, updated_at = $2
                 where id = $3 and status = 'running' and locked_by = $4")
                .bind(&outcome.status).bind(now).bind(&job.id).bind(worker).execute(&mut *tx).await?.rows_affected() == 1;
            if owned {
                for d in &outcome.details {
                    insert_detail!(&mut *tx, d).await?;
                }
                if let Some(m) = &outcome.message {
                    insert_message!(&mut *tx, m).await?;
                }
                if let Some((digest_job, event)) = &outcome.merge_into {
                    append_digest_event!(&mut *tx, digest_job, event, now);
                }
                if let Some(next) = &outcome.next {
                    insert_job!(&mut *tx, next).await?;
                }
            }
            tx.commit().await.map(|_| owned)
        })?;
        Ok(done)
    }

    /// A queued digest job for `digest_key` whose window is still open, to merge an event into.
    pub async fn open_digest_job(&self, digest_key: &str) -> Result<Option<String>> {
        Ok(on_db!(self.w(), p => sqlx::query_scalar::<_, String>(
            "select id from jobs where digest_key = $1 and status = 'queued' order by run_at limit 1")
            .bind(digest_key).fetch_optional(p).await)?)
    }

    /// Counts jobs of `step_type` for the subscriber and workflow created since `since` (throttling).
    pub async fn count_recent_jobs(&self, job: &Job, since: i64) -> Result<i64> {
        Ok(on_db!(self.r(), p => sqlx::query_scalar::<_, i64>(
            "select count(*) from jobs where environment_id = $1 and subscriber_id = $2 and workflow_ref = $3
               and step_index = $4 and created_at >= $5 and status in ('completed', 'running')")
            .bind(&job.environment_id).bind(&job.subscriber_id).bind(&job.workflow_ref).bind(job.step_index).bind(since)
            .fetch_one(p).await)?)
    }

    /// Cancels the queued jobs of a transaction; returns how many.
    pub async fn cancel_transaction(
        &self,
        env: &EnvironmentId,
        transaction_id: &str,
    ) -> Result<u64> {
        let now = Timestamp::now();
        let n = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let ids: Vec<(String, String, String)> = sqlx::query_as(
                "select id, notification_id, provider_id from jobs
                 where environment_id = $1 and transaction_id = $2 and status = 'queued'")
                .bind(env.as_str()).bind(transaction_id).fetch_all(&mut *tx).await?;
            for (id, notification_id, provider_id) in &ids {
                sqlx::query("update jobs set status = 'canceled', updated_at = $1 where id = $2 and status = 'queued'")
                    .bind(now.0).bind(id).execute(&mut *tx).await?;
                let d = ExecutionDetail {
                    id: crate::domain::new_object_id(),
                    environment_id: env.0.clone(),
                    job_id: id.clone(),
                    notification_id: notification_id.clone(),
                    status: "Warning".into(),
                    detail: "Canceled by DELETE /v1/events/trigger/{transactionId}".into(),
                    source: "Internal".into(),
                    is_retry: false,
                    is_test: false,
                    provider_id: Some(provider_id.clone()),
                    raw: None,
                    created_at: now,
                };
                insert_detail!(&mut *tx, d).await?;
            }
            tx.commit().await.map(|_| ids.len() as u64)
        })?;
        Ok(n)
    }

    pub async fn insert_details(&self, details: &[ExecutionDetail]) -> Result<()> {
        for d in details {
            on_db!(self.w(), p => insert_detail!(p, d).await.map(|_| ()))?;
        }
        Ok(())
    }

    /// Returns a claimed job to the queue to run again at `run_at` (after a transient failure).
    pub async fn retry_job(&self, job: &Job, worker: &str, run_at: i64) -> Result<bool> {
        let n = on_db!(self.w(), p => sqlx::query(
            "update jobs set status = 'queued', locked_by = null, locked_until = null, run_at = $1, updated_at = $2
             where id = $3 and status = 'running' and locked_by = $4")
            .bind(run_at).bind(Timestamp::now().0).bind(&job.id).bind(worker).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }
}
/// Helper for building `in (…)` lists.
pub(crate) fn push_in(q: &mut Sql, column: &str, values: &[String]) {
    q.push(" and ").push(column).push(" in (");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        q.bind(v);
    }
    q.push(")");
}

const NOTIFICATION_COLUMNS: &str = "id, organization_id, environment_id, subscriber_ref, subscriber_id, workflow_ref, \
    workflow_identifier, transaction_id, channels, payload, overrides, to_value, actor, tags, severity, critical, \
    context_keys, digested_notification_id, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct NotificationRow {
    id: String,
    organization_id: String,
    environment_id: String,
    subscriber_ref: String,
    subscriber_id: String,
    workflow_ref: String,
    workflow_identifier: String,
    transaction_id: String,
    channels: Json<Vec<String>>,
    payload: Json<Value>,
    overrides: Option<Json<Value>>,
    to_value: Option<Json<Value>>,
    actor: Option<Json<Value>>,
    tags: Json<Vec<String>>,
    severity: String,
    critical: bool,
    context_keys: Json<Vec<String>>,
    digested_notification_id: Option<String>,
    created_at: i64,
    updated_at: i64,
}

impl From<NotificationRow> for Notification {
    fn from(r: NotificationRow) -> Self {
        Notification {
            id: r.id,
            organization_id: r.organization_id,
            environment_id: r.environment_id,
            subscriber_ref: r.subscriber_ref,
            subscriber_id: r.subscriber_id,
            workflow_ref: r.workflow_ref,
            workflow_identifier: r.workflow_identifier,
            transaction_id: r.transaction_id,
            channels: r.channels.0,
            payload: r.payload.0,
            overrides: r.overrides.map(|j| j.0),
            to: r.to_value.map(|j| j.0),
            actor: r.actor.map(|j| j.0),
            tags: r.tags.0,
            severity: r.severity,
            critical: r.critical,
            context_keys: r.context_keys.0,
            digested_notification_id: r.digested_notification_id,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
    }
}

#[derive(sqlx::FromRow)]
struct DetailRow {
    id: String,
    environment_id: String,
    job_id: String,
    notification_id: String,
    status: String,
    detail: String,
    source: String,
    is_retry: bool,
    is_test: bool,
    provider_id: Option<String>,
    raw: Option<String>,
    created_at: i64,
}

impl From<DetailRow> for ExecutionDetail {
    fn from(r: DetailRow) -> Self {
        ExecutionDetail {
            id: r.id,
            environment_id: r.environment_id,
            job_id: r.job_id,
            notification_id: r.notification_id,
            status: r.status,
            detail: r.detail,
            source: r.source,
            is_retry: r.is_retry,
            is_test: r.is_test,
            provider_id: r.provider_id,
            raw: r.raw,
            created_at: Timestamp(r.created_at),
        }
    }
}

async fn fetch<R: PortableRow>(store: &Store, q: Sql) -> Result<Vec<R>> {
    Ok(
        on_db!(store.r(), p => bind_args!(sqlx::query_as::<_, R>(&q.text), q.args.clone()).fetch_all(p).await)?,
    )
}

/// Runs `q` (a select without ordering) as page `page` of `limit` rows, newest first; `has_more` is exact
/// (reads `limit + 1`).
async fn newest_first_page<R: PortableRow + Into<T>, T>(
    store: &Store,
    mut q: Sql,
    page: i64,
    limit: i64,
) -> Result<(Vec<T>, bool)> {
    q.push(" order by created_at desc, id desc limit ")
        .bind(limit + 1)
        .push(" offset ")
        .bind(page * limit);
    let mut rows: Vec<T> = fetch::<R>(store, q)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let has_more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    Ok((rows, has_more))
}

impl Store {
    pub async fn get_notification(
        &self,
        env: &EnvironmentId,
        id: &str,
    ) -> Result<Option<Notification>> {
        let mut q = Sql::new("select ");
        q.push(NOTIFICATION_COLUMNS)
            .push(" from notifications where environment_id = ")
            .bind(env.as_str());
        q.push(" and id = ").bind(id);
        Ok(fetch::<NotificationRow>(self, q)
            .await?
            .into_iter()
            .next()
            .map(Into::into))
    }

    /// A page of notifications, newest first; `has_more` is exact (reads `limit + 1`).
    pub async fn list_notifications(
        &self,
        env: &EnvironmentId,
        f: &NotificationFilter,
        page: i64,
        limit: i64,
    ) -> Result<(Vec<Notification>, bool)> {
        let mut q = Sql::new("select ");
        q.push(NOTIFICATION_COLUMNS)
            .push(" from notifications where environment_id = ")
            .bind(env.as_str());
        if let Some(ids) = &f.subscriber_ids {
            if ids.is_empty() {
                return Ok((Vec::new(), false));
            }
            push_in(&mut q, "subscriber_id", ids);
        }
        if !f.workflow_refs.is_empty() {
            push_in(&mut q, "workflow_ref", &f.workflow_refs);
        }
        if !f.severity.is_empty() {
            push_in(&mut q, "severity", &f.severity);
        }
        if !f.channels.is_empty() {
            q.push(" and (");
            for (i, c) in f.channels.iter().enumerate() {
                if i > 0 {
                    q.push(" or ");
                }
                q.push("channel_set like ").bind(format!("%,{c},%"));
            }
            q.push(")");
        }
        if let Some(t) = &f.transaction_id {
            q.push(" and transaction_id = ").bind(t);
        }
        if let Some(c) = &f.context_set {
            q.push(" and context_set = ").bind(c);
        }
        if let Some(a) = f.after {
            q.push(" and created_at >= ").bind(a);
        }
        if let Some(b) = f.before {
            q.push(" and created_at <= ").bind(b);
        }
        newest_first_page::<NotificationRow, Notification>(self, q, page, limit).await
    }

    /// The jobs of several notifications, in step order (one query for a whole page).
    pub async fn jobs_of(&self, notification_ids: &[String]) -> Result<Vec<Job>> {
        if notification_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new("select ");
        q.push(JOB_COLUMNS).push(" from jobs where 1 = 1");
        push_in(&mut q, "notification_id", notification_ids);
        q.push(" order by step_index, created_at");
        Ok(fetch::<JobRow>(self, q)
            .await?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// The execution details of several notifications, oldest first (one query for a whole page).
    pub async fn details_of(&self, notification_ids: &[String]) -> Result<Vec<ExecutionDetail>> {
        if notification_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(
            "select id, environment_id, job_id, notification_id, status, detail, source, is_retry, is_test, provider_id, \
             raw, created_at from execution_details where 1 = 1",
        );
        push_in(&mut q, "notification_id", notification_ids);
        q.push(" order by created_at, id");
        Ok(fetch::<DetailRow>(self, q)
            .await?
            .into_iter()
            .map(Into::into)
            .collect())
    }
}

const MESSAGE_COLUMNS: &str = "id, organization_id, environment_id, notification_id, subscriber_ref, subscriber_id, \
    workflow_ref, workflow_identifier, job_id, transaction_id, channel, subject, content, avatar, cta, data, payload, \
    overrides, read, seen, last_read_date, last_seen_date, status, provider_id, context_keys, deleted, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct MessageRow {
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
    status: String,
    provider_id: String,
    context_keys: Json<Vec<String>>,
    deleted: bool,
    created_at: i64,
    updated_at: i64,
}

impl From<MessageRow> for Message {
    fn from(r: MessageRow) -> Self {
        Message {
            id: r.id,
            organization_id: r.organization_id,
            environment_id: r.environment_id,
            notification_id: r.notification_id,
            subscriber_ref: r.subscriber_ref,
            subscriber_id: r.subscriber_id,
            workflow_ref: r.workflow_ref,
            workflow_identifier: r.workflow_identifier,
            job_id: r.job_id,
            transaction_id: r.transaction_id,
            channel: r.channel,
            subject: r.subject,
            content: r.content,
            avatar: r.avatar,
            cta: r.cta.0,
            data: r.data.map(|j| j.0),
            payload: r.payload.0,
            overrides: r.overrides.map(|j| j.0),
            read: r.read,
            seen: r.seen,
            last_read_date: r.last_read_date.map(Timestamp),
            last_seen_date: r.last_seen_date.map(Timestamp),
            status: r.status,
            provider_id: r.provider_id,
            context_keys: r.context_keys.0,
            deleted: r.deleted,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
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
            push_in(&mut q, "transaction_id", &self.transaction_ids);
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
        q.push(MESSAGE_COLUMNS)
            .push(" from messages where ")
            .append(&f.to_sql(env));
        newest_first_page::<MessageRow, Message>(self, q, page, limit).await
    }

    /// Marks the subscriber's messages among `ids`; others are left alone. Returns the updated messages.
    /// `read` also marks seen; `unread` leaves `seen` as it is; `seen`/`unseen` leave `read` as it is.
    pub async fn mark_messages(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
        ids: &[String],
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
        push_in(&mut q, "id", ids);
        on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args.clone()).execute(p).await.map(|_| ()))?;
        let mut s = Sql::new("select ");
        s.push(MESSAGE_COLUMNS)
            .push(" from messages where environment_id = ")
            .bind(env.as_str());
        s.push(" and subscriber_id = ")
            .bind(subscriber_id)
            .push(" and deleted = false");
        push_in(&mut s, "id", ids);
        s.push(" order by created_at, id");
        let rows: Vec<MessageRow> = on_db!(self.w(), p => bind_args!(sqlx::query_as::<_, MessageRow>(&s.text), s.args.clone()).fetch_all(p).await)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }
}

impl Store {
    /// Counts the messages matching `f` (capped like cursor totals).
    pub async fn count_messages(&self, env: &EnvironmentId, f: &MessageFilter) -> Result<i64> {
        super::page::count_capped(self.r(), "messages", &f.to_sql(env)).await
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
    pub async fn delete_message(&self, env: &EnvironmentId, id: &str) -> Result<bool> {
        let n = on_db!(self.w(), p => sqlx::query(
            "update messages set deleted = true, updated_at = $1 where environment_id = $2 and id = $3 and deleted = false")
            .bind(Timestamp::now().0).bind(env.as_str()).bind(id).execute(p).await.map(|r| r.rows_affected()))?;
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

impl Store {
    /// Bulk-inserts `count` finished notifications of `workflow` (one completed in-app job with two execution
    /// details each) for subscribers `<prefix><n % subscribers>`, for tests and the benchmark.
    pub async fn seed_notifications(
        &self,
        tenant: &crate::domain::Tenant,
        workflow: &crate::domain::workflow::Workflow,
        prefix: &str,
        count: i64,
        subscribers: i64,
    ) -> Result<u64> {
        let now = Timestamp::now().0;
        let salt = format!(
            "{:08x}{:06x}",
            now / 1000,
            rand::random::<u32>() & 0x00ff_ffff
        );
        let step = workflow
            .steps
            .first()
            .ok_or_else(|| anyhow::anyhow!("the workflow has no steps"))?;
        // Ids: notifications <salt>0<9 hex>, jobs <salt>1<9 hex>, details <salt>2/3<9 hex>.
        // JSON literals need a cast on PostgreSQL (jsonb columns) and none on SQLite (text columns).
        let json_cast = match self.dialect() {
            Dialect::Sqlite => "",
            Dialect::Postgres => "::jsonb",
        };
        let (series, hex9, to_text) = match self.dialect() {
            Dialect::Sqlite => (
                "with recursive n(i) as (select 1 union all select i + 1 from n where i < $1)",
                "printf('%09x', i)",
                "i",
            ),
            Dialect::Postgres => (
                "with n(i) as (select generate_series(1, $1::bigint))",
                "lpad(to_hex(i), 9, '0')",
                "i::text",
            ),
        };
        let notifications = format!(
            "{series} insert into notifications (id, organization_id, environment_id, subscriber_ref, subscriber_id,
               workflow_ref, workflow_identifier, transaction_id, channels, channel_set, payload, overrides, to_value,
               actor, tags, severity, critical, context_keys, context_set, digested_notification_id, created_at,
               updated_at)
             select $2 || '0' || {hex9}, $3, $4, 'seed', $5 || (i % $6), $7, $8, 'seed-' || {to_text}, '[\"in_app\"]'{json_cast},
               ',in_app,', '{{}}'{json_cast}, null, null, null, '[]'{json_cast}, 'none', false, '[]'{json_cast}, '', null,
               $9 - $1 + i, $9 - $1 + i from n"
        );
        let jobs = format!(
            "{series} insert into jobs (id, organization_id, environment_id, notification_id, subscriber_ref,
               subscriber_id, workflow_ref, transaction_id, step_index, step, step_type, status, provider_id, payload,
               overrides, digest, digest_key, run_at, attempts, dedupe_key, schedule_extensions_count, created_at,
               updated_at)
             select $2 || '1' || {hex9}, $3, $4, $2 || '0' || {hex9}, 'seed', $5 || (i % $6), $7,
               'seed-' || {to_text}, 0, $8, 'in_app', 'completed', 'svc', '{{}}'{json_cast}, null, null, null, $9 - $1 + i, 1,
               $2 || '0' || {hex9} || ':0', 0, $9 - $1 + i, $9 - $1 + i from n"
        );
        let details = format!(
            "{series} insert into execution_details (id, environment_id, job_id, notification_id, status, detail,
               source, is_retry, is_test, provider_id, raw, created_at)
             select $2 || $3 || {hex9}, $4, $2 || '1' || {hex9}, $2 || '0' || {hex9}, $5, $6, 'Internal', false, false,
               'svc', null, $7 - $1 + i from n"
        );
        let n = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let n = sqlx::query(&notifications).bind(count).bind(&salt).bind(tenant.organization_id.as_str())
                .bind(tenant.environment_id.as_str()).bind(prefix).bind(subscribers.max(1)).bind(&workflow.id)
                .bind(&workflow.workflow_id).bind(now).execute(&mut *tx).await?.rows_affected();
            sqlx::query(&jobs).bind(count).bind(&salt).bind(tenant.organization_id.as_str())
                .bind(tenant.environment_id.as_str()).bind(prefix).bind(subscribers.max(1)).bind(&workflow.id)
                .bind(Json(step)).bind(now).execute(&mut *tx).await?;
            for (kind, status, text) in [("2", "Pending", "Step queued"), ("3", "Success", "In-app message created")] {
                sqlx::query(&details).bind(count).bind(&salt).bind(kind).bind(tenant.environment_id.as_str())
                    .bind(status).bind(text).bind(now).execute(&mut *tx).await?;
            }
            tx.commit().await.map(|_| n)
        })?;
        Ok(n)
    }
}
