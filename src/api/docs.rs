//! `GET /openapi.json` (generated from the handlers' annotations) and a self-contained API reference page
//! at `GET /docs` that renders it without any external script.

use std::sync::Arc;

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::openapi::OpenApi;
use utoipa::Modify;

use super::AppState;

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
    }
}

pub fn routes(openapi: Arc<OpenApi>) -> Router<AppState> {
    let json = Arc::new(openapi.to_pretty_json().unwrap_or_else(|_| "{}".to_owned()));
    Router::new()
        .route(
            "/openapi.json",
            get(move || {
                let json = json.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        json.as_str().to_owned(),
                    )
                        .into_response()
                }
            }),
        )
        .route("/docs", get(reference_page))
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
