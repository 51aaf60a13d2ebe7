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
