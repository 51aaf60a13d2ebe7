//! Email providers.
//!
//! Each module turns one [`EmailMessage`] into one call of its provider's real API: SMTP through `lettre`
//! (`nodemailer`), the HTTP APIs through `reqwest` at the `baseUrl` credential or the public address.
//!
//! Provider overrides (`overrides.providers.<id>`) apply as Novu applies them: their fields are merged over a
//! JSON request body (objects deeply, anything else replaced; keys as given), then `_passthrough.body`;
//! `_passthrough.headers` and `_passthrough.query` are added to the request. Mailgun takes the fields of both as
//! extra form fields (`o:tag`, `v:…`; an array repeats its field). SMTP (`nodemailer`) ignores them.

mod mailersend;
mod mailgun;
mod nodemailer;
mod postmark;
mod resend;
mod sendgrid;
mod webhook;

use base64::Engine as _;
use reqwest::RequestBuilder;
use serde_json::{Map, Value};

use super::{http, Delivered, EmailMessage, Provider, ProviderError, SendContext};

/// Every supported email provider.
pub const ALL: &[&dyn Provider] = &[
    &nodemailer::Nodemailer,
    &sendgrid::Sendgrid,
    &mailgun::Mailgun,
    &postmark::Postmark,
    &resend::Resend,
    &mailersend::Mailersend,
    &webhook::EmailWebhook,
];

/// The email provider registered under `id`.
pub fn lookup(id: &str) -> Option<&'static dyn Provider> {
    ALL.iter().copied().find(|p| p.id() == id)
}

/// The sender address: the message's (overrides, else the `from` credential); a permanent error naming the
/// `from` credential when there is none.
fn sender(ctx: &SendContext<'_>, m: &EmailMessage) -> Result<String, ProviderError> {
    match &m.from {
        Some(from) if !from.trim().is_empty() => Ok(from.trim().to_owned()),
        _ => ctx.credentials.require("from"),
    }
}

/// `Name <address>` (the name quoted when it holds characters RFC 5322 reserves), or the bare address.
fn named(address: &str, name: Option<&str>) -> String {
    let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
        return address.to_owned();
    };
    let special = |c: char| "()<>[]:;@\\,.\"".contains(c);
    if name.chars().any(special) {
        let escaped = name.replace('\\', "\\\\").replace('"', "\\\"");
        format!("\"{escaped}\" <{address}>")
    } else {
        format!("{name} <{address}>")
    }
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The `_passthrough` object of the provider overrides, when there is one.
fn passthrough<'a>(ctx: &'a SendContext<'_>, key: &str) -> Option<&'a Map<String, Value>> {
    ctx.overrides
        .get("_passthrough")
        .and_then(|p| p.get(key))
        .and_then(Value::as_object)
}

/// The provider overrides' own fields (without `_passthrough`), then `_passthrough.body`, in that order.
fn override_fields<'a>(ctx: &'a SendContext<'_>) -> impl Iterator<Item = (&'a String, &'a Value)> {
    let own = ctx
        .overrides
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != "_passthrough");
    own.chain(passthrough(ctx, "body").into_iter().flatten())
}

/// Merges the provider overrides over a JSON request body (see the module documentation).
fn apply_overrides(ctx: &SendContext<'_>, body: &mut Value) {
    *body = super::with_overrides(std::mem::take(body), ctx.overrides);
}

/// Adds `_passthrough.headers` and `_passthrough.query` (string, number and boolean values) to a request.
fn passthrough_request(ctx: &SendContext<'_>, mut req: RequestBuilder) -> RequestBuilder {
    for (k, v) in passthrough(ctx, "headers").into_iter().flatten() {
        if let Some(v) = scalar(v) {
            req = req.header(k.as_str(), v);
        }
    }
    let query: Vec<(String, String)> = passthrough(ctx, "query")
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), scalar(v)?)))
        .collect();
    if !query.is_empty() {
        req = req.query(&query);
    }
    req
}

/// A JSON string, number or boolean as text.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// [`http::send`] for APIs that answer `202` with an empty body and give the message id only in the
/// response header `id_header` (SendGrid and MailerSend's `x-message-id`).
async fn send_with_header_id(
    req: RequestBuilder,
    what: &str,
    id_header: &str,
) -> Result<Delivered, ProviderError> {
    let answer = http::send(req, what).await?;
    Ok(Delivered {
        id: answer.header(id_header),
        raw: answer.raw,
        invalid_tokens: Vec::new(),
    })
}

/// Appends the error text of a provider's error body when [`http::send`]'s message lacks it (Postmark
/// spells it `Message`, with an `ErrorCode`).
fn with_error_detail(mut e: ProviderError) -> ProviderError {
    let body = e
        .raw
        .as_deref()
        .and_then(|r| serde_json::from_str::<Value>(r).ok())
        .and_then(|r| r.get("body").cloned());
    if let Some(body) = body {
        if let Some(summary) = http::error_summary(&body) {
            if !e.message.contains(&summary) {
                e.message = format!("{}: {summary}", e.message);
            }
        }
        if let Some(code) = body.get("ErrorCode").and_then(Value::as_i64) {
            e.message = format!("{} (ErrorCode {code})", e.message);
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sender_names_are_quoted_when_needed() {
        assert_eq!(named("a@x.io", None), "a@x.io");
        assert_eq!(named("a@x.io", Some(" ")), "a@x.io");
        assert_eq!(named("a@x.io", Some("Acme")), "Acme <a@x.io>");
        assert_eq!(
            named("a@x.io", Some("Acme, Inc. \"HQ\"")),
            "\"Acme, Inc. \\\"HQ\\\"\" <a@x.io>"
        );
    }

    #[test]
    fn passthrough_bodies_merge_deeply() {
        let body = json!({"from": {"email": "a@x.io"}, "subject": "s"});
        let overrides =
            json!({"from": {"name": "A"}, "_passthrough": {"body": {"tags": [1], "subject": "t"}}});
        let body = crate::providers::with_overrides(body, &overrides);
        assert_eq!(
            body,
            json!({"from": {"email": "a@x.io", "name": "A"}, "subject": "t", "tags": [1]})
        );
    }

    #[test]
    fn error_summaries_of_email_apis() {
        assert_eq!(
            http::error_summary(&json!({"errors": [{"message": "bad key", "field": null}]}))
                .as_deref(),
            Some("bad key")
        );
        assert_eq!(
            http::error_summary(&json!({"ErrorCode": 300, "Message": "Invalid email"})).as_deref(),
            Some("Invalid email")
        );
        assert_eq!(
            http::error_summary(&json!("Forbidden")).as_deref(),
            Some("Forbidden")
        );
        let e = with_error_detail(ProviderError {
            invalid_tokens: Vec::new(),
            raw: Some(http::raw_text(
                422,
                r#"{"ErrorCode": 406, "Message": "Inactive recipient"}"#,
            )),
            ..ProviderError::permanent("Postmark email answered 422 Unprocessable Entity")
        });
        assert_eq!(
            e.message,
            "Postmark email answered 422 Unprocessable Entity: Inactive recipient (ErrorCode 406)"
        );
    }
}
