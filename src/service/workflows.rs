//! Workflow operations: create, retrieve (by `_id` or trigger identifier), list, replace, patch, delete.
//! Saving a workflow also finds its steps' `issues`: templates the shared renderer cannot parse. The
//! workflow is stored all the same (as Novu does) and reports status `ERROR`.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::OPTIMISTIC_RETRIES;
use crate::domain::workflow::{
    is_identifier, slugify, validate_controls, validate_preferences, ContentIssue, IssueType,
    Severity, Step, StepIssues, StepType, Workflow,
};
use crate::domain::{filters, new_object_id, skip, Tenant, Timestamp, WorkflowRef};
use crate::error::{Error, Result, Validation};
use crate::render::email_blocks::email_body_template;
use crate::render::{RenderError, Renderer};
use crate::store::outbox::Event;
use crate::store::workflows::WorkflowListQuery;
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

pub(crate) fn not_found(id: &str) -> Error {
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
    if let Some(p) = input.preferences.as_ref().filter(|p| !p.is_null()) {
        validate_preferences(&mut v, "preferences", p);
    }
    super::over_cap(
        &mut v,
        "steps",
        input.steps.len(),
        super::limits::WORKFLOW_STEPS,
    );
    if let Some(tags) = &input.tags {
        super::over_cap(&mut v, "tags", tags.len(), super::limits::WORKFLOW_TAGS);
    }
    let mut seen = HashSet::new();
    let mut steps = Vec::with_capacity(input.steps.len());
    for (i, s) in input.steps.iter().enumerate() {
        let field = format!("steps[{i}]");
        steps.extend(build_step(&mut v, &mut seen, &field, s, previous));
    }
    v.finish()?;
    Ok((workflow_id, severity, steps))
}

/// Validates step `s` (at `field`, its `stepId` not among `seen`) and builds it, keeping its `_id` when it
/// exists in `previous`; `None` when its type is unknown.
fn build_step(
    v: &mut Validation,
    seen: &mut HashSet<String>,
    field: &str,
    s: &StepInput,
    previous: Option<&Workflow>,
) -> Option<Step> {
    let Some(step_type) = StepType::parse(&s.step_type) else {
        v.add(&format!("{field}.type"), "type must be one of in_app, email, sms, chat, push, delay, digest, throttle, custom, http_request", s.step_type.as_str());
        return None;
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
    validate_controls(v, &format!("{field}.controlValues"), step_type, &controls);
    let filters = match &s.filters {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let at = format!("{field}.filters");
            if super::over_cap(v, &at, items.len(), super::limits::FILTERS) {
                Vec::new()
            } else {
                filters::normalize(v, &at, items)
            }
        }
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
    Some(Step {
        id: existing.map(|x| x.id.clone()).unwrap_or_else(new_object_id),
        step_id,
        name,
        step_type,
        issues: step_issues(step_type, &controls),
        control_values: controls,
        filters,
        should_stop_on_fail: s.should_stop_on_fail.unwrap_or(false),
    })
}

/// The issues of a step's controls: every string that the renderer used by delivery and preview cannot
/// parse, keyed by its control path (`body`, `primaryAction.label`, `headers.0`), and what keeps the step
/// condition (`skip`, JSON Logic: [`skip::check`]) from being evaluated. An email body given as a block
/// document is checked as the HTML template delivery makes of it.
pub fn step_issues(step_type: StepType, controls: &Map<String, Value>) -> StepIssues {
    let renderer = Renderer::shared();
    let mut issues = StepIssues::default();
    for (key, value) in controls {
        if key == "skip" {
            skip_issues(&mut issues, value);
            continue;
        }
        if step_type == StepType::Email && key == "body" {
            if let Some(body) = value.as_str() {
                match email_body_template(body) {
                    Ok(template) => check_string(renderer, &mut issues, key, &template),
                    Err(e) => issues
                        .controls
                        .entry(key.clone())
                        .or_default()
                        .push(ContentIssue {
                            issue_type: IssueType::MissingValue,
                            variable_name: None,
                            message: e.message,
                        }),
                }
                continue;
            }
        }
        check_value(renderer, &mut issues, key.clone(), value);
    }
    if step_type == StepType::InApp {
        missing_action_labels(controls, &mut issues);
    }
    issues
}

/// The issues of a step condition (`controlValues.skip`), under the key `skip`.
fn skip_issues(issues: &mut StepIssues, skip: &Value) {
    for i in skip::check(skip) {
        issues
            .controls
            .entry("skip".to_owned())
            .or_default()
            .push(ContentIssue {
                issue_type: if i.missing_value {
                    IssueType::MissingValue
                } else {
                    IssueType::IllegalVariableInControlValue
                },
                variable_name: (!i.path.is_empty()).then_some(i.path),
                message: i.message,
            });
    }
}

/// An in-app action without a `label`: Novu's control schema requires one (a button needs text), so it is a
/// `MISSING_VALUE` issue on `<action>.label`.
fn missing_action_labels(controls: &Map<String, Value>, issues: &mut StepIssues) {
    for key in ["primaryAction", "secondaryAction"] {
        let Some(action) = controls.get(key).and_then(Value::as_object) else {
            continue;
        };
        if action.get("label").is_none_or(Value::is_null) {
            issues
                .controls
                .entry(format!("{key}.label"))
                .or_default()
                .push(ContentIssue {
                    issue_type: IssueType::MissingValue,
                    variable_name: None,
                    message: format!("`{key}` has no `label`: a button needs text"),
                });
        }
    }
}

fn check_value(renderer: &Renderer, issues: &mut StepIssues, path: String, value: &Value) {
    match value {
        Value::String(s) => check_string(renderer, issues, &path, s),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_value(renderer, issues, format!("{path}.{i}"), item);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                check_value(renderer, issues, format!("{path}.{k}"), item);
            }
        }
        _ => {}
    }
}

fn check_string(renderer: &Renderer, issues: &mut StepIssues, path: &str, template: &str) {
    if let Err(e) = renderer.check(template) {
        issues
            .controls
            .entry(path.to_owned())
            .or_default()
            .push(content_issue(&e));
    }
}

fn content_issue(e: &RenderError) -> ContentIssue {
    ContentIssue {
        issue_type: IssueType::IllegalVariableInControlValue,
        variable_name: e.snippet().map(|s| s.trim().to_owned()),
        message: e.message.clone(),
    }
}

/// How a workflow is shown on the wire (`GET /v2/workflows/{id}`): what its webhook events carry. The API
/// passes its rendering in, as a service does not know the wire.
pub type View = fn(&Workflow) -> Value;

/// The webhook event `kind` about `w` (`workflow.created`, …): `{object}`, and the workflow as it was before
/// (`previousObject`) for a change.
pub fn event(kind: &'static str, w: &Workflow, previous: Option<&Workflow>, view: View) -> Event {
    let mut data = serde_json::json!({ "object": view(w) });
    if let Some(p) = previous {
        data["previousObject"] = view(p);
    }
    Event {
        environment_id: w.environment_id.clone(),
        organization_id: w.organization_id.clone(),
        kind,
        data,
    }
}

pub async fn create(
    store: &Store,
    tenant: &Tenant,
    input: WorkflowInput,
    view: View,
) -> Result<Workflow> {
    let (workflow_id, severity, steps) = build(&input, None)?;
    let now = Timestamp::now();
    let w = Workflow {
        id: WorkflowRef::new(),
        organization_id: tenant.organization_id.clone(),
        environment_id: tenant.environment_id.clone(),
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
    store
        .insert_workflow(&w, &[event("workflow.created", &w, None, view)])
        .await
        .map_err(|e| workflow_id_taken(e, &w.workflow_id))?;
    Ok(w)
}

/// A write refused because another workflow of the environment has `workflow_id`, as the API answers it.
fn workflow_id_taken(e: Error, workflow_id: &str) -> Error {
    match e {
        Error::Duplicate => Error::Conflict(format!(
            "Workflow with workflowId \"{workflow_id}\" already exists"
        )),
        e => e,
    }
}

pub async fn get(store: &Store, tenant: &Tenant, id: &str) -> Result<Workflow> {
    store
        .get_workflow(&tenant.environment_id, id)
        .await?
        .ok_or_else(|| not_found(id))
}

/// A page of workflows (offset pagination, as Novu lists them) and how many match the filters.
pub async fn list(
    store: &Store,
    tenant: &Tenant,
    query: &WorkflowListQuery,
) -> Result<(Vec<Workflow>, i64)> {
    store.list_workflows(&tenant.environment_id, query).await
}

/// Replaces the workflow's definition; steps keep their `_id` when matched by `_id` or `stepId`.
pub async fn update(
    store: &Store,
    tenant: &Tenant,
    id: &str,
    input: WorkflowInput,
    view: View,
) -> Result<Workflow> {
    change(store, tenant, id, view, |old| {
        let (workflow_id, severity, steps) = build(&input, Some(&old))?;
        Ok(Workflow {
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
            ..old
        })
    })
    .await
}

/// A partial update (`PATCH`): `None` leaves a field unchanged; for `description` and `payload_schema`,
/// `Some(None)` clears it.
#[derive(Debug, Clone, Default)]
pub struct WorkflowPatch {
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub tags: Option<Vec<String>>,
    pub active: Option<bool>,
    pub payload_schema: Option<Option<Value>>,
    pub validate_payload: Option<bool>,
}

/// Changes the given fields of a workflow; steps (and their issues) are untouched.
pub async fn patch(
    store: &Store,
    tenant: &Tenant,
    id: &str,
    patch: WorkflowPatch,
    view: View,
) -> Result<Workflow> {
    let mut v = Validation::new();
    if let Some(name) = &patch.name {
        if name.trim().is_empty() {
            v.add("name", "name must not be empty", name.as_str());
        }
    }
    if let Some(Some(p)) = &patch.payload_schema {
        if !p.is_object() {
            v.add(
                "payloadSchema",
                "payloadSchema must be a JSON Schema object",
                p.clone(),
            );
        }
    }
    if let Some(tags) = &patch.tags {
        super::over_cap(&mut v, "tags", tags.len(), super::limits::WORKFLOW_TAGS);
    }
    v.finish()?;
    change(store, tenant, id, view, |old| {
        let p = patch.clone();
        Ok(Workflow {
            name: p
                .name
                .map(|n| n.trim().to_owned())
                .unwrap_or(old.name.clone()),
            description: p.description.unwrap_or(old.description.clone()),
            tags: p.tags.unwrap_or(old.tags.clone()),
            active: p.active.unwrap_or(old.active),
            payload_schema: p.payload_schema.unwrap_or(old.payload_schema.clone()),
            validate_payload: p.validate_payload.unwrap_or(old.validate_payload),
            ..old
        })
    })
    .await
}

/// Reads the workflow, applies `edit` and writes the result if nobody changed it meanwhile (its
/// `version`), retrying a few times; the new version and `updatedAt` are set here.
async fn change(
    store: &Store,
    tenant: &Tenant,
    id: &str,
    view: View,
    edit: impl Fn(Workflow) -> Result<Workflow>,
) -> Result<Workflow> {
    for _ in 0..OPTIMISTIC_RETRIES {
        let old = get(store, tenant, id).await?;
        let expected = old.version;
        let updated_at = Timestamp::now().max(Timestamp(old.updated_at.0 + 1));
        let w = Workflow {
            version: expected + 1,
            updated_at,
            ..edit(old.clone())?
        };
        let events = [event("workflow.updated", &w, Some(&old), view)];
        if store
            .update_workflow(&w, expected, &events)
            .await
            .map_err(|e| workflow_id_taken(e, &w.workflow_id))?
        {
            return Ok(w);
        }
    }
    Err(Error::Conflict(format!(
        "Workflow {id} is being changed concurrently; retry the request"
    )))
}

/// Step `step_id` (`_id` or `stepId`) of workflow `id`: the workflow, the step's position, and the JSON
/// Schema of the variables the step may use (the preview's).
pub async fn get_step(
    store: &Store,
    tenant: &Tenant,
    id: &str,
    step_id: &str,
) -> Result<(Workflow, usize, Value)> {
    let w = get(store, tenant, id).await?;
    let index = w
        .steps
        .iter()
        .position(|s| s.id == step_id || s.step_id == step_id)
        .ok_or_else(|| Error::NotFound(format!("Step not found: {step_id} in workflow {id}")))?;
    let variables = super::preview::step_variables(&w, index);
    Ok((w, index, variables))
}

pub async fn delete(store: &Store, tenant: &Tenant, id: &str, view: View) -> Result<()> {
    let w = get(store, tenant, id).await?;
    let events = [event("workflow.deleted", &w, None, view)];
    if store
        .delete_workflow(&tenant.environment_id, &w.id, &events)
        .await?
    {
        Ok(())
    } else {
        Err(not_found(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn issues_name_each_control_the_renderer_cannot_parse() {
        let controls = json!({
            "body": "Hello {{ payload.name ",
            "subject": "Fine {{ payload.name }}",
            "primaryAction": {"label": "{{ x | nosuchfilter }}"},
            "data": {"list": ["ok", "{% if %}"]},
            "amount": 5
        });
        let issues = step_issues(StepType::InApp, controls.as_object().unwrap());
        let keys: Vec<&str> = issues.controls.keys().map(String::as_str).collect();
        assert_eq!(keys, ["body", "data.list.1", "primaryAction.label"]);
        let body = &issues.controls["body"][0];
        assert_eq!(body.issue_type, IssueType::IllegalVariableInControlValue);
        assert!(body
            .variable_name
            .as_deref()
            .unwrap()
            .contains("payload.name"));
        let ok = json!({"body": "Hi {{ payload.name | upcase }}"});
        assert!(step_issues(StepType::Sms, ok.as_object().unwrap()).is_empty());
    }

    #[test]
    fn an_action_without_a_label_is_an_issue() {
        let c = json!({"body": "b", "primaryAction": {"redirect": {"url": "https://x.test"}},
                       "secondaryAction": {"label": "Later"}});
        let issues = step_issues(StepType::InApp, c.as_object().unwrap());
        let keys: Vec<&String> = issues.controls.keys().collect();
        assert_eq!(keys, ["primaryAction.label"]);
        assert_eq!(
            issues.controls["primaryAction.label"][0].issue_type,
            IssueType::MissingValue
        );
        let null = json!({"body": "b", "primaryAction": {"label": null}, "secondaryAction": null});
        let keys: Vec<String> = step_issues(StepType::InApp, null.as_object().unwrap())
            .controls
            .into_keys()
            .collect();
        assert_eq!(keys, ["primaryAction.label"]);
    }

    #[test]
    fn an_email_body_is_checked_as_delivery_reads_it() {
        // The Python SDK's default editorType with an HTML body: rendered as HTML, no issue.
        let blocks =
            json!({"editorType": "block", "body": "<p>{{ payload.x }}</p>", "subject": "s"});
        assert!(step_issues(StepType::Email, blocks.as_object().unwrap()).is_empty());
        let broken = json!({"editorType": "block", "body": "<p>{{ payload.x </p>", "subject": "s"});
        let issues = step_issues(StepType::Email, broken.as_object().unwrap());
        assert_eq!(
            issues.controls["body"][0].issue_type,
            IssueType::IllegalVariableInControlValue
        );
        let bad_doc = json!({"body": r#"{"type": "doc", "content": [{"type": "variable", "attrs": {"id": "a }} {{ b"}}]}"#});
        assert_eq!(
            step_issues(StepType::Email, bad_doc.as_object().unwrap()).controls["body"][0]
                .issue_type,
            IssueType::MissingValue
        );
        let html = json!({"editorType": "html", "body": "<p>{{ payload.x }}</p>", "subject": "s"});
        assert!(step_issues(StepType::Email, html.as_object().unwrap()).is_empty());
    }
}
