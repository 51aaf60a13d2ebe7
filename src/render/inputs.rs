//! The variables every template sees, built by one function ([`template_variables`]) for the
//! delivery engine and the step preview alike, so that a preview shows what is delivered.
//!
//! `{payload, subscriber, actor, context, env, steps, workflow}`:
//! - `subscriber` / `actor`: the API's field names ([`subscriber_values`]); an actor given as a
//!   subscriber id (`"u2"` or `{subscriberId: "u2"}`) is that subscriber's fields when it exists
//!   ([`actor_values`]);
//! - `context`: `{type: {id, data}}` ([`context_values`]);
//! - `env`: `{name, type}`, `type` being `dev` for "Development", else `prod`;
//! - `workflow`: `{workflowId, name, description, tags, severity}`;
//! - `unsubscribeUrl` (top level, email steps only): the one-click unsubscribe link, present when
//!   `TIDINGS_PUBLIC_URL` is set and the workflow lets subscribers turn it off (else it renders empty).

use serde_json::{json, Map, Value};

use crate::domain::context::ContextEntry;
use crate::domain::subscriber::Subscriber;
use crate::domain::workflow::Workflow;

/// The parts of the variables, each already in its template shape.
#[derive(Debug, Clone, Default)]
pub struct TemplateInputs {
    pub payload: Value,
    pub subscriber: Value,
    pub actor: Value,
    pub context: Value,
    pub env: Value,
    pub steps: Value,
    pub workflow: Value,
    /// The email's one-click unsubscribe link, when it has one.
    pub unsubscribe_url: Option<String>,
}

/// The variables object templates are rendered with. Absent parts are `{}` (`actor`: `null`), so
/// that reading any field of them renders empty.
pub fn template_variables(i: TemplateInputs) -> Value {
    let object = |v: Value| {
        if v.is_object() {
            v
        } else {
            Value::Object(Map::new())
        }
    };
    let mut vars = json!({
        "payload": object(i.payload),
        "subscriber": object(i.subscriber),
        "actor": i.actor,
        "context": object(i.context),
        "env": object(i.env),
        "steps": object(i.steps),
        "workflow": object(i.workflow),
    });
    if let Some(url) = i.unsubscribe_url {
        vars["unsubscribeUrl"] = Value::String(url);
    }
    vars
}

/// A subscriber as templates and filters see it: [`Subscriber::values`], with `data` `{}` when it has none
/// (so that reading a field of it renders empty).
pub fn subscriber_values(s: &Subscriber) -> Value {
    let mut v = s.values();
    if v.get("data").is_some_and(Value::is_null) {
        v["data"] = Value::Object(Map::new());
    }
    v
}

/// The subscriber id an actor names: `"u2"` or `{"subscriberId": "u2", …}`.
pub fn actor_reference(actor: &Value) -> Option<&str> {
    match actor {
        Value::String(s) => Some(s.as_str()),
        Value::Object(o) => o.get("subscriberId").and_then(Value::as_str),
        _ => None,
    }
    .filter(|s| !s.is_empty())
}

/// The `actor` variable: the named subscriber's fields when it was found (fields given inline in
/// an actor object win), else the actor object as given (`"u2"` becomes `{subscriberId: "u2"}`).
pub fn actor_values(actor: &Value, found: Option<&Subscriber>) -> Value {
    let mut out = match found {
        Some(s) => subscriber_values(s),
        None => Value::Object(Map::new()),
    };
    match actor {
        Value::String(id) => {
            out["subscriberId"] = json!(id);
        }
        Value::Object(given) => {
            if let Value::Object(map) = &mut out {
                for (k, v) in given {
                    if !v.is_null() {
                        map.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        Value::Null => return Value::Null,
        other => return other.clone(),
    }
    out
}

/// `{type: {id, data}}` for the trigger's contexts (`data` is `{}` when the context has none).
pub fn context_values(entries: &[ContextEntry]) -> Value {
    Value::Object(
        entries
            .iter()
            .map(|e| {
                let data = e
                    .data
                    .clone()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                (e.kind.clone(), json!({"id": e.id, "data": data}))
            })
            .collect(),
    )
}

/// The environment's `env` values: `{name, type}`.
pub fn environment_values(name: &str) -> Value {
    let kind = if name == "Development" { "dev" } else { "prod" };
    json!({"name": name, "type": kind})
}

/// The `workflow` variable.
pub fn workflow_values(w: &Workflow) -> Value {
    json!({
        "workflowId": w.workflow_id,
        "name": w.name,
        "description": w.description,
        "tags": w.tags,
        "severity": w.severity.as_str(),
    })
}
