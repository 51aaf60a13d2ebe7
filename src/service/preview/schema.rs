//! The JSON Schema of the variables a step may use.

#[allow(clippy::wildcard_imports)]
use super::*;
// ---------------------------------------------------------------------------------------------
// The schema of the available variables

/// A JSON Schema describing `value` (for payloads inferred from usage and the caller's data).
pub(super) fn schema_of(value: &Value) -> Value {
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

/// What the preview's schema says of the profile's fields, over the type's own schema of each.
pub(super) fn profile_field_notes(field: &str) -> Value {
    let s = |d: &str| json!({"description": d});
    match field {
        "firstName" => s("First name"),
        "lastName" => s("Last name"),
        "email" => json!({"format": "email", "description": "Email address"}),
        "phone" => s("Phone number"),
        "avatar" => json!({"format": "uri", "description": "Avatar image URL"}),
        "locale" => s("Locale, e.g. en_US"),
        "timezone" => s("IANA time zone, e.g. America/New_York"),
        "data" => json!({"type": "object", "description": "Custom data of the subscriber",
            "additionalProperties": true}),
        _ => json!({}),
    }
}

/// The subscriber's schema: `subscriberId` and every profile field, as the profile type declares it.
pub(crate) fn subscriber_schema() -> &'static Value {
    // Built once: it follows the profile's type, which does not change while the process runs.
    static SCHEMA: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
        use utoipa::PartialSchema;
        let declared =
            serde_json::to_value(SubscriberProfile::schema()).unwrap_or_else(|_| json!({}));
        let mut properties = Map::new();
        properties.insert(
            "subscriberId".into(),
            json!({"type": "string", "description": "Unique identifier of the subscriber"}),
        );
        for (field, schema) in declared["properties"].as_object().into_iter().flatten() {
            let mut schema = schema.clone();
            if let (Value::Object(s), Value::Object(notes)) =
                (&mut schema, profile_field_notes(field))
            {
                s.extend(notes);
            }
            properties.insert(field.clone(), schema);
        }
        json!({
            "type": "object",
            "description": "The subscriber the notification is sent to",
            "properties": properties,
            "required": ["subscriberId"],
            "additionalProperties": false
        })
    });
    &SCHEMA
}

pub(super) fn step_output_schema(t: StepType) -> Value {
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

pub(super) fn variables_schema(workflow: &Workflow, index: usize, example: &Value) -> Value {
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
