//! The corpus scenario, part one: the public routes, authentication, integrations, subscribers and their
//! credentials, workflows and previews, channel connections and endpoints, idempotency, subscriber preferences
//! (v2 and v1); then part two
//! ([`super::scenario_engine`]): triggers in every engine state, the activity, messages and the feed.
//! Every route of `src/api/mod.rs` (and `docs::routes`) is called at least once, with its typical errors.

use std::collections::HashMap;

use reqwest::Method;
use serde_json::{json, Value};
use tidings::config::WireProfile;

use super::{Auth, Call, Recorder};
use crate::support::receiver::Receiver;
use crate::support::smtp::SmtpServer;

/// An ObjectId nothing has.
pub const UNKNOWN_ID: &str = "0123456789abcdef01234567";

/// The local services the app delivers to, and ids the scenario reuses.
pub struct World {
    pub smtp: SmtpServer,
    /// Stands in for the SMS, chat and push providers and the `http_request` endpoint.
    pub receiver: Receiver,
    /// A port nobody listens on: the failing SMTP integration.
    pub closed_port: u16,
    /// Integration `_id` by identifier.
    pub integrations: HashMap<&'static str, String>,
}

pub async fn run(rec: &mut Recorder<'_>) {
    let smtp = SmtpServer::start().await;
    let receiver = Receiver::start().await;
    // Picked after the listeners started, and never one of theirs: the system may hand a port it just
    // released to the next listener, and a closed port shared with a listener would both deliver and shift
    // the ports' numbering in the recording.
    let closed_port = loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port != smtp.port && !receiver.url.contains(&format!(":{port}")) {
            break port;
        }
    };
    let mut world = World {
        smtp,
        receiver,
        closed_port,
        integrations: HashMap::new(),
    };
    public_routes(rec).await;
    integrations(rec, &mut world).await;
    subscribers(rec, &world).await;
    workflows(rec, &world).await;
    previews(rec).await;
    super::scenario_engine::run(rec, &world).await;
    channels(rec).await;
    idempotency(rec).await;
    subscriber_delete(rec).await;
    preferences(rec).await;
    unsubscribe_links(rec).await;
    topics(rec).await;
}

/// Health, the API reference, unserved routes and methods, and every way a key is refused.
async fn public_routes(rec: &mut Recorder<'_>) {
    rec.send(Call::new(Method::GET, "/v1/health-check").auth(Auth::None))
        .await;
    rec.send(Call::new(Method::GET, "/v1/health-check/ready").auth(Auth::None))
        .await;
    rec.send(Call::new(Method::GET, "/openapi.json").auth(Auth::None))
        .await;
    rec.send(Call::new(Method::GET, "/docs").auth(Auth::None))
        .await;
    rec.get("/v9/nothing-here?x=1").await;
    rec.send(Call::new(Method::PUT, "/v1/notifications").json(&json!({})))
        .await;
    rec.post("/v1/events/trigger/broadcast", json!({"name": "hello"}))
        .await;
    rec.send(Call::new(Method::GET, "/v2/subscribers").auth(Auth::None))
        .await;
    rec.send(
        Call::new(Method::POST, "/v1/events/trigger")
            .json(&json!({"name": "hello", "to": "ann"}))
            .auth(Auth::None),
    )
    .await;
    for header in [
        "Bearer abc",
        "ApiKey ",
        "ApiKey 00000000000000000000000000000000",
    ] {
        rec.send(Call::new(Method::GET, "/v2/subscribers/ann").auth(Auth::Header(header)))
            .await;
    }
}

/// The in-app provider's id as the profile spells it.
fn inbox_provider(rec: &Recorder<'_>) -> &'static str {
    match rec.profile() {
        WireProfile::Spec => "svc",
        WireProfile::Novu => "novu",
    }
}

async fn integrations(rec: &mut Recorder<'_>, world: &mut World) {
    let r = world.receiver.url.clone();
    let smtp = |host: &str, port: u16| {
        json!({"host": host, "port": port.to_string(), "secure": false, "ignoreTls": true,
            "from": "app@acme.test", "senderName": "Acme"})
    };
    let bodies: [(&'static str, Value); 7] = [
        (
            "inbox",
            json!({"name": "Inbox", "providerId": inbox_provider(rec), "channel": "in_app", "active": true}),
        ),
        (
            "smtp-ok",
            json!({"name": "SMTP ok", "providerId": "nodemailer", "channel": "email", "active": true,
            "credentials": smtp(&world.smtp.host, world.smtp.port)}),
        ),
        (
            "smtp-closed",
            json!({"name": "SMTP closed", "providerId": "nodemailer", "channel": "email", "active": true,
            "credentials": smtp("127.0.0.1", world.closed_port)}),
        ),
        (
            "twilio",
            json!({"name": "Twilio", "providerId": "twilio", "channel": "sms", "active": true,
            "credentials": {"accountSid": "AC1", "token": "tok", "from": "+15550000000", "baseUrl": format!("{r}/sms")}}),
        ),
        (
            "slack",
            json!({"name": "Slack", "providerId": "slack", "channel": "chat", "active": true}),
        ),
        (
            "push-hook",
            json!({"name": "Push hook", "providerId": "push-webhook", "channel": "push", "active": true,
            "credentials": {"webhookUrl": format!("{r}/push"), "secretKey": "push-secret"}}),
        ),
        (
            "temp-sms",
            json!({"name": "Temp", "providerId": "twilio", "channel": "sms", "active": false}),
        ),
    ];
    for (identifier, mut body) in bodies {
        body["identifier"] = json!(identifier);
        let out = rec.post("/v1/integrations", body).await;
        let id = out["_id"].as_str().expect("integration _id").to_owned();
        world.integrations.insert(identifier, id);
    }
    rec.get("/v1/integrations").await;
    rec.get("/v1/integrations/active").await;
    rec.get("/v1/environments").await;
    rec.get("/v1/environments/me").await;
    rec.post("/v1/environments/me/end-sessions", json!({}))
        .await;
    let temp = world.integrations["temp-sms"].clone();
    rec.put(
        &format!("/v1/integrations/{temp}"),
        json!({"name": "Temp 2", "active": false, "credentials": {"from": "+15550000001"}}),
    )
    .await;
    let ok = world.integrations["smtp-ok"].clone();
    rec.post(&format!("/v1/integrations/{ok}/set-primary"), json!({}))
        .await;
    rec.delete(&format!("/v1/integrations/{temp}")).await;
    // Errors: every bad field at once, a provider on the wrong channel, a taken identifier, unknown ids.
    rec.post(
        "/v1/integrations",
        json!({"name": "Bad", "providerId": "no-such-provider", "channel": "no-such-channel"}),
    )
    .await;
    rec.post(
        "/v1/integrations",
        json!({"name": "Wrong", "providerId": "sendgrid", "channel": "sms"}),
    )
    .await;
    rec.post(
        "/v1/integrations",
        json!({"name": "Again", "identifier": "slack", "providerId": "slack", "channel": "chat"}),
    )
    .await;
    rec.put(
        &format!("/v1/integrations/{UNKNOWN_ID}"),
        json!({"name": "x"}),
    )
    .await;
    rec.put("/v1/integrations/not-an-id", json!({"name": "x"}))
        .await;
    rec.delete(&format!("/v1/integrations/{temp}")).await;
    rec.post(
        &format!("/v1/integrations/{UNKNOWN_ID}/set-primary"),
        json!({}),
    )
    .await;
    rec.send(Call::new(Method::POST, "/v1/integrations").raw("{\"name\": "))
        .await;
}

async fn subscribers(rec: &mut Recorder<'_>, world: &World) {
    let r = &world.receiver.url;
    rec.post(
        "/v2/subscribers",
        json!({"subscriberId": "ann", "firstName": "Ann", "lastName": "Lee", "email": "ann@example.com",
            "phone": "+15551230000", "locale": "en-US", "timezone": "Europe/Paris", "data": {"plan": "pro"}}),
    )
    .await;
    rec.post(
        "/v2/subscribers",
        json!({"subscriberId": "bob", "firstName": "Bob"}),
    )
    .await;
    rec.post(
        "/v2/subscribers",
        json!({"subscriberId": "carl", "email": "carl@example.com"}),
    )
    .await;
    // Without failIfExists a second create updates; with it, 409.
    rec.post(
        "/v2/subscribers",
        json!({"subscriberId": "carl", "lastName": "Cole"}),
    )
    .await;
    rec.post(
        "/v2/subscribers?failIfExists=true",
        json!({"subscriberId": "carl"}),
    )
    .await;
    rec.get("/v2/subscribers/ann").await;
    rec.patch(
        "/v2/subscribers/ann",
        json!({"lastName": "Lane", "avatar": null}),
    )
    .await;
    rec.get("/v2/subscribers?email=example.com&limit=10").await;
    rec.get("/v2/subscribers?subscriberId=bob").await;
    rec.get("/v2/subscribers?name=Ann%20Lane").await;
    let page = rec.get("/v2/subscribers?limit=1&orderDirection=ASC").await;
    let next = page["next"].as_str().expect("a next cursor").to_owned();
    rec.get(&format!(
        "/v2/subscribers?limit=1&orderDirection=ASC&after={next}"
    ))
    .await;
    rec.get("/v2/subscribers/nobody").await;
    rec.patch("/v2/subscribers/nobody", json!({"firstName": "No"}))
        .await;
    rec.post("/v2/subscribers", json!({"firstName": "No id"}))
        .await;
    rec.post(
        "/v2/subscribers",
        json!({"subscriberId": "bad", "email": "not-an-email", "locale": 7}),
    )
    .await;
    rec.get("/v2/subscribers?limit=1000&orderBy=nothing").await;
    rec.send(Call::new(Method::POST, "/v2/subscribers").raw("{\"subscriberId\": \"x\",}"))
        .await;

    // Credentials: replace (PUT), append (PATCH), delete.
    rec.put(
        "/v1/subscribers/ann/credentials",
        json!({"providerId": "slack", "integrationIdentifier": "slack",
            "credentials": {"webhookUrl": format!("{r}/chat/ann")}}),
    )
    .await;
    rec.patch(
        "/v1/subscribers/ann/credentials",
        json!({"providerId": "push-webhook", "integrationIdentifier": "push-hook",
            "credentials": {"deviceTokens": ["tok-ann-1"]}}),
    )
    .await;
    rec.patch(
        "/v1/subscribers/bob/credentials",
        json!({"providerId": "push-webhook", "integrationIdentifier": "push-hook",
            "credentials": {"deviceTokens": ["tok-bob"]}}),
    )
    .await;
    rec.delete("/v1/subscribers/bob/credentials/push-webhook")
        .await;
    rec.get("/v2/subscribers/bob").await;
    rec.put(
        "/v1/subscribers/ann/credentials",
        json!({"providerId": "no-such-provider", "credentials": {}}),
    )
    .await;
    rec.put(
        "/v1/subscribers/nobody/credentials",
        json!({"providerId": "slack", "credentials": {"webhookUrl": "https://example.com"}}),
    )
    .await;
    rec.delete("/v1/subscribers/nobody/credentials/slack").await;
    rec.patch(
        "/v1/subscribers/nobody/credentials",
        json!({"providerId": "slack", "credentials": {"webhookUrl": "https://example.com"}}),
    )
    .await;
    rec.patch(
        "/v1/subscribers/ann/credentials",
        json!({"providerId": "slack", "credentials": "none"}),
    )
    .await;
}

fn in_app(step_id: &str, body: &str) -> Value {
    json!({"name": step_id, "stepId": step_id, "type": "in_app",
        "controlValues": {"subject": format!("Subject {step_id}"), "body": body}})
}

fn workflow(workflow_id: &str, name: &str, steps: Vec<Value>) -> Value {
    json!({"name": name, "workflowId": workflow_id, "active": true, "steps": steps})
}

/// The workflows the triggers use: every step type, a digest, a day's delay, failing and strict ones.
fn workflow_bodies(r: &str) -> Vec<Value> {
    let step = |id: &str, kind: &str, controls: Value| json!({"name": id, "stepId": id, "type": kind, "controlValues": controls});
    let mut hello = workflow(
        "hello",
        "Hello",
        vec![in_app("hello", "Hello {{ subscriber.firstName }}")],
    );
    hello["description"] = json!("One in-app step");
    hello["tags"] = json!(["corpus"]);
    let mut strict = workflow(
        "strict",
        "Strict",
        vec![in_app("strict", "{{ payload.name }}")],
    );
    strict["validatePayload"] = json!(true);
    strict["payloadSchema"] = json!({"type": "object", "required": ["name"],
        "properties": {"name": {"type": "string"}}});
    let pros = json!({"and": [{"==": [{"var": "payload.plan"}, "pro"]}]});
    vec![
        workflow("all-steps", "All steps", vec![
            in_app("inbox", "Hi {{ subscriber.firstName }}, order {{ payload.order }}"),
            step("mail", "email", json!({"subject": "Order {{ payload.order }}", "body": "<p>Hello {{ subscriber.firstName }}</p>"})),
            step("text", "sms", json!({"body": "Order {{ payload.order }}"})),
            step("chat", "chat", json!({"body": "Order {{ payload.order }}"})),
            step("push", "push", json!({"subject": "Order", "body": "Order {{ payload.order }}"})),
            step("custom", "custom", json!({})),
            step("call", "http_request", json!({"method": "POST", "url": format!("{r}/http/{{{{ payload.order }}}}")})),
            step("gate", "throttle", json!({"amount": 1, "unit": "minutes", "threshold": 100})),
            step("wait", "delay", json!({"type": "regular", "amount": 1, "unit": "seconds"})),
            in_app("after", "After the delay"),
        ]),
        hello,
        workflow("actor", "Actor", vec![in_app("actor", "From [{{ actor.firstName }}]")]),
        workflow("digest", "Digest", vec![
            step("collect", "digest", json!({"amount": 2, "unit": "seconds"})),
            in_app("summary", "{{ steps.collect.eventCount }} events: {% for e in steps.collect.events %}{{ e.payload.n }} {% endfor %}"),
        ]),
        workflow("later", "Later", vec![
            in_app("now", "Now"),
            step("day", "delay", json!({"type": "regular", "amount": 1, "unit": "days"})),
            step("mail", "email", json!({"editorType": "html", "subject": "Tomorrow", "body": "<p>Tomorrow</p>"})),
        ]),
        workflow("mail-only", "Mail only", vec![
            step("mail", "email", json!({"editorType": "html", "subject": "Hi", "body": "<p>Hi</p>"})),
        ]),
        workflow("temp", "Temp", vec![in_app("temp", "temp")]),
        workflow("unsafe", "Unsafe", vec![in_app("unsafe", "<p>Hi {{ payload.name }}</p>")]),
        workflow("variables", "Variables", vec![in_app("vars",
            "env=[{{ env.name }}] tenant=[{{ context.tenant.id }}] actor=[{{ actor.firstName }}]")]),
        workflow("broken", "Broken", vec![in_app("broken", "Hi {{ payload.name ")]),
        workflow("actions", "Actions", vec![step("act", "in_app", json!({"body": "Order {{ payload.order }}",
            "primaryAction": {"label": "Open {{ payload.order }}", "redirect": {"url": "https://example.com/o/{{ payload.order }}"}},
            "secondaryAction": {"label": "{{ payload.none }}"}}))]),
        strict,
        workflow("no-label", "No label", vec![step("act", "in_app",
            json!({"body": "Hi", "primaryAction": {"redirect": {"url": "https://example.com/x"}}}))]),
        workflow("filtered", "Filtered", vec![
            step("pros", "in_app", json!({"body": "only for pros", "skip": pros})),
            in_app("everyone", "for everyone"),
        ]),
    ]
}

async fn workflows(rec: &mut Recorder<'_>, world: &World) {
    for body in workflow_bodies(&world.receiver.url) {
        rec.post("/v2/workflows", body).await;
    }
    rec.get("/v2/workflows/hello").await;
    rec.get("/v2/workflows/all-steps").await;
    rec.get("/v2/workflows/broken").await;
    rec.get("/v2/workflows?limit=50").await;
    rec.get("/v2/workflows?limit=2&offset=1&orderDirection=ASC&orderBy=name")
        .await;
    rec.get("/v2/workflows?query=ste").await;
    rec.put(
        "/v2/workflows/temp",
        json!({"name": "Temp 2", "workflowId": "temp", "steps": [in_app("temp", "temp 2")],
            "preferences": {"user": {"all": {"enabled": true, "readOnly": false},
                "channels": {"email": {"enabled": false}}}, "workflow": null}}),
    )
    .await;
    rec.patch(
        "/v2/workflows/temp",
        json!({"active": false, "description": "patched"}),
    )
    .await;
    rec.delete("/v2/workflows/temp").await;
    // Errors: a deleted or unknown workflow, a taken workflowId, bad steps, an order not recorded.
    rec.get("/v2/workflows/temp").await;
    rec.delete("/v2/workflows/temp").await;
    rec.patch("/v2/workflows/nothing", json!({"active": true}))
        .await;
    rec.put(
        "/v2/workflows/nothing",
        json!({"name": "Nothing", "steps": []}),
    )
    .await;
    rec.post(
        "/v2/workflows",
        workflow("hello", "Hello again", vec![in_app("hello", "Hi")]),
    )
    .await;
    rec.post(
        "/v2/workflows",
        json!({"name": "Bad", "workflowId": "bad", "steps": [{"name": "x", "type": "pager"}]}),
    )
    .await;
    rec.post("/v2/workflows", json!({"steps": "none"})).await;
    rec.patch("/v2/workflows/hello", json!({"active": "yes"}))
        .await;
    rec.get("/v2/workflows?orderBy=lastTriggeredAt").await;
}

async fn previews(rec: &mut Recorder<'_>) {
    rec.post(
        "/v2/workflows/all-steps/step/inbox/preview",
        json!({"previewPayload": {"payload": {"order": "A-1"}, "subscriber": {"firstName": "Ann"}}}),
    )
    .await;
    rec.post(
        "/v2/workflows/all-steps/step/mail/preview",
        json!({"previewPayload": {"payload": {"order": "A-2"}, "subscriber": {"firstName": "Ann"}}}),
    )
    .await;
    rec.post(
        "/v2/workflows/variables/step/vars/preview",
        json!({"previewPayload": {"context": {"tenant": "acme"}, "actor": {"firstName": "Bob"}}}),
    )
    .await;
    rec.post("/v2/workflows/digest/step/summary/preview", json!({}))
        .await;
    rec.post("/v2/workflows/broken/step/broken/preview", json!({}))
        .await;
    rec.post("/v2/workflows/all-steps/step/nothing/preview", json!({}))
        .await;
    rec.post("/v2/workflows/nothing/step/inbox/preview", json!({}))
        .await;
    rec.post(
        "/v2/workflows/all-steps/step/inbox/preview",
        json!({"previewPayload": "not an object"}),
    )
    .await;
}

async fn channels(rec: &mut Recorder<'_>) {
    let conn = json!({"subscriberId": "ann", "integrationIdentifier": "slack",
        "workspace": {"id": "T1", "name": "Acme"}, "auth": {"accessToken": "xoxb-1"}});
    let c = rec.post("/v1/channel-connections", conn.clone()).await;
    let generated = c["identifier"].as_str().expect("identifier").to_owned();
    rec.post(
        "/v1/channel-connections",
        json!({"identifier": "acme-shared", "connectionMode": "shared", "context": {"tenant": "acme"},
            "integrationIdentifier": "slack", "workspace": {"id": "T2", "name": "Shared"},
            "auth": {"accessToken": "xoxb-2"}}),
    )
    .await;
    rec.get("/v1/channel-connections?subscriberId=ann").await;
    rec.get("/v1/channel-connections?limit=10").await;
    rec.get(&format!("/v1/channel-connections/{generated}"))
        .await;
    rec.patch(
        &format!("/v1/channel-connections/{generated}"),
        json!({"workspace": {"id": "T1", "name": "Acme 2"}, "auth": {"accessToken": "xoxb-3"}}),
    )
    .await;
    // Errors: the same subscriber and integration again, unknown references, a bad mode.
    rec.post("/v1/channel-connections", conn).await;
    rec.post(
        "/v1/channel-connections",
        json!({"subscriberId": "ghost", "integrationIdentifier": "slack",
            "workspace": {"id": "T"}, "auth": {"accessToken": "x"}}),
    )
    .await;
    rec.post(
        "/v1/channel-connections",
        json!({"subscriberId": "ann", "integrationIdentifier": "slack", "connectionMode": "team",
            "workspace": {"name": "no id"}, "auth": {}}),
    )
    .await;
    rec.get("/v1/channel-connections/chconn_unknown").await;
    rec.patch(
        "/v1/channel-connections/chconn_unknown",
        json!({"workspace": {"id": "T9"}}),
    )
    .await;
    rec.patch(
        &format!("/v1/channel-connections/{generated}"),
        json!({"workspace": {"name": "no id"}, "auth": "none"}),
    )
    .await;
    rec.get("/v1/channel-connections?limit=1000").await;

    let endpoint = json!({"identifier": "ann-general", "subscriberId": "ann", "integrationIdentifier": "slack",
        "connectionIdentifier": generated, "type": "slack_channel", "endpoint": {"channelId": "C1"}});
    rec.post("/v1/channel-endpoints", endpoint.clone()).await;
    let e = rec
        .post(
            "/v1/channel-endpoints",
            json!({"subscriberId": "ann", "integrationIdentifier": "slack", "type": "slack_user",
                "endpoint": {"userId": "U1"}}),
        )
        .await;
    let user_endpoint = e["identifier"].as_str().expect("identifier").to_owned();
    rec.get("/v1/channel-endpoints?subscriberId=ann").await;
    rec.get(&format!(
        "/v1/channel-endpoints?connectionIdentifier={generated}"
    ))
    .await;
    rec.get("/v1/channel-endpoints/ann-general").await;
    rec.patch(
        "/v1/channel-endpoints/ann-general",
        json!({"endpoint": {"channelId": "C2"}}),
    )
    .await;
    // Errors: a taken identifier, a non-object endpoint, an unknown type, unknown references.
    rec.post("/v1/channel-endpoints", endpoint).await;
    rec.patch(
        "/v1/channel-endpoints/ann-general",
        json!({"endpoint": "not-an-object"}),
    )
    .await;
    rec.post(
        "/v1/channel-endpoints",
        json!({"subscriberId": "ann", "integrationIdentifier": "slack", "type": "pager", "endpoint": {}}),
    )
    .await;
    rec.post(
        "/v1/channel-endpoints",
        json!({"subscriberId": "ann", "integrationIdentifier": "twilio", "type": "slack_channel",
            "endpoint": {"channelId": "C1"}}),
    )
    .await;
    rec.post(
        "/v1/channel-endpoints",
        json!({"subscriberId": "ann", "integrationIdentifier": "nope", "type": "slack_channel",
            "endpoint": {"channelId": "C1"}}),
    )
    .await;
    rec.patch("/v1/channel-endpoints/chendp_unknown", json!({}))
        .await;
    rec.delete("/v1/channel-endpoints/chendp_unknown").await;
    rec.get("/v1/channel-endpoints?limit=0").await;
    rec.delete(&format!("/v1/channel-endpoints/{user_endpoint}"))
        .await;
    rec.delete("/v1/channel-endpoints/ann-general").await;
    rec.get("/v1/channel-endpoints/ann-general").await;
    rec.delete(&format!("/v1/channel-connections/{generated}"))
        .await;
    rec.get(&format!("/v1/channel-connections/{generated}"))
        .await;
    rec.delete("/v1/channel-connections/acme-shared").await;
    rec.delete("/v1/channel-connections/acme-shared").await;
}

/// `idempotency-key` on writes: the first answer, its replay, the same key for another body, a long key.
async fn idempotency(rec: &mut Recorder<'_>) {
    let body = json!({"subscriberId": "kim", "firstName": "Kim"});
    for _ in 0..2 {
        rec.send(
            Call::new(Method::POST, "/v2/subscribers")
                .json(&body)
                .header("idempotency-key", "corpus-1"),
        )
        .await;
    }
    rec.send(
        Call::new(Method::POST, "/v2/subscribers")
            .json(&json!({"subscriberId": "kim", "firstName": "Kimberly"}))
            .header("idempotency-key", "corpus-1"),
    )
    .await;
    rec.send(
        Call::new(Method::POST, "/v2/subscribers")
            .json(&body)
            .header("idempotency-key", &"k".repeat(256)),
    )
    .await;
    // Reads ignore the key but echo it.
    rec.send(Call::new(Method::GET, "/v2/subscribers/kim").header("idempotency-key", "corpus-2"))
        .await;
}

/// A deleted subscriber: gone from reads, their activity kept.
async fn subscriber_delete(rec: &mut Recorder<'_>) {
    rec.delete("/v2/subscribers/carl").await;
    rec.get("/v2/subscribers/carl").await;
    rec.delete("/v2/subscribers/carl").await;
    // The erasure strips carl's notification in the background: recorded once it has.
    let app = rec.app;
    crate::support::eventually(|| async {
        let sql =
            "select count(*) from notifications where transaction_id = $1 and to_value is null";
        (crate::support::count(app, sql, "corpus-carl").await == 1).then_some(())
    })
    .await;
    rec.get("/v1/notifications?transactionId=corpus-carl").await;
    rec.get("/v2/subscribers?limit=100").await;
}

/// Subscriber preferences through the v2 and the v1 routes: each level, a workflow's defaults, read-only and
/// critical workflows, and the errors. A subscriber and workflows of their own, after every trigger.
async fn preferences(rec: &mut Recorder<'_>) {
    rec.post("/v2/subscribers", json!({"subscriberId": "pat"}))
        .await;
    rec.post(
        "/v2/workflows",
        json!({"name": "Prefs news", "workflowId": "prefs-news", "steps": [in_app("inbox", "news"),
            {"name": "mail", "stepId": "mail", "type": "email", "controlValues": {"subject": "News", "body": "news"}}],
            "preferences": {"user": null, "workflow": {"all": {"enabled": true, "readOnly": false},
                "channels": {"email": {"enabled": false}}}}}),
    )
    .await;
    rec.post(
        "/v2/workflows",
        json!({"name": "Prefs alerts", "workflowId": "prefs-alerts", "critical": true,
            "steps": [in_app("inbox", "alert")]}),
    )
    .await;
    rec.post(
        "/v2/workflows",
        json!({"name": "Prefs locked", "workflowId": "prefs-locked", "steps": [in_app("inbox", "locked")],
            "preferences": {"user": null, "workflow": {"all": {"enabled": true, "readOnly": true}, "channels": {}}}}),
    )
    .await;

    // v2: read, a global change, a workflow's change, a bulk change.
    rec.get("/v2/subscribers/pat/preferences").await;
    rec.get("/v2/subscribers/pat/preferences?criticality=critical")
        .await;
    rec.patch(
        "/v2/subscribers/pat/preferences",
        json!({"channels": {"in_app": false}}),
    )
    .await;
    rec.patch(
        "/v2/subscribers/pat/preferences",
        json!({"workflowId": "prefs-news", "channels": {"email": true}}),
    )
    .await;
    rec.patch(
        "/v2/subscribers/pat/preferences/bulk",
        json!({"preferences": [{"workflowId": "prefs-news", "channels": {"email": false}}]}),
    )
    .await;
    rec.get("/v2/subscribers/nobody/preferences").await;
    rec.get("/v2/subscribers/pat/preferences?criticality=some")
        .await;
    rec.patch(
        "/v2/subscribers/pat/preferences",
        json!({"channels": {"tool": true}}),
    )
    .await;
    rec.patch(
        "/v2/subscribers/pat/preferences",
        json!({"workflowId": "prefs-locked", "channels": {"in_app": false}}),
    )
    .await;
    rec.patch(
        "/v2/subscribers/pat/preferences",
        json!({"workflowId": "nothing", "channels": {"in_app": false}}),
    )
    .await;
    rec.patch(
        "/v2/subscribers/pat/preferences/bulk",
        json!({"preferences": []}),
    )
    .await;

    // v1: the list (every channel, or the workflow's), by level, a workflow's change, the global change.
    rec.get("/v1/subscribers/pat/preferences").await;
    rec.get("/v1/subscribers/pat/preferences?includeInactiveChannels=false")
        .await;
    rec.get("/v1/subscribers/pat/preferences/global").await;
    rec.get("/v1/subscribers/pat/preferences/template").await;
    rec.patch(
        "/v1/subscribers/pat/preferences/prefs-news",
        json!({"channel": {"type": "sms", "enabled": false}, "enabled": false}),
    )
    .await;
    rec.patch(
        "/v1/subscribers/pat/preferences",
        json!({"enabled": false, "preferences": [{"type": "chat", "enabled": false}]}),
    )
    .await;
    rec.get("/v1/subscribers/nobody/preferences").await;
    rec.get("/v1/subscribers/pat/preferences/weekly").await;
    rec.patch(
        "/v1/subscribers/pat/preferences/prefs-news",
        json!({"channel": {"type": "tool", "enabled": true}}),
    )
    .await;
    rec.patch(
        "/v1/subscribers/pat/preferences/prefs-alerts",
        json!({"enabled": false}),
    )
    .await;
    rec.patch(
        "/v1/subscribers/pat/preferences/nothing",
        json!({"enabled": false}),
    )
    .await;
    rec.patch(
        "/v1/subscribers/nobody/preferences",
        json!({"preferences": [{"type": "email", "enabled": false}]}),
    )
    .await;
}

/// An unsubscribe link's refusal page (a valid token names ids that change from run to run; tests/it/unsubscribe.rs
/// covers those).
async fn unsubscribe_links(rec: &mut Recorder<'_>) {
    rec.send(Call::new(Method::GET, "/v1/unsubscribe/not-a-token").auth(Auth::None))
        .await;
    rec.send(
        Call::new(Method::POST, "/v1/unsubscribe/not-a-token")
            .auth(Auth::None)
            .raw("{}"),
    )
    .await;
}

/// Topics and subscriptions through the v2 and v1 routes: upsert, partial success, all failed, the lists, one
/// subscription, unsubscribe, the refusals and the deletions.
async fn topics(rec: &mut Recorder<'_>) {
    for id in ["tp-a", "tp-b"] {
        rec.post(
            "/v2/subscribers",
            json!({"subscriberId": id, "firstName": id}),
        )
        .await;
    }
    rec.post("/v2/topics", json!({"key": "tp-news", "name": "News"}))
        .await;
    rec.post("/v2/topics", json!({"key": "tp-news", "name": "Newer"}))
        .await;
    rec.post("/v2/topics?failIfExists=true", json!({"key": "tp-news"}))
        .await;
    rec.post("/v2/topics", json!({"key": "bad key"})).await;
    rec.get("/v2/topics/tp-news").await;
    rec.patch("/v2/topics/tp-news", json!({"name": "Renamed"}))
        .await;
    rec.get("/v2/topics?key=tp-news").await;
    rec.get("/v2/topics/tp-none").await;
    rec.post(
        "/v2/topics/tp-news/subscriptions",
        json!({"subscriptions": ["tp-a", {"subscriberId": "tp-b", "identifier": "b-news"}, "tp-ghost"]}),
    )
    .await;
    rec.post(
        "/v2/topics/tp-news/subscriptions",
        json!({"subscriberIds": ["tp-ghost"]}),
    )
    .await;
    rec.post(
        "/v2/topics/tp-news/subscriptions",
        json!({"subscriberIds": ["tp-a"], "preferences": []}),
    )
    .await;
    rec.get("/v2/topics/tp-news/subscriptions?orderDirection=ASC")
        .await;
    rec.get("/v2/topics/tp-news/subscriptions/b-news").await;
    rec.patch("/v2/topics/tp-news/subscriptions/b-news", json!({}))
        .await;
    rec.get("/v2/subscribers/tp-a/subscriptions").await;
    rec.get("/v1/topics/tp-news/subscribers/tp-b").await;
    rec.send(
        Call::new(Method::DELETE, "/v2/topics/tp-news/subscriptions")
            .json(&json!({"subscriptions": [{"identifier": "b-news"}, "tp-ghost"]})),
    )
    .await;
    rec.delete("/v2/topics/tp-news").await;

    // v1.
    rec.post("/v1/topics", json!({"key": "tp-v1", "name": "V1"}))
        .await;
    rec.post(
        "/v1/topics/tp-v1/subscribers",
        json!({"subscribers": ["tp-a", "tp-ghost"]}),
    )
    .await;
    rec.get("/v1/topics?page=0&pageSize=10").await;
    rec.get("/v1/topics/tp-v1").await;
    rec.patch("/v1/topics/tp-v1", json!({"name": "V1 renamed"}))
        .await;
    rec.post(
        "/v1/topics/tp-v1/subscribers/removal",
        json!({"subscribers": ["tp-a"]}),
    )
    .await;
    rec.delete("/v1/topics/tp-v1").await;
}
