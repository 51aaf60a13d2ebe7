//! A workflow's `payloadSchema` applied to a trigger's payload when the workflow has `validatePayload`
//! on, as Novu does: the schema's `default`s fill absent properties, then the payload is validated, and
//! every failure is reported the way Novu's `PayloadValidationException` reports it.

use serde_json::{json, Map, Value};

/// The `type` of Novu's payload validation error body.
pub const PAYLOAD_VALIDATION_ERROR: &str = "PAYLOAD_VALIDATION_ERROR";

/// One failure, as an item of the error body's `errors` (Novu's `PayloadValidationErrorDto`).
#[derive(Debug, Clone, PartialEq)]
pub struct PayloadError {
    /// Dotted path of the offending property (`root` for the payload itself), as Novu names it.
    pub field: String,
    pub message: String,
    /// The value at the failing location (for a missing property, the object that lacks it).
    pub value: Value,
    /// JSON Schema path of the failing keyword (`#/properties/name/type`).
    pub schema_path: String,
}

impl PayloadError {
    pub fn to_json(&self) -> Value {
        json!({
            "field": self.field,
            "message": self.message,
            "value": self.value,
            "schemaPath": self.schema_path,
        })
    }
}

/// Fills absent properties of `payload` from the `default`s of `schema`'s `properties`, recursively into
/// nested objects (Novu validates with defaults applied).
pub fn apply_defaults(schema: &Value, payload: &mut Value) {
    let (Some(properties), Some(object)) = (
        schema.get("properties").and_then(Value::as_object),
        payload.as_object_mut(),
    ) else {
        return;
    };
    for (key, sub) in properties {
        if !object.contains_key(key) {
            if let Some(default) = sub.get("default") {
                object.insert(key.clone(), default.clone());
            }
        }
        if let Some(value) = object.get_mut(key) {
            apply_defaults(sub, value);
        }
    }
}

/// Validates `payload` against `schema`: every failure, or one naming the schema when it does not
/// compile.
pub fn validate(schema: &Value, payload: &Value) -> Result<(), Vec<PayloadError>> {
    let validator = jsonschema::validator_for(schema).map_err(|e| {
        vec![PayloadError {
            field: "root".to_owned(),
            message: format!("the workflow's payloadSchema is not a valid JSON Schema: {e}"),
            value: payload.clone(),
            schema_path: "#".to_owned(),
        }]
    })?;
    let errors: Vec<PayloadError> = validator
        .iter_errors(payload)
        .map(|e| {
            let pointer = e.instance_path().as_str();
            let path = if pointer.is_empty() {
                "root".to_owned()
            } else {
                pointer.trim_start_matches('/').replace('/', ".")
            };
            let (field, message) = match e.kind() {
                // Novu names the missing property under its parent's path (`root.name` at the top).
                jsonschema::error::ValidationErrorKind::Required { property } => {
                    let name = property
                        .as_str()
                        .map_or_else(|| property.to_string(), str::to_owned);
                    (
                        format!("{path}.{name}"),
                        format!("must have required property '{name}'"),
                    )
                }
                _ => (path, e.to_string()),
            };
            PayloadError {
                field,
                message,
                value: e.instance().clone().into_owned(),
                schema_path: format!("#{}", e.schema_path().as_str()),
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The error body's `message`: `Payload validation failed: <field>: <message>; …`.
pub fn summary(errors: &[PayloadError]) -> String {
    let parts: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect();
    format!("Payload validation failed: {}", parts.join("; "))
}

/// The extra keys of the 400 body: `type`, `errors` and the `schema` used.
pub fn error_extra(errors: &[PayloadError], schema: &Value) -> Map<String, Value> {
    let mut extra = Map::new();
    extra.insert("type".into(), PAYLOAD_VALIDATION_ERROR.into());
    extra.insert(
        "errors".into(),
        Value::Array(errors.iter().map(PayloadError::to_json).collect()),
    );
    extra.insert("schema".into(), schema.clone());
    extra
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "count": {"type": "number", "default": 1},
                "order": {"type": "object", "properties": {"id": {"type": "string"}, "currency": {"type": "string", "default": "EUR"}},
                          "required": ["id"]}
            },
            "required": ["name"]
        })
    }

    #[test]
    fn defaults_fill_absent_properties_only() {
        let mut p = json!({"count": 5, "order": {"id": "A"}});
        apply_defaults(&schema(), &mut p);
        assert_eq!(
            p,
            json!({"count": 5, "order": {"id": "A", "currency": "EUR"}})
        );
        let mut empty = json!({});
        apply_defaults(&schema(), &mut empty);
        assert_eq!(empty, json!({"count": 1}));
    }

    #[test]
    fn every_failure_named_as_novu_names_it() {
        assert!(validate(&schema(), &json!({"name": "x", "order": {"id": "A"}})).is_ok());
        let errors = validate(&schema(), &json!({"count": "many", "order": {}})).unwrap_err();
        let mut got: Vec<(String, String, String)> = errors
            .iter()
            .map(|e| (e.field.clone(), e.message.clone(), e.schema_path.clone()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                (
                    "count".to_owned(),
                    "\"many\" is not of type \"number\"".to_owned(),
                    "#/properties/count/type".to_owned()
                ),
                (
                    "order.id".to_owned(),
                    "must have required property 'id'".to_owned(),
                    "#/properties/order/required".to_owned()
                ),
                (
                    "root.name".to_owned(),
                    "must have required property 'name'".to_owned(),
                    "#/required".to_owned()
                ),
            ]
        );
        let count = errors.iter().find(|e| e.field == "count").unwrap();
        assert_eq!(count.value, json!("many"));
        let root = errors.iter().find(|e| e.field == "root.name").unwrap();
        assert_eq!(root.value, json!({"count": "many", "order": {}}));
        assert!(summary(&errors).starts_with("Payload validation failed: "));
    }

    #[test]
    fn a_schema_that_does_not_compile_is_reported() {
        let errors = validate(&json!({"type": 12}), &json!({})).unwrap_err();
        assert_eq!(errors[0].field, "root");
        assert!(errors[0].message.contains("payloadSchema"), "{errors:?}");
    }
}
