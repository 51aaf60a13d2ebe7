//! Delivery semantics shared by every provider (issue: real deliveries): retries with backoff, `Retry-After`,
//! failover, permanent 4xx, missing destinations, redaction of secrets, integration choice by overrides and
//! conditions. Exercised through the webhook providers against a local receiver.

use std::time::Duration;

use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::{Receiver, Reply};
use crate::support::{deliver_one, last_detail, TestApp};

const SECRET: &str = "whsec-0123456789abcdef";

/// An active `email-webhook` integration posting to `<receiver>/<path>`.
async fn email_hook(app: &TestApp, identifier: &str, receiver: &Receiver, extra: Value) -> Value {
    let mut body = json!({"providerId": "email-webhook", "channel": "email", "active": true,
        "identifier": identifier, "name": identifier,
        "credentials": {"webhookUrl": format!("{}/{identifier}", receiver.url), "secretKey": SECRET,
            "from": "app@example.com"}});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    app.integration(body).await
}

fn ann() -> Value {
    json!({"subscriberId": "ann", "email": "ann@example.com", "firstName": "Ann"})
}

fn mail() -> Value {
    json!({"subject": "Hello {{ subscriber.firstName }}", "body": "<p>Order {{ payload.order }} shipped</p>"})
}

/// `(status, isRetry, providerId)` of each execution detail after the first (`Pending`/`Queued`).
fn attempts(job: &Value) -> Vec<(String, bool)> {
    job["executionDetails"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|d| {
            (
                d["status"].as_str().unwrap().to_owned(),
                d["isRetry"].as_bool().unwrap(),
            )
        })
        .collect()
}

async fn delivered_and_signed(app: TestApp) {
    let r = Receiver::start().await;
    email_hook(&app, "hook", &r, json!({})).await;
    let (job, message) = deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": ann(), "payload": {"order": "A-17"}}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    let sent = r.wait_for(1).await;
    assert_eq!(sent.len(), 1);
    let body = sent[0].json();
    assert_eq!(body["subject"], "Hello Ann");
    assert_eq!(body["html"], "<p>Order A-17 shipped</p>");
    assert_eq!(body["to"], json!(["ann@example.com"]));
    assert_eq!(body["from"], "app@example.com");
    // Signed with the integration's secret over the exact body.
    let expected = tidings::crypto::hmac_sha256_hex(SECRET, &[&sent[0].body]);
    assert_eq!(sent[0].header("x-svc-signature"), Some(expected.as_str()));
    let d = last_detail(&job);
    assert_eq!(d["status"], "Success");
    assert_eq!(d["providerId"], "email-webhook");
    assert_eq!(d["isRetry"], false);
    let raw: Value = serde_json::from_str(d["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw, json!({"status": 200, "body": {"id": "msg-1"}}));
    assert_eq!(message["status"], "sent");
    assert_eq!(message["channel"], "email");
    assert_eq!(message["email"], "ann@example.com");
    assert_eq!(message["subject"], "Hello Ann");
    assert_eq!(message["providerId"], "email-webhook");
    assert_eq!(message["deliveredAt"].as_array().unwrap().len(), 1);
    assert!(message.get("errorText").is_none());
}
db_test!(delivered, delivered_and_signed);

async fn transient_failures_are_retried_with_backoff(app: TestApp) {
    let r = Receiver::start().await;
    r.reply([Reply::status(503), Reply::status(502)]);
    email_hook(&app, "hook", &r, json!({})).await;
    let (job, message) = deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": ann(), "payload": {"order": 1}}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    let sent = r.requests();
    assert_eq!(sent.len(), 3);
    // Backoff: ~100 ms then ~200 ms (±25 %) with the test settings.
    let gap1 = sent[1].at - sent[0].at;
    let gap2 = sent[2].at - sent[1].at;
    assert!(gap1 >= Duration::from_millis(70), "{gap1:?}");
    assert!(gap2 >= Duration::from_millis(140), "{gap2:?}");
    assert_eq!(
        attempts(&job),
        [
            ("Failed".to_owned(), false),
            ("Failed".to_owned(), true),
            ("Success".to_owned(), true)
        ]
    );
    let first = &job["executionDetails"][1];
    assert!(
        first["detail"]
            .as_str()
            .unwrap()
            .contains("answered 503 Service Unavailable; retry 1 of 3"),
        "{first}"
    );
    assert!(first["raw"].as_str().unwrap().contains("503"));
    assert_eq!(message["status"], "sent");
}
db_test!(retried, transient_failures_are_retried_with_backoff);

async fn too_many_requests_waits_for_retry_after(app: TestApp) {
    let r = Receiver::start().await;
    r.reply([Reply::json(429, json!({"message": "slow down"})).with_header("retry-after", "1")]);
    email_hook(&app, "hook", &r, json!({})).await;
    let (job, _) = deliver_one(&app, "email", mail(), json!({"to": ann(), "payload": {}})).await;
    assert_eq!(job["status"], "completed", "{job}");
    let sent = r.requests();
    assert_eq!(sent.len(), 2);
    let gap = sent[1].at - sent[0].at;
    assert!(
        gap >= Duration::from_millis(950),
        "Retry-After: 1 was not honoured: {gap:?}"
    );
    let first = &job["executionDetails"][1];
    assert!(
        first["detail"]
            .as_str()
            .unwrap()
            .contains("429 Too Many Requests: slow down"),
        "{first}"
    );
}
db_test!(retry_after, too_many_requests_waits_for_retry_after);

async fn after_the_retries_it_fails_over_to_the_next_integration(app: TestApp) {
    let broken = Receiver::start().await;
    broken.always(Reply::status(500));
    let healthy = Receiver::start().await;
    email_hook(&app, "main", &broken, json!({"primary": true})).await;
    email_hook(&app, "backup", &healthy, json!({})).await;
    let (job, message) =
        deliver_one(&app, "email", mail(), json!({"to": ann(), "payload": {}})).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(broken.requests().len(), 4, "one attempt and three retries");
    assert_eq!(healthy.requests().len(), 1);
    assert_eq!(healthy.requests()[0].path, "/backup");
    let details = job["executionDetails"].as_array().unwrap();
    let texts: Vec<&str> = details
        .iter()
        .map(|d| d["detail"].as_str().unwrap())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("(after 3 retries)")),
        "{texts:?}"
    );
    assert!(
        texts.contains(&"Failing over to integration backup (email-webhook)"),
        "{texts:?}"
    );
    assert_eq!(last_detail(&job)["status"], "Success");
    assert_eq!(message["status"], "sent");
}
db_test!(
    failover,
    after_the_retries_it_fails_over_to_the_next_integration
);

async fn a_permanent_4xx_is_not_retried(mut app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::json(
        400,
        json!({"errors": [{"message": "invalid from address"}]}),
    ));
    email_hook(&app, "hook", &r, json!({})).await;
    let (job, message) =
        deliver_one(&app, "email", mail(), json!({"to": ann(), "payload": {}})).await;
    assert_eq!(job["status"], "failed", "{job}");
    // No retry is left: none waits in the queue, and the workers, stopped, finished what they held.
    app.nothing_left_to_run().await;
    app.stop_workers().await;
    assert_eq!(r.requests().len(), 1);
    assert_eq!(
        attempts(&job)
            .iter()
            .map(|(s, _)| s.as_str())
            .collect::<Vec<_>>(),
        ["Failed", "Failed"]
    );
    assert_eq!(message["status"], "error");
    assert_eq!(message["errorId"], "provider_error");
    assert!(
        message["errorText"]
            .as_str()
            .unwrap()
            .contains("400 Bad Request: invalid from address"),
        "{message}"
    );
    assert_eq!(message["deliveredAt"], json!([]));
}
db_test!(permanent, a_permanent_4xx_is_not_retried);

async fn a_subscriber_without_an_address_fails_with_a_clear_detail(app: TestApp) {
    let r = Receiver::start().await;
    email_hook(&app, "hook", &r, json!({})).await;
    let (job, message) = deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": {"subscriberId": "bob"}, "payload": {}}),
    )
    .await;
    assert_eq!(job["status"], "failed");
    let d = last_detail(&job);
    assert_eq!(d["status"], "Failed");
    assert_eq!(d["detail"], "Subscriber bob has no email address");
    assert_eq!(message["errorId"], "missing_email");
    assert!(r.requests().is_empty());
    // The same for SMS: neither a phone nor a phone endpoint.
    app.integration(
        json!({"providerId": "generic-sms", "channel": "sms", "active": true, "identifier": "sms",
        "credentials": {"baseUrl": format!("{}/sms", r.url), "from": "+15550000000"}}),
    )
    .await;
    let (job, _) = deliver_one(
        &app,
        "sms",
        json!({"body": "hi"}),
        json!({"to": "bob", "payload": {}}),
    )
    .await;
    assert_eq!(job["status"], "failed");
    let text = last_detail(&job)["detail"].as_str().unwrap().to_owned();
    assert!(
        text.contains("has no phone number") || text.contains("not supported"),
        "{text}"
    );
    assert!(r.requests().is_empty());
}
db_test!(
    missing_destination,
    a_subscriber_without_an_address_fails_with_a_clear_detail
);

async fn secrets_never_reach_the_recorded_answer(app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::json(
        200,
        json!({"id": "m-9", "echo": {"secret": SECRET, "auth": format!("Bearer {SECRET}")}}),
    ));
    email_hook(&app, "hook", &r, json!({})).await;
    let (job, _) = deliver_one(&app, "email", mail(), json!({"to": ann(), "payload": {}})).await;
    let raw = last_detail(&job)["raw"].as_str().unwrap().to_owned();
    assert!(!raw.contains(SECRET), "{raw}");
    assert!(raw.contains("Bearer [redacted]"), "{raw}");
    assert!(raw.contains("m-9"));
    // A failure's answer too.
    r.always(Reply::json(
        401,
        json!({"message": format!("bad key {SECRET}")}),
    ));
    let (job, message) =
        deliver_one(&app, "email", mail(), json!({"to": ann(), "payload": {}})).await;
    let all = job.to_string() + &message.to_string();
    assert!(!all.contains(SECRET), "{all}");
    assert!(all.contains("bad key [redacted]"), "{all}");
}
db_test!(redaction, secrets_never_reach_the_recorded_answer);

async fn integrations_are_chosen_by_overrides_and_conditions(app: TestApp) {
    let r = Receiver::start().await;
    let main = email_hook(&app, "main", &r, json!({"primary": true})).await;
    email_hook(
        &app,
        "eu",
        &r,
        json!({"conditions": [{"isNegated": false, "type": "GROUP", "value": "AND",
        "children": [{"field": "region", "value": "eu", "operator": "EQUAL", "on": "payload"}]}]}),
    )
    .await;
    // The primary one by default.
    deliver_one(&app, "email", mail(), json!({"to": ann(), "payload": {}})).await;
    assert_eq!(r.wait_for(1).await[0].path, "/main");
    // The trigger names another one.
    deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": ann(), "payload": {"region": "eu"}, "overrides": {"email": {"integrationIdentifier": "eu"}}}),
    )
    .await;
    assert_eq!(r.wait_for(2).await[1].path, "/eu");
    // An unknown name fails clearly rather than sending elsewhere.
    let (job, _) = deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": ann(), "payload": {}, "overrides": {"email": {"integrationIdentifier": "nope"}}}),
    )
    .await;
    assert_eq!(job["status"], "failed");
    assert!(last_detail(&job)["detail"]
        .as_str()
        .unwrap()
        .contains("integration nope"));
    assert_eq!(r.requests().len(), 2);
    // Conditions: with `main` deactivated, `eu` serves only payloads with region eu.
    let id = main["_id"].as_str().unwrap();
    let (status, out) = app
        .put(&format!("/v1/integrations/{id}"), json!({"active": false}))
        .await;
    assert!(status.is_success(), "{out}");
    let (job, _) = deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": ann(), "payload": {"region": "us"}}),
    )
    .await;
    assert_eq!(job["status"], "failed");
    assert!(
        last_detail(&job)["detail"]
            .as_str()
            .unwrap()
            .contains("conditions match"),
        "{job}"
    );
    deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": ann(), "payload": {"region": "eu"}}),
    )
    .await;
    assert_eq!(r.wait_for(3).await[2].path, "/eu");
}
db_test!(choice, integrations_are_chosen_by_overrides_and_conditions);

async fn unsupported_providers_fail_clearly(app: TestApp) {
    app.integration(
        json!({"providerId": "ses", "channel": "email", "active": true, "identifier": "ses",
        "credentials": {"apiKey": "k", "secretKey": "s", "region": "eu-west-1"}}),
    )
    .await;
    let (job, message) =
        deliver_one(&app, "email", mail(), json!({"to": ann(), "payload": {}})).await;
    assert_eq!(job["status"], "failed");
    assert_eq!(
        last_detail(&job)["detail"],
        "provider ses is not supported by this server"
    );
    assert_eq!(message["errorId"], "provider_not_supported");
}
db_test!(unsupported, unsupported_providers_fail_clearly);

async fn chat_goes_to_the_subscribers_webhook_and_endpoints(app: TestApp) {
    let r = Receiver::start().await;
    app.integration(json!({"providerId": "chat-webhook", "channel": "chat", "active": true, "identifier": "hooks"}))
        .await;
    app.subscriber("ann", json!({})).await;
    let (status, out) = app
        .put(
            "/v1/subscribers/ann/credentials",
            json!({"providerId": "chat-webhook", "integrationIdentifier": "hooks",
                "credentials": {"webhookUrl": format!("{}/personal", r.url)}}),
        )
        .await;
    assert!(status.is_success(), "{out}");
    let (job, message) = deliver_one(
        &app,
        "chat",
        json!({"body": "Build {{ payload.n }} passed"}),
        json!({"to": "ann", "payload": {"n": 7}}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    let sent = r.wait_for(1).await;
    assert_eq!(sent[0].path, "/personal");
    assert_eq!(sent[0].json()["content"], "Build 7 passed");
    assert_eq!(message["directWebhookUrl"], format!("{}/personal", r.url));
    // A webhook endpoint for the trigger's context wins over the credential.
    let (status, out) = app
        .post(
            "/v1/channel-endpoints",
            json!({"type": "webhook", "endpoint": {"url": format!("{}/team", r.url)}, "integrationIdentifier": "hooks",
                "subscriberId": "ann", "context": {"tenant": "acme"}}),
        )
        .await;
    assert!(status.is_success(), "{out}");
    deliver_one(
        &app,
        "chat",
        json!({"body": "For acme"}),
        json!({"to": "ann", "payload": {}, "context": {"tenant": "acme"}}),
    )
    .await;
    assert_eq!(r.wait_for(2).await[1].path, "/team");
    // Without that context, the endpoint does not match: back to the credential.
    deliver_one(
        &app,
        "chat",
        json!({"body": "No context"}),
        json!({"to": "ann", "payload": {}}),
    )
    .await;
    assert_eq!(r.wait_for(3).await[2].path, "/personal");
}
db_test!(
    chat_destinations,
    chat_goes_to_the_subscribers_webhook_and_endpoints
);

async fn push_webhook_posts_the_tokens_signed(app: TestApp) {
    let r = Receiver::start().await;
    app.integration(
        json!({"providerId": "push-webhook", "channel": "push", "active": true, "identifier": "pw",
        "credentials": {"webhookUrl": format!("{}/push", r.url), "secretKey": SECRET}}),
    )
    .await;
    app.subscriber("pat", json!({})).await;
    let (status, out) = app
        .put(
            "/v1/subscribers/pat/credentials",
            json!({"providerId": "push-webhook", "integrationIdentifier": "pw",
                "credentials": {"deviceTokens": ["tok-a", "tok-b"]}}),
        )
        .await;
    assert!(status.is_success(), "{out}");
    let (job, message) = deliver_one(
        &app,
        "push",
        json!({"subject": "Hi {{ payload.who }}", "body": "You have {{ payload.n }} new"}),
        json!({"to": "pat", "payload": {"who": "Pat", "n": 3},
            "overrides": {"providers": {"push-webhook": {"sound": "ping"}}}}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    let sent = r.wait_for(1).await;
    assert_eq!(sent[0].path, "/push");
    let body = sent[0].json();
    assert_eq!(body["target"], json!(["tok-a", "tok-b"]));
    assert_eq!(body["title"], "Hi Pat");
    assert_eq!(body["content"], "You have 3 new");
    assert_eq!(body["payload"], json!({"who": "Pat", "n": 3}));
    assert_eq!(body["overrides"], json!({"sound": "ping"}));
    let expected = tidings::crypto::hmac_sha256_hex(SECRET, &[&sent[0].body]);
    assert_eq!(sent[0].header("x-svc-signature"), Some(expected.as_str()));
    assert_eq!(last_detail(&job)["providerId"], "push-webhook");
    assert_eq!(message["status"], "sent");
    assert_eq!(message["deviceTokens"], json!(["tok-a", "tok-b"]));
}
db_test!(push_webhook, push_webhook_posts_the_tokens_signed);

async fn attachments_are_fetched_and_retried_when_their_server_fails(app: TestApp) {
    let mail_hook = Receiver::start().await;
    let files = Receiver::start().await;
    files.reply([Reply::status(503)]);
    files.always(Reply {
        status: 200,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: "invoice #7".into(),
    });
    email_hook(&app, "hook", &mail_hook, json!({})).await;
    let attach = json!({"email": {"attachments": [{"name": "invoice.txt", "url": format!("{}/invoice.txt", files.url)}]}});
    let (job, message) = deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": ann(), "payload": {}, "overrides": attach}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(files.requests().len(), 2, "fetched again after the 503");
    let first = &job["executionDetails"][1];
    assert!(
        first["detail"]
            .as_str()
            .unwrap()
            .contains("answered 503 Service Unavailable; retry 1 of 3"),
        "{first}"
    );
    let sent = mail_hook.wait_for(1).await;
    assert_eq!(
        mail_hook.requests().len(),
        1,
        "the provider is called once, with the file"
    );
    let a = &sent[0].json()["attachments"][0];
    assert_eq!(a["name"], "invoice.txt");
    assert_eq!(a["mime"], "text/plain");
    use base64::Engine as _;
    assert_eq!(
        a["file"],
        base64::engine::general_purpose::STANDARD.encode("invoice #7")
    );
    assert_eq!(message["status"], "sent");
    // A missing file fails the step at once; the provider is not called.
    let missing = json!({"email": {"attachments": [{"name": "gone.pdf", "url": format!("{}/gone.pdf", mail_hook.url)}]}});
    mail_hook.reply([Reply::status(404)]);
    let (job, message) = deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": ann(), "payload": {}, "overrides": missing}),
    )
    .await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(message["errorId"], "attachment_failed");
    assert!(message["errorText"].as_str().unwrap().contains("gone.pdf"));
    assert_eq!(
        mail_hook.requests().len(),
        2,
        "only the fetch of the missing file"
    );
}
db_test!(
    attachments,
    attachments_are_fetched_and_retried_when_their_server_fails
);
