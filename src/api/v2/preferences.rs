//! `/v2/subscribers/{subscriberId}/preferences`: a subscriber's preferences, read and changed with an API key.

use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::wire::{IsoTime, Reply};
use crate::domain::preference::ChannelChoices;
use crate::domain::workflow::{Severity, Workflow};
use crate::domain::{Channel, Tenant};
use crate::error::{Error, Validation};
use crate::service::over_cap;
use crate::service::preferences::{
    self as service, Change, Criticality, GlobalPreference, Preferences, WorkflowPreference,
    BULK_ITEMS,
};

/// Channels and whether each is on; a channel absent is not shown (a workflow shows its steps' channels).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct ChannelsOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sms: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_app: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push: Option<bool>,
}

impl ChannelsOut {
    /// The channels `shown`, each with whether it is on.
    pub fn of(shown: impl IntoIterator<Item = (Channel, bool)>) -> Self {
        let mut c = ChannelChoices::default();
        for (channel, on) in shown {
            c.set(channel, Some(on));
        }
        Self {
            email: c.email,
            sms: c.sms,
            in_app: c.in_app,
            chat: c.chat,
            push: c.push,
        }
    }
}

/// The subscriber's global preference.
#[derive(Debug, Serialize, ToSchema)]
pub struct GlobalPreferenceOut {
    pub enabled: bool,
    pub channels: ChannelsOut,
}

impl From<&GlobalPreference> for GlobalPreferenceOut {
    fn from(g: &GlobalPreference) -> Self {
        Self {
            enabled: g.enabled,
            channels: ChannelsOut::of(Channel::ALL.into_iter().zip(g.channels)),
        }
    }
}

/// Which level a channel's value comes from: `subscriber` or `template` (the workflow's defaults).
#[derive(Debug, Serialize, ToSchema)]
pub struct OverrideOut {
    pub channel: Channel,
    pub source: &'static str,
}

/// The workflow a preference belongs to.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreferenceWorkflowOut {
    pub slug: String,
    pub identifier: String,
    pub name: String,
    pub updated_at: IsoTime,
}

/// A subscriber's preference for one workflow, merged with the workflow's defaults.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowPreferenceOut {
    pub enabled: bool,
    pub channels: ChannelsOut,
    pub overrides: Vec<OverrideOut>,
    pub workflow: PreferenceWorkflowOut,
    /// When the subscriber last changed it; omitted when never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<IsoTime>,
}

fn shown(p: &WorkflowPreference) -> impl Iterator<Item = (Channel, bool)> + '_ {
    p.channels.iter().map(|c| (*c, p.effective.channel(*c).0))
}

impl From<&WorkflowPreference> for WorkflowPreferenceOut {
    fn from(p: &WorkflowPreference) -> Self {
        let w = &p.workflow;
        Self {
            enabled: p.effective.enabled.0,
            channels: ChannelsOut::of(shown(p)),
            overrides: p
                .channels
                .iter()
                .map(|c| OverrideOut {
                    channel: *c,
                    source: p.effective.channel(*c).1.wire(),
                })
                .collect(),
            workflow: PreferenceWorkflowOut {
                slug: w.workflow_id.clone(),
                identifier: w.workflow_id.clone(),
                name: w.name.clone(),
                updated_at: w.updated_at.into(),
            },
            updated_at: p.updated_at.map(IsoTime),
        }
    }
}

/// A subscriber's preferences: the global one and one per workflow with a channel step.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreferencesOut {
    pub global: GlobalPreferenceOut,
    pub workflows: Vec<WorkflowPreferenceOut>,
}

impl From<&Preferences> for PreferencesOut {
    fn from(p: &Preferences) -> Self {
        Self {
            global: (&p.global).into(),
            workflows: p.workflows.iter().map(Into::into).collect(),
        }
    }
}

/// The workflow of an Inbox-shaped preference.
#[derive(Debug, Serialize, ToSchema)]
pub struct InboxWorkflowOut {
    pub id: String,
    pub identifier: String,
    pub name: String,
    pub critical: bool,
    pub tags: Vec<String>,
    pub severity: Severity,
}

impl From<&Workflow> for InboxWorkflowOut {
    fn from(w: &Workflow) -> Self {
        Self {
            id: w.id.as_str().to_owned(),
            identifier: w.workflow_id.clone(),
            name: w.name.clone(),
            critical: w.critical,
            tags: w.tags.clone(),
            severity: w.severity,
        }
    }
}

/// A preference as the Inbox API shapes it (`level` `global` or `template`).
#[derive(Debug, Serialize, ToSchema)]
pub struct InboxPreferenceOut {
    pub level: &'static str,
    pub enabled: bool,
    pub channels: ChannelsOut,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<InboxWorkflowOut>,
    pub overrides: Vec<OverrideOut>,
}

impl From<&WorkflowPreference> for InboxPreferenceOut {
    fn from(p: &WorkflowPreference) -> Self {
        let out = WorkflowPreferenceOut::from(p);
        Self {
            level: "template",
            enabled: out.enabled,
            channels: out.channels,
            workflow: Some(InboxWorkflowOut::from(&*p.workflow)),
            overrides: out.overrides,
        }
    }
}

/// Body of `PATCH /v2/subscribers/{subscriberId}/preferences`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchPreferencesIn {
    /// `{email?, sms?, in_app?, chat?, push?}`: the channels to turn on (`true`) or off (`false`).
    #[schema(value_type = Option<Object>)]
    pub channels: Option<Value>,
    /// The workflow (`_id` or identifier) whose preference changes; without it, the global preference.
    pub workflow_id: Option<String>,
    /// Delivery schedules are not supported: a schedule is refused.
    #[schema(value_type = Option<Object>)]
    pub schedule: Option<Value>,
    /// Context-scoped preferences are not supported: a context is refused.
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
}

/// One item of a bulk change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkPreferenceIn {
    pub workflow_id: Option<String>,
    #[schema(value_type = Object)]
    pub channels: Option<Value>,
}

/// Body of `PATCH /v2/subscribers/{subscriberId}/preferences/bulk`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct BulkPreferencesIn {
    pub preferences: Option<Vec<BulkPreferenceIn>>,
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
}

/// Refuses what Tidings does not store (`schedule`, `context`, `contextKeys`): ignoring it would lose it.
fn unsupported(v: &mut Validation, field: &str, value: Option<&Value>) {
    let set = match value {
        None | Some(Value::Null) => false,
        Some(Value::Object(m)) => !m.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(_) => true,
    };
    if set {
        v.add(
            field,
            format!(
                "{field} is not supported by Tidings: preferences are per subscriber and workflow"
            ),
            value.cloned().unwrap_or(Value::Null),
        );
    }
}

/// The `criticality` query parameter of a preference list (`nonCritical` when absent); a bad value is added
/// to `v`.
pub(crate) fn criticality_of(q: &QueryMap, v: &mut Validation) -> Criticality {
    q.one_of(v, "criticality", &["nonCritical", "critical", "all"])
        .and_then(|c| Criticality::parse(&c))
        .unwrap_or_default()
}

/// A subscriber's preferences: the global one, and one per workflow (with a channel step) that
/// `criticality` shows, each channel naming the level its value comes from.
#[utoipa::path(get, path = "/v2/subscribers/{subscriberId}/preferences", tag = "Subscribers",
    params(("subscriberId" = String, Path),
        ("criticality" = Option<String>, Query, description = "nonCritical (default), critical or all"),
        ("contextKeys" = Option<Vec<String>>, Query, description = "Not supported: must be absent or empty")),
    responses((status = 200, body = PreferencesOut), (status = 404, description = "Unknown subscriber")))]
pub async fn get_preferences(
    axum::extract::State(state): axum::extract::State<crate::api::AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let criticality = criticality_of(&q, &mut v);
    let keys = q.list(&mut v, "contextKeys");
    unsupported(&mut v, "contextKeys", Some(&Value::from(keys)));
    v.finish()?;
    let found = service::get(&state.store, &tenant, &subscriber_id, criticality).await?;
    Ok(Reply::ok(PreferencesOut::from(&found)).into_response())
}

/// Change the subscriber's global preference (no `workflowId`) or its preference for one workflow; answers
/// the subscriber's preferences (non-critical workflows).
#[utoipa::path(patch, path = "/v2/subscribers/{subscriberId}/preferences", tag = "Subscribers",
    request_body = PatchPreferencesIn, params(("subscriberId" = String, Path)),
    responses((status = 200, body = PreferencesOut), (status = 400, description = "A critical or read-only workflow"),
        (status = 404, description = "Unknown subscriber or workflow"), (status = 422, description = "Invalid body")))]
pub async fn patch_preferences(
    axum::extract::State(state): axum::extract::State<crate::api::AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    AppJson(body): AppJson<PatchPreferencesIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let channels = service::parse_channels(
        &mut v,
        "channels",
        body.channels.as_ref().unwrap_or(&Value::Null),
    );
    unsupported(&mut v, "schedule", body.schedule.as_ref());
    unsupported(&mut v, "context", body.context.as_ref());
    v.finish()?;
    let change = Change {
        enabled: None,
        channels,
    };
    service::change(
        &state.store,
        &tenant,
        &subscriber_id,
        body.workflow_id.as_deref(),
        change,
    )
    .await?;
    let found = service::get(
        &state.store,
        &tenant,
        &subscriber_id,
        Criticality::NonCritical,
    )
    .await?;
    Ok(Reply::ok(PreferencesOut::from(&found)).into_response())
}

/// Change the subscriber's preferences for several workflows at once (all or nothing); answers each
/// workflow's preference in the order given.
#[utoipa::path(patch, path = "/v2/subscribers/{subscriberId}/preferences/bulk", tag = "Subscribers",
    request_body = BulkPreferencesIn, params(("subscriberId" = String, Path)),
    responses((status = 200, body = Vec<InboxPreferenceOut>), (status = 400, description = "A critical or read-only workflow"),
        (status = 404, description = "Unknown subscriber or workflow"), (status = 422, description = "Invalid body")))]
pub async fn bulk_preferences(
    axum::extract::State(state): axum::extract::State<crate::api::AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    AppJson(body): AppJson<BulkPreferencesIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    unsupported(&mut v, "context", body.context.as_ref());
    let Some(items) = body.preferences else {
        return Err(Error::invalid("preferences", "preferences is required", Value::Null).into());
    };
    if items.is_empty() {
        v.add(
            "preferences",
            "preferences must hold at least one item",
            Value::Array(vec![]),
        );
    }
    over_cap(&mut v, "preferences", items.len(), BULK_ITEMS);
    let mut changes = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let at = format!("preferences.{i}");
        let channels = match &item.channels {
            Some(c @ Value::Object(_)) => {
                service::parse_channels(&mut v, &format!("{at}.channels"), c)
            }
            other => {
                v.add(
                    &format!("{at}.channels"),
                    "channels is required: an object such as {\"email\": false}",
                    other.clone().unwrap_or(Value::Null),
                );
                ChannelChoices::default()
            }
        };
        match item.workflow_id.filter(|w| !w.trim().is_empty()) {
            Some(w) => changes.push((w, channels)),
            None => v.add(
                &format!("{at}.workflowId"),
                "workflowId is required",
                Value::Null,
            ),
        }
    }
    v.finish()?;
    let changed = service::change_many(&state.store, &tenant, &subscriber_id, changes).await?;
    let out: Vec<InboxPreferenceOut> = changed.iter().map(Into::into).collect();
    Ok(Reply::ok(out).into_response())
}
