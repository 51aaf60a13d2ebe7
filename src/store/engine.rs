//! The delivery engine's tables: triggers, notifications, jobs (claimed with leases), execution details
//! and messages. Everything a step produces is written in the transaction that completes its job.

use serde_json::value::RawValue;
use serde_json::Value;
use sqlx::types::Json;

use super::fast::{Columns, ReadRow};
use super::page::PortableRow;
use super::row::sql_row;
use super::sql::{bind_args, Arg, Sql};
use super::{on_db, Dialect, Store, ViewRow};
use crate::domain::context::context_set;
use crate::domain::job::{
    DetailView, ExecutionDetail, Job, JobSummary, JobView, Message, MessageDelivery, Notification,
    NotificationView,
};
use crate::domain::workflow::Step;
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::Result;

const JOB_COLUMNS: &str = "id, organization_id, environment_id, notification_id, subscriber_ref, subscriber_id, \
    workflow_ref, transaction_id, step_index, step, status, provider_id, payload, overrides, digest, digest_key, run_at, \
    attempts, dedupe_key, schedule_extensions_count, delivery, created_at, updated_at";

sql_row! {
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
        delivery: Option<Json<Value>>,
        created_at: i64,
        updated_at: i64,
    }
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
            delivery: r.delivery.map(|j| j.0),
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
    /// The job of the next step, if the chain goes on: its pending job activated (`queued`, or `merged`
    /// into an open digest), or — a notification triggered before jobs were created pending — created.
    pub next: Option<Job>,
    /// The chain ends here: the notification's jobs still pending (after `next`) end with this status.
    pub rest: Option<&'static str>,
    /// The provider that handled the job (a delivery through an integration), shown instead of the one
    /// the job was created with.
    pub provider_id: Option<String>,
    /// A digest job that absorbs this job's event instead of running it separately.
    pub merge_into: Option<(String, Value)>,
    /// Instead of finishing, the job goes back to the queue (a provider retry or failover): its details are
    /// written and it runs again at `run_at` with this delivery state.
    pub retry: Option<Requeue>,
}

/// When and with which delivery state a job runs again.
#[derive(Debug, Clone)]
pub struct Requeue {
    pub run_at: i64,
    pub delivery: Value,
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

/// Bound values per multi-row `insert`. SQLite (through sqlx) looks each parameter up by walking the
/// statement's parameter list, so binding costs grow with the square of their number: 4,600 parameters took
/// ~30 ms per statement, 256 take ~0.1 ms. PostgreSQL pays one round trip per statement, which this keeps few.
const PARAMS_PER_INSERT: usize = 256;

/// The statements, for one call: on SQLite joined into one script with anonymous `?` parameters (sqlx runs
/// every statement of a query and binds the arguments in order), so a transaction's inserts cost one
/// hand-off to the connection's thread instead of one each; on PostgreSQL (no multi-statement queries with
/// parameters) as they are.
fn batched(dialect: Dialect, statements: Vec<Sql>) -> Vec<Sql> {
    if dialect != Dialect::Sqlite || statements.len() < 2 {
        return statements;
    }
    let mut script = Sql::new("");
    for q in statements {
        if !script.text.is_empty() {
            script.text.push_str(";\n");
        }
        script.text.push_str(&anonymous(&q.text));
        script.args.extend(q.args);
    }
    vec![script]
}

/// `$1`, `$2`, … → `?` (the builder numbers placeholders in the order they appear).
fn anonymous(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

/// `head values (…), (…), … tail`, in statements of at most [`PARAMS_PER_INSERT`] bound values.
fn insert_rows(head: &str, tail: &str, rows: Vec<Vec<Arg>>) -> Vec<Sql> {
    let mut out = Vec::new();
    let per_statement = rows
        .first()
        .map_or(1, |r| (PARAMS_PER_INSERT / r.len().max(1)).max(1));
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let mut q = Sql::new(head);
        q.push(" values ");
        for (i, row) in rows.by_ref().take(per_statement).enumerate() {
            q.push(if i == 0 { "(" } else { ", (" });
            for (k, arg) in row.into_iter().enumerate() {
                if k > 0 {
                    q.push(", ");
                }
                q.bind(arg);
            }
            q.push(")");
        }
        q.push(" ").push(tail);
        out.push(q);
    }
    out
}

fn json(v: impl serde::Serialize) -> Arg {
    Arg::Json(serde_json::to_value(v).unwrap_or(Value::Null))
}

/// Inserts jobs, queued — or, with `lease` (worker, until), already claimed by that worker.
fn insert_jobs(jobs: &[&Job], lease: Option<(&str, i64)>) -> Vec<Sql> {
    insert_jobs_then(jobs, lease, "on conflict (dedupe_key) do nothing")
}

/// Activates the next steps' jobs: a job still `pending` under the same dedupe key takes the activated
/// state (status, when it runs, its digest, payload); one already settled (canceled, or activated by a
/// completion of the same step that lost its lease) is left alone; a missing one (a notification
/// triggered before the jobs of all steps were created at trigger time) is inserted. The stored step,
/// id and creation time stay those of the trigger. Returns the ids of the jobs activated.
fn activate_jobs(jobs: &[&Job]) -> Vec<Sql> {
    insert_jobs_then(
        jobs,
        None,
        "on conflict (dedupe_key) do update set status = excluded.status, run_at = excluded.run_at, \
         digest = excluded.digest, digest_key = excluded.digest_key, payload = excluded.payload, \
         updated_at = excluded.updated_at where jobs.status = 'pending' returning id",
    )
}

fn insert_jobs_then(jobs: &[&Job], lease: Option<(&str, i64)>, on_conflict: &str) -> Vec<Sql> {
    let rows = jobs
        .iter()
        .map(|j| {
            vec![
                Arg::from(&j.id),
                Arg::from(&j.organization_id),
                Arg::from(&j.environment_id),
                Arg::from(&j.notification_id),
                Arg::from(&j.subscriber_ref),
                Arg::from(&j.subscriber_id),
                Arg::from(&j.workflow_ref),
                Arg::from(&j.transaction_id),
                Arg::Int(j.step_index),
                json(&j.step),
                Arg::from(j.step.step_type.as_str()),
                Arg::from(&j.status),
                Arg::from(&j.provider_id),
                Arg::Json(j.payload.clone()),
                Arg::OptJson(j.overrides.clone()),
                Arg::OptJson(j.digest.clone()),
                Arg::OptText(j.digest_key.clone()),
                Arg::Int(j.run_at.0),
                Arg::Int(i64::from(lease.is_some())),
                Arg::OptText(lease.map(|(worker, _)| worker.to_owned())),
                Arg::OptInt(lease.map(|(_, until)| until)),
                Arg::from(&j.dedupe_key),
                Arg::Int(j.schedule_extensions_count),
                Arg::Int(j.created_at.0),
                Arg::Int(j.updated_at.0),
            ]
        })
        .collect();
    insert_rows(
        "insert into jobs (id, organization_id, environment_id, notification_id, subscriber_ref, subscriber_id, \
         workflow_ref, transaction_id, step_index, step, step_type, status, provider_id, payload, overrides, digest, \
         digest_key, run_at, attempts, locked_by, locked_until, dedupe_key, schedule_extensions_count, created_at, \
         updated_at)",
        on_conflict,
        rows,
    )
}

fn insert_details(details: &[&ExecutionDetail]) -> Vec<Sql> {
    let rows = details
        .iter()
        .map(|d| {
            vec![
                Arg::from(&d.id),
                Arg::from(&d.environment_id),
                Arg::from(&d.job_id),
                Arg::from(&d.notification_id),
                Arg::from(&d.status),
                Arg::from(&d.detail),
                Arg::from(&d.source),
                Arg::Bool(d.is_retry),
                Arg::Bool(d.is_test),
                Arg::OptText(d.provider_id.clone()),
                Arg::OptText(d.raw.clone()),
                Arg::Int(d.created_at.0),
            ]
        })
        .collect();
    insert_rows(
        "insert into execution_details (id, environment_id, job_id, notification_id, status, detail, source, \
         is_retry, is_test, provider_id, raw, created_at)",
        "",
        rows,
    )
}

fn insert_messages(messages: &[&Message]) -> Vec<Sql> {
    let rows = messages
        .iter()
        .map(|m| {
            vec![
                Arg::from(&m.id),
                Arg::from(&m.organization_id),
                Arg::from(&m.environment_id),
                Arg::from(&m.notification_id),
                Arg::from(&m.subscriber_ref),
                Arg::from(&m.subscriber_id),
                Arg::from(&m.workflow_ref),
                Arg::from(&m.workflow_identifier),
                Arg::from(&m.job_id),
                Arg::from(&m.transaction_id),
                Arg::from(&m.channel),
                Arg::OptText(m.subject.clone()),
                Arg::from(&m.content),
                Arg::OptText(m.avatar.clone()),
                Arg::Json(m.cta.clone()),
                Arg::OptJson(m.data.clone()),
                Arg::Json(m.payload.clone()),
                Arg::OptJson(m.overrides.clone()),
                Arg::Bool(m.read),
                Arg::Bool(m.seen),
                Arg::OptInt(m.last_read_date.map(|t| t.0)),
                Arg::OptInt(m.last_seen_date.map(|t| t.0)),
                Arg::from(&m.status),
                Arg::from(&m.provider_id),
                json(&m.context_keys),
                Arg::Bool(m.deleted),
                Arg::Int(m.created_at.0),
                Arg::Int(m.updated_at.0),
                Arg::OptText(m.delivery.email.clone()),
                Arg::OptText(m.delivery.phone.clone()),
                Arg::OptText(m.delivery.direct_webhook_url.clone()),
                Arg::OptJson(
                    m.delivery
                        .device_tokens
                        .as_ref()
                        .map(|t| serde_json::json!(t)),
                ),
                Arg::OptInt(m.delivery.delivered_at.map(|t| t.0)),
                Arg::OptText(m.delivery.error_id.clone()),
                Arg::OptText(m.delivery.error_text.clone()),
            ]
        })
        .collect();
    insert_rows(
        "insert into messages (id, organization_id, environment_id, notification_id, subscriber_ref, subscriber_id, \
         workflow_ref, workflow_identifier, job_id, transaction_id, channel, subject, content, avatar, cta, data, \
         payload, overrides, read, seen, last_read_date, last_seen_date, status, provider_id, context_keys, deleted, \
         created_at, updated_at, email, phone, direct_webhook_url, device_tokens, delivered_at, error_id, error_text)",
        "on conflict (job_id) do nothing",
        rows,
    )
}

fn insert_notifications(notifications: &[&Notification]) -> Vec<Sql> {
    let rows = notifications
        .iter()
        .map(|n| {
            vec![
                Arg::from(&n.id),
                Arg::from(&n.organization_id),
                Arg::from(&n.environment_id),
                Arg::from(&n.subscriber_ref),
                Arg::from(&n.subscriber_id),
                Arg::from(&n.workflow_ref),
                Arg::from(&n.workflow_identifier),
                Arg::from(&n.transaction_id),
                json(&n.channels),
                Arg::from(format!(",{},", n.channels.join(","))),
                Arg::Json(n.payload.clone()),
                Arg::OptJson(n.overrides.clone()),
                Arg::OptJson(n.to.clone()),
                Arg::OptJson(n.actor.clone()),
                json(&n.tags),
                Arg::from(&n.severity),
                Arg::Bool(n.critical),
                json(&n.context_keys),
                Arg::from(context_set(&n.context_keys)),
                Arg::OptText(n.digested_notification_id.clone()),
                Arg::Int(n.created_at.0),
                Arg::Int(n.updated_at.0),
            ]
        })
        .collect();
    insert_rows(
        "insert into notifications (id, organization_id, environment_id, subscriber_ref, subscriber_id, workflow_ref, \
         workflow_identifier, transaction_id, channels, channel_set, payload, overrides, to_value, actor, tags, \
         severity, critical, context_keys, context_set, digested_notification_id, created_at, updated_at)",
        "",
        rows,
    )
}

/// A request to the group-commit writer: the records and where to send their outcome.
pub(crate) type TriggerRequest = (
    Vec<TriggerRecord>,
    tokio::sync::oneshot::Sender<Result<Vec<bool>>>,
);

/// Most triggers one group commit takes.
const GROUP_COMMIT_MAX: usize = 1000;

/// The writer behind [`Store::insert_triggers`]: takes every request waiting, records them in one
/// transaction, and answers each with its share of the outcome. One group at a time, on both databases:
/// on PostgreSQL three groups under way at once made each group smaller and cost the database more per
/// event (2,955 → 2,425 single triggers/s end to end).
async fn group_commit(store: Store, mut rx: tokio::sync::mpsc::UnboundedReceiver<TriggerRequest>) {
    while let Some(first) = rx.recv().await {
        let mut requests = vec![first];
        let mut count = requests[0].0.len();
        while count < GROUP_COMMIT_MAX {
            match rx.try_recv() {
                Ok(more) => {
                    count += more.0.len();
                    requests.push(more);
                }
                Err(_) => break,
            }
        }
        commit_group(&store, requests, count).await;
    }
}

/// Records one group of trigger requests in one transaction and answers each request.
async fn commit_group(store: &Store, requests: Vec<TriggerRequest>, count: usize) {
    let mut sizes = Vec::with_capacity(requests.len());
    let mut all = Vec::with_capacity(count);
    let mut replies = Vec::with_capacity(requests.len());
    for (records, reply) in requests {
        sizes.push(records.len());
        all.extend(records);
        replies.push(reply);
    }
    match store.insert_triggers_now(&all).await {
        Ok(fresh) => {
            let mut fresh = fresh.into_iter();
            for (size, reply) in sizes.into_iter().zip(replies) {
                let _ = reply.send(Ok(fresh.by_ref().take(size).collect()));
            }
        }
        Err(e) => {
            let message = format!("{e:#}");
            for reply in replies {
                let _ = reply.send(Err(crate::error::Error::Internal(anyhow::anyhow!(
                    "{message}"
                ))));
            }
        }
    }
}

/// One trigger to record: its transaction id and, per recipient, the notification, the jobs of its steps
/// in step order (the first queued or merged, the others pending or skipped; never empty) and the first
/// job's first execution details.
pub struct TriggerRecord {
    pub environment_id: EnvironmentId,
    pub transaction_id: String,
    pub batch: Vec<(Notification, Vec<Job>, Vec<ExecutionDetail>)>,
}

/// Appends an event to the `digest.events` of a digest job that is still waiting, in one statement: the
/// row's lock makes concurrent appends (a trigger's group commit and a worker's completion, or the group
/// commits of two processes on PostgreSQL) queue instead of one overwriting the other's read. The JSON
/// functions differ.
macro_rules! append_digest_event {
    ($tx:expr, $dialect:expr, $job_id:expr, $event:expr, $now:expr) => {{
        let sql = match $dialect {
            Dialect::Postgres => {
                "update jobs set digest = jsonb_set(coalesce(digest, '{}'::jsonb), '{events}',
                   coalesce(digest -> 'events', '[]'::jsonb) || jsonb_build_array($1::jsonb)),
                   updated_at = $2 where id = $3"
            }
            Dialect::Sqlite => {
                "update jobs set digest = json_set(coalesce(digest, '{}'), '$.events',
                   json_insert(coalesce(json_extract(digest, '$.events'), json('[]')), '$[#]', json($1))),
                   updated_at = $2 where id = $3"
            }
        };
        sqlx::query(sql)
            .bind(Json(&$event))
            .bind($now)
            .bind($job_id)
            .execute(&mut *$tx)
            .await?;
    }};
}

/// A job a trigger recorded already leased to this process's workers, with its notification.
pub type HandedJob = (Job, Notification);

/// Where the trigger writer hands the due first jobs of new notifications: this process's workers, as
/// `worker`, for `lease_ms` (see [`Store::hand_jobs_to`]).
#[derive(Debug, Clone)]
pub(crate) struct Handoff {
    worker: String,
    lease_ms: i64,
    jobs: tokio::sync::mpsc::Sender<HandedJob>,
}

impl Store {
    /// Records triggers, grouped with the triggers other requests are recording at the same moment into one
    /// transaction (group commit: the writer is the bottleneck, not the rows). Per record: true when it was
    /// recorded, false when its transaction id was seen before (then nothing of it is written).
    pub async fn insert_triggers(&self, records: Vec<TriggerRecord>) -> Result<Vec<bool>> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let queue = self.trigger_queue.get_or_init(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            crate::background::spawn(group_commit(self.clone(), rx));
            tx
        });
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        queue
            .send((records, done_tx))
            .map_err(|_| anyhow::anyhow!("the trigger writer has stopped"))?;
        done_rx
            .await
            .map_err(|_| anyhow::anyhow!("the trigger writer dropped the request"))?
    }

    /// From now on, the trigger writer records the first job of a new notification that is due at once
    /// already leased to `worker` (as a claim would) and hands it, with its notification, to the returned
    /// receiver after the commit: no claim statement and no read of the notification. At most `capacity`
    /// jobs wait there; beyond that, jobs are queued for claiming as usual. A job handed to workers that
    /// stop is claimed again when its lease expires, like any claimed job.
    pub fn hand_jobs_to(
        &self,
        worker: &str,
        lease_ms: i64,
        capacity: usize,
    ) -> tokio::sync::mpsc::Receiver<HandedJob> {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
        *self.handoff.write().unwrap_or_else(|p| p.into_inner()) = Some(Handoff {
            worker: worker.to_owned(),
            lease_ms,
            jobs: tx,
        });
        rx
    }

    /// Stops handing jobs to `worker` (see [`Store::hand_jobs_to`]).
    pub fn stop_handing_jobs(&self, worker: &str) {
        let mut handoff = self.handoff.write().unwrap_or_else(|p| p.into_inner());
        if handoff.as_ref().is_some_and(|h| h.worker == worker) {
            *handoff = None;
        }
    }

    /// Gives back jobs `worker` holds but will not run (a stopping process): queued again at once, their
    /// claim not counted as an attempt.
    pub async fn release_jobs(&self, worker: &str, ids: &[String]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut q = Sql::new(
            "update jobs set status = 'queued', locked_by = null, locked_until = null, attempts = attempts - 1, \
             updated_at = ",
        );
        q.bind(Timestamp::now().0)
            .push(" where status = 'running' and locked_by = ")
            .bind(worker);
        q.push_in("id", ids);
        Ok(
            on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?,
        )
    }

    /// Records triggers in one transaction, with multi-row inserts (see [`Store::insert_triggers`]).
    async fn insert_triggers_now(&self, records: &[TriggerRecord]) -> Result<Vec<bool>> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let now = Timestamp::now().0;
        // In key order: concurrent transactions that share transaction ids (another process's group commit on
        // PostgreSQL) then wait for each other instead of deadlocking.
        let mut ordered: Vec<&TriggerRecord> = records.iter().collect();
        ordered.sort_by(|a, b| {
            (&a.environment_id.0, &a.transaction_id).cmp(&(&b.environment_id.0, &b.transaction_id))
        });
        let keys = insert_rows(
            "insert into trigger_transactions (environment_id, transaction_id, created_at)",
            "on conflict (environment_id, transaction_id) do nothing returning environment_id, transaction_id",
            ordered
                .iter()
                .map(|r| vec![Arg::from(r.environment_id.as_str()), Arg::from(&r.transaction_id), Arg::Int(now)])
                .collect(),
        );
        let dialect = self.dialect();
        let handoff = self
            .handoff
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let fresh = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let mut inserted: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
            for q in &keys {
                let rows: Vec<(String, String)> =
                    bind_args!(sqlx::query_as(&q.text), q.args.clone()).fetch_all(&mut *tx).await?;
                inserted.extend(rows);
            }
            // A transaction id repeated within this call counts once.
            let fresh: Vec<bool> = records
                .iter()
                .map(|r| inserted.remove(&(r.environment_id.0.clone(), r.transaction_id.clone())))
                .collect();
            let kept: Vec<&TriggerRecord> = records.iter().zip(&fresh).filter(|(_, f)| **f).map(|(r, _)| r).collect();
            let notifications: Vec<&Notification> = kept.iter().flat_map(|r| r.batch.iter().map(|b| &b.0)).collect();
            let jobs: Vec<&Job> = kept.iter().flat_map(|r| r.batch.iter().filter_map(|b| b.1.first())).collect();
            // The later steps' jobs, waiting for the chain to reach them.
            let later: Vec<&Job> = kept.iter().flat_map(|r| r.batch.iter().flat_map(|b| b.1.iter().skip(1))).collect();
            // The jobs due now go to this process's workers already leased, as far as they have room.
            // `jobs[i]` is the first job of `notifications[i]` (both follow the records' batches).
            let mut handed: Vec<HandedJob> = Vec::new();
            let mut queued: Vec<&Job> = jobs.clone();
            let mut permits = None;
            if let Some(h) = &handoff {
                let (due, rest): (Vec<usize>, Vec<usize>) = (0..jobs.len())
                    .partition(|&i| jobs[i].status == crate::domain::job::status::QUEUED && jobs[i].run_at.0 <= now);
                if let Ok(p) = h.jobs.try_reserve_many(due.len()) {
                    handed = due
                        .into_iter()
                        .map(|i| {
                            let mut job = jobs[i].clone();
                            job.status = crate::domain::job::status::RUNNING.to_owned();
                            job.attempts += 1;
                            (job, notifications[i].clone())
                        })
                        .collect();
                    queued = rest.into_iter().map(|i| jobs[i]).collect();
                    permits = Some(p);
                }
            }
            let leased: Vec<&Job> = handed.iter().map(|(j, _)| j).collect();
            let details: Vec<&ExecutionDetail> = kept.iter().flat_map(|r| r.batch.iter().flat_map(|b| &b.2)).collect();
            let mut inserts = insert_notifications(&notifications);
            inserts.extend(insert_jobs(&queued, None));
            inserts.extend(insert_jobs(&later, None));
            if let Some(h) = &handoff {
                inserts.extend(insert_jobs(&leased, Some((&h.worker, now + h.lease_ms))));
            }
            inserts.extend(insert_details(&details));
            for q in batched(dialect, inserts) {
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            // By digest job (stable: each job's events stay in order), so that concurrent transactions lock
            // the jobs in the same order.
            let mut merges: Vec<(&str, &Job)> = jobs
                .iter()
                .filter_map(|job| {
                    let open = job.digest.as_ref()?.get("mergedInto")?.as_str()?;
                    Some((open, *job))
                })
                .collect();
            merges.sort_by_key(|(open, _)| *open);
            for (open, job) in merges {
                let event = serde_json::json!({
                    "id": job.transaction_id, "time": job.created_at.to_iso(), "payload": job.payload,
                });
                append_digest_event!(&mut *tx, dialect, open, event, now);
            }
            tx.commit().await?;
            if let Some(permits) = permits {
                for (permit, job) in permits.zip(handed) {
                    permit.send(job);
                }
            }
            Ok::<_, sqlx::Error>(fresh)
        })?;
        Ok(fresh)
    }

    /// Claims up to `limit` due jobs for `worker` with a lease. With `reclaim_expired`, jobs whose lease
    /// expired (their worker died) are claimed again, before due ones.
    pub async fn claim_jobs(
        &self,
        worker: &str,
        limit: i64,
        lease_ms: i64,
        reclaim_expired: bool,
    ) -> Result<Vec<Job>> {
        let now = Timestamp::now().0;
        // Two statements, each served by the `jobs_due (status, run_at)` index in order and stopping after
        // `limit` rows. One statement with `(queued and due) or (running and expired) order by run_at` would
        // collect and sort the whole backlog on every claim.
        let expired = if reclaim_expired {
            self.claim_where(
                worker,
                "status = 'running' and locked_until < $3",
                limit,
                lease_ms,
                now,
            )
            .await?
        } else {
            Vec::new()
        };
        let left = limit - expired.len() as i64;
        let mut jobs = expired;
        if left > 0 {
            jobs.extend(
                self.claim_where(
                    worker,
                    "status = 'queued' and run_at <= $3",
                    left,
                    lease_ms,
                    now,
                )
                .await?,
            );
        }
        Ok(jobs)
    }

    async fn claim_where(
        &self,
        worker: &str,
        condition: &str,
        limit: i64,
        lease_ms: i64,
        now: i64,
    ) -> Result<Vec<Job>> {
        // The dialects differ here: PostgreSQL skips rows other workers are claiming right now; SQLite has
        // a single writer, so the statement is already exclusive.
        let lock = match self.dialect() {
            Dialect::Postgres => " for update skip locked",
            Dialect::Sqlite => "",
        };
        let sql = format!(
            "update jobs set status = 'running', locked_by = $1, locked_until = $2, attempts = attempts + 1,
               updated_at = $3
             where id in (select id from jobs where {condition} order by run_at limit $4{lock})
             returning {JOB_COLUMNS}"
        );
        let rows: Vec<JobRow> = on_db!(self.w(), p => sqlx::query_as::<_, JobRow>(&sql)
            .bind(worker).bind(now + lease_ms).bind(now).bind(limit).fetch_all(p).await)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// Extends the leases `worker` holds on `ids` to `lease_ms` from now (jobs still running under it).
    pub async fn renew_leases(&self, worker: &str, ids: &[String], lease_ms: i64) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let now = Timestamp::now().0;
        let mut q = Sql::new("update jobs set locked_until = ");
        q.bind(now + lease_ms)
            .push(" where status = 'running' and locked_by = ")
            .bind(worker);
        q.push_in("id", ids);
        Ok(
            on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?,
        )
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
        Ok(self
            .complete_jobs(worker, &[(job, outcome)])
            .await?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// Finishes several jobs this worker holds in one transaction, with multi-row inserts. Per job: false when
    /// its lease was lost (then nothing of it is written).
    pub async fn complete_jobs(
        &self,
        worker: &str,
        items: &[(&Job, &JobOutcome)],
    ) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let now = Timestamp::now().0;
        // One status update per distinct final status, each guarded by the lease.
        let mut updates = Vec::new();
        for (job, o) in items {
            if let Some(r) = &o.retry {
                let mut q = Sql::new("update jobs set status = 'queued', locked_by = null, locked_until = null, run_at = ");
                q.bind(r.run_at)
                    .push(", delivery = ")
                    .bind(Arg::Json(r.delivery.clone()));
                if let Some(p) = &o.provider_id {
                    q.push(", provider_id = ").bind(p.as_str());
                }
                q.push(", updated_at = ")
                    .bind(now)
                    .push(" where id = ")
                    .bind(&job.id);
                q.push(" and status = 'running' and locked_by = ")
                    .bind(worker);
                q.push(" returning id");
                updates.push(q);
            }
        }
        // Grouped by final status and provider (nearly always one group).
        let mut groups: Vec<(&str, Option<&str>)> = items
            .iter()
            .filter(|(_, o)| o.retry.is_none())
            .map(|(_, o)| (o.status.as_str(), o.provider_id.as_deref()))
            .collect();
        groups.sort_unstable();
        groups.dedup();
        for (status, provider) in groups {
            let ids: Vec<String> = items
                .iter()
                .filter(|(_, o)| {
                    o.status == status && o.provider_id.as_deref() == provider && o.retry.is_none()
                })
                .map(|(j, _)| j.id.clone())
                .collect();
            let mut q = Sql::new("update jobs set status = ");
            q.bind(status);
            if let Some(p) = provider {
                q.push(", provider_id = ").bind(p);
            }
            q.push(", locked_until = null, updated_at = ").bind(now);
            q.push(" where status = 'running' and locked_by = ")
                .bind(worker);
            q.push_in("id", &ids);
            q.push(" returning id");
            updates.push(q);
        }
        let dialect = self.dialect();
        let owned = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let mut owned: std::collections::HashSet<String> = std::collections::HashSet::new();
            for q in &updates {
                let ids: Vec<String> = bind_args!(sqlx::query_scalar(&q.text), q.args.clone()).fetch_all(&mut *tx).await?;
                owned.extend(ids);
            }
            let done: Vec<(&Job, &JobOutcome)> = items.iter().filter(|(j, _)| owned.contains(&j.id)).map(|(j, o)| (*j, *o)).collect();
            // The next steps' jobs first: one no longer pending (canceled meanwhile) is not activated, and
            // the detail and digest event that came with its activation are not written either.
            let next: Vec<&Job> = done.iter().filter_map(|(_, o)| o.next.as_ref()).collect();
            let mut activated: std::collections::HashSet<String> = std::collections::HashSet::new();
            for q in activate_jobs(&next) {
                let ids: Vec<String> = bind_args!(sqlx::query_scalar(&q.text), q.args).fetch_all(&mut *tx).await?;
                activated.extend(ids);
            }
            let lost = |o: &JobOutcome| o.next.as_ref().is_some_and(|n| !activated.contains(&n.id));
            let details: Vec<&ExecutionDetail> = done.iter()
                .flat_map(|(_, o)| o.details.iter().filter(move |d| !(lost(o) && o.next.as_ref().is_some_and(|n| n.id == d.job_id))))
                .collect();
            let messages: Vec<&Message> = done.iter().filter_map(|(_, o)| o.message.as_ref()).collect();
            let mut inserts = insert_details(&details);
            inserts.extend(insert_messages(&messages));
            // After the activations: the jobs a stopped chain never reaches.
            let mut rest: Vec<(&str, &str)> = done.iter()
                .filter(|(_, o)| o.retry.is_none())
                .filter_map(|(j, o)| Some((o.rest?, j.notification_id.as_str())))
                .collect();
            rest.sort_unstable();
            let mut at = 0;
            while at < rest.len() {
                let status = rest[at].0;
                let ids: Vec<String> = rest[at..].iter().take_while(|(s, _)| *s == status).map(|(_, n)| (*n).to_owned()).collect();
                at += ids.len();
                let mut q = Sql::new("update jobs set status = ");
                q.bind(status).push(", updated_at = ").bind(now);
                q.push(" where status = 'pending'");
                q.push_in("notification_id", &ids);
                inserts.push(q);
            }
            for q in batched(dialect, inserts) {
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            // By digest job, as in `insert_triggers_now`.
            let mut merges: Vec<&(String, Value)> = done.iter().filter(|(_, o)| !lost(o)).filter_map(|(_, o)| o.merge_into.as_ref()).collect();
            merges.sort_by(|a, b| a.0.cmp(&b.0));
            for (digest_job, event) in merges {
                append_digest_event!(&mut *tx, dialect, digest_job, event, now);
            }
            tx.commit().await.map(|_| owned)
        })?;
        Ok(items.iter().map(|(j, _)| owned.contains(&j.id)).collect())
    }

    /// A job by its dedupe key (`Job::dedupe`: a notification's step).
    pub async fn get_job_by_dedupe(&self, dedupe_key: &str) -> Result<Option<Job>> {
        let sql = format!("select {JOB_COLUMNS} from jobs where dedupe_key = $1");
        let row: Option<JobRow> = on_db!(self.r(), p => sqlx::query_as::<_, JobRow>(&sql)
            .bind(dedupe_key).fetch_optional(p).await)?;
        Ok(row.map(Into::into))
    }

    /// A queued digest job for `digest_key` whose window is still open, to merge an event into.
    pub async fn open_digest_job(&self, digest_key: &str) -> Result<Option<String>> {
        Ok(on_db!(self.w(), p => sqlx::query_scalar::<_, String>(
            "select id from jobs where digest_key = $1 and status = 'queued' order by run_at limit 1")
            .bind(digest_key).fetch_optional(p).await)?)
    }

    /// Whether a digest job for `digest_key` was created since `since` (backoff digests).
    pub async fn digest_since(&self, digest_key: &str, since: i64) -> Result<bool> {
        let found: Option<i32> = on_db!(self.w(), p => sqlx::query_scalar::<_, i32>(
            "select 1 from jobs where digest_key = $1 and created_at >= $2 limit 1")
            .bind(digest_key).bind(since).fetch_optional(p).await)?;
        Ok(found.is_some())
    }

    /// Counts the jobs of a step for the subscriber and workflow that ran (completed, or running) since
    /// `since` (throttling): by `updated_at`, as a job is created at trigger time, maybe long before the
    /// chain reaches it.
    /// Through the subscriber's notifications (`notifications_subscriber`), then their jobs by
    /// `(notification_id, step_index)`: jobs have no subscriber index, and filtering them by environment
    /// read every job of the environment. `workflow_ref || ''` keeps SQLite off the workflow index, which
    /// would read every notification of a busy workflow instead of one subscriber's.
    pub async fn count_recent_jobs(&self, job: &Job, since: i64) -> Result<i64> {
        Ok(on_db!(self.r(), p => sqlx::query_scalar::<_, i64>(
            "select count(*) from jobs where notification_id in (select id from notifications
                 where environment_id = $1 and subscriber_id = $2 and workflow_ref || '' = $3)
               and step_index = $4 and updated_at >= $5 and status in ('completed', 'running')")
            .bind(&job.environment_id).bind(&job.subscriber_id).bind(&job.workflow_ref).bind(job.step_index).bind(since)
            .fetch_one(p).await)?)
    }

    /// Cancels the queued and pending jobs of a transaction (steps not run yet); returns how many.
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
                 where environment_id = $1 and transaction_id = $2 and status in ('queued', 'pending')")
                .bind(env.as_str()).bind(transaction_id).fetch_all(&mut *tx).await?;
            for (id, notification_id, provider_id) in &ids {
                sqlx::query("update jobs set status = 'canceled', updated_at = $1 where id = $2 and status in ('queued', 'pending')")
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
                for q in insert_details(&[&d]) {
                    bind_args!(sqlx::query(&q.text), q.args.clone()).execute(&mut *tx).await?;
                }
            }
            tx.commit().await.map(|_| ids.len() as u64)
        })?;
        Ok(n)
    }

    pub async fn insert_details(&self, details: &[ExecutionDetail]) -> Result<()> {
        let refs: Vec<&ExecutionDetail> = details.iter().collect();
        for q in insert_details(&refs) {
            on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args.clone()).execute(p).await.map(|_| ()))?;
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

const NOTIFICATION_COLUMNS: &str = "id, organization_id, environment_id, subscriber_ref, subscriber_id, workflow_ref, \
    workflow_identifier, transaction_id, channels, payload, overrides, to_value, actor, tags, severity, critical, \
    context_keys, digested_notification_id, created_at, updated_at";

sql_row! {
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

/// The columns the activity feed shows of a notification (see [`NotificationView`]).
const NOTIFICATION_VIEW_COLUMNS: &str = "id, subscriber_ref, subscriber_id, \
    workflow_ref, workflow_identifier, transaction_id, channels, payload, to_value, tags, severity, critical, \
    context_keys, digested_notification_id, created_at, updated_at";

sql_row! {
    struct NotificationViewRow {
        id: String,
        subscriber_ref: String,
        subscriber_id: String,
        workflow_ref: String,
        workflow_identifier: String,
        transaction_id: String,
        channels: Json<Box<RawValue>>,
        payload: Json<Box<RawValue>>,
        to_value: Option<Json<Box<RawValue>>>,
        tags: Json<Box<RawValue>>,
        severity: String,
        critical: bool,
        context_keys: Json<Box<RawValue>>,
        digested_notification_id: Option<String>,
        created_at: i64,
        updated_at: i64,
    }
}

impl ViewRow for NotificationViewRow {
    type View<'a> = NotificationView<'a>;

    fn view(&self) -> NotificationView<'_> {
        NotificationView {
            id: &self.id,
            subscriber_ref: &self.subscriber_ref,
            subscriber_id: &self.subscriber_id,
            workflow_ref: &self.workflow_ref,
            workflow_identifier: &self.workflow_identifier,
            transaction_id: &self.transaction_id,
            channels: self.channels.0.get(),
            payload: self.payload.0.get(),
            to: self.to_value.as_ref().map(|j| j.0.get()),
            tags: self.tags.0.get(),
            severity: &self.severity,
            critical: self.critical,
            context_keys: self.context_keys.0.get(),
            digested_notification_id: self.digested_notification_id.as_deref(),
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
        }
    }

    fn view_inline<'a>(r: &'a rusqlite::Row<'_>) -> rusqlite::Result<NotificationView<'a>> {
        let mut c = Columns::new(r);
        Ok(NotificationView {
            id: c.str("id")?,
            subscriber_ref: c.str("subscriber_ref")?,
            subscriber_id: c.str("subscriber_id")?,
            workflow_ref: c.str("workflow_ref")?,
            workflow_identifier: c.str("workflow_identifier")?,
            transaction_id: c.str("transaction_id")?,
            channels: c.str("channels")?,
            payload: c.str("payload")?,
            to: c.opt_str("to_value")?,
            tags: c.str("tags")?,
            severity: c.str("severity")?,
            critical: c.get("critical")?,
            context_keys: c.str("context_keys")?,
            digested_notification_id: c.opt_str("digested_notification_id")?,
            created_at: Timestamp(c.get("created_at")?),
            updated_at: Timestamp(c.get("updated_at")?),
        })
    }
}

/// The columns the activity feed shows of an execution detail (see [`DetailView`]).
const DETAIL_VIEW_COLUMNS: &str =
    "id, job_id, status, detail, source, is_retry, is_test, provider_id, raw, created_at";

sql_row! {
    struct DetailViewRow {
        id: String,
        job_id: String,
        status: String,
        detail: String,
        source: String,
        is_retry: bool,
        is_test: bool,
        provider_id: Option<String>,
        raw: Option<String>,
        created_at: i64,
    }
}

impl ViewRow for DetailViewRow {
    type View<'a> = DetailView<'a>;

    fn view(&self) -> DetailView<'_> {
        DetailView {
            id: &self.id,
            job_id: &self.job_id,
            status: &self.status,
            detail: &self.detail,
            source: &self.source,
            is_retry: self.is_retry,
            is_test: self.is_test,
            provider_id: self.provider_id.as_deref(),
            raw: self.raw.as_deref(),
            created_at: Timestamp(self.created_at),
        }
    }

    fn view_inline<'a>(r: &'a rusqlite::Row<'_>) -> rusqlite::Result<DetailView<'a>> {
        let mut c = Columns::new(r);
        Ok(DetailView {
            id: c.str("id")?,
            job_id: c.str("job_id")?,
            status: c.str("status")?,
            detail: c.str("detail")?,
            source: c.str("source")?,
            is_retry: c.get("is_retry")?,
            is_test: c.get("is_test")?,
            provider_id: c.opt_str("provider_id")?,
            raw: c.opt_str("raw")?,
            created_at: Timestamp(c.get("created_at")?),
        })
    }
}

/// Runs `q` (a select without ordering) as page `page` of `limit` rows, newest first; `has_more` is exact
/// (reads `limit + 1`).
async fn newest_first_page<R: PortableRow + ReadRow + Into<T>, T>(
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
        .fetch_rows::<R>(q)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let has_more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    Ok((rows, has_more))
}

impl Store {
    /// The notifications of a batch of claimed jobs, in one query.
    pub async fn get_notifications(&self, keys: &[(String, String)]) -> Result<Vec<Notification>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        // By primary key, with each row's environment checked against its job's: a tenant condition in
        // the SQL (`environment_id in (…)`) lets SQLite pick a tenant index and scan the environment.
        let ids: Vec<String> = keys.iter().map(|(_, id)| id.clone()).collect();
        let mut q = Sql::new("select ");
        q.push(NOTIFICATION_COLUMNS)
            .push(" from notifications where true");
        q.push_in("id", &ids);
        let rows = self.fetch_rows::<NotificationRow>(q).await?;
        Ok(rows
            .into_iter()
            .map(Notification::from)
            .filter(|n| {
                keys.iter()
                    .any(|(e, id)| *e == n.environment_id && *id == n.id)
            })
            .collect())
    }

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
        Ok(self
            .fetch_rows::<NotificationRow>(q)
            .await?
            .into_iter()
            .next()
            .map(Into::into))
    }

    /// One notification as the activity feed shows it, handed to `visit` (not called when there is none).
    pub async fn visit_notification(
        &self,
        env: &EnvironmentId,
        id: &str,
        visit: impl for<'v> FnMut(NotificationView<'v>) + Send,
    ) -> Result<()> {
        let mut q = Sql::new("select ");
        q.push(NOTIFICATION_VIEW_COLUMNS)
            .push(" from notifications where environment_id = ")
            .bind(env.as_str());
        q.push(" and id = ").bind(id);
        self.visit_rows::<NotificationViewRow>(q, visit).await
    }

    /// A page of notifications as the activity feed shows them, newest first, each handed to `visit`;
    /// returns whether more follow (exact: reads `limit + 1`).
    pub async fn visit_notifications(
        &self,
        env: &EnvironmentId,
        f: &NotificationFilter,
        page: i64,
        limit: i64,
        mut visit: impl for<'v> FnMut(NotificationView<'v>) + Send,
    ) -> Result<bool> {
        let mut q = Sql::new("select ");
        q.push(NOTIFICATION_VIEW_COLUMNS)
            .push(" from notifications where environment_id = ")
            .bind(env.as_str());
        if let Some(ids) = &f.subscriber_ids {
            if ids.is_empty() {
                return Ok(false);
            }
            q.push_in("subscriber_id", ids);
        }
        if !f.workflow_refs.is_empty() {
            q.push_in("workflow_ref", &f.workflow_refs);
        }
        if !f.severity.is_empty() {
            q.push_in("severity", &f.severity);
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
        q.push(" order by created_at desc, id desc limit ")
            .bind(limit + 1)
            .push(" offset ")
            .bind(page * limit);
        let mut seen = 0;
        self.visit_rows::<NotificationViewRow>(q, |n| {
            seen += 1;
            if seen <= limit {
                visit(n);
            }
        })
        .await?;
        Ok(seen > limit)
    }

    /// The jobs of several notifications (one query for a whole page), each handed to `visit`, in no
    /// particular order: an `order by` over the page's rows makes the database copy every row, JSON columns
    /// and all, through a sorter, so the caller orders what it keeps.
    pub async fn visit_jobs_of(
        &self,
        notification_ids: &[String],
        visit: impl for<'v> FnMut(JobView<'v>) + Send,
    ) -> Result<()> {
        if notification_ids.is_empty() {
            return Ok(());
        }
        let mut q = Sql::new("select ");
        q.push(JOB_VIEW_COLUMNS).push(" from jobs where 1 = 1");
        q.push_in("notification_id", notification_ids);
        self.visit_rows::<JobViewRow>(q, visit).await
    }

    /// The jobs of several notifications, each notification's in step order (then creation order).
    pub async fn jobs_of(&self, notification_ids: &[String]) -> Result<Vec<JobSummary>> {
        let mut jobs: Vec<JobSummary> = Vec::new();
        self.visit_jobs_of(notification_ids, |j| jobs.push(j.into()))
            .await?;
        jobs.sort_by(|a, b| {
            (&a.notification_id, a.step_index, a.created_at).cmp(&(
                &b.notification_id,
                b.step_index,
                b.created_at,
            ))
        });
        Ok(jobs)
    }

    /// The execution details of several notifications (one query for a whole page), each handed to
    /// `visit`, in no particular order (see [`Store::visit_jobs_of`]).
    pub async fn visit_details_of(
        &self,
        notification_ids: &[String],
        visit: impl for<'v> FnMut(DetailView<'v>) + Send,
    ) -> Result<()> {
        if notification_ids.is_empty() {
            return Ok(());
        }
        let mut q = Sql::new("select ");
        q.push(DETAIL_VIEW_COLUMNS)
            .push(" from execution_details where 1 = 1");
        q.push_in("notification_id", notification_ids);
        self.visit_rows::<DetailViewRow>(q, visit).await
    }
}

const MESSAGE_COLUMNS: &str = "id, organization_id, environment_id, notification_id, subscriber_ref, subscriber_id, \
    workflow_ref, workflow_identifier, job_id, transaction_id, channel, subject, content, avatar, cta, data, payload, \
    overrides, read, seen, last_read_date, last_seen_date, status, provider_id, context_keys, deleted, created_at, updated_at, \
    email, phone, direct_webhook_url, device_tokens, delivered_at, error_id, error_text";

sql_row! {
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
        email: Option<String>,
        phone: Option<String>,
        direct_webhook_url: Option<String>,
        device_tokens: Option<Json<Vec<String>>>,
        delivered_at: Option<i64>,
        error_id: Option<String>,
        error_text: Option<String>,
    }
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
            delivery: MessageDelivery {
                email: r.email,
                phone: r.phone,
                direct_webhook_url: r.direct_webhook_url,
                device_tokens: r.device_tokens.map(|j| j.0),
                delivered_at: r.delivered_at.map(Timestamp),
                error_id: r.error_id,
                error_text: r.error_text,
            },
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
        q.push_in("id", ids);
        on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args.clone()).execute(p).await.map(|_| ()))?;
        let mut s = Sql::new("select ");
        s.push(MESSAGE_COLUMNS)
            .push(" from messages where environment_id = ")
            .bind(env.as_str());
        s.push(" and subscriber_id = ")
            .bind(subscriber_id)
            .push(" and deleted = false");
        s.push_in("id", ids);
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

impl ReadRow for JobRow {
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        let mut c = Columns::new(r);
        Ok(Self {
            id: c.get("id")?,
            organization_id: c.get("organization_id")?,
            environment_id: c.get("environment_id")?,
            notification_id: c.get("notification_id")?,
            subscriber_ref: c.get("subscriber_ref")?,
            subscriber_id: c.get("subscriber_id")?,
            workflow_ref: c.get("workflow_ref")?,
            transaction_id: c.get("transaction_id")?,
            step_index: c.get("step_index")?,
            step: c.json("step")?,
            status: c.get("status")?,
            provider_id: c.get("provider_id")?,
            payload: c.json("payload")?,
            overrides: c.opt_json("overrides")?,
            digest: c.opt_json("digest")?,
            digest_key: c.get("digest_key")?,
            run_at: c.get("run_at")?,
            attempts: c.get("attempts")?,
            dedupe_key: c.get("dedupe_key")?,
            schedule_extensions_count: c.get("schedule_extensions_count")?,
            delivery: c.opt_json("delivery")?,
            created_at: c.get("created_at")?,
            updated_at: c.get("updated_at")?,
        })
    }
}

/// The columns the activity feed shows of a job (see [`JobView`]).
const JOB_VIEW_COLUMNS: &str = "id, notification_id, step_index, step, status, provider_id, \
    payload, overrides, digest, run_at, schedule_extensions_count, created_at, updated_at";

sql_row! {
    struct JobViewRow {
        id: String,
        notification_id: String,
        step_index: i64,
        step: Json<Box<RawValue>>,
        status: String,
        provider_id: String,
        payload: Json<Box<RawValue>>,
        overrides: Option<Json<Box<RawValue>>>,
        digest: Option<Json<Box<RawValue>>>,
        run_at: i64,
        schedule_extensions_count: i64,
        created_at: i64,
        updated_at: i64,
    }
}

impl ViewRow for JobViewRow {
    type View<'a> = JobView<'a>;

    fn view(&self) -> JobView<'_> {
        JobView {
            id: &self.id,
            notification_id: &self.notification_id,
            step_index: self.step_index,
            step: self.step.0.get(),
            status: &self.status,
            provider_id: &self.provider_id,
            payload: self.payload.0.get(),
            overrides: self.overrides.as_ref().map(|j| j.0.get()),
            digest: self.digest.as_ref().map(|j| j.0.get()),
            run_at: Timestamp(self.run_at),
            schedule_extensions_count: self.schedule_extensions_count,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
        }
    }

    fn view_inline<'a>(r: &'a rusqlite::Row<'_>) -> rusqlite::Result<JobView<'a>> {
        let mut c = Columns::new(r);
        Ok(JobView {
            id: c.str("id")?,
            notification_id: c.str("notification_id")?,
            step_index: c.get("step_index")?,
            step: c.str("step")?,
            status: c.str("status")?,
            provider_id: c.str("provider_id")?,
            payload: c.str("payload")?,
            overrides: c.opt_str("overrides")?,
            digest: c.opt_str("digest")?,
            run_at: Timestamp(c.get("run_at")?),
            schedule_extensions_count: c.get("schedule_extensions_count")?,
            created_at: Timestamp(c.get("created_at")?),
            updated_at: Timestamp(c.get("updated_at")?),
        })
    }
}

impl ReadRow for NotificationRow {
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        let mut c = Columns::new(r);
        Ok(Self {
            id: c.get("id")?,
            organization_id: c.get("organization_id")?,
            environment_id: c.get("environment_id")?,
            subscriber_ref: c.get("subscriber_ref")?,
            subscriber_id: c.get("subscriber_id")?,
            workflow_ref: c.get("workflow_ref")?,
            workflow_identifier: c.get("workflow_identifier")?,
            transaction_id: c.get("transaction_id")?,
            channels: c.json("channels")?,
            payload: c.json("payload")?,
            overrides: c.opt_json("overrides")?,
            to_value: c.opt_json("to_value")?,
            actor: c.opt_json("actor")?,
            tags: c.json("tags")?,
            severity: c.get("severity")?,
            critical: c.get("critical")?,
            context_keys: c.json("context_keys")?,
            digested_notification_id: c.get("digested_notification_id")?,
            created_at: c.get("created_at")?,
            updated_at: c.get("updated_at")?,
        })
    }
}

impl ReadRow for MessageRow {
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        let mut c = Columns::new(r);
        Ok(Self {
            id: c.get("id")?,
            organization_id: c.get("organization_id")?,
            environment_id: c.get("environment_id")?,
            notification_id: c.get("notification_id")?,
            subscriber_ref: c.get("subscriber_ref")?,
            subscriber_id: c.get("subscriber_id")?,
            workflow_ref: c.get("workflow_ref")?,
            workflow_identifier: c.get("workflow_identifier")?,
            job_id: c.get("job_id")?,
            transaction_id: c.get("transaction_id")?,
            channel: c.get("channel")?,
            subject: c.get("subject")?,
            content: c.get("content")?,
            avatar: c.get("avatar")?,
            cta: c.json("cta")?,
            data: c.opt_json("data")?,
            payload: c.json("payload")?,
            overrides: c.opt_json("overrides")?,
            read: c.get("read")?,
            seen: c.get("seen")?,
            last_read_date: c.get("last_read_date")?,
            last_seen_date: c.get("last_seen_date")?,
            status: c.get("status")?,
            provider_id: c.get("provider_id")?,
            context_keys: c.json("context_keys")?,
            deleted: c.get("deleted")?,
            created_at: c.get("created_at")?,
            updated_at: c.get("updated_at")?,
            email: c.get("email")?,
            phone: c.get("phone")?,
            direct_webhook_url: c.get("direct_webhook_url")?,
            device_tokens: c.opt_json("device_tokens")?,
            delivered_at: c.get("delivered_at")?,
            error_id: c.get("error_id")?,
            error_text: c.get("error_text")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::plans::{migrated, plan};

    /// The digest lookups read the digest-key index in order (no sort for the open window), and the
    /// index is partial: jobs without a digest key, nearly all of them, add no entry to it.
    #[test]
    fn digest_lookups_use_the_partial_digest_index() {
        let conn = migrated();
        for sql in [
            "select id from jobs where digest_key = $1 and status = 'queued' order by run_at limit 1",
            "select 1 from jobs where digest_key = $1 and created_at >= $2 limit 1",
        ] {
            let p = plan(&conn, sql);
            assert!(p.contains("USING INDEX jobs_digest (digest_key=?"), "{sql}: {p}");
            assert!(!p.contains("TEMP B-TREE"), "{sql}: {p}");
        }
        let partial: bool = conn
            .query_row(
                "select \"partial\" from pragma_index_list('jobs') where name = 'jobs_digest'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(partial);
    }
}
