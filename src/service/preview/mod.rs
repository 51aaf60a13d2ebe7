//! Step preview (`POST /v2/workflows/{workflowId}/step/{stepId}/preview`): renders one step's
//! controls with the shared Liquid [`Renderer`] over an example of the variables the step reads,
//! and reports every template problem as `result.error {title, message, hint}` instead of failing.
//!
//! - The example (`previewPayloadExample`) comes from the variables the step's templates use
//!   (`payload.user.name` → `{"payload": {"user": {"name": "name"}}}`, loops → arrays), or from the
//!   workflow's `payloadSchema`, merged with the caller's `previewPayload` (what the caller sends
//!   wins at every depth; placeholders fill only what it left out), plus an example subscriber,
//!   `steps` examples for earlier digest steps, the caller's `context`, and `env`: the environment's `name` and `type` (`dev` for "Development",
//!   else `prod`) with the caller's `env` merged over them.
//! - `schema` is the JSON Schema of the variables the step may use.
//! - `http_request` steps also get the `svc-signature` value the engine would send, computed by the
//!   same [`svc_signature`] over the same [`request_body`].
//!
//! Nothing is saved: `controlValues` in the request replace the stored controls for this call only.

use std::borrow::Cow;

use serde_json::{json, Map, Value};

use crate::crypto::svc_signature;
use crate::domain::subscriber::SubscriberProfile;
use crate::domain::workflow::{StepType, Workflow, TIME_UNITS};
use crate::domain::{Tenant, Timestamp};
use crate::engine::steps::{request_body, template_controls};
use crate::error::{Error, Result, Validation};
use crate::render::email_blocks::{email_body_template, BlockError};
use crate::render::inputs::{
    environment_values, template_variables, workflow_values, TemplateInputs,
};
use crate::render::{
    example_from_variables, sanitization_disabled, sanitize_html, sanitize_in_app, variables_used,
    RenderError, Renderer, VarUse,
};
use crate::store::Store;

mod example;
mod rendering;
mod schema;

use example::*;
use rendering::*;
use schema::*;

#[cfg(test)]
pub(crate) use example::example_subscriber;
#[cfg(test)]
pub(crate) use schema::subscriber_schema;

/// The request body, as received (validated here).
#[derive(Debug, Clone, Default)]
pub struct PreviewInput {
    pub control_values: Option<Value>,
    pub preview_payload: Option<Value>,
}

/// The preview of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// `{type, preview, error?}`.
    pub result: Value,
    pub preview_payload_example: Value,
    pub schema: Option<Value>,
    /// `t=<ms>,v1=<hex>` for `http_request` steps (the environment has a key).
    pub signature: Option<String>,
}

/// A problem the user can fix, shown as `result.error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewError {
    pub title: String,
    pub message: String,
    pub hint: String,
}

impl PreviewError {
    fn to_json(&self) -> Value {
        json!({"title": self.title, "message": self.message, "hint": self.hint})
    }
}

impl From<RenderError> for PreviewError {
    fn from(e: RenderError) -> Self {
        Self {
            title: e.title().to_owned(),
            hint: e.hint().to_owned(),
            message: e.message,
        }
    }
}

impl From<BlockError> for PreviewError {
    fn from(e: BlockError) -> Self {
        Self {
            title: "Invalid email body".to_owned(),
            message: e.message,
            hint: e.hint,
        }
    }
}

/// The subscriber fields of a preview payload (spec §2.8: `_id` through `timezone`): the profile's and these.
const PREVIEW_SUBSCRIBER_RECORD_FIELDS: [&str; 6] = [
    "_id",
    "channels",
    "topics",
    "isOnline",
    "lastOnlineAt",
    "__v",
];

fn is_preview_subscriber_field(k: &str) -> bool {
    SubscriberProfile::FIELDS.contains(&k) || PREVIEW_SUBSCRIBER_RECORD_FIELDS.contains(&k)
}

/// The roots a template may read.
const ROOTS: [&str; 6] = ["payload", "subscriber", "steps", "context", "env", "actor"];

/// Previews step `step_id` (`_id` or `stepId`) of workflow `workflow_id` (`_id` or identifier).
pub async fn preview(
    store: &Store,
    tenant: &Tenant,
    workflow_id: &str,
    step_id: &str,
    input: PreviewInput,
) -> Result<Preview> {
    let (controls, caller) = validate(input)?;
    let (workflow, environment) = tokio::try_join!(
        store.get_workflow(&tenant.environment_id, workflow_id),
        store.environment_name(&tenant.environment_id),
    )?;
    let workflow =
        workflow.ok_or_else(|| Error::NotFound(format!("Workflow not found: {workflow_id}")))?;
    let index = workflow
        .steps
        .iter()
        .position(|s| s.id == step_id || s.step_id == step_id)
        .ok_or_else(|| {
            Error::NotFound(format!(
                "Step not found: {step_id} in workflow {workflow_id}"
            ))
        })?;
    let key = if workflow.steps[index].step_type == StepType::HttpRequest {
        store.first_api_key(&tenant.environment_id).await?
    } else {
        None
    };
    // An actor given as a subscriber id is looked up, as delivery does.
    let actor = match caller.get("actor").filter(|a| !a.is_null()) {
        None => None,
        Some(a) => Some(crate::engine::actor_variables(store, &tenant.environment_id, a).await?),
    };
    Ok(build(&Subject {
        workflow: &workflow,
        index,
        controls: controls.as_ref(),
        caller: &caller,
        actor: actor.as_ref(),
        environment: environment.as_deref(),
        key: key.as_deref(),
        now: Timestamp::now(),
    }))
}

/// The JSON Schema of the variables step `index` of `workflow` may use: a preview's `schema`, over the
/// step's stored controls and no caller payload.
pub fn step_variables(workflow: &Workflow, index: usize) -> Value {
    build(&Subject {
        workflow,
        index,
        controls: None,
        caller: &Map::new(),
        actor: None,
        environment: None,
        key: None,
        now: Timestamp::now(),
    })
    .schema
    .unwrap_or_else(|| json!({}))
}

/// 422 for a body that is not the documented shape.
/// Replacement controls (if given) and the caller's preview payload.
type Validated = (Option<Map<String, Value>>, Map<String, Value>);

fn validate(input: PreviewInput) -> Result<Validated> {
    let mut v = Validation::new();
    let controls = match input.control_values {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(other) => {
            v.add("controlValues", "controlValues must be an object", other);
            None
        }
    };
    let caller = match input.preview_payload {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(other) => {
            v.add("previewPayload", "previewPayload must be an object", other);
            Map::new()
        }
    };
    for key in ["payload", "subscriber", "steps", "env"] {
        if let Some(x) = caller.get(key).filter(|x| !x.is_null() && !x.is_object()) {
            v.add(
                &format!("previewPayload.{key}"),
                format!("{key} must be an object"),
                x.clone(),
            );
        }
    }
    if let Some(x) = caller
        .get("actor")
        .filter(|x| !x.is_null() && !x.is_object() && !x.is_string())
    {
        v.add(
            "previewPayload.actor",
            "actor must be a subscriberId or an object",
            x.clone(),
        );
    }
    match caller.get("context") {
        None | Some(Value::Null) => {}
        Some(Value::Object(ctx)) => {
            for (k, c) in ctx {
                let ok = match c {
                    Value::String(_) => true,
                    Value::Object(o) => {
                        o.get("id").is_some_and(Value::is_string)
                            && o.get("data").is_none_or(|d| d.is_object() || d.is_null())
                    }
                    _ => false,
                };
                if !ok {
                    v.add(
                        &format!("previewPayload.context.{k}"),
                        "a context entry is a string id or an object {id, data?}",
                        c.clone(),
                    );
                }
            }
        }
        Some(other) => v.add(
            "previewPayload.context",
            "context must be an object",
            other.clone(),
        ),
    }
    v.finish()?;
    Ok((controls, caller))
}

/// What a preview renders: step `index` of `workflow`, and what the call and the environment give it.
pub struct Subject<'a> {
    pub workflow: &'a Workflow,
    pub index: usize,
    /// Controls that replace the stored ones for this call.
    pub controls: Option<&'a Map<String, Value>>,
    /// The caller's preview payload.
    pub caller: &'a Map<String, Value>,
    /// The caller's actor as delivery would see it (a subscriber id already looked up).
    pub actor: Option<&'a Value>,
    /// The environment's name (the base of `env`).
    pub environment: Option<&'a str>,
    /// The environment's API key, which signs an `http_request` step's request.
    pub key: Option<&'a str>,
    pub now: Timestamp,
}

/// The preview of `subject` (pure: no I/O).
pub fn build(subject: &Subject<'_>) -> Preview {
    let &Subject {
        workflow,
        index,
        controls,
        caller,
        actor,
        environment,
        key,
        now,
    } = subject;
    let step = &workflow.steps[index];
    let controls = controls.unwrap_or(&step.control_values);
    let renderer = Renderer::shared();

    // The email body as a Liquid template (block documents compiled to HTML).
    let mut effective = controls.clone();
    let mut block_error = None;
    if step.step_type == StepType::Email {
        if let Some(Value::String(body)) = controls.get("body") {
            match email_body_template(body) {
                Ok(t) => {
                    if let std::borrow::Cow::Owned(t) = t {
                        effective.insert("body".to_owned(), Value::String(t));
                    }
                }
                Err(e) => block_error = Some(PreviewError::from(e)),
            }
        }
    }

    let (example, derived_actor) =
        example_payload(workflow, index, &effective, caller, environment, now);
    // The same variables delivery renders with, from the example.
    let part = |k: &str| example.get(k).cloned().unwrap_or(Value::Null);
    let vars = template_variables(TemplateInputs {
        payload: part("payload"),
        subscriber: part("subscriber"),
        actor: actor.cloned().or(derived_actor).unwrap_or(Value::Null),
        context: part("context"),
        env: part("env"),
        steps: part("steps"),
        workflow: workflow_values(workflow),
        // A link names a real subscriber: the preview's example has none, and `unsubscribeUrl` renders empty.
        unsubscribe_url: None,
    });
    let mut example = example;
    // The example's subscriber holds only the fields a preview payload may set (spec §2.8).
    if let Some(Value::Object(s)) = example.get_mut("subscriber") {
        s.retain(|k, _| is_preview_subscriber_field(k));
    }
    let mut result = json!({"type": step.step_type.as_str()});
    let rendered = match block_error {
        Some(e) => Err(e),
        None => render_step(step.step_type, &effective, &vars, renderer),
    };
    // Delivery sanitises email bodies and in-app content the same way.
    let rendered = match rendered {
        Ok(mut preview) if !sanitization_disabled(&effective) => {
            match step.step_type {
                StepType::InApp => sanitize_in_app(&mut preview),
                StepType::Email => {
                    if let Some(Value::String(body)) = preview.get_mut("body") {
                        if let Cow::Owned(clean) = sanitize_html(body) {
                            *body = clean;
                        }
                    }
                }
                _ => {}
            }
            Ok(preview)
        }
        other => other,
    };
    match rendered {
        Ok(preview) => result["preview"] = preview,
        Err(e) => {
            result["preview"] = json!({});
            result["error"] = e.to_json();
        }
    }
    let signature = match (step.step_type, key) {
        (StepType::HttpRequest, Some(key)) => {
            http_signature(&effective, &vars, renderer, key, now.0)
        }
        _ => None,
    };
    let schema = variables_schema(workflow, index, &example);
    Preview {
        result,
        preview_payload_example: example,
        schema: Some(schema),
        signature,
    }
}

/// The signature the engine would send for these controls: same body, same function.
fn http_signature(
    controls: &Map<String, Value>,
    vars: &Value,
    renderer: &Renderer,
    key: &str,
    t_ms: i64,
) -> Option<String> {
    let rendered = renderer
        .render_value(&template_controls(controls), vars)
        .ok()?;
    let method = rendered
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("POST")
        .to_ascii_uppercase();
    let body = request_body(&method, rendered.get("body"));
    let body_json = serde_json::to_string(&body).ok()?;
    Some(svc_signature(key, t_ms, &body_json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_values_win_at_every_depth() {
        let mut base = json!({"user": {"name": "name", "tags": ["tags"], "address": {"city": "city"}},
            "n": "n", "items": "items", "list": [{"a": "a"}]});
        merge_caller(
            &mut base,
            &json!({"user": {"name": "Ada", "tags": ["a", "b"], "age": 3, "address": "none"},
                "n": {"x": 1}, "items": [{"sku": 1}, {"sku": 2}], "list": [], "extra": true}),
        );
        assert_eq!(
            base,
            json!({"user": {"name": "Ada", "tags": ["a", "b"], "age": 3, "address": "none"},
                "n": {"x": 1}, "items": [{"sku": 1}, {"sku": 2}], "list": [], "extra": true})
        );
    }

    #[test]
    fn schema_mocks() {
        let s = json!({"type": "object", "properties": {
            "email": {"type": "string", "format": "email"}, "count": {"type": "integer"},
            "plan": {"enum": ["pro", "free"]}, "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}}}});
        let m = mock_from_schema(&s, "payload", Timestamp(0), 0);
        assert_eq!(
            m,
            json!({"email": "user@example.com", "count": 1, "plan": "pro", "items": [{"sku": "sku"}]})
        );
        let filtered = filter_to_schema(&json!({"email": "a@b.c", "other": 1}), &s);
        assert_eq!(filtered, json!({"email": "a@b.c"}));
    }

    #[test]
    fn urls() {
        assert!(is_url("https://example.com/x?y=1"));
        assert!(is_url("/inbox/1"));
        assert!(!is_url("example.com/x"));
        assert!(!is_url("not a url"));
        assert!(!is_url("https://"));
    }
}
