//! Issue 36, medium 1: what the README calls encrypted at rest has no clear copy anywhere in the database.
//! Distinct sentinels go through every route that takes a secret (integration credentials, channel
//! connections' access tokens, webhook channel endpoints, subscriber credentials, a trigger's and a bulk
//! trigger's `to.channels`), each with and without an `idempotency-key`; deliveries run; then the raw bytes
//! of the SQLite file and its write-ahead log, or a `pg_dump` of the test's schema, must hold none of them.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::{Receiver, Reply};
use crate::support::{count, deliver_one, execute, settled, Backend, TestApp};

/// A sentinel: a string no other part of the database holds.
fn sentinel(what: &str) -> String {
    format!("SNTL{what}Z9q")
}

/// `method path body` with `idempotency-key: key` when given; answers status, body and whether it was a
/// replay.
async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    body: &Value,
    key: Option<&str>,
) -> (StatusCode, Value, bool) {
    let mut req = app.req(method, path).json(body);
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let replay = resp.headers().get("idempotency-replay").is_some();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    (status, body, replay)
}

/// Sends a write with and without an idempotency key (`key`), checks each succeeded, and replays the
/// keyed one: the stored answer comes back as it was first given. Answers both answers.
async fn write_with_and_without_key(
    app: &TestApp,
    method: Method,
    path: &str,
    plain: Value,
    keyed: Value,
    key: &str,
) -> (Value, Value) {
    let (status, first, _) = call(app, method.clone(), path, &plain, None).await;
    assert!(
        status.is_success(),
        "{method} {path} {plain} → {status} {first}"
    );
    let (status, answer, replay) = call(app, method.clone(), path, &keyed, Some(key)).await;
    assert!(
        status.is_success(),
        "{method} {path} {keyed} → {status} {answer}"
    );
    assert!(!replay);
    let (again, replayed, replay) = call(app, method.clone(), path, &keyed, Some(key)).await;
    assert_eq!((again, replay), (status, true), "{replayed}");
    assert_eq!(replayed, answer, "the replay is the stored answer");
    (first, answer)
}

/// Every place a sentinel is found in the database: `table: sentinel`, or the file when no table is known.
/// `raw`: on SQLite, the bytes of the file and its log too (free pages included), else only the rows.
async fn clear_copies(app: &TestApp, sentinels: &[String], raw: bool) -> Vec<String> {
    let mut found = Vec::new();
    match app.backend {
        Backend::Sqlite => {
            let file = app.database_url.trim_start_matches("sqlite://").to_owned();
            // Rows as SQLite reads them, to name the table.
            let conn = rusqlite::Connection::open(&file).unwrap();
            let tables: Vec<String> = conn
                .prepare("select name from sqlite_master where type = 'table'")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            for table in tables {
                let Ok(mut stmt) = conn.prepare(&format!("select * from \"{table}\"")) else {
                    continue;
                };
                let columns = stmt.column_count();
                let mut rows = stmt.query([]).unwrap();
                while let Some(row) = rows.next().unwrap() {
                    for i in 0..columns {
                        let bytes = match row.get_ref(i).unwrap() {
                            rusqlite::types::ValueRef::Text(b)
                            | rusqlite::types::ValueRef::Blob(b) => b,
                            _ => continue,
                        };
                        for s in sentinels {
                            if contains(bytes, s.as_bytes()) {
                                found.push(format!("{table}: {s}"));
                            }
                        }
                    }
                }
            }
            drop(conn);
            // The raw bytes, free pages and the log included.
            let files = if raw {
                vec![file.clone(), format!("{file}-wal")]
            } else {
                Vec::new()
            };
            for path in files {
                let Ok(bytes) = std::fs::read(&path) else {
                    continue;
                };
                for s in sentinels {
                    if contains(&bytes, s.as_bytes()) && !found.iter().any(|f| f.ends_with(s)) {
                        found.push(format!("{path}: {s}"));
                    }
                }
            }
        }
        Backend::Postgres => {
            let schema = app.pg_schema.clone().unwrap();
            let out = std::process::Command::new("pg_dump")
                .arg("--dbname")
                .arg(&app.database_url)
                .arg("--schema")
                .arg(&schema)
                .output()
                .expect("pg_dump");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let dump = String::from_utf8_lossy(&out.stdout);
            let mut table = "(schema)".to_owned();
            for line in dump.lines() {
                if let Some(rest) = line.strip_prefix("COPY ") {
                    table = rest.split(' ').next().unwrap_or(rest).to_owned();
                }
                for s in sentinels {
                    // `bytea` columns are dumped in hex.
                    if line.contains(s.as_str()) || line.contains(&hex::encode(s)) {
                        found.push(format!("{table}: {s}"));
                    }
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

async fn no_secret_has_a_clear_copy(app: TestApp) {
    let r = Receiver::start().await;
    let mut sentinels = Vec::new();
    let mut s = |what: &str| {
        let v = sentinel(what);
        sentinels.push(v.clone());
        v
    };

    // Integration credentials: created and updated, with and without a key.
    let push_secret = s("PushSecret");
    let push_keyed = s("PushSecretKeyed");
    let (_, pw2) = write_with_and_without_key(
        &app,
        Method::POST,
        "/v1/integrations",
        json!({"providerId": "push-webhook", "channel": "push", "active": true, "identifier": "pw",
            "credentials": {"webhookUrl": format!("{}/push", r.url), "secretKey": push_secret}}),
        json!({"providerId": "push-webhook", "channel": "push", "active": false, "identifier": "pw2",
            "credentials": {"webhookUrl": format!("{}/push2", r.url), "secretKey": push_keyed}}),
        "integration-1",
    )
    .await;
    let hook_secret = s("HookSecret");
    write_with_and_without_key(
        &app,
        Method::PUT,
        &format!("/v1/integrations/{}", pw2["_id"].as_str().unwrap()),
        json!({"credentials": {"webhookUrl": format!("{}/push2", r.url), "secretKey": push_keyed}}),
        json!({"credentials": {"webhookUrl": format!("{}/push2", r.url), "secretKey": hook_secret}}),
        "integration-2",
    )
    .await;
    app.integration(
        json!({"providerId": "chat-webhook", "channel": "chat", "identifier": "hook",
        "active": true}),
    )
    .await;
    for id in ["ann", "bob", "eve", "tom"] {
        app.subscriber(id, json!({})).await;
    }

    // Channel connections' access tokens.
    let token = s("AccessToken");
    let token_keyed = s("AccessTokenKeyed");
    let connection = |subscriber: &str, token: &str| {
        json!({"integrationIdentifier": "hook", "subscriberId": subscriber,
            "identifier": format!("conn-{subscriber}"), "workspace": {"id": "T1"},
            "auth": {"accessToken": token}})
    };
    write_with_and_without_key(
        &app,
        Method::POST,
        "/v1/channel-connections",
        connection("ann", &token),
        connection("bob", &token_keyed),
        "connection-1",
    )
    .await;
    let token_rotated = s("AccessTokenRotated");
    write_with_and_without_key(
        &app,
        Method::PATCH,
        "/v1/channel-connections/conn-ann",
        json!({"auth": {"accessToken": token}}),
        json!({"auth": {"accessToken": token_rotated}}),
        "connection-2",
    )
    .await;

    // Webhook channel endpoints (incoming-webhook URLs are bearer secrets).
    let hook = |what: &str| format!("{}/endpoint/{what}", r.url);
    let endpoint_url = s("EndpointUrl");
    let endpoint_keyed = s("EndpointUrlKeyed");
    let endpoint = |id: &str, url: String| {
        json!({"identifier": id, "subscriberId": "eve", "integrationIdentifier": "hook",
            "type": "webhook", "endpoint": {"url": url}})
    };
    write_with_and_without_key(
        &app,
        Method::POST,
        "/v1/channel-endpoints",
        endpoint("ep-1", hook(&endpoint_url)),
        endpoint("ep-2", hook(&endpoint_keyed)),
        "endpoint-1",
    )
    .await;
    let endpoint_patched = s("EndpointUrlPatched");
    write_with_and_without_key(
        &app,
        Method::PATCH,
        "/v1/channel-endpoints/ep-1",
        json!({"endpoint": {"url": hook(&endpoint_url)}}),
        json!({"endpoint": {"url": hook(&endpoint_patched)}}),
        "endpoint-2",
    )
    .await;

    // Subscriber credentials: PUT and PATCH, device tokens and a webhook URL.
    let device = s("DeviceToken");
    let device_keyed = s("DeviceTokenKeyed");
    let tokens = |t: &str| {
        json!({"providerId": "push-webhook", "integrationIdentifier": "pw",
            "credentials": {"deviceTokens": [t]}})
    };
    write_with_and_without_key(
        &app,
        Method::PUT,
        "/v1/subscribers/ann/credentials",
        tokens(&device),
        tokens(&device_keyed),
        "credentials-1",
    )
    .await;
    let device_patched = s("DeviceTokenPatched");
    let sub_hook = s("SubscriberHook");
    write_with_and_without_key(
        &app,
        Method::PATCH,
        "/v1/subscribers/ann/credentials",
        tokens(&device_patched),
        json!({"providerId": "chat-webhook", "integrationIdentifier": "hook",
            "credentials": {"webhookUrl": format!("{}/subscriber/{sub_hook}", r.url)}}),
        "credentials-2",
    )
    .await;

    // Workflows: a push and a chat step.
    for (id, step) in [("push-wf", "push"), ("chat-wf", "chat")] {
        let (status, out) = app
            .post(
                "/v2/workflows",
                json!({"name": id, "workflowId": id,
                    "steps": [{"name": "Send", "type": step,
                        "controlValues": {"subject": "Hi", "body": "Hello"}}]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }

    let trig = s("TriggerToken");
    let trig_keyed = s("TriggerTokenKeyed");
    let bulk = s("BulkToken");
    let bulk_keyed = s("BulkTokenKeyed");
    // Triggers whose `to` carries credentials, single and bulk, with and without a key.
    let to = |subscriber: &str, t: &str| {
        json!({"subscriberId": subscriber, "channels": [{"providerId": "push-webhook",
            "integrationIdentifier": "pw", "credentials": {"deviceTokens": [t]}}]})
    };
    write_with_and_without_key(
        &app,
        Method::POST,
        "/v1/events/trigger",
        json!({"name": "push-wf", "to": to("tom", &trig), "payload": {}, "transactionId": "t-1"}),
        json!({"name": "push-wf", "to": [to("bob", &trig_keyed)], "payload": {}, "transactionId": "t-2"}),
        "trigger-1",
    )
    .await;
    write_with_and_without_key(
        &app,
        Method::POST,
        "/v1/events/trigger/bulk",
        json!({"events": [{"name": "push-wf", "to": to("tom", &bulk), "payload": {},
            "transactionId": "t-3"}]}),
        json!({"events": [{"name": "push-wf", "to": to("bob", &bulk_keyed), "payload": {},
            "transactionId": "t-4"}]}),
        "trigger-2",
    )
    .await;
    // Deliveries to the endpoints and to the subscriber's webhook, and a push to ann's tokens.
    for (t, to) in [("t-5", "eve"), ("t-6", "ann")] {
        let (status, out) = app
            .post(
                "/v1/events/trigger",
                json!({"name": "chat-wf", "to": to, "payload": {}, "transactionId": t}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "push-wf", "to": "ann", "payload": {}, "transactionId": "t-7"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    for t in ["t-1", "t-2", "t-3", "t-4", "t-5", "t-6", "t-7"] {
        let items = settled(&app, t, 1).await;
        let job = &items[0]["jobs"][0];
        assert_eq!(job["status"], "completed", "{t}: {job}");
    }
    let got: Vec<String> = r.requests().iter().map(|g| g.path.clone()).collect();
    for p in [
        format!("/endpoint/{endpoint_patched}"),
        format!("/endpoint/{endpoint_keyed}"),
        format!("/subscriber/{sub_hook}"),
    ] {
        assert!(got.contains(&p), "{p} not in {got:?}");
    }

    // The API answers as before: the secrets are shown where Novu shows them.
    let (_, e) = app.get("/v1/channel-endpoints/ep-1").await;
    assert_eq!(e["endpoint"]["url"], hook(&endpoint_patched), "{e}");
    let (_, page) = app.get("/v1/channel-endpoints?subscriberId=eve").await;
    let shown = page.to_string();
    assert!(
        shown.contains(&endpoint_patched) && shown.contains(&endpoint_keyed),
        "{page}"
    );
    let (_, c) = app.get("/v1/channel-connections/conn-ann").await;
    assert_eq!(c["auth"]["accessToken"], token_rotated.as_str(), "{c}");
    let (_, page) = app.get("/v1/messages?channel=push&transactionId=t-7").await;
    // PUT replaced the tokens, PATCH added one.
    assert_eq!(
        page["data"][0]["deviceTokens"],
        json!([device_keyed, device_patched]),
        "{page}"
    );
    let (_, page) = app.get("/v1/messages?channel=chat&transactionId=t-6").await;
    assert_eq!(
        page["data"][0]["directWebhookUrl"],
        format!("{}/subscriber/{sub_hook}", r.url),
        "{page}"
    );
    let (_, page) = app.get("/v1/messages?channel=chat&transactionId=t-5").await;
    let shown = page.to_string();
    assert!(
        shown.contains(&endpoint_keyed) || shown.contains(&endpoint_patched),
        "{page}"
    );
    let (_, one) = app.get("/v2/subscribers/ann").await;
    assert!(one.to_string().contains(&device_patched), "{one}");

    // Webhook endpoint secrets (issue 39): one given at creation, one at rotation, with idempotency keys as
    // the Svix clients send them (the rotation's answer, kept for replays, holds the new secret).
    let given = "U05UTHdlYmhvb2tTZWNyZXRaOXExMjM0NTY3OA==";
    let rotated = "U05UTHJvdGF0ZWRTZWNyZXRaOXExMjM0NTY3OA==";
    sentinels.extend([given.to_owned(), rotated.to_owned()]);
    let base = format!("/api/v1/app/{}/endpoint", app.application_identifier);
    let svix = |path: &str, key: &str, body: Value| {
        app.client
            .post(app.url(path))
            .header("Authorization", format!("Bearer {}", app.key))
            .header("idempotency-key", key)
            .json(&body)
            .send()
    };
    let resp = svix(
        &base,
        "auto_create",
        json!({"url": "https://example.com/hook", "secret": format!("whsec_{given}")}),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let endpoint: Value = resp.json().await.unwrap();
    let rotate = format!("{base}/{}/secret/rotate", endpoint["id"].as_str().unwrap());
    let resp = svix(
        &rotate,
        "auto_rotate",
        json!({"key": format!("whsec_{rotated}")}),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["key"], format!("whsec_{rotated}"), "{answer}");

    let found = clear_copies(&app, &sentinels, true).await;
    assert!(found.is_empty(), "clear copies of secrets: {found:#?}");
}
db_test!(no_clear_copies, no_secret_has_a_clear_copy);

/// Rows an earlier version wrote in clear — a webhook endpoint's URL, what a chat and a push message record
/// of their destinations, a notification's `to` with channel credentials, a stored idempotent answer — are
/// listed by the migration and rewritten by the `migrate` of the next start; the API answers as before.
async fn clear_rows_of_an_earlier_version_are_sealed_by_migrate(app: TestApp) {
    let r = Receiver::start().await;
    let [hook, url, token, to_token, access] =
        ["OldHook", "OldUrl", "OldToken", "OldToToken", "OldAccess"].map(sentinel);
    let hook_url = format!("{}/endpoint/{hook}", r.url);
    let sub_url = format!("{}/subscriber/{url}", r.url);
    app.integration(
        json!({"providerId": "push-webhook", "channel": "push", "active": true,
        "identifier": "pw", "credentials": {"webhookUrl": format!("{}/push", r.url)}}),
    )
    .await;
    app.integration(
        json!({"providerId": "chat-webhook", "channel": "chat", "identifier": "hook",
        "active": true}),
    )
    .await;
    for id in ["ann", "eve"] {
        app.subscriber(id, json!({})).await;
    }
    let (status, out) = app
        .post(
            "/v1/channel-endpoints",
            json!({"identifier": "ep", "subscriberId": "eve", "integrationIdentifier": "hook",
                "type": "webhook", "endpoint": {"url": hook_url}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    for body in [
        json!({"providerId": "push-webhook", "integrationIdentifier": "pw",
            "credentials": {"deviceTokens": [token]}}),
        json!({"providerId": "chat-webhook", "integrationIdentifier": "hook",
            "credentials": {"webhookUrl": sub_url}}),
    ] {
        let (status, out) = app.put("/v1/subscribers/ann/credentials", body).await;
        assert!(status.is_success(), "{out}");
    }
    let connection = json!({"integrationIdentifier": "hook", "subscriberId": "ann",
        "identifier": "conn", "workspace": {"id": "T1"}, "auth": {"accessToken": access}});
    let (status, answer, _) = call(
        &app,
        Method::POST,
        "/v1/channel-connections",
        &connection,
        Some("old-key"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    for (name, step) in [("push-wf", "push"), ("chat-wf", "chat")] {
        let (status, out) = app
            .post(
                "/v2/workflows",
                json!({"name": name, "workflowId": name, "steps": [{"name": "Send", "type": step,
                    "controlValues": {"subject": "Hi", "body": "Hello"}}]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
    let to = json!({"subscriberId": "ann", "channels": [{"providerId": "push-webhook",
        "integrationIdentifier": "pw", "credentials": {"deviceTokens": [token]}}]});
    for (t, name, to) in [
        ("u-1", "push-wf", to.clone()),
        ("u-2", "chat-wf", json!("ann")),
        ("u-3", "chat-wf", json!("eve")),
    ] {
        let (status, out) = app
            .post(
                "/v1/events/trigger",
                json!({"name": name, "to": to, "payload": {}, "transactionId": t}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
        settled(&app, t, 1).await;
    }

    // What an earlier version stored.
    let clear_to = json!({"subscriberId": "ann", "channels": [{"providerId": "push-webhook",
        "integrationIdentifier": "pw", "credentials": {"deviceTokens": [to_token]}}]});
    let clear_body = answer.to_string().replace('\'', "''");
    let body = match app.backend {
        Backend::Sqlite => format!("cast('{clear_body}' as blob)"),
        Backend::Postgres => format!("convert_to('{clear_body}', 'UTF8')"),
    };
    for sql in [
        format!(
            "update channel_endpoints set endpoint = '{}' where identifier = 'ep'",
            json!({"url": hook_url})
        ),
        format!(
            "update messages set device_tokens = '{}' where channel = 'push'",
            json!([token])
        ),
        format!(
            "update messages set direct_webhook_url = '{sub_url}' where transaction_id = 'u-2'"
        ),
        format!(
            "update messages set direct_webhook_url = '{hook_url}' where transaction_id = 'u-3'"
        ),
        format!("update notifications set to_value = '{clear_to}' where transaction_id = 'u-1'"),
        format!("update idempotency_keys set body = {body} where idem_key = 'old-key'"),
    ] {
        assert_eq!(execute(&app, &sql).await, 1, "{sql}");
    }
    let sentinels = vec![
        hook.clone(),
        url.clone(),
        token.clone(),
        to_token.clone(),
        access.clone(),
    ];
    assert_eq!(clear_copies(&app, &sentinels, false).await.len(), 6);

    // The upgrade: the migration runs (again) and start-up rewrites what it listed.
    for sql in [
        "delete from _sqlx_migrations where version = 20261129022000",
        "drop table clear_secrets",
    ] {
        execute(&app, sql).await;
    }
    app.store.migrate().await.unwrap();
    let found = clear_copies(&app, &sentinels, false).await;
    assert!(found.is_empty(), "left in clear: {found:#?}");
    assert_eq!(
        count(
            &app,
            "select count(*) from clear_secrets where row_key <> $1",
            ""
        )
        .await,
        0
    );
    assert_eq!(app.store.seal_clear_rows().await.unwrap(), 0);

    // The API answers as before, the notification's `to` without the credentials.
    let (_, e) = app.get("/v1/channel-endpoints/ep").await;
    assert_eq!(e["endpoint"], json!({"url": hook_url}), "{e}");
    let (_, page) = app.get("/v1/messages?transactionId=u-1").await;
    assert_eq!(page["data"][0]["deviceTokens"], json!([token]), "{page}");
    for (t, want) in [("u-2", &sub_url), ("u-3", &hook_url)] {
        let (_, page) = app.get(&format!("/v1/messages?transactionId={t}")).await;
        assert_eq!(page["data"][0]["directWebhookUrl"], want.as_str(), "{page}");
    }
    let (_, page) = app.get("/v1/notifications?transactionId=u-1").await;
    assert_eq!(
        page["data"][0]["to"],
        json!({"subscriberId": "ann", "channels": [{"providerId": "push-webhook",
            "integrationIdentifier": "pw"}]}),
        "{page}"
    );
    let (status, replayed, replay) = call(
        &app,
        Method::POST,
        "/v1/channel-connections",
        &connection,
        Some("old-key"),
    )
    .await;
    assert_eq!((status, replay), (StatusCode::CREATED, true));
    assert_eq!(replayed, answer);
}
db_test!(
    clear_rows_sealed_on_upgrade,
    clear_rows_of_an_earlier_version_are_sealed_by_migrate
);

/// A provider that echoes the destination it was sent to (a device token it refuses, the webhook URL it was
/// called at) has it redacted from the recorded answer, as credentials are: execution details keep no copy
/// of a subscriber's channel credentials or of a webhook endpoint's URL either.
async fn echoed_destinations_are_redacted(app: TestApp) {
    let r = Receiver::start().await;
    let [token, endpoint, hook] = ["EchoToken", "EchoEndpoint", "EchoHook"].map(sentinel);
    let endpoint_url = format!("{}/endpoint/{endpoint}", r.url);
    let hook_url = format!("{}/subscriber/{hook}", r.url);
    app.integration(
        json!({"providerId": "push-webhook", "channel": "push", "active": true,
        "identifier": "pw", "credentials": {"webhookUrl": format!("{}/push", r.url)}}),
    )
    .await;
    app.integration(
        json!({"providerId": "chat-webhook", "channel": "chat", "identifier": "hook",
        "active": true}),
    )
    .await;
    for id in ["ann", "eve"] {
        app.subscriber(id, json!({})).await;
    }
    for body in [
        json!({"providerId": "push-webhook", "integrationIdentifier": "pw",
            "credentials": {"deviceTokens": [token]}}),
        json!({"providerId": "chat-webhook", "integrationIdentifier": "hook",
            "credentials": {"webhookUrl": hook_url}}),
    ] {
        let (status, out) = app.put("/v1/subscribers/ann/credentials", body).await;
        assert!(status.is_success(), "{out}");
    }
    let (status, out) = app
        .post(
            "/v1/channel-endpoints",
            json!({"subscriberId": "eve", "integrationIdentifier": "hook", "type": "webhook",
                "endpoint": {"url": endpoint_url}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    for (step, to, echoed) in [
        ("push", "ann", &token),
        ("chat", "eve", &endpoint_url),
        ("chat", "ann", &hook_url),
    ] {
        let reply = json!({"id": "m-1", "error": format!("{echoed} is not known")});
        r.reply([Reply::json(200, reply)]);
        let (job, _) = deliver_one(
            &app,
            step,
            json!({"subject": "Hi", "body": "Hello"}),
            json!({"to": to, "payload": {}}),
        )
        .await;
        assert_eq!(job["status"], "completed", "{job}");
        let shown = job.to_string();
        assert!(shown.contains("[redacted] is not known"), "{shown}");
        assert!(!shown.contains(echoed.as_str()), "{shown}");
    }
    let found = clear_copies(&app, &[token, endpoint, hook], true).await;
    assert!(found.is_empty(), "clear copies of secrets: {found:#?}");
}
db_test!(echoed_destinations, echoed_destinations_are_redacted);
