//! The corpus scenario, part two: triggers producing every engine state a real app meets (every step type
//! delivered, a pending delayed job, a digest, a canceled chain, a skipped step, a failed delivery, a step
//! with an issue), then the activity, the messages and the feed (read, seen, deleted).
//!
//! Each trigger is followed by polling (not recorded) until it reached its state, so the next request sees
//! one fixed state and messages are created in a fixed order.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::scenario::{World, UNKNOWN_ID};
use super::Recorder;
use crate::support::{eventually, settled, TestApp};

fn tx(key: &str) -> String {
    format!("corpus-{key}")
}

/// Notification `_id` by trigger key.
type Notifications = HashMap<&'static str, String>;

pub async fn run(rec: &mut Recorder<'_>, world: &World) {
    let mut ids = Notifications::new();
    deliveries(rec, &mut ids).await;
    states(rec, &mut ids).await;
    trigger_errors(rec).await;
    assert!(
        !world.smtp.mails().is_empty(),
        "the successful email reached the SMTP server"
    );
    activity(rec, &ids).await;
    messages(rec).await;
}

/// Triggers `key` (its transactionId is `corpus-<key>`) and waits until its `count` notifications settled.
async fn trigger(
    rec: &mut Recorder<'_>,
    ids: &mut Notifications,
    key: &'static str,
    mut body: Value,
    count: usize,
) {
    body["transactionId"] = json!(tx(key));
    rec.post("/v1/events/trigger", body).await;
    let items = settled(rec.app, &tx(key), count).await;
    ids.insert(key, id_of(&items[0]));
}

fn id_of(notification: &Value) -> String {
    notification["_id"]
        .as_str()
        .expect("notification _id")
        .to_owned()
}

/// Every step type delivered, the recipient forms, actors, a condition, HTML sanitising, variables.
async fn deliveries(rec: &mut Recorder<'_>, ids: &mut Notifications) {
    trigger(
        rec,
        ids,
        "all-steps",
        json!({"name": "all-steps", "to": "ann", "payload": {"order": "A-7"}}),
        1,
    )
    .await;
    // Every message so far (later lists are filtered: messages of notifications delivered at the same
    // time are created in either order).
    rec.get("/v1/messages?limit=20").await;
    let dan = json!({"subscriberId": "dan", "firstName": "Dan", "email": "dan@example.com",
        "channels": [{"providerId": "push-webhook", "integrationIdentifier": "push-hook",
            "credentials": {"deviceTokens": ["tok-dan"]}}]});
    trigger(
        rec,
        ids,
        "to-object",
        json!({"name": "hello", "to": dan, "payload": {}}),
        1,
    )
    .await;
    rec.get("/v2/subscribers/dan").await;
    let to = json!(["bob", {"subscriberId": "eve", "firstName": "Eve"}]);
    trigger(
        rec,
        ids,
        "to-list",
        json!({"name": "hello", "to": to, "payload": {}}),
        2,
    )
    .await;
    let actor = json!({"subscriberId": "bob"});
    trigger(
        rec,
        ids,
        "actor-object",
        json!({"name": "actor", "to": "ann", "actor": actor}),
        1,
    )
    .await;
    trigger(
        rec,
        ids,
        "actor-string",
        json!({"name": "actor", "to": "ann", "actor": "bob"}),
        1,
    )
    .await;
    let free = json!({"name": "filtered", "to": "ann", "payload": {"plan": "free"}});
    trigger(rec, ids, "filtered", free, 1).await;
    let unsafe_name = json!({"name": "<script>alert(1)</script>Ann"});
    let body = json!({"name": "unsafe", "to": "ann", "payload": unsafe_name});
    trigger(rec, ids, "unsafe", body, 1).await;
    let body = json!({"name": "variables", "to": "ann", "actor": {"subscriberId": "bob"},
        "context": {"tenant": "acme"}, "payload": {}});
    trigger(rec, ids, "variables", body, 1).await;
    let body = json!({"name": "actions", "to": "ann", "payload": {"order": "A-9"}});
    trigger(rec, ids, "actions", body, 1).await;
    trigger(rec, ids, "carl", json!({"name": "hello", "to": "carl"}), 1).await;
    // Without a transactionId: the server makes one.
    let out = rec
        .post("/v1/events/trigger", json!({"name": "hello", "to": "bob"}))
        .await;
    let generated = out["transactionId"].as_str().expect("transactionId");
    settled(rec.app, generated, 1).await;
}

/// The statuses of the jobs of `key`'s first notification, read now.
async fn job_statuses(app: &TestApp, key: &str) -> Vec<String> {
    let (_, page) = app
        .get(&format!("/v1/notifications?transactionId={}", tx(key)))
        .await;
    let page = super::unwrap_data(page);
    page["data"][0]["jobs"]
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .map(|j| j["status"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until `key`'s jobs have `statuses`.
async fn reaches(app: &TestApp, key: &str, statuses: &[&str]) {
    eventually(|| async {
        let now = job_statuses(app, key).await;
        (now == statuses).then_some(())
    })
    .await;
}

/// A pending delayed job, a canceled chain, a digest, a step with an issue, a failed delivery, a bulk.
async fn states(rec: &mut Recorder<'_>, ids: &mut Notifications) {
    // A day's delay: the in-app step ran, the delay waits, the email after it is pending.
    rec.post(
        "/v1/events/trigger",
        json!({"name": "later", "to": "ann", "transactionId": tx("later")}),
    )
    .await;
    reaches(rec.app, "later", &["completed", "queued", "pending"]).await;
    // The same, canceled while it waits.
    rec.post(
        "/v1/events/trigger",
        json!({"name": "later", "to": "bob", "transactionId": tx("canceled")}),
    )
    .await;
    reaches(rec.app, "canceled", &["completed", "queued", "pending"]).await;
    rec.delete(&format!("/v1/events/trigger/{}", tx("canceled")))
        .await;
    rec.delete(&format!("/v1/events/trigger/{}", tx("canceled")))
        .await;
    rec.delete("/v1/events/trigger/corpus-nothing").await;
    for key in ["later", "canceled"] {
        let items = settled_or_now(rec.app, key).await;
        ids.insert(key, items);
    }
    // Three events within the digest's window: the first collects, the other two merge into it.
    for (i, key) in ["digest-0", "digest-1", "digest-2"].into_iter().enumerate() {
        rec.post(
            "/v1/events/trigger",
            json!({"name": "digest", "to": "ann", "payload": {"n": i}, "transactionId": tx(key)}),
        )
        .await;
    }
    for key in ["digest-0", "digest-1", "digest-2"] {
        let items = settled(rec.app, &tx(key), 1).await;
        ids.insert(key, id_of(&items[0]));
    }
    trigger(
        rec,
        ids,
        "no-label",
        json!({"name": "no-label", "to": "ann"}),
        1,
    )
    .await;
    // The integration at the closed port is named in the overrides: no failover, the delivery fails.
    let body = json!({"name": "mail-only", "to": "ann", "payload": {},
        "overrides": {"email": {"integrationIdentifier": "smtp-closed"}}});
    trigger(rec, ids, "failed", body, 1).await;
    rec.post(
        "/v1/events/trigger/bulk",
        json!({"events": [
            {"name": "hello", "to": "bob", "payload": {}, "transactionId": tx("bulk-1")},
            {"name": "hello", "to": {"subscriberId": "ann"}, "payload": {}, "transactionId": tx("bulk-2")}
        ]}),
    )
    .await;
    for key in ["bulk-1", "bulk-2"] {
        let items = settled(rec.app, &tx(key), 1).await;
        ids.insert(key, id_of(&items[0]));
    }
}

/// The `_id` of `key`'s notification, read now (its jobs need not be settled).
async fn settled_or_now(app: &TestApp, key: &str) -> String {
    let (_, page) = app
        .get(&format!("/v1/notifications?transactionId={}", tx(key)))
        .await;
    id_of(&super::unwrap_data(page)["data"][0])
}

/// The trigger routes' 400, 404 and 422 answers.
async fn trigger_errors(rec: &mut Recorder<'_>) {
    let bad = [
        json!({"name": "strict", "to": "ann", "payload": {"name": 7}}),
        json!({"name": "hello", "to": {"subscriberId": "ann",
            "channels": [{"providerId": "expo", "credentials": {"deviceTokens": ["ExponentPushToken[z]"]}}]}}),
        json!({"name": "nope", "to": "ann"}),
        json!({"name": "hello", "to": []}),
        json!({"name": "hello", "to": "ann", "payload": [1]}),
        json!({"to": "ann"}),
    ];
    for body in bad {
        rec.post("/v1/events/trigger", body).await;
    }
    rec.post(
        "/v1/events/trigger/bulk",
        json!({"events": [{"name": "strict", "to": "ann", "payload": {}}]}),
    )
    .await;
    // A bulk answers per event: the refused one `error` with its reason.
    rec.post(
        "/v1/events/trigger/bulk",
        json!({"events": [{"name": "nope", "to": "ann", "transactionId": tx("bulk-nope")}]}),
    )
    .await;
    // Fields Tidings does not implement are refused, naming them.
    rec.post(
        "/v1/events/trigger",
        json!({"name": "hello", "to": "ann", "tenant": "acme", "bridgeUrl": "https://bridge.example.com",
            "overrides": {"severity": "high"}}),
    )
    .await;
    rec.post("/v1/events/trigger/bulk", json!({"events": []}))
        .await;
    rec.post("/v1/events/trigger/bulk", json!({"events": "none"}))
        .await;
}

/// The activity: the whole feed, pages, filters, single notifications in each state, errors.
async fn activity(rec: &mut Recorder<'_>, ids: &Notifications) {
    rec.get("/v1/notifications?limit=50").await;
    rec.get("/v1/notifications?limit=5&page=1").await;
    rec.get("/v1/notifications?channels=email&limit=50").await;
    rec.get("/v1/notifications?subscriberIds=bob&limit=50")
        .await;
    rec.get(&format!(
        "/v1/notifications?transactionId={}",
        tx("to-list")
    ))
    .await;
    for key in [
        "all-steps",
        "later",
        "canceled",
        "digest-0",
        "digest-1",
        "filtered",
        "no-label",
        "failed",
        "bulk-2",
    ] {
        rec.get(&format!("/v1/notifications/{}", ids[key])).await;
    }
    rec.get(&format!("/v1/notifications/{UNKNOWN_ID}")).await;
    rec.get("/v1/notifications/not-an-id").await;
    rec.get("/v1/notifications?limit=500&page=-1").await;
    rec.get("/v1/notifications?after=yesterday").await;
}

/// Messages, the in-app feed, unseen counts, marking, deleting.
async fn messages(rec: &mut Recorder<'_>) {
    rec.get("/v1/messages?subscriberId=ann&channel=in_app&limit=100")
        .await;
    rec.get(&format!(
        "/v1/messages?transactionId={}&channel=email",
        tx("all-steps")
    ))
    .await;
    rec.get(&format!("/v1/messages?transactionId={}", tx("failed")))
        .await;
    rec.get(&format!(
        "/v1/messages?transactionId={}&transactionId={}",
        tx("actor-object"),
        tx("actor-string")
    ))
    .await;
    rec.get("/v1/messages?channel=pager").await;
    let feed = rec
        .get("/v1/subscribers/ann/notifications/feed?limit=100")
        .await;
    rec.get("/v1/subscribers/ann/notifications/feed?limit=2&page=1")
        .await;
    rec.get("/v1/subscribers/nobody/notifications/feed").await;
    rec.get("/v1/subscribers/ann/notifications/unseen?seen=false")
        .await;
    rec.get("/v1/subscribers/ann/notifications/unseen?limit=3")
        .await;
    rec.get("/v1/subscribers/nobody/notifications/unseen").await;
    rec.get("/v1/subscribers/ann/notifications/feed?limit=0")
        .await;
    let item = |i: usize| {
        feed["data"][i]["_id"]
            .as_str()
            .expect("a feed item")
            .to_owned()
    };
    let (first, second) = (item(0), item(1));
    let path = "/v1/subscribers/ann/messages/mark-as";
    rec.post(path, json!({"messageId": first, "markAs": "read"}))
        .await;
    rec.post(
        path,
        json!({"messageId": [first, second], "markAs": "unseen"}),
    )
    .await;
    rec.post(path, json!({"messageId": "x", "markAs": "maybe"}))
        .await;
    rec.post(
        "/v1/subscribers/nobody/messages/mark-as",
        json!({"messageId": first, "markAs": "read"}),
    )
    .await;
    let all = "/v1/subscribers/ann/messages/mark-all";
    rec.post(all, json!({"markAs": "seen"})).await;
    rec.post(all, json!({"markAs": "read"})).await;
    rec.post(all, json!({"markAs": "maybe"})).await;
    rec.post(
        "/v1/subscribers/nobody/messages/mark-all",
        json!({"markAs": "read"}),
    )
    .await;
    rec.get("/v1/subscribers/ann/notifications/unseen?seen=false")
        .await;
    rec.get("/v1/subscribers/ann/notifications/feed?limit=3&read=true")
        .await;
    let bob = rec
        .get(&format!("/v1/messages?transactionId={}", tx("bulk-1")))
        .await;
    let message = bob["data"][0]["_id"]
        .as_str()
        .expect("bob's message")
        .to_owned();
    rec.delete(&format!("/v1/messages/{message}")).await;
    rec.delete(&format!("/v1/messages/{message}")).await;
    rec.delete("/v1/messages/not-an-id").await;
    rec.get(&format!("/v1/messages?transactionId={}", tx("bulk-1")))
        .await;
}
