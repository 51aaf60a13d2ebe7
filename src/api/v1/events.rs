//! `/v1/events/trigger`: trigger a workflow (single and bulk) and cancel a transaction's pending jobs.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath};
use crate::api::wire::Reply;
use crate::api::AppState;
use crate::domain::Tenant;
use crate::error::{Error, Validation};
use crate::service::events::{self as service, TriggerInput, TriggerResult};
use crate::service::limits::BULK_EVENTS;

/// Body of `POST /v1/events/trigger`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerIn {
    /// The workflow's trigger identifier.
    pub name: String,
    /// A subscriberId, a subscriber object (upserted), a topic `{type: "Topic", topicKey, exclude?}`, or an
    /// array of them.
    #[schema(schema_with = crate::api::docs::recipients_schema)]
    pub to: Value,
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub overrides: Option<Value>,
    /// Generated when absent; a repeated one does not run again.
    pub transaction_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub actor: Option<Value>,
    /// Map of context type → id or `{id, data?}`.
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    /// Not supported by this server: a value other than null is refused with a 422 naming it.
    #[schema(value_type = Option<Object>)]
    pub tenant: Option<Value>,
    /// Not supported by this server (a value other than null → 422).
    #[schema(value_type = Option<String>)]
    pub bridge_url: Option<Value>,
    /// Not supported by this server (a value other than null → 422).
    #[schema(value_type = Option<Object>)]
    pub controls: Option<Value>,
    /// Not supported by this server (a value other than null → 422).
    #[schema(value_type = Option<String>)]
    pub agent_id: Option<Value>,
}

/// Body of `POST /v1/events/trigger/broadcast`: a trigger to every subscriber of the environment.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastIn {
    /// The workflow's trigger identifier.
    pub name: String,
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub overrides: Option<Value>,
    /// Generated when absent; a repeated one does not run again.
    pub transaction_id: Option<String>,
    /// Not notified of its own action.
    #[schema(value_type = Option<Object>)]
    pub actor: Option<Value>,
    /// Map of context type → id or `{id, data?}`.
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    /// Not supported by this server: a value other than null is refused with a 422 naming it.
    #[schema(value_type = Option<Object>)]
    pub tenant: Option<Value>,
    /// Not supported by this server (a value other than null → 422).
    #[schema(value_type = Option<String>)]
    pub bridge_url: Option<Value>,
    /// Not supported by this server (a value other than null → 422).
    #[schema(value_type = Option<Object>)]
    pub controls: Option<Value>,
    /// Not supported by this server (a value other than null → 422).
    #[schema(value_type = Option<String>)]
    pub agent_id: Option<Value>,
}

/// The fields of a trigger that Tidings accepts in Novu's request but does not implement, and the
/// parts of `overrides` it does not apply: each is refused (422, naming it) when it carries a value,
/// rather than answered `processed` and dropped.
fn refuse_unsupported(
    v: &mut Validation,
    prefix: &str,
    fields: [(&str, &Option<Value>); 4],
    overrides: &Option<Value>,
) {
    let mut refuse = |field: String, value: &Value| {
        v.add(
            &field,
            format!("{field} is not supported by this server"),
            value.clone(),
        );
    };
    for (name, value) in fields {
        if let Some(value) = value.as_ref().filter(|x| !x.is_null()) {
            refuse(format!("{prefix}{name}"), value);
        }
    }
    let Some(Value::Object(o)) = overrides else {
        return;
    };
    for name in ["layoutIdentifier", "severity", "channels"] {
        if let Some(value) = o.get(name).filter(|x| !x.is_null()) {
            refuse(format!("{prefix}overrides.{name}"), value);
        }
    }
    if let Some(Value::Object(steps)) = o.get("steps") {
        for (step, step_overrides) in steps {
            for name in ["providers", "layoutId"] {
                if let Some(value) = step_overrides.get(name).filter(|x| !x.is_null()) {
                    refuse(format!("{prefix}overrides.steps.{step}.{name}"), value);
                }
            }
        }
    }
}

impl TriggerIn {
    fn refuse_unsupported(&self, v: &mut Validation, prefix: &str) {
        let fields = [
            ("tenant", &self.tenant),
            ("bridgeUrl", &self.bridge_url),
            ("controls", &self.controls),
            ("agentId", &self.agent_id),
        ];
        refuse_unsupported(v, prefix, fields, &self.overrides);
    }
}

impl BroadcastIn {
    fn refuse_unsupported(&self, v: &mut Validation) {
        let fields = [
            ("tenant", &self.tenant),
            ("bridgeUrl", &self.bridge_url),
            ("controls", &self.controls),
            ("agentId", &self.agent_id),
        ];
        refuse_unsupported(v, "", fields, &self.overrides);
    }
}

impl From<BroadcastIn> for TriggerInput {
    fn from(t: BroadcastIn) -> Self {
        Self {
            name: t.name,
            to: Value::Null,
            payload: t.payload,
            overrides: t.overrides,
            transaction_id: t.transaction_id,
            actor: t.actor,
            context: t.context,
            everyone: true,
        }
    }
}

/// Body of `POST /v1/events/trigger/bulk`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct BulkTriggerIn {
    pub events: Vec<TriggerIn>,
}

/// `{acknowledged, status, transactionId, error?}`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerOut {
    pub acknowledged: bool,
    /// processed, trigger_not_active, no_workflow_steps_defined or error.
    pub status: &'static str,
    /// Absent for a bulk event refused before it had one (the caller gave none).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub transaction_id: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error: Vec<String>,
}

impl From<TriggerResult> for TriggerOut {
    fn from(r: TriggerResult) -> Self {
        Self {
            acknowledged: true,
            status: r.status,
            transaction_id: r.transaction_id,
            error: r.error,
        }
    }
}

impl From<TriggerIn> for TriggerInput {
    fn from(t: TriggerIn) -> Self {
        Self {
            name: t.name,
            to: t.to,
            payload: t.payload,
            overrides: t.overrides,
            transaction_id: t.transaction_id,
            actor: t.actor,
            context: t.context,
            everyone: false,
        }
    }
}

/// Trigger a workflow for one or more subscribers.
#[utoipa::path(post, path = "/v1/events/trigger", tag = "Events", request_body = TriggerIn,
    responses((status = 201, body = TriggerOut),
        (status = 400, description = "The payload fails the workflow's payloadSchema (validatePayload), or a recipient's channels have no active integration: the error body adds `type` and `errors`"),
        (status = 404, description = "Unknown workflow"), (status = 422, description = "Invalid body")))]
pub async fn trigger_event(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<TriggerIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    body.refuse_unsupported(&mut v, "");
    v.finish()?;
    trigger_one(&state, &tenant, body.into()).await
}

/// Records one trigger and wakes this process's workers: `201 {acknowledged, status, transactionId}`.
async fn trigger_one(
    state: &AppState,
    tenant: &Tenant,
    input: TriggerInput,
) -> ApiResult<Response> {
    let result = service::trigger(&state.store, &state.triggers, tenant, input).await?;
    crate::metrics::triggers(result.status, 1);
    state.wakeup.notify();
    Ok(Reply::created(TriggerOut::from(result)).into_response())
}

/// Trigger a workflow for every subscriber of the environment (but the actor). Answers at once; the
/// notifications are written in batches by the workers (`DELETE /v1/events/trigger/{transactionId}` stops
/// the rest).
#[utoipa::path(post, path = "/v1/events/trigger/broadcast", tag = "Events", request_body = BroadcastIn,
    responses((status = 201, body = TriggerOut),
        (status = 400, description = "The payload fails the workflow's payloadSchema (validatePayload): the error body adds `type` and `errors`"),
        (status = 404, description = "Unknown workflow"), (status = 422, description = "Invalid body")))]
pub async fn trigger_broadcast(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<BroadcastIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    body.refuse_unsupported(&mut v);
    v.finish()?;
    trigger_one(&state, &tenant, body.into()).await
}

/// Trigger up to 100 events at once; answers one result per event, in order: an event refused (unknown
/// workflow, invalid, its payload rejected, the database refusing it) is `status: "error"` with its reason,
/// the others are recorded (as Novu answers a bulk).
#[utoipa::path(post, path = "/v1/events/trigger/bulk", tag = "Events", request_body = BulkTriggerIn,
    responses((status = 201, body = Vec<TriggerOut>),
        (status = 422, description = "Invalid body, more than 100 events, or a field this server does not support")))]
pub async fn trigger_bulk(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<BulkTriggerIn>,
) -> ApiResult<Response> {
    if body.events.is_empty() || body.events.len() > BULK_EVENTS {
        return Err(Error::invalid(
            "events",
            format!("events must hold 1 to {BULK_EVENTS} triggers"),
            Value::from(body.events.len()),
        )
        .into());
    }
    let mut v = Validation::new();
    for (i, event) in body.events.iter().enumerate() {
        event.refuse_unsupported(&mut v, &format!("events[{i}]."));
    }
    v.finish()?;
    let inputs = body.events.into_iter().map(Into::into).collect();
    let out: Vec<TriggerOut> =
        service::trigger_many(&state.store, &state.triggers, &tenant, inputs)
            .await?
            .into_iter()
            .map(|r| {
                crate::metrics::triggers(r.status, 1);
                TriggerOut::from(r)
            })
            .collect();
    state.wakeup.notify();
    Ok(Reply::created(out).into_response())
}

/// Cancel the pending (delayed, digesting, queued) jobs of a transaction; answers whether any was canceled.
#[utoipa::path(delete, path = "/v1/events/trigger/{transactionId}", tag = "Events", params(("transactionId" = String, Path)),
    responses((status = 200, body = bool, content_type = "application/json")))]
pub async fn cancel_trigger(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(transaction_id): AppPath<String>,
) -> ApiResult<Response> {
    let canceled = service::cancel(&state.store, &tenant, &transaction_id).await?;
    Ok(Reply::ok(canceled).into_response())
}
