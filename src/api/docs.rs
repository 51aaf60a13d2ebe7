//! `GET /openapi.json` (generated from the handlers' annotations) and a self-contained API reference page
//! at `GET /docs` that renders it without any external script.
//!
//! The document describes the wire of the active profile (design.md §3). The annotations describe the `spec`
//! wire; [`for_profile`] is the one place that rewrites the generated document for `novu`: single objects
//! and plain arrays inside `{data: …}` (pages are not wrapped), identifiers spelled `novu…`.

use std::sync::Arc;

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::openapi::{OpenApi, RefOr};
use utoipa::Modify;

use super::request_log::RouteLayer;
use super::AppState;
use crate::config::WireProfile;

/// Declares the `Authorization: ApiKey <key>` scheme.
pub struct ApiKeyAuth;

impl Modify for ApiKeyAuth {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "ApiKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Authorization",
                "`ApiKey <secret key>`",
            ))),
        );
        components.add_security_scheme(
            "InboxSession",
            SecurityScheme::Http(
                utoipa::openapi::security::HttpBuilder::new()
                    .scheme(utoipa::openapi::security::HttpAuthScheme::Bearer)
                    .description(Some("The token of `POST /v1/inbox/session`"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "SvixToken",
            SecurityScheme::Http(
                utoipa::openapi::security::HttpBuilder::new()
                    .scheme(utoipa::openapi::security::HttpAuthScheme::Bearer)
                    .description(Some(
                        "The environment's API key, as the Svix clients send their token",
                    ))
                    .build(),
            ),
        );
    }
}

/// The schema of a trigger's `to`: a subscriberId, a subscriber object, or an array of either.
pub fn recipients_schema() -> Schema {
    let one = || {
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some("A subscriberId")),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property(
                        "subscriberId",
                        ObjectBuilder::new().schema_type(Type::String),
                    )
                    .required("subscriberId")
                    .additional_properties(Some(
                        utoipa::openapi::schema::AdditionalProperties::FreeForm(true),
                    ))
                    .description(Some("A subscriber, created or updated with these fields")),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property(
                        "type",
                        ObjectBuilder::new()
                            .schema_type(Type::String)
                            .enum_values(Some(["Topic"])),
                    )
                    .property("topicKey", ObjectBuilder::new().schema_type(Type::String))
                    .property(
                        "exclude",
                        ArrayBuilder::new()
                            .items(ObjectBuilder::new().schema_type(Type::String))
                            .description(Some("subscriberIds of the topic not to reach")),
                    )
                    .required("type")
                    .required("topicKey")
                    .description(Some(
                        "Every subscriber of a topic (each subscriber reached once per trigger)",
                    )),
            )
    };
    Schema::OneOf(
        one()
            .item(ArrayBuilder::new().items(RefOr::T(Schema::OneOf(one().build()))))
            .description(Some(
                "A subscriberId, a subscriber object (upserted), a topic, or an array of them",
            ))
            .build(),
    )
}

/// The document as served under `profile` (see the module's documentation), as JSON text.
pub fn for_profile(openapi: &OpenApi, profile: WireProfile) -> String {
    let mut doc = match serde_json::to_value(openapi) {
        Ok(doc) => doc,
        Err(_) => return "{}".to_owned(),
    };
    merge_flattened(&mut doc);
    add_common_responses(&mut doc);
    envelope_single_bodies(&mut doc, profile);
    if profile == WireProfile::Novu {
        doc = spell_novu(doc);
    }
    serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".to_owned())
}

/// A schema with a `#[serde(flatten)]`ed inline struct (the subscriber profile in `SubscriberOut`) is
/// generated as `allOf` of inline objects: it is written, wherever it is, as the one object clients see,
/// with the properties and required fields of its parts and its own description.
fn merge_flattened(doc: &mut Value) {
    match doc {
        Value::Object(map) => {
            map.values_mut().for_each(merge_flattened);
            let inline =
                |p: &Value| p.get("type") == Some(&json!("object")) && p.get("$ref").is_none();
            let Some(Value::Array(parts)) = map.get("allOf") else {
                return;
            };
            if !parts.iter().all(inline) {
                return;
            }
            let Some(Value::Array(parts)) = map.remove("allOf") else {
                return;
            };
            let (mut properties, mut required) = (Map::new(), Vec::new());
            for part in parts {
                let Value::Object(part) = part else { continue };
                for (key, value) in part {
                    match (key.as_str(), value) {
                        ("properties", Value::Object(p)) => properties.extend(p),
                        ("required", Value::Array(r)) => required.extend(r),
                        // A part's description is its type's, not this schema's.
                        ("description", _) => {}
                        (_, value) => {
                            map.entry(key).or_insert(value);
                        }
                    }
                }
            }
            map.insert("properties".into(), Value::Object(properties));
            if !required.is_empty() {
                map.insert("required".into(), Value::Array(required));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(merge_flattened),
        _ => {}
    }
}

/// The largest request body the server reads (answered with 413 beyond it).
pub const BODY_LIMIT_TEXT: &str = "2 MB";

/// Adds the responses that the edge of the server, not a handler, can give, so that the document lists
/// every status the server sends: 401 (no or a bad key) and 429 (rate limit) on every authenticated
/// operation; 413 (body over the limit) and 422 (a body that does not fit, a NUL character) on every
/// operation with a body; 422 (a bad or NUL-holding value) on every operation with parameters; 400 on
/// every cursor list (`after` and `before` together). Every error response without content gets the
/// error body's schema, `ErrorBody`.
fn add_common_responses(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    let public = json!([{}]);
    for item in paths.values_mut().filter_map(Value::as_object_mut) {
        for op in item.values_mut().filter_map(Value::as_object_mut) {
            let authenticated = op.get("security") != Some(&public);
            let has_body = op.contains_key("requestBody");
            let names: Vec<String> = op
                .get("parameters")
                .and_then(Value::as_array)
                .map(|ps| {
                    ps.iter()
                        .filter_map(|p| p.get("name").and_then(Value::as_str))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let cursor = names.iter().any(|n| n == "after") && names.iter().any(|n| n == "before");
            let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                continue;
            };
            let mut add = |status: &str, description: &str| {
                responses
                    .entry(status)
                    .or_insert_with(|| json!({ "description": description }));
            };
            if authenticated {
                add("401", "Missing or invalid `Authorization: ApiKey <key>`");
                add(
                    "429",
                    "Rate limit exceeded; `Retry-After` says when to try again",
                );
            }
            if has_body {
                let too_large = format!("The body is larger than {BODY_LIMIT_TEXT}");
                add("413", &too_large);
            }
            // The API's extractors; the public unsubscribe pages answer any refusal with a 400 page.
            if authenticated && (has_body || !names.is_empty()) {
                add(
                    "422",
                    "Invalid body, path or query (the `errors` member names each field)",
                );
            }
            if cursor {
                add("400", "Both `after` and `before` were given");
            }
            for (status, response) in responses.iter_mut() {
                if status.starts_with('2') {
                    continue;
                }
                if let Some(r) = response.as_object_mut() {
                    r.entry("content").or_insert_with(|| {
                        json!({ "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } } })
                    });
                }
            }
        }
    }
    let schemas = doc
        .as_object_mut()
        .map(|d| d.entry("components").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
        .map(|c| c.entry("schemas").or_insert_with(|| json!({})));
    if let Some(Value::Object(schemas)) = schemas {
        schemas.insert("ErrorBody".into(), error_body_schema());
    }
}

/// Every error body (design.md §3): `errors` on a 422, `errorId` on a 5xx, other members on some 400s.
fn error_body_schema() -> Value {
    json!({
        "type": "object",
        "required": ["statusCode", "timestamp", "path", "message", "error"],
        "properties": {
            "statusCode": { "type": "integer" },
            "timestamp": { "type": "string" },
            "path": { "type": "string" },
            "message": { "type": "string" },
            "error": { "type": "string" },
            "errors": { "description": "On a 422: per field, `{messages, value}`" },
            "errorId": { "type": "string", "description": "Set on a 5xx; the log has the details" }
        }
    })
}

/// Wraps as `{data: …}` the success bodies that `wire::Reply` sends so: the Inbox's (`/v1/inbox/…`) under
/// every profile, every other single body under `novu`. A page (`{data, next, …}`, `{data, hasMore, …}`) is
/// never wrapped, nor a body that is `{data}` alone (the Inbox's counts).
fn envelope_single_bodies(doc: &mut Value, profile: WireProfile) {
    let schemas = doc
        .pointer("/components/schemas")
        .cloned()
        .unwrap_or(Value::Null);
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, operation) in paths.iter_mut() {
        let inbox = path.starts_with("/v1/inbox/");
        if !inbox && profile != WireProfile::Novu {
            continue;
        }
        let Some(operation) = operation.as_object_mut() else {
            continue;
        };
        for op in operation.values_mut() {
            let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                continue;
            };
            for (status, response) in responses.iter_mut() {
                if !status.starts_with('2') {
                    continue;
                }
                let Some(schema) = response.pointer_mut("/content/application~1json/schema") else {
                    continue;
                };
                let props = properties(schema, &schemas).and_then(Value::as_object);
                let has = |name: &str| props.is_some_and(|p| p.contains_key(name));
                let alone = props.is_some_and(|p| p.len() == 1);
                let enveloped = has("data") && (alone || has("next") || has("hasMore"));
                if !enveloped {
                    let inner = schema.take();
                    *schema = json!({
                        "type": "object",
                        "required": ["data"],
                        "properties": { "data": inner },
                    });
                }
            }
        }
    }
}

/// The properties of an object schema (following a `$ref` into the components).
fn properties<'a>(schema: &'a Value, schemas: &'a Value) -> Option<&'a Value> {
    let resolved = match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix("#/components/schemas/")
            .and_then(|name| schemas.get(name))
            .unwrap_or(schema),
        None => schema,
    };
    resolved.get("properties")
}

/// Every identifier spelled as the `novu` profile writes it (property names, enum values, examples): `svc` →
/// `novu`, `svc-…` → `novu-…`, `svcSignature` → `novuSignature`. Descriptions are prose that may name both
/// spellings: they stay as written.
fn spell_novu(value: Value) -> Value {
    fn spell(s: &str) -> String {
        if s == "svc" {
            return "novu".to_owned();
        }
        s.replace("svcSignature", "novuSignature")
            .replace("svc-", "novu-")
    }
    match value {
        Value::String(s) => Value::String(spell(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(spell_novu).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("description", Value::String(text)) => (k, Value::String(text)),
                    (_, v) => (spell(&k), spell_novu(v)),
                })
                .collect::<Map<String, Value>>(),
        ),
        other => other,
    }
}

/// `/openapi.json` (for `profile`, rendered once here) and `/docs`.
pub fn routes(openapi: OpenApi, profile: WireProfile) -> Router<AppState> {
    let json: Arc<str> = for_profile(&openapi, profile).into();
    Router::new()
        .route(
            "/openapi.json",
            get(move || {
                let json = json.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        json.as_ref().to_owned(),
                    )
                        .into_response()
                }
            })
            .layer(RouteLayer::new("/openapi.json")),
        )
        .route("/docs", get(reference_page).layer(RouteLayer::new("/docs")))
}

async fn reference_page() -> Response {
    Html(REFERENCE_PAGE).into_response()
}

const REFERENCE_PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Tidings API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f7f8fa; }
 header { background: #1d2330; color: #fff; padding: 16px 32px; }
 main { max-width: 1000px; margin: 0 auto; padding: 16px 32px; }
 details { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; margin: 8px 0; }
 summary { cursor: pointer; padding: 10px 14px; font-family: ui-monospace, monospace; }
 .m { display: inline-block; min-width: 64px; font-weight: 700; }
 .get { color: #1769aa } .post { color: #2e7d32 } .put { color: #8d6e00 } .patch { color: #6a1b9a } .delete { color: #c62828 }
 .body { padding: 0 14px 12px; }
 pre { background: #f0f2f5; padding: 8px; overflow: auto; border-radius: 4px; }
 h2 { margin-top: 28px; }
 input { width: 100%; padding: 8px; font-size: 15px; box-sizing: border-box; }
</style>
</head>
<body>
<header><strong>Tidings</strong> API reference &mdash; <a style="color:#9cf" href="/openapi.json">openapi.json</a></header>
<main>
<p>Every route except the health checks needs <code>Authorization: ApiKey &lt;secret key&gt;</code>.</p>
<input id="filter" placeholder="Filter by path or summary">
<div id="ops">Loading&hellip;</div>
</main>
<script>
const esc = s => String(s ?? '').replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
function resolve(doc, schema) {
  if (schema && schema.$ref) { const name = schema.$ref.split('/').pop(); return {name, schema: doc.components.schemas[name]}; }
  return {name: null, schema};
}
function render(doc) {
  const groups = {};
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = (op.tags && op.tags[0]) || 'Other';
      (groups[tag] = groups[tag] || []).push({path, method, op});
    }
  }
  let html = '';
  for (const [tag, ops] of Object.entries(groups)) {
    html += `<h2>${esc(tag)}</h2>`;
    for (const {path, method, op} of ops) {
      const params = (op.parameters || []).map(p => `<li><code>${esc(p.name)}</code> (${esc(p.in)}${p.required ? ', required' : ''}) ${esc(p.description)}</li>`).join('');
      let body = '';
      const content = op.requestBody && op.requestBody.content && op.requestBody.content['application/json'];
      if (content) { const r = resolve(doc, content.schema); body = `<p>Body: <code>${esc(r.name || 'object')}</code></p><pre>${esc(JSON.stringify(r.schema, null, 2))}</pre>`; }
      const responses = Object.entries(op.responses || {}).map(([code, r]) => `<li><code>${esc(code)}</code> ${esc(r.description)}</li>`).join('');
      html += `<details data-k="${esc((path + ' ' + (op.summary || op.description || '')).toLowerCase())}"><summary><span class="m ${method}">${method.toUpperCase()}</span>${esc(path)} <span style="color:#667">${esc(op.summary || '')}</span></summary>
        <div class="body"><p>${esc(op.description || '')}</p>${params ? `<ul>${params}</ul>` : ''}${body}<p>Responses:</p><ul>${responses}</ul></div></details>`;
    }
  }
  document.getElementById('ops').innerHTML = html;
}
fetch('/openapi.json').then(r => r.json()).then(render);
document.getElementById('filter').addEventListener('input', e => {
  const q = e.target.value.toLowerCase();
  document.querySelectorAll('details').forEach(d => { d.style.display = d.dataset.k.includes(q) ? '' : 'none'; });
});
</script>
</body>
</html>
"#;
