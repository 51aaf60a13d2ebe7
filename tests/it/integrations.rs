//! `/v1/integrations`: create, list, list active, update, delete, set primary (spec §2.5, §4.8;
//! novu-behaviour.md §7, §12). Credentials are sealed at rest and never returned to API-key callers.

use std::collections::BTreeSet;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tidings::config::WireProfile;

use crate::db_test;
use crate::support::{self, assert_error, Backend, TestApp};

const SECRET: &str = "SG.super-secret-key-123";
const UNKNOWN_ID: &str = "0123456789abcdef01234567";

// ---------------------------------------------------------------------------------------------
// helpers

fn is_object_id(s: &str) -> bool {
    s.len() == 24
        && s.chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// `2026-11-22T08:15:00.000Z`: UTC, millisecond precision.
fn assert_iso_millis(v: &Value) {
    let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
    assert_eq!(s.len(), 24, "{s}");
    assert!(s.ends_with('Z'), "{s}");
    assert_eq!(&s[19..20], ".", "{s}");
    assert!(s[20..23].chars().all(|c| c.is_ascii_digit()), "{s}");
    assert!(
        chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.3fZ").is_ok(),
        "{s}"
    );
}

/// `<slug>-<6 of [0-9a-z]>`.
fn assert_generated_identifier(identifier: &Value, slug: &str) {
    let s = identifier
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {identifier}"));
    let suffix = s
        .strip_prefix(&format!("{slug}-"))
        .unwrap_or_else(|| panic!("{s} does not start with {slug}-"));
    assert_eq!(suffix.len(), 6, "{s}");
    assert!(
        suffix
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()),
        "{s}"
    );
}

/// No `credentials` key anywhere in a success body, and no secret value either.
fn assert_hidden(body: &Value) {
    fn walk(v: &Value) {
        match v {
            Value::Object(map) => {
                assert!(!map.contains_key("credentials"), "credentials leaked: {v}");
                map.values().for_each(walk);
            }
            Value::Array(items) => items.iter().for_each(walk),
            _ => {}
        }
    }
    walk(body);
    let text = body.to_string();
    assert!(!text.contains(SECRET), "secret leaked: {text}");
    assert!(!text.contains("hunter2"), "secret leaked: {text}");
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|i| i["_id"].as_str().expect("_id"))
        .collect()
}

fn find<'a>(list: &'a Value, id: &Value) -> &'a Value {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .find(|i| i["_id"] == *id)
        .unwrap_or_else(|| panic!("{id} not in {list}"))
}

fn id_of(v: &Value) -> &str {
    v["_id"].as_str().unwrap_or_else(|| panic!("no _id: {v}"))
}

async fn list(app: &TestApp) -> Value {
    let (status, body) = app.get("/v1/integrations").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.is_array(), "{body}");
    assert_hidden(&body);
    body
}

async fn list_active(app: &TestApp) -> Value {
    let (status, body) = app.get("/v1/integrations/active").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.is_array(), "{body}");
    assert_hidden(&body);
    body
}

async fn set_primary(app: &TestApp, id: &str) -> (StatusCode, Value) {
    support::send(app.req(Method::POST, &format!("/v1/integrations/{id}/set-primary"))).await
}

/// The decrypted credentials column of a stored integration, after checking it is not plaintext.
async fn stored_credentials(app: &TestApp, id: &str) -> Value {
    let stored = app
        .store
        .get_integration(&app.tenant.environment_id, &id.into())
        .await
        .expect("read integration")
        .unwrap_or_else(|| panic!("integration {id} not stored"));
    let sealed = &stored.credentials_sealed;
    assert!(
        !sealed.contains(SECRET),
        "credentials stored in clear: {sealed}"
    );
    assert!(
        !sealed.contains("hunter2"),
        "credentials stored in clear: {sealed}"
    );
    assert!(
        !sealed.contains('{'),
        "credentials stored in clear: {sealed}"
    );
    let plain = app
        .store
        .cipher()
        .decrypt_string(sealed)
        .expect("credentials decrypt with the store's key");
    serde_json::from_str(&plain).expect("credentials are a JSON document")
}

/// Posts `body` and asserts a 422 naming `field` in `errors`; returns the error body.
async fn assert_rejected(app: &TestApp, body: Value, field: &str) -> Value {
    let (status, out) = app.post("/v1/integrations", body.clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} -> {out}");
    assert_error(&out, 422);
    assert_eq!(out["error"], "Unprocessable Entity", "{out}");
    assert_eq!(out["path"], "/v1/integrations", "{out}");
    let messages = out["errors"][field]["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}: no errors.{field} in {out}"));
    assert!(
        !messages.is_empty()
            && messages
                .iter()
                .all(|m| m.as_str().is_some_and(|m| !m.is_empty())),
        "{out}"
    );
    out
}

// ---------------------------------------------------------------------------------------------
// create

async fn create_returns_every_field_and_no_credentials(app: TestApp) {
    let conditions = json!([{
        "isNegated": false,
        "type": "GROUP",
        "value": "AND",
        "children": [{ "field": "plan", "value": "pro", "operator": "EQUAL", "on": "subscriber" }]
    }]);
    let credentials = json!({
        "apiKey": SECRET,
        "from": "no-reply@example.com",
        "senderName": "Acme",
        "secure": true,
        "tlsOptions": { "rejectUnauthorized": false }
    });
    let (status, body) = app
        .post(
            "/v1/integrations",
            json!({
                "providerId": "sendgrid",
                "channel": "email",
                "name": "Marketing mail",
                "identifier": "marketing-mail",
                "credentials": credentials.clone(),
                "active": true,
                "check": false,
                "conditions": conditions.clone(),
                "configurations": { "inboundWebhookEnabled": false }
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_hidden(&body);
    let expected_keys: BTreeSet<&str> = [
        "_id",
        "_environmentId",
        "_organizationId",
        "name",
        "identifier",
        "providerId",
        "channel",
        "kind",
        "configurations",
        "active",
        "deleted",
        "primary",
        "priority",
        "conditions",
        "createdAt",
        "updatedAt",
        "__v",
    ]
    .into_iter()
    .collect();
    assert_eq!(keys(&body), expected_keys, "{body}");
    assert!(is_object_id(id_of(&body)), "{body}");
    assert_eq!(body["_environmentId"], app.tenant.environment_id.0.as_str());
    assert_eq!(
        body["_organizationId"],
        app.tenant.organization_id.0.as_str()
    );
    assert_eq!(body["name"], "Marketing mail");
    assert_eq!(body["identifier"], "marketing-mail");
    assert_eq!(body["providerId"], "sendgrid");
    assert_eq!(body["channel"], "email");
    assert_eq!(body["kind"], "delivery");
    assert_eq!(body["active"], true);
    assert_eq!(body["deleted"], false);
    // The first active integration of the channel becomes its primary.
    assert_eq!(body["primary"], true);
    assert_eq!(body["priority"], 0);
    assert_eq!(body["conditions"], conditions);
    assert_eq!(
        body["configurations"],
        json!({ "inboundWebhookEnabled": false })
    );
    assert_iso_millis(&body["createdAt"]);
    assert_iso_millis(&body["updatedAt"]);
    assert_eq!(body["createdAt"], body["updatedAt"]);
    assert_eq!(body["__v"], 0);

    // Sealed at rest, and the sealed value opens to exactly what was sent.
    assert_eq!(stored_credentials(&app, id_of(&body)).await, credentials);

    // The list shows the same document.
    let listed = list(&app).await;
    assert_eq!(listed, json!([body.clone()]));
    assert_eq!(list_active(&app).await, json!([body]));
}

async fn create_applies_defaults(app: TestApp) {
    let body = app
        .integration(json!({ "providerId": "sendgrid", "channel": "email" }))
        .await;
    assert_hidden(&body);
    assert!(is_object_id(id_of(&body)), "{body}");
    assert_eq!(body["name"], "sendgrid", "name defaults to the provider id");
    assert_generated_identifier(&body["identifier"], "sendgrid");
    assert_eq!(body["providerId"], "sendgrid");
    assert_eq!(body["channel"], "email");
    assert_eq!(body["kind"], "delivery");
    assert_eq!(body["active"], false);
    assert_eq!(
        body["primary"], false,
        "an inactive integration is never created primary"
    );
    assert_eq!(body["deleted"], false);
    assert_eq!(body["__v"], 0);
    let k = keys(&body);
    for absent in [
        "conditions",
        "configurations",
        "deletedAt",
        "deletedBy",
        "credentials",
    ] {
        assert!(
            !k.contains(absent),
            "{absent} should be omitted when unset: {body}"
        );
    }
    assert_eq!(stored_credentials(&app, id_of(&body)).await, json!({}));

    // The slug comes from the name; two integrations of the same name get different identifiers.
    let a = app
        .integration(
            json!({ "providerId": "mailgun", "channel": "email", "name": "My SendGrid (prod)" }),
        )
        .await;
    let b = app
        .integration(
            json!({ "providerId": "mailgun", "channel": "email", "name": "My SendGrid (prod)" }),
        )
        .await;
    assert_generated_identifier(&a["identifier"], "my-sendgrid-prod");
    assert_generated_identifier(&b["identifier"], "my-sendgrid-prod");
    assert_ne!(a["identifier"], b["identifier"]);
    assert_eq!(a["name"], "My SendGrid (prod)");

    // A blank name falls back to the provider id as well.
    let c = app
        .integration(json!({ "providerId": "twilio", "channel": "sms", "name": "  " }))
        .await;
    assert_eq!(c["name"], "twilio");
    assert_generated_identifier(&c["identifier"], "twilio");

    // An explicit `active: false` and an explicit identifier are kept as given.
    let d = app
        .integration(json!({ "providerId": "fcm", "channel": "push", "identifier": "Push_Main.1", "active": false }))
        .await;
    assert_eq!(d["identifier"], "Push_Main.1");
    assert_eq!(d["active"], false);
}

async fn create_accepts_both_spellings(app: TestApp) {
    let email = app
        .integration(json!({ "providerId": "novu-email", "channel": "email" }))
        .await;
    assert_eq!(email["providerId"], "svc-email");
    assert_eq!(email["name"], "svc-email");
    assert_generated_identifier(&email["identifier"], "svc-email");

    let sms = app
        .integration(json!({ "providerId": "novu-sms", "channel": "sms" }))
        .await;
    assert_eq!(sms["providerId"], "svc-sms");
    let slack = app
        .integration(json!({ "providerId": "novu-slack", "channel": "chat" }))
        .await;
    assert_eq!(slack["providerId"], "svc-slack");
    let in_app = app
        .integration(json!({ "providerId": "novu", "channel": "in_app" }))
        .await;
    assert_eq!(in_app["providerId"], "svc");
    assert_eq!(in_app["channel"], "in_app");
    let agent = app
        .integration(json!({ "providerId": "novu-anthropic", "kind": "agent" }))
        .await;
    assert_eq!(agent["providerId"], "svc-anthropic");
    let svc_email = app
        .integration(json!({ "providerId": "svc-email", "channel": "email" }))
        .await;
    assert_eq!(svc_email["providerId"], "svc-email");

    let listed = list(&app).await;
    let providers: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["providerId"].as_str().unwrap())
        .collect();
    assert_eq!(
        providers,
        [
            "svc-email",
            "svc-sms",
            "svc-slack",
            "svc",
            "svc-anthropic",
            "svc-email"
        ]
    );
    assert!(!listed.to_string().contains("novu"), "{listed}");
}

async fn agent_integrations_have_no_channel(app: TestApp) {
    let (status, body) = app
        .post(
            "/v1/integrations",
            json!({ "providerId": "anthropic", "kind": "agent", "name": "Claude", "active": true,
                    "credentials": { "apiKey": SECRET, "externalWorkspaceId": "ws_1" } }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_hidden(&body);
    assert!(
        !keys(&body).contains("channel"),
        "agent integrations carry no channel: {body}"
    );
    assert_eq!(body["kind"], "agent");
    assert_eq!(body["providerId"], "anthropic");
    assert_eq!(body["name"], "Claude");
    assert_generated_identifier(&body["identifier"], "claude");
    assert_eq!(body["active"], true);
    assert_eq!(body["primary"], false, "no channel, so never primary");
    assert_eq!(
        stored_credentials(&app, id_of(&body)).await,
        json!({ "apiKey": SECRET, "externalWorkspaceId": "ws_1" })
    );

    // The kind is inferred for an agent provider sent without channel.
    let inferred = app
        .integration(json!({ "providerId": "anthropic-aws" }))
        .await;
    assert_eq!(inferred["kind"], "agent");
    assert!(!keys(&inferred).contains("channel"), "{inferred}");

    // Listed without channel as well; an agent integration has no channel to be primary of.
    let listed = list(&app).await;
    assert_eq!(ids(&listed), [id_of(&body), id_of(&inferred)]);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|i| !keys(i).contains("channel")),
        "{listed}"
    );
    assert_eq!(ids(&list_active(&app).await), [id_of(&body)]);
    let (status, out) = set_primary(&app, id_of(&body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_error(&out, 400);
}

async fn create_rejects_invalid_bodies(app: TestApp) {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({ "providerId": "carrier-pigeon", "channel": "email" }),
            "providerId",
        ),
        (
            json!({ "providerId": "", "channel": "email" }),
            "providerId",
        ),
        (json!({ "channel": "email" }), "providerId"),
        (json!({ "providerId": 5, "channel": "email" }), "providerId"),
        (
            json!({ "providerId": "sendgrid", "channel": "sms" }),
            "channel",
        ),
        (
            json!({ "providerId": "twilio", "channel": "email" }),
            "channel",
        ),
        (json!({ "providerId": "svc", "channel": "chat" }), "channel"),
        (json!({ "providerId": "sendgrid" }), "channel"),
        (
            json!({ "providerId": "sendgrid", "channel": "fax" }),
            "channel",
        ),
        (
            json!({ "providerId": "anthropic", "kind": "agent", "channel": "chat" }),
            "channel",
        ),
        (
            json!({ "providerId": "anthropic", "channel": "email" }),
            "channel",
        ),
        (json!({ "providerId": "slack", "kind": "agent" }), "channel"),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "kind": "robot" }),
            "kind",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "credentials": { "apiKey": "k", "colour": "blue" } }),
            "credentials.colour",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "credentials": { "secure": "yes" } }),
            "credentials.secure",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "credentials": { "port": true } }),
            "credentials.port",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "credentials": { "tlsOptions": "strict" } }),
            "credentials.tlsOptions",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "credentials": "SG.key" }),
            "credentials",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "conditions": { "isNegated": false } }),
            "conditions",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "conditions": "plan = pro" }),
            "conditions",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "conditions": ["plan = pro"] }),
            "conditions",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "configurations": [] }),
            "configurations",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "configurations": { "inboundWebhookEnabled": "yes" } }),
            "configurations.inboundWebhookEnabled",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "identifier": "   " }),
            "identifier",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "identifier": "x".repeat(256) }),
            "identifier",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "active": "yes" }),
            "active",
        ),
        (
            json!({ "providerId": "sendgrid", "channel": "email", "name": 7 }),
            "name",
        ),
    ];
    for (body, field) in cases {
        assert_rejected(&app, body, field).await;
    }

    // The value of the offending field is reported with it.
    let out = assert_rejected(
        &app,
        json!({ "providerId": "carrier-pigeon", "channel": "email" }),
        "providerId",
    )
    .await;
    assert_eq!(
        out["errors"]["providerId"]["value"], "carrier-pigeon",
        "{out}"
    );
    let out = assert_rejected(
        &app,
        json!({ "providerId": "sendgrid", "channel": "sms" }),
        "channel",
    )
    .await;
    assert_eq!(out["errors"]["channel"]["value"], "sms", "{out}");
    let out = assert_rejected(
        &app,
        json!({ "providerId": "sendgrid", "channel": "email", "credentials": { "secure": "yes", "port": 5.5, "colour": 1, "host": ["h"] } }),
        "credentials.secure",
    )
    .await;
    // Every problem is reported at once, with its value and the type that was expected.
    let errors = &out["errors"];
    assert_eq!(errors.as_object().map(|e| e.len()), Some(4), "{out}");
    assert_eq!(errors["credentials.secure"]["value"], "yes", "{out}");
    assert_eq!(
        errors["credentials.secure"]["messages"],
        json!(["credentials.secure must be a boolean"])
    );
    assert_eq!(errors["credentials.port"]["value"], 5.5, "{out}");
    assert_eq!(
        errors["credentials.port"]["messages"],
        json!(["credentials.port must be a string or an integer"])
    );
    assert_eq!(errors["credentials.host"]["value"], json!(["h"]), "{out}");
    assert_eq!(
        errors["credentials.host"]["messages"],
        json!(["credentials.host must be a string"])
    );
    assert_eq!(errors["credentials.colour"]["value"], 1, "{out}");
    // Type errors of the body itself: all of them too, each with its value.
    let (status, out) = app
        .post(
            "/v1/integrations",
            json!({ "providerId": "sendgrid", "channel": "email", "active": "yes", "name": 7, "identifier": false }),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_eq!(
        out["errors"],
        json!({
            "active": {"messages": ["active must be a boolean"], "value": "yes"},
            "identifier": {"messages": ["identifier must be a string"], "value": false},
            "name": {"messages": ["name must be a string"], "value": 7},
        }),
        "{out}"
    );

    // Malformed JSON.
    for raw in [
        r#"{"providerId": "sendgrid", "channel": "#,
        "not json",
        r#"{"providerId": "sendgrid",}"#,
    ] {
        let (status, out) = support::send(
            app.req(Method::POST, "/v1/integrations")
                .header("Content-Type", "application/json")
                .body(raw),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{raw} -> {out}");
        assert_error(&out, 422);
        assert!(out["errors"]["body"]["messages"].is_array(), "{out}");
    }

    // Nothing was created by any of the rejected requests.
    assert_eq!(list(&app).await, json!([]));
}

/// `credentials.port` given as a JSON integer (as users send it) is accepted and stored as a string, on
/// create and on update; other string credentials still must be strings.
async fn port_given_as_a_number_is_stored_as_a_string(app: TestApp) {
    let (status, body) = app
        .post(
            "/v1/integrations",
            json!({ "providerId": "nodemailer", "channel": "email",
                "credentials": { "host": "smtp.example.com", "port": 2525, "from": "a@example.com" } }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = id_of(&body).to_owned();
    assert_eq!(
        stored_credentials(&app, &id).await,
        json!({ "host": "smtp.example.com", "port": "2525", "from": "a@example.com" })
    );
    let (status, out) = app
        .put(
            &format!("/v1/integrations/{id}"),
            json!({ "credentials": { "host": "smtp.example.com", "port": 465 } }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        stored_credentials(&app, &id).await,
        json!({ "host": "smtp.example.com", "port": "465" })
    );
    let (status, out) = app
        .put(
            &format!("/v1/integrations/{id}"),
            json!({ "credentials": { "port": -1.5, "user": 5 } }),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_eq!(
        out["errors"],
        json!({
            "credentials.port": {"messages": ["credentials.port must be a string or an integer"], "value": -1.5},
            "credentials.user": {"messages": ["credentials.user must be a string"], "value": 5},
        })
    );
    assert_eq!(
        stored_credentials(&app, &id).await,
        json!({ "host": "smtp.example.com", "port": "465" })
    );
}

/// A body must be a JSON object. serde's derive also accepts a struct written as an array of its
/// fields in declaration order; that must not create an integration.
async fn create_rejects_non_object_bodies(app: TestApp) {
    // A body that is not a JSON object, even one that lists valid values in field order.
    for body in [
        json!([{ "providerId": "sendgrid", "channel": "email" }]),
        json!(["sendgrid", "email"]),
        json!(["sendgrid", "email", null, null, null, null, null, null, null, null]),
        json!("sendgrid"),
        json!(null),
        json!(42),
    ] {
        let (status, out) = app.post("/v1/integrations", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} -> {out}");
        assert_error(&out, 422);
        assert!(
            out["errors"]["body"]["messages"].is_array(),
            "{body} -> {out}"
        );
    }
    assert_eq!(list(&app).await, json!([]));

    // The same for an update: a positional array must not rename the integration.
    let created = app
        .integration(json!({ "providerId": "sendgrid", "channel": "email", "name": "Mail" }))
        .await;
    let path = format!("/v1/integrations/{}", id_of(&created));
    for body in [
        json!(["Renamed", null, null, null, null, null, null]),
        json!(["Renamed"]),
        json!(null),
    ] {
        let (status, out) = app.put(&path, body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} -> {out}");
        assert_error(&out, 422);
        assert!(
            out["errors"]["body"]["messages"].is_array(),
            "{body} -> {out}"
        );
    }
    assert_eq!(list(&app).await, json!([created]));
}

async fn duplicate_identifier_conflicts_until_deleted(app: TestApp) {
    let first = app
        .integration(
            json!({ "providerId": "sendgrid", "channel": "email", "identifier": "shared-mail" }),
        )
        .await;

    // Same identifier, even for another provider and channel.
    let (status, out) = app
        .post(
            "/v1/integrations",
            json!({ "providerId": "twilio", "channel": "sms", "identifier": "shared-mail" }),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");
    assert_error(&out, 409);
    assert_eq!(out["error"], "Conflict");
    assert!(
        out["message"].as_str().unwrap().contains("shared-mail"),
        "{out}"
    );
    assert_eq!(ids(&list(&app).await), [id_of(&first)]);

    // Renaming another integration onto a taken identifier conflicts too, and changes nothing.
    let other = app
        .integration(json!({ "providerId": "twilio", "channel": "sms", "identifier": "sms-main" }))
        .await;
    let (status, out) = app
        .put(
            &format!("/v1/integrations/{}", id_of(&other)),
            json!({ "identifier": "shared-mail" }),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");
    assert_error(&out, 409);
    assert!(
        out["message"].as_str().unwrap().contains("shared-mail"),
        "{out}"
    );
    let listed = list(&app).await;
    assert_eq!(find(&listed, &other["_id"])["identifier"], "sms-main");
    assert_eq!(find(&listed, &other["_id"])["__v"], 0);

    // Once deleted, the identifier is free again.
    let (status, out) = app
        .delete(&format!("/v1/integrations/{}", id_of(&first)))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let again = app
        .integration(
            json!({ "providerId": "mailgun", "channel": "email", "identifier": "shared-mail" }),
        )
        .await;
    assert_eq!(again["identifier"], "shared-mail");
    assert_ne!(again["_id"], first["_id"]);
    assert_eq!(ids(&list(&app).await), [id_of(&other), id_of(&again)]);
}

async fn only_one_in_app_integration(app: TestApp) {
    let first = app
        .integration(json!({ "providerId": "svc", "channel": "in_app", "active": true }))
        .await;
    assert_eq!(first["providerId"], "svc");
    assert_eq!(first["channel"], "in_app");
    assert_eq!(first["active"], true);

    for provider in ["svc", "novu"] {
        let (status, out) = app
            .post(
                "/v1/integrations",
                json!({ "providerId": provider, "channel": "in_app", "identifier": "second" }),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{provider}: {out}");
        assert_error(&out, 400);
        assert_eq!(out["error"], "Bad Request");
    }
    assert_eq!(ids(&list(&app).await), [id_of(&first)]);

    // The in-app channel has no primary to choose.
    let (status, out) = set_primary(&app, id_of(&first)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_error(&out, 400);

    // After deleting the in-app integration, a new one may be created.
    let (status, out) = app
        .delete(&format!("/v1/integrations/{}", id_of(&first)))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let replacement = app
        .integration(json!({ "providerId": "novu", "channel": "in_app" }))
        .await;
    assert_eq!(ids(&list(&app).await), [id_of(&replacement)]);
}

// ---------------------------------------------------------------------------------------------
// list

async fn list_is_a_plain_array_oldest_first(app: TestApp) {
    assert_eq!(list(&app).await, json!([]));
    assert_eq!(list_active(&app).await, json!([]));

    let a = app
        .integration(json!({ "providerId": "sendgrid", "channel": "email", "identifier": "a" }))
        .await;
    let b = app
        .integration(
            json!({ "providerId": "twilio", "channel": "sms", "identifier": "b", "active": true,
                             "credentials": { "accountSid": "AC1", "token": SECRET } }),
        )
        .await;
    let c = app
        .integration(json!({ "providerId": "slack", "channel": "chat", "identifier": "c" }))
        .await;
    let d = app
        .integration(
            json!({ "providerId": "fcm", "channel": "push", "identifier": "d", "active": true }),
        )
        .await;

    let listed = list(&app).await;
    assert_eq!(ids(&listed), [id_of(&a), id_of(&b), id_of(&c), id_of(&d)]);
    // Each listed item is the document the create answered.
    assert_eq!(listed, json!([a.clone(), b.clone(), c.clone(), d.clone()]));

    let active = list_active(&app).await;
    assert_eq!(ids(&active), [id_of(&b), id_of(&d)]);
    assert!(
        active
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["active"] == true),
        "{active}"
    );

    // Activating one later adds it to the active list, in creation order.
    let (status, out) = app
        .put(
            &format!("/v1/integrations/{}", id_of(&a)),
            json!({ "active": true }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        ids(&list_active(&app).await),
        [id_of(&a), id_of(&b), id_of(&d)]
    );

    // Deleted ones leave both lists.
    let (status, out) = app.delete(&format!("/v1/integrations/{}", id_of(&b))).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(ids(&list(&app).await), [id_of(&a), id_of(&c), id_of(&d)]);
    assert_eq!(ids(&list_active(&app).await), [id_of(&a), id_of(&d)]);
}

// ---------------------------------------------------------------------------------------------
// update

async fn update_replaces_given_fields(app: TestApp) {
    let created = app
        .integration(json!({
            "providerId": "mailgun", "channel": "email", "name": "Mail", "identifier": "mail",
            "credentials": { "apiKey": "old-key", "domain": "mg.example.com" },
            "configurations": { "inboundWebhookEnabled": false }
        }))
        .await;
    let id = id_of(&created).to_owned();
    let path = format!("/v1/integrations/{id}");
    tokio::time::sleep(Duration::from_millis(15)).await;

    let conditions = json!([{ "isNegated": true, "type": "GROUP", "value": "OR", "children": [] }]);
    let (status, updated) = app
        .put(
            &path,
            json!({
                "name": "Transactional mail",
                "identifier": "mail-tx",
                "active": true,
                "check": false,
                "credentials": { "apiKey": SECRET, "password": "hunter2", "secure": false },
                "conditions": conditions.clone(),
                "configurations": { "inboundWebhookEnabled": true, "inboundWebhookSigningKey": "whsec" }
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_hidden(&updated);
    assert_eq!(updated["_id"], id.as_str());
    assert_eq!(updated["name"], "Transactional mail");
    assert_eq!(updated["identifier"], "mail-tx");
    assert_eq!(updated["active"], true);
    assert_eq!(updated["conditions"], conditions);
    assert_eq!(
        updated["configurations"],
        json!({ "inboundWebhookEnabled": true, "inboundWebhookSigningKey": "whsec" })
    );
    assert_eq!(updated["providerId"], "mailgun");
    assert_eq!(updated["channel"], "email");
    assert_eq!(updated["kind"], "delivery");
    assert_eq!(updated["deleted"], false);
    assert_eq!(updated["__v"], 1);
    assert_eq!(updated["createdAt"], created["createdAt"]);
    assert_iso_millis(&updated["updatedAt"]);
    assert!(
        updated["updatedAt"].as_str().unwrap() > created["updatedAt"].as_str().unwrap(),
        "updatedAt must move: {created} -> {updated}"
    );
    assert_eq!(
        stored_credentials(&app, &id).await,
        json!({ "apiKey": SECRET, "password": "hunter2", "secure": false })
    );
    assert_eq!(list(&app).await, json!([updated.clone()]));

    // An empty body changes nothing but the version and updatedAt; credentials stay as they were.
    tokio::time::sleep(Duration::from_millis(15)).await;
    let (status, again) = app.put(&path, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_hidden(&again);
    assert_eq!(again["__v"], 2);
    assert!(
        again["updatedAt"].as_str().unwrap() > updated["updatedAt"].as_str().unwrap(),
        "{again}"
    );
    for field in [
        "name",
        "identifier",
        "active",
        "conditions",
        "configurations",
        "createdAt",
        "primary",
    ] {
        assert_eq!(again[field], updated[field], "{field}");
    }
    assert_eq!(
        stored_credentials(&app, &id).await,
        json!({ "apiKey": SECRET, "password": "hunter2", "secure": false })
    );

    // Invalid updates are 422 and leave the integration untouched.
    for (body, field) in [
        (
            json!({ "credentials": { "colour": "blue" } }),
            "credentials.colour",
        ),
        (
            json!({ "credentials": { "secure": "yes" } }),
            "credentials.secure",
        ),
        (
            json!({ "credentials": { "port": false } }),
            "credentials.port",
        ),
        (json!({ "conditions": "plan = pro" }), "conditions"),
        (
            json!({ "configurations": { "inboundWebhookSigningKey": 1 } }),
            "configurations.inboundWebhookSigningKey",
        ),
        (json!({ "identifier": "" }), "identifier"),
        (json!({ "active": "no" }), "active"),
    ] {
        let (status, out) = app.put(&path, body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} -> {out}");
        assert_error(&out, 422);
        assert!(
            out["errors"][field]["messages"].is_array(),
            "{body} -> {out}"
        );
    }
    let (status, out) = support::send(
        app.req(Method::PUT, &path)
            .header("Content-Type", "application/json")
            .body(r#"{"name": "#),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_error(&out, 422);
    assert_eq!(list(&app).await, json!([again]));
    assert_eq!(
        stored_credentials(&app, &id).await,
        json!({ "apiKey": SECRET, "password": "hunter2", "secure": false })
    );

    // Unknown id.
    let (status, out) = app
        .put(
            &format!("/v1/integrations/{UNKNOWN_ID}"),
            json!({ "name": "x" }),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    assert_eq!(out["error"], "Not Found");
    assert!(
        out["message"].as_str().unwrap().contains(UNKNOWN_ID),
        "{out}"
    );
}

async fn deactivating_a_primary_clears_primary(app: TestApp) {
    let primary = app
        .integration(json!({ "providerId": "sendgrid", "channel": "email", "active": true }))
        .await;
    assert_eq!(primary["primary"], true);
    let sms = app
        .integration(json!({ "providerId": "twilio", "channel": "sms", "active": true }))
        .await;
    assert_eq!(sms["primary"], true);

    let (status, out) = app
        .put(
            &format!("/v1/integrations/{}", id_of(&primary)),
            json!({ "active": false }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["active"], false);
    assert_eq!(out["primary"], false);
    assert_eq!(out["__v"], 1);

    let listed = list(&app).await;
    assert_eq!(find(&listed, &primary["_id"])["primary"], false);
    assert_eq!(
        find(&listed, &sms["_id"])["primary"],
        true,
        "other channels are unaffected"
    );
    assert_eq!(ids(&list_active(&app).await), [id_of(&sms)]);

    // With the old primary inactive, the next active email integration becomes the primary.
    let next = app
        .integration(json!({ "providerId": "mailgun", "channel": "email", "active": true }))
        .await;
    assert_eq!(next["primary"], true, "{next}");
}

// ---------------------------------------------------------------------------------------------
// delete

async fn delete_answers_the_remaining_list(app: TestApp) {
    let a = app
        .integration(json!({ "providerId": "sendgrid", "channel": "email", "active": true }))
        .await;
    let b = app
        .integration(
            json!({ "providerId": "twilio", "channel": "sms", "credentials": { "token": SECRET } }),
        )
        .await;
    let c = app
        .integration(json!({ "providerId": "slack", "channel": "chat" }))
        .await;

    let (status, remaining) = app.delete(&format!("/v1/integrations/{}", id_of(&b))).await;
    assert_eq!(status, StatusCode::OK, "{remaining}");
    assert!(remaining.is_array(), "a plain array: {remaining}");
    assert_hidden(&remaining);
    assert_eq!(remaining, json!([a.clone(), c.clone()]));
    assert_eq!(list(&app).await, json!([a.clone(), c.clone()]));

    // Gone for every other operation too.
    let path = format!("/v1/integrations/{}", id_of(&b));
    let (status, out) = app.delete(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    assert!(
        out["message"].as_str().unwrap().contains(id_of(&b)),
        "{out}"
    );
    let (status, out) = app.put(&path, json!({ "name": "back" })).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    let (status, out) = set_primary(&app, id_of(&b)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);

    // Deleting the primary (an active one) removes it from the active list as well.
    let (status, remaining) = app.delete(&format!("/v1/integrations/{}", id_of(&a))).await;
    assert_eq!(status, StatusCode::OK, "{remaining}");
    assert_eq!(remaining, json!([c.clone()]));
    assert_eq!(list_active(&app).await, json!([]));

    let (status, remaining) = app.delete(&format!("/v1/integrations/{}", id_of(&c))).await;
    assert_eq!(status, StatusCode::OK, "{remaining}");
    assert_eq!(remaining, json!([]));

    let (status, out) = app.delete(&format!("/v1/integrations/{UNKNOWN_ID}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    assert!(
        out["message"].as_str().unwrap().contains(UNKNOWN_ID),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// primary

async fn first_active_integration_of_a_channel_is_primary(app: TestApp) {
    let inactive_email = app
        .integration(json!({ "providerId": "sendgrid", "channel": "email" }))
        .await;
    assert_eq!(inactive_email["primary"], false);
    let email_1 = app
        .integration(json!({ "providerId": "mailgun", "channel": "email", "active": true }))
        .await;
    assert_eq!(email_1["primary"], true);
    let email_2 = app
        .integration(json!({ "providerId": "postmark", "channel": "email", "active": true }))
        .await;
    assert_eq!(email_2["primary"], false, "a channel has one primary");
    let sms = app
        .integration(json!({ "providerId": "twilio", "channel": "sms", "active": true }))
        .await;
    assert_eq!(sms["primary"], true, "primaries are per channel");
    let push = app
        .integration(json!({ "providerId": "fcm", "channel": "push", "active": true }))
        .await;
    assert_eq!(push["primary"], true);
    let chat = app
        .integration(json!({ "providerId": "slack", "channel": "chat", "active": true }))
        .await;
    assert_eq!(chat["primary"], true);
    let chat_2 = app
        .integration(json!({ "providerId": "discord", "channel": "chat", "active": true }))
        .await;
    assert_eq!(chat_2["primary"], false);

    let listed = list(&app).await;
    let primaries: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["primary"] == true)
        .map(|i| i["_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        primaries,
        [id_of(&email_1), id_of(&sms), id_of(&push), id_of(&chat)]
    );
}

async fn set_primary_moves_the_flag_within_the_channel(app: TestApp) {
    let a = app
        .integration(json!({ "providerId": "sendgrid", "channel": "email", "active": true }))
        .await;
    assert_eq!(a["primary"], true);
    let b = app
        .integration(json!({ "providerId": "mailgun", "channel": "email", "credentials": { "apiKey": SECRET } }))
        .await;
    assert_eq!(
        (b["active"].clone(), b["primary"].clone()),
        (json!(false), json!(false))
    );
    let sms = app
        .integration(json!({ "providerId": "twilio", "channel": "sms", "active": true }))
        .await;
    assert_eq!(sms["primary"], true);
    tokio::time::sleep(Duration::from_millis(15)).await;

    let (status, out) = set_primary(&app, id_of(&b)).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_hidden(&out);
    assert_eq!(out["_id"], b["_id"]);
    assert_eq!(out["primary"], true);
    assert_eq!(out["active"], true, "a primary is active");
    assert_eq!(out["__v"], 1);
    assert_eq!(out["createdAt"], b["createdAt"]);
    assert!(
        out["updatedAt"].as_str().unwrap() > b["updatedAt"].as_str().unwrap(),
        "{out}"
    );
    assert_iso_millis(&out["updatedAt"]);
    for field in [
        "name",
        "identifier",
        "providerId",
        "channel",
        "kind",
        "deleted",
    ] {
        assert_eq!(out[field], b[field], "{field}");
    }
    assert_eq!(
        stored_credentials(&app, id_of(&b)).await,
        json!({ "apiKey": SECRET })
    );

    let listed = list(&app).await;
    let old = find(&listed, &a["_id"]);
    assert_eq!(
        old["primary"], false,
        "the previous primary of the channel loses the flag"
    );
    assert_eq!(old["active"], true, "but stays active");
    assert_eq!(old["__v"], 1);
    assert_eq!(find(&listed, &b["_id"]), &out);
    assert_eq!(
        find(&listed, &sms["_id"]),
        &sms,
        "other channels are unaffected"
    );
    assert_eq!(
        ids(&list_active(&app).await),
        [id_of(&a), id_of(&b), id_of(&sms)]
    );

    // And back again.
    let (status, out) = set_primary(&app, id_of(&a)).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["primary"], true);
    let listed = list(&app).await;
    assert_eq!(find(&listed, &b["_id"])["primary"], false);
    assert_eq!(find(&listed, &sms["_id"])["primary"], true);

    // Setting the current primary again keeps it the only primary.
    let (status, out) = set_primary(&app, id_of(&a)).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["primary"], true);
    let listed = list(&app).await;
    let email_primaries = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["channel"] == "email" && i["primary"] == true)
        .count();
    assert_eq!(email_primaries, 1, "{listed}");

    let (status, out) = set_primary(&app, UNKNOWN_ID).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    assert!(
        out["message"].as_str().unwrap().contains(UNKNOWN_ID),
        "{out}"
    );

    let in_app = app
        .integration(json!({ "providerId": "svc", "channel": "in_app", "active": true }))
        .await;
    let (status, out) = set_primary(&app, id_of(&in_app)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_error(&out, 400);
    assert_eq!(find(&list(&app).await, &in_app["_id"])["primary"], false);
}

// ---------------------------------------------------------------------------------------------
// tenancy and auth

async fn other_environments_are_isolated(app: TestApp) {
    let mine = app
        .integration(json!({ "providerId": "sendgrid", "channel": "email", "identifier": "shared", "active": true,
                             "credentials": { "apiKey": SECRET } }))
        .await;
    let my_in_app = app
        .integration(json!({ "providerId": "svc", "channel": "in_app" }))
        .await;
    let other = app.second_environment("Staging").await;

    let as_other = |method: Method, path: &str| app.req_as(&other, method, path);
    for path in ["/v1/integrations", "/v1/integrations/active"] {
        let (status, out) = support::send(as_other(Method::GET, path)).await;
        assert_eq!(status, StatusCode::OK, "{out}");
        assert_eq!(out, json!([]), "{path}");
    }
    let path = format!("/v1/integrations/{}", id_of(&mine));
    let (status, out) =
        support::send(as_other(Method::PUT, &path).json(&json!({ "name": "stolen" }))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    let (status, out) = support::send(as_other(Method::DELETE, &path)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    let (status, out) = support::send(as_other(Method::POST, &format!("{path}/set-primary"))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);

    // The same identifier, an in-app integration and a primary of their own are independent.
    let (status, theirs) = support::send(as_other(Method::POST, "/v1/integrations").json(&json!({
        "providerId": "sendgrid", "channel": "email", "identifier": "shared", "active": true
    })))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    assert_hidden(&theirs);
    assert_eq!(theirs["identifier"], "shared");
    assert_eq!(
        theirs["primary"], true,
        "the other environment's primary does not count"
    );
    assert_ne!(theirs["_environmentId"], mine["_environmentId"]);
    assert_eq!(theirs["_organizationId"], mine["_organizationId"]);
    let (status, their_in_app) = support::send(
        as_other(Method::POST, "/v1/integrations")
            .json(&json!({ "providerId": "svc", "channel": "in_app" })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{their_in_app}");

    let (status, out) = support::send(as_other(Method::GET, "/v1/integrations")).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(ids(&out), [id_of(&theirs), id_of(&their_in_app)]);
    assert!(
        out.as_array()
            .unwrap()
            .iter()
            .all(|i| i["_environmentId"] == theirs["_environmentId"]),
        "{out}"
    );

    // Our side is untouched.
    assert_eq!(list(&app).await, json!([mine.clone(), my_in_app]));

    // And the other way round.
    let (status, out) = app
        .delete(&format!("/v1/integrations/{}", id_of(&theirs)))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let (status, out) = set_primary(&app, id_of(&theirs)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let (status, out) = support::send(as_other(Method::GET, "/v1/integrations/active")).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(ids(&out), [id_of(&theirs)]);
    assert_eq!(out[0]["primary"], true);
}

async fn requires_an_api_key(app: TestApp) {
    let id = id_of(
        &app.integration(json!({ "providerId": "sendgrid", "channel": "email" }))
            .await,
    )
    .to_owned();
    let requests = [
        (Method::GET, "/v1/integrations".to_owned()),
        (Method::GET, "/v1/integrations/active".to_owned()),
        (Method::POST, "/v1/integrations".to_owned()),
        (Method::PUT, format!("/v1/integrations/{id}")),
        (Method::DELETE, format!("/v1/integrations/{id}")),
        (Method::POST, format!("/v1/integrations/{id}/set-primary")),
    ];
    for (method, path) in &requests {
        let body = json!({ "providerId": "twilio", "channel": "sms", "name": "x" });
        let (status, out) = support::send(
            app.client
                .request(method.clone(), app.url(path))
                .json(&body),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {out}");
        assert_error(&out, 401);
        assert_eq!(out["error"], "Unauthorized");
        for auth in [
            "ApiKey 00000000000000000000000000000000",
            "Bearer whatever",
            "ApiKey ",
        ] {
            let (status, out) = support::send(
                app.client
                    .request(method.clone(), app.url(path))
                    .header("Authorization", auth)
                    .json(&body),
            )
            .await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {auth:?}: {out}"
            );
            assert_error(&out, 401);
        }
    }
    // Nothing changed.
    let listed = list(&app).await;
    assert_eq!(ids(&listed), [id.as_str()]);
    assert_eq!(listed[0]["name"], "sendgrid");
    assert_eq!(listed[0]["__v"], 0);
}

db_test!(
    create_returns_every_field,
    create_returns_every_field_and_no_credentials
);
db_test!(create_defaults, create_applies_defaults);
db_test!(create_both_spellings, create_accepts_both_spellings);
db_test!(agent_kind, agent_integrations_have_no_channel);
db_test!(create_validation, create_rejects_invalid_bodies);
db_test!(numeric_port, port_given_as_a_number_is_stored_as_a_string);
db_test!(create_non_object_body, create_rejects_non_object_bodies);
db_test!(
    duplicate_identifier,
    duplicate_identifier_conflicts_until_deleted
);
db_test!(one_in_app, only_one_in_app_integration);
db_test!(list_order, list_is_a_plain_array_oldest_first);
db_test!(update, update_replaces_given_fields);
db_test!(deactivate_primary, deactivating_a_primary_clears_primary);
db_test!(delete, delete_answers_the_remaining_list);
db_test!(
    first_active_primary,
    first_active_integration_of_a_channel_is_primary
);
db_test!(
    set_primary_flag,
    set_primary_moves_the_flag_within_the_channel
);
db_test!(tenant_isolation, other_environments_are_isolated);
db_test!(auth, requires_an_api_key);

// ---------------------------------------------------------------------------------------------
// the `novu` wire profile: same operations, `novu…` spelling and `{"data": …}` envelope

async fn novu_profile_spells_novu_and_wraps(app: TestApp) {
    let (status, created) = app
        .post("/v1/integrations", json!({ "providerId": "svc-email", "channel": "email", "credentials": { "apiKey": SECRET } }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_hidden(&created);
    assert_eq!(keys(&created), BTreeSet::from(["data"]), "{created}");
    assert_eq!(created["data"]["providerId"], "novu-email");

    let (status, listed) = app.get("/v1/integrations").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_hidden(&listed);
    assert_eq!(listed, json!({ "data": [created["data"].clone()] }));

    let in_app = app
        .integration(json!({ "providerId": "svc", "channel": "in_app" }))
        .await;
    assert_eq!(in_app["data"]["providerId"], "novu");

    let (status, remaining) = app
        .delete(&format!(
            "/v1/integrations/{}",
            in_app["data"]["_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{remaining}");
    assert_eq!(remaining, listed);
}

mod novu_profile {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        novu_profile_spells_novu_and_wraps(
            TestApp::spawn_with(Backend::Sqlite, WireProfile::Novu).await,
        )
        .await;
    }

    crate::postgres_test!(
        postgres,
        novu_profile_spells_novu_and_wraps(
            TestApp::spawn_with(Backend::Postgres, WireProfile::Novu).await,
        )
    );
}
