//! Outbound webhooks (issue 39): what the outbox records and the sender delivers — each event's envelope and
//! signatures (checked with the `standardwebhooks` crate, for both header sets), retries with one message id,
//! the 15 s limit and the isolation of endpoints, the guard on private addresses, rotation, filters. The
//! official Svix verifiers check deliveries in `tests/sdk-ts/webhook_deliveries.mjs`.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::{Received, Receiver, Reply};
use crate::support::{count, TestApp};

/// Creates an endpoint through the Svix routes; answers its id and secret.
async fn endpoint(app: &TestApp, url: &str, extra: Value) -> (String, String) {
    let mut body = json!({"url": url});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    let base = format!("/api/v1/app/{}/endpoint", app.application_identifier);
    let (status, created) =
        crate::inbox::call(app, &app.key, Method::POST, &base, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let (_, secret) = crate::inbox::call(
        app,
        &app.key,
        Method::GET,
        &format!("{base}/{id}/secret"),
        None,
    )
    .await;
    (id, secret["key"].as_str().unwrap().to_owned())
}

async fn in_app_workflow(app: &TestApp, id: &str) -> Value {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": id, "workflowId": id, "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hi {{ payload.n }}"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

async fn trigger(app: &TestApp, workflow: &str, to: &str) -> String {
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": workflow, "to": to, "payload": {"n": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out["transactionId"].as_str().unwrap().to_owned()
}

/// Checks the request's signature with `secret` through both header sets, as the official verifiers read
/// them; answers its envelope.
fn verified(r: &Received, secret: &str) -> Value {
    let hook = standardwebhooks::Webhook::new(secret).unwrap();
    for prefix in ["webhook", "svix"] {
        let mut headers = axum::http::HeaderMap::new();
        for name in ["id", "timestamp", "signature"] {
            let value = r
                .header(&format!("{prefix}-{name}"))
                .unwrap_or_else(|| panic!("{prefix}-{name} missing"));
            headers.insert(
                axum::http::HeaderName::from_bytes(format!("webhook-{name}").as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        hook.verify(&r.body, &headers)
            .unwrap_or_else(|e| panic!("{prefix}-* headers do not verify: {e:?}"));
    }
    assert_eq!(r.header("webhook-id"), r.header("svix-id"));
    r.json()
}

/// The envelopes received so far of type `kind`.
fn of_type(received: &[Received], kind: &str) -> Vec<Value> {
    received
        .iter()
        .map(Received::json)
        .filter(|e| e["type"] == kind)
        .collect()
}

/// Waits (up to 20 s) until an event of type `kind` arrived; answers its request.
async fn wait_for_type(r: &Receiver, kind: &str) -> Received {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(found) = r.requests().into_iter().find(|q| q.json()["type"] == kind) {
            return found;
        }
        let seen: Vec<Value> = r
            .requests()
            .iter()
            .map(|q| q.json()["type"].clone())
            .collect();
        assert!(Instant::now() < deadline, "no {kind} event; got {seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A trigger emits `message.sent` and `message.delivered`; marks, a workflow update and a preference change
/// emit theirs; every delivery is signed for both header sets and carries Novu's envelope.
async fn events_of_each_path(app: TestApp) {
    let r = Receiver::start().await;
    let (_, secret) = endpoint(&app, &format!("{}/hooks", r.url), json!({})).await;
    in_app_workflow(&app, "hello").await;
    let tx = trigger(&app, "hello", "ada").await;

    let sent = wait_for_type(&r, "message.sent").await;
    let e = verified(&sent, &secret);
    let oid = e["id"]
        .as_str()
        .unwrap()
        .strip_prefix("evt_")
        .unwrap()
        .to_owned();
    assert_eq!(sent.header("webhook-id").unwrap(), format!("msg_{oid}"));
    assert_eq!(e["object"], "message");
    assert_eq!(e["environmentId"], app.application_identifier.as_str());
    let m = &e["data"]["object"];
    assert_eq!(
        (
            &m["subscriberId"],
            &m["channel"],
            &m["transactionId"],
            &m["workflowId"]
        ),
        (&json!("ada"), &json!("in_app"), &json!(tx), &json!("hello")),
        "{e}"
    );
    assert_eq!(m["seen"], false);
    let message_id = m["_id"].as_str().unwrap().to_owned();
    verified(&wait_for_type(&r, "message.delivered").await, &secret);

    let (status, out) = app
        .post(
            "/v1/subscribers/ada/messages/mark-as",
            json!({"messageId": message_id, "markAs": "read"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let read = verified(&wait_for_type(&r, "message.read").await, &secret);
    assert_eq!(read["data"]["object"]["_id"], message_id.as_str());
    assert_eq!(read["data"]["object"]["read"], true, "{read}");
    let (status, out) = app
        .post(
            "/v1/subscribers/ada/messages/mark-as",
            json!({"messageId": message_id, "markAs": "seen"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    // Already seen (read implies it): nothing changed, so no event.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(of_type(&r.requests(), "message.seen").is_empty());

    let (status, out) = app
        .patch("/v2/workflows/hello", json!({"name": "Hello again"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let updated = verified(&wait_for_type(&r, "workflow.updated").await, &secret);
    assert_eq!(updated["object"], "workflow");
    assert_eq!(updated["data"]["object"]["name"], "Hello again");
    assert_eq!(updated["data"]["previousObject"]["name"], "hello");
    assert_eq!(updated["data"]["object"]["workflowId"], "hello");

    let (status, out) = app
        .patch(
            "/v2/subscribers/ada/preferences",
            json!({"workflowId": "hello", "channels": {"in_app": false}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let pref = verified(&wait_for_type(&r, "preference.updated").await, &secret);
    assert_eq!(pref["data"]["subscriberId"], "ada");
    let object = &pref["data"]["object"];
    assert_eq!(
        (
            &object["level"],
            &object["channels"]["in_app"],
            &object["workflow"]["identifier"]
        ),
        (&json!("template"), &json!(false), &json!("hello")),
        "{pref}"
    );

    let (status, _) = app.delete("/v2/workflows/hello").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    verified(&wait_for_type(&r, "workflow.deleted").await, &secret);
    // Every event once: one message per event to the one endpoint.
    let mut ids: Vec<String> = r
        .requests()
        .iter()
        .map(|q| q.header("webhook-id").unwrap().to_owned())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n);
}
db_test!(webhook_events_of_each_path, events_of_each_path);

/// An endpoint receives the types it filters on only; a disabled one receives nothing; another
/// environment's endpoints never see this one's events.
async fn filters_and_tenants(app: TestApp) {
    let (only_read, all, disabled, other) = (
        Receiver::start().await,
        Receiver::start().await,
        Receiver::start().await,
        Receiver::start().await,
    );
    endpoint(
        &app,
        &only_read.url,
        json!({"filterTypes": ["message.read"]}),
    )
    .await;
    endpoint(&app, &all.url, json!({})).await;
    endpoint(&app, &disabled.url, json!({"disabled": true})).await;
    let other_key = app.second_environment("Other").await;
    let other_identifier = crate::support::raw_sql(
        &app,
        "select identifier from environments where name = 'Other'",
    )
    .await
    .remove(0);
    let (status, out) = crate::inbox::call(
        &app,
        &other_key,
        Method::POST,
        &format!("/api/v1/app/{other_identifier}/endpoint"),
        Some(json!({"url": other.url})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");

    in_app_workflow(&app, "hello").await;
    trigger(&app, "hello", "ada").await;
    let sent = wait_for_type(&all, "message.sent").await.json();
    let message_id = sent["data"]["object"]["_id"].as_str().unwrap().to_owned();
    app.post(
        "/v1/subscribers/ada/messages/mark-as",
        json!({"messageId": message_id, "markAs": "read"}),
    )
    .await;
    wait_for_type(&all, "message.read").await;
    let read = only_read.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(read.len(), 1);
    assert_eq!(only_read.requests().len(), 1, "only message.read");
    assert_eq!(read[0].json()["type"], "message.read");
    assert!(disabled.requests().is_empty());
    assert!(other.requests().is_empty());
}
db_test!(webhook_filters_and_tenants, filters_and_tenants);

/// A receiver answering 500 then 200 gets the same message twice, same id and body, 5 s apart (Svix's
/// first retry); both attempts are kept.
async fn retry_keeps_the_message_id(app: TestApp) {
    let r = Receiver::start().await;
    r.reply([Reply::status(500)]);
    endpoint(&app, &r.url, json!({"filterTypes": ["message.sent"]})).await;
    in_app_workflow(&app, "hello").await;
    trigger(&app, "hello", "ada").await;
    let got = r.wait_for(2).await;
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    assert_eq!(got[0].body, got[1].body);
    let gap = got[1].at.duration_since(got[0].at);
    assert!(gap >= Duration::from_millis(4_500), "retried after {gap:?}");
    crate::support::eventually(|| async {
        let statuses = crate::support::raw_sql(
            &app,
            "select status || ':' || cast(response_status_code as text) from webhook_attempts order by created_at",
        )
        .await;
        (statuses == ["failed:500", "success:200"]).then_some(())
    })
    .await;
    assert_eq!(
        count(
            &app,
            "select count(*) from webhook_messages where status = $1",
            "success"
        )
        .await,
        1
    );
}
db_test!(
    webhook_retry_keeps_the_message_id,
    retry_keeps_the_message_id
);

/// A receiver that sleeps for 30 s is cut off at 15 s (a failed attempt, retried later); meanwhile another
/// endpoint gets its messages at once.
async fn slow_endpoint_is_isolated(app: TestApp) {
    let (slow, fast) = (Receiver::start().await, Receiver::start().await);
    slow.delay(Duration::from_secs(30));
    endpoint(&app, &slow.url, json!({"filterTypes": ["message.sent"]})).await;
    endpoint(&app, &fast.url, json!({"filterTypes": ["message.sent"]})).await;
    in_app_workflow(&app, "hello").await;
    for to in ["a", "b", "c"] {
        trigger(&app, "hello", to).await;
    }
    fast.wait_for(3).await;
    // The fast endpoint had all three while the slow one's first attempts were still waiting for an answer.
    assert_eq!(
        count(
            &app,
            "select count(*) from webhook_attempts where response_status_code = 0 and $1 = $1",
            ""
        )
        .await,
        0,
        "the slow endpoint's attempts ended first"
    );
    let cut = crate::support::eventually(|| async {
        let rows = crate::support::raw_sql(
            &app,
            "select cast(response_duration_ms as text) from webhook_attempts where response_status_code = 0",
        )
        .await;
        (rows.len() == 3).then_some(rows)
    })
    .await;
    for ms in cut {
        let ms: i64 = ms.parse().unwrap();
        assert!((14_500..20_000).contains(&ms), "cut after {ms} ms");
    }
    assert_eq!(
        count(
            &app,
            "select count(*) from webhook_messages where status = $1",
            "pending"
        )
        .await,
        3,
        "due again"
    );
}
db_test!(webhook_slow_endpoint_is_isolated, slow_endpoint_is_isolated);

/// Without `TIDINGS_ALLOW_PRIVATE_NETWORKS`, a loopback endpoint is never called: the attempt fails with
/// the guard's reason.
async fn private_address_refused(mut app: TestApp) {
    app.stop_workers().await;
    let mut options = crate::support::worker_options(app.profile);
    options.allow_private_networks = false;
    app.start_workers_with(options);
    let r = Receiver::start().await;
    endpoint(&app, &r.url, json!({"filterTypes": ["message.sent"]})).await;
    in_app_workflow(&app, "hello").await;
    trigger(&app, "hello", "ada").await;
    let response = crate::support::eventually(|| async {
        crate::support::raw_sql(&app, "select response from webhook_attempts")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert!(
        response.contains("TIDINGS_ALLOW_PRIVATE_NETWORKS"),
        "{response}"
    );
    assert!(r.requests().is_empty());
}
db_test!(webhook_private_address_refused, private_address_refused);

/// While a secret rotates, each message carries both signatures: a receiver holding either secret
/// accepts it.
async fn rotation_signs_with_both(app: TestApp) {
    let r = Receiver::start().await;
    let (id, old) = endpoint(&app, &r.url, json!({"filterTypes": ["message.sent"]})).await;
    let (status, rotated) = crate::inbox::call(
        &app,
        &app.key,
        Method::POST,
        &format!(
            "/api/v1/app/{}/endpoint/{id}/secret/rotate",
            app.application_identifier
        ),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let new = rotated["key"].as_str().unwrap();
    in_app_workflow(&app, "hello").await;
    trigger(&app, "hello", "ada").await;
    let got = r.wait_for(1).await;
    assert_eq!(
        got[0]
            .header("webhook-signature")
            .unwrap()
            .split(' ')
            .count(),
        2
    );
    verified(&got[0], &old);
    verified(&got[0], new);
}
db_test!(webhook_rotation_signs_with_both, rotation_signs_with_both);

/// The one-click unsubscribe link turns email off for the workflow: `preference.updated`, for that subscriber
/// and workflow, email off.
async fn unsubscribe_link_emits(app: TestApp) {
    let r = Receiver::start().await;
    let (_, secret) = endpoint(&app, &r.url, json!({"filterTypes": ["preference.updated"]})).await;
    let (status, news) = app
        .post(
            "/v2/workflows",
            json!({"name": "news", "workflowId": "news", "steps": [
                {"name": "Mail", "type": "email", "controlValues": {"subject": "News", "body": "Hi"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{news}");
    let ann = app
        .subscriber("ann", json!({"email": "ann@example.com"}))
        .await;
    let token = tidings::domain::unsubscribe::UnsubscribeToken {
        environment_id: app.tenant.environment_id.clone(),
        subscriber_ref: tidings::domain::SubscriberRef::from(
            ann["_id"].as_str().unwrap().to_owned(),
        ),
        workflow_ref: tidings::domain::WorkflowRef::from(news["_id"].as_str().unwrap().to_owned()),
    }
    .sign(app.store.cipher());
    let resp = app
        .client
        .post(app.url(&format!("/v1/unsubscribe/{token}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let e = verified(&r.wait_for(1).await[0], &secret);
    assert_eq!(e["type"], "preference.updated");
    assert_eq!(e["data"]["subscriberId"], "ann");
    let object = &e["data"]["object"];
    assert_eq!(
        (
            &object["level"],
            &object["channels"]["email"],
            &object["workflow"]["identifier"]
        ),
        (&json!("template"), &json!(false), &json!("news")),
        "{e}"
    );
}
db_test!(webhook_unsubscribe_link_emits, unsubscribe_link_emits);

/// An endpoint that has failed for 5 days without a success is disabled by its next failure, which the
/// endpoints that asked for `endpoint.disabled` are told (an endpoint without a filter is not); a change to
/// it starts its failure clock again.
async fn failing_for_five_days_disables(app: TestApp) {
    let r = Receiver::start().await;
    r.always(Reply::status(503));
    let (id, _) = endpoint(
        &app,
        &r.url,
        json!({"filterTypes": ["message.sent"], "uid": "crm"}),
    )
    .await;
    let watcher = Receiver::start().await;
    let (watcher_id, watcher_secret) = endpoint(
        &app,
        &watcher.url,
        json!({"filterTypes": ["endpoint.disabled"]}),
    )
    .await;
    let all = Receiver::start().await;
    endpoint(&app, &all.url, json!({})).await;
    in_app_workflow(&app, "hello").await;
    trigger(&app, "hello", "ada").await;
    r.wait_for(1).await;
    let path = format!("/api/v1/app/{}/endpoint/{id}", app.application_identifier);
    crate::support::eventually(|| async {
        let since = crate::support::raw_sql(&app, "select cast(failing_since as text) from webhook_endpoints where failing_since is not null").await;
        (!since.is_empty()).then_some(())
    })
    .await;
    let (_, e) = crate::inbox::call(&app, &app.key, Method::GET, &path, None).await;
    assert_eq!(e["disabled"], false, "a first failure does not disable it");
    let six_days_ago = tidings::domain::Timestamp::now().0 - 6 * 24 * 3600 * 1000;
    crate::support::execute(
        &app,
        &format!("update webhook_endpoints set failing_since = {six_days_ago}"),
    )
    .await;
    trigger(&app, "hello", "bob").await;
    r.wait_for(2).await;
    let e = crate::support::eventually(|| async {
        let (_, e) = crate::inbox::call(&app, &app.key, Method::GET, &path, None).await;
        (e["disabled"] == true).then_some(e)
    })
    .await;
    assert_eq!(e["disabled"], true);
    let told = verified(&watcher.wait_for(1).await[0], &watcher_secret);
    assert_eq!(
        (&told["type"], &told["object"], &told["environmentId"]),
        (
            &json!("endpoint.disabled"),
            &json!("endpoint"),
            &json!(app.application_identifier)
        ),
        "{told}"
    );
    let data = &told["data"];
    assert_eq!(
        (
            &data["appId"],
            &data["endpointId"],
            &data["endpointUid"],
            &data["trigger"]
        ),
        (
            &json!(app.application_identifier),
            &json!(id),
            &json!("crm"),
            &json!("automatic")
        ),
        "{told}"
    );
    let since = tidings::domain::Timestamp(six_days_ago).to_iso();
    assert_eq!(data["failSince"], json!(since), "{told}");
    // The event's messages were recorded in one transaction, committed before the watcher heard of it.
    all.wait_for(2).await;
    assert_eq!(
        crate::support::raw_sql(
            &app,
            "select endpoint_id from webhook_messages where event_type = 'endpoint.disabled'"
        )
        .await,
        vec![watcher_id],
        "an endpoint without a filter takes Novu's events only"
    );
    // Re-enabled by the caller: the clock starts again, so the next failure does not disable it at once.
    let (status, _) = crate::inbox::call(
        &app,
        &app.key,
        Method::PATCH,
        &path,
        Some(json!({"disabled": false})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(crate::support::raw_sql(
        &app,
        "select id from webhook_endpoints where failing_since is not null"
    )
    .await
    .is_empty());
}
db_test!(
    webhook_failing_for_five_days_disables,
    failing_for_five_days_disables
);

/// `throttleRate` spreads an endpoint's messages: 2 per second.
async fn throttle_rate_spreads_messages(app: TestApp) {
    let r = Receiver::start().await;
    endpoint(
        &app,
        &r.url,
        json!({"filterTypes": ["message.sent"], "throttleRate": 2}),
    )
    .await;
    in_app_workflow(&app, "hello").await;
    for i in 0..6 {
        trigger(&app, "hello", &format!("s{i}")).await;
    }
    let got = r.wait_for(6).await;
    let spread = got[5].at.duration_since(got[0].at);
    assert!(
        spread >= Duration::from_millis(1_500),
        "6 messages at 2/s in {spread:?}"
    );
}
db_test!(
    webhook_throttle_rate_spreads_messages,
    throttle_rate_spreads_messages
);

/// Marking a whole feed read emits one `message.read` per message changed, however many (in bounded
/// statements); messages already read emit nothing.
async fn mark_all_emits_per_message(app: TestApp) {
    let r = Receiver::start().await;
    endpoint(&app, &r.url, json!({"filterTypes": ["message.read"]})).await;
    in_app_workflow(&app, "hello").await;
    let n = 600;
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let events: Vec<Value> = chunk
            .iter()
            .map(|i| json!({"name": "hello", "to": "ada", "payload": {"n": i}}))
            .collect();
        let (status, out) = app
            .post("/v1/events/trigger/bulk", json!({ "events": events }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
    crate::support::eventually(|| async {
        (count(
            &app,
            "select count(*) from messages where subscriber_id = $1",
            "ada",
        )
        .await
            == n)
            .then_some(())
    })
    .await;
    let (status, out) = app
        .post(
            "/v1/subscribers/ada/messages/mark-all",
            json!({"markAs": "read"}),
        )
        .await;
    assert!(status.is_success(), "{out}");
    let got = r.wait_for(n as usize).await;
    let mut ids: Vec<String> = got
        .iter()
        .map(|q| {
            q.json()["data"]["object"]["_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n as usize);
    app.post(
        "/v1/subscribers/ada/messages/mark-all",
        json!({"markAs": "read"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        r.requests().len(),
        n as usize,
        "nothing changed the second time"
    );
}
db_test!(
    webhook_mark_all_emits_per_message,
    mark_all_emits_per_message
);

/// The Inbox's own routes (a session's token) emit the events of the marks they make: read, seen (bulk),
/// archived; a trigger to a topic (the fan-out) emits `message.sent` for each subscriber reached.
async fn inbox_and_fan_out_paths(app: TestApp) {
    let r = Receiver::start().await;
    let (_, secret) = endpoint(
        &app,
        &r.url,
        json!({"filterTypes": ["message.sent", "message.read", "message.seen", "message.archived"]}),
    )
    .await;
    in_app_workflow(&app, "hello").await;
    for id in ["t1", "t2", "t3"] {
        app.subscriber(id, json!({})).await;
    }
    let (status, out) = app
        .post(
            "/v2/topics/team/subscriptions",
            json!({"subscriptions": ["t1", "t2", "t3"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "hello", "to": [{"type": "Topic", "topicKey": "team"}], "payload": {"n": 2}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    r.wait_for(3).await;
    let mut reached: Vec<String> = of_type(&r.requests(), "message.sent")
        .iter()
        .map(|e| {
            e["data"]["object"]["subscriberId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    reached.sort();
    assert_eq!(reached, ["t1", "t2", "t3"]);

    let sent = of_type(&r.requests(), "message.sent");
    let t1 = sent
        .iter()
        .find(|e| e["data"]["object"]["subscriberId"] == "t1")
        .unwrap()["data"]["object"]["_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let token =
        crate::inbox_sockets::session(&app.client, &app.base, &app.application_identifier, "t1")
            .await;
    let inbox = |method: Method, path: String, body: Option<Value>| {
        let mut req = app
            .client
            .request(method, app.url(&path))
            .header("Authorization", format!("Bearer {token}"));
        if let Some(b) = body {
            req = req.json(&b);
        }
        crate::support::send(req)
    };
    let (status, out) = inbox(
        Method::POST,
        "/v1/inbox/notifications/seen".into(),
        Some(json!({"notificationIds": [t1]})),
    )
    .await;
    assert!(status.is_success(), "{out}");
    let seen = verified(&wait_for_type(&r, "message.seen").await, &secret);
    assert_eq!(seen["data"]["object"]["_id"], t1.as_str());
    let (status, out) = inbox(
        Method::PATCH,
        format!("/v1/inbox/notifications/{t1}/read"),
        None,
    )
    .await;
    assert!(status.is_success(), "{out}");
    verified(&wait_for_type(&r, "message.read").await, &secret);
    let (status, out) = inbox(
        Method::PATCH,
        format!("/v1/inbox/notifications/{t1}/archive"),
        None,
    )
    .await;
    assert!(status.is_success(), "{out}");
    let archived = verified(&wait_for_type(&r, "message.archived").await, &secret);
    assert_eq!(archived["data"]["object"]["archived"], true);
}
db_test!(webhook_inbox_and_fan_out_paths, inbox_and_fan_out_paths);

/// Finished messages and attempts are kept for 90 days: the sweep deletes those recorded before its cut-off,
/// and only those.
async fn history_is_purged_after_retention(app: TestApp) {
    let r = Receiver::start().await;
    endpoint(&app, &r.url, json!({"filterTypes": ["message.sent"]})).await;
    in_app_workflow(&app, "hello").await;
    trigger(&app, "hello", "ada").await;
    r.wait_for(1).await;
    crate::support::eventually(|| async {
        (count(
            &app,
            "select count(*) from webhook_attempts where $1 = $1",
            "",
        )
        .await
            == 1)
            .then_some(())
    })
    .await;
    let now = tidings::domain::Timestamp::now().0;
    let purged = app
        .store
        .purge_webhook_history(tidings::domain::Timestamp(now - 3_600_000))
        .await
        .unwrap();
    assert_eq!(purged, 0, "nothing is that old");
    let purged = app
        .store
        .purge_webhook_history(tidings::domain::Timestamp(now + 3_600_000))
        .await
        .unwrap();
    assert_eq!(purged, 3, "the message, its event and its attempt");
    for table in ["webhook_messages", "webhook_attempts", "webhook_events"] {
        assert_eq!(
            count(
                &app,
                &format!("select count(*) from {table} where $1 = $1"),
                ""
            )
            .await,
            0
        );
    }
}
db_test!(
    webhook_history_is_purged_after_retention,
    history_is_purged_after_retention
);

/// A stand-in for this process's sender, with room for `room` messages: counts what it takes and gets back,
/// keeps what it is handed.
struct Sender {
    room: std::sync::atomic::AtomicUsize,
    given_back: std::sync::atomic::AtomicUsize,
    handed: std::sync::Mutex<Vec<tidings::store::webhook_messages::Outgoing>>,
}

impl tidings::store::outbox::Sender for Sender {
    fn take(&self, _endpoint: &str, _throttle_rate: Option<i64>) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.room
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
    fn give_back(&self, _endpoint: &str) {
        self.given_back
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    fn hand(&self, messages: Vec<tidings::store::webhook_messages::Outgoing>) {
        self.handed.lock().unwrap().extend(messages);
    }
    fn lease_ms(&self) -> i64 {
        // So short that the real sender, once started, takes the message over as a dead sender's.
        1
    }
}

/// The outbox records the messages this process's sender has room for already leased to it and hands them
/// over once committed, body and all; the others wait, pending, for a claim. A message handed to a sender
/// that stops is claimed again once its lease ran out: every endpoint gets its message once.
async fn the_outbox_hands_what_its_sender_has_room_for(backend: crate::support::Backend) {
    use std::sync::atomic::Ordering::SeqCst;
    let mut app = TestApp::spawn_without_workers(backend).await;
    let receiver = Receiver::start().await;
    let url = format!("{}/hook", receiver.url);
    let filter = json!({"filterTypes": ["workflow.created"]});
    let (first, _) = endpoint(&app, &url, filter.clone()).await;
    let (second, _) = endpoint(&app, &url, filter).await;
    let sender = std::sync::Arc::new(Sender {
        room: 1.into(),
        given_back: 0.into(),
        handed: Default::default(),
    });
    let link: std::sync::Arc<dyn tidings::store::outbox::Sender> = sender.clone();
    app.store.set_webhook_sender(&link, true);
    in_app_workflow(&app, "handed").await;
    app.store.set_webhook_sender(&link, false);

    let handed = sender.handed.lock().unwrap().clone();
    assert_eq!(handed.len(), 1, "room for one");
    assert_eq!(sender.given_back.load(SeqCst), 0);
    let m = &handed[0];
    assert!([&first, &second].contains(&&m.endpoint_id));
    assert_eq!((m.event_type.as_str(), m.attempts), ("workflow.created", 0));
    let body = crate::support::raw_sql(
        &app,
        &format!("select body from webhook_events where id = '{}'", m.id),
    )
    .await;
    assert_eq!(body, std::slice::from_ref(&m.body), "the body as stored");
    let rows = |status: &'static str, leased: &'static str| {
        let app = &app;
        async move {
            count(
                app,
                &format!("select count(*) from webhook_messages where status = $1 and locked_until is {leased}"),
                status,
            )
            .await
        }
    };
    assert_eq!(rows("sending", "not null").await, 1, "leased to the sender");
    assert_eq!(rows("pending", "null").await, 1, "left for a claim");

    app.start_workers();
    let got = receiver.wait_for(2).await;
    let ids: std::collections::HashSet<&str> = got
        .iter()
        .map(|r| r.header("webhook-id").unwrap())
        .collect();
    assert_eq!(
        (got.len(), ids.len()),
        (2, 1),
        "one event, once to each endpoint"
    );
    app.stop_workers().await;
}
db_test!(
    webhook_outbox_hands_to_its_sender,
    the_outbox_hands_what_its_sender_has_room_for,
    backend
);
