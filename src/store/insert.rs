//! Multi-row inserts of the engine's tables, shared by the writes that record triggers and complete jobs:
//! statements of bounded size, joined into one script on SQLite.

use serde_json::Value;

use super::sql::{Arg, Sql};
use super::Dialect;
use crate::domain::context::context_set;
use crate::domain::job::{ExecutionDetail, Job, Message, Notification};

/// Bound values per multi-row `insert`. SQLite (through sqlx) looks each parameter up by walking the
/// statement's parameter list, so binding costs grow with the square of their number: 4,600 parameters took
/// ~30 ms per statement, 256 take ~0.1 ms. PostgreSQL pays one round trip per statement, which this keeps few.
const PARAMS_PER_INSERT: usize = 256;

/// The statements, for one call: on SQLite joined into one script with anonymous `?` parameters (sqlx runs
/// every statement of a query and binds the arguments in order), so a transaction's inserts cost one
/// hand-off to the connection's thread instead of one each; on PostgreSQL (no multi-statement queries with
/// parameters) as they are.
pub(super) fn batched(dialect: Dialect, statements: Vec<Sql>) -> Vec<Sql> {
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
pub(super) fn insert_rows(head: &str, tail: &str, rows: Vec<Vec<Arg>>) -> Vec<Sql> {
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
pub(super) fn insert_jobs(jobs: &[&Job], lease: Option<(&str, i64)>) -> Vec<Sql> {
    insert_jobs_then(jobs, lease, "on conflict (dedupe_key) do nothing")
}

/// Activates the next steps' jobs: a job still `pending` under the same dedupe key takes the activated
/// state (status, when it runs, its digest, payload); one already settled (canceled, or activated by a
/// completion of the same step that lost its lease) is left alone; a missing one (a notification
/// triggered before the jobs of all steps were created at trigger time) is inserted. The stored step,
/// id and creation time stay those of the trigger. Returns the ids of the jobs activated.
pub(super) fn activate_jobs(jobs: &[&Job]) -> Vec<Sql> {
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

pub(super) fn insert_details(details: &[&ExecutionDetail]) -> Vec<Sql> {
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

pub(super) fn insert_messages(messages: &[&Message]) -> Vec<Sql> {
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

pub(super) fn insert_notifications(notifications: &[&Notification]) -> Vec<Sql> {
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
            .bind(sqlx::types::Json(&$event))
            .bind($now)
            .bind($job_id)
            .execute(&mut *$tx)
            .await?;
    }};
}
pub(super) use append_digest_event;
