//! Rendering shared by delivery and the step preview (issue 19, defects 6, 7, 11): one set of template
//! variables (payload, subscriber, actor looked up, the trigger's context, env, workflow), the same
//! sanitisation of email HTML and in-app content, and the email's text/plain part.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::Receiver;
use crate::support::{settled, TestApp};

const IN_APP_BODY: &str =
    "env=[{{ env.name }}] tenant=[{{ context.tenant.id }}:{{ context.tenant.data.name }}] \
    actor=[{{ actor.firstName }}] hi {{ payload.name }}";
const EMAIL_BODY: &str =
    "<html><head><style>p { color: #333; }</style></head><body style=\"margin:0\">\
    <p>Hi {{ subscriber.firstName }}, {{ payload.name }} from {{ actor.firstName }}</p>\
    <p><a href=\"{{ payload.link }}\">Open {{ workflow.name }}</a></p></body></html>";

async fn setup(app: &TestApp, disable: bool) -> Receiver {
    let r = Receiver::start().await;
    app.integration(
        json!({"providerId": "email-webhook", "channel": "email", "active": true,
        "identifier": "hook", "name": "hook",
        "credentials": {"webhookUrl": format!("{}/hook", r.url), "from": "app@example.com"}}),
    )
    .await;
    app.subscriber(
        "u1",
        json!({"firstName": "Ann", "email": "ann@example.com"}),
    )
    .await;
    app.subscriber("u2", json!({"firstName": "Bea"})).await;
    let inbox = json!({"subject": "For {{ actor.firstName }} <b>{{ payload.name }}</b>",
        "body": IN_APP_BODY, "disableOutputSanitization": disable});
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Order news", "workflowId": "news", "steps": [
                {"name": "Inbox", "stepId": "inbox", "type": "in_app", "controlValues": inbox},
                {"name": "Mail", "stepId": "mail", "type": "email", "controlValues": {
                    "subject": "News for {{ subscriber.firstName }} & {{ actor.firstName }}",
                    "body": EMAIL_BODY, "disableOutputSanitization": disable}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    r
}

fn payload() -> Value {
    json!({"name": "<script>alert(1)</script><img src=x onerror=alert(2)>Ada", "link": "javascript:alert(3)"})
}

fn context() -> Value {
    json!({"tenant": {"id": "acme", "data": {"name": "Acme"}}})
}

/// Triggers `news` to u1 with `actor`; returns the in-app message and the email the receiver got.
async fn deliver(app: &TestApp, r: &Receiver, actor: Value, n: usize) -> (Value, Value) {
    let transaction_id = format!("t-{}", tidings::domain::new_object_id());
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "news", "to": "u1", "actor": actor, "context": context(),
                "payload": payload(), "transactionId": transaction_id}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let items = settled(app, &transaction_id, 1).await;
    for job in items[0]["jobs"].as_array().unwrap() {
        assert_eq!(job["status"], "completed", "{job}");
    }
    let (status, page) = app
        .get(&format!(
            "/v1/messages?transactionId={transaction_id}&channel=in_app"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let sent = r.wait_for(n).await;
    (page["data"][0].clone(), sent[n - 1].json())
}

async fn preview(app: &TestApp, step: &str, actor: Value) -> Value {
    let (status, out) = app
        .post(
            &format!("/v2/workflows/news/step/{step}/preview"),
            json!({"previewPayload": {"payload": payload(), "context": context(), "actor": actor,
                "subscriber": {"firstName": "Ann"}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert!(out["result"].get("error").is_none(), "{out}");
    out["result"]["preview"].clone()
}

async fn preview_equals_delivery(app: TestApp) {
    let r = setup(&app, false).await;
    let env_name = app
        .store
        .environment_name(&app.tenant.environment_id)
        .await
        .unwrap()
        .unwrap();
    for (i, actor) in [json!("u2"), json!({"subscriberId": "u2"})]
        .into_iter()
        .enumerate()
    {
        let (message, email) = deliver(&app, &r, actor.clone(), i + 1).await;
        // Delivered: the trigger's context, the environment and the looked-up actor reach the
        // templates; the payload's script, handler and javascript: link are gone.
        assert_eq!(
            message["content"],
            format!("env=[{env_name}] tenant=[acme:Acme] actor=[Bea] hi <img src=\"x\">Ada"),
            "{message}"
        );
        assert_eq!(message["subject"], "For Bea <b><img src=\"x\">Ada</b>");
        assert_eq!(
            email["html"],
            "<html><head><style>p { color: #333; }</style></head><body style=\"margin:0\">\
             <p>Hi Ann, <img src=\"x\">Ada from Bea</p><p><a>Open Order news</a></p></body></html>"
        );
        // The subject is a plain-text header: not HTML-escaped.
        assert_eq!(email["subject"], "News for Ann & Bea");
        assert_eq!(email["text"], "Hi Ann, Ada from Bea\n\nOpen Order news");

        // The preview of the same inputs shows the same.
        let p = preview(&app, "inbox", actor.clone()).await;
        assert_eq!(p["body"], message["content"]);
        assert_eq!(p["subject"], message["subject"]);
        let p = preview(&app, "mail", actor).await;
        assert_eq!(p["body"], email["html"]);
        assert_eq!(p["subject"], email["subject"]);
    }
}
db_test!(preview_equals_delivery, preview_equals_delivery);

async fn sanitization_can_be_disabled(app: TestApp) {
    let r = setup(&app, true).await;
    let (message, email) = deliver(&app, &r, json!("u2"), 1).await;
    assert!(message["content"]
        .as_str()
        .unwrap()
        .ends_with("hi <script>alert(1)</script><img src=x onerror=alert(2)>Ada"));
    assert!(email["html"]
        .as_str()
        .unwrap()
        .contains("<script>alert(1)</script><img src=x onerror=alert(2)>Ada"));
    let p = preview(&app, "inbox", json!("u2")).await;
    assert_eq!(p["body"], message["content"]);
    let p = preview(&app, "mail", json!("u2")).await;
    assert_eq!(p["body"], email["html"]);
}
db_test!(sanitization_disabled, sanitization_can_be_disabled);

async fn an_unknown_actor_id_renders_empty_fields(app: TestApp) {
    let r = setup(&app, false).await;
    // "ghost" is no subscriber: `actor.firstName` of the string renders empty instead of failing.
    let (message, email) = deliver(&app, &r, json!("ghost"), 1).await;
    assert!(message["content"]
        .as_str()
        .unwrap()
        .contains("actor=[] hi <img src=\"x\">Ada"));
    assert_eq!(email["subject"], "News for Ann & ");
    let p = preview(&app, "inbox", json!("ghost")).await;
    assert_eq!(p["body"], message["content"]);
}
db_test!(unknown_actor, an_unknown_actor_id_renders_empty_fields);
