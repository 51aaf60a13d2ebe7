//! The activity feed: notifications with their subscriber, workflow, jobs and execution details. A page
//! is read in a fixed number of queries (notifications, subscribers, workflows, jobs, details), each row
//! handed to an [`ActivitySink`] as a borrowed view while it is current: the API layer writes the response
//! from the views without an owned copy of every row.

use crate::domain::id::is_object_id;
use crate::domain::job::{DetailView, JobView, NotificationView};
use crate::domain::subscriber::SubscriberContact;
use crate::domain::{EnvironmentId, NotificationId, SubscriberRef, Tenant, WorkflowRef};
use crate::error::{Error, Result};
use crate::store::notifications::NotificationFilter;
use crate::store::page::{Cursor, PageRequest};
use crate::store::subscriber_search::{SubscriberOrder, SubscriberSearch};
use crate::store::Store;

/// Receives the rows of an activity page in this order: the notifications (page order), then the known
/// subscribers and the workflows among them, then their jobs, then the jobs' execution details (jobs and
/// details in no particular order).
pub trait ActivitySink: Send {
    fn notification(&mut self, n: NotificationView<'_>);
    fn subscriber(&mut self, s: SubscriberContact<'_>);
    /// A workflow's `_id` and name.
    fn workflow(&mut self, id: &str, name: &str);
    fn job(&mut self, j: JobView<'_>);
    fn detail(&mut self, d: DetailView<'_>);
}

/// What the queries after the notifications need to know of them.
#[derive(Default)]
struct Refs {
    ids: Vec<NotificationId>,
    subscribers: Vec<SubscriberRef>,
    workflows: Vec<WorkflowRef>,
}

impl Refs {
    fn add(&mut self, n: &NotificationView<'_>) {
        self.ids.push(n.id.into());
        self.subscribers.push(n.subscriber_ref.into());
        self.workflows.push(n.workflow_ref.into());
    }
}

/// Reads the subscribers, workflows, jobs and details of the notifications in `refs` into `sink`.
async fn assemble(
    store: &Store,
    env: &EnvironmentId,
    mut refs: Refs,
    sink: &mut impl ActivitySink,
) -> Result<()> {
    refs.subscribers.sort();
    refs.subscribers.dedup();
    refs.workflows.sort();
    refs.workflows.dedup();
    store
        .visit_contacts_by_refs(env, &refs.subscribers, |s| sink.subscriber(s))
        .await?;
    for (id, name) in store.workflow_names(env, &refs.workflows).await? {
        sink.workflow(id.as_str(), &name);
    }
    store.visit_jobs_of(&refs.ids, |j| sink.job(j)).await?;
    store
        .visit_details_of(&refs.ids, |d| sink.detail(d))
        .await?;
    Ok(())
}

/// `GET /v1/notifications` after query parsing.
#[derive(Debug, Clone, Default)]
pub struct ActivityQuery {
    pub filter: NotificationFilter,
    /// Subscribers named by `emails`, `subscriberIds` and `search`; `None` when none of them was given.
    pub emails: Vec<String>,
    pub subscriber_ids: Vec<String>,
    pub search: Option<String>,
    pub page: i64,
    pub limit: i64,
}

/// One activity record into `sink`; `NotFound` when the environment has no such notification.
pub async fn get(
    store: &Store,
    tenant: &Tenant,
    id: &NotificationId,
    sink: &mut impl ActivitySink,
) -> Result<()> {
    if !is_object_id(id.as_str()) {
        return Err(Error::invalid(
            "notificationId",
            "notificationId must be a database id (24 hex characters)",
            id.as_str(),
        ));
    }
    let mut refs = Refs::default();
    store
        .visit_notification(&tenant.environment_id, id, |n| {
            refs.add(&n);
            sink.notification(n);
        })
        .await?;
    if refs.ids.is_empty() {
        return Err(Error::NotFound(format!(
            "Notification with id {id} not found"
        )));
    }
    assemble(store, &tenant.environment_id, refs, sink).await
}

/// A page of activity, newest first, into `sink`; returns whether more follow and the page number.
pub async fn list(
    store: &Store,
    tenant: &Tenant,
    q: ActivityQuery,
    sink: &mut impl ActivitySink,
) -> Result<(bool, i64)> {
    let env = &tenant.environment_id;
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
                sort: SubscriberOrder::Id,
                descending: true,
            };
            let search = SubscriberSearch {
                email: Some(term.clone()),
                ..Default::default()
            };
            crate::background::refresh_search_stats(store, &search);
            let found = store.search_subscribers(env, &search, &page).await?;
            ids.extend(found.data.into_iter().map(|s| s.subscriber_id));
        }
        ids.sort();
        ids.dedup();
        // The current subscribers of those subscriberIds, by record: a deleted subscriber's notifications
        // are not listed under a later subscriber of the same subscriberId.
        let current = store.subscribers_by_ids(env, &ids).await?;
        if current.is_empty() {
            return Ok((false, 0));
        }
        filter.subscriber_refs = current.iter().map(|s| s.id.clone()).collect();
        filter.subscriber_ids = Some(current.into_iter().map(|s| s.subscriber_id).collect());
    }
    let mut refs = Refs::default();
    let has_more = store
        .visit_notifications(env, &filter, q.page, q.limit, |n| {
            refs.add(&n);
            sink.notification(n);
        })
        .await?;
    assemble(store, env, refs, sink).await?;
    Ok((has_more, q.page))
}
