//! Workflow operations: create, retrieve (by `_id` or trigger identifier), list, replace, delete.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::OPTIMISTIC_RETRIES;
use crate::domain::workflow::{
    is_identifier, slugify, validate_controls, Severity, Step, StepType, Workflow,
};
use crate::domain::{new_object_id, Tenant, Timestamp};
use crate::error::{Error, Result, Validation};
use crate::store::page::{Page, PageRequest};
use crate::store::Store;

/// A step as given in a create or update body.
#[derive(Debug, Clone, Default)]
pub struct StepInput {
    /// `_id` of an existing step (kept on update).
    pub id: Option<String>,
    pub step_id: Option<String>,
    pub name: Option<String>,
    pub step_type: String,
    pub control_values: Option<Value>,
    pub filters: Option<Value>,
    pub should_stop_on_fail: Option<bool>,
}

/// A create (`POST`) or full replacement (`PUT`) of a workflow.
#[derive(Debug, Clone, Default)]
pub struct WorkflowInput {
    pub name: String,
    pub workflow_id: Option<String>,
    pub description: Option<String>,
    pub tags: Option<Vec<String>>,
    pub active: Option<bool>,
    pub critical: Option<bool>,
    pub severity: Option<String>,
    pub preferences: Option<Value>,
    pub payload_schema: Option<Value>,
    pub validate_payload: Option<bool>,
    pub steps: Vec<StepInput>,
}

fn not_found(id: &str) -> Error {
    Error::NotFound(format!("Workflow not found: {id}"))
}

/// Validates the input and builds the steps, keeping the `_id` of steps that already exist in `previous`.
fn build(
    input: &WorkflowInput,
    previous: Option<&Workflow>,
) -> Result<(String, Severity, Vec<Step>)> {
    let mut v = Validation::new();
    if input.name.trim().is_empty() {
        v.add("name", "name must not be empty", input.name.as_str());
    }
    let workflow_id = input
        .workflow_id
        .clone()
        .unwrap_or_else(|| slugify(&input.name));
    if !is_identifier(&workflow_id) {
        v.add(
            "workflowId",
            "workflowId must be 1 to 100 of letters, digits, '-', '_' and '.'",
            workflow_id.as_str(),
        );
    }
    let severity = match input.severity.as_deref() {
        None => Severity::None,
        Some(s) => Severity::parse(s).unwrap_or_else(|| {
            v.add("severity", "severity must be high, medium, low or none", s);
            Severity::None
        }),
    };
    if let Some(p) = &input.payload_schema {
        if !p.is_object() && !p.is_null() {
            v.add(
                "payloadSchema",
                "payloadSchema must be a JSON Schema object",
                p.clone(),
            );
        }
    }
    if let Some(p) = &input.preferences {
        if !p.is_object() && !p.is_null() {
            v.add("preferences", "preferences must be an object", p.clone());
        }
    }
    if input.steps.len() > 50 {
        v.add("steps", "a workflow may have at most 50 steps", Value::Null);
    }
    let mut seen = HashSet::new();
    let mut steps = Vec::with_capacity(input.steps.len());
    for (i, s) in input.steps.iter().enumerate() {
        let field = format!("steps[{i}]");
        let Some(step_type) = StepType::parse(&s.step_type) else {
            v.add(&format!("{field}.type"), "type must be one of in_app, email, sms, chat, push, delay, digest, throttle, custom, http_request", s.step_type.as_str());
            continue;
        };
        let name = s
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| step_type.as_str().to_owned());
        let step_id = s.step_id.clone().unwrap_or_else(|| slugify(&name));
        if !is_identifier(&step_id) {
            v.add(
                &format!("{field}.stepId"),
                "stepId must be 1 to 100 of letters, digits, '-', '_' and '.'",
                step_id.as_str(),
            );
        } else if !seen.insert(step_id.clone()) {
            v.add(
                &format!("{field}.stepId"),
                format!("stepId \"{step_id}\" is used by another step"),
                step_id.as_str(),
            );
        }
        let controls: Map<String, Value> = match &s.control_values {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                v.add(
                    &format!("{field}.controlValues"),
                    "controlValues must be an object",
                    other.clone(),
                );
                Map::new()
            }
        };
        validate_controls(
            &mut v,
            &format!("{field}.controlValues"),
            step_type,
            &controls,
        );
        let filters = match &s.filters {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.iter().all(Value::is_object) => items.clone(),
            Some(other) => {
                v.add(
                    &format!("{field}.filters"),
                    "filters must be an array of step filters",
                    other.clone(),
                );
                Vec::new()
            }
        };
        let existing = previous.and_then(|w| {
            s.id.as_deref()
                .and_then(|id| w.steps.iter().find(|x| x.id == id))
                .or_else(|| w.step(&step_id))
        });
        steps.push(Step {
            id: existing.map(|x| x.id.clone()).unwrap_or_else(new_object_id),
            step_id,
            name,
            step_type,
            control_values: controls,
            filters,
            should_stop_on_fail: s.should_stop_on_fail.unwrap_or(false),
        });
    }
    v.finish()?;
    Ok((workflow_id, severity, steps))
}

pub async fn create(store: &Store, tenant: &Tenant, input: WorkflowInput) -> Result<Workflow> {
    let (workflow_id, severity, steps) = build(&input, None)?;
    let now = Timestamp::now();
    let w = Workflow {
        id: new_object_id(),
        organization_id: tenant.organization_id.0.clone(),
        environment_id: tenant.environment_id.0.clone(),
        workflow_id,
        name: input.name.trim().to_owned(),
        description: input.description,
        tags: input.tags.unwrap_or_default(),
        active: input.active.unwrap_or(true),
        critical: input.critical.unwrap_or(false),
        severity,
        preferences: input.preferences.filter(|p| !p.is_null()),
        payload_schema: input.payload_schema.filter(|p| !p.is_null()),
        validate_payload: input.validate_payload.unwrap_or(false),
        steps,
        version: 0,
        created_at: now,
        updated_at: now,
    };
    store.insert_workflow(&w).await?;
    Ok(w)
}

pub async fn get(store: &Store, tenant: &Tenant, id: &str) -> Result<Workflow> {
    store
        .get_workflow(&tenant.environment_id, id)
        .await?
        .ok_or_else(|| not_found(id))
}

pub async fn list(store: &Store, tenant: &Tenant, page: &PageRequest) -> Result<Page<Workflow>> {
    store.list_workflows(&tenant.environment_id, page).await
}

/// Replaces the workflow's definition; steps keep their `_id` when matched by `_id` or `stepId`.
pub async fn update(
    store: &Store,
    tenant: &Tenant,
    id: &str,
    input: WorkflowInput,
) -> Result<Workflow> {
    for _ in 0..OPTIMISTIC_RETRIES {
        let old = get(store, tenant, id).await?;
        let (workflow_id, severity, steps) = build(&input, Some(&old))?;
        let expected = old.version;
        let w = Workflow {
            workflow_id: input
                .workflow_id
                .as_ref()
                .map(|_| workflow_id)
                .unwrap_or_else(|| old.workflow_id.clone()),
            name: input.name.trim().to_owned(),
            description: input.description.clone().or(old.description.clone()),
            tags: input.tags.clone().unwrap_or(old.tags.clone()),
            active: input.active.unwrap_or(old.active),
            critical: input.critical.unwrap_or(old.critical),
            severity: if input.severity.is_some() {
                severity
            } else {
                old.severity
            },
            preferences: input
                .preferences
                .clone()
                .or(old.preferences.clone())
                .filter(|p| !p.is_null()),
            payload_schema: input
                .payload_schema
                .clone()
                .or(old.payload_schema.clone())
                .filter(|p| !p.is_null()),
            validate_payload: input.validate_payload.unwrap_or(old.validate_payload),
            steps,
            version: expected + 1,
            updated_at: Timestamp::now().max(Timestamp(old.updated_at.0 + 1)),
            ..old
        };
        if store.update_workflow(&w, expected).await? {
            return Ok(w);
        }
    }
    Err(Error::Conflict(format!(
        "Workflow {id} is being changed concurrently; retry the request"
    )))
}

pub async fn delete(store: &Store, tenant: &Tenant, id: &str) -> Result<()> {
    let w = get(store, tenant, id).await?;
    if store.delete_workflow(&tenant.environment_id, &w.id).await? {
        Ok(())
    } else {
        Err(not_found(id))
    }
}
