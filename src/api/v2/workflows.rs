//! `/v2/workflows`: create, list (cursor pages), retrieve, replace, delete. Workflows are addressable by
//! `_id` or by their trigger identifier (`workflowId`).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::pagination::{page_request, CursorPage};
use crate::api::wire::{no_content, IsoTime, Reply, WireName};
use crate::api::AppState;
use crate::domain::workflow::{Severity, Step, StepType, Workflow};
use crate::domain::Tenant;
use crate::error::Validation;
use crate::service::workflows::{self as service, StepInput, WorkflowInput};
use crate::store::page::SortColumn;

/// Body of `POST /v2/workflows` and `PUT /v2/workflows/{workflowId}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowIn {
    pub name: String,
    /// The trigger identifier; derived from the name when omitted.
    pub workflow_id: Option<String>,
    pub description: Option<String>,
    pub tags: Option<Vec<String>>,
    /// Default true.
    pub active: Option<bool>,
    pub critical: Option<bool>,
    /// high, medium, low or none (default).
    pub severity: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub preferences: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub payload_schema: Option<Value>,
    pub validate_payload: Option<bool>,
    #[serde(default)]
    pub steps: Vec<StepIn>,
}

/// A step in a workflow body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepIn {
    /// `_id` of an existing step, to keep it on update.
    #[serde(rename = "_id")]
    pub id: Option<String>,
    /// Derived from the name when omitted; unique in the workflow.
    pub step_id: Option<String>,
    pub name: Option<String>,
    /// in_app, email, sms, chat, push, delay, digest, throttle, custom, http_request.
    #[serde(rename = "type")]
    pub step_type: String,
    #[schema(value_type = Option<Object>)]
    pub control_values: Option<Value>,
    /// StepFilter objects.
    #[schema(value_type = Option<Vec<Object>>)]
    pub filters: Option<Value>,
    pub should_stop_on_fail: Option<bool>,
}

impl From<WorkflowIn> for WorkflowInput {
    fn from(w: WorkflowIn) -> Self {
        Self {
            name: w.name,
            workflow_id: w.workflow_id,
            description: w.description,
            tags: w.tags,
            active: w.active,
            critical: w.critical,
            severity: w.severity,
            preferences: w.preferences,
            payload_schema: w.payload_schema,
            validate_payload: w.validate_payload,
            steps: w
                .steps
                .into_iter()
                .map(|s| StepInput {
                    id: s.id,
                    step_id: s.step_id,
                    name: s.name,
                    step_type: s.step_type,
                    control_values: s.control_values,
                    filters: s.filters,
                    should_stop_on_fail: s.should_stop_on_fail,
                })
                .collect(),
        }
    }
}

/// A workflow.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub workflow_id: String,
    pub slug: String,
    pub name: String,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub active: bool,
    pub status: &'static str,
    pub critical: bool,
    pub severity: Severity,
    pub origin: WireName,
    pub validate_payload: bool,
    #[schema(value_type = Option<Object>)]
    pub payload_schema: Option<Value>,
    #[schema(value_type = Object)]
    pub preferences: Value,
    pub steps: Vec<StepOut>,
    #[serde(rename = "_environmentId")]
    pub environment_id: String,
    #[serde(rename = "_organizationId")]
    pub organization_id: String,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

/// A workflow step.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub step_id: String,
    pub slug: String,
    pub name: String,
    #[serde(rename = "type")]
    pub step_type: StepType,
    #[schema(value_type = Object)]
    pub control_values: Map<String, Value>,
    /// `{values}`: the same control values, in the shape the Novu SDKs read.
    #[schema(value_type = Object)]
    pub controls: Value,
    #[schema(value_type = Object)]
    pub variables: Value,
    #[schema(value_type = Vec<Object>)]
    pub filters: Vec<Value>,
    pub should_stop_on_fail: bool,
    pub origin: WireName,
    pub workflow_id: String,
    pub workflow_database_id: String,
}

fn default_preferences() -> Value {
    let channel = json!({"enabled": true});
    json!({
        "all": {"enabled": true, "readOnly": false},
        "channels": {"in_app": channel, "email": channel, "sms": channel, "chat": channel, "push": channel}
    })
}

fn step_out(s: Step, w: &Workflow) -> StepOut {
    StepOut {
        id: s.id,
        slug: s.step_id.clone(),
        step_id: s.step_id,
        name: s.name,
        step_type: s.step_type,
        controls: json!({ "values": s.control_values }),
        control_values: s.control_values,
        variables: json!({}),
        filters: s.filters,
        should_stop_on_fail: s.should_stop_on_fail,
        origin: WireName("svc-cloud".into()),
        workflow_id: w.workflow_id.clone(),
        workflow_database_id: w.id.clone(),
    }
}

impl From<Workflow> for WorkflowOut {
    fn from(mut w: Workflow) -> Self {
        let steps = std::mem::take(&mut w.steps);
        let steps = steps.into_iter().map(|s| step_out(s, &w)).collect();
        Self {
            slug: w.workflow_id.clone(),
            status: if w.active { "ACTIVE" } else { "INACTIVE" },
            preferences: json!({"default": default_preferences(), "user": w.preferences}),
            id: w.id,
            workflow_id: w.workflow_id,
            name: w.name,
            description: w.description,
            tags: w.tags,
            active: w.active,
            critical: w.critical,
            severity: w.severity,
            origin: WireName("svc-cloud".into()),
            validate_payload: w.validate_payload,
            payload_schema: w.payload_schema,
            steps,
            environment_id: w.environment_id,
            organization_id: w.organization_id,
            created_at: w.created_at.into(),
            updated_at: w.updated_at.into(),
        }
    }
}

/// Create a workflow.
#[utoipa::path(post, path = "/v2/workflows", tag = "Workflows", request_body = WorkflowIn,
    responses((status = 201, body = WorkflowOut), (status = 409, description = "workflowId taken"), (status = 422, description = "Invalid body")))]
pub async fn create_workflow(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<WorkflowIn>,
) -> ApiResult<Response> {
    let w = service::create(&state.store, &tenant, body.into()).await?;
    Ok(Reply::created(WorkflowOut::from(w)).into_response())
}

/// List workflows (cursor pages, newest first by default).
#[utoipa::path(get, path = "/v2/workflows", tag = "Workflows",
    params(("after" = Option<String>, Query), ("before" = Option<String>, Query), ("limit" = Option<i64>, Query),
        ("orderBy" = Option<String>, Query, description = "createdAt (default) or updatedAt"), ("orderDirection" = Option<String>, Query),
        ("includeCursor" = Option<bool>, Query)),
    responses((status = 200, body = CursorPage<WorkflowOut>)))]
pub async fn list_workflows(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let page = page_request(
        &q,
        &mut v,
        &[
            ("createdAt", SortColumn::Int("created_at")),
            ("updatedAt", SortColumn::Int("updated_at")),
        ],
    )?;
    v.finish()?;
    let found = service::list(&state.store, &tenant, &page).await?;
    Ok(Reply::page(CursorPage::from_page(found, WorkflowOut::from)).into_response())
}

/// Retrieve a workflow by `_id` or `workflowId`.
#[utoipa::path(get, path = "/v2/workflows/{workflowId}", tag = "Workflows", params(("workflowId" = String, Path)),
    responses((status = 200, body = WorkflowOut), (status = 404, description = "Unknown workflow")))]
pub async fn get_workflow(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<String>,
) -> ApiResult<Response> {
    let w = service::get(&state.store, &tenant, &id).await?;
    Ok(Reply::ok(WorkflowOut::from(w)).into_response())
}

/// Replace a workflow's definition; steps keep their `_id` when matched by `_id` or `stepId`.
#[utoipa::path(put, path = "/v2/workflows/{workflowId}", tag = "Workflows", request_body = WorkflowIn, params(("workflowId" = String, Path)),
    responses((status = 200, body = WorkflowOut), (status = 404, description = "Unknown workflow"), (status = 409, description = "workflowId taken"),
        (status = 422, description = "Invalid body")))]
pub async fn update_workflow(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<String>,
    AppJson(body): AppJson<WorkflowIn>,
) -> ApiResult<Response> {
    let w = service::update(&state.store, &tenant, &id, body.into()).await?;
    Ok(Reply::ok(WorkflowOut::from(w)).into_response())
}

/// Delete a workflow.
#[utoipa::path(delete, path = "/v2/workflows/{workflowId}", tag = "Workflows", params(("workflowId" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, description = "Unknown workflow")))]
pub async fn delete_workflow(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<String>,
) -> ApiResult<Response> {
    service::delete(&state.store, &tenant, &id).await?;
    Ok(no_content())
}
