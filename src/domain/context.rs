//! Contexts (`type:id`, e.g. `tenant:acme`) that channel connections, endpoints and triggers are tied to.
//! A set of context keys is stored sorted and joined by a newline, so "exact set, order-insensitive" is
//! an equality test.

use serde_json::Value;

use super::Timestamp;
use crate::error::Validation;

/// Most context entries one resource may carry.
pub const MAX_CONTEXTS: usize = 5;

/// Largest `data` of a context, serialized (64 KiB, as Novu).
pub const MAX_DATA_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct ContextEntry {
    pub kind: String,
    pub id: String,
    pub data: Option<Value>,
}

impl ContextEntry {
    pub fn key(&self) -> String {
        format!("{}:{}", self.kind, self.id)
    }
}

/// A stored context: its entry (`data` is `None` when a trigger named it without any) and its times.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    pub entry: ContextEntry,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Whether `s` can be a context's type or id: 1 to 100 characters, no `:` (the key's separator), no newline
/// (a key set's).
pub fn valid_part(s: &str) -> bool {
    !s.is_empty() && s.len() <= 100 && !s.contains(':') && !s.contains('\n')
}

/// Checks a context's type or id (see [`valid_part`]).
pub fn validate_part(v: &mut Validation, field: &str, value: &str) {
    if !valid_part(value) {
        v.add(
            field,
            format!("{field} must be 1 to 100 characters without ':'"),
            value,
        );
    }
}

/// Checks a context's `data`: an object of at most [`MAX_DATA_BYTES`] serialized.
pub fn validate_data(v: &mut Validation, field: &str, data: &Value) {
    if !data.is_object() {
        v.add(field, "data must be an object", data.clone());
    } else if data.to_string().len() > MAX_DATA_BYTES {
        v.add(
            field,
            format!(
                "data must be at most {} KiB serialized",
                MAX_DATA_BYTES / 1024
            ),
            Value::Null,
        );
    }
}

/// Parses a `context` body field: a map of type → id string or `{id, data?}`, at most five entries.
pub fn parse_context(v: &mut Validation, field: &str, value: &Value) -> Vec<ContextEntry> {
    let Some(map) = value.as_object() else {
        v.add(
            field,
            format!("{field} must be an object of type → id"),
            value.clone(),
        );
        return Vec::new();
    };
    if map.len() > MAX_CONTEXTS {
        v.add(
            field,
            format!("{field} may hold at most {MAX_CONTEXTS} entries"),
            value.clone(),
        );
    }
    let mut out = Vec::new();
    for (kind, entry) in map {
        let (id, data) = match entry {
            Value::String(id) => (id.clone(), None),
            Value::Object(o) => match o.get("id") {
                Some(Value::String(id)) => {
                    let data = o.get("data").cloned().filter(|d| !d.is_null());
                    if let Some(d) = &data {
                        validate_data(v, &format!("{field}.{kind}.data"), d);
                    }
                    (id.clone(), data)
                }
                _ => {
                    v.add(
                        &format!("{field}.{kind}"),
                        "a context entry needs a string id",
                        entry.clone(),
                    );
                    continue;
                }
            },
            other => {
                v.add(
                    &format!("{field}.{kind}"),
                    "a context entry is an id string or {id, data}",
                    other.clone(),
                );
                continue;
            }
        };
        if !valid_part(kind) || !valid_part(&id) {
            v.add(
                &format!("{field}.{kind}"),
                "context type and id must be 1 to 100 characters without ':'",
                entry.clone(),
            );
            continue;
        }
        out.push(ContextEntry {
            kind: kind.clone(),
            id,
            data,
        });
    }
    out
}

/// Sorted, de-duplicated `type:id` keys.
pub fn context_keys(entries: &[ContextEntry]) -> Vec<String> {
    let mut keys: Vec<String> = entries.iter().map(ContextEntry::key).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Validates `type:id` strings from a query; returns them sorted and de-duplicated.
pub fn parse_context_keys(v: &mut Validation, field: &str, raw: &[String]) -> Vec<String> {
    let mut keys = Vec::new();
    for k in raw {
        match k.split_once(':') {
            Some((t, id)) if valid_part(t) && valid_part(id) => keys.push(k.clone()),
            _ => v.add(
                field,
                format!("{field} entries must have the form type:id"),
                k.as_str(),
            ),
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The stored form of a key set: sorted keys joined by a newline (`""` for none).
pub fn context_set(sorted_keys: &[String]) -> String {
    sorted_keys.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn contexts_parse_and_sort() {
        let mut v = Validation::new();
        let entries = parse_context(
            &mut v,
            "context",
            &json!({"tenant": "acme", "region": {"id": "eu", "data": {"n": 1}}}),
        );
        assert!(v.is_empty());
        assert_eq!(context_keys(&entries), ["region:eu", "tenant:acme"]);
        assert_eq!(
            entries.iter().find(|e| e.kind == "region").unwrap().data,
            Some(json!({"n": 1}))
        );
        assert_eq!(
            context_set(&context_keys(&entries)),
            "region:eu\ntenant:acme"
        );
    }

    #[test]
    fn bad_contexts_are_reported() {
        let mut v = Validation::new();
        parse_context(
            &mut v,
            "context",
            &json!({"a": 1, "b": {"x": 1}, "c:d": "e", "f": ""}),
        );
        assert_eq!(v.0.len(), 4);
        let mut v = Validation::new();
        parse_context(
            &mut v,
            "context",
            &json!({"a": "1", "b": "1", "c": "1", "d": "1", "e": "1", "f": "1"}),
        );
        assert_eq!(v.0[0].field, "context");
        let mut v = Validation::new();
        assert_eq!(
            parse_context_keys(&mut v, "contextKeys", &["t:b".into(), "t:a".into()]),
            ["t:a", "t:b"]
        );
        parse_context_keys(&mut v, "contextKeys", &["nocolon".into()]);
        assert_eq!(v.0.len(), 1);
    }
}
