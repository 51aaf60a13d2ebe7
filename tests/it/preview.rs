//! Step preview: `POST /v2/workflows/{workflowId}/step/{stepId}/preview` for every step type, the
//! example payload and schema, render errors as `result.error`, and the http_request signature.

use std::time::Duration;

use hmac::Mac;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tidings::config::WireProfile;

use crate::db_test;
use crate::support::{assert_error, Backend, TestApp};

async fn workflow(app: &TestApp, body: Value) -> Value {
    let (status, out) = app.post("/v2/workflows", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

async fn preview(app: &TestApp, wf: &str, step: &str, body: Value) -> Value {
    let (status, out) = app
        .post(&format!("/v2/workflows/{wf}/step/{step}/preview"), body)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

/// HMAC-SHA256 of `"<t>." + body` keyed with `key`, hex (independent of the crate's code).
fn hmac_hex(key: &str, t: &str, body: &str) -> String {
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn split_signature(sig: &str) -> (String, String) {
    let (t, v1) = sig.split_once(",v1=").expect("t=…,v1=…");
    (t.strip_prefix("t=").unwrap().to_owned(), v1.to_owned())
}

const EMAIL_BODY: &str = "<h1>Hi {{ subscriber.firstName }}</h1>\n<ul>\n{% for item in payload.items %}<li>{{ item.name }} × {{ item.qty }}</li>{% endfor %}\n</ul>\n<p>Ships to {{ payload.user.address.city | default: \"you\" }}</p>";

async fn email_step(app: TestApp) {
    let w = workflow(
        &app,
        json!({"name": "Order", "workflowId": "order", "steps": [
            {"name": "Mail", "stepId": "mail", "type": "email", "controlValues": {
                "subject": "Order {{ payload.orderId }} for {{ subscriber.firstName | upcase }}",
                "body": EMAIL_BODY}}]}),
    )
    .await;

    // Without a previewPayload: the example comes from the variables the templates use.
    let out = preview(&app, "order", "mail", json!({})).await;
    assert_eq!(out["result"]["type"], "email");
    assert!(out["result"].get("error").is_none(), "{out}");
    assert_eq!(
        out["previewPayloadExample"]["payload"],
        json!({"orderId": "orderId", "items": [{"name": "name", "qty": "qty"}], "user": {"address": {"city": "city"}}})
    );
    // Only the fields a preview payload's subscriber may hold (spec §2.8): no subscriberId.
    assert_eq!(
        out["previewPayloadExample"]["subscriber"],
        json!({"firstName": "John", "lastName": "Doe", "email": "user@example.com",
               "phone": "+1234567890", "avatar": "https://example.com/avatar.png", "locale": "en_US",
               "timezone": "America/New_York", "data": {}})
    );
    assert_eq!(
        out["result"]["preview"]["subject"],
        "Order orderId for JOHN"
    );
    assert!(out.get("svcSignature").is_none() && out.get("novuSignature").is_none());
    let schema = &out["schema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(
        schema["properties"]["payload"]["properties"]["items"]["type"],
        "array"
    );
    assert_eq!(
        schema["properties"]["subscriber"]["required"],
        json!(["subscriberId"])
    );

    // With the caller's values: they win at every depth; by `_id` for both path ids.
    let (wid, sid) = (
        w["_id"].as_str().unwrap(),
        w["steps"][0]["_id"].as_str().unwrap(),
    );
    let out = preview(
        &app,
        wid,
        sid,
        json!({"previewPayload": {
            "payload": {"orderId": "A-1042", "items": [{"name": "Lamp", "qty": 2}, {"name": "Desk", "qty": 1}], "user": "not an object"},
            "subscriber": {"firstName": "Ada", "data": {"plan": "pro"}}}}),
    )
    .await;
    let p = &out["result"]["preview"];
    assert_eq!(p["subject"], "Order A-1042 for ADA");
    let body = p["body"].as_str().unwrap();
    assert!(body.contains("<h1>Hi Ada</h1>"), "{body}");
    assert!(
        body.contains("<li>Lamp × 2</li><li>Desk × 1</li>"),
        "{body}"
    );
    assert!(body.contains("Ships to you"), "{body}");
    let example = &out["previewPayloadExample"];
    assert_eq!(
        example["payload"],
        json!({"orderId": "A-1042", "items": [{"name": "Lamp", "qty": 2}, {"name": "Desk", "qty": 1}],
               "user": "not an object"}),
        "what the caller sends wins, even where the template expects another shape"
    );
    assert_eq!(example["subscriber"]["firstName"], "Ada");
    assert_eq!(example["subscriber"]["lastName"], "Doe");
    assert_eq!(example["subscriber"]["data"], json!({"plan": "pro"}));

    // controlValues replace the stored ones for this preview only.
    let out = preview(
        &app,
        "order",
        "mail",
        json!({"controlValues": {"subject": "Draft {{ payload.n | plus: 1 }}"}, "previewPayload": {"payload": {"n": 41}}}),
    )
    .await;
    assert_eq!(out["result"]["preview"]["subject"], "Draft 42");
    assert_eq!(out["result"]["preview"]["body"], "");
    let (_, stored) = app.get("/v2/workflows/order").await;
    assert_eq!(stored["steps"][0]["controlValues"]["body"], EMAIL_BODY);
}
db_test!(email, email_step);

async fn email_block_document(app: TestApp) {
    let doc = json!({"type": "doc", "content": [
        {"type": "heading", "attrs": {"level": 1}, "content": [
            {"type": "text", "text": "Hello "},
            {"type": "variable", "attrs": {"id": "subscriber.firstName", "fallback": "friend"}}]},
        {"type": "paragraph", "content": [
            {"type": "text", "text": "Your order ", "marks": [{"type": "italic"}]},
            {"type": "variable", "attrs": {"id": "payload.order.number"}},
            {"type": "text", "text": " is ready & waiting."}]},
        {"type": "repeat", "attrs": {"each": "payload.items"}, "content": [
            {"type": "paragraph", "content": [{"type": "variable", "attrs": {"id": "payload.items.title"}}]}]},
        {"type": "paragraph", "attrs": {"showIfKey": "payload.gift"}, "content": [{"type": "text", "text": "Gift wrapped!"}]},
        {"type": "button", "attrs": {"text": "Track", "url": "https://shop.example.com/t/{{ payload.order.id }}", "alignment": "center"}},
        {"type": "image", "attrs": {"src": "https://shop.example.com/logo.png", "alt": "Shop", "width": 120}},
        {"type": "horizontalRule"},
        {"type": "spacer", "attrs": {"height": "md"}}
    ]});
    workflow(
        &app,
        json!({"name": "Blocks", "workflowId": "blocks", "steps": [
            {"name": "Mail", "stepId": "mail", "type": "email", "controlValues": {
                "subject": "Order {{ payload.order.number }}", "editorType": "block", "body": doc.to_string()}}]}),
    )
    .await;
    let out = preview(
        &app,
        "blocks",
        "mail",
        json!({"previewPayload": {"payload": {"order": {"number": "<7>", "id": 7}, "items": [{"title": "Lamp"}, {"title": "Desk"}], "gift": true},
            "subscriber": {"firstName": "Ada"}}}),
    )
    .await;
    assert!(out["result"].get("error").is_none(), "{out}");
    let body = out["result"]["preview"]["body"].as_str().unwrap();
    assert!(body.starts_with("<!DOCTYPE html>"), "{body}");
    assert!(body.contains(">Hello Ada</h1>"), "{body}");
    assert!(
        body.contains("<em>Your order </em>&lt;7&gt; is ready &amp; waiting."),
        "{body}"
    );
    assert!(body.contains(">Lamp</p>") && body.contains(">Desk</p>"));
    assert!(body.contains("Gift wrapped!"));
    assert!(
        body.contains("href=\"https://shop.example.com/t/7\""),
        "{body}"
    );
    assert!(body.contains(">Track</a>"));
    assert!(body.contains("<img src=\"https://shop.example.com/logo.png\" alt=\"Shop\""));
    assert!(body.contains("<hr "));
    assert!(!body.contains("{{") && !body.contains("{%"));
    // Variables of the document drive the example.
    let out = preview(&app, "blocks", "mail", json!({})).await;
    assert_eq!(
        out["previewPayloadExample"]["payload"],
        json!({"order": {"number": "number", "id": "id"}, "items": [{"title": "title"}], "gift": "gift"})
    );
}
db_test!(email_blocks, email_block_document);

async fn in_app_sms_push_chat(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Channels", "workflowId": "channels", "steps": [
            {"name": "Inbox", "stepId": "inbox", "type": "in_app", "controlValues": {
                "subject": "{{ payload.author }} commented",
                "body": "{{ payload.author }} wrote: {{ payload.text | truncate: 12 }}",
                "avatar": "https://cdn.example.com/u/{{ payload.authorId }}.png",
                "primaryAction": {"label": "Reply", "redirect": {"url": "https://app.example.com/c/{{ payload.id }}", "target": "_blank"}},
                "secondaryAction": {"label": "Mute"},
                "redirect": {"url": "/inbox/{{ payload.id }}", "target": "_self"},
                "data": {"commentId": "{{ payload.id }}", "kind": "comment"}}},
            {"name": "Text", "stepId": "text", "type": "sms", "controlValues": {"body": "Code {{ payload.code }}"}},
            {"name": "Push", "stepId": "push", "type": "push", "controlValues": {"subject": "Hi {{ subscriber.firstName }}", "body": "{{ payload.text }}"}},
            {"name": "Chat", "stepId": "chat", "type": "chat", "controlValues": {"body": "*{{ payload.author }}*: {{ payload.text }}"}}
        ]}),
    )
    .await;
    let pp = json!({"previewPayload": {"payload": {"author": "grace", "text": "Looks great to me!", "authorId": "u9", "id": 7, "code": "123456"},
        "subscriber": {"firstName": "Ada"}}});
    let out = preview(&app, "channels", "inbox", pp.clone()).await;
    assert_eq!(
        out["result"],
        json!({"type": "in_app", "preview": {
            "body": "grace wrote: Looks gre...",
            "subject": "grace commented",
            "avatar": "https://cdn.example.com/u/u9.png",
            "primaryAction": {"label": "Reply", "redirect": {"url": "https://app.example.com/c/7", "target": "_blank"}},
            "secondaryAction": {"label": "Mute"},
            "redirect": {"url": "/inbox/7", "target": "_self"},
            "data": {"commentId": "7", "kind": "comment"}}})
    );
    let out = preview(&app, "channels", "text", pp.clone()).await;
    assert_eq!(
        out["result"],
        json!({"type": "sms", "preview": {"body": "Code 123456"}})
    );
    let out = preview(&app, "channels", "push", pp.clone()).await;
    assert_eq!(
        out["result"],
        json!({"type": "push", "preview": {"subject": "Hi Ada", "body": "Looks great to me!"}})
    );
    let out = preview(&app, "channels", "chat", pp).await;
    assert_eq!(
        out["result"],
        json!({"type": "chat", "preview": {"body": "*grace*: Looks great to me!"}})
    );
    // A URL control that is a variable gets a URL as its example.
    let out = preview(
        &app,
        "channels",
        "inbox",
        json!({"controlValues": {"body": "x", "redirect": {"url": "{{ payload.link }}"}}}),
    )
    .await;
    assert_eq!(
        out["result"]["preview"]["redirect"]["url"],
        "https://example.com/link"
    );
}
db_test!(channels, in_app_sms_push_chat);

/// The caller's `previewPayload` wins at every depth, for every step type: an array the caller
/// sends is never replaced by the placeholder the template's variables suggest (`items | size`
/// reads `payload.items` as a scalar), and placeholders fill only what the caller left out.
async fn caller_payload_wins_for_every_step_type(app: TestApp) {
    let (url, _seen) = receiver().await;
    let count = "{{ payload.items | size }} item(s) for {{ payload.owner.name }}";
    workflow(
        &app,
        json!({"name": "Items", "workflowId": "items", "steps": [
            {"name": "Inbox", "stepId": "inbox", "type": "in_app", "controlValues": {"subject": count, "body": count}},
            {"name": "Mail", "stepId": "mail", "type": "email", "controlValues": {"subject": count, "body": count}},
            {"name": "Text", "stepId": "text", "type": "sms", "controlValues": {"body": count}},
            {"name": "Push", "stepId": "push", "type": "push", "controlValues": {"subject": count, "body": count}},
            {"name": "Chat", "stepId": "chat", "type": "chat", "controlValues": {"body": count}},
            {"name": "Code", "stepId": "code", "type": "custom", "controlValues": {"summary": count}},
            {"name": "Call", "stepId": "call", "type": "http_request", "controlValues": {"method": "POST",
                "url": format!("{url}/hook"), "body": {"summary": count}}},
            {"name": "Wait", "stepId": "wait", "type": "delay", "controlValues": {"amount": 5, "unit": "minutes"}},
            {"name": "Collect", "stepId": "collect", "type": "digest", "controlValues": {
                "amount": 1, "unit": "hours", "digestKey": count}},
            {"name": "Limit", "stepId": "limit", "type": "throttle", "controlValues": {"amount": 1, "unit": "hours", "threshold": 5}}
        ]}),
    )
    .await;
    let items = json!([{"sku": "a-1", "qty": 1}, {"sku": "b-2", "qty": 3}]);
    let body = json!({"previewPayload": {"payload": {"items": items, "owner": {"id": 7}}}});
    let said = "2 item(s) for name";
    // A stored amount is a number; the preview's own controls may read the payload.
    let amount = |unit: &str, extra: Value| {
        let mut c = json!({"amount": "{{ payload.items | size }}", "unit": unit});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    for (step, kind, expected) in [
        ("inbox", "in_app", json!({"subject": said, "body": said})),
        ("mail", "email", json!({"subject": said, "body": said})),
        ("text", "sms", json!({"body": said})),
        ("push", "push", json!({"subject": said, "body": said})),
        ("chat", "chat", json!({"body": said})),
        ("code", "custom", json!({"summary": said})),
        (
            "call",
            "http_request",
            json!({"method": "POST", "url": format!("{url}/hook"), "body": {"summary": said}}),
        ),
        ("wait", "delay", json!({"amount": 2, "unit": "minutes"})),
        (
            "collect",
            "digest",
            json!({"amount": 1, "unit": "hours", "digestKey": said}),
        ),
        (
            "limit",
            "throttle",
            json!({"amount": 2, "unit": "hours", "threshold": 5}),
        ),
    ] {
        let mut body = body.clone();
        match step {
            "wait" => body["controlValues"] = amount("minutes", json!({})),
            "limit" => body["controlValues"] = amount("hours", json!({"threshold": 5})),
            _ => {}
        }
        let out = preview(&app, "items", step, body).await;
        assert_eq!(
            out["result"],
            json!({"type": kind, "preview": expected}),
            "{step}: {out}"
        );
        // The caller's array is kept; the owner object the caller sent is completed with the
        // placeholder for the field it left out (when the step's controls read it).
        let owner = if matches!(step, "wait" | "limit") {
            json!({"id": 7})
        } else {
            json!({"id": 7, "name": "name"})
        };
        assert_eq!(
            out["previewPayloadExample"]["payload"],
            json!({"items": items, "owner": owner}),
            "{step}"
        );
    }

    // Without a previewPayload the placeholders stand in for everything.
    let out = preview(&app, "items", "inbox", json!({})).await;
    assert_eq!(
        out["previewPayloadExample"]["payload"],
        json!({"items": "items", "owner": {"name": "name"}})
    );
    // A scalar the caller sends where the template reads an object wins too.
    let out = preview(
        &app,
        "items",
        "inbox",
        json!({"previewPayload": {"payload": {"owner": "nobody", "items": []}}}),
    )
    .await;
    assert_eq!(
        out["previewPayloadExample"]["payload"],
        json!({"items": [], "owner": "nobody"})
    );
    assert_eq!(out["result"]["preview"]["body"], "0 item(s) for ");
}
db_test!(caller_payload, caller_payload_wins_for_every_step_type);

async fn delay_digest_and_steps(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Digest", "workflowId": "digest", "steps": [
            {"name": "Wait", "stepId": "wait", "type": "delay", "controlValues": {"amount": 5, "unit": "minutes"}},
            {"name": "Collect", "stepId": "collect", "type": "digest", "controlValues": {
                "amount": 1, "unit": "hours", "digestKey": "{{ payload.projectId }}", "lookBackWindow": {"amount": 10, "unit": "minutes"}}},
            {"name": "Summary", "stepId": "summary", "type": "email", "controlValues": {
                "subject": "{{ steps.collect.eventCount }} updates",
                "body": "{% for e in steps.collect.events %}<p>{{ e.payload.title }}</p>{% endfor %}"}}
        ]}),
    )
    .await;
    let out = preview(&app, "digest", "wait", json!({})).await;
    assert_eq!(
        out["result"],
        json!({"type": "delay", "preview": {"amount": 5, "unit": "minutes"}})
    );
    let out = preview(
        &app,
        "digest",
        "collect",
        json!({"previewPayload": {"payload": {"projectId": "p-9"}}}),
    )
    .await;
    assert_eq!(
        out["result"],
        json!({"type": "digest", "preview": {"amount": 1, "unit": "hours", "digestKey": "p-9",
            "lookBackWindow": {"amount": 10, "unit": "minutes"}}})
    );
    assert!(
        out["previewPayloadExample"].get("steps").is_none(),
        "no digest before this step"
    );

    // After the digest: example events (3), the loop variables filled in.
    let out = preview(&app, "digest", "summary", json!({})).await;
    let steps = &out["previewPayloadExample"]["steps"]["collect"];
    assert_eq!(steps["eventCount"], 3);
    let events = steps["events"].as_array().unwrap();
    assert_eq!(events.len(), 3);
    assert_eq!(events[0]["id"], "example-id-1");
    assert_eq!(events[0]["payload"]["title"], "title");
    assert!(events[0]["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(out["result"]["preview"]["subject"], "3 updates");
    assert_eq!(
        out["result"]["preview"]["body"],
        "<p>title</p><p>title</p><p>title</p>"
    );
    let digest_schema = &out["schema"]["properties"]["steps"]["properties"]["collect"];
    assert_eq!(digest_schema["properties"]["eventCount"]["type"], "integer");

    // The caller's events replace the example ones; eventCount follows.
    let out = preview(
        &app,
        "digest",
        "summary",
        json!({"previewPayload": {"steps": {"collect": {"events": [
            {"id": "e1", "time": "2026-01-01T00:00:00.000Z", "payload": {"title": "Build passed"}},
            {"id": "e2", "time": "2026-01-01T00:01:00.000Z", "payload": {"title": "Deployed"}}]}}}}),
    )
    .await;
    assert_eq!(
        out["previewPayloadExample"]["steps"]["collect"]["eventCount"],
        2
    );
    assert_eq!(
        out["result"]["preview"],
        json!({"subject": "2 updates", "body": "<p>Build passed</p><p>Deployed</p>"})
    );
}
db_test!(delay_digest, delay_digest_and_steps);

async fn context_env_and_payload_schema(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Schema", "workflowId": "schema", "payloadSchema": {
                "type": "object", "additionalProperties": false,
                "properties": {"orderId": {"type": "string"}, "total": {"type": "number"}, "email": {"type": "string", "format": "email"},
                    "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}}},
                "required": ["orderId"]},
            "steps": [{"name": "Text", "stepId": "text", "type": "sms", "controlValues": {
                "body": "{{ payload.orderId }} {{ payload.total }} for {{ context.tenant.data.name }} in {{ env.name }}"}}]}),
    )
    .await;
    let out = preview(
        &app,
        "schema",
        "text",
        json!({"previewPayload": {"payload": {"orderId": "A-7", "unknown": 1},
            "context": {"tenant": {"id": "acme", "data": {"name": "Acme"}}, "region": "eu"}, "env": {"name": "Development"}}}),
    )
    .await;
    let ex = &out["previewPayloadExample"];
    assert_eq!(
        ex["payload"],
        json!({"orderId": "A-7", "total": 1.5, "email": "user@example.com", "lines": [{"sku": "sku"}]}),
        "payload mocked from payloadSchema, caller values restricted to its keys"
    );
    assert_eq!(
        ex["context"],
        json!({"tenant": {"id": "acme", "data": {"name": "Acme"}}, "region": {"id": "eu", "data": {}}})
    );
    assert_eq!(ex["env"], json!({"name": "Development", "type": "dev"}));
    let keys: Vec<&String> = ex.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["context", "env", "payload", "subscriber"]);
    assert_eq!(
        out["result"]["preview"]["body"],
        "A-7 1.5 for Acme in Development"
    );
    assert_eq!(
        out["schema"]["properties"]["payload"]["required"],
        json!(["orderId"]),
        "the workflow's payloadSchema is the payload schema"
    );
}
db_test!(context_and_schema, context_env_and_payload_schema);

/// `env` holds the environment's own name and type; the caller's `env` wins where given.
async fn environment_env(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Env", "workflowId": "env", "steps": [{"name": "Text", "stepId": "text", "type": "sms",
            "controlValues": {"body": "{{ env.name }}/{{ env.type }}/{{ env.region }}"}}]}),
    )
    .await;

    // No caller env: the environment's values, placeholders only for what it lacks.
    let out = preview(&app, "env", "text", json!({})).await;
    assert!(out["result"].get("error").is_none(), "{out}");
    assert_eq!(out["result"]["preview"]["body"], "Development/dev/region");
    assert_eq!(
        out["previewPayloadExample"]["env"],
        json!({"name": "Development", "type": "dev", "region": "region"})
    );
    let env_schema = &out["schema"]["properties"]["env"];
    assert_eq!(env_schema["properties"]["name"]["type"], "string");
    assert_eq!(env_schema["properties"]["type"]["type"], "string");

    // The caller's values win where given; the rest stay the environment's.
    let out = preview(
        &app,
        "env",
        "text",
        json!({"previewPayload": {"env": {"name": "Staging", "region": "eu"}}}),
    )
    .await;
    assert_eq!(out["result"]["preview"]["body"], "Staging/dev/eu");
    assert_eq!(
        out["previewPayloadExample"]["env"],
        json!({"name": "Staging", "type": "dev", "region": "eu"})
    );

    // Another environment: its own name, and `prod`.
    let other = app.second_environment("Production").await;
    let (status, _) = crate::support::send(
        app.req_as(&other, reqwest::Method::POST, "/v2/workflows").json(
            &json!({"name": "Env", "workflowId": "env", "steps": [{"name": "Text", "stepId": "text", "type": "sms",
                "controlValues": {"body": "{{ env.name }}/{{ env.type }}"}}]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, out) = crate::support::send(
        app.req_as(
            &other,
            reqwest::Method::POST,
            "/v2/workflows/env/step/text/preview",
        )
        .json(&json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["result"]["preview"]["body"], "Production/prod");
    assert_eq!(
        out["previewPayloadExample"]["env"],
        json!({"name": "Production", "type": "prod"})
    );
}
db_test!(environment_values, environment_env);

async fn render_errors(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Err", "workflowId": "err", "steps": [
            {"name": "Mail", "stepId": "mail", "type": "email", "controlValues": {"subject": "s", "body": "b"}},
            {"name": "Inbox", "stepId": "inbox", "type": "in_app", "controlValues": {"body": "b"}},
            {"name": "Wait", "stepId": "wait", "type": "delay", "controlValues": {"amount": 1, "unit": "hours"}}
        ]}),
    )
    .await;
    let err = |out: &Value| {
        assert_eq!(out["result"]["preview"], json!({}), "{out}");
        out["result"]["error"].clone()
    };
    let text = |v: &Value, k: &str| v[k].as_str().unwrap().to_owned();

    // Liquid syntax error: line and offending text.
    let out = preview(
        &app,
        "err",
        "mail",
        json!({"controlValues": {"subject": "Hi", "body": "<p>ok</p>\n<p>Hello {{ payload.name </p>"}}),
    )
    .await;
    let e = err(&out);
    assert_eq!(e["title"], "Template syntax error");
    assert!(text(&e, "message").contains("line 2"), "{e}");
    assert!(text(&e, "message").contains("Hello {{ payload.name"), "{e}");
    assert!(text(&e, "message").contains("`body`"), "{e}");
    assert!(text(&e, "hint").contains("}}"), "{e}");

    // Unknown filter, with the suggestion.
    let out = preview(
        &app,
        "err",
        "mail",
        json!({"controlValues": {"subject": "Hi {{ payload.name | upper }}"}}),
    )
    .await;
    let e = err(&out);
    assert_eq!(e["title"], "Unknown filter");
    assert!(text(&e, "message").contains("`upper`"), "{e}");
    assert!(text(&e, "hint").contains("did you mean `upcase`"), "{e}");

    // A control of the wrong type.
    let out = preview(
        &app,
        "err",
        "mail",
        json!({"controlValues": {"subject": 5, "body": "b"}}),
    )
    .await;
    let e = err(&out);
    assert_eq!(e["title"], "Invalid control value");
    assert_eq!(
        e["message"],
        "`subject` must be text, but it is a number: 5"
    );
    assert!(text(&e, "hint").starts_with("Set `subject` to text"), "{e}");

    // A missing required control.
    let out = preview(&app, "err", "mail", json!({"controlValues": {"body": "b"}})).await;
    let e = err(&out);
    assert_eq!(e["title"], "Missing required control");
    assert!(
        text(&e, "message").contains("email step has no `subject`"),
        "{e}"
    );
    assert!(
        text(&e, "hint").starts_with("Add a `subject` control value"),
        "{e}"
    );

    // A redirect URL that is not a URL.
    let out = preview(
        &app,
        "err",
        "inbox",
        json!({"controlValues": {"body": "b", "primaryAction": {"label": "Go", "redirect": {"url": "www example {{ payload.x }}"}}}}),
    )
    .await;
    let e = err(&out);
    assert_eq!(e["title"], "Invalid redirect URL");
    assert!(
        text(&e, "message").contains("`primaryAction.redirect.url` renders to `www example x`"),
        "{e}"
    );
    assert!(text(&e, "hint").contains("absolute URL"), "{e}");

    // A block document that cannot be compiled.
    let doc =
        json!({"type": "doc", "content": [{"type": "variable", "attrs": {"id": "a }} {{ b"}}]});
    let out = preview(
        &app,
        "err",
        "mail",
        json!({"controlValues": {"subject": "s", "editorType": "block", "body": doc.to_string()}}),
    )
    .await;
    let e = err(&out);
    assert_eq!(e["title"], "Invalid email body");
    assert!(text(&e, "hint").contains("variable list"), "{e}");

    // Delay with a bad unit.
    let out = preview(
        &app,
        "err",
        "wait",
        json!({"controlValues": {"amount": 1, "unit": "fortnights"}}),
    )
    .await;
    let e = err(&out);
    assert_eq!(e["title"], "Invalid control value");
    assert!(text(&e, "hint").contains("minutes"), "{e}");

    // A filter given input it cannot use fails at render time, still inside result.error.
    let out = preview(
        &app,
        "err",
        "mail",
        json!({"controlValues": {"subject": "{{ payload.n | divided_by: 0 }}"}, "previewPayload": {"payload": {"n": 4}}}),
    )
    .await;
    let e = err(&out);
    assert!(
        !text(&e, "title").is_empty() && !text(&e, "hint").is_empty(),
        "{e}"
    );
}
db_test!(errors, render_errors);

async fn not_found_and_bad_bodies(app: TestApp) {
    workflow(
        &app,
        json!({"name": "W", "workflowId": "w", "steps": [{"name": "S", "stepId": "s", "type": "sms", "controlValues": {"body": "b"}}]}),
    )
    .await;
    let (status, body) = app
        .post("/v2/workflows/nope/step/s/preview", json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, 404);
    assert!(body["message"].as_str().unwrap().contains("nope"));
    let (status, body) = app
        .post("/v2/workflows/w/step/nope/preview", json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["message"].as_str().unwrap().contains("nope"));
    // Another environment's workflow is unknown here.
    let other = app.second_environment("Other").await;
    let (status, _) = crate::support::send(
        app.req_as(
            &other,
            reqwest::Method::POST,
            "/v2/workflows/w/step/s/preview",
        )
        .json(&json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, body) = app
        .post(
            "/v2/workflows/w/step/s/preview",
            json!({"controlValues": "body"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_error(&body, 422);
    assert!(body["errors"]["controlValues"].is_object(), "{body}");
    let (status, body) = app
        .post(
            "/v2/workflows/w/step/s/preview",
            json!({"previewPayload": {"payload": [1], "context": {"t": 5}}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["errors"]["previewPayload.payload"].is_object(),
        "{body}"
    );
    assert!(
        body["errors"]["previewPayload.context.t"].is_object(),
        "{body}"
    );
    // An empty body previews the stored controls.
    let (status, out) =
        crate::support::send(app.req(reqwest::Method::POST, "/v2/workflows/w/step/s/preview"))
            .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(out["result"]["preview"]["body"], "b");
}
db_test!(not_found, not_found_and_bad_bodies);

/// A local HTTP receiver recording every request's headers and body.
async fn receiver() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(axum::http::HeaderMap, String)>>>,
) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let store = seen.clone();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap, body: String| {
        let store = store.clone();
        async move {
            store.lock().unwrap().push((headers, body));
            "{}"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

async fn http_request_signature(app: TestApp) {
    let (url, seen) = receiver().await;
    workflow(
        &app,
        json!({"name": "Hook", "workflowId": "hook", "steps": [
            {"name": "Call", "stepId": "call", "type": "http_request", "controlValues": {"method": "POST",
                "url": format!("{url}/orders/{{{{ payload.id }}}}"),
                "headers": {"x-tenant": "{{ subscriber.subscriberId }}"},
                "body": {"order": "{{ payload.id }}", "who": "{{ subscriber.firstName }}"}}}]}),
    )
    .await;
    let before = chrono::Utc::now().timestamp_millis();
    let out = preview(
        &app,
        "hook",
        "call",
        json!({"previewPayload": {"payload": {"id": 42}, "subscriber": {"subscriberId": "hh", "firstName": "Hal"}}}),
    )
    .await;
    assert!(out.get("novuSignature").is_none());
    let sig = out["svcSignature"].as_str().expect("svcSignature");
    let (t, v1) = split_signature(sig);
    let t_ms: i64 = t.parse().unwrap();
    assert!(t_ms >= before && t_ms <= chrono::Utc::now().timestamp_millis());
    // Independent HMAC over the JSON body the step sends.
    assert_eq!(v1, hmac_hex(&app.key, &t, r#"{"order":"42","who":"Hal"}"#));
    assert_eq!(
        out["result"],
        json!({"type": "http_request", "preview": {"method": "POST", "url": format!("{url}/orders/42"),
            "headers": {"x-tenant": "hh"}, "body": {"order": "42", "who": "Hal"}}})
    );

    // The engine sends the same body under the same algorithm: the preview's signature verifies
    // over the bytes the engine sent, and the engine's header verifies with the same HMAC.
    let (status, _) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "hook", "to": {"subscriberId": "hh", "firstName": "Hal"}, "payload": {"id": 42}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let mut sent = None;
    for _ in 0..200 {
        if let Some(r) = seen.lock().unwrap().first().cloned() {
            sent = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (headers, body) = sent.expect("the engine called the receiver");
    assert_eq!(v1, hmac_hex(&app.key, &t, &body));
    let (et, ev1) = split_signature(headers["svc-signature"].to_str().unwrap());
    assert_eq!(ev1, hmac_hex(&app.key, &et, &body));
    assert_eq!(
        tidings::crypto::svc_signature(&app.key, et.parse().unwrap(), &body),
        headers["svc-signature"].to_str().unwrap()
    );

    // GET sends no body: the signature covers `{}`.
    let out = preview(
        &app,
        "hook",
        "call",
        json!({"controlValues": {"method": "GET", "url": "https://api.example.com/x"}}),
    )
    .await;
    let (t, v1) = split_signature(out["svcSignature"].as_str().unwrap());
    assert_eq!(v1, hmac_hex(&app.key, &t, "{}"));
    // A URL that is not absolute is a result error; the signature is still shown.
    let out = preview(
        &app,
        "hook",
        "call",
        json!({"controlValues": {"method": "POST", "url": "/relative"}}),
    )
    .await;
    assert_eq!(out["result"]["error"]["title"], "Invalid URL");
    assert!(out["svcSignature"].is_string());
}
db_test!(http_request, http_request_signature);

/// Under the `novu` profile the field is `novuSignature` and the body is wrapped in `data`.
async fn novu_profile(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Hook", "workflowId": "hook", "steps": [
            {"name": "Call", "stepId": "call", "type": "http_request", "controlValues": {
                "method": "POST", "url": "https://api.example.com/hook", "body": {"a": "{{ payload.a }}"}}}]}),
    )
    .await;
    let out = preview(
        &app,
        "hook",
        "call",
        json!({"previewPayload": {"payload": {"a": "b"}}}),
    )
    .await;
    let data = &out["data"];
    assert!(data.get("svcSignature").is_none(), "{out}");
    let (t, v1) = split_signature(data["novuSignature"].as_str().expect("novuSignature"));
    assert_eq!(v1, hmac_hex(&app.key, &t, r#"{"a":"b"}"#));
    assert_eq!(data["result"]["type"], "http_request");
    assert!(data["previewPayloadExample"]["payload"].is_object());
    let keys: Vec<&String> = data.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["novuSignature", "previewPayloadExample", "result", "schema"]
    );
}

mod novu_signature {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        novu_profile(TestApp::spawn_with(Backend::Sqlite, WireProfile::Novu).await).await;
    }

    crate::postgres_test!(
        postgres,
        novu_profile(TestApp::spawn_with(Backend::Postgres, WireProfile::Novu).await)
    );
}
