//! The activity feed: notifications with their subscriber, workflow, jobs and execution details. A page
//! is assembled in a fixed number of queries (notifications, jobs, details, subscribers, workflows).

use std::collections::HashMap;
use std::sync::Arc;

use crate::domain::id::is_object_id;
use crate::domain::job::{ExecutionDetail, JobSummary, NotificationSummary};
use crate::domain::subscriber::Subscriber;
use crate::domain::workflow::Workflow;
use crate::domain::{EnvironmentId, Tenant};
use crate::error::{Error, Result};
use crate::store::engine::NotificationFilter;
use crate::store::page::{Cursor, PageRequest, SortColumn};
use crate::store::subscribers::SubscriberSearch;
use crate::store::Store;

/// One activity record, ready to render.
#[derive(Debug, Clone)]
pub struct ActivityItem {
    pub notification: NotificationSummary,
    /// Shared by the items of a page that have the same subscriber or workflow.
    pub subscriber: Option<Arc<Subscriber>>,
    pub workflow: Option<Arc<Workflow>>,
    pub jobs: Vec<(JobSummary, Vec<ExecutionDetail>)>,
}

/// `GET /v1/notifications` after query parsing.
#[derive(Debug, Clone, Default)]
pub struct ActivityQuery {
    pub filter: NotificationFilter,
    /// Subscribers named by `emails`, `subscriberIds` and `search`; `None` when none of them was given.
    pub emails: Vec<String>,
    pub subscriber_ids: Vec<String>,
    pub search: Option<String>,
    /// Topics are not supported: a query on them matches nothing.
    pub topic_filter: bool,
    pub page: i64,
    pub limit: i64,
}

async fn assemble(
    store: &Store,
    env: &EnvironmentId,
    notifications: Vec<NotificationSummary>,
) -> Result<Vec<ActivityItem>> {
    let ids: Vec<String> = notifications.iter().map(|n| n.id.clone()).collect();
    let mut subscriber_refs: Vec<String> = notifications
        .iter()
        .map(|n| n.subscriber_ref.clone())
        .collect();
    subscriber_refs.sort();
    subscriber_refs.dedup();
    let mut workflow_refs: Vec<String> = notifications
        .iter()
        .map(|n| n.workflow_ref.clone())
        .collect();
    workflow_refs.sort();
    workflow_refs.dedup();

    let jobs = store.jobs_of(&ids).await?;
    let mut details: HashMap<String, Vec<ExecutionDetail>> = HashMap::new();
    for d in store.details_of(&ids).await? {
        details.entry(d.job_id.clone()).or_default().push(d);
    }
    let subscribers: HashMap<String, Arc<Subscriber>> = store
        .subscribers_by_refs(env, &subscriber_refs)
        .await?
        .into_iter()
        .map(|s| (s.id.clone(), Arc::new(s)))
        .collect();
    let workflows: HashMap<String, Arc<Workflow>> = store
        .workflows_by_ids(env, &workflow_refs)
        .await?
        .into_iter()
        .map(|w| (w.id.clone(), Arc::new(w)))
        .collect();
    let mut jobs_by_notification: HashMap<String, Vec<(JobSummary, Vec<ExecutionDetail>)>> =
        HashMap::new();
    for job in jobs {
        let d = details.remove(&job.id).unwrap_or_default();
        jobs_by_notification
            .entry(job.notification_id.clone())
            .or_default()
            .push((job, d));
    }
    Ok(notifications
        .into_iter()
        .map(|n| ActivityItem {
            subscriber: subscribers.get(&n.subscriber_ref).cloned(),
            workflow: workflows.get(&n.workflow_ref).cloned(),
            jobs: jobs_by_notification.remove(&n.id).unwrap_or_default(),
            notification: n,
        })
        .collect())
}

pub async fn get(store: &Store, tenant: &Tenant, id: &str) -> Result<ActivityItem> {
    if !is_object_id(id) {
        return Err(Error::invalid(
            "notificationId",
            "notificationId must be a database id (24 hex characters)",
            id,
        ));
    }
    let n = store
        .get_notification_summary(&tenant.environment_id, id)
        .await?
        .ok_or_else(|| Error::NotFound("Notification not found".into()))?;
    Ok(assemble(store, &tenant.environment_id, vec![n])
        .await?
        .remove(0))
}

/// A page of activity, newest first, and whether more follow.
pub async fn list(
    store: &Store,
    tenant: &Tenant,
    q: ActivityQuery,
) -> Result<(Vec<ActivityItem>, bool, i64)> {
    let env = &tenant.environment_id;
    if q.topic_filter {
        return Ok((Vec::new(), false, q.page));
    }
    let mut filter = q.filter.clone();
    let names_subscribers =
        !q.emails.is_empty() || !q.subscriber_ids.is_empty() || q.search.is_some();
    if names_subscribers {
        let mut ids = q.subscriber_ids.clone();
        ids.extend(store.subscriber_ids_by_emails(env, &q.emails).await?);
        if let Some(term) = &q.search {
            // The deprecated `search`: an exact subscriberId, or a substring of the email.
            ids.push(term.clone());
            let page = PageRequest {
                cursor: None::<Cursor>,
                include_cursor: false,
                limit: 100,
                sort: SortColumn::Id,
                descending: true,
            };
            let found = store
                .search_subscribers(
                    env,
                    &SubscriberSearch {
                        email: Some(term.clone()),
                        ..Default::default()
                    },
                    &page,
                )
                .await?;
            ids.extend(found.data.into_iter().map(|s| s.subscriber_id));
        }
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            return Ok((Vec::new(), false, 0));
        }
        filter.subscriber_ids = Some(ids);
    }
    let (notifications, has_more) = store
        .list_notifications(env, &filter, q.page, q.limit)
        .await?;
    Ok((assemble(store, env, notifications).await?, has_more, q.page))
}
