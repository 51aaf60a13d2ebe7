//! Promotion, how a team ships workflows from Development to Production: the environment's tags, the diff
//! between two environments of one organization, publishing (every workflow at once, in one transaction)
//! and syncing one workflow. The matching and the writes are [`crate::domain::promotion`]'s.
//!
//! Who may promote: an API key is scoped to its environment, and promotes only from it (it is the source;
//! Novu's sync takes the caller's environment as the source the same way) into any other environment of its
//! organization. An environment of another organization is a 404; a source that is not the key's own
//! environment is a 403.

use super::{limits, over_cap, pause_after_lost_write, workflows, OPTIMISTIC_RETRIES};
use crate::domain::promotion::{self, Plan, Scope, SkipReason, Write};
use crate::domain::workflow::Workflow;
use crate::domain::{EnvironmentId, Tenant, Timestamp, WorkflowRef};
use crate::error::{Error, Result, Validation};
use crate::store::outbox::Event;
use crate::store::tenants::EnvironmentRow;
use crate::store::Store;

/// The environment a diff or a publish copies from when the request names none (as Novu does).
pub const DEFAULT_SOURCE: &str = "Development";

fn unknown_environment(id: &str) -> Error {
    Error::NotFound(format!("Environment {id} not found"))
}

/// The environments of the caller's organization.
async fn organization(store: &Store, tenant: &Tenant) -> Result<Vec<EnvironmentRow>> {
    store.list_environments(Some(&tenant.organization_id)).await
}

/// Environment `id` (its `_id`, or its public identifier when `by_identifier`) among `envs`; 404 otherwise.
fn find<'a>(
    envs: &'a [EnvironmentRow],
    id: &str,
    by_identifier: bool,
) -> Result<&'a EnvironmentRow> {
    envs.iter()
        .find(|e| e.id.as_str() == id || (by_identifier && e.identifier == id))
        .ok_or_else(|| unknown_environment(id))
}

/// The distinct tags of the workflows of environment `environment` (`_id` or public identifier) of the
/// caller's organization, sorted.
pub async fn tags(store: &Store, tenant: &Tenant, environment: &str) -> Result<Vec<String>> {
    let envs = organization(store, tenant).await?;
    let env = find(&envs, environment, true)?;
    store.workflow_tags(&env.id).await
}

/// The source and the target of a diff or a publish, checked: both of the caller's organization (404),
/// different (400), and the source is the key's own environment (403).
async fn pair(
    store: &Store,
    tenant: &Tenant,
    target: &str,
    source: Option<&str>,
) -> Result<(EnvironmentId, EnvironmentId)> {
    let envs = organization(store, tenant).await?;
    let target = find(&envs, target, false)?.id.clone();
    let source = match source {
        Some(s) => find(&envs, s, false)?.id.clone(),
        None => envs
            .iter()
            .find(|e| e.name.eq_ignore_ascii_case(DEFAULT_SOURCE))
            .map(|e| e.id.clone())
            .ok_or_else(|| {
                Error::bad_request(
                    "Development environment not found: name the source with sourceEnvironmentId",
                )
            })?,
    };
    if source == target {
        return Err(Error::bad_request(
            "Source and target environments cannot be the same",
        ));
    }
    if source != tenant.environment_id {
        return Err(Error::Forbidden(format!(
            "This API key is scoped to a single environment ({}): it promotes only from it, not from {source}; \
             use that environment's API key",
            tenant.environment_id
        )));
    }
    Ok((source, target))
}

/// Every workflow of `env`; 400 past [`limits::PROMOTED_WORKFLOWS`].
async fn workflows_of(store: &Store, env: &EnvironmentId) -> Result<Vec<Workflow>> {
    let cap = limits::PROMOTED_WORKFLOWS;
    let all = store.all_workflows(env, cap).await?;
    if all.len() > cap {
        return Err(Error::bad_request(format!(
            "Environment {env} has more than {cap} workflows: publish them in parts with `resources`"
        )));
    }
    Ok(all)
}

/// What `target` would need to match `source` (read now).
async fn plan(
    store: &Store,
    tenant: &Tenant,
    (source, target): (&EnvironmentId, &EnvironmentId),
    scope: &Scope,
) -> Result<(Plan, Vec<Workflow>)> {
    let (from, to) = tokio::try_join!(workflows_of(store, source), workflows_of(store, target))?;
    let into = (tenant.organization_id.clone(), target.clone());
    let plan = promotion::plan(&from, &to, &into, scope, Timestamp::now());
    Ok((plan, to))
}

/// The webhook events of a promotion's writes: `workflow.published` for each workflow created or updated
/// in the target (with the target's copy before, if it had one), `workflow.deleted` for each deleted.
fn published(writes: &[Write], before: &[Workflow], view: workflows::View) -> Vec<Event> {
    let old = |id: &WorkflowRef| before.iter().find(|w| &w.id == id);
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Create(w) => Some(workflows::event("workflow.published", w, None, view)),
            Write::Update { workflow, .. } => Some(workflows::event(
                "workflow.published",
                workflow,
                old(&workflow.id),
                view,
            )),
            Write::Delete { id, .. } => {
                old(id).map(|w| workflows::event("workflow.deleted", w, None, view))
            }
        })
        .collect()
}

/// Plans and applies in one transaction, planning again when a target workflow changed in between (another
/// publish, or a write through the API).
async fn apply(
    store: &Store,
    tenant: &Tenant,
    envs: (&EnvironmentId, &EnvironmentId),
    scope: &Scope,
    view: workflows::View,
) -> Result<Plan> {
    for attempt in 1..=OPTIMISTIC_RETRIES {
        let (plan, before) = plan(store, tenant, envs, scope).await?;
        let events = published(&plan.writes, &before, view);
        if plan.writes.is_empty() || store.apply_promotion(envs.1, &plan.writes, &events).await? {
            return Ok(plan);
        }
        pause_after_lost_write(attempt).await;
    }
    Err(Error::Conflict(format!(
        "Environment {} is being changed concurrently; retry the request",
        envs.1
    )))
}

/// A diff: the two environments and what publishing would change.
#[derive(Debug, Clone)]
pub struct Diff {
    pub source: EnvironmentId,
    pub target: EnvironmentId,
    pub plan: Plan,
}

/// What publishing every workflow of `source` (default: Development) into `target` would change.
pub async fn diff(
    store: &Store,
    tenant: &Tenant,
    target: &str,
    source: Option<&str>,
) -> Result<Diff> {
    let (source, target) = pair(store, tenant, target, source).await?;
    let scope = Scope {
        only: None,
        deletes: true,
    };
    let (plan, _) = plan(store, tenant, (&source, &target), &scope).await?;
    Ok(Diff {
        source,
        target,
        plan,
    })
}

/// A publish request.
#[derive(Debug, Clone, Default)]
pub struct PublishInput {
    pub target: String,
    pub source: Option<String>,
    /// Answer what would change, write nothing.
    pub dry_run: bool,
    /// Only these source workflows (`_id` or identifier), and nothing deleted; `None`: the whole environment.
    pub resources: Option<Vec<String>>,
}

/// Makes `target`'s workflows match `source`'s: creates, updates and (for a whole environment) deletes, in
/// one transaction; the target keeps its `_id`s. A dry run only plans.
pub async fn publish(
    store: &Store,
    tenant: &Tenant,
    input: PublishInput,
    view: workflows::View,
) -> Result<Plan> {
    if let Some(resources) = &input.resources {
        let mut v = Validation::new();
        over_cap(
            &mut v,
            "resources",
            resources.len(),
            limits::PUBLISH_RESOURCES,
        );
        v.finish()?;
    }
    let (source, target) = pair(store, tenant, &input.target, input.source.as_deref()).await?;
    let scope = Scope {
        deletes: input.resources.is_none(),
        only: input.resources,
    };
    if input.dry_run {
        Ok(plan(store, tenant, (&source, &target), &scope).await?.0)
    } else {
        apply(store, tenant, (&source, &target), &scope, view).await
    }
}

/// Copies workflow `workflow_id` (`_id` or identifier) of the caller's environment into `target`, another
/// environment of its organization (created there, or updated keeping the target's `_id`s); the target's
/// copy.
pub async fn sync(
    store: &Store,
    tenant: &Tenant,
    workflow_id: &str,
    target: &str,
    view: workflows::View,
) -> Result<Workflow> {
    let envs = organization(store, tenant).await?;
    let target = find(&envs, target, false)?.id.clone();
    if target == tenant.environment_id {
        return Err(Error::bad_request(
            "Cannot sync workflow to the same environment",
        ));
    }
    let w = workflows::get(store, tenant, workflow_id).await?;
    let scope = Scope {
        only: Some(vec![w.id.as_str().to_owned()]),
        deletes: false,
    };
    let plan = apply(
        store,
        tenant,
        (&tenant.environment_id, &target),
        &scope,
        view,
    )
    .await?;
    if plan
        .skipped
        .iter()
        .any(|s| s.reason == SkipReason::HasIssues)
    {
        return Err(Error::bad_request(format!(
            "Workflow {workflow_id} has steps with issues: fix them before syncing it"
        )));
    }
    store
        .get_workflow(&target, &w.workflow_id)
        .await?
        .ok_or_else(|| workflows::not_found(workflow_id))
}
