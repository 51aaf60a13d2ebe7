//! Chat providers end to end (Slack, Discord, Microsoft Teams, Mattermost, Telegram): a chat step is
//! delivered to a local receiver standing in for the provider, through the subscriber's `webhookUrl`
//! credential or a channel endpoint (with its connection's access token), and the request is checked as the
//! real API expects it.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::{Received, Receiver, Reply};
use crate::support::{deliver_one, TestApp};

const TEXT: &str = "Deploy 1.2 done";

/// The chat step's controls.
fn chat() -> Value {
    json!({"body": "Deploy {{payload.v}} done"})
}

/// A trigger to `ann` with `extra` fields (`context`, `overrides`).
fn trigger(extra: Value) -> Value {
    let mut t = json!({"to": "ann", "payload": {"v": "1.2"}});
    if let (Some(t), Some(e)) = (t.as_object_mut(), extra.as_object()) {
        t.extend(e.clone());
    }
    t
}

/// Subscriber `ann` and an active chat integration `identifier` of `provider` with `credentials`.
async fn setup(app: &TestApp, provider: &str, identifier: &str, credentials: Value) {
    app.subscriber("ann", json!({})).await;
    app.integration(
        json!({"providerId": provider, "channel": "chat", "active": true,
        "identifier": identifier, "name": identifier, "credentials": credentials}),
    )
    .await;
}

/// Sets ann's credentials for `provider` / `integration` (`webhookUrl`, `channel`).
async fn subscriber_credentials(
    app: &TestApp,
    provider: &str,
    integration: &str,
    credentials: Value,
) {
    let (status, out) = app
        .put(
            "/v1/subscribers/ann/credentials",
            json!({"providerId": provider, "integrationIdentifier": integration, "credentials": credentials}),
        )
        .await;
    assert!(status.is_success(), "{status}: {out}");
}

/// A channel connection of ann to `integration` with `token`.
async fn connection(app: &TestApp, integration: &str, identifier: &str, token: &str) {
    let (status, out) = app
        .post(
            "/v1/channel-connections",
            json!({"identifier": identifier, "integrationIdentifier": integration, "subscriberId": "ann",
                "workspace": {"id": "W1", "name": "Acme"}, "auth": {"accessToken": token}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

/// A channel endpoint of ann; `extra` adds `context`, `connectionIdentifier`, `identifier`.
async fn endpoint(app: &TestApp, integration: &str, kind: &str, data: Value, extra: Value) {
    let mut body = json!({"type": kind, "endpoint": data, "integrationIdentifier": integration,
        "subscriberId": "ann"});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let (status, out) = app.post("/v1/channel-endpoints", body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body} → {out}");
}

fn details(job: &Value) -> Vec<Value> {
    job["executionDetails"].as_array().unwrap().clone()
}

/// The job completed with one `Success` detail by `provider` whose text is `detail`; the message is `sent`.
fn assert_sent(job: &Value, message: &Value, provider: &str, detail: &str) -> Value {
    assert_eq!(job["status"], "completed", "{job}");
    let success: Vec<Value> = details(job)
        .into_iter()
        .filter(|d| d["status"] == "Success")
        .collect();
    assert_eq!(success.len(), 1, "{job}");
    assert_eq!(success[0]["providerId"], provider, "{job}");
    assert_eq!(success[0]["detail"], detail, "{job}");
    assert_eq!(message["status"], "sent", "{message}");
    assert_eq!(message["channel"], "chat", "{message}");
    assert_eq!(message["providerId"], provider, "{message}");
    assert_eq!(message["content"], TEXT, "{message}");
    success[0].clone()
}

/// The one request the receiver got.
async fn only_request(r: &Receiver) -> Received {
    let got = r.wait_for(1).await;
    assert_eq!(got.len(), 1, "{:?}", paths(&got));
    got[0].clone()
}

fn paths(got: &[Received]) -> Vec<String> {
    got.iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

fn text_reply(body: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: body.into(),
    }
}

// ---------------------------------------------------------------- Slack

async fn slack_incoming_webhook(app: TestApp) {
    let r = Receiver::start().await;
    r.always(text_reply("ok"));
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    subscriber_credentials(
        &app,
        "slack",
        "slack",
        json!({"webhookUrl": format!("{}/hook", r.url)}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    let req = only_request(&r).await;
    assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/hook"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.json(), json!({"text": TEXT}));
    let d = assert_sent(&job, &message, "slack", "Message sent by slack");
    let raw: Value = serde_json::from_str(d["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw, json!({"status": 200, "body": "ok"}));
    assert_eq!(message["directWebhookUrl"], format!("{}/hook", r.url));
}
db_test!(slack_webhook, slack_incoming_webhook);

const SLACK_TOKEN: &str = "xoxb-1111-2222-secret-token";

async fn slack_channel_endpoint_posts_with_the_connection_token(app: TestApp) {
    let r = Receiver::start().await;
    // The answer echoes the token: it must not reach the execution detail.
    r.always(Reply::json(
        200,
        json!({"ok": true, "channel": "C123", "ts": "1700000000.000100", "echo": SLACK_TOKEN}),
    ));
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    connection(&app, "slack", "conn-ann", SLACK_TOKEN).await;
    endpoint(
        &app,
        "slack",
        "slack_channel",
        json!({"channelId": "C123"}),
        json!({"connectionIdentifier": "conn-ann"}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    let req = only_request(&r).await;
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/api/chat.postMessage")
    );
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {SLACK_TOKEN}").as_str())
    );
    assert_eq!(
        req.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(req.json(), json!({"channel": "C123", "text": TEXT}));
    let d = assert_sent(
        &job,
        &message,
        "slack",
        "Message sent by slack (id 1700000000.000100)",
    );
    let raw = d["raw"].as_str().unwrap();
    assert!(
        !raw.contains(SLACK_TOKEN) && !raw.contains("secret-token"),
        "{raw}"
    );
    assert!(
        raw.contains("[redacted]") && raw.contains("1700000000.000100"),
        "{raw}"
    );
    for d in details(&job) {
        assert!(!d.to_string().contains(SLACK_TOKEN), "{d}");
    }
}
db_test!(
    slack_channel,
    slack_channel_endpoint_posts_with_the_connection_token
);

async fn slack_user_endpoint_with_provider_overrides(app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::json(
        200,
        json!({"ok": true, "channel": "D9", "ts": "1.2"}),
    ));
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    connection(&app, "slack", "conn-ann", SLACK_TOKEN).await;
    endpoint(
        &app,
        "slack",
        "slack_user",
        json!({"userId": "U42"}),
        json!({"connectionIdentifier": "conn-ann"}),
    )
    .await;
    let blocks = json!([{"type": "section", "text": {"type": "mrkdwn", "text": "*Deploy*"}}]);
    let (job, message) = deliver_one(
        &app,
        "chat",
        chat(),
        trigger(json!({"overrides": {"providers": {"slack": {"blocks": blocks, "unfurl_links": false}}}})),
    )
    .await;
    let req = only_request(&r).await;
    assert_eq!(req.path, "/api/chat.postMessage");
    assert_eq!(
        req.json(),
        json!({"channel": "U42", "text": TEXT, "blocks": blocks, "unfurl_links": false})
    );
    assert_sent(&job, &message, "slack", "Message sent by slack (id 1.2)");
}
db_test!(slack_user, slack_user_endpoint_with_provider_overrides);

async fn slack_ok_false_is_a_permanent_failure(app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::json(
        200,
        json!({"ok": false, "error": "channel_not_found", "echo": SLACK_TOKEN}),
    ));
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    connection(&app, "slack", "conn-ann", SLACK_TOKEN).await;
    endpoint(
        &app,
        "slack",
        "slack_channel",
        json!({"channelId": "CGONE"}),
        json!({"connectionIdentifier": "conn-ann"}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(r.requests().len(), 1, "a permanent failure is not retried");
    let failed: Vec<Value> = details(&job)
        .into_iter()
        .filter(|d| d["status"] == "Failed")
        .collect();
    assert!(failed.iter().all(|d| d["isRetry"] == false), "{job}");
    let attempt = &failed[0];
    assert_eq!(attempt["providerId"], "slack");
    assert!(
        attempt["detail"]
            .as_str()
            .unwrap()
            .starts_with("Slack chat.postMessage failed: channel_not_found"),
        "{attempt}"
    );
    assert!(
        !attempt["detail"].as_str().unwrap().contains("retry"),
        "{attempt}"
    );
    let raw = attempt["raw"].as_str().unwrap();
    assert!(
        raw.contains("channel_not_found") && !raw.contains(SLACK_TOKEN),
        "{raw}"
    );
    assert_eq!(message["status"], "error", "{message}");
    assert_eq!(message["errorId"], "provider_error", "{message}");
    assert!(message["errorText"]
        .as_str()
        .unwrap()
        .contains("channel_not_found"));
}
db_test!(slack_ok_false, slack_ok_false_is_a_permanent_failure);

async fn slack_ratelimited_is_retried(app: TestApp) {
    let r = Receiver::start().await;
    r.reply([Reply::json(
        200,
        json!({"ok": false, "error": "ratelimited"}),
    )]);
    r.always(Reply::json(200, json!({"ok": true, "ts": "2.0"})));
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    connection(&app, "slack", "conn-ann", SLACK_TOKEN).await;
    endpoint(
        &app,
        "slack",
        "slack_channel",
        json!({"channelId": "C1"}),
        json!({"connectionIdentifier": "conn-ann"}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    assert_eq!(r.requests().len(), 2);
    assert_sent(&job, &message, "slack", "Message sent by slack (id 2.0)");
    assert!(
        details(&job).iter().any(|d| d["status"] == "Failed"
            && d["detail"]
                .as_str()
                .unwrap()
                .contains("ratelimited; retry 1 of 3")),
        "{job}"
    );
}
db_test!(slack_ratelimited, slack_ratelimited_is_retried);

async fn slack_endpoint_without_connection_fails(app: TestApp) {
    let r = Receiver::start().await;
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    endpoint(
        &app,
        "slack",
        "slack_channel",
        json!({"channelId": "C1"}),
        json!({}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert!(r.requests().is_empty());
    assert!(
        message["errorText"]
            .as_str()
            .unwrap()
            .contains("needs a channel connection"),
        "{message}"
    );
}
db_test!(slack_no_connection, slack_endpoint_without_connection_fails);

async fn endpoints_are_chosen_by_the_trigger_context(app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::json(200, json!({"ok": true, "ts": "3.0"})));
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    connection(&app, "slack", "conn-ann", SLACK_TOKEN).await;
    endpoint(
        &app,
        "slack",
        "slack_channel",
        json!({"channelId": "C-ACME"}),
        json!({"connectionIdentifier": "conn-ann", "context": {"tenant": "acme"}}),
    )
    .await;
    endpoint(
        &app,
        "slack",
        "slack_channel",
        json!({"channelId": "C-DEFAULT"}),
        json!({"connectionIdentifier": "conn-ann"}),
    )
    .await;

    let (job, _) = deliver_one(
        &app,
        "chat",
        chat(),
        trigger(json!({"context": {"tenant": "acme"}})),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    let got = r.wait_for(1).await;
    assert_eq!(got.len(), 1, "{:?}", paths(&got));
    assert_eq!(got[0].json()["channel"], "C-ACME");

    let (job, _) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    assert_eq!(job["status"], "completed", "{job}");
    let got = r.wait_for(2).await;
    assert_eq!(got.len(), 2, "{:?}", paths(&got));
    assert_eq!(got[1].json()["channel"], "C-DEFAULT");

    // A context with no endpoint of its own: neither endpoint, and no webhookUrl either.
    let (job, _) = deliver_one(
        &app,
        "chat",
        chat(),
        trigger(json!({"context": {"tenant": "globex"}})),
    )
    .await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(r.requests().len(), 2);
}
db_test!(
    endpoints_by_context,
    endpoints_are_chosen_by_the_trigger_context
);

async fn no_destination_fails_without_a_request(app: TestApp) {
    let r = Receiver::start().await;
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert!(r.requests().is_empty());
    let last = details(&job).last().unwrap().clone();
    assert_eq!(last["status"], "Failed");
    assert!(
        last["detail"]
            .as_str()
            .unwrap()
            .starts_with("Subscriber ann has no slack destination"),
        "{last}"
    );
    assert_eq!(message["status"], "error", "{message}");
    assert_eq!(message["errorId"], "missing_chat_destination", "{message}");
}
db_test!(no_destination, no_destination_fails_without_a_request);

// ---------------------------------------------------------------- Discord

async fn discord_webhook_waits_for_the_message(app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::json(
        200,
        json!({"id": "1100000000000000001", "content": TEXT}),
    ));
    setup(&app, "discord", "discord", json!({})).await;
    subscriber_credentials(
        &app,
        "discord",
        "discord",
        json!({"webhookUrl": format!("{}/api/webhooks/77/tok?thread_id=9", r.url)}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    let req = only_request(&r).await;
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/api/webhooks/77/tok")
    );
    assert_eq!(req.query.as_deref(), Some("thread_id=9&wait=true"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.json(), json!({"content": TEXT}));
    assert_sent(
        &job,
        &message,
        "discord",
        "Message sent by discord (id 1100000000000000001)",
    );
}
db_test!(discord_webhook, discord_webhook_waits_for_the_message);

async fn discord_webhook_endpoint(app: TestApp) {
    // A `webhook` channel endpoint is a destination like the webhookUrl credential.
    let r = Receiver::start().await;
    r.always(Reply::json(200, json!({"id": "5"})));
    setup(&app, "discord", "discord", json!({})).await;
    endpoint(
        &app,
        "discord",
        "webhook",
        json!({"url": format!("{}/api/webhooks/1/t", r.url)}),
        json!({}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    let req = only_request(&r).await;
    assert_eq!(req.path, "/api/webhooks/1/t");
    assert_eq!(req.query.as_deref(), Some("wait=true"));
    assert_sent(&job, &message, "discord", "Message sent by discord (id 5)");
}
db_test!(discord_endpoint, discord_webhook_endpoint);

// ---------------------------------------------------------------- Microsoft Teams

async fn msteams_incoming_webhook_gets_an_adaptive_card(app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::status(202));
    setup(&app, "msteams", "teams", json!({})).await;
    subscriber_credentials(
        &app,
        "msteams",
        "teams",
        json!({"webhookUrl": format!("{}/workflows/abc", r.url)}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    let req = only_request(&r).await;
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/workflows/abc")
    );
    assert_eq!(
        req.json(),
        json!({"type": "message", "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": null,
            "content": {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard",
                "version": "1.4", "body": [{"type": "TextBlock", "text": TEXT, "wrap": true}]}}]})
    );
    assert_sent(&job, &message, "msteams", "Message sent by msteams");
}
db_test!(
    msteams_webhook,
    msteams_incoming_webhook_gets_an_adaptive_card
);

const GRAPH_TOKEN: &str = "eyJ0eXAi.graph-access-token";

async fn msteams_channel_through_graph(app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::json(201, json!({"id": "1616990032035"})));
    setup(&app, "msteams", "teams", json!({"baseUrl": r.url})).await;
    connection(&app, "teams", "conn-teams", GRAPH_TOKEN).await;
    endpoint(&app, "teams", "ms_teams_channel",
        json!({"teamId": "fbe2bf47-16c8-47cf-b4a5-4b9b187c508b", "channelId": "19:4a95f7d8@thread.tacv2"}),
        json!({"connectionIdentifier": "conn-teams"})).await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    let req = only_request(&r).await;
    assert_eq!(req.method, "POST");
    assert_eq!(
        req.path,
        "/v1.0/teams/fbe2bf47-16c8-47cf-b4a5-4b9b187c508b/channels/19:4a95f7d8@thread.tacv2/messages"
    );
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {GRAPH_TOKEN}").as_str())
    );
    assert_eq!(req.json(), json!({"body": {"content": TEXT}}));
    assert_sent(
        &job,
        &message,
        "msteams",
        "Message sent by msteams (id 1616990032035)",
    );
}
db_test!(msteams_channel, msteams_channel_through_graph);

async fn msteams_user_through_a_one_on_one_chat(app: TestApp) {
    let r = Receiver::start().await;
    r.reply([
        Reply::json(200, json!({"id": "sender-oid"})),
        Reply::json(
            201,
            json!({"id": "19:sender_user@unq.gbl.spaces", "chatType": "oneOnOne"}),
        ),
        Reply::json(201, json!({"id": "1700000000001"})),
    ]);
    setup(&app, "msteams", "teams", json!({"baseUrl": r.url})).await;
    connection(&app, "teams", "conn-teams", GRAPH_TOKEN).await;
    endpoint(
        &app,
        "teams",
        "ms_teams_user",
        json!({"userId": "user-oid"}),
        json!({"connectionIdentifier": "conn-teams"}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    let got = r.wait_for(3).await;
    assert_eq!(
        paths(&got),
        [
            "GET /v1.0/me",
            "POST /v1.0/chats",
            "POST /v1.0/chats/19:sender_user@unq.gbl.spaces/messages"
        ]
    );
    assert_eq!(got[0].query.as_deref(), Some("$select=id"));
    for req in &got {
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {GRAPH_TOKEN}").as_str())
        );
    }
    let member = |id: &str| {
        json!({"@odata.type": "#microsoft.graph.aadUserConversationMember",
        "roles": ["owner"], "user@odata.bind": format!("{}/v1.0/users('{id}')", r.url)})
    };
    assert_eq!(
        got[1].json(),
        json!({"chatType": "oneOnOne", "members": [member("sender-oid"), member("user-oid")]})
    );
    assert_eq!(got[2].json(), json!({"body": {"content": TEXT}}));
    assert_sent(
        &job,
        &message,
        "msteams",
        "Message sent by msteams (id 1700000000001)",
    );
}
db_test!(msteams_user, msteams_user_through_a_one_on_one_chat);

// ---------------------------------------------------------------- Mattermost

async fn mattermost_webhook_with_channel(app: TestApp) {
    let r = Receiver::start().await;
    r.always(text_reply("ok"));
    setup(&app, "mattermost", "mm", json!({})).await;
    subscriber_credentials(
        &app,
        "mattermost",
        "mm",
        json!({"webhookUrl": format!("{}/hooks/xyz", r.url), "channel": "town-square"}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    let req = only_request(&r).await;
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/hooks/xyz")
    );
    assert_eq!(req.json(), json!({"text": TEXT, "channel": "town-square"}));
    assert_sent(&job, &message, "mattermost", "Message sent by mattermost");
}
db_test!(mattermost_webhook, mattermost_webhook_with_channel);

// ---------------------------------------------------------------- Telegram

const BOT_TOKEN: &str = "123456789:AAF-bot_secret";

async fn telegram_send_message_to_the_chat_endpoint(app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::json(
        200,
        json!({"ok": true, "result": {"message_id": 42, "date": 1700000000,
        "chat": {"id": -1001234, "type": "supergroup"}, "text": TEXT}}),
    ));
    setup(
        &app,
        "telegram",
        "tg",
        json!({"apiToken": BOT_TOKEN, "baseUrl": r.url}),
    )
    .await;
    endpoint(
        &app,
        "tg",
        "telegram_chat",
        json!({"chatId": "-1001234"}),
        json!({}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    let req = only_request(&r).await;
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", format!("/bot{BOT_TOKEN}/sendMessage").as_str())
    );
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.json(), json!({"chat_id": "-1001234", "text": TEXT}));
    assert_sent(
        &job,
        &message,
        "telegram",
        "Message sent by telegram (id 42)",
    );
}
db_test!(telegram, telegram_send_message_to_the_chat_endpoint);

async fn telegram_errors_keep_the_token_out(app: TestApp) {
    let r = Receiver::start().await;
    // A token from the endpoint's connection (not a credential), echoed by the answer.
    r.always(Reply::json(
        400,
        json!({"ok": false, "error_code": 400,
        "description": format!("Bad Request: chat not found for bot{BOT_TOKEN}")}),
    ));
    setup(&app, "telegram", "tg", json!({"baseUrl": r.url})).await;
    connection(&app, "tg", "conn-tg", BOT_TOKEN).await;
    endpoint(
        &app,
        "tg",
        "telegram_chat",
        json!({"chatId": "7"}),
        json!({"connectionIdentifier": "conn-tg"}),
    )
    .await;
    let (job, message) = deliver_one(&app, "chat", chat(), trigger(json!({}))).await;
    assert_eq!(job["status"], "failed", "{job}");
    let req = only_request(&r).await;
    assert_eq!(req.path, format!("/bot{BOT_TOKEN}/sendMessage"));
    assert!(!job.to_string().contains("bot_secret"), "{job}");
    assert!(!message.to_string().contains("bot_secret"), "{message}");
    assert!(
        message["errorText"]
            .as_str()
            .unwrap()
            .contains("chat not found"),
        "{message}"
    );
}
db_test!(telegram_errors, telegram_errors_keep_the_token_out);
