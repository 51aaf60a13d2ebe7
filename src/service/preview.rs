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

/// The subscriber fields of a preview payload (spec §2.8: `_id` through `timezone`).
const PREVIEW_SUBSCRIBER_FIELDS: [&str; 14] = [
    "_id",
    "firstName",
    "lastName",
    "email",
    "phone",
    "avatar",
    "locale",
    "channels",
    "topics",
    "isOnline",
    "lastOnlineAt",
    "__v",
    "data",
    "timezone",
];

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
    Ok(build(
        &workflow,
        index,
        controls.as_ref(),
        &caller,
        actor.as_ref(),
        environment.as_deref(),
        key.as_deref(),
        Timestamp::now(),
    ))
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

/// The preview of `workflow.steps[index]` (pure: no I/O). `controls` replace the stored ones;
/// `actor` is the caller's actor as delivery would see it (a subscriber id already looked up);
/// `environment` is the environment's name (the base of `env`).
#[allow(clippy::too_many_arguments)]
pub fn build(
    workflow: &Workflow,
    index: usize,
    controls: Option<&Map<String, Value>>,
    caller: &Map<String, Value>,
    actor: Option<&Value>,
    environment: Option<&str>,
    key: Option<&str>,
    now: Timestamp,
) -> Preview {
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
        s.retain(|k, _| PREVIEW_SUBSCRIBER_FIELDS.contains(&k.as_str()));
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

// ---------------------------------------------------------------------------------------------
// The example payload

/// Every string inside `value` (recursively).
fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// The example subscriber (caller fields are merged over it).
fn example_subscriber() -> Value {
    json!({
        "subscriberId": "123456",
        "firstName": "John",
        "lastName": "Doe",
        "email": "user@example.com",
        "phone": "+1234567890",
        "avatar": "https://example.com/avatar.png",
        "locale": "en_US",
        "timezone": "America/New_York",
        "data": {}
    })
}

/// Merges the caller's value over the example: what the caller sends wins at every depth.
/// Two objects merge key by key (the example fills the keys the caller left out); anything else
/// the caller sent (an array, a scalar, or an object where the example has a placeholder)
/// replaces the example's value whole.
fn merge_caller(base: &mut Value, caller: &Value) {
    match (base, caller) {
        (Value::Object(b), Value::Object(c)) => {
            for (k, cv) in c {
                match b.get_mut(k) {
                    Some(bv) => merge_caller(bv, cv),
                    None => {
                        b.insert(k.clone(), cv.clone());
                    }
                }
            }
        }
        (b, c) => *b = c.clone(),
    }
}

/// Adds what `extra` has and `base` lacks (`base` wins); each element of a `base` array is
/// completed with the first element of an `extra` array.
fn fill_missing(base: &mut Value, extra: &Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, ev) in e {
                match b.get_mut(k) {
                    Some(bv) => fill_missing(bv, ev),
                    None => {
                        b.insert(k.clone(), ev.clone());
                    }
                }
            }
        }
        (Value::Array(b), Value::Array(e)) => {
            if let Some(first) = e.first() {
                if b.is_empty() {
                    b.push(first.clone());
                } else {
                    b.iter_mut().for_each(|item| fill_missing(item, first));
                }
            }
        }
        _ => {}
    }
}

/// The value at `path` when it is still a placeholder leaf (a string equal to its key).
fn placeholder_at<'a>(root: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = root;
    for seg in path {
        cur = cur.get_mut(seg.as_str())?;
    }
    let leaf = path.last()?;
    (cur.as_str() == Some(leaf.as_str())).then_some(cur)
}

/// URL controls whose template starts with a variable (`{{ payload.link }}/x`): that variable's
/// example becomes a URL, so the preview shows a URL rather than the word `link`.
fn url_placeholders(step_type: StepType, controls: &Map<String, Value>, example: &mut Value) {
    let mut urls: Vec<&Value> = Vec::new();
    match step_type {
        StepType::InApp => {
            urls.extend(controls.get("redirect").and_then(|r| r.get("url")));
            urls.extend(controls.get("avatar"));
            for a in ["primaryAction", "secondaryAction"] {
                urls.extend(
                    controls
                        .get(a)
                        .and_then(|x| x.get("redirect"))
                        .and_then(|r| r.get("url")),
                );
            }
        }
        StepType::HttpRequest => urls.extend(controls.get("url")),
        _ => {}
    }
    for url in urls.into_iter().filter_map(Value::as_str) {
        let t = url.trim_start();
        let Some(first) = t.strip_prefix("{{").and_then(|r| r.split_once("}}")) else {
            continue;
        };
        let uses = variables_used(&format!("{{{{{}}}}}", first.0));
        if let Some(u) = uses.iter().find(|u| !u.is_array_loop) {
            if let Some(slot) = placeholder_at(example, &u.path) {
                let leaf = u.path.last().cloned().unwrap_or_default();
                *slot = Value::String(format!("https://example.com/{leaf}"));
            }
        }
    }
}

/// Leaves the scanner cannot type: `steps.<id>.seen` / `read` are booleans.
fn type_step_leaves(steps: &mut Value) {
    if let Value::Object(map) = steps {
        for step in map.values_mut() {
            if let Some(s) = step.get_mut("seen").filter(|v| v.is_string()) {
                *s = Value::Bool(true);
            }
            if let Some(r) = step.get_mut("read").filter(|v| v.is_string()) {
                *r = Value::Bool(false);
            }
        }
    }
}

/// `{key: "id"}` or `{key: {id, data?}}` → `{key: {id, data}}`.
fn normalize_context(ctx: &Map<String, Value>) -> Map<String, Value> {
    ctx.iter()
        .map(|(k, v)| {
            let entry = match v {
                Value::String(id) => json!({"id": id, "data": {}}),
                Value::Object(o) => json!({
                    "id": o.get("id").cloned().unwrap_or(Value::Null),
                    "data": o.get("data").filter(|d| d.is_object()).cloned().unwrap_or(json!({})),
                }),
                other => other.clone(),
            };
            (k.clone(), entry)
        })
        .collect()
}

/// The example (`previewPayloadExample`) and, when the templates read `actor`, an example actor.
fn example_payload(
    workflow: &Workflow,
    index: usize,
    controls: &Map<String, Value>,
    caller: &Map<String, Value>,
    environment: Option<&str>,
    now: Timestamp,
) -> (Value, Option<Value>) {
    let step = &workflow.steps[index];
    let mut texts = Vec::new();
    controls.values().for_each(|v| strings(v, &mut texts));
    let uses: Vec<VarUse> = texts
        .into_iter()
        .flat_map(variables_used)
        .filter(|u| u.path.first().is_some_and(|r| ROOTS.contains(&r.as_str())))
        .collect();
    let mut derived = example_from_variables(&uses);
    url_placeholders(step.step_type, controls, &mut derived);
    let derived = derived.as_object().cloned().unwrap_or_default();

    // payload: from the workflow's schema when it has one, else from the templates.
    let schema = workflow
        .payload_schema
        .as_ref()
        .filter(|s| s.is_object() && s.get("properties").is_some_and(Value::is_object));
    let mut payload = match schema {
        Some(s) => {
            let mut p = mock_from_schema(s, "payload", now, 0);
            if !p.is_object() {
                p = json!({});
            }
            p
        }
        None => Value::Object(Map::new()),
    };
    if let Some(d) = derived.get("payload") {
        fill_missing(&mut payload, d);
    }
    if let Some(c) = caller.get("payload").filter(|c| c.is_object()) {
        let c = match schema {
            Some(s) => filter_to_schema(c, s),
            None => c.clone(),
        };
        merge_caller(&mut payload, &c);
    }

    let mut subscriber = example_subscriber();
    if let Some(d) = derived.get("subscriber") {
        fill_missing(&mut subscriber, d);
    }
    if let Some(c) = caller.get("subscriber").filter(|c| c.is_object()) {
        merge_caller(&mut subscriber, c);
    }

    // steps: earlier digest steps' outputs, then what the templates read, then the caller's.
    let mut steps = Map::new();
    for prev in &workflow.steps[..index] {
        if prev.step_type == StepType::Digest {
            let events: Vec<Value> = (1..=3)
                .map(|i| json!({"id": format!("example-id-{i}"), "time": now.to_iso(), "payload": payload}))
                .collect();
            steps.insert(
                prev.step_id.clone(),
                json!({"eventCount": events.len(), "events": events}),
            );
        }
    }
    let mut steps = Value::Object(steps);
    if let Some(d) = derived.get("steps") {
        let mut d = d.clone();
        type_step_leaves(&mut d);
        fill_missing(&mut steps, &d);
    }
    if let Some(c) = caller.get("steps").filter(|c| c.is_object()) {
        merge_caller(&mut steps, c);
    }
    if let Value::Object(map) = &mut steps {
        for s in map.values_mut() {
            if let Some(n) = s.get("events").and_then(Value::as_array).map(Vec::len) {
                s["eventCount"] = json!(n);
            }
        }
    }

    let mut out = Map::new();
    out.insert("payload".to_owned(), payload);
    out.insert("subscriber".to_owned(), subscriber);
    let mut context = derived.get("context").cloned().unwrap_or(json!({}));
    if let Some(Value::Object(c)) = caller.get("context") {
        merge_caller(&mut context, &Value::Object(normalize_context(c)));
    }
    if context.as_object().is_some_and(|m| !m.is_empty()) {
        out.insert("context".to_owned(), context);
    }
    if steps.as_object().is_some_and(|m| !m.is_empty()) {
        out.insert("steps".to_owned(), steps);
    }
    // env: the environment's own values, then what the templates read, then the caller's.
    let mut env = environment.map_or_else(|| json!({}), environment_values);
    if let Some(d) = derived.get("env") {
        fill_missing(&mut env, d);
    }
    if let Some(c) = caller.get("env").filter(|c| c.is_object()) {
        merge_caller(&mut env, c);
    }
    if env.as_object().is_some_and(|m| !m.is_empty()) {
        out.insert("env".to_owned(), env);
    }
    (Value::Object(out), derived.get("actor").cloned())
}

/// An example value for a JSON Schema: `default`, `const`, `examples[0]`, `enum[0]`, else one by
/// type (strings are their property name, or a sample for known formats).
fn mock_from_schema(schema: &Value, name: &str, now: Timestamp, depth: usize) -> Value {
    if depth > 16 {
        return Value::Null;
    }
    for key in ["default", "const"] {
        if let Some(v) = schema.get(key) {
            return v.clone();
        }
    }
    for key in ["examples", "enum"] {
        if let Some(v) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return v.clone();
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    };
    let ty = ty.or_else(|| {
        if schema.get("properties").is_some() {
            Some("object")
        } else if schema.get("items").is_some() {
            Some("array")
        } else {
            None
        }
    });
    match ty {
        Some("object") => Value::Object(
            schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|props| {
                    props
                        .iter()
                        .map(|(k, p)| (k.clone(), mock_from_schema(p, k, now, depth + 1)))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        Some("array") => {
            let item = schema
                .get("items")
                .map_or(Value::String(name.to_owned()), |i| {
                    mock_from_schema(i, name, now, depth + 1)
                });
            Value::Array(vec![item])
        }
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("null") => Value::Null,
        _ => Value::String(match schema.get("format").and_then(Value::as_str) {
            Some("email") => "user@example.com".to_owned(),
            Some("uri" | "url") => "https://example.com".to_owned(),
            Some("date-time") => now.to_iso(),
            Some("date") => now.to_iso()[..10].to_owned(),
            Some("uuid") => "00000000-0000-4000-8000-000000000000".to_owned(),
            _ => name.to_owned(),
        }),
    }
}

/// The caller's value restricted to the schema's declared properties (where the schema closes
/// the object: it declares `properties` and does not allow additional ones).
fn filter_to_schema(value: &Value, schema: &Value) -> Value {
    let (Value::Object(map), Some(props)) =
        (value, schema.get("properties").and_then(Value::as_object))
    else {
        return value.clone();
    };
    let open = matches!(
        schema.get("additionalProperties"),
        Some(Value::Bool(true)) | Some(Value::Object(_))
    );
    Value::Object(
        map.iter()
            .filter_map(|(k, v)| match props.get(k) {
                Some(p) => Some((k.clone(), filter_to_schema(v, p))),
                None if open => Some((k.clone(), v.clone())),
                None => None,
            })
            .collect(),
    )
}

// ---------------------------------------------------------------------------------------------
// Rendering per step type

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

fn example_for(field: &str) -> &'static str {
    match field.rsplit('.').next().unwrap_or(field) {
        "subject" => "\"Your order {{ payload.orderId }} has shipped\"",
        "body" => "\"Hi {{ subscriber.firstName }}, your order is on its way.\"",
        "avatar" => "\"https://example.com/avatar.png\"",
        "label" => "\"View order\"",
        "url" => "\"https://example.com/orders/{{ payload.orderId }}\"",
        "amount" => "5",
        "unit" => "\"minutes\"",
        "digestKey" => "\"{{ payload.orderId }}\"",
        "redirect" => "{\"url\": \"https://example.com/orders/{{ payload.orderId }}\", \"target\": \"_blank\"}",
        "primaryAction" | "secondaryAction" => {
            "{\"label\": \"View order\", \"redirect\": {\"url\": \"https://example.com/orders/{{ payload.orderId }}\"}}"
        }
        "data" => "{\"orderId\": \"{{ payload.orderId }}\"}",
        "lookBackWindow" => "{\"amount\": 10, \"unit\": \"minutes\"}",
        "method" => "\"POST\"",
        "headers" | "body_object" => "{\"x-order\": \"{{ payload.orderId }}\"}",
        "threshold" => "3",
        _ => "a value",
    }
}

fn wrong_type(field: &str, expected: &str, got: &Value) -> PreviewError {
    PreviewError {
        title: "Invalid control value".to_owned(),
        message: format!(
            "`{field}` must be {expected}, but it is {}: {}",
            describe(got),
            short_json(got)
        ),
        hint: format!(
            "Set `{field}` to {expected}, for example {}.",
            example_for(field)
        ),
    }
}

fn missing(step: StepType, field: &str) -> PreviewError {
    let what = match step {
        StepType::InApp => "in-app",
        StepType::HttpRequest => "HTTP request",
        other => other.as_str(),
    };
    PreviewError {
        title: "Missing required control".to_owned(),
        message: format!("The {what} step has no `{field}`: it is required and missing or empty."),
        hint: format!(
            "Add a `{field}` control value, for example {}.",
            example_for(field)
        ),
    }
}

/// A string control: `Ok(None)` when absent (or null), an error when it has another type, or
/// when it is required and absent or blank.
fn text<'a>(
    controls: &'a Map<String, Value>,
    step: StepType,
    key: &str,
    required: bool,
) -> Result<Option<&'a str>, PreviewError> {
    match controls.get(key) {
        None | Some(Value::Null) if required => Err(missing(step, key)),
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if required && s.trim().is_empty() => Err(missing(step, key)),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(wrong_type(key, "text", other)),
    }
}

/// Renders the given controls (a sub-map) with error locations named by field.
fn render(
    renderer: &Renderer,
    controls: Map<String, Value>,
    vars: &Value,
) -> Result<Map<String, Value>, PreviewError> {
    match renderer.render_value(&Value::Object(controls), vars)? {
        Value::Object(m) => Ok(m),
        _ => Ok(Map::new()),
    }
}

fn pick(controls: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| {
            controls
                .get(*k)
                .filter(|v| !v.is_null())
                .map(|v| ((*k).to_owned(), v.clone()))
        })
        .collect()
}

const TARGETS: [&str; 5] = ["_self", "_blank", "_parent", "_top", "_unfencedTop"];

/// A redirect control `{url, target?}`: type checks before rendering.
fn check_redirect(field: &str, r: &Value) -> Result<(), PreviewError> {
    let Some(obj) = r.as_object() else {
        return Err(wrong_type(field, "an object {url, target}", r));
    };
    match obj.get("url") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(other) => return Err(wrong_type(&format!("{field}.url"), "text (a URL)", other)),
    }
    match obj.get("target") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if TARGETS.contains(&t.as_str()) => {}
        Some(other) => {
            return Err(PreviewError {
                title: "Invalid control value".to_owned(),
                message: format!(
                    "`{field}.target` is {}, which is not a link target",
                    short_json(other)
                ),
                hint: format!("Set `{field}.target` to one of {}.", TARGETS.join(", ")),
            })
        }
    }
    Ok(())
}

fn is_url(s: &str) -> bool {
    if s.chars().any(char::is_whitespace) || s.is_empty() {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    url::Url::parse(s).is_ok_and(|u| match u.scheme() {
        "http" | "https" => u.host_str().is_some_and(|h| !h.is_empty()),
        _ => !u.cannot_be_a_base() || u.scheme() == "mailto" || u.scheme() == "tel",
    })
}

/// A rendered redirect: `None` when its url is empty (nothing to link), an error when the url is
/// not a URL.
fn rendered_redirect(field: &str, r: Option<&Value>) -> Result<Option<Value>, PreviewError> {
    let Some(r) = r.and_then(Value::as_object) else {
        return Ok(None);
    };
    let url = r.get("url").and_then(Value::as_str).unwrap_or("").trim();
    if url.is_empty() {
        return Ok(None);
    }
    if !is_url(url) {
        return Err(PreviewError {
            title: "Invalid redirect URL".to_owned(),
            message: format!(
                "`{field}.url` renders to `{}`, which is not a URL",
                short_json(&Value::String(url.to_owned())).trim_matches('"')
            ),
            hint: "Use an absolute URL such as https://example.com/orders/{{ payload.orderId }}, or a \
                   path starting with / such as /inbox/{{ payload.id }}."
                .to_owned(),
        });
    }
    let mut out = json!({"url": url});
    if let Some(t) = r.get("target").filter(|t| t.is_string()) {
        out["target"] = t.clone();
    }
    Ok(Some(out))
}

fn render_step(
    t: StepType,
    controls: &Map<String, Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Value, PreviewError> {
    match t {
        StepType::Email => {
            text(controls, t, "subject", true)?;
            text(controls, t, "body", false)?;
            text(controls, t, "editorType", false)?;
            let r = render(renderer, pick(controls, &["subject", "body"]), vars)?;
            Ok(json!({
                "subject": r.get("subject").cloned().unwrap_or(json!("")),
                "body": r.get("body").cloned().unwrap_or(json!("")),
            }))
        }
        StepType::Sms | StepType::Chat => {
            text(controls, t, "body", true)?;
            let r = render(renderer, pick(controls, &["body"]), vars)?;
            Ok(json!({"body": r.get("body").cloned().unwrap_or(json!(""))}))
        }
        StepType::Push => {
            text(controls, t, "subject", true)?;
            text(controls, t, "body", true)?;
            let r = render(renderer, pick(controls, &["subject", "body"]), vars)?;
            Ok(json!({
                "subject": r.get("subject").cloned().unwrap_or(json!("")),
                "body": r.get("body").cloned().unwrap_or(json!("")),
            }))
        }
        StepType::InApp => in_app(controls, vars, renderer),
        StepType::Delay | StepType::Digest | StepType::Throttle => {
            timing(t, controls, vars, renderer)
        }
        StepType::HttpRequest => http_request(controls, vars, renderer),
        StepType::Custom => Ok(Value::Object(render(renderer, controls.clone(), vars)?)),
    }
}

fn in_app(
    controls: &Map<String, Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Value, PreviewError> {
    let t = StepType::InApp;
    text(controls, t, "body", true)?;
    text(controls, t, "subject", false)?;
    text(controls, t, "avatar", false)?;
    for a in ["primaryAction", "secondaryAction"] {
        let Some(action) = controls.get(a).filter(|v| !v.is_null()) else {
            continue;
        };
        let Some(obj) = action.as_object() else {
            return Err(wrong_type(a, "an object {label, redirect}", action));
        };
        match obj.get("label") {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(other) => return Err(wrong_type(&format!("{a}.label"), "text", other)),
        }
        if let Some(r) = obj.get("redirect").filter(|v| !v.is_null()) {
            check_redirect(&format!("{a}.redirect"), r)?;
        }
    }
    if let Some(r) = controls.get("redirect").filter(|v| !v.is_null()) {
        check_redirect("redirect", r)?;
    }
    if let Some(d) = controls
        .get("data")
        .filter(|v| !v.is_null() && !v.is_object())
    {
        return Err(wrong_type("data", "an object", d));
    }
    let r = render(
        renderer,
        pick(
            controls,
            &[
                "subject",
                "body",
                "avatar",
                "primaryAction",
                "secondaryAction",
                "redirect",
                "data",
            ],
        ),
        vars,
    )?;
    let mut out = Map::new();
    out.insert(
        "body".to_owned(),
        r.get("body").cloned().unwrap_or(json!("")),
    );
    for k in ["subject", "avatar"] {
        if let Some(v) = r
            .get(k)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        {
            out.insert(k.to_owned(), v.clone());
        }
    }
    for a in ["primaryAction", "secondaryAction"] {
        let Some(action) = r.get(a).and_then(Value::as_object) else {
            continue;
        };
        let label = action
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        let redirect = rendered_redirect(&format!("{a}.redirect"), action.get("redirect"))?;
        if label.is_empty() {
            if redirect.is_some() {
                return Err(PreviewError {
                    title: "Missing required control".to_owned(),
                    message: format!("`{a}` has a redirect but no `label`: a button needs text."),
                    hint: format!(
                        "Add `{a}.label`, for example {}, or remove `{a}`.",
                        example_for("label")
                    ),
                });
            }
            continue;
        }
        let mut o = json!({"label": label});
        if let Some(redirect) = redirect {
            o["redirect"] = redirect;
        }
        out.insert(a.to_owned(), o);
    }
    if let Some(redirect) = rendered_redirect("redirect", r.get("redirect"))? {
        out.insert("redirect".to_owned(), redirect);
    }
    if let Some(d) = r.get("data").filter(|d| d.is_object()) {
        out.insert("data".to_owned(), d.clone());
    }
    Ok(Value::Object(out))
}

/// An amount: a non-negative number (also given as numeric text, or Liquid rendering to one).
fn amount(
    field: &str,
    raw: Option<&Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Option<Value>, PreviewError> {
    match raw {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_f64().is_some_and(|f| f >= 0.0) => {
            Ok(Some(Value::Number(n.clone())))
        }
        Some(Value::String(s)) => {
            let rendered = renderer
                .render_str(s, vars)
                .map_err(|e| PreviewError::from(e.in_field(field.to_owned())))?;
            let trimmed = rendered.trim();
            if let Ok(i) = trimmed.parse::<u64>() {
                Ok(Some(json!(i)))
            } else if let Some(f) = trimmed
                .parse::<f64>()
                .ok()
                .filter(|f| *f >= 0.0 && f.is_finite())
            {
                Ok(Some(json!(f)))
            } else {
                Err(wrong_type(
                    field,
                    "a non-negative number",
                    &Value::String(rendered),
                ))
            }
        }
        Some(other) => Err(wrong_type(field, "a non-negative number", other)),
    }
}

fn unit(field: &str, raw: Option<&Value>) -> Result<Option<Value>, PreviewError> {
    match raw {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(u)) if TIME_UNITS.contains(&u.as_str()) => Ok(Some(json!(u))),
        Some(other) => Err(PreviewError {
            title: "Invalid control value".to_owned(),
            message: format!(
                "`{field}` is {}, which is not a time unit",
                short_json(other)
            ),
            hint: format!("Set `{field}` to one of {}.", TIME_UNITS.join(", ")),
        }),
    }
}

/// delay, digest and throttle: `amount`, `unit` (required unless the step is scheduled by a path
/// or a cron expression), digest `digestKey` and `lookBackWindow`, throttle `threshold`.
fn timing(
    t: StepType,
    controls: &Map<String, Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Value, PreviewError> {
    let kind = text(controls, t, "type", false)?.unwrap_or("regular");
    let scheduled = (t == StepType::Delay && kind == "scheduled") || kind == "timed";
    let mut out = Map::new();
    let a = amount("amount", controls.get("amount"), vars, renderer)?;
    let u = unit("unit", controls.get("unit"))?;
    match (a, u) {
        (Some(a), Some(u)) => {
            out.insert("amount".to_owned(), a);
            out.insert("unit".to_owned(), u);
        }
        (None, _) if !scheduled => return Err(missing(t, "amount")),
        (_, None) if !scheduled => return Err(missing(t, "unit")),
        _ => {}
    }
    if kind != "regular" {
        out.insert("type".to_owned(), json!(kind));
    }
    for k in ["delayPath", "cron"] {
        if let Some(v) = text(controls, t, k, false)? {
            out.insert(k.to_owned(), json!(v));
        }
    }
    if scheduled
        && !out.contains_key("cron")
        && !out.contains_key("delayPath")
        && !out.contains_key("amount")
    {
        let field = if t == StepType::Delay {
            "delayPath"
        } else {
            "cron"
        };
        return Err(missing(t, field));
    }
    if t == StepType::Digest {
        if let Some(key) = text(controls, t, "digestKey", false)? {
            let rendered = renderer
                .render_str(key, vars)
                .map_err(|e| PreviewError::from(e.in_field("digestKey".to_owned())))?;
            out.insert("digestKey".to_owned(), json!(rendered));
        }
        if let Some(w) = controls.get("lookBackWindow").filter(|v| !v.is_null()) {
            let Some(obj) = w.as_object() else {
                return Err(wrong_type("lookBackWindow", "an object {amount, unit}", w));
            };
            let wa = amount("lookBackWindow.amount", obj.get("amount"), vars, renderer)?
                .ok_or_else(|| missing(t, "lookBackWindow.amount"))?;
            let wu = unit("lookBackWindow.unit", obj.get("unit"))?
                .ok_or_else(|| missing(t, "lookBackWindow.unit"))?;
            out.insert(
                "lookBackWindow".to_owned(),
                json!({"amount": wa, "unit": wu}),
            );
        }
        if kind == "backoff" {
            if let Some(a) = amount(
                "backoffAmount",
                controls.get("backoffAmount"),
                vars,
                renderer,
            )? {
                out.insert("backoffAmount".to_owned(), a);
            }
            if let Some(u) = unit("backoffUnit", controls.get("backoffUnit"))? {
                out.insert("backoffUnit".to_owned(), u);
            }
        }
    }
    if t == StepType::Throttle {
        match controls.get("threshold") {
            None | Some(Value::Null) => {}
            Some(v) if v.as_u64().is_some_and(|n| n >= 1) => {
                out.insert("threshold".to_owned(), v.clone());
            }
            Some(other) => return Err(wrong_type("threshold", "a positive whole number", other)),
        }
    }
    Ok(Value::Object(out))
}

fn http_request(
    controls: &Map<String, Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Value, PreviewError> {
    let t = StepType::HttpRequest;
    text(controls, t, "url", true)?;
    if let Some(m) = text(controls, t, "method", false)? {
        if !matches!(
            m.to_ascii_uppercase().as_str(),
            "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
        ) {
            return Err(PreviewError {
                title: "Invalid control value".to_owned(),
                message: format!(
                    "`method` is \"{m}\", which is not an HTTP method this step can send"
                ),
                hint: "Set `method` to one of GET, POST, PUT, PATCH, DELETE.".to_owned(),
            });
        }
    }
    for k in ["headers", "body"] {
        if let Some(v) = controls
            .get(k)
            .filter(|v| !v.is_null() && !v.is_object() && !v.is_array())
        {
            return Err(wrong_type(k, "an object of key/value pairs", v));
        }
    }
    let r = render(
        renderer,
        pick(controls, &["method", "url", "headers", "body"]),
        vars,
    )?;
    let url = r.get("url").and_then(Value::as_str).unwrap_or("").trim();
    if !(url.starts_with("http://") || url.starts_with("https://")) || !is_url(url) {
        return Err(PreviewError {
            title: "Invalid URL".to_owned(),
            message: format!("`url` renders to `{url}`, which is not an absolute http(s) URL"),
            hint:
                "Use an absolute URL such as https://api.example.com/orders/{{ payload.orderId }}."
                    .to_owned(),
        });
    }
    let method = r
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("POST")
        .to_ascii_uppercase();
    let mut out = json!({"method": method, "url": url});
    if let Some(h) = r.get("headers") {
        out["headers"] = h.clone();
    }
    out["body"] = request_body(&method, r.get("body"));
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The schema of the available variables

/// A JSON Schema describing `value` (for payloads inferred from usage and the caller's data).
fn schema_of(value: &Value) -> Value {
    match value {
        Value::Object(map) => json!({
            "type": "object",
            "properties": map.iter().map(|(k, v)| (k.clone(), schema_of(v))).collect::<Map<String, Value>>(),
            "additionalProperties": true,
        }),
        Value::Array(items) => match items.first() {
            Some(first) => json!({"type": "array", "items": schema_of(first)}),
            None => json!({"type": "array"}),
        },
        Value::String(_) => json!({"type": "string"}),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({"type": "integer"}),
        Value::Number(_) => json!({"type": "number"}),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Null => json!({"type": "null"}),
    }
}

fn subscriber_schema() -> Value {
    let s = |d: &str| json!({"type": ["string", "null"], "description": d});
    json!({
        "type": "object",
        "description": "The subscriber the notification is sent to",
        "properties": {
            "subscriberId": {"type": "string", "description": "Unique identifier of the subscriber"},
            "firstName": s("First name"),
            "lastName": s("Last name"),
            "email": {"type": ["string", "null"], "format": "email", "description": "Email address"},
            "phone": s("Phone number"),
            "avatar": {"type": ["string", "null"], "format": "uri", "description": "Avatar image URL"},
            "locale": s("Locale, e.g. en_US"),
            "timezone": s("IANA time zone, e.g. America/New_York"),
            "data": {"type": "object", "description": "Custom data of the subscriber", "additionalProperties": true}
        },
        "required": ["subscriberId"],
        "additionalProperties": false
    })
}

fn step_output_schema(t: StepType) -> Value {
    match t {
        StepType::Digest => json!({
            "type": "object",
            "properties": {
                "eventCount": {"type": "integer", "description": "Events in the digest"},
                "events": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "time": {"type": "string", "format": "date-time"},
                        "payload": {"type": "object", "additionalProperties": true}
                    },
                    "required": ["id", "time", "payload"]
                }}
            },
            "required": ["eventCount", "events"],
            "additionalProperties": false
        }),
        StepType::InApp => json!({
            "type": "object",
            "properties": {"seen": {"type": "boolean"}, "read": {"type": "boolean"},
                "lastSeenDate": {"type": ["string", "null"], "format": "date-time"},
                "lastReadDate": {"type": ["string", "null"], "format": "date-time"}},
            "additionalProperties": false
        }),
        _ => json!({"type": "object", "additionalProperties": true}),
    }
}

fn variables_schema(workflow: &Workflow, index: usize, example: &Value) -> Value {
    let payload = match workflow.payload_schema.as_ref().filter(|s| s.is_object()) {
        Some(s) => s.clone(),
        None => schema_of(example.get("payload").unwrap_or(&json!({}))),
    };
    let steps: Map<String, Value> = workflow.steps[..index]
        .iter()
        .map(|s| (s.step_id.clone(), step_output_schema(s.step_type)))
        .collect();
    json!({
        "type": "object",
        "properties": {
            "payload": payload,
            "subscriber": subscriber_schema(),
            "steps": {"type": "object", "properties": steps, "additionalProperties": false},
            "context": {"type": "object", "additionalProperties": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "data": {"type": "object", "additionalProperties": true}},
                "required": ["id"]
            }},
            "env": {"type": "object", "properties": {"name": {"type": "string"}, "type": {"type": "string"}},
                "additionalProperties": true}
        },
        "additionalProperties": false
    })
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
