//! The delivery engine end to end: trigger → notification and jobs → workers → in-app message.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use tidings::store::engine::MessageFilter;

use crate::db_test;
use crate::support::TestApp;

/// Polls until `f` returns Some, for up to 10 s.
async fn eventually<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..200 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("condition not reached in 10 s");
}

async fn trigger_creates_in_app_message(app: TestApp) {
    let (status, _) = app
        .post(
            "/v2/workflows",
            json!({"name": "Comment", "workflowId": "comment", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {
                    "subject": "New comment from {{ payload.author | upcase }}",
                    "body": "Hi {{ subscriber.firstName }}, {{ payload.author }} wrote: {{ payload.text }}",
                    "primaryAction": {"label": "Open", "redirect": {"url": "https://app.example.com/c/{{ payload.id }}"}}}},
                {"name": "Skipped", "type": "in_app", "controlValues": {"body": "only for pros"},
                 "filters": [{"isNegated": false, "type": "GROUP", "value": "AND",
                   "children": [{"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"}]}]}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "comment", "to": {"subscriberId": "reader", "firstName": "Ada"},
                   "payload": {"author": "grace", "text": "Nice!", "id": 7, "plan": "free"}, "transactionId": "tx-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(
        out,
        json!({"acknowledged": true, "status": "processed", "transactionId": "tx-1"})
    );
    // The recipient object was upserted.
    let (_, s) = app.get("/v2/subscribers/reader").await;
    assert_eq!(s["firstName"], "Ada");

    let filter = MessageFilter {
        subscriber_id: Some("reader".into()),
        ..Default::default()
    };
    let store = app.store.clone();
    let env = app.tenant.environment_id.clone();
    let messages = eventually(|| {
        let (store, env, filter) = (store.clone(), env.clone(), filter.clone());
        async move {
            store
                .list_messages(&env, &filter, 0, 10)
                .await
                .ok()
                .filter(|(m, _)| !m.is_empty())
                .map(|(m, _)| m)
        }
    })
    .await;
    assert_eq!(messages.len(), 1);
    let m = &messages[0];
    assert_eq!(m.subject.as_deref(), Some("New comment from GRACE"));
    assert_eq!(m.content, "Hi Ada, grace wrote: Nice!");
    assert_eq!(m.cta["data"]["url"], "https://app.example.com/c/7");
    assert_eq!(m.cta["action"]["buttons"][0]["content"], "Open");
    assert_eq!(m.transaction_id, "tx-1");
    assert!(!m.read && !m.seen);

    // The second step was filtered out: its job ends skipped, and no second message appears.
    let store2 = app.store.clone();
    let notification_id = m.notification_id.clone();
    let jobs = eventually(|| {
        let (store, id) = (store2.clone(), notification_id.clone());
        async move {
            let jobs = store.jobs_of(std::slice::from_ref(&id)).await.ok()?;
            (jobs.len() == 2
                && jobs
                    .iter()
                    .all(|j| j.status != "queued" && j.status != "running"))
            .then_some(jobs)
        }
    })
    .await;
    assert_eq!(jobs[0].status, "completed");
    assert_eq!(jobs[0].provider_id, "svc");
    assert_eq!(jobs[1].status, "skipped");
    let (all, _) = app
        .store
        .list_messages(&app.tenant.environment_id, &filter, 0, 10)
        .await
        .unwrap();
    assert_eq!(all.len(), 1);

    // A repeated transactionId does not run again.
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "comment", "to": "reader", "transactionId": "tx-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(out["status"], "error");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (all, _) = app
        .store
        .list_messages(&app.tenant.environment_id, &filter, 0, 10)
        .await
        .unwrap();
    assert_eq!(all.len(), 1);

    // Unknown workflow and bad bodies.
    let (status, _) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "nope", "to": "reader"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, err) = app
        .post("/v1/events/trigger", json!({"name": "comment", "to": []}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    let (status, _) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "comment", "to": "x", "payload": [1]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}
db_test!(in_app, trigger_creates_in_app_message);

async fn delayed_jobs_can_be_canceled(app: TestApp) {
    app.post(
        "/v2/workflows",
        json!({"name": "Later", "workflowId": "later", "steps": [
            {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "hours"}},
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "late"}}
        ]}),
    )
    .await;
    let (_, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "later", "to": "sam", "transactionId": "tx-late"}),
        )
        .await;
    assert_eq!(out["status"], "processed");
    let (status, canceled) = app.delete("/v1/events/trigger/tx-late").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(canceled, json!(true));
    let (_, again) = app.delete("/v1/events/trigger/tx-late").await;
    assert_eq!(again, json!(false), "nothing left to cancel");
}
db_test!(cancel, delayed_jobs_can_be_canceled);

/// Polls the activity feed until every job of `transaction_id` has finished; returns the activity items.
async fn settled(
    app: &TestApp,
    transaction_id: &str,
    notifications: usize,
) -> Vec<serde_json::Value> {
    let path = format!("/v1/notifications?transactionId={transaction_id}");
    eventually(|| async {
        let (status, page) = app.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let items = page["data"].as_array()?.clone();
        let done = items.len() == notifications
            && items.iter().all(|n| {
                n["jobs"].as_array().is_some_and(|jobs| {
                    !jobs.is_empty()
                        && jobs
                            .iter()
                            .all(|j| !matches!(j["status"].as_str(), Some("queued" | "running")))
                })
            });
        done.then_some(items)
    })
    .await
}

async fn workflow(app: &TestApp, body: serde_json::Value) {
    let (status, out) = app.post("/v2/workflows", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

async fn in_app_delay_email_end_to_end(app: TestApp) {
    app.integration(
        json!({"providerId": "sendgrid", "channel": "email", "active": true, "identifier": "sg"}),
    )
    .await;
    workflow(
        &app,
        json!({"name": "Chain", "workflowId": "chain", "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hello {{ payload.name }}"}},
            {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "seconds"}},
            {"name": "Mail", "type": "email", "controlValues": {"subject": "Hi", "body": "Hello"}}
        ]}),
    )
    .await;
    let (_, out) =
        app.post("/v1/events/trigger", json!({"name": "chain", "to": "ann", "payload": {"name": "Ann"}, "transactionId": "t-chain"})).await;
    assert_eq!(out["status"], "processed");
    let items = settled(&app, "t-chain", 1).await;
    let n = &items[0];
    assert_eq!(n["transactionId"], "t-chain");
    assert_eq!(n["subscriber"]["subscriberId"], "ann");
    assert_eq!(n["template"]["triggers"][0]["identifier"], "chain");
    assert_eq!(n["channels"], json!(["in_app", "delay", "email"]));
    let jobs = n["jobs"].as_array().unwrap();
    let summary: Vec<(&str, &str)> = jobs
        .iter()
        .map(|j| (j["type"].as_str().unwrap(), j["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [
            ("in_app", "completed"),
            ("delay", "completed"),
            ("email", "failed")
        ]
    );
    // Execution details for every transition, in order.
    let in_app: Vec<&str> = jobs[0]["executionDetails"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["status"].as_str().unwrap())
        .collect();
    assert_eq!(in_app, ["Pending", "Success"]);
    let email = &jobs[2]["executionDetails"][0];
    assert_eq!(email["status"], "Failed");
    assert_eq!(email["source"], "Credentials");
    assert_eq!(email["providerId"], "sendgrid");
    assert!(
        email["detail"]
            .as_str()
            .unwrap()
            .contains("No provider is wired for sendgrid"),
        "{email}"
    );
    assert_eq!(jobs[0]["providerId"], "svc");
    // The delay really waited: the email job ran at least a second after the in-app one.
    let ran = |j: &serde_json::Value| {
        tidings::domain::Timestamp::parse(j["updatedAt"].as_str().unwrap())
            .unwrap()
            .0
    };
    assert!(ran(&jobs[2]) - ran(&jobs[0]) >= 900, "{jobs:?}");

    // Retrieve one.
    let id = n["_id"].as_str().unwrap();
    let (status, one) = app.get(&format!("/v1/notifications/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["jobs"].as_array().unwrap().len(), 3);
    let (status, _) = app.get("/v1/notifications/ffffffffffffffffffffffff").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.get("/v1/notifications/not-an-id").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}
db_test!(chain, in_app_delay_email_end_to_end);

async fn digest_collapses_triggers(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Digest", "workflowId": "digest", "steps": [
            {"name": "Collect", "stepId": "collect", "type": "digest", "controlValues": {"amount": 2, "unit": "seconds"}},
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "{{ steps.collect.eventCount }} comments: {% for e in steps.collect.events %}{{ e.payload.n }} {% endfor %}"}}
        ]}),
    )
    .await;
    for i in 1..=3 {
        let (_, out) = app.post("/v1/events/trigger", json!({"name": "digest", "to": "dora", "payload": {"n": i}, "transactionId": format!("d{i}")})).await;
        assert_eq!(out["status"], "processed");
    }
    let filter = MessageFilter {
        subscriber_id: Some("dora".into()),
        ..Default::default()
    };
    let store = app.store.clone();
    let env = app.tenant.environment_id.clone();
    let messages = eventually(|| {
        let (store, env, filter) = (store.clone(), env.clone(), filter.clone());
        async move {
            store
                .list_messages(&env, &filter, 0, 10)
                .await
                .ok()
                .filter(|(m, _)| !m.is_empty())
                .map(|(m, _)| m)
        }
    })
    .await;
    assert_eq!(messages.len(), 1, "three triggers, one digest, one message");
    assert_eq!(messages[0].content, "3 comments: 1 2 3 ");
    // The later triggers' digest jobs were merged into the first.
    let items = settled(&app, "d2", 1).await;
    assert_eq!(items[0]["jobs"][0]["status"], "merged");
}
db_test!(digest, digest_collapses_triggers);

async fn inbox_mark_as(app: TestApp) {
    workflow(&app, json!({"name": "Note", "workflowId": "note", "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "n{{ payload.i }}"}}]})).await;
    for (i, who) in [(1, "meg"), (2, "meg"), (3, "ned")] {
        app.post("/v1/events/trigger", json!({"name": "note", "to": who, "payload": {"i": i}, "transactionId": format!("n{i}")})).await;
    }
    for t in ["n1", "n2", "n3"] {
        settled(&app, t, 1).await;
    }
    let (status, feed) = app.get("/v1/subscribers/meg/notifications/feed").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(feed["totalCount"], 2);
    let ids: Vec<String> = feed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(feed["data"][0]["content"], "n2", "newest first");
    let (_, ned) = app.get("/v1/messages?subscriberId=ned").await;
    let ned_id = ned["data"][0]["_id"].as_str().unwrap().to_owned();
    let (_, unseen) = app.get("/v1/subscribers/meg/notifications/unseen").await;
    assert_eq!(unseen["count"], 2);

    // read ⇒ seen; a single id or an array; another subscriber's message is not touched.
    let (status, marked) = app
        .post(
            "/v1/subscribers/meg/messages/mark-as",
            json!({"messageId": [ids[0].clone(), ned_id.clone()], "markAs": "read"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{marked}");
    assert_eq!(marked.as_array().unwrap().len(), 1);
    assert_eq!(marked[0]["_id"], ids[0].as_str());
    assert_eq!(
        (marked[0]["read"].as_bool(), marked[0]["seen"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(marked[0]["lastReadDate"].is_string() && marked[0]["lastSeenDate"].is_string());
    let (_, ned_after) = app.get("/v1/messages?subscriberId=ned").await;
    assert_eq!(
        (
            ned_after["data"][0]["read"].as_bool(),
            ned_after["data"][0]["seen"].as_bool()
        ),
        (Some(false), Some(false))
    );
    // unread keeps seen; unseen keeps read.
    let (_, m) = app
        .post(
            "/v1/subscribers/meg/messages/mark-as",
            json!({"messageId": ids[0], "markAs": "unread"}),
        )
        .await;
    assert_eq!(
        (m[0]["read"].as_bool(), m[0]["seen"].as_bool()),
        (Some(false), Some(true))
    );
    let (_, m) = app
        .post(
            "/v1/subscribers/meg/messages/mark-as",
            json!({"messageId": ids[1], "markAs": "seen"}),
        )
        .await;
    assert_eq!(
        (m[0]["read"].as_bool(), m[0]["seen"].as_bool()),
        (Some(false), Some(true))
    );
    app.post(
        "/v1/subscribers/meg/messages/mark-as",
        json!({"messageId": ids[1], "markAs": "read"}),
    )
    .await;
    let (_, m) = app
        .post(
            "/v1/subscribers/meg/messages/mark-as",
            json!({"messageId": ids[1], "markAs": "unseen"}),
        )
        .await;
    assert_eq!(
        (m[0]["read"].as_bool(), m[0]["seen"].as_bool()),
        (Some(true), Some(false))
    );
    // Bad bodies and unknown subscribers.
    for bad in [
        json!({"messageId": ids[0], "markAs": "archived"}),
        json!({"messageId": "nope", "markAs": "read"}),
        json!({"messageId": [], "markAs": "read"}),
        json!({"markAs": "read"}),
    ] {
        let (status, _) = app
            .post("/v1/subscribers/meg/messages/mark-as", bad.clone())
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    }
    let (status, _) = app
        .post(
            "/v1/subscribers/ghost/messages/mark-as",
            json!({"messageId": ids[0], "markAs": "read"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // mark-all and delete.
    let (status, n) = app
        .post(
            "/v1/subscribers/meg/messages/mark-all",
            json!({"markAs": "seen"}),
        )
        .await;
    assert_eq!((status, n), (StatusCode::CREATED, json!(1)));
    let (_, unseen) = app.get("/v1/subscribers/meg/notifications/unseen").await;
    assert_eq!(unseen["count"], 0);
    let (status, body) = app.delete(&format!("/v1/messages/{}", ids[0])).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::OK,
            json!({"acknowledged": true, "status": "deleted"})
        )
    );
    let (_, feed) = app.get("/v1/subscribers/meg/notifications/feed").await;
    assert_eq!(feed["totalCount"], 1);
    let (status, _) = app.delete(&format!("/v1/messages/{}", ids[0])).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(inbox, inbox_mark_as);
