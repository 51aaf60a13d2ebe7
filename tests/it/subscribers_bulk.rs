//! Bulk subscribers (`POST /v1/subscribers/bulk`), the online flag (`PATCH …/online-status`) and deleting a
//! trigger's messages (`DELETE /v1/messages/transaction/{transactionId}`), on both databases.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, count, send, settled, TestApp};

/// The subscriberIds of one of the answer's lists (`created`, `updated`, `failed`).
fn ids<'a>(out: &'a Value, list: &str) -> Vec<&'a str> {
    out[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list}: {out}"))
        .iter()
        .map(|s| s["subscriberId"].as_str().unwrap_or(""))
        .collect()
}

/// How many subscribers the app's environment holds, counted in the database.
async fn subscribers_of(app: &TestApp) -> i64 {
    count(
        app,
        "select count(*) from subscribers where environment_id = $1",
        app.tenant.environment_id.as_str(),
    )
    .await
}

async fn bulk(app: &TestApp, subscribers: Value) -> Value {
    let (status, out) = app
        .post(
            "/v1/subscribers/bulk",
            json!({ "subscribers": subscribers }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

async fn creates_updates_and_reports_failures(app: TestApp) {
    app.subscriber(
        "old",
        json!({"firstName": "Old", "lastName": "Timer", "email": "old@example.com"}),
    )
    .await;
    let out = bulk(
        &app,
        json!([
            {"subscriberId": "test1", "firstName": "sub1", "email": "sub1@test.co", "data": {"plan": "pro"}},
            {"subscriberId": "test2", "firstName": "sub2", "email": "sub2@test.co"},
            {"subscriberId": "old", "firstName": "New"},
            {"subscriberId": "test2", "lastName": "Second", "email": null},
            {"subscriberId": "bad", "email": "not-an-email"},
            {"subscriberId": "x".repeat(256)},
            {"firstName": "nobody"},
            {"subscriberId": "typed", "firstName": 5},
            "not an object",
        ]),
    )
    .await;
    assert_eq!(ids(&out, "created"), ["test1", "test2"], "{out}");
    assert_eq!(ids(&out, "updated"), ["old", "test2"], "{out}");
    let failed = out["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 5, "{out}");
    assert_eq!(failed[0]["subscriberId"], "bad");
    assert_eq!(failed[0]["message"], "email must be a valid email address");
    assert_eq!(failed[1]["subscriberId"], "x".repeat(256));
    assert_eq!(
        failed[1]["message"],
        "subscriberId must be at most 255 characters"
    );
    assert_eq!(failed[2], json!({"message": "subscriberId is required"}));
    assert_eq!(failed[3].get("subscriberId"), None, "{out}");
    assert!(
        failed[3]["message"]
            .as_str()
            .is_some_and(|m| m.contains("firstName")),
        "{out}"
    );
    assert!(failed[4]["message"].is_string(), "{out}");
    // Only the order of Novu's lists is asserted: the answer names exactly these keys.
    let mut keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["created", "failed", "updated"]);

    // What was written is what the single routes read back; a repeated id took the later fields over.
    let (_, s) = app.get("/v2/subscribers/test1").await;
    assert_eq!(
        (&s["firstName"], &s["email"], &s["data"], &s["__v"]),
        (
            &json!("sub1"),
            &json!("sub1@test.co"),
            &json!({"plan": "pro"}),
            &json!(0)
        )
    );
    let (_, s) = app.get("/v2/subscribers/test2").await;
    assert_eq!(
        (&s["firstName"], &s["lastName"], &s["email"]),
        (&json!("sub2"), &json!("Second"), &Value::Null)
    );
    let (_, s) = app.get("/v2/subscribers/old").await;
    assert_eq!(
        (&s["firstName"], &s["lastName"], &s["email"], &s["__v"]),
        (
            &json!("New"),
            &json!("Timer"),
            &json!("old@example.com"),
            &json!(1)
        )
    );
    for missing in ["bad", "typed"] {
        let (status, _) = app.get(&format!("/v2/subscribers/{missing}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
    }
    // The search index follows: the name search finds the imported and the renamed.
    let (_, page) = app.get("/v2/subscribers?name=sub2%20Second").await;
    assert_eq!(page["data"][0]["subscriberId"], "test2", "{page}");
    let (_, page) = app.get("/v2/subscribers?name=New%20Timer").await;
    assert_eq!(page["data"][0]["subscriberId"], "old", "{page}");
    let (_, page) = app.get("/v2/subscribers?email=sub1@tes").await;
    assert_eq!(page["data"][0]["subscriberId"], "test1", "{page}");

    // Again: nothing is created twice; unchanged subscribers are updated without a write.
    let out = bulk(
        &app,
        json!([{"subscriberId": "test1", "firstName": "sub1"}, {"subscriberId": "test2"}]),
    )
    .await;
    assert_eq!(ids(&out, "created"), Vec::<&str>::new());
    assert_eq!(ids(&out, "updated"), ["test1", "test2"]);
    let (_, s) = app.get("/v2/subscribers/test1").await;
    assert_eq!(s["__v"], 0, "{s}");
    let n = subscribers_of(&app).await;
    assert_eq!(n, 3);

    // A deleted subscriber is created again.
    let (status, _) = app.delete("/v2/subscribers/test1").await;
    assert_eq!(status, StatusCode::OK);
    let out = bulk(&app, json!([{"subscriberId": "test1"}])).await;
    assert_eq!(ids(&out, "created"), ["test1"]);
    // An empty list does nothing.
    let out = bulk(&app, json!([])).await;
    assert_eq!(out, json!({"updated": [], "created": [], "failed": []}));
}
db_test!(
    bulk_creates_updates_and_fails,
    creates_updates_and_reports_failures
);

async fn bounds_and_bad_bodies(app: TestApp) {
    let items: Vec<Value> = (0..501)
        .map(|i| json!({"subscriberId": format!("s{i}")}))
        .collect();
    let (status, out) = app
        .post("/v1/subscribers/bulk", json!({ "subscribers": items }))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_error(&out, 400);
    assert_eq!(
        out["message"],
        "subscribers must contain no more than 500 elements, got 501"
    );
    let n = subscribers_of(&app).await;
    assert_eq!(n, 0, "nothing of a refused request is written");

    // 500 is the most, and all of them are written.
    let out = bulk(&app, Value::Array(items[..500].to_vec())).await;
    assert_eq!(out["created"].as_array().unwrap().len(), 500);
    assert_eq!(out["created"][499]["subscriberId"], "s499");

    for body in [
        json!({}),
        json!({"subscribers": "x"}),
        json!({"subscribers": null}),
    ] {
        let (status, out) = app.post("/v1/subscribers/bulk", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {out}");
        assert_error(&out, 422);
        assert!(out["errors"]["subscribers"].is_object(), "{out}");
    }
}
db_test!(bulk_bounds, bounds_and_bad_bodies);

/// Concurrent bulk requests over the same subscriberIds: each id is created once, by one of them, and
/// every request reports every id as created or updated.
async fn concurrent_bulks_never_duplicate(app: TestApp) {
    let items: Vec<Value> = (0..200)
        .map(|i| json!({"subscriberId": format!("c{i:03}"), "firstName": format!("F{i}")}))
        .collect();
    let mut tasks = Vec::new();
    for k in 0..4 {
        let mut mine = items.clone();
        // Each request in its own order, with a field of its own.
        mine.rotate_left(k * 50);
        for m in &mut mine {
            m["lastName"] = json!(format!("L{k}"));
        }
        let req = app
            .req(Method::POST, "/v1/subscribers/bulk")
            .json(&json!({ "subscribers": mine }));
        tasks.push(tokio::spawn(send(req)));
    }
    let mut created = 0;
    for t in tasks {
        let (status, out) = t.await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{out}");
        assert_eq!(out["failed"], json!([]), "{out}");
        let c = out["created"].as_array().unwrap().len();
        assert_eq!(c + out["updated"].as_array().unwrap().len(), 200, "{out}");
        created += c;
    }
    assert_eq!(
        created, 200,
        "each subscriber created by exactly one request"
    );
    let n = subscribers_of(&app).await;
    assert_eq!(n, 200);
    // Every subscriber holds one request's whole write: the first name given by all, a last name of one.
    let (_, s) = app.get("/v2/subscribers/c007").await;
    assert_eq!(s["firstName"], "F7");
    assert!(
        s["lastName"].as_str().is_some_and(|l| l.starts_with('L')),
        "{s}"
    );
}
db_test!(bulk_concurrent, concurrent_bulks_never_duplicate);

async fn tenants_are_isolated(app: TestApp) {
    app.subscriber("shared", json!({"firstName": "Mine"})).await;
    let other = app.second_environment("Other").await;
    let (status, out) = send(
        app.req_as(&other, Method::POST, "/v1/subscribers/bulk")
            .json(&json!({"subscribers": [{"subscriberId": "shared", "firstName": "Theirs"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(
        ids(&out, "created"),
        ["shared"],
        "another environment's id is new"
    );
    let (_, s) = app.get("/v2/subscribers/shared").await;
    assert_eq!(s["firstName"], "Mine");

    let (status, out) = send(
        app.req_as(
            &other,
            Method::PATCH,
            "/v1/subscribers/nobody-here/online-status",
        )
        .json(&json!({"isOnline": true})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    app.subscriber("only-mine", json!({})).await;
    let (status, _) = send(
        app.req_as(
            &other,
            Method::PATCH,
            "/v1/subscribers/only-mine/online-status",
        )
        .json(&json!({"isOnline": true})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, s) = app.get("/v2/subscribers/only-mine").await;
    assert_eq!(s["isOnline"], Value::Null);
}
db_test!(bulk_tenants, tenants_are_isolated);

async fn online_status(app: TestApp) {
    let created = app.subscriber("ann", json!({"firstName": "Ann"})).await;
    let path = "/v1/subscribers/ann/online-status";
    let (status, on) = app.patch(path, json!({"isOnline": true})).await;
    assert_eq!(status, StatusCode::OK, "{on}");
    assert_eq!(on["isOnline"], true);
    assert_eq!(
        on["lastOnlineAt"],
        Value::Null,
        "going online records no time"
    );
    assert_eq!(on["__v"], 1);
    assert_eq!(on["firstName"], "Ann");
    assert_eq!(on["_id"], created["_id"]);
    let (status, off) = app.patch(path, json!({"isOnline": false})).await;
    assert_eq!(status, StatusCode::OK, "{off}");
    assert_eq!(off["isOnline"], false);
    let at = off["lastOnlineAt"].as_str().unwrap();
    assert!(at >= on["updatedAt"].as_str().unwrap(), "{off}");
    assert_eq!(off["__v"], 2);
    let (status, back) = app.patch(path, json!({"isOnline": true})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(back["lastOnlineAt"], at, "the last time offline is kept");
    let (_, got) = app.get("/v2/subscribers/ann").await;
    assert_eq!(got, back);
    // The flag set through the API has no socket heartbeat: the sweep of stale sockets leaves it.
    let n = count(
        &app,
        "select count(*) from subscribers where subscriber_id = $1 and online_heartbeat is null",
        "ann",
    )
    .await;
    assert_eq!(n, 1);

    let (status, out) = app
        .patch(
            "/v1/subscribers/nobody/online-status",
            json!({"isOnline": true}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    for body in [json!({}), json!({"isOnline": "yes"})] {
        let (status, out) = app.patch(path, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
        assert!(out["errors"]["isOnline"].is_object(), "{out}");
    }
}
db_test!(subscriber_online_status, online_status);

/// Triggers the one-step in-app workflow `news` to `to` under `transaction_id` and waits for it.
async fn trigger(app: &TestApp, to: Value, transaction_id: &str, notifications: usize) {
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "news", "to": to, "transactionId": transaction_id}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    settled(app, transaction_id, notifications).await;
}

async fn messages_of(app: &TestApp, transaction_id: &str) -> usize {
    let (status, page) = app
        .get(&format!("/v1/messages?transactionId={transaction_id}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["data"].as_array().unwrap().len()
}

async fn delete_by_transaction(app: TestApp) {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "News", "workflowId": "news", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "News"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    trigger(&app, json!(["ann", "bob"]), "tx-1", 2).await;
    trigger(&app, json!("ann"), "tx-2", 1).await;
    assert_eq!(messages_of(&app, "tx-1").await, 2);

    // Another environment's key finds nothing of this one's.
    let other = app.second_environment("Other").await;
    let (status, out) =
        send(app.req_as(&other, Method::DELETE, "/v1/messages/transaction/tx-1")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_eq!(messages_of(&app, "tx-1").await, 2);

    // A channel without messages of the transaction: 404, nothing deleted.
    let (status, out) = app
        .delete("/v1/messages/transaction/tx-1?channel=email")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    assert_eq!(out["message"], "Invalid transactionId or channel");
    assert_eq!(messages_of(&app, "tx-1").await, 2);
    let (status, out) = app
        .delete("/v1/messages/transaction/tx-1?channel=fax")
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert!(out["errors"]["channel"].is_object(), "{out}");

    // With the channel: every message of the transaction on it, of every subscriber.
    let (status, out) = app
        .delete("/v1/messages/transaction/tx-1?channel=in_app")
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(out, Value::Null);
    assert_eq!(messages_of(&app, "tx-1").await, 0);
    assert_eq!(
        messages_of(&app, "tx-2").await,
        1,
        "another transaction's stay"
    );
    let (_, feed) = app.get("/v1/subscribers/bob/notifications/feed").await;
    assert_eq!(feed["data"], json!([]), "{feed}");
    // Deleted already: nothing left to delete.
    let (status, _) = app.delete("/v1/messages/transaction/tx-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Without a channel.
    let (status, _) = app.delete("/v1/messages/transaction/tx-2").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(messages_of(&app, "tx-2").await, 0);
    let (status, _) = app.delete("/v1/messages/transaction/never").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(messages_delete_by_transaction, delete_by_transaction);
