//! `/v2/environments`: an environment's workflow tags, and promotion (`diff`, `publish`) between two
//! environments of the caller's organization (`service::promotion`).
//!
//! `resourceType` is `REGULAR` on every resource: the pinned SDKs (novu-py 3.19.0, @novu/api 3.19.1) read
//! it as a closed enum of `REGULAR`, `ECHO` and `BRIDGE` (Novu's own `workflow` and `step` fail their
//! parsing), and every workflow Tidings stores is a regular one. A step's change carries its `stepType`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath};
use crate::api::wire::{IsoTime, Reply};
use crate::api::AppState;
use crate::domain::promotion::{Change, DiffAction, Plan, Side, SkipReason, Write};
use crate::domain::workflow::StepType;
use crate::domain::Tenant;
use crate::service::promotion::{self as service, PublishInput};

/// The one `resourceType` (see the module's documentation).
const REGULAR: &str = "REGULAR";

/// A tag of the environment's workflows.
#[derive(Debug, Serialize, ToSchema)]
pub struct TagOut {
    pub name: String,
}

/// The distinct tags of an environment's workflows, sorted.
#[utoipa::path(get, path = "/v2/environments/{environmentId}/tags", tag = "Environments",
    params(("environmentId" = String, Path, description = "`_id` or public identifier of an environment of the organization")),
    responses((status = 200, body = Vec<TagOut>), (status = 404, description = "Unknown environment, or another organization's")))]
pub async fn environment_tags(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(environment_id): AppPath<String>,
) -> ApiResult<Response> {
    let tags = service::tags(&state.store, &tenant, &environment_id).await?;
    let out: Vec<TagOut> = tags.into_iter().map(|name| TagOut { name }).collect();
    Ok(Reply::ok(out).into_response())
}

/// Body of a diff.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffIn {
    /// Default: the organization's Development environment. Must be the API key's own environment.
    pub source_environment_id: Option<String>,
}

/// A workflow or a step as a change names it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceOut {
    /// The workflow's identifier (`workflowId`), or the step's `stepId`.
    pub id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<IsoTime>,
}

fn side(s: Option<Side>) -> Option<ResourceOut> {
    s.map(|s| ResourceOut {
        id: s.id,
        name: s.name,
        updated_at: s.updated_at.map(IsoTime::from),
    })
}

/// One change of a workflow's fields, or of one step (with `stepType` and its positions).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeOut {
    pub resource_type: &'static str,
    /// added, modified, deleted, or moved (a step).
    pub action: &'static str,
    pub source_resource: Option<ResourceOut>,
    pub target_resource: Option<ResourceOut>,
    /// `{previous, new}`: the compared fields in the target and in the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub diffs: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_type: Option<StepType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_index: Option<usize>,
}

impl From<Change> for ChangeOut {
    fn from(c: Change) -> Self {
        Self {
            resource_type: REGULAR,
            action: c.action.as_str(),
            source_resource: side(c.source),
            target_resource: side(c.target),
            diffs: c
                .diffs
                .map(|(previous, new)| json!({"previous": previous, "new": new})),
            step_type: c.step_type,
            previous_index: c.previous_index,
            new_index: c.new_index,
        }
    }
}

/// How many changes of each kind.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct ChangeCountsOut {
    pub added: usize,
    pub modified: usize,
    pub deleted: usize,
    pub unchanged: usize,
}

/// Everything that changes in one workflow.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDiffOut {
    pub resource_type: &'static str,
    pub source_resource: Option<ResourceOut>,
    pub target_resource: Option<ResourceOut>,
    pub changes: Vec<ChangeOut>,
    pub summary: ChangeCountsOut,
}

/// The totals of a diff.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffTotalsOut {
    /// Workflows that change.
    pub total_entities: usize,
    /// Changes of workflows and steps.
    pub total_changes: usize,
    pub has_changes: bool,
}

/// What publishing the source into the target would change.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffOut {
    pub source_environment_id: String,
    pub target_environment_id: String,
    pub resources: Vec<ResourceDiffOut>,
    pub summary: DiffTotalsOut,
}

fn diff_out(source: String, target: String, plan: Plan) -> DiffOut {
    let mut total_changes = 0;
    let resources: Vec<ResourceDiffOut> = plan
        .diffs
        .into_iter()
        .map(|d| {
            let mut summary = ChangeCountsOut::default();
            for c in &d.changes {
                match c.action {
                    DiffAction::Added => summary.added += 1,
                    DiffAction::Modified | DiffAction::Moved => summary.modified += 1,
                    DiffAction::Deleted => summary.deleted += 1,
                }
            }
            total_changes += d.changes.len();
            ResourceDiffOut {
                resource_type: REGULAR,
                source_resource: side(d.source),
                target_resource: side(d.target),
                changes: d.changes.into_iter().map(ChangeOut::from).collect(),
                summary,
            }
        })
        .collect();
    DiffOut {
        source_environment_id: source,
        target_environment_id: target,
        summary: DiffTotalsOut {
            total_entities: resources.len(),
            total_changes,
            has_changes: total_changes > 0,
        },
        resources,
    }
}

/// Compare the workflows of the source environment (default: Development) with the target's.
#[utoipa::path(post, path = "/v2/environments/{targetEnvironmentId}/diff", tag = "Environments", request_body = DiffIn,
    params(("targetEnvironmentId" = String, Path)),
    responses((status = 200, body = DiffOut), (status = 400, description = "Source and target are the same, or no Development environment"),
        (status = 403, description = "The source is not the API key's environment"),
        (status = 404, description = "Unknown environment, or another organization's")))]
pub async fn diff_environment(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(target): AppPath<String>,
    AppJson(body): AppJson<DiffIn>,
) -> ApiResult<Response> {
    let d = service::diff(
        &state.store,
        &tenant,
        &target,
        body.source_environment_id.as_deref(),
    )
    .await?;
    let out = diff_out(d.source.into(), d.target.into(), d.plan);
    Ok(Reply::ok(out).into_response())
}

/// A workflow to publish.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceIn {
    /// REGULAR (the SDKs' value for a workflow).
    pub resource_type: String,
    /// The source workflow's `_id` or identifier.
    pub resource_id: String,
}

/// Body of a publish.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublishIn {
    /// Default: the organization's Development environment. Must be the API key's own environment.
    pub source_environment_id: Option<String>,
    /// Answer what would change, write nothing.
    pub dry_run: Option<bool>,
    /// Only these workflows (at most 100), and nothing deleted; default: the whole environment.
    pub resources: Option<Vec<ResourceIn>>,
}

/// A workflow written (or that would be, in a dry run), by its `_id` in the target.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncedOut {
    pub resource_type: &'static str,
    pub resource_id: String,
    pub resource_name: String,
    /// created, updated or deleted.
    pub action: &'static str,
}

/// A workflow left alone, and why.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedOut {
    pub resource_type: &'static str,
    pub resource_id: String,
    pub resource_name: String,
    pub reason: &'static str,
}

/// The workflows a publish wrote and left alone. `failed` is always empty: a publish is one transaction,
/// applied whole or not at all.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncResultOut {
    pub resource_type: &'static str,
    pub successful: Vec<SyncedOut>,
    #[schema(value_type = Vec<Object>)]
    pub failed: Vec<Value>,
    pub skipped: Vec<SkippedOut>,
    pub total_processed: usize,
}

/// The totals of a publish.
#[derive(Debug, Serialize, ToSchema)]
pub struct PublishTotalsOut {
    pub resources: usize,
    pub successful: usize,
    pub failed: usize,
    pub skipped: usize,
}

/// What a publish did (or, in a dry run, would do).
#[derive(Debug, Serialize, ToSchema)]
pub struct PublishOut {
    pub results: Vec<SyncResultOut>,
    pub summary: PublishTotalsOut,
}

fn publish_out(plan: Plan) -> PublishOut {
    let successful: Vec<SyncedOut> = plan
        .writes
        .iter()
        .map(|w| {
            let (id, _, name) = w.target();
            SyncedOut {
                resource_type: REGULAR,
                resource_id: id.as_str().to_owned(),
                resource_name: name.to_owned(),
                action: match w {
                    Write::Create(_) => "created",
                    Write::Update { .. } => "updated",
                    Write::Delete { .. } => "deleted",
                },
            }
        })
        .collect();
    let skipped: Vec<SkippedOut> = plan
        .skipped
        .into_iter()
        .map(|s| SkippedOut {
            resource_type: REGULAR,
            resource_id: s.id,
            resource_name: s.name,
            reason: match s.reason {
                SkipReason::Unchanged => "No changes",
                SkipReason::HasIssues => "The workflow has steps with issues",
            },
        })
        .collect();
    let total = successful.len() + skipped.len();
    PublishOut {
        summary: PublishTotalsOut {
            resources: total,
            successful: successful.len(),
            failed: 0,
            skipped: skipped.len(),
        },
        results: vec![SyncResultOut {
            resource_type: REGULAR,
            successful,
            failed: Vec::new(),
            skipped,
            total_processed: total,
        }],
    }
}

/// Publish the source environment's workflows (default: Development) into the target, in one transaction:
/// created, updated (keeping the target's `_id`s), and deleted when the source no longer has them.
#[utoipa::path(post, path = "/v2/environments/{targetEnvironmentId}/publish", tag = "Environments", request_body = PublishIn,
    params(("targetEnvironmentId" = String, Path)),
    responses((status = 200, body = PublishOut), (status = 400, description = "Source and target are the same, or no Development environment"),
        (status = 403, description = "The source is not the API key's environment"),
        (status = 404, description = "Unknown environment, or another organization's"),
        (status = 409, description = "The target kept changing; retry")))]
pub async fn publish_environment(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(target): AppPath<String>,
    AppJson(body): AppJson<PublishIn>,
) -> ApiResult<Response> {
    let input = PublishInput {
        target,
        source: body.source_environment_id,
        dry_run: body.dry_run.unwrap_or(false),
        resources: body
            .resources
            .map(|r| r.into_iter().map(|r| r.resource_id).collect()),
    };
    let plan = service::publish(
        &state.store,
        &tenant,
        input,
        crate::api::v2::workflows::workflow_view,
    )
    .await?;
    Ok(Reply::ok(publish_out(plan)).into_response())
}
