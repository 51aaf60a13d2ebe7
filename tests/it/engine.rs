//! The delivery engine end to end: trigger → notification and jobs → workers → in-app message.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use tidings::domain::job::JobStatus;
use tidings::store::messages::MessageFilter;

use crate::db_test;
use crate::support::{eventually, settled, Backend, TestApp};

/// Waits until the subscriber has at least one message; returns them, newest first.
async fn messages_of(app: &TestApp, subscriber_id: &str) -> Vec<tidings::domain::job::Message> {
    eventually(|| async {
        let messages = messages_now(app, subscriber_id).await?;
        (!messages.is_empty()).then_some(messages)
    })
    .await
}

/// The subscriber's messages now (up to 10, newest first); `None` when there is no such subscriber.
async fn messages_now(
    app: &TestApp,
    subscriber_id: &str,
) -> Option<Vec<tidings::domain::job::Message>> {
    let filter = MessageFilter {
        subscriber_ref: Some(app.subscriber_ref(subscriber_id).await?),
        ..Default::default()
    };
    let (messages, _) = app
        .store
        .list_messages(&app.tenant.environment_id, &filter, 0, 10)
        .await
        .ok()?;
    Some(messages)
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

    let messages = messages_of(&app, "reader").await;
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
                    .all(|j| !matches!(j.status.as_str(), "pending" | "queued" | "running")))
            .then_some(jobs)
        }
    })
    .await;
    assert_eq!(jobs[0].status, JobStatus::Completed);
    assert_eq!(jobs[0].provider_id, "svc");
    assert_eq!(jobs[1].status, JobStatus::Skipped);
    assert_eq!(messages_of(&app, "reader").await.len(), 1);

    // A repeated transactionId does not run again.
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "comment", "to": "reader", "transactionId": "tx-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(out["status"], "error");
    app.nothing_left_to_run().await;
    assert_eq!(messages_of(&app, "reader").await.len(), 1);

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

async fn workflow(app: &TestApp, body: serde_json::Value) {
    let (status, out) = app.post("/v2/workflows", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

async fn in_app_delay_email_end_to_end(app: TestApp) {
    let receiver = crate::support::receiver::Receiver::start().await;
    app.integration(json!({"providerId": "email-webhook", "channel": "email", "active": true, "identifier": "hook",
        "credentials": {"webhookUrl": format!("{}/mail", receiver.url), "from": "app@example.com"}}))
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
    let (_, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "chain", "to": {"subscriberId": "ann", "email": "ann@example.com"},
            "payload": {"name": "Ann"}, "transactionId": "t-chain"}),
        )
        .await;
    assert_eq!(out["status"], "processed");
    let items = settled(&app, "t-chain", 1).await;
    let n = &items[0];
    assert_eq!(n["transactionId"], "t-chain");
    assert_eq!(n["subscriber"]["subscriberId"], "ann");
    assert_eq!(n["template"]["triggers"][0]["identifier"], "chain");
    assert_eq!(n["channels"], json!(["in_app", "delay", "email"]));
    // The stored JSON columns come back as they were given.
    assert_eq!(n["payload"], json!({"name": "Ann"}));
    assert_eq!(
        n["to"],
        json!({"subscriberId": "ann", "email": "ann@example.com"})
    );
    assert_eq!(n["tags"], json!([]));
    assert_eq!(n["contextKeys"], json!([]));
    assert_eq!(
        (n["severity"].as_str(), n["critical"].as_bool()),
        (Some("none"), Some(false))
    );
    // The single read shows the same record.
    let (status, one) = app
        .get(&format!("/v1/notifications/{}", n["_id"].as_str().unwrap()))
        .await;
    assert_eq!(status, StatusCode::OK);
    for field in ["payload", "to", "tags", "contextKeys", "channels", "jobs"] {
        assert_eq!(one[field], n[field], "{field}");
    }
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
            ("email", "completed")
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
    let statuses = |j: &serde_json::Value| -> Vec<String> {
        j["executionDetails"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["status"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(statuses(&jobs[1]), ["Queued", "Success"]);
    assert!(jobs[1]["executionDetails"][0]["detail"]
        .as_str()
        .unwrap()
        .starts_with("Step queued; runs at "));
    assert_eq!(statuses(&jobs[2]), ["Queued", "Success"]);
    let email = &jobs[2]["executionDetails"][1];
    assert_eq!(email["source"], "Credentials");
    assert_eq!(email["providerId"], "email-webhook");
    assert_eq!(email["detail"], "Message sent by email-webhook (id msg-1)");
    let sent = receiver.wait_for(1).await;
    assert_eq!(sent[0].path, "/mail");
    assert_eq!(sent[0].json()["to"], json!(["ann@example.com"]));
    assert_eq!(sent[0].json()["subject"], "Hi");
    assert_eq!(jobs[0]["providerId"], "svc");
    // A job shows its step as stored and the trigger's payload (the feed writes their JSON as stored).
    let step = &jobs[0]["step"];
    assert_eq!(step["stepId"], "inbox");
    assert_eq!(step["name"], "Inbox");
    assert_eq!(
        step["controlVariables"],
        json!({"body": "Hello {{ payload.name }}"})
    );
    assert_eq!(step["filters"], json!([]));
    assert_eq!(step["shouldStopOnFail"], false);
    assert_eq!(step["_templateId"], n["_templateId"]);
    assert_eq!(
        jobs[1]["step"]["controlVariables"],
        json!({"amount": 1, "unit": "seconds"})
    );
    assert_eq!(jobs[0]["payload"], json!({"name": "Ann"}));
    assert!(jobs[0].get("digest").is_none(), "only digest jobs show one");
    assert!(jobs[0].get("overrides").is_none());
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
    let (status, err) = app.get("/v1/notifications/ffffffffffffffffffffffff").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        err["message"],
        "Notification with id ffffffffffffffffffffffff not found"
    );
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
    let messages = messages_of(&app, "dora").await;
    assert_eq!(messages.len(), 1, "three triggers, one digest, one message");
    assert_eq!(messages[0].content, "3 comments: 1 2 3 ");
    // The later triggers' digest jobs were merged into the first; the steps after them never run (the
    // first trigger's chain delivers their events).
    let items = settled(&app, "d2", 1).await;
    let statuses: Vec<&str> = items[0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["merged", "skipped"]);
    // A merged job's digest is still a DigestMetadata: a type, no nulls.
    let merged = &items[0]["jobs"][0]["digest"];
    assert_eq!(merged["type"], "regular", "{merged}");
    assert_eq!(
        (merged["amount"].clone(), merged["unit"].clone()),
        (json!(2), json!("seconds"))
    );
    assert!(
        merged.as_object().unwrap().values().all(|v| !v.is_null()),
        "{merged}"
    );
    assert_eq!(items[0]["jobs"][1]["executionDetails"], json!([]));
    let first = settled(&app, "d1", 1).await;
    let statuses: Vec<&str> = first[0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["completed", "completed"]);
    // The digest job shows its digest state.
    let first = settled(&app, "d1", 1).await;
    let job = &first[0]["jobs"][0];
    assert_eq!(job["type"], "digest");
    assert!(job["digest"].is_object(), "{job}");
}
db_test!(digest, digest_collapses_triggers);

async fn backoff_digest_sends_the_first_event_at_once(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Backoff", "workflowId": "backoff", "steps": [
            {"name": "Collect", "stepId": "collect", "type": "digest",
             "controlValues": {"type": "backoff", "amount": 2, "unit": "seconds",
                               "lookBackWindow": {"amount": 1, "unit": "minutes"}}},
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "{{ steps.collect.eventCount }} event(s)"}}
        ]}),
    )
    .await;
    app.post(
        "/v1/events/trigger",
        json!({"name": "backoff", "to": "bo", "payload": {}, "transactionId": "b1"}),
    )
    .await;
    let first = messages_of(&app, "bo").await;
    assert_eq!(first[0].content, "1 event(s)");
    // No event in the look-back window: no digest window either, the digest ran when it was created (a
    // window would have set it to run 2 s later).
    let items = settled(&app, "b1", 1).await;
    let digest = &items[0]["jobs"][0];
    let at = |field: &str| {
        chrono::DateTime::parse_from_rfc3339(digest[field].as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    assert!(at("runAt") - at("createdAt") < 2_000, "{digest}");
    // Within the look-back window, the next events open a window and collapse.
    for t in ["b2", "b3"] {
        app.post(
            "/v1/events/trigger",
            json!({"name": "backoff", "to": "bo", "payload": {}, "transactionId": t}),
        )
        .await;
    }
    let items = settled(&app, "b3", 1).await;
    assert_eq!(items[0]["jobs"][0]["status"], "merged");
    let all = eventually(|| async {
        let m = messages_of(&app, "bo").await;
        (m.len() == 2).then_some(m)
    })
    .await;
    assert_eq!(all[0].content, "2 event(s)");
}
db_test!(digest_backoff, backoff_digest_sends_the_first_event_at_once);

async fn timed_digest_waits_for_its_schedule(app: TestApp) {
    use chrono::{Datelike, TimeZone, Utc};
    // Fires on the 1st and the 15th at 06:30 UTC.
    workflow(
        &app,
        json!({"name": "Timed", "workflowId": "timed", "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "now"}},
            {"name": "Collect", "stepId": "collect", "type": "digest",
             "controlValues": {"type": "timed", "timed": {"atTime": "06:30", "monthDays": [1, "15"]}}},
            {"name": "Later", "type": "in_app", "controlValues": {"body": "later"}}
        ]}),
    )
    .await;
    app.post(
        "/v1/events/trigger",
        json!({"name": "timed", "to": "ty", "payload": {}, "transactionId": "tm1"}),
    )
    .await;
    let items = eventually(|| async {
        let (_, page) = app.get("/v1/notifications?transactionId=tm1").await;
        let jobs = page["data"][0]["jobs"].as_array()?.clone();
        (jobs.len() == 3 && jobs[1]["status"] == "queued").then_some(jobs)
    })
    .await;
    assert_eq!(
        items[2]["status"], "pending",
        "not reached before the digest fires"
    );
    let queued = items[1]["executionDetails"][0]["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    let now = Utc::now();
    let mut day = now.date_naive();
    let expected = loop {
        let at = Utc.from_utc_datetime(&day.and_hms_opt(6, 30, 0).unwrap());
        if [1, 15].contains(&day.day()) && at > now {
            break at;
        }
        day = day.succ_opt().unwrap();
    };
    assert_eq!(
        queued,
        format!(
            "Step queued; runs at {}",
            expected.format("%Y-%m-%dT%H:%M:%S%.3fZ")
        )
    );
    // Bad schedules are refused.
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Bad", "workflowId": "bad-timed", "steps": [
                {"name": "Collect", "type": "digest", "controlValues": {"type": "timed",
                    "timed": {"atTime": "25:00", "weekDays": ["funday"], "monthDays": [0]}}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    let errors = out["errors"].as_object().unwrap();
    for k in ["atTime", "weekDays", "monthDays"] {
        assert!(errors.keys().any(|e| e.ends_with(k)), "{k}: {out}");
    }
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Cron", "workflowId": "cron", "steps": [
                {"name": "Collect", "type": "digest", "controlValues": {"type": "timed", "cron": "0 9 * * *"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
}
db_test!(digest_timed, timed_digest_waits_for_its_schedule);

async fn inbox_mark_as(app: TestApp) {
    workflow(&app, json!({"name": "Note", "workflowId": "note", "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "n{{ payload.i }}"}}]})).await;
    // One after the other: workers run concurrently, so messages of triggers sent together may be stored in
    // any order.
    for (i, who) in [(1, "meg"), (2, "meg"), (3, "ned")] {
        app.post("/v1/events/trigger", json!({"name": "note", "to": who, "payload": {"i": i}, "transactionId": format!("n{i}")})).await;
        settled(&app, &format!("n{i}"), 1).await;
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
    // A feed item (NotificationFeedItemDto) names the job that created it, is never archived, and leaves out
    // `_messageTemplateId` (the TS SDK takes a string or nothing there); a message elsewhere has it as null.
    let stored = messages_of(&app, "meg").await;
    for item in feed["data"].as_array().unwrap() {
        let m = stored
            .iter()
            .find(|m| item["_id"] == m.id.as_str())
            .expect("a stored message");
        assert_eq!(item["_jobId"], m.job_id.as_str(), "{item}");
        assert_eq!(item["archived"], false, "{item}");
        assert!(item.get("_messageTemplateId").is_none(), "{item}");
        assert_eq!(item["channel"], "in_app");
        assert_eq!(item["status"], "sent");
    }
    let (_, listed) = app.get("/v1/messages?subscriberId=meg").await;
    assert_eq!(
        listed["data"][0]["_messageTemplateId"],
        json!(null),
        "{listed}"
    );
    assert!(listed["data"][0].get("_messageTemplateId").is_some());
    let (_, second) = app
        .get("/v1/messages?subscriberId=meg&limit=1&page=1")
        .await;
    assert_eq!(
        (
            second["data"][0]["content"].as_str(),
            second["data"].as_array().map(Vec::len)
        ),
        (Some("n1"), Some(1)),
        "{second}"
    );
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

async fn one_step_workflow(app: &TestApp) {
    workflow(
        app,
        json!({"name": "Ping", "workflowId": "ping", "steps": [
            {"name": "One", "type": "in_app", "controlValues": {"body": "one {{ payload.i }}"}},
            {"name": "Two", "type": "in_app", "controlValues": {"body": "two {{ payload.i }}"}}
        ]}),
    )
    .await;
}

async fn lease_expiry(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    one_step_workflow(&app).await;
    app.post(
        "/v1/events/trigger",
        json!({"name": "ping", "to": "lee", "payload": {"i": 1}, "transactionId": "lease"}),
    )
    .await;
    // A worker claims the job with a short lease, then dies without finishing it.
    let claimed = app
        .store
        .claim_jobs("dead-worker", 10, 300, true)
        .await
        .unwrap()
        .jobs;
    assert_eq!(claimed.len(), 1);
    assert!(
        app.store
            .claim_jobs("other", 10, 300, true)
            .await
            .unwrap()
            .jobs
            .is_empty(),
        "the lease holds"
    );
    // The second step's job exists from the trigger on, pending: never claimable.
    let pending = app
        .store
        .jobs_of(std::slice::from_ref(&claimed[0].notification_id))
        .await
        .unwrap();
    let statuses: Vec<&str> = pending.iter().map(|j| j.status.as_str()).collect();
    assert_eq!(statuses, ["running", "pending"]);
    // The dying worker got as far as running its job: the outcome activates the pending second job.
    let runner = tidings::engine::steps::Runner::new(
        app.store.clone(),
        &crate::support::worker_options(app.profile),
    );
    let stale = runner
        .run(&claimed[0], "dead-worker", Default::default())
        .await
        .unwrap();
    let next = stale.next.as_ref().unwrap();
    assert_eq!(
        (next.id.as_str(), next.status.as_str()),
        (pending[1].id.as_str(), "queued")
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        app.store
            .claim_jobs("other", 10, 300, false)
            .await
            .unwrap()
            .jobs
            .is_empty(),
        "a claim that does not look for expired leases leaves the job alone"
    );
    app.start_workers();
    let items = settled(&app, "lease", 1).await;
    let jobs = items[0]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j["status"] == "completed"), "{jobs:?}");
    let first = jobs[0]["executionDetails"].as_array().unwrap();
    let success: Vec<&serde_json::Value> =
        first.iter().filter(|d| d["status"] == "Success").collect();
    assert_eq!(success.len(), 1, "finished exactly once: {first:?}");
    assert_eq!(success[0]["isRetry"], true, "the second claim is a retry");
    // The dead worker comes back: it no longer owns the job, so nothing it reports is written.
    let outcome = tidings::store::jobs::JobOutcome {
        status: JobStatus::Completed,
        ..Default::default()
    };
    assert!(!app
        .store
        .complete_job(&claimed[0], "dead-worker", &outcome)
        .await
        .unwrap());
    // Nor what its run produced: the second job was activated once and ran once.
    assert!(!app
        .store
        .complete_job(&claimed[0], "dead-worker", &stale)
        .await
        .unwrap());
    let items = settled(&app, "lease", 1).await;
    let second: Vec<&str> = items[0]["jobs"][1]["executionDetails"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["status"].as_str().unwrap())
        .collect();
    assert_eq!(second, ["Queued", "Success"]);
    assert_eq!(items[0]["jobs"][1]["status"], "completed");
    let (messages, _) = app
        .store
        .list_messages(
            &app.tenant.environment_id,
            &MessageFilter {
                subscriber_ref: Some(app.subscriber_ref("lee").await.unwrap()),
                ..Default::default()
            },
            0,
            10,
        )
        .await
        .unwrap();
    let mut bodies: Vec<String> = messages.iter().map(|m| m.content.clone()).collect();
    bodies.sort();
    assert_eq!(bodies, ["one 1", "two 1"]);
}

db_test!(lease_expiry, lease_expiry, backend);

/// A cancel while a step runs: the running step still completes, but the next step's job, canceled
/// meanwhile, is not activated (nor does its activation leave a detail on it).
async fn a_cancel_while_a_step_runs_stops_the_chain(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    one_step_workflow(&app).await;
    app.post(
        "/v1/events/trigger",
        json!({"name": "ping", "to": "cal", "payload": {"i": 1}, "transactionId": "t-race"}),
    )
    .await;
    let claimed = app
        .store
        .claim_jobs("w1", 10, 60_000, true)
        .await
        .unwrap()
        .jobs;
    assert_eq!(claimed.len(), 1);
    let runner = tidings::engine::steps::Runner::new(
        app.store.clone(),
        &crate::support::worker_options(app.profile),
    );
    let outcome = runner
        .run(&claimed[0], "w1", Default::default())
        .await
        .unwrap();
    assert!(outcome.next.is_some());
    let (_, canceled) = app.delete("/v1/events/trigger/t-race").await;
    assert_eq!(canceled, json!(true), "the pending second step");
    assert!(app
        .store
        .complete_job(&claimed[0], "w1", &outcome)
        .await
        .unwrap());
    let n = notification_now(&app, "t-race").await;
    assert_eq!(job_statuses(&n), ["completed", "canceled"]);
    let second: Vec<&str> = n["jobs"][1]["executionDetails"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["status"].as_str().unwrap())
        .collect();
    assert_eq!(second, ["Warning"], "only the cancel");
    assert!(app
        .store
        .claim_jobs("w1", 10, 60_000, true)
        .await
        .unwrap()
        .jobs
        .is_empty());
}
db_test!(
    cancel_race,
    a_cancel_while_a_step_runs_stops_the_chain,
    backend
);

/// A step that runs longer than the lease keeps its job: the worker renews the lease while the batch runs,
/// so the process's other claim loop (polling at least every second) never takes the job over and calls the
/// slow endpoint a second time.
async fn slow_steps_keep_their_lease(backend: Backend) {
    let mut app = TestApp::spawn_without_workers(backend).await;
    let slow = crate::support::receiver::Receiver::start().await;
    slow.delay(Duration::from_millis(2_000));
    workflow(
        &app,
        json!({"name": "Slow", "workflowId": "slow", "steps": [
            {"name": "Call", "type": "http_request", "controlValues": {"method": "POST", "url": format!("{}/slow", slow.url)}}
        ]}),
    )
    .await;
    let mut options = crate::support::worker_options(app.profile);
    options.lease = Duration::from_millis(600);
    app.start_workers_with(options);
    app.post(
        "/v1/events/trigger",
        json!({"name": "slow", "to": "sl", "transactionId": "slow-1"}),
    )
    .await;
    let items = settled(&app, "slow-1", 1).await;
    assert_eq!(items[0]["jobs"][0]["status"], "completed", "{items:?}");
    // A claim loop that took the job over would still hold it: the workers, stopped, finish what they hold.
    app.stop_workers().await;
    assert_eq!(slow.requests().len(), 1, "the slow step ran once");
}

db_test!(
    slow_steps_keep_their_lease,
    slow_steps_keep_their_lease,
    backend
);

/// Two `tidings serve` processes on one PostgreSQL database share the queue; no job is done twice.
async fn two_processes_share_the_queue() {
    let app = TestApp::spawn_without_workers(Backend::Postgres).await;
    one_step_workflow(&app).await;
    let schema = app.pg_schema.clone().unwrap();
    let sep = if app.database_url.contains('?') {
        '&'
    } else {
        '?'
    };
    let url = format!(
        "{}{sep}options=-c%20search_path%3D{schema}%2Cpublic",
        app.database_url
    );
    let mut children = Vec::new();
    for _ in 0..2 {
        children.push(
            std::process::Command::new(env!("CARGO_BIN_EXE_tidings"))
                .arg("serve")
                .env("DATABASE_URL", &url)
                .env("TIDINGS_LISTEN", "127.0.0.1:0")
                .env("TIDINGS_ENCRYPTION_KEY", &app.encryption_key)
                .env("TIDINGS_WORKERS", "4")
                .env("TIDINGS_ALLOW_PRIVATE_NETWORKS", "true")
                .env_remove("TIDINGS_API_KEY")
                .env("RUST_LOG", "info")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start tidings serve"),
        );
    }
    // Wait until both serve (their workers run from then on).
    for child in &mut children {
        use std::io::BufRead;
        let stderr = child.stderr.take().unwrap();
        let ready = tokio::task::spawn_blocking(move || {
            std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
                .any(|l| l.contains("tidings is serving"))
        });
        assert!(
            tokio::time::timeout(Duration::from_secs(30), ready)
                .await
                .unwrap()
                .unwrap(),
            "serve did not start"
        );
    }
    let events = 200;
    let bulk: Vec<serde_json::Value> = (0..events)
        .map(|i| json!({"name": "ping", "to": format!("s{}", i % 7), "payload": {"i": i}, "transactionId": format!("p{i}")}))
        .collect();
    for chunk in bulk.chunks(100) {
        let (status, out) = app
            .post("/v1/events/trigger/bulk", json!({ "events": chunk }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let done = eventually(|| {
        let pool = pool.clone();
        async move {
            let (completed,): (i64,) =
                sqlx::query_as("select count(*) from jobs where status = 'completed'")
                    .fetch_one(&pool)
                    .await
                    .ok()?;
            (completed == 2 * events).then_some(completed)
        }
    })
    .await;
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert_eq!(done, 2 * events);
    let (messages,): (i64,) = sqlx::query_as("select count(*) from messages")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(messages, 2 * events, "one message per job");
    let (successes,): (i64,) =
        sqlx::query_as("select count(*) from execution_details where status = 'Success'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(successes, 2 * events, "each job finished once");
    let (workers,): (i64,) = sqlx::query_as("select count(distinct locked_by) from jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(
        workers >= 2,
        "both processes took jobs (saw {workers} workers)"
    );
}
crate::postgres_test!(
    two_processes_share_the_queue_postgres,
    two_processes_share_the_queue()
);

/// A local HTTP receiver recording every request (headers and body); answers `status`.
async fn receiver(
    status: u16,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(axum::http::HeaderMap, String)>>>,
) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let store = seen.clone();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap, body: String| {
        let store = store.clone();
        async move {
            store.lock().unwrap().push((headers, body));
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                "{\"ok\":true}",
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

async fn http_request_steps_are_signed(app: TestApp) {
    let (url, seen) = receiver(200).await;
    let (bad_url, _) = receiver(500).await;
    workflow(
        &app,
        json!({"name": "Hook", "workflowId": "hook", "steps": [
            {"name": "Call", "type": "http_request", "controlValues": {"method": "POST", "url": format!("{url}/orders/{{{{ payload.id }}}}"),
                "headers": {"x-tenant": "{{ subscriber.subscriberId }}"}, "body": {"order": "{{ payload.id }}", "who": "{{ subscriber.firstName }}"}}},
            {"name": "Fail", "type": "http_request", "shouldStopOnFail": true, "controlValues": {"method": "POST", "url": bad_url}},
            {"name": "Never", "type": "in_app", "controlValues": {"body": "not reached"}}
        ]}),
    )
    .await;
    app.post("/v1/events/trigger", json!({"name": "hook", "to": {"subscriberId": "hh", "firstName": "Hal"}, "payload": {"id": 42}, "transactionId": "h1"}))
        .await;
    let items = settled(&app, "h1", 1).await;
    let jobs = items[0]["jobs"].as_array().unwrap();
    let summary: Vec<&str> = jobs.iter().map(|j| j["status"].as_str().unwrap()).collect();
    assert_eq!(
        summary,
        ["completed", "failed", "canceled"],
        "shouldStopOnFail stops the chain: the step it never reached is canceled"
    );
    let ok = jobs[0]["executionDetails"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(ok["status"], "Success");
    assert!(
        ok["raw"].as_str().unwrap().contains("\"status\":200"),
        "{ok}"
    );
    let failed = jobs[1]["executionDetails"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        failed["detail"].as_str().unwrap().contains("500"),
        "{failed}"
    );

    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let (headers, body) = &requests[0];
    assert_eq!(headers["x-tenant"], "hh");
    let body_json: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body_json, json!({"order": "42", "who": "Hal"}));
    // Verify the signature independently: t=<ms>,v1=HMAC-SHA256(api key, "<t>." + body).
    let sig = headers["svc-signature"].to_str().unwrap();
    let (t, v1) = sig.split_once(",v1=").unwrap();
    let t = t.strip_prefix("t=").unwrap();
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(app.key.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    assert_eq!(v1, hex::encode(mac.finalize().into_bytes()));
    let age = chrono::Utc::now().timestamp_millis() - t.parse::<i64>().unwrap();
    assert!((0..60_000).contains(&age), "t is the send time in ms");
}
db_test!(http_request, http_request_steps_are_signed);

async fn events_list_filters(app: TestApp) {
    workflow(&app, json!({"name": "A", "workflowId": "wa", "severity": "high", "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "a"}}]})).await;
    workflow(
        &app,
        json!({"name": "B", "workflowId": "wb", "steps": [
        {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "hours"}},
        {"name": "Mail", "type": "email", "controlValues": {"subject": "s", "body": "b"}}]}),
    )
    .await;
    let (_, wa) = app.get("/v2/workflows/wa").await;
    let wa_id = wa["_id"].as_str().unwrap().to_owned();
    app.subscriber("amy", json!({"email": "amy@example.com"}))
        .await;
    app.subscriber("bo", json!({"email": "bo@example.org"}))
        .await;
    let triggers = [
        ("t1", "wa", "amy", json!({"tenant": "acme"})),
        ("t2", "wb", "amy", json!({})),
        ("t3", "wa", "bo", json!({"tenant": "acme", "region": "eu"})),
        ("t4", "wb", "bo", json!({"region": "eu", "tenant": "acme"})),
        ("t5", "wa", "bo", json!({})),
    ];
    for (tx, wf, to, ctx) in triggers {
        let (_, out) = app
            .post(
                "/v1/events/trigger",
                json!({"name": wf, "to": to, "transactionId": tx, "context": ctx}),
            )
            .await;
        assert_eq!(out["status"], "processed", "{out}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let app_ref = &app;
    let q = |query: String| async move {
        let (status, page) = app_ref.get(&format!("/v1/notifications?{query}")).await;
        assert_eq!(status, StatusCode::OK, "{query}: {page}");
        let mut tx: Vec<String> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["transactionId"].as_str().unwrap().to_owned())
            .collect();
        tx.sort();
        (tx, page)
    };
    assert_eq!(q(String::new()).await.0, ["t1", "t2", "t3", "t4", "t5"]);
    assert_eq!(q("channels=email".into()).await.0, ["t2", "t4"]);
    assert_eq!(
        q("channels=email&channels=in_app".into()).await.0.len(),
        5,
        "any overlap"
    );
    assert_eq!(q(format!("templates={wa_id}")).await.0, ["t1", "t3", "t5"]);
    assert_eq!(q("emails=amy@example.com".into()).await.0, ["t1", "t2"]);
    assert_eq!(q("subscriberIds=bo".into()).await.0, ["t3", "t4", "t5"]);
    assert_eq!(
        q("subscriberIds=bo&subscriberIds=amy&emails=nobody@x.io".into())
            .await
            .0
            .len(),
        5
    );
    assert_eq!(q("emails=nobody@x.io".into()).await.0, Vec::<String>::new());
    assert_eq!(q("search=example.org".into()).await.0, ["t3", "t4", "t5"]);
    assert_eq!(q("severity=high".into()).await.0, ["t1", "t3", "t5"]);
    assert_eq!(q("severity=none".into()).await.0, ["t2", "t4"]);
    assert_eq!(q("transactionId=t4".into()).await.0, ["t4"]);
    assert_eq!(
        q("contextKeys=region:eu&contextKeys=tenant:acme".into())
            .await
            .0,
        ["t3", "t4"]
    );
    assert_eq!(q("contextKeys=tenant:acme".into()).await.0, ["t1"]);
    assert_eq!(
        q("contextKeys=".into()).await.0,
        ["t2", "t5"],
        "empty means no context"
    );
    assert_eq!(
        q("subscriberIds=bo&channels=in_app&severity=high".into())
            .await
            .0,
        ["t3", "t5"],
        "AND"
    );
    assert_eq!(
        q("topicKey=news".into()).await.0,
        Vec::<String>::new(),
        "no topics exist"
    );
    // Time window.
    let (_, all) = q(String::new()).await;
    let mut times: Vec<&str> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["createdAt"].as_str().unwrap())
        .collect();
    times.sort();
    assert_eq!(q(format!("after={}", times[2])).await.0.len(), 3);
    assert_eq!(q(format!("before={}", times[1])).await.0.len(), 2);
    assert_eq!(
        q("after=2000-01-01&before=2000-01-02".into()).await.0.len(),
        0
    );
    // Pages: newest first; hasMore exact even on an exact last page.
    let (_, p0) = q("limit=2&page=0".into()).await;
    let order: Vec<&str> = p0["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["transactionId"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["t5", "t4"]);
    assert_eq!(
        (
            p0["hasMore"].as_bool(),
            p0["pageSize"].as_i64(),
            p0["page"].as_i64()
        ),
        (Some(true), Some(2), Some(0))
    );
    let (_, p2) = q("limit=2&page=2".into()).await;
    assert_eq!(p2["data"].as_array().unwrap().len(), 1);
    assert_eq!(p2["hasMore"], false);
    let (_, exact) = q("limit=5".into()).await;
    assert_eq!(exact["hasMore"], false, "5 of 5: nothing more");
    let (_, float) = q("limit=2.0&page=1.0".into()).await;
    assert_eq!(float["page"], 1);
    let order = |page: &serde_json::Value| -> Vec<String> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["transactionId"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(order(&float), ["t3", "t2"], "page 1 continues page 0");
    // A later page of a filtered list.
    let (_, bo1) = q("subscriberIds=bo&limit=1&page=1".into()).await;
    assert_eq!(
        (order(&bo1), bo1["hasMore"].as_bool()),
        (vec!["t4".to_owned()], Some(true))
    );
    let (_, bo2) = q("subscriberIds=bo&channels=in_app&limit=1&page=1".into()).await;
    assert_eq!(
        (order(&bo2), bo2["hasMore"].as_bool()),
        (vec!["t3".to_owned()], Some(false))
    );
    // Bad parameters.
    for (query, status) in [
        ("limit=0", StatusCode::UNPROCESSABLE_ENTITY),
        ("limit=51", StatusCode::UNPROCESSABLE_ENTITY),
        ("page=-1", StatusCode::UNPROCESSABLE_ENTITY),
        ("severity=urgent", StatusCode::UNPROCESSABLE_ENTITY),
        ("after=yesterday", StatusCode::BAD_REQUEST),
        (
            "after=2026-02-01&before=2026-01-01",
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (got, body) = app.get(&format!("/v1/notifications?{query}")).await;
        assert_eq!(got, status, "{query}: {body}");
    }
    // Another environment sees none of it.
    let other = app.second_environment("Other").await;
    let (_, page) =
        crate::support::send(app.req_as(&other, reqwest::Method::GET, "/v1/notifications")).await;
    assert_eq!(page["data"], json!([]));
    let id = all["data"][0]["_id"].as_str().unwrap();
    let (status, _) = crate::support::send(app.req_as(
        &other,
        reqwest::Method::GET,
        &format!("/v1/notifications/{id}"),
    ))
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(events_list, events_list_filters);

async fn seeded_notifications_read_back(app: TestApp) {
    workflow(&app, json!({"name": "Seed", "workflowId": "seed", "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "x"}}]})).await;
    let w = app
        .store
        .get_workflow(&app.tenant.environment_id, "seed")
        .await
        .unwrap()
        .unwrap();
    // The activity filter names subscribers by their current record: `sd1` is one.
    app.subscriber("sd1", json!({})).await;
    let n = app
        .store
        .seed_notifications(&app.tenant, &w, "sd", 30, 4)
        .await
        .unwrap();
    assert_eq!(n, 30);
    let (status, page) = app.get("/v1/notifications?limit=50").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let data = page["data"].as_array().unwrap();
    assert_eq!(data.len(), 30);
    assert_eq!(page["hasMore"], false);
    assert!(data
        .iter()
        .all(|n| n["jobs"].as_array().unwrap().len() == 1));
    assert_eq!(
        data[0]["jobs"][0]["executionDetails"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(data[0]["jobs"][0]["status"], "completed");
    let (_, page) = app
        .get("/v1/notifications?subscriberIds=sd1&limit=50")
        .await;
    assert_eq!(
        page["data"].as_array().unwrap().len(),
        8,
        "n % 4 == 1 for 8 of 1..=30"
    );
}
db_test!(seeded_notifications, seeded_notifications_read_back);

async fn throttle_and_scheduled_delay(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Limited", "workflowId": "limited", "steps": [
            {"name": "Gate", "type": "throttle", "controlValues": {"amount": 1, "unit": "minutes", "threshold": 1}},
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "hi {{ payload.i }}"}}
        ]}),
    )
    .await;
    for i in 1..=3 {
        app.post("/v1/events/trigger", json!({"name": "limited", "to": "tom", "payload": {"i": i}, "transactionId": format!("th{i}")}))
            .await;
        settled(&app, &format!("th{i}"), 1).await;
    }
    let messages = messages_of(&app, "tom").await;
    assert_eq!(messages.len(), 1, "one run per minute gets through");
    assert_eq!(messages[0].content, "hi 1");
    let items = settled(&app, "th3", 1).await;
    let gate = &items[0]["jobs"][0];
    assert_eq!(gate["status"], "skipped");
    let last = gate["executionDetails"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["status"], "Warning");
    assert!(
        last["detail"].as_str().unwrap().starts_with("Throttled"),
        "{last}"
    );
    let after: Vec<&str> = items[0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        after,
        ["skipped", "skipped"],
        "the chain stops at the throttle"
    );

    // A scheduled delay waits until the date found at delayPath in the payload.
    workflow(
        &app,
        json!({"name": "Timed", "workflowId": "timed", "steps": [
            {"name": "Until", "type": "delay", "controlValues": {"type": "scheduled", "delayPath": "payload.sendAt"}},
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "on time"}}
        ]}),
    )
    .await;
    let at = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    let at_iso = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    app.post("/v1/events/trigger", json!({"name": "timed", "to": "una", "payload": {"sendAt": at_iso}, "transactionId": "sch"}))
        .await;
    let items = settled(&app, "sch", 1).await;
    let jobs = items[0]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(
        jobs[0]["runAt"],
        at_iso.as_str(),
        "the delay runs at the payload's date"
    );
    let message = messages_of(&app, "una").await;
    assert_eq!(message[0].content, "on time");
    assert!(
        message[0].created_at.0 >= at.timestamp_millis(),
        "not before the scheduled time"
    );
}
db_test!(throttle_schedule, throttle_and_scheduled_delay);

/// Triggers read workflows through a short-lived cache; a change made through the API reaches the very next
/// trigger (writes clear the cache), and so do a delete and a re-creation under the same identifier.
async fn workflow_changes_reach_the_next_trigger(app: TestApp) {
    let body = |active: bool, text: &str| {
        json!({"name": "Ping", "workflowId": "ping", "active": active, "steps": [
            {"name": "One", "type": "in_app", "controlValues": {"body": text}}
        ]})
    };
    let trigger = |tx: &'static str| {
        let app = &app;
        async move {
            app.post(
                "/v1/events/trigger",
                json!({"name": "ping", "to": "cache-reader", "transactionId": tx}),
            )
            .await
        }
    };
    workflow(&app, body(true, "first")).await;
    let (status, out) = trigger("tx-cache-1").await;
    assert_eq!(
        (status, out["status"].clone()),
        (StatusCode::CREATED, json!("processed"))
    );

    let (status, out) = app.put("/v2/workflows/ping", body(false, "first")).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let (status, out) = trigger("tx-cache-2").await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["status"], "trigger_not_active", "{out}");

    let (status, _) = app.delete("/v2/workflows/ping").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, out) = trigger("tx-cache-3").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");

    workflow(&app, body(true, "second")).await;
    let (status, out) = trigger("tx-cache-4").await;
    assert_eq!(
        (status, out["status"].clone()),
        (StatusCode::CREATED, json!("processed"))
    );
    // The job of the re-created workflow renders its own body.
    let messages = eventually(|| async {
        let messages = messages_of(&app, "cache-reader").await;
        (messages.len() == 2).then_some(messages)
    })
    .await;
    let mut bodies: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    bodies.sort_unstable();
    assert_eq!(bodies, ["first", "second"]);
}
db_test!(workflow_cache, workflow_changes_reach_the_next_trigger);

/// Bulk triggers sharing transaction ids, listed in opposite orders and sent at once: each id runs exactly
/// once, whichever group commit records it.
async fn concurrent_duplicate_transaction_ids(app: TestApp) {
    one_step_workflow(&app).await;
    let events = |reversed: bool| {
        let mut events: Vec<serde_json::Value> = (0..10)
            .map(|i| json!({"name": "ping", "to": "twice", "payload": {"i": i}, "transactionId": format!("dup-{i}")}))
            .collect();
        if reversed {
            events.reverse();
        }
        json!({ "events": events })
    };
    let (a, b, c, d) = tokio::join!(
        app.post("/v1/events/trigger/bulk", events(false)),
        app.post("/v1/events/trigger/bulk", events(true)),
        app.post("/v1/events/trigger/bulk", events(false)),
        app.post("/v1/events/trigger/bulk", events(true)),
    );
    let mut processed: Vec<String> = Vec::new();
    for (status, out) in [a, b, c, d] {
        assert_eq!(status, StatusCode::CREATED, "{out}");
        for r in out.as_array().expect("an array of results") {
            if r["status"] == "processed" {
                processed.push(r["transactionId"].as_str().unwrap().to_owned());
            } else {
                assert_eq!(r["status"], "error", "{r}");
            }
        }
    }
    processed.sort();
    let expected: Vec<String> = (0..10).map(|i| format!("dup-{i}")).collect();
    assert_eq!(processed, expected, "each transaction id ran exactly once");
    for i in 0..10 {
        let items = settled(&app, &format!("dup-{i}"), 1).await;
        assert_eq!(items.len(), 1);
    }
}
db_test!(duplicate_ids_at_once, concurrent_duplicate_transaction_ids);

/// A trigger hands the due first job of each notification to this process's workers, already leased:
/// released (a stopping process gives it back), it is queued again for anyone; handed to workers that died,
/// it is claimed again when its lease expires, and it still finishes exactly once.
async fn handed_jobs_are_released_or_reclaimed(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    one_step_workflow(&app).await;
    let trigger = |tx: &'static str| {
        let app = &app;
        async move {
            let (status, out) = app
                .post(
                    "/v1/events/trigger",
                    json!({"name": "ping", "to": "handy", "payload": {"i": 1}, "transactionId": tx}),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{out}");
        }
    };

    // Released: queued again, its claim not counted.
    let mut rx = app
        .wakeup
        .handoff()
        .hand_jobs_to("stopping-worker", 60_000, 16);
    trigger("handed-released").await;
    let (job, notification) = rx.try_recv().expect("the first job was handed over");
    assert_eq!(job.status, JobStatus::Running);
    assert_eq!(job.attempts, 1);
    assert_eq!(notification.transaction_id, "handed-released");
    assert!(
        app.store
            .claim_jobs("other", 10, 300, true)
            .await
            .unwrap()
            .jobs
            .is_empty(),
        "a handed job is leased in the database"
    );
    let released = app
        .store
        .release_jobs("stopping-worker", std::slice::from_ref(&job.id))
        .await
        .unwrap();
    assert_eq!(released, 1);
    let claimed = app
        .store
        .claim_jobs("other", 10, 300, false)
        .await
        .unwrap()
        .jobs;
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        (claimed[0].id.as_str(), claimed[0].attempts),
        (job.id.as_str(), 1)
    );
    assert!(app
        .store
        .release_jobs("other", std::slice::from_ref(&job.id))
        .await
        .is_ok());

    // Handed to workers that died: claimed again after the lease.
    let mut rx = app.wakeup.handoff().hand_jobs_to("dead-worker", 300, 16);
    trigger("handed-dead").await;
    let (dead, _) = rx.try_recv().expect("the first job was handed over");
    app.wakeup.handoff().stop_handing_jobs("dead-worker");
    drop(rx);
    app.start_workers();
    for tx in ["handed-released", "handed-dead"] {
        let items = settled(&app, tx, 1).await;
        let jobs = items[0]["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 2, "{tx}");
        assert!(jobs.iter().all(|j| j["status"] == "completed"), "{jobs:?}");
        let first = jobs[0]["executionDetails"].as_array().unwrap();
        let success = first.iter().filter(|d| d["status"] == "Success").count();
        assert_eq!(success, 1, "{tx}: finished exactly once: {first:?}");
    }
    // The dead worker comes back: it no longer owns its job, so nothing it reports is written.
    let outcome = tidings::store::jobs::JobOutcome {
        status: JobStatus::Completed,
        ..Default::default()
    };
    assert!(!app
        .store
        .complete_job(&dead, "dead-worker", &outcome)
        .await
        .unwrap());
}

db_test!(handed_jobs, handed_jobs_are_released_or_reclaimed, backend);

/// The statuses of a notification's jobs, in step order.
fn job_statuses(n: &serde_json::Value) -> Vec<String> {
    n["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["status"].as_str().unwrap().to_owned())
        .collect()
}

/// The one notification of `transaction_id` as the feed shows it now, settled or not.
async fn notification_now(app: &TestApp, transaction_id: &str) -> serde_json::Value {
    let (status, page) = app
        .get(&format!("/v1/notifications?transactionId={transaction_id}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["data"][0].clone()
}

/// The activity shows every step of the workflow from the trigger on, as Novu does: an in-app → delay
/// (one day) → email trigger shows the email job pending at once, the delay queued until its day, and a
/// cancel settles both.
async fn every_step_shows_from_the_trigger(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Tomorrow", "workflowId": "tomorrow", "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "today"}},
            {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "days"}},
            {"name": "Mail", "stepId": "mail", "type": "email", "controlValues": {"subject": "s", "body": "b"}}
        ]}),
    )
    .await;
    let (_, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "tomorrow", "to": "pia", "transactionId": "t-tomorrow"}),
        )
        .await;
    assert_eq!(out["status"], "processed");
    // At once: three jobs, the email pending whatever the first is doing (the delay is pending until the
    // in-app step completes, then queued).
    let n = notification_now(&app, "t-tomorrow").await;
    let now = job_statuses(&n);
    assert_eq!(now.len(), 3, "{n}");
    assert!(matches!(now[1].as_str(), "pending" | "queued"), "{now:?}");
    assert_eq!(now[2], "pending");
    // Once the in-app step ran: the delay waits for its day, the email still pending.
    let n = eventually(|| async {
        let n = notification_now(&app, "t-tomorrow").await;
        (job_statuses(&n)[0] == "completed").then_some(n)
    })
    .await;
    assert_eq!(job_statuses(&n), ["completed", "queued", "pending"]);
    let jobs = n["jobs"].as_array().unwrap();
    let types: Vec<&str> = jobs.iter().map(|j| j["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["in_app", "delay", "email"]);
    let run_at = |j: &serde_json::Value| {
        tidings::domain::Timestamp::parse(j["runAt"].as_str().unwrap())
            .unwrap()
            .0
    };
    let day = 86_400_000;
    let waits = run_at(&jobs[1]) - tidings::domain::Timestamp::now().0;
    assert!(waits > day - 60_000 && waits <= day, "{}", jobs[1]);
    let mail = &jobs[2];
    assert_eq!(mail["step"]["stepId"], "mail");
    assert_eq!(
        mail["step"]["controlVariables"],
        json!({"subject": "s", "body": "b"})
    );
    assert_eq!(mail["executionDetails"], json!([]), "nothing ran yet");
    assert_eq!(
        mail["providerId"], "svc-email",
        "no email integration: the channel default"
    );
    // The recipient given as a string shows as an object; unknown names are left out.
    assert_eq!(n["to"], json!({"subscriberId": "pia"}));
    assert_eq!(
        n["subscriber"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["_id", "subscriberId"]
    );
    // Canceling settles the steps not run yet.
    let (status, canceled) = app.delete("/v1/events/trigger/t-tomorrow").await;
    assert_eq!((status, canceled), (StatusCode::OK, json!(true)));
    let n = notification_now(&app, "t-tomorrow").await;
    assert_eq!(job_statuses(&n), ["completed", "canceled", "canceled"]);
    let last = &n["jobs"][2]["executionDetails"];
    assert_eq!(last.as_array().unwrap().len(), 1, "{last}");
    assert_eq!(last[0]["status"], "Warning");
}
db_test!(pending_steps, every_step_shows_from_the_trigger);

/// A trigger's in-app first step that is due at once runs before the trigger is recorded and is stored
/// completed in the trigger's transaction (`engine::run_due_in_app`): when the trigger answers, its message
/// is there and its next step queued for the workers; a bulk trigger's are too; a repeated transactionId
/// stores nothing.
async fn in_app_first_steps_are_stored_with_their_trigger(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Now", "workflowId": "now-then", "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "hello {{ payload.who }}"}},
            {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "hours"}}
        ]}),
    )
    .await;
    // Once the workers run (a first trigger's message shows it), they run the in-app first steps.
    app.post(
        "/v1/events/trigger",
        json!({"name": "now-then", "to": "warm", "transactionId": "t-warm"}),
    )
    .await;
    messages_of(&app, "warm").await;

    let (_, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "now-then", "to": "ida", "payload": {"who": "Ida"}, "transactionId": "t-now"}),
        )
        .await;
    assert_eq!(out["status"], "processed");
    let n = notification_now(&app, "t-now").await;
    assert_eq!(job_statuses(&n), ["completed", "queued"], "{n}");
    let details: Vec<&str> = n["jobs"][0]["executionDetails"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["status"].as_str().unwrap())
        .collect();
    assert_eq!(details.first(), Some(&"Pending"), "{n}");
    assert_eq!(details.last(), Some(&"Success"), "{n}");
    let listed = |subscriber: &'static str| {
        let app = &app;
        async move { messages_now(app, subscriber).await.unwrap() }
    };
    let messages = listed("ida").await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].content, "hello Ida");

    let (status, out) = app
        .post(
            "/v1/events/trigger/bulk",
            json!({"events": [
                {"name": "now-then", "to": ["ben", "cy"], "transactionId": "t-now-bulk"},
                {"name": "now-then", "to": "ida", "transactionId": "t-now"}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out[1]["status"], "error", "{out}");
    let (_, page) = app.get("/v1/notifications?transactionId=t-now-bulk").await;
    for n in page["data"].as_array().unwrap() {
        assert_eq!(job_statuses(n), ["completed", "queued"], "{n}");
    }
    assert_eq!(listed("ben").await.len(), 1);
    assert_eq!(listed("cy").await.len(), 1);
    assert_eq!(listed("ida").await.len(), 1, "the repeated transactionId");
}
db_test!(
    in_app_first,
    in_app_first_steps_are_stored_with_their_trigger
);

/// A bulk trigger records every step's job of each of its events and recipients in its one transaction.
async fn bulk_triggers_record_every_step(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Pair", "workflowId": "pair", "steps": [
            {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "hours"}},
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "later"}}
        ]}),
    )
    .await;
    let (status, out) = app
        .post(
            "/v1/events/trigger/bulk",
            json!({"events": [
                {"name": "pair", "to": ["b1", "b2"], "transactionId": "t-bulk-1"},
                {"name": "pair", "to": "b3", "transactionId": "t-bulk-2"}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (_, page) = app.get("/v1/notifications?transactionId=t-bulk-1").await;
    let items = page["data"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    for n in items {
        assert_eq!(job_statuses(n), ["queued", "pending"], "{n}");
    }
    let n = notification_now(&app, "t-bulk-2").await;
    assert_eq!(job_statuses(&n), ["queued", "pending"]);
}
db_test!(bulk_pending, bulk_triggers_record_every_step);

/// A digest reached after a first step merges a later event into the open window when the chain reaches
/// it; the merged event's later steps are skipped, the window's chain delivers both events.
async fn a_digest_reached_later_merges_and_skips_the_rest(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Mid", "workflowId": "mid", "steps": [
            {"name": "First", "type": "in_app", "controlValues": {"body": "at once {{ payload.n }}"}},
            {"name": "Collect", "stepId": "collect", "type": "digest", "controlValues": {"amount": 2, "unit": "seconds"}},
            {"name": "Summary", "type": "in_app", "controlValues": {"body": "{{ steps.collect.eventCount }} events"}}
        ]}),
    )
    .await;
    for n in 1..=2 {
        app.post(
            "/v1/events/trigger",
            json!({"name": "mid", "to": "mia", "payload": {"n": n}, "transactionId": format!("t-mid-{n}")}),
        )
        .await;
        // The first event's digest window is open before the second event reaches its digest step.
        eventually(|| async {
            let n = notification_now(&app, &format!("t-mid-{n}")).await;
            (job_statuses(&n)[0] == "completed").then_some(())
        })
        .await;
    }
    let second = settled(&app, "t-mid-2", 1).await;
    assert_eq!(job_statuses(&second[0]), ["completed", "merged", "skipped"]);
    let first = settled(&app, "t-mid-1", 1).await;
    assert_eq!(
        job_statuses(&first[0]),
        ["completed", "completed", "completed"]
    );
    let messages = messages_of(&app, "mia").await;
    let mut bodies: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    bodies.sort_unstable();
    assert_eq!(bodies, ["2 events", "at once 1", "at once 2"]);
}
db_test!(
    digest_mid_chain,
    a_digest_reached_later_merges_and_skips_the_rest
);

/// A step skipped by its filters lets the chain go on; a job keeps the step it was created with, so an
/// edit of the workflow after the trigger reaches the next trigger, not the chain under way.
async fn chains_keep_their_steps_and_go_past_filters(app: TestApp) {
    let steps = |text: &str| {
        json!({"name": "Edit", "workflowId": "edit", "steps": [
            {"name": "Pros", "type": "in_app", "controlValues": {"body": "pro"},
             "filters": [{"isNegated": false, "type": "GROUP", "value": "AND",
               "children": [{"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"}]}]},
            {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "seconds"}},
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": text}}
        ]})
    };
    workflow(&app, steps("first {{ payload.plan }}")).await;
    app.post(
        "/v1/events/trigger",
        json!({"name": "edit", "to": "eve", "payload": {"plan": "free"}, "transactionId": "t-edit"}),
    )
    .await;
    let (status, out) = app.put("/v2/workflows/edit", steps("second")).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let items = settled(&app, "t-edit", 1).await;
    assert_eq!(
        job_statuses(&items[0]),
        ["skipped", "completed", "completed"]
    );
    let messages = messages_of(&app, "eve").await;
    let bodies: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(bodies, ["first free"]);
    assert_eq!(
        items[0]["jobs"][2]["step"]["controlVariables"]["body"],
        "first {{ payload.plan }}"
    );
}
db_test!(step_snapshots, chains_keep_their_steps_and_go_past_filters);

/// An email job names the provider of the integration that handled it (a failover included), and before
/// its delivery the provider of the integration delivery tries first.
async fn email_jobs_name_the_provider_that_handled_them(app: TestApp) {
    use crate::support::receiver::{Receiver, Reply};
    let broken = Receiver::start().await;
    broken.always(Reply::status(500));
    app.integration(
        json!({"providerId": "email-webhook", "channel": "email", "active": true,
        "identifier": "main", "name": "main", "primary": true,
        "credentials": {"webhookUrl": format!("{}/main", broken.url), "from": "app@example.com"}}),
    )
    .await;
    let smtp = crate::support::smtp::SmtpServer::start().await;
    app.integration(
        json!({"providerId": "nodemailer", "channel": "email", "active": true,
        "identifier": "smtp", "name": "smtp",
        "credentials": {"host": smtp.host, "port": smtp.port.to_string(), "secure": false,
            "ignoreTls": true, "from": "app@example.com"}}),
    )
    .await;
    workflow(
        &app,
        json!({"name": "Mailer", "workflowId": "mailer", "steps": [
            {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "seconds"}},
            {"name": "Mail", "type": "email", "controlValues": {"subject": "Hi", "body": "<p>Hello</p>"}}
        ]}),
    )
    .await;
    app.post(
        "/v1/events/trigger",
        json!({"name": "mailer", "to": {"subscriberId": "ned", "email": "ned@example.com"},
            "transactionId": "t-mailer"}),
    )
    .await;
    let n = notification_now(&app, "t-mailer").await;
    assert_eq!(n["jobs"][1]["status"], "pending");
    assert_eq!(
        n["jobs"][1]["providerId"], "email-webhook",
        "the primary integration's"
    );
    let items = settled(&app, "t-mailer", 1).await;
    let mail = &items[0]["jobs"][1];
    assert_eq!(mail["status"], "completed", "{mail}");
    assert_eq!(smtp.wait_for(1).await.len(), 1);
    assert_eq!(mail["providerId"], "nodemailer", "{mail}");
    let details = mail["executionDetails"].as_array().unwrap();
    let last = details.last().unwrap();
    assert_eq!(
        (last["status"].clone(), last["providerId"].clone()),
        (json!("Success"), json!("nodemailer"))
    );
}
db_test!(job_provider, email_jobs_name_the_provider_that_handled_them);

/// `controlValues.skip` (JSON Logic, as the SDKs' step models carry it): the step runs when the
/// condition holds and is skipped (the chain goes on) when it does not; the condition reads the same
/// variables as templates: payload, subscriber, context, actor (looked up by id) and env.
async fn skip_conditions_decide_whether_a_step_runs(app: TestApp) {
    app.subscriber("bob", json!({"firstName": "Bob"})).await;
    workflow(
        &app,
        json!({"name": "Cond", "workflowId": "cond", "steps": [
            {"name": "Pros", "type": "in_app", "controlValues": {"body": "pro {{ payload.plan }}",
             "skip": {"and": [{"==": [{"var": "payload.plan"}, "pro"]},
                              {"!=": [{"var": "payload.plan"}, "{{ not a template"]}]}}},
            {"name": "Everyone", "type": "in_app", "controlValues": {"body": "all {{ payload.plan }}"}},
            {"name": "Acme", "type": "in_app", "controlValues": {"body": "acme {{ payload.plan }}",
             "skip": {"and": [
                {"==": [{"var": "context.tenant.id"}, "acme"]},
                {"==": [{"var": "subscriber.firstName"}, "Ada"]},
                {"==": [{"var": "actor.firstName"}, "Bob"]},
                {"==": [{"var": "env.name"}, "Development"]},
                {"==": [{"var": "subscriber.isOnline"}, false]}
             ]}}}
        ]}),
    )
    .await;
    let trigger = |tx: &str, plan: &str, tenant: &str| {
        json!({"name": "cond", "to": {"subscriberId": "ada", "firstName": "Ada"}, "actor": "bob",
               "context": {"tenant": tenant}, "payload": {"plan": plan}, "transactionId": tx})
    };
    let (status, out) = app
        .post("/v1/events/trigger", trigger("t-free", "free", "other"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let items = settled(&app, "t-free", 1).await;
    assert_eq!(job_statuses(&items[0]), ["skipped", "completed", "skipped"]);
    let skipped = &items[0]["jobs"][0]["executionDetails"];
    let last = skipped.as_array().unwrap().last().unwrap();
    assert_eq!(
        last["detail"],
        "Step skipped: its condition (controlValues.skip) is false"
    );
    let raw: serde_json::Value = serde_json::from_str(last["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw["values"], json!({"payload.plan": "free"}));
    assert_eq!(items[0]["jobs"][0]["step"].get("issues"), None);
    assert_eq!(
        items[0]["jobs"][0]["step"]["controlVariables"]["skip"]["and"][0]["=="][1],
        "pro"
    );

    app.post("/v1/events/trigger", trigger("t-pro", "pro", "acme"))
        .await;
    let items = settled(&app, "t-pro", 1).await;
    assert_eq!(
        job_statuses(&items[0]),
        ["completed", "completed", "completed"]
    );
    let messages = messages_of(&app, "ada").await;
    let mut bodies: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    bodies.sort_unstable();
    assert_eq!(bodies, ["acme pro", "all free", "all pro", "pro pro"]);
}
db_test!(skip_condition, skip_conditions_decide_whether_a_step_runs);
