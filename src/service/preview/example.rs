//! The example payload (`previewPayloadExample`): what the templates read, the workflow's payload schema,
//! the example subscriber and the caller's values merged over them.

#[allow(clippy::wildcard_imports)]
use super::*;
// ---------------------------------------------------------------------------------------------
// The example payload

/// Every string inside `value` (recursively).
pub(super) fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Example values of the profile's fields (a field without one is `null` in the example).
pub(super) const EXAMPLE_PROFILE: [(&str, &str); 7] = [
    ("firstName", "John"),
    ("lastName", "Doe"),
    ("email", "user@example.com"),
    ("phone", "+1234567890"),
    ("avatar", "https://example.com/avatar.png"),
    ("locale", "en_US"),
    ("timezone", "America/New_York"),
];

/// The example subscriber (caller fields are merged over it): every profile field, with an example value
/// where there is one, and empty `data`.
pub(crate) fn example_subscriber() -> &'static Value {
    // Built once: it follows the profile's type, which does not change while the process runs.
    static EXAMPLE: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
        let mut s = serde_json::to_value(SubscriberProfile {
            data: Some(json!({})),
            ..SubscriberProfile::default()
        })
        .unwrap_or_else(|_| json!({}));
        for (field, example) in EXAMPLE_PROFILE {
            s[field] = json!(example);
        }
        s["subscriberId"] = json!("123456");
        s
    });
    &EXAMPLE
}

/// Merges the caller's value over the example: what the caller sends wins at every depth.
/// Two objects merge key by key (the example fills the keys the caller left out); anything else
/// the caller sent (an array, a scalar, or an object where the example has a placeholder)
/// replaces the example's value whole.
pub(super) fn merge_caller(base: &mut Value, caller: &Value) {
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
pub(super) fn fill_missing(base: &mut Value, extra: &Value) {
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
pub(super) fn placeholder_at<'a>(root: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = root;
    for seg in path {
        cur = cur.get_mut(seg.as_str())?;
    }
    let leaf = path.last()?;
    (cur.as_str() == Some(leaf.as_str())).then_some(cur)
}

/// URL controls whose template starts with a variable (`{{ payload.link }}/x`): that variable's
/// example becomes a URL, so the preview shows a URL rather than the word `link`.
pub(super) fn url_placeholders(
    step_type: StepType,
    controls: &Map<String, Value>,
    example: &mut Value,
) {
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
pub(super) fn type_step_leaves(steps: &mut Value) {
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
pub(super) fn normalize_context(ctx: &Map<String, Value>) -> Map<String, Value> {
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
pub(super) fn example_payload(
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

    let mut subscriber = example_subscriber().clone();
    if let Some(d) = derived.get("subscriber") {
        fill_missing(&mut subscriber, d);
    }
    if let Some(c) = caller.get("subscriber").filter(|c| c.is_object()) {
        merge_caller(&mut subscriber, c);
    }

    let steps = example_steps(&workflow.steps[..index], &payload, &derived, caller, now);

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
pub(super) fn mock_from_schema(schema: &Value, name: &str, now: Timestamp, depth: usize) -> Value {
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
pub(super) fn filter_to_schema(value: &Value, schema: &Value) -> Value {
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

/// `steps` of the example: earlier digest steps' outputs (`earlier`), then what the templates read, then
/// the caller's.
fn example_steps(
    earlier: &[crate::domain::workflow::Step],
    payload: &Value,
    derived: &Map<String, Value>,
    caller: &Map<String, Value>,
    now: Timestamp,
) -> Value {
    let mut steps = Map::new();
    for prev in earlier {
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
    steps
}
