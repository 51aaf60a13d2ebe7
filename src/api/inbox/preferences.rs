//! The Inbox's preferences: the global one and one per workflow, read and changed.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::InboxSubscriber;
use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::v2::preferences::{criticality_of, ChannelsOut, InboxPreferenceOut};
use crate::api::wire::Reply;
use crate::api::AppState;
use crate::domain::preference::ChannelChoices;
use crate::domain::Channel;
use crate::error::Validation;
use crate::service::preferences::{self, Change, Changed, GlobalPreference, BULK_ITEMS};

fn global_out(g: &GlobalPreference) -> InboxPreferenceOut {
    InboxPreferenceOut {
        level: "global",
        enabled: g.enabled,
        channels: ChannelsOut::of(Channel::ALL.into_iter().zip(g.channels)),
        workflow: None,
        overrides: Vec::new(),
    }
}

/// The subscriber's preferences: the global one first, then one per workflow with a channel step, oldest
/// first; `criticality` (`nonCritical` by default, `critical`, `all`), `tags[]` (a workflow with one of them)
/// and `severity[]` narrow the workflows.
#[utoipa::path(get, path = "/v1/inbox/preferences", tag = "Inbox", security(("InboxSession" = [])),
    params(("criticality" = Option<String>, Query), ("tags[]" = Option<Vec<String>>, Query), ("severity[]" = Option<Vec<String>>, Query)),
    responses((status = 200, description = "`{data: [preference]}`", body = Vec<InboxPreferenceOut>),
        (status = 401, description = "No valid session"), (status = 422, description = "Invalid query")))]
pub async fn list_preferences(
    State(state): State<AppState>,
    who: InboxSubscriber,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let criticality = criticality_of(&q, &mut v);
    let tags = q.list(&mut v, "tags");
    let severity = q.list(&mut v, "severity");
    v.finish()?;
    let found =
        preferences::get(&state.store, &who.tenant, &who.subscriber_id, criticality).await?;
    let mut out = vec![global_out(&found.global)];
    out.extend(
        found
            .workflows
            .iter()
            .filter(|p| tags.is_empty() || p.workflow.tags.iter().any(|t| tags.contains(t)))
            .filter(|p| {
                severity.is_empty() || severity.iter().any(|s| s == p.workflow.severity.as_str())
            })
            .map(InboxPreferenceOut::from),
    );
    Ok(Reply::enveloped(StatusCode::OK, out).into_response())
}

/// The subscriber's global preference.
#[utoipa::path(get, path = "/v1/inbox/preferences/global", tag = "Inbox", security(("InboxSession" = [])),
    responses((status = 200, body = InboxPreferenceOut), (status = 401, description = "No valid session")))]
pub async fn global_preference(
    State(state): State<AppState>,
    who: InboxSubscriber,
) -> ApiResult<Response> {
    let g = preferences::global(&state.store, &who.tenant, &who.subscriber_id).await?;
    Ok(Reply::enveloped(StatusCode::OK, global_out(&g)).into_response())
}

/// Body of the preference changes: channels as flat keys, and `enabled`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct PreferenceIn {
    pub email: Option<bool>,
    pub sms: Option<bool>,
    pub in_app: Option<bool>,
    pub chat: Option<bool>,
    pub push: Option<bool>,
    pub enabled: Option<bool>,
    /// Delivery schedules are not supported: a schedule is refused.
    #[schema(value_type = Option<Object>)]
    pub schedule: Option<Value>,
    /// Conditions are not supported: a condition is refused.
    #[schema(value_type = Option<Object>)]
    pub condition: Option<Value>,
}

impl PreferenceIn {
    fn change(self, v: &mut Validation) -> Change {
        for (field, value) in [("schedule", &self.schedule), ("condition", &self.condition)] {
            if value.as_ref().is_some_and(|s| !s.is_null()) {
                v.add(
                    field,
                    format!("{field} is not supported by Tidings"),
                    value.clone().unwrap_or_default(),
                );
            }
        }
        Change {
            enabled: self.enabled,
            channels: ChannelChoices {
                in_app: self.in_app,
                email: self.email,
                sms: self.sms,
                chat: self.chat,
                push: self.push,
            },
        }
    }
}

/// Changes the subscriber's global preference; answers it.
#[utoipa::path(patch, path = "/v1/inbox/preferences", tag = "Inbox", security(("InboxSession" = [])),
    request_body = PreferenceIn,
    responses((status = 200, body = InboxPreferenceOut), (status = 401, description = "No valid session"),
        (status = 422, description = "Invalid body")))]
pub async fn patch_global_preference(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppJson(body): AppJson<PreferenceIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let change = body.change(&mut v);
    v.finish()?;
    let changed =
        preferences::change(&state.store, &who.tenant, &who.subscriber_id, None, change).await?;
    Ok(Reply::enveloped(StatusCode::OK, changed_out(&changed)).into_response())
}

fn changed_out(c: &Changed) -> InboxPreferenceOut {
    match c {
        Changed::Global(g) => global_out(g),
        Changed::Workflow(w) => InboxPreferenceOut::from(w),
    }
}

/// Changes the subscriber's preference for one workflow (by `_id` or identifier); answers it.
#[utoipa::path(patch, path = "/v1/inbox/preferences/{workflowId}", tag = "Inbox", security(("InboxSession" = [])),
    params(("workflowId" = String, Path)), request_body = PreferenceIn,
    responses((status = 200, body = InboxPreferenceOut), (status = 400, description = "A critical or read-only workflow"),
        (status = 401, description = "No valid session"), (status = 404, description = "Unknown workflow"),
        (status = 422, description = "Invalid body")))]
pub async fn patch_workflow_preference(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppPath(workflow_id): AppPath<String>,
    AppJson(body): AppJson<PreferenceIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let change = body.change(&mut v);
    v.finish()?;
    let changed = preferences::change(
        &state.store,
        &who.tenant,
        &who.subscriber_id,
        Some(&workflow_id),
        change,
    )
    .await?;
    Ok(Reply::enveloped(StatusCode::OK, changed_out(&changed)).into_response())
}

/// One item of a bulk preference change.
#[derive(Debug, Deserialize, ToSchema)]
pub struct BulkPreferenceItemIn {
    #[serde(rename = "workflowId")]
    pub workflow_id: String,
    pub email: Option<bool>,
    pub sms: Option<bool>,
    pub in_app: Option<bool>,
    pub chat: Option<bool>,
    pub push: Option<bool>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct InboxBulkPreferencesIn {
    pub preferences: Vec<BulkPreferenceItemIn>,
}

/// Changes the subscriber's preferences for several workflows at once (all or nothing).
#[utoipa::path(patch, path = "/v1/inbox/preferences/bulk", tag = "Inbox", security(("InboxSession" = [])),
    request_body = InboxBulkPreferencesIn,
    responses((status = 200, body = Vec<InboxPreferenceOut>), (status = 400, description = "A critical or read-only workflow"),
        (status = 401, description = "No valid session"), (status = 404, description = "Unknown workflow"),
        (status = 422, description = "Invalid body")))]
pub async fn bulk_preferences(
    State(state): State<AppState>,
    who: InboxSubscriber,
    AppJson(body): AppJson<InboxBulkPreferencesIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    if body.preferences.is_empty() {
        v.add(
            "preferences",
            "preferences must hold at least one item",
            Value::Array(vec![]),
        );
    }
    crate::service::over_cap(&mut v, "preferences", body.preferences.len(), BULK_ITEMS);
    v.finish()?;
    let items = body
        .preferences
        .into_iter()
        .map(|p| {
            let channels = ChannelChoices {
                in_app: p.in_app,
                email: p.email,
                sms: p.sms,
                chat: p.chat,
                push: p.push,
            };
            (p.workflow_id, channels)
        })
        .collect();
    let changed =
        preferences::change_many(&state.store, &who.tenant, &who.subscriber_id, items).await?;
    let out: Vec<InboxPreferenceOut> = changed.iter().map(Into::into).collect();
    Ok(Reply::enveloped(StatusCode::OK, out).into_response())
}
