//! `/v1/subscribers/{subscriberId}/preferences`: the first version of a subscriber's preferences, read and
//! changed with an API key, in the shapes Novu's v1 SDK models parse (`{template, preference}`). The same
//! levels and rules as the v2 routes (`service::preferences`).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::v1::notifications::ActivityTriggerOut;
use crate::api::v2::preferences::ChannelsOut;
use crate::api::wire::Reply;
use crate::api::AppState;
use crate::domain::preference::ChannelChoices;
use crate::domain::{Channel, Tenant};
use crate::error::Validation;
use crate::service::over_cap;
use crate::service::preferences::{
    self as service, Change, Changed, Criticality, GlobalPreference, WorkflowPreference,
};

/// The workflow a v1 preference belongs to.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreferenceTemplateOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub name: String,
    /// A critical workflow always delivers (its preferences cannot be changed).
    pub critical: bool,
    /// `[{type: "event", identifier, variables: []}]`: the workflow's trigger identifier.
    pub triggers: Vec<ActivityTriggerOut>,
}

/// Whether the workflow (or, globally, everything) is on, and each channel.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreferenceStateOut {
    pub enabled: bool,
    pub channels: ChannelsOut,
}

/// A v1 preference: `template` for a workflow's preference, absent for the global one.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriberPreferenceOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<PreferenceTemplateOut>,
    pub preference: PreferenceStateOut,
}

impl SubscriberPreferenceOut {
    fn global(g: &GlobalPreference) -> Self {
        Self {
            template: None,
            preference: PreferenceStateOut {
                enabled: g.enabled,
                channels: ChannelsOut::of(Channel::ALL.into_iter().zip(g.channels)),
            },
        }
    }

    /// `every_channel`: all five channels, else only those of the workflow's steps.
    fn workflow(p: &WorkflowPreference, every_channel: bool) -> Self {
        let w = &p.workflow;
        let shown: &[Channel] = if every_channel {
            &Channel::ALL
        } else {
            &p.channels
        };
        Self {
            template: Some(PreferenceTemplateOut {
                id: w.id.as_str().to_owned(),
                name: w.name.clone(),
                critical: w.critical,
                triggers: vec![ActivityTriggerOut {
                    trigger_type: "event".to_owned(),
                    identifier: w.workflow_id.clone(),
                    variables: Vec::new(),
                }],
            }),
            preference: PreferenceStateOut {
                enabled: p.effective.enabled.0,
                channels: ChannelsOut::of(shown.iter().map(|c| (*c, p.effective.channel(*c).0))),
            },
        }
    }
}

/// What a change leaves, with every channel.
impl From<&Changed> for SubscriberPreferenceOut {
    fn from(c: &Changed) -> Self {
        match c {
            Changed::Global(g) => Self::global(g),
            Changed::Workflow(p) => Self::workflow(p, true),
        }
    }
}

/// `{type, enabled}`: one channel turned on or off.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChannelPreferenceIn {
    /// One of `in_app`, `email`, `sms`, `chat`, `push`.
    #[serde(rename = "type")]
    pub channel_type: String,
    pub enabled: bool,
}

/// Body of `PATCH /v1/subscribers/{subscriberId}/preferences/{workflowId}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct PatchWorkflowPreferenceIn {
    /// The channel to turn on or off.
    pub channel: Option<ChannelPreferenceIn>,
    /// `false` turns the whole workflow off for the subscriber, `true` on again.
    pub enabled: Option<bool>,
}

/// Body of `PATCH /v1/subscribers/{subscriberId}/preferences`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct PatchGlobalPreferenceIn {
    /// `false` turns every notification off for the subscriber, `true` on again.
    pub enabled: Option<bool>,
    /// The channels to turn on or off (at most one item per channel).
    pub preferences: Option<Vec<ChannelPreferenceIn>>,
}

/// Reads `items` (at `field`, or `field.i` for a list) into a channel map; a channel outside the five is a
/// problem added to `v`. A channel named twice takes its last value.
fn channels_of<'a>(
    v: &mut Validation,
    field: &str,
    items: impl IntoIterator<Item = (String, &'a ChannelPreferenceIn)>,
) -> ChannelChoices {
    let mut out = ChannelChoices::default();
    for (at, item) in items {
        match Channel::parse(&item.channel_type) {
            Some(c) => out.set(c, Some(item.enabled)),
            None => v.add(
                &format!("{field}{at}.type"),
                Channel::EXPECTED,
                item.channel_type.as_str(),
            ),
        }
    }
    out
}

/// `includeInactiveChannels` (default `true`): every channel, or only those of the workflow's steps.
fn every_channel(v: &mut Validation, q: &QueryMap) -> bool {
    q.bool(v, "includeInactiveChannels").unwrap_or(true)
}

/// The template level: the subscriber's preference for each non-critical workflow with a channel step,
/// oldest first.
async fn template_level(
    state: &AppState,
    tenant: &Tenant,
    subscriber_id: &str,
    every_channel: bool,
) -> crate::error::Result<Vec<SubscriberPreferenceOut>> {
    let found = service::get(
        &state.store,
        tenant,
        subscriber_id,
        Criticality::NonCritical,
    )
    .await?;
    Ok(found
        .workflows
        .iter()
        .map(|p| SubscriberPreferenceOut::workflow(p, every_channel))
        .collect())
}

/// The subscriber's preference for each non-critical workflow with a channel step, oldest first.
#[utoipa::path(get, path = "/v1/subscribers/{subscriberId}/preferences", tag = "Subscribers",
    params(("subscriberId" = String, Path),
        ("includeInactiveChannels" = Option<bool>, Query, description = "Every channel (true, the default) or only those of the workflow's steps")),
    responses((status = 200, body = Vec<SubscriberPreferenceOut>), (status = 404, description = "Unknown subscriber"),
        (status = 422, description = "Invalid query")))]
pub async fn list_preferences(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let every = every_channel(&mut v, &q);
    v.finish()?;
    let out = template_level(&state, &tenant, &subscriber_id, every).await?;
    Ok(Reply::ok(out).into_response())
}

/// The subscriber's preferences at one level: `global` (one item, without `template`) or `template` (as
/// `GET …/preferences`).
#[utoipa::path(get, path = "/v1/subscribers/{subscriberId}/preferences/{parameter}", tag = "Subscribers",
    params(("subscriberId" = String, Path), ("parameter" = String, Path, description = "The level: global or template"),
        ("includeInactiveChannels" = Option<bool>, Query, description = "Every channel (true, the default) or only those of the workflow's steps")),
    responses((status = 200, body = Vec<SubscriberPreferenceOut>), (status = 404, description = "Unknown subscriber"),
        (status = 422, description = "An unknown level, or an invalid query")))]
pub async fn preferences_by_level(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((subscriber_id, level)): AppPath<(String, String)>,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let every = every_channel(&mut v, &q);
    if level != "global" && level != "template" {
        v.add(
            "parameter",
            "the level must be one of: global, template",
            level.as_str(),
        );
    }
    v.finish()?;
    let out = if level == "global" {
        let g = service::global(&state.store, &tenant, &subscriber_id).await?;
        vec![SubscriberPreferenceOut::global(&g)]
    } else {
        template_level(&state, &tenant, &subscriber_id, every).await?
    };
    Ok(Reply::ok(out).into_response())
}

/// Turn one channel of a workflow on or off for the subscriber (`channel`), or the whole workflow
/// (`enabled`); answers the workflow's preference with every channel.
#[utoipa::path(patch, path = "/v1/subscribers/{subscriberId}/preferences/{parameter}", tag = "Subscribers",
    request_body = PatchWorkflowPreferenceIn,
    params(("subscriberId" = String, Path), ("parameter" = String, Path, description = "The workflow: its _id or identifier")),
    responses((status = 200, body = SubscriberPreferenceOut), (status = 400, description = "A critical or read-only workflow"),
        (status = 404, description = "Unknown subscriber or workflow"), (status = 422, description = "Invalid body")))]
pub async fn patch_workflow_preference(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((subscriber_id, workflow_id)): AppPath<(String, String)>,
    AppJson(body): AppJson<PatchWorkflowPreferenceIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let channels = channels_of(
        &mut v,
        "channel",
        body.channel.iter().map(|c| (String::new(), c)),
    );
    v.finish()?;
    let change = Change {
        enabled: body.enabled,
        channels,
    };
    let changed = service::change(
        &state.store,
        &tenant,
        &subscriber_id,
        Some(&workflow_id),
        change,
    )
    .await?;
    Ok(Reply::ok(SubscriberPreferenceOut::from(&changed)).into_response())
}

/// Change the subscriber's global preference: every notification on or off (`enabled`), and channels
/// (`preferences`); answers the global preference.
#[utoipa::path(patch, path = "/v1/subscribers/{subscriberId}/preferences", tag = "Subscribers",
    request_body = PatchGlobalPreferenceIn, params(("subscriberId" = String, Path)),
    responses((status = 200, body = SubscriberPreferenceOut), (status = 404, description = "Unknown subscriber"),
        (status = 422, description = "Invalid body")))]
pub async fn patch_global_preference(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    AppJson(body): AppJson<PatchGlobalPreferenceIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let items = body.preferences.unwrap_or_default();
    over_cap(&mut v, "preferences", items.len(), Channel::ALL.len());
    let channels = channels_of(
        &mut v,
        "preferences",
        items.iter().enumerate().map(|(i, c)| (format!(".{i}"), c)),
    );
    v.finish()?;
    let change = Change {
        enabled: body.enabled,
        channels,
    };
    let changed = service::change(&state.store, &tenant, &subscriber_id, None, change).await?;
    Ok(Reply::ok(SubscriberPreferenceOut::from(&changed)).into_response())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_channel_outside_the_five_is_named_with_its_place() {
        let items = [
            ChannelPreferenceIn {
                channel_type: "email".into(),
                enabled: false,
            },
            ChannelPreferenceIn {
                channel_type: "tool".into(),
                enabled: true,
            },
        ];
        let mut v = Validation::new();
        let out = channels_of(
            &mut v,
            "preferences",
            items.iter().enumerate().map(|(i, c)| (format!(".{i}"), c)),
        );
        assert_eq!(out.email, Some(false));
        assert_eq!(out.sms, None);
        let fields: Vec<(&str, &Value)> =
            v.0.iter().map(|e| (e.field.as_str(), &e.value)).collect();
        assert_eq!(fields, [("preferences.1.type", &Value::from("tool"))]);
    }
}
