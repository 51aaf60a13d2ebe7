//! The v2 subscriber notifications (`/v2/subscribers/{subscriberId}/notifications…`, issue 38) and the v1
//! message action (`POST /v1/subscribers/{subscriberId}/messages/{messageId}/actions/{type}`) over HTTP
//! with the API key: the Inbox's semantics for the subscriber in the path — the list's filters and cursor,
//! several counts at once, every change and its effect, the bulk routes, the context, the errors (unknown
//! subscriber or notification, another subscriber's or another environment's, bad filters) and the
//! announcement of every change to the subscriber's open Inbox socket. `tests/sdk/notifications_v2.py` and
//! `tests/sdk-ts/notifications_v2.mjs` drive the same routes through both SDKs.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::inbox::bodies;
use crate::inbox_sockets::{dial, session, with_token};
use crate::support::{assert_error, send, settled, TestApp};

const ANN: &str = "/v2/subscribers/ann/notifications";

/// `alerts` (high severity, tags `ops`, two buttons) and `news` (tags `news`), and the subscribers ann and
/// bob.
async fn setup(app: &TestApp) {
    for body in [
        json!({"name": "Alerts", "workflowId": "alerts", "severity": "high", "tags": ["ops"], "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"subject": "Alert", "body": "Alert {{payload.n}}",
             "data": {"kind": "alert"},
             "primaryAction": {"label": "Open", "redirect": {"url": "https://x.test/a"}},
             "secondaryAction": {"label": "Dismiss"}}}]}),
        json!({"name": "News", "workflowId": "news", "tags": ["news"], "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "News {{payload.n}}", "data": {"kind": "news"}}}]}),
    ] {
        let (status, out) = app.post("/v2/workflows", body).await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
    for id in ["ann", "bob"] {
        let (status, out) = app
            .post("/v2/subscribers", json!({"subscriberId": id}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
}

/// Triggers `workflow` for `to` with `payload.n = n` (and `context` when not null) and waits until it
/// settles.
async fn trigger(app: &TestApp, workflow: &str, to: &str, n: i64, context: Value) {
    let tx = format!("{workflow}-{to}-{n}");
    let mut body = json!({"name": workflow, "to": to, "payload": {"n": n}, "transactionId": tx});
    if !context.is_null() {
        body["context"] = context;
    }
    let (status, out) = app.post("/v1/events/trigger", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    settled(app, &tx, 1).await;
}

/// The page of ann's notifications `query` selects (200 expected).
async fn list(app: &TestApp, query: &str) -> Value {
    let (status, page) = app.get(&format!("{ANN}?{query}")).await;
    assert_eq!(status, StatusCode::OK, "{query}: {page}");
    page
}

/// The id of ann's notification whose body is `body`.
async fn id_of(app: &TestApp, body: &str) -> String {
    let page = list(app, "limit=100").await;
    let found = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["body"] == body);
    found.unwrap_or_else(|| panic!("{body} in {page}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// ann's counts of `filters` (a JSON array).
async fn counts(app: &TestApp, filters: Value) -> Vec<i64> {
    let q = urlencoding(&filters.to_string());
    let (status, out) = app.get(&format!("{ANN}/count?filters={q}")).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let data = out["data"].as_array().unwrap_or_else(|| panic!("{out}"));
    for (item, filter) in data.iter().zip(filters.as_array().unwrap()) {
        assert_eq!(&item["filter"], filter, "{out}");
    }
    data.iter().map(|c| c["count"].as_i64().unwrap()).collect()
}

fn urlencoding(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A PATCH on one of ann's notifications; answers the status and body.
async fn patch(app: &TestApp, path: &str, body: Value) -> (StatusCode, Value) {
    app.patch(&format!("{ANN}/{path}"), body).await
}

async fn list_and_filters(app: TestApp) {
    setup(&app).await;
    trigger(&app, "alerts", "ann", 1, Value::Null).await;
    trigger(&app, "news", "ann", 2, Value::Null).await;
    trigger(&app, "alerts", "bob", 3, Value::Null).await;

    let page = list(&app, "").await;
    assert_eq!(bodies(&page), ["News 2", "Alert 1"], "{page}");
    assert_eq!(page["hasMore"], false);
    assert_eq!(page["filter"], json!({}));
    let alert = &page["data"][1];
    assert_eq!(alert["to"]["subscriberId"], "ann");
    assert_eq!(alert["severity"], "high");
    assert_eq!(alert["channelType"], "in_app");
    assert_eq!(alert["tags"], json!(["ops"]));
    assert_eq!(alert["data"], json!({"kind": "alert"}));
    assert_eq!(
        alert["primaryAction"],
        json!({"label": "Open", "isCompleted": false, "redirect": {"url": "https://x.test/a"}})
    );
    assert_eq!(
        alert["secondaryAction"],
        json!({"label": "Dismiss", "isCompleted": false})
    );
    assert_eq!(
        (alert["isRead"].clone(), alert["isSeen"].clone()),
        (json!(false), json!(false))
    );

    // The cursor: a page of one, then after it.
    let first = list(&app, "limit=1").await;
    assert_eq!(bodies(&first), ["News 2"]);
    assert_eq!(first["hasMore"], true);
    let after = first["data"][0]["id"].as_str().unwrap();
    let next = list(&app, &format!("limit=1&after={after}")).await;
    assert_eq!(bodies(&next), ["Alert 1"]);
    assert_eq!(next["hasMore"], false);
    assert_eq!(bodies(&list(&app, "limit=1&offset=1").await), ["Alert 1"]);

    // Filters, alone and together; the filter is echoed.
    let tagged = list(&app, "tags[]=ops").await;
    assert_eq!(bodies(&tagged), ["Alert 1"]);
    assert_eq!(tagged["filter"], json!({"tags": ["ops"]}));
    assert_eq!(bodies(&list(&app, "severity=high").await), ["Alert 1"]);
    assert_eq!(
        bodies(&list(&app, "severity=high&severity=none").await),
        ["News 2", "Alert 1"]
    );
    let data = urlencoding(r#"{"kind":"news"}"#);
    assert_eq!(
        bodies(&list(&app, &format!("data={data}")).await),
        ["News 2"]
    );
    assert!(bodies(&list(&app, "read=true").await).is_empty());
    assert_eq!(
        bodies(&list(&app, "read=false&seen=false&archived=false&snoozed=false").await),
        ["News 2", "Alert 1"]
    );
    let now = chrono::Utc::now().timestamp_millis();
    assert!(bodies(&list(&app, &format!("createdGte={}", now + 60_000)).await).is_empty());
    assert_eq!(
        bodies(&list(&app, &format!("createdLte={}", now + 60_000)).await).len(),
        2
    );

    // Several counts at once, each with its filter.
    let filters =
        json!([{}, {"read": false}, {"tags": ["ops"]}, {"seen": true}, {"severity": ["high"]}]);
    assert_eq!(counts(&app, filters).await, [2, 2, 1, 0, 1]);

    // Bad input: 422 with Novu's validation shape; unread and archived: 400.
    for query in [
        "read=maybe",
        "limit=0",
        "limit=101",
        "severity=urgent",
        "data=%7Bnope",
        "contextKeys=nokey",
        "createdGte=x",
    ] {
        let (status, out) = app.get(&format!("{ANN}?{query}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{query}: {out}");
        assert_error(&out, 422);
    }
    let (status, out) = app.get(&format!("{ANN}?read=false&archived=true")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    for filters in ["x", "%7B%7D", "%5B1%5D", "%5B%7B%22read%22%3A1%7D%5D"] {
        let (status, out) = app.get(&format!("{ANN}/count?filters={filters}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{filters}: {out}");
        assert_error(&out, 422);
    }
    let many = urlencoding(&Value::Array(vec![json!({}); 31]).to_string());
    let (status, out) = app.get(&format!("{ANN}/count?filters={many}")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");

    // An unknown subscriber, and ann seen from another environment: 404.
    let (status, out) = app.get("/v2/subscribers/nobody/notifications").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    let (status, out) = app
        .get("/v2/subscribers/nobody/notifications/count?filters=%5B%7B%7D%5D")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let other = app.second_environment("Other").await;
    for path in [ANN.to_owned(), format!("{ANN}/count?filters=%5B%7B%7D%5D")] {
        let (status, out) = send(app.req_as(&other, Method::GET, &path)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {out}");
    }
}
db_test!(subscriber_notifications_list, list_and_filters);

async fn changes(app: TestApp) {
    setup(&app).await;
    trigger(&app, "alerts", "ann", 1, Value::Null).await;
    trigger(&app, "news", "ann", 2, Value::Null).await;
    trigger(&app, "alerts", "bob", 3, Value::Null).await;
    let alert = id_of(&app, "Alert 1").await;
    let news = id_of(&app, "News 2").await;

    let (status, out) = patch(&app, &format!("{alert}/read"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let n = &out["data"];
    assert_eq!(
        (n["id"].as_str(), n["isRead"].clone(), n["isSeen"].clone()),
        (Some(alert.as_str()), json!(true), json!(true))
    );
    assert!(n["readAt"].is_string(), "{out}");
    let (status, out) = patch(&app, &format!("{alert}/unread"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        (out["data"]["isRead"].clone(), out["data"]["readAt"].clone()),
        (json!(false), Value::Null)
    );
    let (status, out) = patch(&app, &format!("{alert}/archive"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["data"]["isArchived"], true);
    assert!(out["data"]["archivedAt"].is_string(), "{out}");
    assert_eq!(bodies(&list(&app, "archived=true").await), ["Alert 1"]);
    let (status, out) = patch(&app, &format!("{alert}/unarchive"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        (
            out["data"]["isArchived"].clone(),
            out["data"]["archivedAt"].clone()
        ),
        (json!(false), Value::Null)
    );

    let until = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let (status, out) = patch(
        &app,
        &format!("{news}/snooze"),
        json!({"snoozeUntil": until}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["data"]["isSnoozed"], true);
    assert!(out["data"]["snoozedUntil"].is_string(), "{out}");
    assert_eq!(bodies(&list(&app, "snoozed=true").await), ["News 2"]);
    assert_eq!(bodies(&list(&app, "snoozed=false").await), ["Alert 1"]);
    let (status, out) = patch(&app, &format!("{news}/unsnooze"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["data"]["isSnoozed"], false);
    let (status, out) = patch(
        &app,
        &format!("{news}/snooze"),
        json!({"snoozeUntil": "soon"}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    let past = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    let (status, out) = patch(
        &app,
        &format!("{news}/snooze"),
        json!({"snoozeUntil": past}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");

    for (kind, other) in [("primary", "secondary"), ("secondary", "primary")] {
        let field = format!("{kind}Action");
        let (status, out) =
            patch(&app, &format!("{alert}/actions/{kind}/complete"), json!({})).await;
        assert_eq!(status, StatusCode::OK, "{out}");
        assert_eq!(out["data"][&field]["isCompleted"], true, "{out}");
        assert_eq!(
            out["data"][format!("{other}Action")]["isCompleted"],
            false,
            "{out}"
        );
        let (status, out) = patch(&app, &format!("{alert}/actions/{kind}/revert"), json!({})).await;
        assert_eq!(status, StatusCode::OK, "{out}");
        assert_eq!(out["data"][&field]["isCompleted"], false, "{out}");
    }
    let (status, out) = patch(
        &app,
        &format!("{alert}/actions/tertiary/complete"),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_error(&out, 422);

    // Unknown, another subscriber's, another environment's: 404 on every route.
    let bob = {
        let (status, page) = app.get("/v2/subscribers/bob/notifications").await;
        assert_eq!(status, StatusCode::OK, "{page}");
        page["data"][0]["id"].as_str().unwrap().to_owned()
    };
    let other = app.second_environment("Other").await;
    for id in ["0123456789abcdef01234567", bob.as_str(), "nope"] {
        for route in [
            "read",
            "unread",
            "archive",
            "unarchive",
            "unsnooze",
            "actions/primary/complete",
            "actions/primary/revert",
        ] {
            let (status, out) = patch(&app, &format!("{id}/{route}"), json!({})).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{id}/{route}: {out}");
            assert_error(&out, 404);
        }
        let (status, out) =
            patch(&app, &format!("{id}/snooze"), json!({"snoozeUntil": until})).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
        let (status, out) = app.delete(&format!("{ANN}/{id}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    }
    for (method, route) in [
        (Method::PATCH, format!("{alert}/read")),
        (Method::DELETE, alert.clone()),
    ] {
        let (status, out) = send(
            app.req_as(&other, method, &format!("{ANN}/{route}"))
                .json(&json!({})),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{route}: {out}");
    }
    let (status, out) = app
        .patch(
            &format!("/v2/subscribers/nobody/notifications/{alert}/read"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    // Nothing of those changed bob's notification.
    let (_, page) = app
        .get("/v2/subscribers/bob/notifications?read=false")
        .await;
    assert_eq!(bodies(&page), ["Alert 3"]);

    // Deleted: gone from the list, then a 404.
    let (status, out) = app.delete(&format!("{ANN}/{news}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(bodies(&list(&app, "").await), ["Alert 1"]);
    let (status, _) = app.delete(&format!("{ANN}/{news}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(subscriber_notifications_changes, changes);

async fn bulk(app: TestApp) {
    setup(&app).await;
    for n in 1..=2 {
        trigger(&app, "alerts", "ann", n, Value::Null).await;
    }
    trigger(&app, "news", "ann", 3, Value::Null).await;
    trigger(&app, "news", "bob", 4, Value::Null).await;
    let one = id_of(&app, "Alert 1").await;
    let app = &app;
    let post = |path: &str, body: Value| {
        let path = format!("{ANN}/{path}");
        async move { app.post(&path, body).await }
    };

    // Seen: the ids named, else what the filter selects.
    let (status, out) = post("seen", json!({"notificationIds": [one]})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(
        counts(app, json!([{"seen": true}, {"seen": false}])).await,
        [1, 2]
    );
    let (status, out) = post("seen", json!({"tags": ["news"]})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(counts(app, json!([{"seen": true}])).await, [2]);
    // Read, by data.
    let (status, out) = post("read", json!({"data": r#"{"kind":"alert"}"#})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(
        counts(app, json!([{"read": true}, {"read": false}])).await,
        [2, 1]
    );
    // Archive the read ones, then every one.
    let (status, out) = post("read-archive", json!({})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(
        bodies(&list(app, "archived=true").await),
        ["Alert 2", "Alert 1"]
    );
    let (status, out) = post("archive", json!({})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(counts(app, json!([{"archived": true}])).await, [3]);
    // Delete by tag, then the rest.
    let (status, out) = post("delete", json!({"tags": ["news"]})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(
        bodies(&list(app, "archived=true").await),
        ["Alert 2", "Alert 1"]
    );
    let (status, out) = post("delete", json!({})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert!(bodies(&list(app, "").await).is_empty());
    // Bob's were never touched.
    let (_, page) = app
        .get("/v2/subscribers/bob/notifications?read=false&seen=false")
        .await;
    assert_eq!(bodies(&page), ["News 4"]);

    // Bad bodies: 422; an unknown subscriber and another environment's: 404.
    let ids: Vec<String> = (0..101).map(|i| format!("{i:024x}")).collect();
    for (path, body) in [
        ("seen", json!({"notificationIds": ids})),
        ("read", json!({"tags": 5})),
        ("archive", json!({"data": "{nope"})),
        ("delete", json!({"contextKeys": ["nokey"]})),
        ("read-archive", json!({"contextKeys": "tenant:a"})),
    ] {
        let (status, out) = post(path, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {out}");
        assert_error(&out, 422);
    }
    let other = app.second_environment("Other").await;
    for path in ["seen", "read", "archive", "read-archive", "delete"] {
        let (status, out) = app
            .post(
                &format!("/v2/subscribers/nobody/notifications/{path}"),
                json!({}),
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {out}");
        let (status, out) = send(
            app.req_as(&other, Method::POST, &format!("{ANN}/{path}"))
                .json(&json!({})),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {out}");
    }
}
db_test!(subscriber_notifications_bulk, bulk);

/// `contextKeys` narrows every route to the messages of exactly that context; without it, every context.
async fn contexts(app: TestApp) {
    setup(&app).await;
    trigger(&app, "news", "ann", 1, json!({"tenant": "acme"})).await;
    trigger(&app, "news", "ann", 2, Value::Null).await;
    assert_eq!(bodies(&list(&app, "").await), ["News 2", "News 1"]);
    assert_eq!(
        bodies(&list(&app, "contextKeys=tenant:acme").await),
        ["News 1"]
    );
    assert_eq!(bodies(&list(&app, "contextKeys=").await), ["News 2"]);
    assert!(bodies(&list(&app, "contextKeys=tenant:other").await).is_empty());
    let (status, out) = app
        .get(&format!(
            "{ANN}/count?filters=%5B%7B%7D%5D&contextKeys=tenant:acme"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["data"][0]["count"], 1);
    let acme = id_of(&app, "News 1").await;
    let (status, out) = patch(
        &app,
        &format!("{acme}/read?contextKeys=tenant:other"),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let (status, out) = patch(
        &app,
        &format!("{acme}/read?contextKeys=tenant:acme"),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let (status, out) = app
        .post(
            &format!("{ANN}/archive"),
            json!({"contextKeys": ["tenant:acme"]}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(bodies(&list(&app, "archived=true").await), ["News 1"]);
    assert_eq!(bodies(&list(&app, "archived=false").await), ["News 2"]);
}
db_test!(subscriber_notifications_contexts, contexts);

/// `POST /v1/subscribers/{id}/messages/{messageId}/actions/{type}`: the action's status and payload, seen
/// by the message and by the v2 list; its errors.
async fn message_action(app: TestApp) {
    setup(&app).await;
    trigger(&app, "alerts", "ann", 1, Value::Null).await;
    trigger(&app, "alerts", "bob", 2, Value::Null).await;
    let id = id_of(&app, "Alert 1").await;
    let path = |who: &str, id: &str, kind: &str| {
        format!("/v1/subscribers/{who}/messages/{id}/actions/{kind}")
    };

    let (status, out) = app
        .post(
            &path("ann", &id, "primary"),
            json!({"status": "done", "payload": {"rating": 5}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let m = &out; // a single body: bare in the `spec` profile
    assert_eq!(m["_id"], id.as_str());
    assert_eq!(m["cta"]["action"]["status"], "done");
    assert_eq!(
        m["cta"]["action"]["result"],
        json!({"type": "primary", "payload": {"rating": 5}})
    );
    assert_eq!(m["cta"]["action"]["buttons"][0]["content"], "Open");
    let page = list(&app, "").await;
    assert_eq!(
        page["data"][0]["primaryAction"]["isCompleted"], true,
        "{page}"
    );
    let (status, out) = app
        .post(&path("ann", &id, "primary"), json!({"status": "pending"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["cta"]["action"]["status"], "pending");
    assert_eq!(
        out["cta"]["action"]["result"],
        json!({"type": "primary", "payload": {}})
    );
    assert_eq!(
        list(&app, "").await["data"][0]["primaryAction"]["isCompleted"],
        false
    );

    for (kind, body) in [
        ("primary", json!({"status": "clicked"})),
        ("primary", json!({})),
        ("primary", json!({"status": "done", "payload": [1]})),
        ("tertiary", json!({"status": "done"})),
    ] {
        let (status, out) = app.post(&path("ann", &id, kind), body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{kind}: {out}");
        assert_error(&out, 422);
    }
    let bob = {
        let (_, page) = app.get("/v2/subscribers/bob/notifications").await;
        page["data"][0]["id"].as_str().unwrap().to_owned()
    };
    let done = json!({"status": "done"});
    for p in [
        path("nobody", &id, "primary"),
        path("ann", &bob, "primary"),
        path("ann", "0123456789abcdef01234567", "primary"),
    ] {
        let (status, out) = app.post(&p, done.clone()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{p}: {out}");
        assert_error(&out, 404);
    }
    let other = app.second_environment("Other").await;
    let (status, out) = send(
        app.req_as(&other, Method::POST, &path("ann", &id, "primary"))
            .json(&done),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
}
db_test!(subscriber_message_action, message_action);

/// Every change the v2 routes make reaches the subscriber's open Inbox socket (the store announces it):
/// read, unread, archive, unarchive, snooze, unsnooze, bulk seen, read, archive and delete, and a delete.
/// Each step moves a count, so the count heard is this step's.
async fn changes_reach_the_socket(app: TestApp) {
    setup(&app).await;
    let token = session(&app.client, &app.base, &app.application_identifier, "ann").await;
    let mut ws = dial(&app.base, &with_token(&token), None).await.unwrap();
    assert!(ws.join("").await.starts_with("40"));
    trigger(&app, "news", "ann", 1, Value::Null).await;
    let first = ws.received("News 1").await;
    ws.counts(1, 1).await;
    trigger(&app, "news", "ann", 2, Value::Null).await;
    let second = ws.received("News 2").await;
    ws.counts(2, 2).await;

    let ok = |status: StatusCode, out: &Value| assert!(status.is_success(), "{status} {out}");
    // Seen (bulk, by id then all): from here on nothing is unseen, so each step moves the unread count.
    let (status, out) = app
        .post(&format!("{ANN}/seen"), json!({"notificationIds": [first]}))
        .await;
    ok(status, &out);
    ws.counts(1, 2).await;
    let (status, out) = app.post(&format!("{ANN}/seen"), json!({})).await;
    ok(status, &out);
    ws.counts(0, 2).await;
    let steps: [(&str, &str, i64); 14] = [
        ("PATCH", "first/read", 1),
        ("PATCH", "first/unread", 2),
        ("PATCH", "second/archive", 1),
        ("PATCH", "second/unarchive", 1),
        ("PATCH", "second/unread", 2),
        ("PATCH", "second/snooze", 1),
        ("PATCH", "second/unsnooze", 2),
        ("POST", "read", 0),
        ("PATCH", "first/unread", 1),
        ("POST", "archive", 0),
        ("PATCH", "first/unarchive", 0),
        ("PATCH", "first/unread", 1),
        ("DELETE", "first", 0),
        ("POST", "delete", 0),
    ];
    let until = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    for (method, route, unread) in steps {
        let route = route.replace("first", &first).replace("second", &second);
        let path = format!("{ANN}/{route}");
        let body = json!({"snoozeUntil": until});
        let (status, out) = match method {
            "PATCH" => app.patch(&path, body).await,
            "POST" => app.post(&path, json!({})).await,
            _ => app.delete(&path).await,
        };
        ok(status, &out);
        if route.ends_with("unarchive") {
            continue; // read when archived: the counts stay
        }
        if method == "POST" && route == "delete" {
            // Nothing left but the second one, archived and read: the counts stay; it is gone from the list.
            assert!(bodies(&list(&app, "").await).is_empty());
            continue;
        }
        ws.counts(0, unread).await;
    }
}
db_test!(
    subscriber_notifications_reach_the_socket,
    changes_reach_the_socket
);
