//! Notifications and the activity feed's views of them, their jobs and execution details.

use serde_json::value::RawValue;
use serde_json::Value;
use sqlx::types::Json;

use super::row::{sql_row, table, Table};
use super::sql::Sql;
use super::sqlite::rows::Columns;
use super::{Cost, Store, ViewRow};
use crate::domain::context::context_set;
use crate::domain::job::{
    DetailView, ExecutionDetail, JobSummary, JobView, Notification, NotificationView,
};
use crate::domain::{EnvironmentId, NotificationId, SubscriberRef, Timestamp, WorkflowRef};
use crate::error::Result;

/// Filters of `GET /v1/notifications`, combined with AND.
#[derive(Debug, Clone, Default)]
pub struct NotificationFilter {
    pub channels: Vec<String>,
    pub workflow_refs: Vec<WorkflowRef>,
    pub subscriber_ids: Option<Vec<String>>,
    /// And of these subscriber records (`_id`): `subscriber_ids` picks the index, this the records.
    pub subscriber_refs: Vec<SubscriberRef>,
    pub severity: Vec<String>,
    pub transaction_id: Option<String>,
    /// Notifications reached through this topic (`topicKey`).
    pub topic_key: Option<String>,
    /// Notifications reached through the subscription of this identifier (`subscriptionId`).
    pub subscription_identifier: Option<String>,
    pub context_set: Option<String>,
    pub after: Option<i64>,
    pub before: Option<i64>,
}

table! {
    Notification => "notifications" {
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
        to as to_value: Option<Json<Value>>,
        actor: Option<Json<Value>>,
        tags: Json<Vec<String>>,
        severity: String,
        critical: bool,
        context_keys: Json<Vec<String>>,
        digested_notification_id: Option<String>,
        topic_id: Option<String>,
        topic_key: Option<String>,
        subscription_identifier: Option<String>,
        created_at: i64,
        updated_at: i64,
    }
    written {
        // `,email,in_app,`: the channel filter matches `,<channel>,` in it.
        channel_set: String = |n: &Notification| format!(",{},", n.channels.join(",")),
        context_set: String = |n: &Notification| context_set(&n.context_keys),
    }
}

table! {
    ExecutionDetail => "execution_details" {
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
}

/// The columns the activity feed shows of a notification (see [`NotificationView`]).
const NOTIFICATION_VIEW_COLUMNS: &str = "id, subscriber_ref, subscriber_id, \
    workflow_ref, workflow_identifier, transaction_id, channels, payload, to_value, tags, severity, critical, \
    context_keys, digested_notification_id, topic_id, topic_key, created_at, updated_at";

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
        topic_id: Option<String>,
        topic_key: Option<String>,
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
            topic_id: self.topic_id.as_deref(),
            topic_key: self.topic_key.as_deref(),
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
            topic_id: c.opt_str("topic_id")?,
            topic_key: c.opt_str("topic_key")?,
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

impl Store {
    /// The notifications of a batch of claimed jobs, in one query.
    pub async fn get_notifications(
        &self,
        keys: &[(EnvironmentId, NotificationId)],
    ) -> Result<Vec<Notification>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        // By primary key, with each row's environment checked against its job's: a tenant condition in
        // the SQL (`environment_id in (…)`) lets SQLite pick a tenant index and scan the environment.
        let ids: Vec<&NotificationId> = keys.iter().map(|(_, id)| id).collect();
        let mut q = Sql::new("select ");
        q.push(Notification::COLUMNS)
            .push(" from notifications where true");
        q.push_in("id", &ids);
        let rows = self.rows::<Notification>(Cost::Point, q).await?;
        Ok(rows
            .into_iter()
            .filter(|n| {
                keys.iter()
                    .any(|(e, id)| *e == n.environment_id && *id == n.id)
            })
            .collect())
    }

    pub async fn get_notification(
        &self,
        env: &EnvironmentId,
        id: &NotificationId,
    ) -> Result<Option<Notification>> {
        let mut q = Sql::new("select ");
        q.push(Notification::COLUMNS)
            .push(" from notifications where environment_id = ")
            .bind(env.as_str());
        q.push(" and id = ").bind(id);
        self.row(Cost::Point, q).await
    }

    /// One notification as the activity feed shows it, handed to `visit` (not called when there is none).
    pub async fn visit_notification(
        &self,
        env: &EnvironmentId,
        id: &NotificationId,
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
        if !f.subscriber_refs.is_empty() {
            q.push_in("subscriber_ref", &f.subscriber_refs);
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
        // Each served by its partial index (`notifications_topic`, `notifications_subscription`).
        if let Some(k) = &f.topic_key {
            q.push(" and topic_key is not null and topic_key = ")
                .bind(k);
        }
        if let Some(i) = &f.subscription_identifier {
            q.push(" and subscription_identifier is not null and subscription_identifier = ")
                .bind(i);
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
        // A scan: it returns rows (see `Store::visit_rows`); the one past the page tells that more follow.
        let rows: Vec<NotificationViewRow> = self.rows(Cost::Scan, q).await?;
        for r in rows.iter().take(limit as usize) {
            visit(r.view());
        }
        Ok(rows.len() as i64 > limit)
    }

    /// The jobs of several notifications (one query for a whole page), each handed to `visit`, in no
    /// particular order: an `order by` over the page's rows makes the database copy every row, JSON columns
    /// and all, through a sorter, so the caller orders what it keeps.
    pub async fn visit_jobs_of(
        &self,
        notification_ids: &[NotificationId],
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
    pub async fn jobs_of(&self, notification_ids: &[NotificationId]) -> Result<Vec<JobSummary>> {
        let mut read: Vec<std::result::Result<JobSummary, String>> = Vec::new();
        self.visit_jobs_of(notification_ids, |j| read.push(j.try_into()))
            .await?;
        let mut jobs: Vec<JobSummary> = read
            .into_iter()
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| anyhow::anyhow!(e))?;
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
        notification_ids: &[NotificationId],
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
