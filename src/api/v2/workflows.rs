//! `/v2/workflows`: create, list (`{workflows, totalCount}` with offset pagination, as Novu answers it, in
//! both profiles), retrieve, replace, patch, delete. Workflows are addressable by `_id` or by their trigger
//! identifier (`workflowId`).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::pagination::{descending, DEFAULT_LIMIT, MAX_LIMIT};
use crate::api::v2::subscribers::present;
use crate::api::wire::{no_content, IsoTime, Reply, WireName};
use crate::api::AppState;
use crate::domain::workflow::{
    validate_preferences, Severity, Step, StepIssues, StepType, Workflow, WorkflowStatus,
};
use crate::domain::{EnvironmentId, OrganizationId, Tenant};
use crate::error::{Result, Validation};
use crate::service::workflows::{self as service, StepInput, WorkflowInput, WorkflowPatch};
use crate::store::workflows::{WorkflowListQuery, WorkflowOrder};

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
    /// Translations are not supported: `true` is refused with a 422 (`false` and null are accepted).
    pub is_translation_enabled: Option<bool>,
    /// Agents are not supported: a value other than null is refused with a 422.
    #[schema(value_type = Option<Object>)]
    pub agent: Option<Value>,
    #[serde(default)]
    pub steps: Vec<StepIn>,
}

/// `isTranslationEnabled: true` asks for what Tidings does not do: refused rather than dropped.
fn refuse_translations(v: &mut Validation, enabled: Option<bool>) {
    if enabled == Some(true) {
        v.add(
            "isTranslationEnabled",
            "isTranslationEnabled is not supported by this server: translations are not implemented",
            true,
        );
    }
}

impl WorkflowIn {
    fn refuse_unsupported(&self) -> Result<()> {
        let mut v = Validation::new();
        refuse_translations(&mut v, self.is_translation_enabled);
        if let Some(agent) = self.agent.as_ref().filter(|a| !a.is_null()) {
            v.add(
                "agent",
                "agent is not supported by this server",
                agent.clone(),
            );
        }
        v.finish()
    }
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
    /// Omitted when the workflow has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub active: bool,
    /// ACTIVE, INACTIVE, or ERROR (active, but a step has `issues`).
    pub status: WorkflowStatus,
    pub critical: bool,
    pub severity: Severity,
    pub origin: WireName,
    pub validate_payload: bool,
    #[schema(value_type = Option<Object>)]
    pub payload_schema: Option<Value>,
    /// `{user, default}`: the `user` preferences sent (or null) and the `workflow` preferences sent (or the
    /// defaults, every channel enabled).
    #[schema(value_type = Object)]
    pub preferences: Value,
    pub steps: Vec<StepOut>,
    #[serde(rename = "_environmentId")]
    #[schema(value_type = String)]
    pub environment_id: EnvironmentId,
    #[serde(rename = "_organizationId")]
    #[schema(value_type = String)]
    pub organization_id: OrganizationId,
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
    /// `{controls: {<controlKey>: [{issueType, variableName?, message}]}}`; omitted when the step has none.
    #[serde(skip_serializing_if = "StepIssues::is_empty")]
    pub issues: StepIssues,
}

fn default_preferences() -> Value {
    let channel = json!({"enabled": true});
    json!({
        "all": {"enabled": true, "readOnly": false},
        "channels": {"in_app": channel, "email": channel, "sms": channel, "chat": channel, "push": channel}
    })
}

fn step_out(s: Step, w: &Workflow) -> StepOut {
    step_with_variables(s, w, json!({}))
}

/// A step with the JSON Schema of the variables it may use.
fn step_with_variables(s: Step, w: &Workflow, variables: Value) -> StepOut {
    StepOut {
        id: s.id,
        slug: s.step_id.clone(),
        step_id: s.step_id,
        name: s.name,
        step_type: s.step_type,
        controls: json!({ "values": s.control_values }),
        control_values: s.control_values,
        variables,
        filters: s.filters,
        should_stop_on_fail: s.should_stop_on_fail,
        origin: WireName("svc-cloud".into()),
        workflow_id: w.workflow_id.clone(),
        workflow_database_id: w.id.as_str().to_owned(),
        issues: s.issues,
    }
}

/// The stored `{user, workflow}` preferences as Novu answers them: `{user, default}`. A level stored in
/// another shape (before preferences were validated) reads as unset.
fn preferences_out(stored: Option<&Value>) -> Value {
    let level = |key: &str| {
        stored
            .and_then(|p| p.get(key))
            .filter(|l| {
                let mut v = Validation::new();
                validate_preferences(&mut v, "p", &json!({ key: l }));
                !l.is_null() && v.is_empty()
            })
            .cloned()
    };
    json!({
        "user": level("user").unwrap_or(Value::Null),
        "default": level("workflow").unwrap_or_else(default_preferences),
    })
}

impl From<Workflow> for WorkflowOut {
    fn from(mut w: Workflow) -> Self {
        let status = w.status();
        let steps = std::mem::take(&mut w.steps);
        let steps = steps.into_iter().map(|s| step_out(s, &w)).collect();
        Self {
            slug: w.workflow_id.clone(),
            status,
            preferences: preferences_out(w.preferences.as_ref()),
            id: w.id.into(),
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

/// A workflow as `GET /v2/workflows/{id}` answers it: what its webhook events carry
/// (`service::workflows::View`).
pub fn workflow_view(w: &Workflow) -> Value {
    serde_json::to_value(WorkflowOut::from(w.clone())).unwrap_or_default()
}

/// Create a workflow.
#[utoipa::path(post, path = "/v2/workflows", tag = "Workflows", request_body = WorkflowIn,
    responses((status = 201, body = WorkflowOut), (status = 409, description = "workflowId taken"), (status = 422, description = "Invalid body")))]
pub async fn create_workflow(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<WorkflowIn>,
) -> ApiResult<Response> {
    body.refuse_unsupported()?;
    let w = service::create(&state.store, &tenant, body.into(), workflow_view).await?;
    Ok(Reply::created(WorkflowOut::from(w)).into_response())
}

/// A workflow in a list (Novu's `WorkflowListResponseDto`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowListItemOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub workflow_id: String,
    pub slug: String,
    pub name: String,
    pub tags: Vec<String>,
    pub active: bool,
    pub status: WorkflowStatus,
    pub origin: WireName,
    /// The type of each step, in order.
    pub step_type_overviews: Vec<StepType>,
    pub steps: Vec<StepListItemOut>,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

/// A step in a workflow list.
#[derive(Debug, Serialize, ToSchema)]
pub struct StepListItemOut {
    pub slug: String,
    #[serde(rename = "type")]
    pub step_type: StepType,
    #[serde(skip_serializing_if = "StepIssues::is_empty")]
    pub issues: StepIssues,
}

impl From<Workflow> for WorkflowListItemOut {
    fn from(w: Workflow) -> Self {
        Self {
            status: w.status(),
            step_type_overviews: w.steps.iter().map(|s| s.step_type).collect(),
            steps: w
                .steps
                .into_iter()
                .map(|s| StepListItemOut {
                    slug: s.step_id,
                    step_type: s.step_type,
                    issues: s.issues,
                })
                .collect(),
            slug: w.workflow_id.clone(),
            id: w.id.into(),
            workflow_id: w.workflow_id,
            name: w.name,
            tags: w.tags,
            active: w.active,
            origin: WireName("svc-cloud".into()),
            created_at: w.created_at.into(),
            updated_at: w.updated_at.into(),
        }
    }
}

/// `{workflows, totalCount}`: one page and how many workflows match the filters.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowListOut {
    pub workflows: Vec<WorkflowListItemOut>,
    pub total_count: i64,
}

/// Reads `limit`, `offset`, `orderDirection`, `orderBy`, `query`, `tags` and `status`.
fn list_query(q: &QueryMap) -> Result<WorkflowListQuery> {
    let mut v = Validation::new();
    let limit = q
        .int(&mut v, "limit", 1, MAX_LIMIT)
        .unwrap_or(DEFAULT_LIMIT);
    let offset = q.int(&mut v, "offset", 0, i64::MAX).unwrap_or(0);
    let descending = descending(q, &mut v);
    let order_by = match q.string("orderBy").as_deref() {
        None | Some("createdAt") => WorkflowOrder::CreatedAt,
        Some("updatedAt") => WorkflowOrder::UpdatedAt,
        Some("name") => WorkflowOrder::Name,
        Some("lastTriggeredAt") => {
            v.add(
                "orderBy",
                "lastTriggeredAt is not recorded by this server: order by createdAt, updatedAt or name",
                "lastTriggeredAt",
            );
            WorkflowOrder::CreatedAt
        }
        Some(other) => {
            v.add(
                "orderBy",
                "orderBy must be one of: createdAt, updatedAt, name",
                other,
            );
            WorkflowOrder::CreatedAt
        }
    };
    let mut statuses = Vec::new();
    for s in q.list(&mut v, "status") {
        match WorkflowStatus::parse(&s) {
            Some(st) => statuses.push(st),
            None => v.add("status", "status must be ACTIVE, INACTIVE or ERROR", s),
        }
    }
    let tags = q.list(&mut v, "tags");
    v.finish()?;
    Ok(WorkflowListQuery {
        limit,
        offset,
        order_by,
        descending,
        query: q.string("query"),
        tags,
        statuses,
    })
}

/// List workflows, newest first by default.
#[utoipa::path(get, path = "/v2/workflows", tag = "Workflows",
    params(("limit" = Option<i64>, Query, description = "1..100, default 10"), ("offset" = Option<i64>, Query, description = "default 0"),
        ("orderBy" = Option<String>, Query, description = "createdAt (default), updatedAt or name"),
        ("orderDirection" = Option<String>, Query, description = "ASC or DESC (default)"),
        ("query" = Option<String>, Query, description = "case-insensitive part of the name or workflowId"),
        ("tags" = Option<Vec<String>>, Query, description = "workflows with any of these tags"),
        ("status" = Option<Vec<String>>, Query, description = "ACTIVE, INACTIVE, ERROR")),
    responses((status = 200, body = WorkflowListOut), (status = 422, description = "Invalid query")))]
pub async fn list_workflows(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let query = list_query(&q)?;
    let (found, total_count) = service::list(&state.store, &tenant, &query).await?;
    Ok(Reply::ok(WorkflowListOut {
        workflows: found.into_iter().map(WorkflowListItemOut::from).collect(),
        total_count,
    })
    .into_response())
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
    body.refuse_unsupported()?;
    let w = service::update(&state.store, &tenant, &id, body.into(), workflow_view).await?;
    Ok(Reply::ok(WorkflowOut::from(w)).into_response())
}

/// Body of `PATCH /v2/workflows/{workflowId}` (Novu's `PatchWorkflowDto`): a missing field is unchanged;
/// `null` clears `description` and `payloadSchema`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowPatchIn {
    #[schema(value_type = Option<bool>)]
    pub active: Option<Value>,
    #[schema(value_type = Option<String>)]
    pub name: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub description: Option<Option<Value>>,
    #[schema(value_type = Option<Vec<String>>)]
    pub tags: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Object>)]
    pub payload_schema: Option<Option<Value>>,
    #[schema(value_type = Option<bool>)]
    pub validate_payload: Option<Value>,
    /// Translations are not supported: `true` is refused with a 422 (`false` and null are accepted).
    #[schema(value_type = Option<bool>)]
    pub is_translation_enabled: Option<Value>,
}

impl WorkflowPatchIn {
    /// Checks every field's type (all problems in one 422).
    fn into_patch(self) -> Result<WorkflowPatch> {
        let mut v = Validation::new();
        let mut boolean = |field: &str, x: Option<Value>| match x {
            None => None,
            Some(Value::Bool(b)) => Some(b),
            Some(other) => {
                v.add(field, format!("{field} must be a boolean"), other);
                None
            }
        };
        let active = boolean("active", self.active);
        let validate_payload = boolean("validatePayload", self.validate_payload);
        let translations = boolean("isTranslationEnabled", self.is_translation_enabled);
        refuse_translations(&mut v, translations);
        let name = match self.name {
            None => None,
            Some(Value::String(n)) => Some(n),
            Some(other) => {
                v.add("name", "name must be a string", other);
                None
            }
        };
        let description = match self.description {
            None => None,
            Some(None) => Some(None),
            Some(Some(Value::String(d))) => Some(Some(d)),
            Some(Some(other)) => {
                v.add("description", "description must be a string or null", other);
                None
            }
        };
        let tags = match self.tags {
            None => None,
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => Some(
                items
                    .into_iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect(),
            ),
            Some(other) => {
                v.add("tags", "tags must be an array of strings", other);
                None
            }
        };
        v.finish()?;
        Ok(WorkflowPatch {
            name,
            description,
            tags,
            active,
            payload_schema: self.payload_schema,
            validate_payload,
        })
    }
}

/// Change some fields of a workflow (`active`, `name`, `description`, `tags`, `payloadSchema`,
/// `validatePayload`); its steps are untouched.
#[utoipa::path(patch, path = "/v2/workflows/{workflowId}", tag = "Workflows", request_body = WorkflowPatchIn, params(("workflowId" = String, Path)),
    responses((status = 200, body = WorkflowOut), (status = 404, description = "Unknown workflow"), (status = 422, description = "Invalid body")))]
pub async fn patch_workflow(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<String>,
    AppJson(body): AppJson<WorkflowPatchIn>,
) -> ApiResult<Response> {
    let w = service::patch(
        &state.store,
        &tenant,
        &id,
        body.into_patch()?,
        workflow_view,
    )
    .await?;
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
    service::delete(&state.store, &tenant, &id, workflow_view).await?;
    Ok(no_content())
}

/// Retrieve one step of a workflow (by `_id` or `stepId`), with the JSON Schema of the variables it may use
/// (`variables`: payload, subscriber, earlier steps, context, env), as the step preview builds it.
#[utoipa::path(get, path = "/v2/workflows/{workflowId}/steps/{stepId}", tag = "Workflows",
    params(("workflowId" = String, Path), ("stepId" = String, Path)),
    responses((status = 200, body = StepOut), (status = 404, description = "Unknown workflow or step")))]
pub async fn get_step(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((workflow_id, step_id)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    let (mut w, index, variables) =
        service::get_step(&state.store, &tenant, &workflow_id, &step_id).await?;
    let step = w.steps.swap_remove(index);
    Ok(Reply::ok(step_with_variables(step, &w, variables)).into_response())
}

/// Body of `PUT /v2/workflows/{workflowId}/sync`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncIn {
    /// Another environment of the organization.
    pub target_environment_id: String,
}

/// Copy a workflow of the API key's environment into another environment of the organization: created
/// there, or updated keeping the target's `_id`s (matched by `workflowId` and `stepId`). Answers the copy.
#[utoipa::path(put, path = "/v2/workflows/{workflowId}/sync", tag = "Workflows", request_body = SyncIn,
    params(("workflowId" = String, Path)),
    responses((status = 200, body = WorkflowOut), (status = 400, description = "Same environment, or steps with issues"),
        (status = 404, description = "Unknown workflow, or unknown (or another organization's) environment"),
        (status = 409, description = "The target kept changing; retry")))]
pub async fn sync_workflow(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<String>,
    AppJson(body): AppJson<SyncIn>,
) -> ApiResult<Response> {
    let w = crate::service::promotion::sync(
        &state.store,
        &tenant,
        &id,
        &body.target_environment_id,
        workflow_view,
    )
    .await?;
    Ok(Reply::ok(WorkflowOut::from(w)).into_response())
}
