//! Notifications and the activity feed's views of them, their jobs and execution details.

use serde_json::Value;
use sqlx::types::Json;

use super::row::{table, view, Table};
use super::sql::Sql;
use super::{Cost, Store, ViewRow};
use crate::domain::context::context_set;
use crate::domain::job::{
    DetailView, ExecutionDetail, JobSummary, JobView, Notification, NotificationView,
};
use crate::domain::{EnvironmentId, NotificationId, SubscriberRef, WorkflowRef};
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

view! {
    /// What the activity feed shows of a notification (see [`NotificationView`]).
    struct NotificationViewRow => NotificationView {
        id: Text,
        subscriber_ref: Text,
        subscriber_id: Text,
        workflow_ref: Text,
        workflow_identifier: Text,
        transaction_id: Text,
        channels: JsonText,
        payload: JsonText,
        to as to_value: OptJsonText,
        tags: JsonText,
        severity: Text,
        critical: Bool,
        context_keys: JsonText,
        digested_notification_id: OptText,
        topic_id: OptText,
        topic_key: OptText,
        created_at: Time,
        updated_at: Time,
    }
}

view! {
    /// What the activity feed shows of an execution detail (see [`DetailView`]).
    struct DetailViewRow => DetailView {
        id: Text,
        job_id: Text,
        status: Text,
        detail: Text,
        source: Text,
        is_retry: Bool,
        is_test: Bool,
        provider_id: OptText,
        raw: OptText,
        created_at: Time,
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
        q.push(NotificationViewRow::COLUMNS)
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
        q.push(NotificationViewRow::COLUMNS)
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
        q.push(JobViewRow::COLUMNS).push(" from jobs where 1 = 1");
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
        q.push(DetailViewRow::COLUMNS)
            .push(" from execution_details where 1 = 1");
        q.push_in("notification_id", notification_ids);
        self.visit_rows::<DetailViewRow>(q, visit).await
    }
}

view! {
    /// What the activity feed shows of a job (see [`JobView`]).
    struct JobViewRow => JobView {
        id: Text,
        notification_id: Text,
        step_index: Int,
        step: JsonText,
        status: Text,
        provider_id: Text,
        payload: JsonText,
        overrides: OptJsonText,
        digest: OptJsonText,
        run_at: Time,
        schedule_extensions_count: Int,
        created_at: Time,
        updated_at: Time,
    }
}
