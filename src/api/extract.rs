//! Extractors that turn bad input into the project's 422 body: JSON bodies, path parameters, and a query
//! parser that reads what clients really send (repeated keys, `key[]`, `2.0` integers, `+` for spaces).
//!
//! They are also the one place that refuses the NUL character (U+0000) in any string a client sends: a body's
//! strings and keys, path parameters, query keys and values. PostgreSQL cannot store it in `text` or `jsonb`,
//! so it is refused at the edge with a 422 on both databases alike (docs/decisions.md).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, RawPathParams, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use super::error::ApiError;
use crate::error::{Error, Validation};
use crate::service::limits::QUERY_VALUES;
use crate::service::over_cap;

/// A JSON body. The content type is not checked; an empty body counts as `{}`.
pub struct AppJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for AppJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| Error::bad_request(format!("could not read the request body: {e}")))?;
        parse_json(&bytes).map(AppJson).map_err(ApiError)
    }
}

/// Parses a JSON body into `T`. A body that does not fit is a 422 naming every offending field with its
/// value and what was expected, not only the first one serde stops at.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    if has_escaped_nul(bytes) {
        if let Ok(doc) = serde_json::from_slice::<Value>(bytes) {
            let mut v = Validation::new();
            report_nul(&mut v, &doc, &mut Vec::new());
            v.finish()?;
        }
    }
    // Every body is an object; serde would otherwise also read a struct from an array of its fields.
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        _ if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err() => {
            return Err(not_json());
        }
        _ => {
            return Err(Error::invalid(
                "body",
                "the body must be a JSON object",
                Value::Null,
            ))
        }
    }
    match serde_json::from_slice::<T>(bytes) {
        Ok(t) => Ok(t),
        Err(e) if e.is_syntax() || e.is_eof() => Err(not_json()),
        Err(_) => match serde_json::from_slice::<Value>(bytes) {
            Ok(doc) => Err(Error::Validation(every_problem::<T>(doc))),
            Err(_) => Err(not_json()),
        },
    }
}

/// Reads a `T` from `doc`, a part of a body already parsed (an item of a list whose items are judged one
/// by one): as [`parse_json`] does, every field that keeps it from being a `T`.
pub fn parse_value<T: DeserializeOwned>(doc: Value) -> Result<T, Validation> {
    if !doc.is_object() {
        let mut v = Validation::new();
        v.add("body", "each item must be a JSON object", doc);
        return Err(v);
    }
    match T::deserialize(&doc) {
        Ok(t) => Ok(t),
        Err(_) => Err(every_problem::<T>(doc)),
    }
}

/// The one message for a NUL character, wherever it is.
pub const NUL_MESSAGE: &str = "must not contain the NUL character (\\u0000)";

/// True when a JSON text holds the escape `\u0000` (a raw NUL byte is not valid JSON, so this is the only
/// way one reaches a string). Escapes are read in pairs, so `\\u0000` (a backslash, then `u0000`) is not one.
fn has_escaped_nul(bytes: &[u8]) -> bool {
    let mut i = 0;
    while let Some(at) = bytes[i..].iter().position(|b| *b == b'\\') {
        let escape = i + at;
        if bytes[escape + 1..].starts_with(b"u0000") {
            return true;
        }
        i = escape + 2;
        if i >= bytes.len() {
            return false;
        }
    }
    false
}

/// Adds every string and key of `doc` that holds a NUL character to `v`, each named by its location
/// (`payload.name`, `to[1]`); a key is reported at the object that holds it.
fn report_nul(v: &mut Validation, doc: &Value, location: &mut Vec<Segment>) {
    if v.0.len() >= MAX_REPORTED {
        return;
    }
    match doc {
        Value::String(s) if s.contains('\0') => {
            let field = field_name(location);
            v.add(&field, format!("{field} {NUL_MESSAGE}"), doc.clone());
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                location.push(Segment::Seq { index });
                report_nul(v, item, location);
                location.pop();
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                if key.contains('\0') {
                    let field = field_name(location);
                    v.add(
                        &field,
                        format!("{field}: a key {NUL_MESSAGE}"),
                        Value::from(key.as_str()),
                    );
                    continue;
                }
                location.push(Segment::Map { key: key.clone() });
                report_nul(v, item, location);
                location.pop();
            }
        }
        _ => {}
    }
}

fn not_json() -> Error {
    Error::invalid("body", "the body is not valid JSON", Value::Null)
}

/// At most this many fields are reported for one body.
const MAX_REPORTED: usize = 32;

/// Every field of `doc` that keeps it from being a `T`. serde stops at the first problem, so each one found
/// is reported and then patched over (the field removed, or replaced by a value of another JSON type) until
/// the document deserializes or a problem cannot be patched over. This runs only for bodies already refused.
fn every_problem<T: DeserializeOwned>(mut doc: Value) -> Validation {
    let mut v = Validation::new();
    while v.0.len() < MAX_REPORTED {
        let Some((location, message)) = first_problem::<T>(&doc) else {
            break;
        };
        let field = field_name(&location);
        if v.0.iter().any(|e| e.field == field) {
            break;
        }
        let value = lookup(&doc, &location).cloned().unwrap_or(Value::Null);
        v.add(&field, explain(&field, &message), value);
        if !patch_over::<T>(&mut doc, &location) {
            break;
        }
    }
    if v.is_empty() {
        v.add(
            "body",
            "the body does not have the expected shape",
            Value::Null,
        );
    }
    v
}

/// Where `doc` first fails to be a `T` (a missing field's own location included) and serde's message.
fn first_problem<T: DeserializeOwned>(doc: &Value) -> Option<(Vec<Segment>, String)> {
    let e = serde_path_to_error::deserialize::<_, T>(doc).err()?;
    let mut location: Vec<Segment> = e.path().iter().cloned().collect();
    let message = e.into_inner().to_string();
    if let Some(missing) = message
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
    {
        location.push(Segment::Map {
            key: missing.to_owned(),
        });
    }
    Some((location, message))
}

/// `credentials.deviceTokens[1]`; the document itself is `body`.
fn field_name(location: &[Segment]) -> String {
    let mut name = String::new();
    for segment in location {
        match segment {
            Segment::Map { key } if name.is_empty() => name.push_str(key),
            Segment::Map { key } => {
                name.push('.');
                name.push_str(key);
            }
            Segment::Seq { index } => name.push_str(&format!("[{index}]")),
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    if name.is_empty() {
        "body".to_owned()
    } else {
        name
    }
}

fn lookup<'a>(doc: &'a Value, location: &[Segment]) -> Option<&'a Value> {
    location.iter().try_fold(doc, |at, segment| match segment {
        Segment::Map { key } => at.get(key.as_str()),
        Segment::Seq { index } => at.get(*index),
        Segment::Enum { .. } | Segment::Unknown => None,
    })
}

/// Replaces the value at `location` (removing it first, if it is an object's key) so that `doc` no longer
/// fails there. False when nothing works, or the location cannot be reached.
fn patch_over<T: DeserializeOwned>(doc: &mut Value, location: &[Segment]) -> bool {
    let Some((last, parents)) = location.split_last() else {
        return false;
    };
    let here = field_name(location);
    let fails_here =
        |doc: &Value| first_problem::<T>(doc).is_some_and(|(l, _)| field_name(&l) == here);
    let stand_ins = [
        None,
        Some(Value::Null),
        Some(Value::from("")),
        Some(Value::from(0)),
        Some(Value::from(false)),
        Some(Value::Array(Vec::new())),
        Some(Value::Object(serde_json::Map::new())),
    ];
    for stand_in in stand_ins {
        let mut candidate = doc.clone();
        let Some(parent) = lookup_mut(&mut candidate, parents) else {
            return false;
        };
        match (last, parent, stand_in) {
            (Segment::Map { key }, Value::Object(map), None) => {
                map.remove(key.as_str());
            }
            (Segment::Map { key }, Value::Object(map), Some(x)) => {
                map.insert(key.clone(), x);
            }
            (Segment::Seq { index }, Value::Array(items), Some(x)) if *index < items.len() => {
                items[*index] = x;
            }
            _ => continue,
        }
        if !fails_here(&candidate) {
            *doc = candidate;
            return true;
        }
    }
    false
}

fn lookup_mut<'a>(doc: &'a mut Value, location: &[Segment]) -> Option<&'a mut Value> {
    location.iter().try_fold(doc, |at, segment| match segment {
        Segment::Map { key } => at.get_mut(key.as_str()),
        Segment::Seq { index } => at.get_mut(*index),
        Segment::Enum { .. } | Segment::Unknown => None,
    })
}

/// serde's message in the API's words: `email must be a string`, `channel must be one of: a, b`.
fn explain(field: &str, message: &str) -> String {
    if message.starts_with("missing field") {
        return format!("{field} is required");
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        if let Some((_, expected)) = rest.split_once(", expected ") {
            let choices = expected
                .trim_start_matches("one of ")
                .replace(" or ", ", ")
                .replace('`', "");
            return format!("{field} must be one of: {choices}");
        }
    }
    for prefix in ["invalid type: ", "invalid value: ", "invalid length "] {
        if let Some((_, expected)) = message
            .strip_prefix(prefix)
            .and_then(|r| r.rsplit_once(", expected "))
        {
            return format!("{field} must be {}", expected_type(expected));
        }
    }
    format!("{field}: {message}")
}

/// serde's name for an expected type, as a JSON type.
fn expected_type(expected: &str) -> &str {
    match expected {
        "a sequence" => "an array",
        "a map" => "an object",
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer",
        "u8" | "u16" | "u32" | "u64" | "usize" => "a non-negative integer",
        "f32" | "f64" => "a number",
        "unit" => "null",
        e if e.starts_with("struct ") || e.starts_with("a map ") => "an object",
        e => e,
    }
}

/// A path parameter (or a tuple of them).
pub struct AppPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for AppPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if parts.uri.path().contains("%00") {
            if let Ok(params) = RawPathParams::from_request_parts(parts, state).await {
                let mut v = Validation::new();
                for (name, value) in &params {
                    if value.contains('\0') {
                        v.add(name, format!("{name} {NUL_MESSAGE}"), value);
                    }
                }
                v.finish()?;
            }
        }
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(v)) => Ok(AppPath(v)),
            Err(e) => Err(ApiError(Error::invalid("path", e.body_text(), Value::Null))),
        }
    }
}

/// The query string as ordered key/value pairs. Unknown keys are simply never read.
#[derive(Debug, Clone, Default)]
pub struct QueryMap(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryMap {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let q = QueryMap::parse(parts.uri.query().unwrap_or(""));
        q.refuse_nul()?;
        Ok(q)
    }
}

impl QueryMap {
    pub fn parse(raw: &str) -> Self {
        Self(
            form_urlencoded::parse(raw.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// A 422 naming every query parameter whose name or value holds a NUL character (`%00`).
    fn refuse_nul(&self) -> Result<(), Error> {
        let mut v = Validation::new();
        for (key, value) in &self.0 {
            if key.contains('\0') {
                v.add(
                    "query",
                    format!("a query parameter's name {NUL_MESSAGE}"),
                    key.as_str(),
                );
            } else if value.contains('\0') {
                v.add(key, format!("{key} {NUL_MESSAGE}"), value.as_str());
            }
        }
        v.finish()
    }

    fn values<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == key || k.strip_suffix("[]") == Some(key))
            .map(|(_, v)| v.as_str())
    }

    /// Every parameter, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The first value of `key`; an empty value counts as absent.
    pub fn string(&self, key: &str) -> Option<String> {
        self.values(key).find(|v| !v.is_empty()).map(str::to_owned)
    }

    /// Every value of `key` (`k=a&k=b`, `k[]=a`), also splitting nothing: a comma is a literal character.
    /// More than [`QUERY_VALUES`] values are a problem added to `v`.
    pub fn list(&self, v: &mut Validation, key: &str) -> Vec<String> {
        let values: Vec<String> = self
            .values(key)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect();
        over_cap(v, key, values.len(), QUERY_VALUES);
        values
    }

    /// True when `key` appears at all, even empty (`contextKeys=` means "no context").
    pub fn has(&self, key: &str) -> bool {
        self.values(key).next().is_some()
    }

    /// The `contextKeys` asked for (`type:id`, sorted): `None` when the key is absent, none when present but
    /// empty (`contextKeys=` asks for what has no context). Problems are added to `v`.
    pub fn context_keys(&self, v: &mut Validation) -> Option<Vec<String>> {
        self.has("contextKeys").then(|| {
            let keys = self.list(v, "contextKeys");
            crate::domain::context::parse_context_keys(v, "contextKeys", &keys)
        })
    }

    /// An integer in `min..=max`; accepts `10` and `10.0`. Problems are added to `v`.
    pub fn int(&self, v: &mut Validation, key: &str, min: i64, max: i64) -> Option<i64> {
        let raw = self.string(key)?;
        let parsed = raw.parse::<i64>().ok().or_else(|| {
            raw.parse::<f64>()
                .ok()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
        });
        match parsed {
            None => {
                v.add(key, format!("{key} must be an integer"), raw);
                None
            }
            Some(n) if n < min => {
                v.add(key, format!("{key} must not be less than {min}"), raw);
                None
            }
            Some(n) if n > max => {
                v.add(key, format!("{key} must not be greater than {max}"), raw);
                None
            }
            Some(n) => Some(n),
        }
    }

    /// `true` or `false`.
    pub fn bool(&self, v: &mut Validation, key: &str) -> Option<bool> {
        let raw = self.string(key)?;
        match raw.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => {
                v.add(key, format!("{key} must be true or false"), raw);
                None
            }
        }
    }

    /// One of `allowed`.
    pub fn one_of(&self, v: &mut Validation, key: &str, allowed: &[&str]) -> Option<String> {
        let raw = self.string(key)?;
        if allowed.contains(&raw.as_str()) {
            Some(raw)
        } else {
            v.add(
                key,
                format!("{key} must be one of: {}", allowed.join(", ")),
                raw,
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn query_reads_repeated_keys_floats_and_plus() {
        let q = QueryMap::parse(
            "limit=10.0&channels=email&channels[]=sms&name=Ada+Lovelace&flag=true&empty=",
        );
        let mut v = Validation::new();
        assert_eq!(q.int(&mut v, "limit", 1, 100), Some(10));
        assert_eq!(q.list(&mut v, "channels"), ["email", "sms"]);
        assert_eq!(q.string("name").as_deref(), Some("Ada Lovelace"));
        assert_eq!(q.bool(&mut v, "flag"), Some(true));
        assert_eq!(q.string("empty"), None);
        assert!(q.has("empty"));
        assert!(v.is_empty());
    }

    #[test]
    fn query_reports_bad_values() {
        let q = QueryMap::parse("limit=2.5&page=-1&big=101&flag=yes");
        let mut v = Validation::new();
        assert_eq!(q.int(&mut v, "limit", 1, 100), None);
        assert_eq!(q.int(&mut v, "page", 0, 10), None);
        assert_eq!(q.int(&mut v, "big", 1, 100), None);
        assert_eq!(q.bool(&mut v, "flag"), None);
        let fields: Vec<_> = v.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["limit", "page", "big", "flag"]);
    }

    #[test]
    fn nul_escapes_are_found_and_named() {
        assert!(has_escaped_nul(br#"{"a": "x\u0000"}"#));
        assert!(
            has_escaped_nul(br#"{"a": "\\\u0000"}"#),
            "an escaped backslash, then NUL"
        );
        assert!(
            !has_escaped_nul(br#"{"a": "\\u0000"}"#),
            "an escaped backslash, then text"
        );
        assert!(!has_escaped_nul(br#"{"a": "\u0001", "b": "\n"}"#));
        assert!(!has_escaped_nul(br#"{"a": "\"#), "a backslash at the end");
        let fields = |body: &str| match parse_json::<Value>(body.as_bytes()).unwrap_err() {
            Error::Validation(v) => {
                let mut fields: Vec<_> = v.0.into_iter().map(|e| e.field).collect();
                fields.sort();
                fields
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(
            fields(
                r#"{"to": [{"a": "\u0000"}], "p": {"k\u0000": 1, "deep": {"x": ["", "\u0000"]}}}"#
            ),
            ["p", "p.deep.x[1]", "to[0].a"]
        );
        assert_eq!(fields(r#"{"\u0000": 1}"#), ["body"]);
        assert!(parse_json::<Value>(br#"{"a": "\\u0000"}"#).is_ok());
    }

    #[test]
    fn query_refuses_nul() {
        let q = QueryMap::parse("a=1&b=x%00&c%00=2");
        match q.refuse_nul().unwrap_err() {
            Error::Validation(v) => {
                let fields: Vec<_> = v.0.iter().map(|e| e.field.as_str()).collect();
                assert_eq!(fields, ["b", "query"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(QueryMap::parse("a=%01&b=%2500").refuse_nul().is_ok());
    }

    #[test]
    fn json_errors_name_the_field() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct In {
            name: String,
            inner: Option<Inner>,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Inner {
            n: i64,
        }
        let field = |body: &str| match parse_json::<In>(body.as_bytes()).unwrap_err() {
            Error::Validation(v) => v.0[0].field.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(field("{}"), "name");
        assert_eq!(field(r#"{"name": 3}"#), "name");
        assert_eq!(field(r#"{"name": "x", "inner": {"n": "x"}}"#), "inner.n");
        assert_eq!(field(r#"{"name": "x", "inner": {}}"#), "inner.n");
        assert_eq!(field("not json"), "body");
        assert_eq!(field(r#"["x", null]"#), "body");
        assert_eq!(field("null"), "body");
    }

    #[test]
    fn json_errors_list_every_field_with_its_value() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        #[serde(rename_all = "camelCase")]
        struct In {
            name: String,
            active: Option<bool>,
            tags: Option<Vec<String>>,
            inner: Option<Inner>,
            kind: Option<Kind>,
            count: Option<u32>,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Inner {
            n: i64,
            s: String,
        }
        #[derive(serde::Deserialize, Debug)]
        #[serde(rename_all = "lowercase")]
        enum Kind {
            Alpha,
            Beta,
        }
        let problems = |body: &str| match parse_json::<In>(body.as_bytes()).unwrap_err() {
            Error::Validation(v) => {
                v.0.into_iter()
                    .map(|e| (e.field, e.messages.join("; "), e.value))
                    .collect::<Vec<_>>()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(
            problems(
                r#"{"active": "yes", "tags": ["a", 2, "c", false], "inner": {"n": "x"}, "kind": "gamma",
                    "count": -1}"#
            ),
            // In the document's key order, missing fields last.
            vec![
                (
                    "active".into(),
                    "active must be a boolean".into(),
                    json!("yes")
                ),
                (
                    "count".into(),
                    "count must be a non-negative integer".into(),
                    json!(-1)
                ),
                (
                    "inner.n".into(),
                    "inner.n must be an integer".into(),
                    json!("x")
                ),
                ("inner.s".into(), "inner.s is required".into(), Value::Null),
                (
                    "kind".into(),
                    "kind must be one of: alpha, beta".into(),
                    json!("gamma")
                ),
                (
                    "tags[1]".into(),
                    "tags[1] must be a string".into(),
                    json!(2)
                ),
                (
                    "tags[3]".into(),
                    "tags[3] must be a string".into(),
                    json!(false)
                ),
                ("name".into(), "name is required".into(), Value::Null),
            ]
        );
        assert_eq!(
            problems(r#"{"name": "x", "inner": 5}"#),
            vec![("inner".into(), "inner must be an object".into(), json!(5))]
        );
    }
}
