//! Rendering each step type's controls, and the problems a preview reports instead of failing.

#[allow(clippy::wildcard_imports)]
use super::*;
// ---------------------------------------------------------------------------------------------
// Rendering per step type

pub(super) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub(super) fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

pub(super) fn example_for(field: &str) -> &'static str {
    match field.rsplit('.').next().unwrap_or(field) {
        "subject" => "\"Your order {{ payload.orderId }} has shipped\"",
        "body" => "\"Hi {{ subscriber.firstName }}, your order is on its way.\"",
        "avatar" => "\"https://example.com/avatar.png\"",
        "label" => "\"View order\"",
        "url" => "\"https://example.com/orders/{{ payload.orderId }}\"",
        "amount" => "5",
        "unit" => "\"minutes\"",
        "digestKey" => "\"{{ payload.orderId }}\"",
        "redirect" => "{\"url\": \"https://example.com/orders/{{ payload.orderId }}\", \"target\": \"_blank\"}",
        "primaryAction" | "secondaryAction" => {
            "{\"label\": \"View order\", \"redirect\": {\"url\": \"https://example.com/orders/{{ payload.orderId }}\"}}"
        }
        "data" => "{\"orderId\": \"{{ payload.orderId }}\"}",
        "lookBackWindow" => "{\"amount\": 10, \"unit\": \"minutes\"}",
        "method" => "\"POST\"",
        "headers" | "body_object" => "{\"x-order\": \"{{ payload.orderId }}\"}",
        "threshold" => "3",
        _ => "a value",
    }
}

pub(super) fn wrong_type(field: &str, expected: &str, got: &Value) -> PreviewError {
    PreviewError {
        title: "Invalid control value".to_owned(),
        message: format!(
            "`{field}` must be {expected}, but it is {}: {}",
            describe(got),
            short_json(got)
        ),
        hint: format!(
            "Set `{field}` to {expected}, for example {}.",
            example_for(field)
        ),
    }
}

pub(super) fn missing(step: StepType, field: &str) -> PreviewError {
    let what = match step {
        StepType::InApp => "in-app",
        StepType::HttpRequest => "HTTP request",
        other => other.as_str(),
    };
    PreviewError {
        title: "Missing required control".to_owned(),
        message: format!("The {what} step has no `{field}`: it is required and missing or empty."),
        hint: format!(
            "Add a `{field}` control value, for example {}.",
            example_for(field)
        ),
    }
}

/// A string control: `Ok(None)` when absent (or null), an error when it has another type, or
/// when it is required and absent or blank.
pub(super) fn text<'a>(
    controls: &'a Map<String, Value>,
    step: StepType,
    key: &str,
    required: bool,
) -> Result<Option<&'a str>, PreviewError> {
    match controls.get(key) {
        None | Some(Value::Null) if required => Err(missing(step, key)),
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if required && s.trim().is_empty() => Err(missing(step, key)),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(wrong_type(key, "text", other)),
    }
}

/// Renders the given controls (a sub-map) with error locations named by field.
pub(super) fn render(
    renderer: &Renderer,
    controls: Map<String, Value>,
    vars: &Value,
) -> Result<Map<String, Value>, PreviewError> {
    match renderer.render_value(&Value::Object(controls), vars)? {
        Value::Object(m) => Ok(m),
        _ => Ok(Map::new()),
    }
}

pub(super) fn pick(controls: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| {
            controls
                .get(*k)
                .filter(|v| !v.is_null())
                .map(|v| ((*k).to_owned(), v.clone()))
        })
        .collect()
}

pub(super) const TARGETS: [&str; 5] = ["_self", "_blank", "_parent", "_top", "_unfencedTop"];

/// A redirect control `{url, target?}`: type checks before rendering.
pub(super) fn check_redirect(field: &str, r: &Value) -> Result<(), PreviewError> {
    let Some(obj) = r.as_object() else {
        return Err(wrong_type(field, "an object {url, target}", r));
    };
    match obj.get("url") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(other) => return Err(wrong_type(&format!("{field}.url"), "text (a URL)", other)),
    }
    match obj.get("target") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if TARGETS.contains(&t.as_str()) => {}
        Some(other) => {
            return Err(PreviewError {
                title: "Invalid control value".to_owned(),
                message: format!(
                    "`{field}.target` is {}, which is not a link target",
                    short_json(other)
                ),
                hint: format!("Set `{field}.target` to one of {}.", TARGETS.join(", ")),
            })
        }
    }
    Ok(())
}

pub(super) fn is_url(s: &str) -> bool {
    if s.chars().any(char::is_whitespace) || s.is_empty() {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    url::Url::parse(s).is_ok_and(|u| match u.scheme() {
        "http" | "https" => u.host_str().is_some_and(|h| !h.is_empty()),
        _ => !u.cannot_be_a_base() || u.scheme() == "mailto" || u.scheme() == "tel",
    })
}

/// A rendered redirect: `None` when its url is empty (nothing to link), an error when the url is
/// not a URL.
pub(super) fn rendered_redirect(
    field: &str,
    r: Option<&Value>,
) -> Result<Option<Value>, PreviewError> {
    let Some(r) = r.and_then(Value::as_object) else {
        return Ok(None);
    };
    let url = r.get("url").and_then(Value::as_str).unwrap_or("").trim();
    if url.is_empty() {
        return Ok(None);
    }
    if !is_url(url) {
        return Err(PreviewError {
            title: "Invalid redirect URL".to_owned(),
            message: format!(
                "`{field}.url` renders to `{}`, which is not a URL",
                short_json(&Value::String(url.to_owned())).trim_matches('"')
            ),
            hint: "Use an absolute URL such as https://example.com/orders/{{ payload.orderId }}, or a \
                   path starting with / such as /inbox/{{ payload.id }}."
                .to_owned(),
        });
    }
    let mut out = json!({"url": url});
    if let Some(t) = r.get("target").filter(|t| t.is_string()) {
        out["target"] = t.clone();
    }
    Ok(Some(out))
}

pub(super) fn render_step(
    t: StepType,
    controls: &Map<String, Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Value, PreviewError> {
    match t {
        StepType::Email => {
            text(controls, t, "subject", true)?;
            text(controls, t, "body", false)?;
            text(controls, t, "editorType", false)?;
            let r = render(renderer, pick(controls, &["subject", "body"]), vars)?;
            Ok(json!({
                "subject": r.get("subject").cloned().unwrap_or(json!("")),
                "body": r.get("body").cloned().unwrap_or(json!("")),
            }))
        }
        StepType::Sms | StepType::Chat => {
            text(controls, t, "body", true)?;
            let r = render(renderer, pick(controls, &["body"]), vars)?;
            Ok(json!({"body": r.get("body").cloned().unwrap_or(json!(""))}))
        }
        StepType::Push => {
            text(controls, t, "subject", true)?;
            text(controls, t, "body", true)?;
            let r = render(renderer, pick(controls, &["subject", "body"]), vars)?;
            Ok(json!({
                "subject": r.get("subject").cloned().unwrap_or(json!("")),
                "body": r.get("body").cloned().unwrap_or(json!("")),
            }))
        }
        StepType::InApp => in_app(controls, vars, renderer),
        StepType::Delay | StepType::Digest | StepType::Throttle => {
            timing(t, controls, vars, renderer)
        }
        StepType::HttpRequest => http_request(controls, vars, renderer),
        StepType::Custom => Ok(Value::Object(render(renderer, controls.clone(), vars)?)),
    }
}

pub(super) fn in_app(
    controls: &Map<String, Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Value, PreviewError> {
    let t = StepType::InApp;
    text(controls, t, "body", true)?;
    text(controls, t, "subject", false)?;
    text(controls, t, "avatar", false)?;
    for a in ["primaryAction", "secondaryAction"] {
        let Some(action) = controls.get(a).filter(|v| !v.is_null()) else {
            continue;
        };
        let Some(obj) = action.as_object() else {
            return Err(wrong_type(a, "an object {label, redirect}", action));
        };
        match obj.get("label") {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(other) => return Err(wrong_type(&format!("{a}.label"), "text", other)),
        }
        if let Some(r) = obj.get("redirect").filter(|v| !v.is_null()) {
            check_redirect(&format!("{a}.redirect"), r)?;
        }
    }
    if let Some(r) = controls.get("redirect").filter(|v| !v.is_null()) {
        check_redirect("redirect", r)?;
    }
    if let Some(d) = controls
        .get("data")
        .filter(|v| !v.is_null() && !v.is_object())
    {
        return Err(wrong_type("data", "an object", d));
    }
    let r = render(
        renderer,
        pick(
            controls,
            &[
                "subject",
                "body",
                "avatar",
                "primaryAction",
                "secondaryAction",
                "redirect",
                "data",
            ],
        ),
        vars,
    )?;
    let mut out = Map::new();
    out.insert(
        "body".to_owned(),
        r.get("body").cloned().unwrap_or(json!("")),
    );
    for k in ["subject", "avatar"] {
        if let Some(v) = r
            .get(k)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        {
            out.insert(k.to_owned(), v.clone());
        }
    }
    for a in ["primaryAction", "secondaryAction"] {
        let Some(action) = r.get(a).and_then(Value::as_object) else {
            continue;
        };
        let label = action
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        let redirect = rendered_redirect(&format!("{a}.redirect"), action.get("redirect"))?;
        if label.is_empty() {
            if redirect.is_some() {
                return Err(PreviewError {
                    title: "Missing required control".to_owned(),
                    message: format!("`{a}` has a redirect but no `label`: a button needs text."),
                    hint: format!(
                        "Add `{a}.label`, for example {}, or remove `{a}`.",
                        example_for("label")
                    ),
                });
            }
            continue;
        }
        let mut o = json!({"label": label});
        if let Some(redirect) = redirect {
            o["redirect"] = redirect;
        }
        out.insert(a.to_owned(), o);
    }
    if let Some(redirect) = rendered_redirect("redirect", r.get("redirect"))? {
        out.insert("redirect".to_owned(), redirect);
    }
    if let Some(d) = r.get("data").filter(|d| d.is_object()) {
        out.insert("data".to_owned(), d.clone());
    }
    Ok(Value::Object(out))
}

/// An amount: a non-negative number (also given as numeric text, or Liquid rendering to one).
pub(super) fn amount(
    field: &str,
    raw: Option<&Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Option<Value>, PreviewError> {
    match raw {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_f64().is_some_and(|f| f >= 0.0) => {
            Ok(Some(Value::Number(n.clone())))
        }
        Some(Value::String(s)) => {
            let rendered = renderer
                .render_str(s, vars)
                .map_err(|e| PreviewError::from(e.in_field(field.to_owned())))?;
            let trimmed = rendered.trim();
            if let Ok(i) = trimmed.parse::<u64>() {
                Ok(Some(json!(i)))
            } else if let Some(f) = trimmed
                .parse::<f64>()
                .ok()
                .filter(|f| *f >= 0.0 && f.is_finite())
            {
                Ok(Some(json!(f)))
            } else {
                Err(wrong_type(
                    field,
                    "a non-negative number",
                    &Value::String(rendered),
                ))
            }
        }
        Some(other) => Err(wrong_type(field, "a non-negative number", other)),
    }
}

pub(super) fn unit(field: &str, raw: Option<&Value>) -> Result<Option<Value>, PreviewError> {
    match raw {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(u)) if TIME_UNITS.contains(&u.as_str()) => Ok(Some(json!(u))),
        Some(other) => Err(PreviewError {
            title: "Invalid control value".to_owned(),
            message: format!(
                "`{field}` is {}, which is not a time unit",
                short_json(other)
            ),
            hint: format!("Set `{field}` to one of {}.", TIME_UNITS.join(", ")),
        }),
    }
}

/// delay, digest and throttle: `amount`, `unit` (required unless the step is scheduled by a path
/// or a cron expression), digest `digestKey` and `lookBackWindow`, throttle `threshold`.
pub(super) fn timing(
    t: StepType,
    controls: &Map<String, Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Value, PreviewError> {
    let kind = text(controls, t, "type", false)?.unwrap_or("regular");
    let scheduled = (t == StepType::Delay && kind == "scheduled") || kind == "timed";
    let mut out = Map::new();
    let a = amount("amount", controls.get("amount"), vars, renderer)?;
    let u = unit("unit", controls.get("unit"))?;
    match (a, u) {
        (Some(a), Some(u)) => {
            out.insert("amount".to_owned(), a);
            out.insert("unit".to_owned(), u);
        }
        (None, _) if !scheduled => return Err(missing(t, "amount")),
        (_, None) if !scheduled => return Err(missing(t, "unit")),
        _ => {}
    }
    if kind != "regular" {
        out.insert("type".to_owned(), json!(kind));
    }
    for k in ["delayPath", "cron"] {
        if let Some(v) = text(controls, t, k, false)? {
            out.insert(k.to_owned(), json!(v));
        }
    }
    if scheduled
        && !out.contains_key("cron")
        && !out.contains_key("delayPath")
        && !out.contains_key("amount")
    {
        let field = if t == StepType::Delay {
            "delayPath"
        } else {
            "cron"
        };
        return Err(missing(t, field));
    }
    if t == StepType::Digest {
        if let Some(key) = text(controls, t, "digestKey", false)? {
            let rendered = renderer
                .render_str(key, vars)
                .map_err(|e| PreviewError::from(e.in_field("digestKey".to_owned())))?;
            out.insert("digestKey".to_owned(), json!(rendered));
        }
        if let Some(w) = controls.get("lookBackWindow").filter(|v| !v.is_null()) {
            let Some(obj) = w.as_object() else {
                return Err(wrong_type("lookBackWindow", "an object {amount, unit}", w));
            };
            let wa = amount("lookBackWindow.amount", obj.get("amount"), vars, renderer)?
                .ok_or_else(|| missing(t, "lookBackWindow.amount"))?;
            let wu = unit("lookBackWindow.unit", obj.get("unit"))?
                .ok_or_else(|| missing(t, "lookBackWindow.unit"))?;
            out.insert(
                "lookBackWindow".to_owned(),
                json!({"amount": wa, "unit": wu}),
            );
        }
        if kind == "backoff" {
            if let Some(a) = amount(
                "backoffAmount",
                controls.get("backoffAmount"),
                vars,
                renderer,
            )? {
                out.insert("backoffAmount".to_owned(), a);
            }
            if let Some(u) = unit("backoffUnit", controls.get("backoffUnit"))? {
                out.insert("backoffUnit".to_owned(), u);
            }
        }
    }
    if t == StepType::Throttle {
        match controls.get("threshold") {
            None | Some(Value::Null) => {}
            Some(v) if v.as_u64().is_some_and(|n| n >= 1) => {
                out.insert("threshold".to_owned(), v.clone());
            }
            Some(other) => return Err(wrong_type("threshold", "a positive whole number", other)),
        }
    }
    Ok(Value::Object(out))
}

pub(super) fn http_request(
    controls: &Map<String, Value>,
    vars: &Value,
    renderer: &Renderer,
) -> Result<Value, PreviewError> {
    let t = StepType::HttpRequest;
    text(controls, t, "url", true)?;
    if let Some(m) = text(controls, t, "method", false)? {
        if !matches!(
            m.to_ascii_uppercase().as_str(),
            "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
        ) {
            return Err(PreviewError {
                title: "Invalid control value".to_owned(),
                message: format!(
                    "`method` is \"{m}\", which is not an HTTP method this step can send"
                ),
                hint: "Set `method` to one of GET, POST, PUT, PATCH, DELETE.".to_owned(),
            });
        }
    }
    for k in ["headers", "body"] {
        if let Some(v) = controls
            .get(k)
            .filter(|v| !v.is_null() && !v.is_object() && !v.is_array())
        {
            return Err(wrong_type(k, "an object of key/value pairs", v));
        }
    }
    let r = render(
        renderer,
        pick(controls, &["method", "url", "headers", "body"]),
        vars,
    )?;
    let url = r.get("url").and_then(Value::as_str).unwrap_or("").trim();
    if !(url.starts_with("http://") || url.starts_with("https://")) || !is_url(url) {
        return Err(PreviewError {
            title: "Invalid URL".to_owned(),
            message: format!("`url` renders to `{url}`, which is not an absolute http(s) URL"),
            hint:
                "Use an absolute URL such as https://api.example.com/orders/{{ payload.orderId }}."
                    .to_owned(),
        });
    }
    let method = r
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("POST")
        .to_ascii_uppercase();
    let mut out = json!({"method": method, "url": url});
    if let Some(h) = r.get("headers") {
        out["headers"] = h.clone();
    }
    out["body"] = request_body(&method, r.get("body"));
    Ok(out)
}
