//! Chat providers end to end (Slack, Discord, Microsoft Teams, Mattermost, Telegram): a chat step is
//! delivered to a local receiver standing in for the provider, through the subscriber's `webhookUrl`
//! credential or a channel endpoint (with its connection's access token), and the request is checked as the
//! real API expects it.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::{Received, Receiver, Reply};
use crate::support::{deliver_one, only_post, replying_always, replying_once, TestApp};

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

/// Triggers the chat step to ann with `extra` trigger fields; returns the job and the message.
async fn send(app: &TestApp, extra: Value) -> (Value, Value) {
    deliver_one(app, "chat", chat(), trigger(extra)).await
}

/// Ann and the chat integration `(provider, identifier)` with `credentials`, and her own `webhook`
/// credentials for it; then triggers. Returns the job, the message and the one request the receiver got,
/// a `POST` to `path`.
async fn send_by_webhook(
    app: &TestApp,
    r: &Receiver,
    (provider, integration): (&str, &str),
    credentials: Value,
    (webhook, path): (Value, &str),
) -> (Value, Value, Received) {
    setup(app, provider, integration, credentials).await;
    subscriber_credentials(app, provider, integration, webhook).await;
    let (job, message) = send(app, json!({})).await;
    (job, message, only_post(r, path).await)
}

/// The identifier of ann's channel connection in [`connected`].
const CONN: &str = "conn-ann";

/// Ann and the chat integration pointing at the receiver, with her connection (`token`) to it.
async fn connected(app: &TestApp, r: &Receiver, provider: &str, integration: &str, token: &str) {
    setup(app, provider, integration, json!({"baseUrl": r.url})).await;
    connection(app, integration, CONN, token).await;
}

/// [`connected`], plus one endpoint `kind` with `data` through that connection.
async fn connected_endpoint(
    app: &TestApp,
    r: &Receiver,
    (provider, integration): (&str, &str),
    token: &str,
    kind: &str,
    data: Value,
) {
    connected(app, r, provider, integration, token).await;
    endpoint(app, integration, kind, data, via_connection()).await;
}

fn via_connection() -> Value {
    json!({"connectionIdentifier": CONN})
}

fn details(job: &Value) -> Vec<Value> {
    job["executionDetails"].as_array().unwrap().clone()
}

/// The job completed with one `Success` detail by `provider` (reporting `id`); the message is `sent`.
fn assert_sent(job: &Value, message: &Value, provider: &str, id: Option<&str>) -> Value {
    assert_eq!(job["status"], "completed", "{job}");
    let success: Vec<Value> = details(job)
        .into_iter()
        .filter(|d| d["status"] == "Success")
        .collect();
    assert_eq!(success.len(), 1, "{job}");
    assert_eq!(success[0]["providerId"], provider, "{job}");
    let detail = match id {
        Some(id) => format!("Message sent by {provider} (id {id})"),
        None => format!("Message sent by {provider}"),
    };
    assert_eq!(success[0]["detail"], detail.as_str(), "{job}");
    assert_eq!(message["status"], "sent", "{message}");
    assert_eq!(message["channel"], "chat", "{message}");
    assert_eq!(message["providerId"], provider, "{message}");
    assert_eq!(message["content"], TEXT, "{message}");
    success[0].clone()
}

fn assert_failed(job: &Value) {
    assert_eq!(job["status"], "failed", "{job}");
}

/// The message's `errorText` contains `has`.
fn assert_error_text(message: &Value, has: &str) {
    let text = message["errorText"].as_str().unwrap();
    assert!(text.contains(has), "{has:?} not in {message}");
}

fn assert_bearer(req: &Received, token: &str) {
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {token}").as_str())
    );
}

/// Triggers with `extra` and expects the job completed and the receiver's `n`th request; returns that
/// request's `channel`.
async fn nth_channel(app: &TestApp, r: &Receiver, extra: Value, n: usize) -> Value {
    let (job, _) = send(app, extra).await;
    assert_eq!(job["status"], "completed", "{job}");
    let got = r.wait_for(n).await;
    assert_eq!(got.len(), n, "{:?}", paths(&got));
    got[n - 1].json()["channel"].clone()
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

const SLACK: (&str, &str) = ("slack", "slack");

async fn slack_incoming_webhook(app: TestApp) {
    let r = replying_always(text_reply("ok")).await;
    let hook = format!("{}/hook", r.url);
    let (base, webhook) = (json!({"baseUrl": r.url}), json!({"webhookUrl": hook}));
    let (job, message, req) = send_by_webhook(&app, &r, SLACK, base, (webhook, "/hook")).await;
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.json(), json!({"text": TEXT}));
    let d = assert_sent(&job, &message, "slack", None);
    let raw: Value = serde_json::from_str(d["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw, json!({"status": 200, "body": "ok"}));
    assert_eq!(message["directWebhookUrl"], hook);
}
db_test!(slack_webhook, slack_incoming_webhook);

const SLACK_TOKEN: &str = "xoxb-1111-2222-secret-token";

async fn slack_channel_endpoint_posts_with_the_connection_token(app: TestApp) {
    // The answer echoes the token: it must not reach the execution detail.
    let r = replying_always(Reply::json(
        200,
        json!({"ok": true, "channel": "C123", "ts": "1700000000.000100", "echo": SLACK_TOKEN}),
    ))
    .await;
    let channel = json!({"channelId": "C123"});
    connected_endpoint(&app, &r, SLACK, SLACK_TOKEN, "slack_channel", channel).await;
    let (job, message) = send(&app, json!({})).await;
    let req = only_post(&r, "/api/chat.postMessage").await;
    assert_bearer(&req, SLACK_TOKEN);
    assert_eq!(
        req.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(req.json(), json!({"channel": "C123", "text": TEXT}));
    let d = assert_sent(&job, &message, "slack", Some("1700000000.000100"));
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
    let ok = json!({"ok": true, "channel": "D9", "ts": "1.2"});
    let r = replying_always(Reply::json(200, ok)).await;
    let user = json!({"userId": "U42"});
    connected_endpoint(&app, &r, SLACK, SLACK_TOKEN, "slack_user", user).await;
    let blocks = json!([{"type": "section", "text": {"type": "mrkdwn", "text": "*Deploy*"}}]);
    let slack = json!({"blocks": blocks, "unfurl_links": false});
    let (job, message) = send(&app, json!({"overrides": {"providers": {"slack": slack}}})).await;
    let req = only_post(&r, "/api/chat.postMessage").await;
    assert_eq!(
        req.json(),
        json!({"channel": "U42", "text": TEXT, "blocks": blocks, "unfurl_links": false})
    );
    assert_sent(&job, &message, "slack", Some("1.2"));
}
db_test!(slack_user, slack_user_endpoint_with_provider_overrides);

async fn slack_ok_false_is_a_permanent_failure(app: TestApp) {
    let not_found = json!({"ok": false, "error": "channel_not_found", "echo": SLACK_TOKEN});
    let r = replying_always(Reply::json(200, not_found)).await;
    let channel = json!({"channelId": "CGONE"});
    connected_endpoint(&app, &r, SLACK, SLACK_TOKEN, "slack_channel", channel).await;
    let (job, message) = send(&app, json!({})).await;
    assert_failed(&job);
    assert_eq!(r.requests().len(), 1, "a permanent failure is not retried");
    let failed: Vec<Value> = details(&job)
        .into_iter()
        .filter(|d| d["status"] == "Failed")
        .collect();
    assert!(failed.iter().all(|d| d["isRetry"] == false), "{job}");
    let attempt = &failed[0];
    assert_eq!(attempt["providerId"], "slack");
    let detail = attempt["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("Slack chat.postMessage failed: channel_not_found"),
        "{attempt}"
    );
    assert!(!detail.contains("retry"), "{attempt}");
    let raw = attempt["raw"].as_str().unwrap();
    assert!(
        raw.contains("channel_not_found") && !raw.contains(SLACK_TOKEN),
        "{raw}"
    );
    assert_eq!(message["status"], "error", "{message}");
    assert_eq!(message["errorId"], "provider_error", "{message}");
    assert_error_text(&message, "channel_not_found");
}
db_test!(slack_ok_false, slack_ok_false_is_a_permanent_failure);

async fn slack_ratelimited_is_retried(app: TestApp) {
    let limited = json!({"ok": false, "error": "ratelimited"});
    let r = replying_once(Reply::json(200, limited)).await;
    r.always(Reply::json(200, json!({"ok": true, "ts": "2.0"})));
    let channel = json!({"channelId": "C1"});
    connected_endpoint(&app, &r, SLACK, SLACK_TOKEN, "slack_channel", channel).await;
    let (job, message) = send(&app, json!({})).await;
    assert_eq!(r.requests().len(), 2);
    assert_sent(&job, &message, "slack", Some("2.0"));
    let retried = |d: &Value| {
        d["status"] == "Failed"
            && d["detail"]
                .as_str()
                .unwrap()
                .contains("ratelimited; retry 1 of 3")
    };
    assert!(details(&job).iter().any(retried), "{job}");
}
db_test!(slack_ratelimited, slack_ratelimited_is_retried);

async fn slack_endpoint_without_connection_fails(app: TestApp) {
    let r = Receiver::start().await;
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    let channel = json!({"channelId": "C1"});
    endpoint(&app, "slack", "slack_channel", channel, json!({})).await;
    let (job, message) = send(&app, json!({})).await;
    assert_failed(&job);
    assert!(r.requests().is_empty());
    assert_error_text(&message, "needs a channel connection");
}
db_test!(slack_no_connection, slack_endpoint_without_connection_fails);

async fn endpoints_are_chosen_by_the_trigger_context(app: TestApp) {
    let r = replying_always(Reply::json(200, json!({"ok": true, "ts": "3.0"}))).await;
    connected(&app, &r, "slack", "slack", SLACK_TOKEN).await;
    let mut acme = via_connection();
    acme["context"] = json!({"tenant": "acme"});
    let channel = |id: &str| json!({"channelId": id});
    endpoint(&app, "slack", "slack_channel", channel("C-ACME"), acme).await;
    let default = via_connection();
    endpoint(
        &app,
        "slack",
        "slack_channel",
        channel("C-DEFAULT"),
        default,
    )
    .await;

    let to_acme = json!({"context": {"tenant": "acme"}});
    assert_eq!(nth_channel(&app, &r, to_acme, 1).await, "C-ACME");
    assert_eq!(nth_channel(&app, &r, json!({}), 2).await, "C-DEFAULT");

    // A context with no endpoint of its own: neither endpoint, and no webhookUrl either.
    let (job, _) = send(&app, json!({"context": {"tenant": "globex"}})).await;
    assert_failed(&job);
    assert_eq!(r.requests().len(), 2);
}
db_test!(
    endpoints_by_context,
    endpoints_are_chosen_by_the_trigger_context
);

async fn no_destination_fails_without_a_request(app: TestApp) {
    let r = Receiver::start().await;
    setup(&app, "slack", "slack", json!({"baseUrl": r.url})).await;
    let (job, message) = send(&app, json!({})).await;
    assert_failed(&job);
    assert!(r.requests().is_empty());
    let last = details(&job).last().unwrap().clone();
    assert_eq!(last["status"], "Failed");
    let detail = last["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("Subscriber ann has no slack destination"),
        "{last}"
    );
    assert_eq!(message["status"], "error", "{message}");
    assert_eq!(message["errorId"], "missing_chat_destination", "{message}");
}
db_test!(no_destination, no_destination_fails_without_a_request);

// ---------------------------------------------------------------- Discord

const DISCORD: (&str, &str) = ("discord", "discord");

async fn discord_webhook_waits_for_the_message(app: TestApp) {
    let posted = json!({"id": "1100000000000000001", "content": TEXT});
    let r = replying_always(Reply::json(200, posted)).await;
    let hook = json!({"webhookUrl": format!("{}/api/webhooks/77/tok?thread_id=9", r.url)});
    let webhook = (hook, "/api/webhooks/77/tok");
    let (job, message, req) = send_by_webhook(&app, &r, DISCORD, json!({}), webhook).await;
    assert_eq!(req.query.as_deref(), Some("thread_id=9&wait=true"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.json(), json!({"content": TEXT}));
    assert_sent(&job, &message, "discord", Some("1100000000000000001"));
}
db_test!(discord_webhook, discord_webhook_waits_for_the_message);

async fn discord_webhook_endpoint(app: TestApp) {
    // A `webhook` channel endpoint is a destination like the webhookUrl credential.
    let r = replying_always(Reply::json(200, json!({"id": "5"}))).await;
    setup(&app, "discord", "discord", json!({})).await;
    let hook = json!({"url": format!("{}/api/webhooks/1/t", r.url)});
    endpoint(&app, "discord", "webhook", hook, json!({})).await;
    let (job, message) = send(&app, json!({})).await;
    let req = only_post(&r, "/api/webhooks/1/t").await;
    assert_eq!(req.query.as_deref(), Some("wait=true"));
    assert_sent(&job, &message, "discord", Some("5"));
}
db_test!(discord_endpoint, discord_webhook_endpoint);

// ---------------------------------------------------------------- Microsoft Teams

const TEAMS: (&str, &str) = ("msteams", "teams");

async fn msteams_incoming_webhook_gets_an_adaptive_card(app: TestApp) {
    let r = replying_always(Reply::status(202)).await;
    let hook = json!({"webhookUrl": format!("{}/workflows/abc", r.url)});
    let webhook = (hook, "/workflows/abc");
    let (job, message, req) = send_by_webhook(&app, &r, TEAMS, json!({}), webhook).await;
    assert_eq!(
        req.json(),
        json!({"type": "message", "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": null,
            "content": {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard",
                "version": "1.4", "body": [{"type": "TextBlock", "text": TEXT, "wrap": true}]}}]})
    );
    assert_sent(&job, &message, "msteams", None);
}
db_test!(
    msteams_webhook,
    msteams_incoming_webhook_gets_an_adaptive_card
);

const GRAPH_TOKEN: &str = "eyJ0eXAi.graph-access-token";

async fn msteams_channel_through_graph(app: TestApp) {
    let r = replying_always(Reply::json(201, json!({"id": "1616990032035"}))).await;
    let channel = json!({"teamId": "fbe2bf47-16c8-47cf-b4a5-4b9b187c508b",
        "channelId": "19:4a95f7d8@thread.tacv2"});
    connected_endpoint(&app, &r, TEAMS, GRAPH_TOKEN, "ms_teams_channel", channel).await;
    let (job, message) = send(&app, json!({})).await;
    let req = only_post(
        &r,
        "/v1.0/teams/fbe2bf47-16c8-47cf-b4a5-4b9b187c508b/channels/19:4a95f7d8@thread.tacv2/messages",
    )
    .await;
    assert_bearer(&req, GRAPH_TOKEN);
    assert_eq!(req.json(), json!({"body": {"content": TEXT}}));
    assert_sent(&job, &message, "msteams", Some("1616990032035"));
}
db_test!(msteams_channel, msteams_channel_through_graph);

async fn msteams_user_through_a_one_on_one_chat(app: TestApp) {
    let r = Receiver::start().await;
    let chat = json!({"id": "19:sender_user@unq.gbl.spaces", "chatType": "oneOnOne"});
    r.reply([
        Reply::json(200, json!({"id": "sender-oid"})),
        Reply::json(201, chat),
        Reply::json(201, json!({"id": "1700000000001"})),
    ]);
    let user = json!({"userId": "user-oid"});
    connected_endpoint(&app, &r, TEAMS, GRAPH_TOKEN, "ms_teams_user", user).await;
    let (job, message) = send(&app, json!({})).await;
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
        assert_bearer(req, GRAPH_TOKEN);
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
    assert_sent(&job, &message, "msteams", Some("1700000000001"));
}
db_test!(msteams_user, msteams_user_through_a_one_on_one_chat);

// ---------------------------------------------------------------- Mattermost

async fn mattermost_webhook_with_channel(app: TestApp) {
    let r = replying_always(text_reply("ok")).await;
    let hook = json!({"webhookUrl": format!("{}/hooks/xyz", r.url), "channel": "town-square"});
    let (job, message, req) = send_by_webhook(
        &app,
        &r,
        ("mattermost", "mm"),
        json!({}),
        (hook, "/hooks/xyz"),
    )
    .await;
    assert_eq!(req.json(), json!({"text": TEXT, "channel": "town-square"}));
    assert_sent(&job, &message, "mattermost", None);
}
db_test!(mattermost_webhook, mattermost_webhook_with_channel);

// ---------------------------------------------------------------- Telegram

const BOT_TOKEN: &str = "123456789:AAF-bot_secret";
const TELEGRAM: (&str, &str) = ("telegram", "tg");

async fn telegram_send_message_to_the_chat_endpoint(app: TestApp) {
    let r = replying_always(Reply::json(
        200,
        json!({"ok": true, "result": {"message_id": 42, "date": 1700000000,
        "chat": {"id": -1001234, "type": "supergroup"}, "text": TEXT}}),
    ))
    .await;
    let credentials = json!({"apiToken": BOT_TOKEN, "baseUrl": r.url});
    setup(&app, "telegram", "tg", credentials).await;
    let chat = json!({"chatId": "-1001234"});
    endpoint(&app, "tg", "telegram_chat", chat, json!({})).await;
    let (job, message) = send(&app, json!({})).await;
    let req = only_post(&r, &format!("/bot{BOT_TOKEN}/sendMessage")).await;
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.json(), json!({"chat_id": "-1001234", "text": TEXT}));
    assert_sent(&job, &message, "telegram", Some("42"));
}
db_test!(telegram, telegram_send_message_to_the_chat_endpoint);

async fn telegram_errors_keep_the_token_out(app: TestApp) {
    // A token from the endpoint's connection (not a credential), echoed by the answer.
    let description = format!("Bad Request: chat not found for bot{BOT_TOKEN}");
    let answer = json!({"ok": false, "error_code": 400, "description": description});
    let r = replying_always(Reply::json(400, answer)).await;
    let chat = json!({"chatId": "7"});
    connected_endpoint(&app, &r, TELEGRAM, BOT_TOKEN, "telegram_chat", chat).await;
    let (job, message) = send(&app, json!({})).await;
    assert_failed(&job);
    only_post(&r, &format!("/bot{BOT_TOKEN}/sendMessage")).await;
    assert!(!job.to_string().contains("bot_secret"), "{job}");
    assert!(!message.to_string().contains("bot_secret"), "{message}");
    assert_error_text(&message, "chat not found");
}
db_test!(telegram_errors, telegram_errors_keep_the_token_out);
