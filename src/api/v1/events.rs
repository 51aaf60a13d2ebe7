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
use crate::error::Error;
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
    trigger_one(&state, &tenant, body.into()).await
}

/// Trigger up to 100 events at once; answers one result per event, in order.
#[utoipa::path(post, path = "/v1/events/trigger/bulk", tag = "Events", request_body = BulkTriggerIn,
    responses((status = 201, body = Vec<TriggerOut>),
        (status = 400, description = "As for a single trigger: the error body adds `type` and `errors`"),
        (status = 404, description = "An event names an unknown workflow"),
        (status = 422, description = "Invalid body or more than 100 events")))]
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
