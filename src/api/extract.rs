//! Extractors that turn bad input into the project's 422 body: JSON bodies, path parameters, and a query
//! parser that reads what clients really send (repeated keys, `key[]`, `2.0` integers, `+` for spaces).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::ApiError;
use crate::error::{Error, Validation};

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

/// Parses a JSON body into `T`, reporting the failing field path in a 422.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    // Every body is an object; serde would otherwise also read a struct from an array of its fields.
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        _ if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err() => {
            return Err(Error::invalid(
                "body",
                "the body is not valid JSON",
                Value::Null,
            ));
        }
        _ => {
            return Err(Error::invalid(
                "body",
                "the body must be a JSON object",
                Value::Null,
            ))
        }
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = inner.to_string();
        let field = match message
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next())
        {
            _ if inner.is_syntax() || inner.is_eof() => "body".to_owned(),
            Some(missing) if path == "." => missing.to_owned(),
            Some(missing) => format!("{path}.{missing}"),
            None if path == "." => "body".to_owned(),
            None => path,
        };
        let text = match message.find(" at line ") {
            Some(i) => message[..i].to_owned(),
            None => message,
        };
        Error::invalid(&field, text, Value::Null)
    })
}

/// A path parameter (or a tuple of them).
pub struct AppPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for AppPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
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
        Ok(QueryMap::parse(parts.uri.query().unwrap_or("")))
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

    fn values<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == key || k.strip_suffix("[]") == Some(key))
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key`; an empty value counts as absent.
    pub fn string(&self, key: &str) -> Option<String> {
        self.values(key).find(|v| !v.is_empty()).map(str::to_owned)
    }

    /// Every value of `key` (`k=a&k=b`, `k[]=a`), also splitting nothing: a comma is a literal character.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.values(key)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// True when `key` appears at all, even empty (`contextKeys=` means "no context").
    pub fn has(&self, key: &str) -> bool {
        self.values(key).next().is_some()
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

    #[test]
    fn query_reads_repeated_keys_floats_and_plus() {
        let q = QueryMap::parse(
            "limit=10.0&channels=email&channels[]=sms&name=Ada+Lovelace&flag=true&empty=",
        );
        let mut v = Validation::new();
        assert_eq!(q.int(&mut v, "limit", 1, 100), Some(10));
        assert_eq!(q.list("channels"), ["email", "sms"]);
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
}
