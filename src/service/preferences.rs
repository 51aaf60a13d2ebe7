//! Subscriber preferences (see `domain::preference`): read with the workflows' defaults merged in, changed
//! at one level, changed for several workflows at once.

use std::sync::Arc;

use serde_json::Value;

use crate::domain::preference::{
    ChannelChoices, Effective, SubscriberPreference, WorkflowDefaults,
};
use crate::domain::subscriber::Subscriber;
use crate::domain::webhook::preference_data;
use crate::domain::workflow::Workflow;
use crate::domain::{Channel, Tenant, Timestamp};
use crate::error::{Error, Result, Validation};
use crate::store::outbox::Event;
use crate::store::workflows::{WorkflowListQuery, WorkflowOrder};
use crate::store::Store;

/// The most workflows a subscriber's preferences list (the environment's oldest first).
pub const WORKFLOWS_SHOWN: i64 = 1000;
/// The most workflows one bulk change names (Novu's cap).
pub const BULK_ITEMS: usize = 100;

/// Which workflows a listing shows (`criticality`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Criticality {
    #[default]
    NonCritical,
    Critical,
    All,
}

impl Criticality {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "nonCritical" => Some(Self::NonCritical),
            "critical" => Some(Self::Critical),
            "all" => Some(Self::All),
            _ => None,
        }
    }

    fn shows(self, w: &Workflow) -> bool {
        match self {
            Self::NonCritical => !w.critical,
            Self::Critical => w.critical,
            Self::All => true,
        }
    }
}

/// The subscriber's global preference as shown: every channel, on unless turned off.
#[derive(Debug, Clone)]
pub struct GlobalPreference {
    pub enabled: bool,
    /// In [`Channel::ALL`] order.
    pub channels: [bool; 5],
    pub updated_at: Option<Timestamp>,
}

/// One workflow as a subscriber's preferences show it.
#[derive(Debug, Clone)]
pub struct WorkflowPreference {
    pub workflow: Arc<Workflow>,
    pub effective: Effective,
    /// The channels of its steps (the ones a preference changes), in [`Channel::ALL`] order.
    pub channels: Vec<Channel>,
    /// When the subscriber last changed it; `None` when never.
    pub updated_at: Option<Timestamp>,
}

impl WorkflowPreference {
    fn new(workflow: Arc<Workflow>, levels: &[SubscriberPreference]) -> Self {
        let global = levels.iter().find(|p| p.workflow_ref.is_none());
        let own = levels
            .iter()
            .find(|p| p.workflow_ref.as_ref() == Some(&workflow.id));
        let effective = Effective::of(
            workflow.critical,
            WorkflowDefaults::of(workflow.preferences.as_ref()),
            global,
            own,
        );
        let channels = Channel::ALL
            .into_iter()
            .filter(|c| {
                workflow
                    .steps
                    .iter()
                    .any(|s| s.step_type.channel() == Some(*c))
            })
            .collect();
        Self {
            effective,
            channels,
            updated_at: own.map(|p| p.updated_at),
            workflow,
        }
    }
}

/// Everything a subscriber's preferences show.
#[derive(Debug, Clone)]
pub struct Preferences {
    pub subscriber: Subscriber,
    pub global: GlobalPreference,
    pub workflows: Vec<WorkflowPreference>,
}

/// A change at one level: each `Some` replaces the stored choice, the rest is kept.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Change {
    pub enabled: Option<bool>,
    pub channels: ChannelChoices,
}

/// Reads a partial channel map (`{email: false, …}`) into `v`: an object whose keys are among the five
/// channels, each a boolean (`null`: unchanged).
pub fn parse_channels(v: &mut Validation, field: &str, raw: &Value) -> ChannelChoices {
    let mut out = ChannelChoices::default();
    let Some(map) = raw.as_object() else {
        if !raw.is_null() {
            v.add(
                field,
                "channels must be an object such as {\"email\": false}",
                raw.clone(),
            );
        }
        return out;
    };
    for (key, value) in map {
        let at = format!("{field}.{key}");
        let Some(channel) = Channel::parse(key) else {
            v.add(&at, Channel::EXPECTED, value.clone());
            continue;
        };
        match value {
            Value::Bool(on) => out.set(channel, Some(*on)),
            Value::Null => {}
            other => v.add(&at, "must be a boolean", other.clone()),
        }
    }
    out
}

async fn subscriber(store: &Store, tenant: &Tenant, subscriber_id: &str) -> Result<Subscriber> {
    store
        .get_subscriber(&tenant.environment_id, subscriber_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("Subscriber with id: {subscriber_id} not found")))
}

/// A workflow by `_id` or identifier (its slug is its identifier).
pub async fn workflow(store: &Store, tenant: &Tenant, id: &str) -> Result<Arc<Workflow>> {
    store
        .get_workflow(&tenant.environment_id, id)
        .await?
        .map(Arc::new)
        .ok_or_else(|| Error::NotFound(format!("Workflow with id: {id} not found")))
}

/// The subscriber's preferences: the global one, and each workflow `criticality` shows that has a channel
/// step, oldest first.
pub async fn get(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    criticality: Criticality,
) -> Result<Preferences> {
    let subscriber = subscriber(store, tenant, subscriber_id).await?;
    let levels = store
        .preferences_of(&tenant.environment_id, &subscriber.id)
        .await?;
    let query = WorkflowListQuery {
        limit: WORKFLOWS_SHOWN,
        offset: 0,
        order_by: WorkflowOrder::CreatedAt,
        descending: false,
        query: None,
        tags: Vec::new(),
        statuses: Vec::new(),
    };
    let (listed, _) = store.list_workflows(&tenant.environment_id, &query).await?;
    let workflows = listed
        .into_iter()
        .filter(|w| criticality.shows(w))
        .map(|w| WorkflowPreference::new(Arc::new(w), &levels))
        .filter(|p| !p.channels.is_empty())
        .collect();
    Ok(Preferences {
        global: global_of(&levels),
        workflows,
        subscriber,
    })
}

/// The subscriber's global preference alone.
pub async fn global(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
) -> Result<GlobalPreference> {
    let subscriber = subscriber(store, tenant, subscriber_id).await?;
    let levels = store
        .preferences_of(&tenant.environment_id, &subscriber.id)
        .await?;
    Ok(global_of(&levels))
}

fn global_of(levels: &[SubscriberPreference]) -> GlobalPreference {
    let global = levels.iter().find(|p| p.workflow_ref.is_none());
    GlobalPreference {
        enabled: global.and_then(|g| g.enabled).unwrap_or(true),
        channels: Channel::ALL.map(|c| global.and_then(|g| g.channels.get(c)).unwrap_or(true)),
        updated_at: global.map(|g| g.updated_at),
    }
}

/// What a change at one level leaves: the global preference, or the workflow's.
pub enum Changed {
    Global(GlobalPreference),
    Workflow(WorkflowPreference),
}

/// Applies `change` to the subscriber's global preference (`workflow` `None`) or to its preference for one
/// workflow (by `_id` or identifier). A critical workflow, or one whose defaults are read-only, refuses a
/// change (400): the subscriber's choice would never apply.
pub async fn change(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    workflow_id: Option<&str>,
    change: Change,
) -> Result<Changed> {
    let subscriber = subscriber(store, tenant, subscriber_id).await?;
    let workflow = match workflow_id {
        Some(id) => Some(changeable(self::workflow(store, tenant, id).await?)?),
        None => None,
    };
    let now = Timestamp::now();
    let row = SubscriberPreference {
        environment_id: tenant.environment_id.clone(),
        subscriber_ref: subscriber.id.clone(),
        workflow_ref: workflow.as_ref().map(|w| w.id.clone()),
        enabled: change.enabled,
        channels: change.channels,
        created_at: now,
        updated_at: now,
    };
    let event = |p: &SubscriberPreference| updated(tenant, p, workflow.as_deref(), &subscriber);
    store
        .save_preferences(std::slice::from_ref(&row), &event)
        .await?;
    let levels = store
        .preferences_of(&tenant.environment_id, &subscriber.id)
        .await?;
    Ok(match workflow {
        None => Changed::Global(global_of(&levels)),
        Some(w) => Changed::Workflow(WorkflowPreference::new(w, &levels)),
    })
}

/// The `preference.updated` webhook event of a level as saved.
fn updated(
    tenant: &Tenant,
    p: &SubscriberPreference,
    workflow: Option<&Workflow>,
    subscriber: &Subscriber,
) -> Event {
    Event {
        environment_id: tenant.environment_id.clone(),
        organization_id: tenant.organization_id.clone(),
        kind: "preference.updated",
        data: preference_data(p, workflow, &subscriber.subscriber_id),
    }
}

pub(crate) fn changeable(w: Arc<Workflow>) -> Result<Arc<Workflow>> {
    if w.critical {
        return Err(Error::bad_request(format!(
            "Workflow {} is critical: it always delivers, and its preferences cannot be changed",
            w.workflow_id
        )));
    }
    if WorkflowDefaults::of(w.preferences.as_ref()).read_only {
        return Err(Error::bad_request(format!(
            "Workflow {} has read-only preferences: subscribers cannot change them",
            w.workflow_id
        )));
    }
    Ok(w)
}

/// Applies several workflows' channel changes in one transaction (all or nothing: an unknown workflow is a
/// 404 and nothing changes); answers each workflow's preference, in the order given.
pub async fn change_many(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    items: Vec<(String, ChannelChoices)>,
) -> Result<Vec<WorkflowPreference>> {
    let subscriber = subscriber(store, tenant, subscriber_id).await?;
    let now = Timestamp::now();
    let mut workflows = Vec::with_capacity(items.len());
    let mut rows: Vec<SubscriberPreference> = Vec::with_capacity(items.len());
    for (id, channels) in items {
        let w = changeable(workflow(store, tenant, &id).await?)?;
        rows.push(SubscriberPreference {
            environment_id: tenant.environment_id.clone(),
            subscriber_ref: subscriber.id.clone(),
            workflow_ref: Some(w.id.clone()),
            enabled: None,
            channels,
            created_at: now,
            updated_at: now,
        });
        workflows.push(w);
    }
    let event = |p: &SubscriberPreference| {
        let w = workflows
            .iter()
            .find(|w| Some(&w.id) == p.workflow_ref.as_ref());
        updated(tenant, p, w.map(|w| &**w), &subscriber)
    };
    store.save_preferences(&rows, &event).await?;
    let levels = store
        .preferences_of(&tenant.environment_id, &subscriber.id)
        .await?;
    Ok(workflows
        .into_iter()
        .map(|w| WorkflowPreference::new(w, &levels))
        .collect())
}
