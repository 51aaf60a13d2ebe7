//! `/v1/unsubscribe/{token}`: the one-click unsubscribe link of an email, without an API key (mail
//! providers call it; the signed token is the credential). `GET` shows a page and never changes anything
//! (mail scanners fetch links); `POST` turns email off: RFC 8058's one-click request (body
//! `List-Unsubscribe=One-Click`) or the page's first button for the link's workflow, the page's second button
//! (`scope=all`) for every workflow. Every answer is a small self-contained HTML page.
//!
//! The token is a bearer credential: nothing here logs it or the path that holds it (the request log names
//! the route template; an internal error is logged with the template, not the path).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::api::AppState;
use crate::error::Error;
use crate::render::email_blocks::escape;
use crate::service::unsubscribe::{self as service, Scope, Target};

/// The route, as logged.
const ROUTE: &str = "/v1/unsubscribe/{token}";

/// The page of an unsubscribe link: what it unsubscribes from, a button that does it and one that turns
/// off all email. Changes nothing.
#[utoipa::path(get, path = "/v1/unsubscribe/{token}", tag = "Unsubscribe", security(()),
    params(("token" = String, Path, description = "The signed token of an email's unsubscribe link")),
    responses((status = 200, description = "An HTML page whose buttons unsubscribe", content_type = "text/html"),
        (status = 400, description = "An invalid or altered link, or one whose subscriber or workflow is gone or can no longer be unsubscribed from (HTML page)", content_type = "text/html")))]
pub async fn unsubscribe_page(
    State(state): State<AppState>,
    token: Result<Path<String>, PathRejection>,
) -> Response {
    let Ok(Path(token)) = token else {
        return error_page(service::invalid_link());
    };
    match service::target(&state.store, &token).await {
        Ok(t) => {
            let mut body = format!(
                "<p>This link unsubscribes you from the emails of <strong>{}</strong>.</p>",
                text(&t.workflow.name)
            );
            body.push_str(
                "<form method=\"post\">\
                 <p><button class=\"primary\" name=\"scope\" value=\"workflow\">Unsubscribe from these emails</button></p>\
                 <p><button name=\"scope\" value=\"all\">Unsubscribe from all emails</button></p>\
                 </form>",
            );
            page(StatusCode::OK, "Unsubscribe", &body)
        }
        Err(e) => error_page(e),
    }
}

/// Turns email off for the link's subscriber: in its workflow (no `scope`, or `scope=workflow`: the one-click
/// request), or in every workflow (`scope=all`). Idempotent.
#[utoipa::path(post, path = "/v1/unsubscribe/{token}", tag = "Unsubscribe", security(()),
    params(("token" = String, Path, description = "The signed token of an email's unsubscribe link")),
    request_body(content_type = "application/x-www-form-urlencoded", description = "`List-Unsubscribe=One-Click` (RFC 8058), or `scope=workflow` / `scope=all`; any other body unsubscribes from the link's workflow"),
    responses((status = 200, description = "Unsubscribed (HTML page)", content_type = "text/html"),
        (status = 400, description = "An invalid or altered link, an unknown `scope`, or a subscriber or workflow that is gone or can no longer be unsubscribed from; nothing changes (HTML page)", content_type = "text/html")))]
pub async fn unsubscribe(
    State(state): State<AppState>,
    token: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(Path(token)) = token else {
        return error_page(service::invalid_link());
    };
    // Only a form body is read (RFC 8058 also allows multipart/form-data, which never carries our `scope`).
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            ct.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
        });
    let field = form
        .then(|| form_urlencoded::parse(&body).find(|(k, _)| k == "scope"))
        .flatten()
        .map(|(_, v)| v.into_owned());
    let Some(scope) = Scope::parse(field.as_deref()) else {
        return refused("This choice is unknown: scope is workflow or all.");
    };
    match service::unsubscribe(&state.store, &token, scope).await {
        Ok(t) => done(&t, scope),
        Err(e) => error_page(e),
    }
}

/// The page after an unsubscribe.
fn done(t: &Target, scope: Scope) -> Response {
    let body = match scope {
        Scope::Workflow => format!(
            "<p>You will no longer receive the emails of <strong>{}</strong>.</p>\
             <form method=\"post\"><p><button name=\"scope\" value=\"all\">Unsubscribe from all emails</button></p></form>",
            text(&t.workflow.name)
        ),
        Scope::AllEmail => "<p>You will no longer receive our emails, except the few that must reach you \
             (such as security notices).</p>"
            .to_owned(),
    };
    page(StatusCode::OK, "You are unsubscribed", &body)
}

/// The page of an error: a refusal (bad link, gone, cannot be changed) is a 400 that says why; anything else
/// a 500, logged without the path.
fn error_page(e: Error) -> Response {
    match e {
        Error::BadRequest { message, .. } | Error::NotFound(message) => refused(&message),
        Error::Validation(v) => refused(&v.to_string()),
        other => {
            let error_id = uuid::Uuid::new_v4().to_string();
            tracing::error!(error_id = %error_id, route = ROUTE, error = ?other, "internal error");
            page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                &format!(
                    "<p>Please try again later.</p><p>Error id: {}</p>",
                    text(&error_id)
                ),
            )
        }
    }
}

/// The 400 page: `why`, and that nothing changed.
fn refused(why: &str) -> Response {
    page(
        StatusCode::BAD_REQUEST,
        "This link cannot be used",
        &format!("<p>{}</p><p>Nothing was changed.</p>", text(why)),
    )
}

/// `s` escaped for HTML text and attributes.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape(s, &mut out);
    out
}

/// A complete page: `title` (plain text) and `body` (HTML, already escaped), no external resource. It is
/// never cached, sends no referrer (its address holds the token), cannot be framed, and its forms post only to
/// itself.
fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let title = text(title);
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{title}</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;\
         color:#1f2933;line-height:1.5}}button{{font:inherit;padding:.5rem 1rem;border-radius:.4rem;\
         border:1px solid #52606d;background:#fff;cursor:pointer}}button.primary{{background:#1f2933;\
         color:#fff}}</style></head>\n<body><h1>{title}</h1>{body}</body></html>\n"
    );
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
            ),
        ),
    ];
    (status, headers, html).into_response()
}
