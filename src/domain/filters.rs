//! Step filters (spec §2.5 `StepFilter` / `FieldFilterPart`): their wire types and the pure rule
//! deciding whether a step runs for a subscriber and payload ([`passes`]).
//!
//! Every filter of a step must pass (AND across the array). Inside one filter the children
//! combine with its `value` (`AND` / `OR`; no children → true), and `isNegated` negates the
//! result. A child reads `field`, a dotted path (`data.plan`, `user.age`, `items.0.sku`), from
//! the subscriber (API shape: `firstName`, `email`, `data`, …) or the payload, and compares it
//! with `value` using `operator`:
//!
//! | operator | passes when |
//! |---|---|
//! | `EQUAL` / `NOT_EQUAL` | the texts are equal, or both are the same number, or the same boolean |
//! | `LARGER`, `SMALLER`, `LARGER_EQUAL`, `SMALLER_EQUAL` | numbers if both parse, else ISO dates if both parse, else text order |
//! | `LIKE` / `NOT_LIKE` | the field contains `value`, ignoring case |
//! | `IN` / `NOT_IN` | the field is one of the list (`["a","b"]` or `a,b`) |
//! | `ANY_IN` | the field (an array) has an element in the list |
//! | `ALL_IN` | the field (an array) contains every element of the list |
//! | `BETWEEN` / `NOT_BETWEEN` | the field is within `"10,20"` or `[10,20]`, inclusive (numbers or dates) |
//!
//! A missing (or null) field fails every positive operator and passes `NOT_EQUAL`, `NOT_IN`,
//! `NOT_LIKE` and `NOT_BETWEEN`. Deserialization is lenient: unknown keys are ignored, a
//! non-string `value` is taken as its text, a missing `operator` / `on` means `EQUAL` /
//! `payload`, and an unknown `on` or `operator` is kept (as `Other`) and treated as a missing
//! field / a failing comparison.

use std::cmp::Ordering;

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// One condition group of a step (`StepFilter`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepFilter {
    /// Negates the group's result.
    #[serde(default)]
    pub is_negated: bool,
    /// The kind of condition the dashboard built (informational; evaluation does not use it).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FilterType>,
    /// How `children` combine.
    #[serde(default)]
    pub value: FilterJoin,
    /// The field conditions.
    #[serde(default)]
    pub children: Vec<FieldFilterPart>,
}

/// `StepFilter.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FilterType {
    Boolean,
    Text,
    Date,
    Number,
    Statement,
    List,
    MultiList,
    Group,
    /// Any other value (kept so the filter still deserializes).
    #[serde(other)]
    Other,
}

/// `StepFilter.value`: how the children combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FilterJoin {
    #[default]
    #[serde(rename = "AND", alias = "and")]
    And,
    #[serde(rename = "OR", alias = "or")]
    Or,
}

/// One field condition (`FieldFilterPart`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldFilterPart {
    /// Dotted path into the subscriber or the payload.
    #[serde(default)]
    pub field: String,
    /// The operand: text, a number as text, or a list (`["a","b"]`, `a,b`, `10,20`).
    #[serde(default, deserialize_with = "value_as_text")]
    pub value: String,
    /// The comparison (`EQUAL` when absent).
    #[serde(default)]
    pub operator: FilterOperator,
    /// Where `field` is read (`payload` when absent).
    #[serde(default)]
    pub on: FilterOn,
}

/// `FieldFilterPart.operator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FilterOperator {
    Larger,
    Smaller,
    LargerEqual,
    SmallerEqual,
    #[default]
    Equal,
    NotEqual,
    AllIn,
    AnyIn,
    NotIn,
    Between,
    NotBetween,
    Like,
    NotLike,
    In,
    /// Any other value: never passes.
    #[serde(other)]
    Other,
}

/// `FieldFilterPart.on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterOn {
    Subscriber,
    #[default]
    Payload,
    /// Any other source (webhook, tenant, …): its fields count as missing.
    #[serde(other)]
    Other,
}

/// Accepts a string, a number, a boolean, null, or a list for `value`, keeping it as text
/// (a list as JSON text, which the list operators read back).
fn value_as_text<'de, D: Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(de)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// Whether a step with `filters` runs for this subscriber (the API's JSON shape) and payload:
/// every filter must pass; an empty list passes.
pub fn passes(filters: &[StepFilter], subscriber: &Value, payload: &Value) -> bool {
    filters.iter().all(|f| f.passes(subscriber, payload))
}

impl StepFilter {
    /// This group's result: children joined by `value`, then negated if `isNegated`.
    pub fn passes(&self, subscriber: &Value, payload: &Value) -> bool {
        let mut results = self.children.iter().map(|c| c.matches(subscriber, payload));
        let result = match self.value {
            FilterJoin::And => results.all(|r| r),
            FilterJoin::Or => self.children.is_empty() || results.any(|r| r),
        };
        result != self.is_negated
    }
}

impl FieldFilterPart {
    /// Whether this condition holds.
    pub fn matches(&self, subscriber: &Value, payload: &Value) -> bool {
        let root = match self.on {
            FilterOn::Subscriber => Some(subscriber),
            FilterOn::Payload => Some(payload),
            FilterOn::Other => None,
        };
        let prefix = match self.on {
            FilterOn::Subscriber => "subscriber.",
            FilterOn::Payload => "payload.",
            FilterOn::Other => "",
        };
        let field = root.and_then(|root| {
            lookup(root, &self.field).or_else(|| {
                let rest = self
                    .field
                    .strip_prefix(prefix)
                    .filter(|_| !prefix.is_empty())?;
                lookup(root, rest)
            })
        });
        evaluate(self.operator, field, &self.value)
    }
}

/// The value at dotted `path` (`data.plan`, `items.0.sku`); a key that itself contains dots is
/// found too. `None` when absent or null.
fn lookup<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    if path.is_empty() {
        return None;
    }
    if let Some(v) = root.get(path) {
        return (!v.is_null()).then_some(v);
    }
    let mut cur = root;
    for seg in path.split('.') {
        cur = match cur {
            Value::Object(map) => map.get(seg)?,
            Value::Array(items) => items.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    (!cur.is_null()).then_some(cur)
}

fn evaluate(op: FilterOperator, field: Option<&Value>, operand: &str) -> bool {
    use FilterOperator as Op;
    let Some(field) = field else {
        return matches!(op, Op::NotEqual | Op::NotIn | Op::NotLike | Op::NotBetween);
    };
    match op {
        Op::Equal => scalar_eq(field, operand),
        Op::NotEqual => !scalar_eq(field, operand),
        Op::Larger => compare(field, operand).is_some_and(Ordering::is_gt),
        Op::Smaller => compare(field, operand).is_some_and(Ordering::is_lt),
        Op::LargerEqual => compare(field, operand).is_some_and(Ordering::is_ge),
        Op::SmallerEqual => compare(field, operand).is_some_and(Ordering::is_le),
        Op::Like => like(field, operand),
        Op::NotLike => !like(field, operand),
        Op::In => in_list(field, &parse_list(operand)),
        Op::NotIn => !in_list(field, &parse_list(operand)),
        Op::AnyIn => {
            let list = parse_list(operand);
            elements(field).any(|e| list.iter().any(|item| scalar_eq(e, item)))
        }
        Op::AllIn => {
            let list = parse_list(operand);
            list.iter()
                .all(|item| elements(field).any(|e| scalar_eq(e, item)))
        }
        Op::Between => between(field, operand),
        Op::NotBetween => !between(field, operand),
        Op::Other => false,
    }
}

/// A JSON value as the text a filter compares.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The number a value or text stands for (finite, plain numeric syntax only).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => number_text(s),
        _ => None,
    }
}

fn number_text(s: &str) -> Option<f64> {
    let s = s.trim();
    let numeric = !s.is_empty()
        && s.chars().any(|c| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'));
    numeric
        .then(|| s.parse::<f64>().ok())
        .flatten()
        .filter(|n| n.is_finite())
}

fn boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => boolean_text(s),
        _ => None,
    }
}

fn boolean_text(s: &str) -> Option<bool> {
    match s.trim() {
        t if t.eq_ignore_ascii_case("true") => Some(true),
        t if t.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

/// Milliseconds since the epoch of an ISO 8601 date or date-time (UTC when no offset).
fn date_millis(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
        return Some(dt.timestamp_millis());
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(s, format) {
            return Some(dt.and_utc().timestamp_millis());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|dt| dt.and_utc().timestamp_millis())
}

/// EQUAL: same text, or same number, or same boolean.
fn scalar_eq(field: &Value, operand: &str) -> bool {
    if text(field) == operand {
        return true;
    }
    if let (Some(a), Some(b)) = (number(field), number_text(operand)) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (boolean(field), boolean_text(operand)) {
        return a == b;
    }
    false
}

/// Numbers if both parse, else dates if both parse, else text order.
fn compare(field: &Value, operand: &str) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (number(field), number_text(operand)) {
        return a.partial_cmp(&b);
    }
    let field_text = text(field);
    if let (Some(a), Some(b)) = (date_millis(&field_text), date_millis(operand)) {
        return Some(a.cmp(&b));
    }
    Some(field_text.as_str().cmp(operand))
}

/// Case-insensitive substring; for an array field, any element.
fn like(field: &Value, operand: &str) -> bool {
    let needle = operand.to_lowercase();
    match field {
        Value::Array(items) => items
            .iter()
            .any(|e| text(e).to_lowercase().contains(&needle)),
        other => text(other).to_lowercase().contains(&needle),
    }
}

/// The list operand: a JSON array (`["a","b"]`, `[1,2]`) or comma-separated text (`a, b`).
fn parse_list(operand: &str) -> Vec<String> {
    let trimmed = operand.trim();
    if trimmed.starts_with('[') {
        if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(trimmed) {
            return items.iter().map(text).collect();
        }
    }
    if trimmed.is_empty() {
        return Vec::new();
    }
    trimmed
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|item| {
            let item = item.trim();
            item.strip_prefix('"')
                .and_then(|i| i.strip_suffix('"'))
                .or_else(|| item.strip_prefix('\'').and_then(|i| i.strip_suffix('\'')))
                .unwrap_or(item)
                .to_owned()
        })
        .collect()
}

/// The elements of an array field, or the field itself as a one-element list.
fn elements(field: &Value) -> Box<dyn Iterator<Item = &Value> + '_> {
    match field {
        Value::Array(items) => Box::new(items.iter().filter(|v| !v.is_null())),
        other => Box::new(std::iter::once(other)),
    }
}

/// IN: the field is one of `list` (for an array field, any element is).
fn in_list(field: &Value, list: &[String]) -> bool {
    elements(field).any(|e| list.iter().any(|item| scalar_eq(e, item)))
}

/// BETWEEN: inclusive, numbers if all three parse, else dates if all three parse.
fn between(field: &Value, operand: &str) -> bool {
    let bounds = parse_list(operand);
    let [low, high] = bounds.as_slice() else {
        return false;
    };
    if let (Some(v), Some(lo), Some(hi)) = (number(field), number_text(low), number_text(high)) {
        return lo <= v && v <= hi;
    }
    if let (Some(v), Some(lo), Some(hi)) = (
        date_millis(&text(field)),
        date_millis(low),
        date_millis(high),
    ) {
        return lo <= v && v <= hi;
    }
    false
}

/// `StepFilter.type` values as the SDKs accept them.
const FILTER_TYPES: [&str; 8] = [
    "BOOLEAN",
    "TEXT",
    "DATE",
    "NUMBER",
    "STATEMENT",
    "LIST",
    "MULTI_LIST",
    "GROUP",
];

/// `FieldFilterPart.operator` values.
const OPERATORS: [&str; 14] = [
    "LARGER",
    "SMALLER",
    "LARGER_EQUAL",
    "SMALLER_EQUAL",
    "EQUAL",
    "NOT_EQUAL",
    "ALL_IN",
    "ANY_IN",
    "NOT_IN",
    "BETWEEN",
    "NOT_BETWEEN",
    "LIKE",
    "NOT_LIKE",
    "IN",
];

/// A step's `filters` in the shape both SDKs require (spec §2.5): every filter with `isNegated`,
/// `type`, `value` (`AND`/`OR`) and `children`, every child with `field`, a string `value`,
/// `operator` and `on`. Missing members get their defaults (`false`, `GROUP`, `AND`, `[]`; `""`,
/// `EQUAL`, `payload`), a number or boolean `value` becomes its text and a list its JSON text, and
/// other keys are dropped. What cannot be normalised is added to `v` under `field` (e.g.
/// `steps[0].filters`) with the offending value: a filter or child that is not an object, an unknown
/// enum value, a `children` that is not an array, a non-boolean `isNegated`, a missing `field`.
pub fn normalize(v: &mut crate::error::Validation, field: &str, filters: &[Value]) -> Vec<Value> {
    let mut out = Vec::with_capacity(filters.len());
    for (i, f) in filters.iter().enumerate() {
        let at = format!("{field}[{i}]");
        match normalize_filter(f, &at) {
            Ok(f) => out.push(f),
            Err(errors) => {
                for (path, message, value) in errors {
                    v.add(&path, message, value);
                }
            }
        }
    }
    out
}

/// Stored `filters` as the activity shows them: [`normalize`]'s shape for rows saved before filters
/// were normalised. A filter or child that cannot be normalised is left out (it could not have
/// matched: an unknown operator or source never passes); text that is not a JSON array is `[]`.
pub fn wire_filters(stored: &str) -> String {
    let trimmed = stored.trim();
    if trimmed == "[]" {
        return "[]".to_owned();
    }
    let Ok(Value::Array(filters)) = serde_json::from_str::<Value>(trimmed) else {
        return "[]".to_owned();
    };
    let mut out = Vec::with_capacity(filters.len());
    for f in &filters {
        let mut f = f.clone();
        if let Some(obj) = f.as_object_mut() {
            if let Some(Value::Array(children)) = obj.get_mut("children") {
                children.retain(|c| normalize_child(c, "").is_ok());
            }
            for (key, allowed) in [("type", &FILTER_TYPES[..]), ("value", &["AND", "OR"][..])] {
                let known = obj
                    .get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|t| allowed.contains(&t.to_ascii_uppercase().as_str()));
                if !known {
                    obj.remove(key);
                }
            }
            if !obj.get("isNegated").is_some_and(Value::is_boolean) {
                obj.remove("isNegated");
            }
        }
        if let Ok(f) = normalize_filter(&f, "") {
            out.push(f);
        }
    }
    Value::Array(out).to_string()
}

type FieldErrors = Vec<(String, String, Value)>;

fn normalize_filter(f: &Value, at: &str) -> Result<Value, FieldErrors> {
    let Some(obj) = f.as_object() else {
        return Err(vec![(
            at.to_owned(),
            "a step filter must be an object {isNegated, type, value, children}".into(),
            f.clone(),
        )]);
    };
    let mut errors = Vec::new();
    let is_negated = match obj.get("isNegated") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            errors.push((
                format!("{at}.isNegated"),
                "isNegated must be a boolean".into(),
                other.clone(),
            ));
            false
        }
    };
    let kind = enum_member(obj, "type", &FILTER_TYPES, "GROUP", at, &mut errors);
    let join = enum_member(obj, "value", &["AND", "OR"], "AND", at, &mut errors);
    let mut children = Vec::new();
    match obj.get("children") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (j, c) in items.iter().enumerate() {
                match normalize_child(c, &format!("{at}.children[{j}]")) {
                    Ok(c) => children.push(c),
                    Err(mut e) => errors.append(&mut e),
                }
            }
        }
        Some(other) => errors.push((
            format!("{at}.children"),
            "children must be an array of {field, value, operator, on}".into(),
            other.clone(),
        )),
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(serde_json::json!({
        "isNegated": is_negated,
        "type": kind,
        "value": join,
        "children": children,
    }))
}

fn normalize_child(c: &Value, at: &str) -> Result<Value, FieldErrors> {
    let Some(obj) = c.as_object() else {
        return Err(vec![(
            at.to_owned(),
            "a filter condition must be an object {field, value, operator, on}".into(),
            c.clone(),
        )]);
    };
    let mut errors = Vec::new();
    let field = match obj.get("field") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        other => {
            errors.push((
                format!("{at}.field"),
                "field is required: a dotted path into the payload or the subscriber".into(),
                other.cloned().unwrap_or(Value::Null),
            ));
            String::new()
        }
    };
    let value = match obj.get("value") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(_)) => {
            errors.push((
                format!("{at}.value"),
                "value must be a string (a number, a boolean or a list is taken as its text)"
                    .into(),
                obj["value"].clone(),
            ));
            String::new()
        }
        Some(other) => other.to_string(),
    };
    let operator = enum_member(obj, "operator", &OPERATORS, "EQUAL", at, &mut errors);
    let on = match obj.get("on") {
        None | Some(Value::Null) => "payload".to_owned(),
        Some(Value::String(s)) if s == "payload" || s == "subscriber" => s.clone(),
        Some(other) => {
            errors.push((
                format!("{at}.on"),
                "on must be one of subscriber, payload".into(),
                other.clone(),
            ));
            String::new()
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(serde_json::json!({"field": field, "value": value, "operator": operator, "on": on}))
}

/// An enum member: absent or null → `default`; a string among `allowed` (any case) → its canonical
/// spelling; anything else → an error naming the allowed values.
fn enum_member(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    allowed: &[&str],
    default: &str,
    at: &str,
    errors: &mut FieldErrors,
) -> String {
    match obj.get(key) {
        None | Some(Value::Null) => default.to_owned(),
        Some(Value::String(s)) => {
            let upper = s.to_ascii_uppercase();
            if allowed.contains(&upper.as_str()) {
                upper
            } else {
                errors.push((
                    format!("{at}.{key}"),
                    format!("{key} must be one of {}", allowed.join(", ")),
                    Value::String(s.clone()),
                ));
                String::new()
            }
        }
        Some(other) => {
            errors.push((
                format!("{at}.{key}"),
                format!("{key} must be one of {}", allowed.join(", ")),
                other.clone(),
            ));
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn subscriber() -> Value {
        json!({
            "subscriberId": "sub-1",
            "firstName": "Ada",
            "lastName": null,
            "email": "Ada@Example.com",
            "locale": "en_US",
            "data": {"plan": "pro", "age": 36, "vip": true, "tags": ["beta", "eu"], "joined": "2024-03-01"}
        })
    }

    fn payload() -> Value {
        json!({
            "amount": 150,
            "price": "19.90",
            "status": "shipped",
            "country": "DE",
            "createdAt": "2026-11-22T08:15:00.000Z",
            "user": {"age": "17", "name": "Bob", "roles": ["admin", "editor"]},
            "items": [{"sku": "A1"}, {"sku": "B2"}],
            "flag": "true",
            "dotted.key": "yes",
            "empty": null
        })
    }

    fn part(on: &str, field: &str, operator: &str, value: &str) -> FieldFilterPart {
        serde_json::from_value(
            json!({"on": on, "field": field, "operator": operator, "value": value}),
        )
        .expect("valid part")
    }

    /// One payload condition.
    fn p(field: &str, operator: &str, value: &str) -> bool {
        part("payload", field, operator, value).matches(&subscriber(), &payload())
    }

    /// One subscriber condition.
    fn s(field: &str, operator: &str, value: &str) -> bool {
        part("subscriber", field, operator, value).matches(&subscriber(), &payload())
    }

    fn group(join: &str, negated: bool, children: Value) -> StepFilter {
        serde_json::from_value(json!({
            "isNegated": negated, "type": "GROUP", "value": join, "children": children
        }))
        .expect("valid filter")
    }

    #[test]
    fn equal_and_not_equal() {
        assert!(p("status", "EQUAL", "shipped"));
        assert!(!p("status", "EQUAL", "Shipped"));
        assert!(p("amount", "EQUAL", "150"));
        assert!(p("amount", "EQUAL", "150.0"));
        assert!(p("price", "EQUAL", "19.9"));
        assert!(p("flag", "EQUAL", "TRUE"));
        assert!(s("data.vip", "EQUAL", "true"));
        assert!(s("data.age", "EQUAL", "36"));
        assert!(!s("data.age", "EQUAL", "37"));
        assert!(p("status", "NOT_EQUAL", "pending"));
        assert!(!p("status", "NOT_EQUAL", "shipped"));
        assert!(!p("amount", "NOT_EQUAL", "150"));
    }

    #[test]
    fn ordering_operators_numbers_dates_and_text() {
        assert!(p("amount", "LARGER", "100"));
        assert!(!p("amount", "LARGER", "150"));
        assert!(p("amount", "LARGER_EQUAL", "150"));
        assert!(p("amount", "SMALLER", "1000"));
        assert!(!p("amount", "SMALLER", "9"), "numeric, not text, order");
        assert!(p("amount", "SMALLER_EQUAL", "150"));
        assert!(
            p("user.age", "SMALLER", "18"),
            "numeric text in the payload"
        );
        assert!(p("price", "LARGER", "9.5"));
        assert!(p("createdAt", "LARGER", "2026-11-01"));
        assert!(p("createdAt", "SMALLER", "2026-11-22T09:00:00+00:00"));
        assert!(!p("createdAt", "SMALLER", "2026-11-22T09:00:00+02:00"));
        assert!(s("data.joined", "SMALLER_EQUAL", "2024-03-01T00:00:00Z"));
        assert!(p("status", "LARGER", "pending"), "text order");
        assert!(!p("status", "SMALLER", "pending"));
    }

    #[test]
    fn like_and_not_like_ignore_case() {
        assert!(s("email", "LIKE", "@example.COM"));
        assert!(!s("email", "LIKE", "gmail"));
        assert!(s("email", "NOT_LIKE", "gmail"));
        assert!(!s("email", "NOT_LIKE", "ADA"));
        assert!(p("user.roles", "LIKE", "EDIT"));
    }

    #[test]
    fn in_and_not_in_with_json_and_comma_lists() {
        assert!(p("country", "IN", r#"["DE","FR"]"#));
        assert!(p("country", "IN", "FR, DE"));
        assert!(p("country", "IN", "[DE, AT]"));
        assert!(!p("country", "IN", "FR,AT"));
        assert!(p("amount", "IN", "[100, 150]"));
        assert!(p("country", "NOT_IN", "FR,AT"));
        assert!(!p("country", "NOT_IN", r#"["DE"]"#));
        assert!(!p("country", "IN", ""));
    }

    #[test]
    fn any_in_and_all_in_on_arrays() {
        assert!(s("data.tags", "ANY_IN", r#"["eu","us"]"#));
        assert!(!s("data.tags", "ANY_IN", "us,apac"));
        assert!(s("data.tags", "ALL_IN", "beta,eu"));
        assert!(!s("data.tags", "ALL_IN", "beta,eu,us"));
        assert!(p("user.roles", "ALL_IN", r#"["admin"]"#));
        assert!(
            p("country", "ANY_IN", "DE,FR"),
            "a scalar counts as a one-element array"
        );
    }

    #[test]
    fn between_and_not_between() {
        assert!(p("amount", "BETWEEN", "100,200"));
        assert!(p("amount", "BETWEEN", "[150, 150]"), "inclusive");
        assert!(!p("amount", "BETWEEN", "151,200"));
        assert!(p("amount", "NOT_BETWEEN", "1,10"));
        assert!(!p("amount", "NOT_BETWEEN", "100,200"));
        assert!(p("createdAt", "BETWEEN", "2026-11-01,2026-12-01"));
        assert!(!p("createdAt", "BETWEEN", r#"["2025-01-01","2025-12-31"]"#));
        assert!(!p("amount", "BETWEEN", "100"), "malformed bounds fail");
        assert!(
            !p("status", "BETWEEN", "a,z"),
            "text is neither number nor date"
        );
    }

    #[test]
    fn missing_fields_fail_positive_and_pass_negative_operators() {
        for op in [
            "EQUAL",
            "LARGER",
            "SMALLER",
            "LARGER_EQUAL",
            "SMALLER_EQUAL",
            "LIKE",
            "IN",
            "ANY_IN",
            "ALL_IN",
            "BETWEEN",
        ] {
            assert!(!p("nope", op, "1,2"), "{op} on a missing payload field");
            assert!(!p("empty", op, "1,2"), "{op} on a null payload field");
            assert!(!s("lastName", op, "1,2"), "{op} on a null subscriber field");
            assert!(
                !s("data.nope.deeper", op, "1,2"),
                "{op} on a missing nested field"
            );
        }
        for op in ["NOT_EQUAL", "NOT_IN", "NOT_LIKE", "NOT_BETWEEN"] {
            assert!(p("nope", op, "1,2"), "{op} on a missing field");
            assert!(
                s("data.nope", op, "1,2"),
                "{op} on a missing subscriber field"
            );
        }
    }

    #[test]
    fn nested_paths_indexes_and_prefixes() {
        assert!(p("user.name", "EQUAL", "Bob"));
        assert!(p("items.1.sku", "EQUAL", "B2"));
        assert!(!p("items.9.sku", "EQUAL", "B2"));
        assert!(p("dotted.key", "EQUAL", "yes"));
        assert!(
            p("payload.user.name", "EQUAL", "Bob"),
            "a redundant `payload.` prefix"
        );
        assert!(s("subscriber.data.plan", "EQUAL", "pro"));
        assert!(s("data.plan", "EQUAL", "pro"));
        assert!(
            !s("status", "EQUAL", "shipped"),
            "subscriber fields are not payload fields"
        );
        assert!(!p("firstName", "EQUAL", "Ada"));
        assert!(s("firstName", "EQUAL", "Ada"));
    }

    #[test]
    fn and_or_negation_and_empty() {
        let yes =
            json!({"on": "payload", "field": "status", "operator": "EQUAL", "value": "shipped"});
        let no =
            json!({"on": "subscriber", "field": "data.plan", "operator": "EQUAL", "value": "free"});
        let (sub, pay) = (subscriber(), payload());

        assert!(group("AND", false, json!([yes, yes])).passes(&sub, &pay));
        assert!(!group("AND", false, json!([yes, no])).passes(&sub, &pay));
        assert!(group("OR", false, json!([no, yes])).passes(&sub, &pay));
        assert!(!group("OR", false, json!([no, no])).passes(&sub, &pay));
        assert!(group("AND", true, json!([yes, no])).passes(&sub, &pay));
        assert!(!group("OR", true, json!([no, yes])).passes(&sub, &pay));
        assert!(group("AND", false, json!([])).passes(&sub, &pay));
        assert!(group("OR", false, json!([])).passes(&sub, &pay));

        let all = [
            group("OR", false, json!([yes, no])),
            group("AND", false, json!([yes])),
        ];
        assert!(passes(&all, &sub, &pay));
        let one_fails = [
            group("AND", false, json!([yes])),
            group("AND", false, json!([no])),
        ];
        assert!(!passes(&one_fails, &sub, &pay));
        assert!(passes(&[], &sub, &pay));
        assert!(!passes(&all, &Value::Null, &Value::Null));
    }

    #[test]
    fn deserialization_is_lenient_and_round_trips() {
        let f: StepFilter = serde_json::from_value(json!({
            "isNegated": false,
            "type": "TEXT",
            "value": "OR",
            "extra": {"ignored": true},
            "children": [
                {"field": "amount", "value": 150, "operator": "EQUAL", "on": "payload", "_id": "x"},
                {"field": "country", "value": ["DE", "FR"], "operator": "IN", "on": "payload"},
                {"field": "x", "value": "1", "operator": "IS_DEFINED", "on": "webhook"}
            ]
        }))
        .unwrap();
        assert_eq!(f.kind, Some(FilterType::Text));
        assert_eq!(f.value, FilterJoin::Or);
        assert_eq!(f.children[0].value, "150");
        assert_eq!(f.children[1].value, r#"["DE","FR"]"#);
        assert_eq!(f.children[2].operator, FilterOperator::Other);
        assert_eq!(f.children[2].on, FilterOn::Other);
        assert!(f.children[0].matches(&subscriber(), &payload()));
        assert!(f.children[1].matches(&subscriber(), &payload()));
        assert!(!f.children[2].matches(&subscriber(), &payload()));

        let minimal: StepFilter = serde_json::from_value(json!({})).unwrap();
        assert_eq!(minimal.value, FilterJoin::And);
        assert!(!minimal.is_negated && minimal.children.is_empty() && minimal.kind.is_none());

        let wire = serde_json::to_value(&f).unwrap();
        assert_eq!(wire["isNegated"], json!(false));
        assert_eq!(wire["type"], json!("TEXT"));
        assert_eq!(wire["value"], json!("OR"));
        assert_eq!(wire["children"][0]["operator"], json!("EQUAL"));
        assert_eq!(wire["children"][0]["on"], json!("payload"));
        let back: StepFilter = serde_json::from_value(wire).unwrap();
        assert_eq!(back.children[..2], f.children[..2]);
    }

    #[test]
    fn normalize_fills_defaults_and_names_bad_members() {
        let mut v = crate::error::Validation::new();
        let out = normalize(
            &mut v,
            "f",
            &[
                json!({"children": [{"field": "plan", "value": 5, "_id": "x"}]}),
                json!({"isNegated": true, "type": "text", "value": "or",
                       "children": [{"field": "tags", "value": ["a", "b"], "operator": "ANY_IN", "on": "subscriber"}]}),
            ],
        );
        assert!(v.is_empty(), "{v}");
        assert_eq!(
            out,
            [
                json!({"isNegated": false, "type": "GROUP", "value": "AND",
                       "children": [{"field": "plan", "value": "5", "operator": "EQUAL", "on": "payload"}]}),
                json!({"isNegated": true, "type": "TEXT", "value": "OR",
                       "children": [{"field": "tags", "value": "[\"a\",\"b\"]", "operator": "ANY_IN", "on": "subscriber"}]}),
            ]
        );
        // What normalize writes reads back as the evaluator reads it.
        let parsed: Vec<StepFilter> = out
            .iter()
            .map(|f| serde_json::from_value(f.clone()).unwrap())
            .collect();
        assert_eq!(parsed[1].children[0].operator, FilterOperator::AnyIn);

        let mut v = crate::error::Validation::new();
        let out = normalize(
            &mut v,
            "f",
            &[
                json!({"isNegated": "no", "type": "FANCY", "value": "XOR", "children": {}}),
                json!({"children": [{"value": "x", "operator": "SOUNDS_LIKE", "on": "webhook"}, 3]}),
                json!("filter"),
            ],
        );
        assert!(out.is_empty());
        let fields: Vec<&str> = v.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "f[0].isNegated",
                "f[0].type",
                "f[0].value",
                "f[0].children",
                "f[1].children[0].field",
                "f[1].children[0].operator",
                "f[1].children[0].on",
                "f[1].children[1]",
                "f[2]",
            ]
        );
        assert_eq!(v.0[1].value, json!("FANCY"));
    }

    #[test]
    fn wire_filters_make_old_rows_parse() {
        assert_eq!(wire_filters("[]"), "[]");
        assert_eq!(wire_filters("not json"), "[]");
        let old = r#"[{"on":"payload"},{"value":"and","type":"x","children":[
            {"field":"plan","value":"pro"},{"field":"a","operator":"IS_DEFINED","on":"webhook"}]}, 7]"#;
        let out: Value = serde_json::from_str(&wire_filters(old)).unwrap();
        assert_eq!(
            out,
            json!([
                {"isNegated": false, "type": "GROUP", "value": "AND", "children": []},
                {"isNegated": false, "type": "GROUP", "value": "AND",
                 "children": [{"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"}]}
            ])
        );
    }

    #[test]
    fn unknown_operator_or_source_behaves_like_a_missing_field() {
        let odd = part("webhook", "status", "EQUAL", "shipped");
        assert!(!odd.matches(&subscriber(), &payload()));
        let odd = part("tenant", "status", "NOT_EQUAL", "shipped");
        assert!(odd.matches(&subscriber(), &payload()));
        assert!(!p("status", "SOUNDS_LIKE", "shipped"));
    }
}
