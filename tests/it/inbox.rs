//! The Inbox API (issue 24) over HTTP: sessions (identifier, HMAC, upsert), the bearer token's scope, the
//! notification list's filters and cursor, every action and its effect on lists and counts, the bulk routes,
//! preferences, and CORS. `tests/sdk-ts/inbox.mjs` drives the same routes through `@novu/js`.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, send, settled, TestApp};

/// Opens a session for `subscriber` in the environment `identifier`; answers the status and body.
async fn open(app: &TestApp, body: Value) -> (StatusCode, Value) {
    send(app.client.post(app.url("/v1/inbox/session")).json(&body)).await
}

/// A session's token (the session must open).
async fn token(app: &TestApp, subscriber: &str) -> String {
    let (status, out) = open(
        app,
        json!({"applicationIdentifier": app.application_identifier, "subscriber": {"subscriberId": subscriber}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out["data"]["token"].as_str().unwrap().to_owned()
}

/// A request with `Authorization: Bearer <token>`: to an Inbox route with a session's token (or to a Svix route
/// with an API key, `webhooks`).
pub(crate) async fn call(
    app: &TestApp,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = app
        .client
        .request(method, app.url(path))
        .bearer_auth(token)
        .header("content-type", "application/json");
    if let Some(b) = body {
        req = req.json(&b);
    }
    send(req).await
}

fn hmac(key: &str, subscriber: &str) -> String {
    tidings::crypto::hmac_sha256_hex(key, &[subscriber.as_bytes()])
}

/// `alerts` (high severity, tags `ops`, two buttons) and `news` (tags `news`).
async fn workflows(app: &TestApp) {
    for body in [
        json!({"name": "Alerts", "workflowId": "alerts", "severity": "high", "tags": ["ops"], "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"subject": "Alert", "body": "Alert {{payload.n}}",
             "data": {"n": "{{payload.n}}", "kind": "alert"},
             "primaryAction": {"label": "Open", "redirect": {"url": "https://x.test/a/{{payload.n}}"}},
             "secondaryAction": {"label": "Dismiss"}}}]}),
        json!({"name": "News", "workflowId": "news", "tags": ["news"], "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "News {{payload.n}}", "data": {"kind": "news"}}}]}),
    ] {
        let (status, out) = app.post("/v2/workflows", body).await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
}

/// Triggers `workflow` for `to` with `payload.n = n` and waits until it settles.
async fn trigger(app: &TestApp, workflow: &str, to: &str, n: i64) {
    let tx = format!("{workflow}-{to}-{n}");
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": workflow, "to": to, "payload": {"n": n}, "transactionId": tx}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    settled(app, &tx, 1).await;
}

pub(crate) fn bodies(page: &Value) -> Vec<&str> {
    page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"))
        .iter()
        .map(|n| n["body"].as_str().unwrap())
        .collect()
}

async fn sessions(app: TestApp) {
    // Unknown or missing identifier.
    let (status, out) = open(
        &app,
        json!({"applicationIdentifier": "nope", "subscriber": "ann"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_eq!(
        out["message"],
        "Please provide a valid application identifier"
    );
    let (status, out) = open(&app, json!({"subscriber": "ann"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    let (status, out) = open(
        &app,
        json!({"applicationIdentifier": app.application_identifier}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");

    // No in-app integration at all: Novu's default (HMAC off). The subscriber is created with its profile.
    let (status, out) = open(
        &app,
        json!({"applicationIdentifier": app.application_identifier,
               "subscriber": {"subscriberId": "ann", "firstName": "Ann", "email": "ann@x.test"}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let s = &out["data"];
    assert_eq!(
        s["unreadCount"],
        json!({"total": 0, "severity": {"high": 0, "medium": 0, "low": 0, "none": 0}})
    );
    assert_eq!(s["totalUnreadCount"], 0);
    assert_eq!(s["removeNovuBranding"], true);
    assert_eq!(
        s["applicationIdentifier"],
        app.application_identifier.as_str()
    );
    assert!(s["token"].as_str().unwrap().len() > 40, "{s}");
    let (_, ann) = app.get("/v2/subscribers/ann").await;
    assert_eq!(
        (ann["firstName"].as_str(), ann["email"].as_str()),
        (Some("Ann"), Some("ann@x.test")),
        "{ann}"
    );

    // Without a valid HMAC a session does not rewrite an existing profile.
    let (status, _) = open(
        &app,
        json!({"applicationIdentifier": app.application_identifier,
               "subscriber": {"subscriberId": "ann", "firstName": "Mallory"}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, ann) = app.get("/v2/subscribers/ann").await;
    assert_eq!(ann["firstName"], "Ann", "{ann}");
    // With one it does.
    let (status, _) = open(
        &app,
        json!({"applicationIdentifier": app.application_identifier, "subscriberHash": hmac(&app.key, "ann"),
               "subscriber": {"subscriberId": "ann", "firstName": "Annie"}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, ann) = app.get("/v2/subscribers/ann").await;
    assert_eq!(ann["firstName"], "Annie", "{ann}");

    // An in-app integration that asks for an HMAC.
    let integration = app
        .integration(json!({"providerId": "novu", "channel": "in_app", "credentials": {"hmac": true}, "active": true}))
        .await;
    for hash in [
        None,
        Some("00".repeat(32)),
        Some(hmac(&app.key, "bob")),
        Some("zz".into()),
    ] {
        let mut body =
            json!({"applicationIdentifier": app.application_identifier, "subscriber": "ann"});
        if let Some(h) = hash {
            body["subscriberHash"] = json!(h);
        }
        let (status, out) = open(&app, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
        assert_eq!(out["message"], "Please provide a valid HMAC hash");
    }
    let (status, out) = open(
        &app,
        json!({"applicationIdentifier": app.application_identifier, "subscriberHash": hmac(&app.key, "ann"),
               "subscriber": "ann"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");

    // Every in-app integration inactive: 404.
    let id = integration["_id"].as_str().unwrap();
    let (status, out) = app
        .put(&format!("/v1/integrations/{id}"), json!({"active": false}))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let (status, out) = open(
        &app,
        json!({"applicationIdentifier": app.application_identifier, "subscriberHash": hmac(&app.key, "ann"),
               "subscriber": "ann"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
}
db_test!(inbox_sessions, sessions);

async fn tokens(app: TestApp) {
    workflows(&app).await;
    trigger(&app, "news", "ann", 1).await;
    let ann = token(&app, "ann").await;
    // Missing, malformed, altered or foreign tokens: 401 on every route.
    let altered = format!("{}x", &ann[..ann.len() - 1]);
    for (auth, why) in [
        (None, "missing"),
        (Some(format!("ApiKey {}", app.key)), "an API key"),
        (Some("Bearer".to_owned()), "empty"),
        (Some(format!("Bearer {altered}")), "altered"),
    ] {
        let mut req = app.client.get(app.url("/v1/inbox/notifications"));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let (status, out) = send(req).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{why}: {out}");
        assert_error(&out, 401);
    }
    // Ann's token sees Ann's notification; Bob's does not, and cannot touch it.
    let (status, page) = call(&app, &ann, Method::GET, "/v1/inbox/notifications", None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(bodies(&page), ["News 1"]);
    let id = page["data"][0]["id"].as_str().unwrap().to_owned();
    let bob = token(&app, "bob").await;
    let (_, page) = call(&app, &bob, Method::GET, "/v1/inbox/notifications", None).await;
    assert_eq!(bodies(&page), Vec::<&str>::new());
    for (method, path, body) in [
        (
            Method::PATCH,
            format!("/v1/inbox/notifications/{id}/read"),
            None,
        ),
        (
            Method::PATCH,
            format!("/v1/inbox/notifications/{id}/archive"),
            None,
        ),
        (
            Method::PATCH,
            format!("/v1/inbox/notifications/{id}/complete"),
            Some(json!({"actionType": "primary"})),
        ),
        (
            Method::DELETE,
            format!("/v1/inbox/notifications/{id}/delete"),
            None,
        ),
    ] {
        let (status, out) = call(&app, &bob, method, &path, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {out}");
    }
    let (status, _) = call(
        &app,
        &bob,
        Method::POST,
        "/v1/inbox/notifications/seen",
        Some(json!({"notificationIds": [id]})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(
        &app,
        &bob,
        Method::POST,
        "/v1/inbox/notifications/read",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, page) = call(&app, &ann, Method::GET, "/v1/inbox/notifications", None).await;
    assert_eq!(
        (
            page["data"][0]["isSeen"].as_bool(),
            page["data"][0]["isRead"].as_bool()
        ),
        (Some(false), Some(false))
    );

    // Another environment's session (same subscriberId) sees none of it, and its token is refused here.
    let key_b = app.second_environment("B").await;
    let (_, me) = send(app.req_as(&key_b, Method::GET, "/v1/environments/me")).await;
    let (status, out) = open(
        &app,
        json!({"applicationIdentifier": me["identifier"], "subscriber": "ann"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let ann_b = out["data"]["token"].as_str().unwrap().to_owned();
    let (_, page) = call(&app, &ann_b, Method::GET, "/v1/inbox/notifications", None).await;
    assert_eq!(bodies(&page), Vec::<&str>::new());
    let (status, _) = call(
        &app,
        &ann_b,
        Method::PATCH,
        &format!("/v1/inbox/notifications/{id}/read"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A deleted subscriber's token stops working.
    let (status, _) = app.delete("/v2/subscribers/bob").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&app, &bob, Method::GET, "/v1/inbox/notifications", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
db_test!(inbox_tokens, tokens);

async fn notifications(app: TestApp) {
    workflows(&app).await;
    for n in 1..=3 {
        trigger(&app, "news", "ann", n).await;
    }
    trigger(&app, "alerts", "ann", 4).await;
    let t = token(&app, "ann").await;
    let get = |path: &str| {
        let (app, t, path) = (&app, t.clone(), path.to_owned());
        async move {
            let (status, out) = call(app, &t, Method::GET, &path, None).await;
            assert_eq!(status, StatusCode::OK, "{path}: {out}");
            out
        }
    };

    // Newest first, paged with the cursor; hasMore exact.
    let first = get("/v1/inbox/notifications?limit=3").await;
    assert_eq!(bodies(&first), ["Alert 4", "News 3", "News 2"]);
    assert_eq!(first["hasMore"], true);
    let last_id = first["data"][2]["id"].as_str().unwrap();
    let next = get(&format!("/v1/inbox/notifications?limit=3&after={last_id}")).await;
    assert_eq!(bodies(&next), ["News 1"]);
    assert_eq!(next["hasMore"], false);
    let exact = get("/v1/inbox/notifications?limit=4").await;
    assert_eq!(exact["hasMore"], false);

    // The shape of a notification.
    let alert = &first["data"][0];
    assert_eq!(alert["subject"], "Alert");
    assert_eq!(alert["severity"], "high");
    assert_eq!(alert["tags"], json!(["ops"]));
    assert_eq!(alert["data"], json!({"n": "4", "kind": "alert"}));
    assert_eq!(alert["channelType"], "in_app");
    assert_eq!(alert["to"]["subscriberId"], "ann");
    assert_eq!(alert["workflow"]["identifier"], "alerts");
    assert_eq!(alert["workflow"]["severity"], "high");
    assert_eq!(
        alert["primaryAction"],
        json!({"label": "Open", "isCompleted": false, "redirect": {"url": "https://x.test/a/4"}})
    );
    assert_eq!(
        alert["secondaryAction"],
        json!({"label": "Dismiss", "isCompleted": false})
    );
    assert_eq!(alert["redirect"]["url"], "https://x.test/a/4");
    assert_eq!(
        (
            alert["isRead"].as_bool(),
            alert["isSeen"].as_bool(),
            alert["isArchived"].as_bool(),
            alert["isSnoozed"].as_bool()
        ),
        (Some(false), Some(false), Some(false), Some(false))
    );
    assert_eq!(alert["readAt"], Value::Null);
    assert_eq!(alert["deliveredAt"].as_array().unwrap().len(), 1);

    // Filters.
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?tags[]=ops").await),
        ["Alert 4"]
    );
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?tags[]=ops&tags[]=news&limit=1").await),
        ["Alert 4"]
    );
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?tags[0][]=ops&tags[1][]=news").await),
        Vec::<&str>::new()
    );
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?severity[]=high").await),
        ["Alert 4"]
    );
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?severity=none&limit=1").await),
        ["News 3"]
    );
    let data = urlencode(r#"{"kind":"alert"}"#);
    assert_eq!(
        bodies(&get(&format!("/v1/inbox/notifications?data={data}")).await),
        ["Alert 4"]
    );
    let data = urlencode(r#"{"kind":["news","other"]}"#);
    assert_eq!(
        get(&format!("/v1/inbox/notifications?data={data}")).await["data"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let data = urlencode(r#"{"n":{"or":["4","9"]}}"#);
    assert_eq!(
        bodies(&get(&format!("/v1/inbox/notifications?data={data}")).await),
        ["Alert 4"]
    );
    let created = alert["createdAt"].as_str().unwrap();
    let ms = chrono::DateTime::parse_from_rfc3339(created)
        .unwrap()
        .timestamp_millis();
    assert_eq!(
        bodies(&get(&format!("/v1/inbox/notifications?createdGte={ms}")).await),
        ["Alert 4"]
    );
    assert_eq!(
        get(&format!("/v1/inbox/notifications?createdLte={}", ms - 1)).await["data"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let (status, out) = call(
        &app,
        &t,
        Method::GET,
        "/v1/inbox/notifications?read=false&archived=true",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    let (status, out) = call(
        &app,
        &t,
        Method::GET,
        "/v1/inbox/notifications?data=%7B%22%24where%22%3A1%7D",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");

    // Actions, and what the lists and counts show after each.
    let id = |page: &Value, i: usize| page["data"][i]["id"].as_str().unwrap().to_owned();
    let (alert_id, news3, news2, news1) =
        (id(&first, 0), id(&first, 1), id(&first, 2), id(&next, 0));
    let act = |method: Method, path: String, body: Option<Value>| {
        let (app, t) = (&app, t.clone());
        async move {
            let (status, out) = call(app, &t, method, &path, body).await;
            assert!(status.is_success(), "{path}: {status} {out}");
            out
        }
    };
    let counts = || async {
        let filters = urlencode(
            r#"[{"read":false},{"seen":false},{"archived":true},{"snoozed":true},{"severity":"high","read":false}]"#,
        );
        let out = get(&format!("/v1/inbox/notifications/count?filters={filters}")).await;
        assert_eq!(
            out["data"][4]["filter"],
            json!({"severity": "high", "read": false}),
            "the filter echoed: {out}"
        );
        out["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["count"].as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(counts().await, [4, 4, 0, 0, 1]);

    let read = act(
        Method::PATCH,
        format!("/v1/inbox/notifications/{alert_id}/read"),
        None,
    )
    .await;
    assert_eq!(
        (
            read["data"]["isRead"].as_bool(),
            read["data"]["isSeen"].as_bool()
        ),
        (Some(true), Some(true)),
        "{read}"
    );
    assert!(
        read["data"]["readAt"].is_string() && read["data"]["firstSeenAt"].is_string(),
        "{read}"
    );
    assert_eq!(counts().await, [3, 3, 0, 0, 0]);
    let unread = act(
        Method::PATCH,
        format!("/v1/inbox/notifications/{alert_id}/unread"),
        None,
    )
    .await;
    assert_eq!(
        (
            unread["data"]["isRead"].as_bool(),
            unread["data"]["readAt"].clone()
        ),
        (Some(false), Value::Null)
    );
    assert_eq!(counts().await, [4, 3, 0, 0, 1]);

    let archived = act(
        Method::PATCH,
        format!("/v1/inbox/notifications/{news3}/archive"),
        None,
    )
    .await;
    assert_eq!(
        (
            archived["data"]["isArchived"].as_bool(),
            archived["data"]["isRead"].as_bool()
        ),
        (Some(true), Some(true))
    );
    assert_eq!(counts().await, [3, 2, 1, 0, 1]);
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?archived=true").await),
        ["News 3"]
    );
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?archived=false").await),
        ["Alert 4", "News 2", "News 1"]
    );
    let back = act(
        Method::PATCH,
        format!("/v1/inbox/notifications/{news3}/unarchive"),
        None,
    )
    .await;
    assert_eq!(
        (
            back["data"]["isArchived"].as_bool(),
            back["data"]["isRead"].as_bool()
        ),
        (Some(false), Some(true))
    );

    let until = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    let snoozed = act(
        Method::PATCH,
        format!("/v1/inbox/notifications/{news2}/snooze"),
        Some(json!({"snoozeUntil": until})),
    )
    .await;
    assert_eq!(snoozed["data"]["isSnoozed"], true, "{snoozed}");
    assert!(snoozed["data"]["snoozedUntil"].is_string());
    // The API key's list shows the snooze too.
    let (_, listed) = app
        .get("/v1/messages?subscriberId=ann&channel=in_app&limit=10")
        .await;
    let m = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["_id"] == news2.as_str())
        .unwrap();
    assert_eq!(m["snoozedUntil"], snoozed["data"]["snoozedUntil"], "{m}");
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?snoozed=true").await),
        ["News 2"]
    );
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?snoozed=false").await),
        ["Alert 4", "News 3", "News 1"]
    );
    assert_eq!(counts().await, [3, 2, 0, 1, 1]);
    for bad in [
        json!({"snoozeUntil": chrono::Utc::now().to_rfc3339()}),
        json!({"snoozeUntil": (chrono::Utc::now() + chrono::Duration::days(31)).to_rfc3339()}),
    ] {
        let (status, out) = call(
            &app,
            &t,
            Method::PATCH,
            &format!("/v1/inbox/notifications/{news2}/snooze"),
            Some(bad),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    }
    let (status, _) = call(
        &app,
        &t,
        Method::PATCH,
        &format!("/v1/inbox/notifications/{news2}/snooze"),
        Some(json!({"snoozeUntil": "soon"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let woke = act(
        Method::PATCH,
        format!("/v1/inbox/notifications/{news2}/unsnooze"),
        None,
    )
    .await;
    assert_eq!(woke["data"]["isSnoozed"], false);
    assert!(woke["data"].get("snoozedUntil").is_none(), "{woke}");

    let done = act(
        Method::PATCH,
        format!("/v1/inbox/notifications/{alert_id}/complete"),
        Some(json!({"actionType": "primary"})),
    )
    .await;
    assert_eq!(
        (
            done["data"]["primaryAction"]["isCompleted"].as_bool(),
            done["data"]["secondaryAction"]["isCompleted"].as_bool()
        ),
        (Some(true), Some(false))
    );
    let reverted = act(
        Method::PATCH,
        format!("/v1/inbox/notifications/{alert_id}/revert"),
        Some(json!({"actionType": "primary"})),
    )
    .await;
    assert_eq!(reverted["data"]["primaryAction"]["isCompleted"], false);
    let (status, _) = call(
        &app,
        &t,
        Method::PATCH,
        &format!("/v1/inbox/notifications/{alert_id}/complete"),
        Some(json!({"actionType": "third"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let page = get("/v1/inbox/notifications?tags[]=ops").await;
    assert_eq!(page["data"][0]["primaryAction"]["isCompleted"], false);

    // The API key sees the Inbox's changes, and the Inbox sees the API key's.
    let (_, messages) = app
        .get("/v1/messages?subscriberId=ann&channel=in_app&limit=10")
        .await;
    let of = |id: &str| {
        messages["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["_id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(
        (of(&news3)["read"].as_bool(), of(&news3)["seen"].as_bool()),
        (Some(true), Some(true))
    );
    let (status, out) = app
        .post(
            "/v1/subscribers/ann/messages/mark-as",
            json!({"messageId": news1, "markAs": "read"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?read=true").await),
        ["News 3", "News 1"]
    );

    // Delete one, then the bulk routes.
    let (status, _) = call(
        &app,
        &t,
        Method::DELETE,
        &format!("/v1/inbox/notifications/{news1}/delete"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        bodies(&get("/v1/inbox/notifications").await),
        ["Alert 4", "News 3", "News 2"]
    );
    act(
        Method::POST,
        "/v1/inbox/notifications/seen".into(),
        Some(json!({"notificationIds": [alert_id]})),
    )
    .await;
    assert_eq!(counts().await, [2, 1, 0, 0, 1]);
    act(
        Method::POST,
        "/v1/inbox/notifications/read".into(),
        Some(json!({"tags": ["ops"]})),
    )
    .await;
    assert_eq!(counts().await, [1, 1, 0, 0, 0]);
    act(
        Method::POST,
        "/v1/inbox/notifications/read-archive".into(),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?archived=true").await),
        ["Alert 4", "News 3"]
    );
    act(
        Method::POST,
        "/v1/inbox/notifications/archive".into(),
        Some(json!({"data": "{\"kind\":\"news\"}"})),
    )
    .await;
    assert_eq!(
        bodies(&get("/v1/inbox/notifications?archived=false").await),
        Vec::<&str>::new()
    );
    act(
        Method::POST,
        "/v1/inbox/notifications/delete".into(),
        Some(json!({"tags": {"or": ["news"]}})),
    )
    .await;
    assert_eq!(bodies(&get("/v1/inbox/notifications").await), ["Alert 4"]);

    // A new session counts what is unread and not snoozed, by severity.
    trigger(&app, "alerts", "ann", 5).await;
    trigger(&app, "news", "ann", 6).await;
    let (_, s) = open(
        &app,
        json!({"applicationIdentifier": app.application_identifier, "subscriber": "ann"}),
    )
    .await;
    assert_eq!(
        s["data"]["unreadCount"],
        json!({"total": 2, "severity": {"high": 1, "medium": 0, "low": 0, "none": 1}})
    );
}
db_test!(inbox_notifications, notifications);

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn preferences(app: TestApp) {
    workflows(&app).await;
    let t = token(&app, "ann").await;
    let (status, prefs) = call(
        &app,
        &t,
        Method::GET,
        "/v1/inbox/preferences?criticality=nonCritical",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{prefs}");
    let levels: Vec<(&str, Option<&str>)> = prefs["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["level"].as_str().unwrap(),
                p["workflow"]["identifier"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        levels,
        [
            ("global", None),
            ("template", Some("alerts")),
            ("template", Some("news"))
        ]
    );
    let (_, only) = call(
        &app,
        &t,
        Method::GET,
        "/v1/inbox/preferences?tags[]=news",
        None,
    )
    .await;
    assert_eq!(only["data"].as_array().unwrap().len(), 2, "{only}");

    // News's in-app off from the Inbox (by workflow _id, as the client sends it): the next trigger skips it.
    let news_id = prefs["data"][2]["workflow"]["id"].as_str().unwrap();
    let (status, out) = call(
        &app,
        &t,
        Method::PATCH,
        &format!("/v1/inbox/preferences/{news_id}"),
        Some(json!({"in_app": false})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        (
            out["data"]["level"].as_str(),
            out["data"]["channels"]["in_app"].as_bool()
        ),
        (Some("template"), Some(false))
    );
    trigger(&app, "news", "ann", 1).await;
    trigger(&app, "alerts", "ann", 2).await;
    let (_, page) = call(&app, &t, Method::GET, "/v1/inbox/notifications", None).await;
    assert_eq!(bodies(&page), ["Alert 2"]);
    let (_, v2) = app.get("/v2/subscribers/ann/preferences").await;
    let news = v2["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["workflow"]["identifier"] == "news")
        .unwrap();
    assert_eq!(news["channels"]["in_app"], false, "{v2}");

    // Global, and bulk.
    let (status, out) = call(
        &app,
        &t,
        Method::PATCH,
        "/v1/inbox/preferences",
        Some(json!({"email": false})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        (
            out["data"]["level"].as_str(),
            out["data"]["channels"]["email"].as_bool()
        ),
        (Some("global"), Some(false))
    );
    let (_, g) = call(&app, &t, Method::GET, "/v1/inbox/preferences/global", None).await;
    assert_eq!(g["data"]["channels"]["email"], false);
    let (status, out) = call(&app, &t, Method::PATCH, "/v1/inbox/preferences/bulk",
        Some(json!({"preferences": [{"workflowId": "news", "in_app": true}, {"workflowId": "alerts", "in_app": false}]}))).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let ins: Vec<Option<bool>> = out["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["channels"]["in_app"].as_bool())
        .collect();
    assert_eq!(ins, [Some(true), Some(false)]);
    let (status, _) = call(
        &app,
        &t,
        Method::PATCH,
        "/v1/inbox/preferences/nope",
        Some(json!({"in_app": false})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(
        &app,
        &t,
        Method::PATCH,
        "/v1/inbox/preferences",
        Some(json!({"schedule": {"isEnabled": true}})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}
db_test!(inbox_preferences, preferences);

async fn cors(app: TestApp) {
    // A browser's preflight for an Inbox route, and the answer's allow-origin.
    let resp = app
        .client
        .request(Method::OPTIONS, app.url("/v1/inbox/notifications"))
        .header("origin", "https://app.example.com")
        .header("access-control-request-method", "GET")
        .header(
            "access-control-request-headers",
            "authorization,content-type,novu-api-version,novu-client-version",
        )
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], "https://app.example.com");
    let allowed = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    for header in [
        "authorization",
        "content-type",
        "novu-api-version",
        "novu-client-version",
    ] {
        assert!(allowed.contains(header), "{allowed}");
    }
    let resp = app
        .client
        .post(app.url("/v1/inbox/session"))
        .header("origin", "https://app.example.com")
        .json(&json!({"applicationIdentifier": "nope", "subscriber": "ann"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    // The API-key routes answer no browser.
    let resp = app
        .client
        .request(Method::OPTIONS, app.url("/v2/subscribers"))
        .header("origin", "https://app.example.com")
        .header("access-control-request-method", "GET")
        .send()
        .await
        .unwrap();
    assert!(resp.headers().get("access-control-allow-origin").is_none());
}
db_test!(inbox_cors, cors);

async fn topic_subscriptions(app: TestApp) {
    workflows(&app).await;
    let ann = token(&app, "ann").await;
    let bob = token(&app, "bob").await;
    // The operator offers the topic to self-subscription.
    let (status, out) = app
        .post(
            "/v2/topics",
            json!({"key": "launches", "name": "Launches", "allowSelfSubscription": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let path = "/v1/inbox/topics/launches/subscriptions";
    let (status, out) = call(&app, &ann, Method::GET, path, None).await;
    assert_eq!(
        (status, out["data"].clone()),
        (StatusCode::OK, json!([])),
        "not subscribed yet"
    );

    // Ann subscribes herself, under the identifier the server assigns (@novu/js sends "" for none).
    let (status, out) = call(
        &app,
        &ann,
        Method::POST,
        path,
        Some(json!({"identifier": ""})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let sub = out["data"].clone();
    let identifier = sub["identifier"].as_str().unwrap().to_owned();
    assert_eq!(identifier, "tk_launches:si_ann");
    assert!(sub["id"].as_str().is_some_and(|id| id.len() == 24), "{sub}");
    let (_, again) = call(&app, &ann, Method::POST, path, Some(json!({}))).await;
    assert_eq!(
        again["data"], sub,
        "subscribing again keeps the subscription"
    );
    let (status, again) = call(
        &app,
        &ann,
        Method::POST,
        path,
        Some(json!({"identifier": identifier})),
    )
    .await;
    assert_eq!(
        (status, again["data"].clone()),
        (StatusCode::CREATED, sub.clone()),
        "the assigned identifier may be named"
    );
    let (_, listed) = call(&app, &ann, Method::GET, path, None).await;
    assert_eq!(listed["data"], json!([sub]));
    let one = format!("{path}/{identifier}");
    let (_, got) = call(&app, &ann, Method::GET, &one, None).await;
    assert_eq!(got["data"], sub);
    let (status, same) = call(&app, &ann, Method::PATCH, &one, Some(json!({}))).await;
    assert_eq!(
        (status, same["data"].clone()),
        (StatusCode::OK, sub.clone())
    );

    // Bob neither sees nor ends Ann's subscription.
    let (status, got) = call(&app, &bob, Method::GET, &one, None).await;
    assert_eq!((status, got), (StatusCode::NO_CONTENT, Value::Null));
    let (_, listed) = call(&app, &bob, Method::GET, path, None).await;
    assert_eq!(listed["data"], json!([]));
    let (status, _) = call(&app, &bob, Method::DELETE, &one, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // What Tidings cannot keep, and what only the operator decides, is refused.
    for body in [
        json!({"name": "Mine"}),
        json!({"preferences": [{"workflowId": "news", "enabled": false}]}),
        json!({"topic": {"name": "Renamed"}}),
        json!({"identifier": "mine"}),
    ] {
        let (status, out) = call(&app, &ann, Method::POST, path, Some(body.clone())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {out}");
    }
    for body in [
        json!({"name": "Mine"}),
        json!({"preferences": [{"workflowId": "news", "enabled": false}]}),
    ] {
        let (status, _) = call(&app, &ann, Method::PATCH, &one, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    }
    let (_, topic) = app.get("/v2/topics/launches").await;
    assert_eq!(topic["name"], "Launches", "{topic}");

    // A trigger to the topic reaches Ann; after she unsubscribes, the next does not.
    let trigger_topic = |tx: &'static str| {
        let app = &app;
        async move {
            let (status, out) = app
                .post("/v1/events/trigger", json!({"name": "news", "to": {"type": "Topic", "topicKey": "launches"}, "payload": {"n": 7}, "transactionId": tx}))
                .await;
            assert_eq!(status, StatusCode::CREATED, "{out}");
        }
    };
    trigger_topic("launch-1").await;
    settled(&app, "launch-1", 1).await;
    let (_, page) = call(&app, &ann, Method::GET, "/v1/inbox/notifications", None).await;
    assert_eq!(bodies(&page), ["News 7"]);
    let (status, _) = call(&app, &ann, Method::DELETE, &one, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, listed) = call(&app, &ann, Method::GET, path, None).await;
    assert_eq!(listed["data"], json!([]));
    let (status, _) = call(&app, &ann, Method::DELETE, &one, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(inbox_topic_subscriptions, topic_subscriptions);

/// The Inbox's subscribe path of the topic `key`.
fn inbox_topic_path(key: &str) -> String {
    format!("/v1/inbox/topics/{key}/subscriptions")
}

/// Issue 36: Inbox topic subscriptions are the operator's to offer. A subscriber cannot join, through the
/// Inbox, a topic the operator did not open to self-subscription (here `staff`, whose broadcasts it would
/// hear); once the operator opens it, it can, and once closed again it keeps (and may end) its subscription
/// but cannot join again.
async fn inbox_joins_only_open_topics(app: TestApp) {
    workflows(&app).await;
    let ann = token(&app, "ann").await;
    let _ = token(&app, "carol").await;
    let (status, staff) = app
        .post("/v2/topics", json!({"key": "staff", "name": "Staff"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{staff}");
    assert!(staff.get("allowSelfSubscription").is_none(), "{staff}");
    let (status, _) = app
        .post(
            "/v2/topics/staff/subscriptions",
            json!({"subscriptions": ["carol"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let path = inbox_topic_path("staff");
    let (status, out) = call(&app, &ann, Method::POST, &path, Some(json!({}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    assert_error(&out, 404);
    let (_, members) = app.get("/v2/topics/staff/subscriptions").await;
    let members: Vec<&str> = members["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["subscriber"]["subscriberId"].as_str().unwrap())
        .collect();
    assert_eq!(members, ["carol"]);
    let (status, out) = app
        .post("/v1/events/trigger", json!({"name": "news", "to": {"type": "Topic", "topicKey": "staff"}, "payload": {"n": 1}, "transactionId": "staff-1"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    settled(&app, "staff-1", 1).await;
    let (_, page) = call(&app, &ann, Method::GET, "/v1/inbox/notifications", None).await;
    assert_eq!(
        bodies(&page),
        Vec::<&str>::new(),
        "Ann hears nothing of staff"
    );

    // The operator opens `staff` (its name kept), then closes it again.
    let (status, opened) = app
        .patch("/v2/topics/staff", json!({"allowSelfSubscription": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{opened}");
    assert_eq!(
        (
            opened["name"].clone(),
            opened["allowSelfSubscription"].clone()
        ),
        (json!("Staff"), json!(true)),
        "{opened}"
    );
    let (status, out) = call(&app, &ann, Method::POST, &path, Some(json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, closed) = app
        .patch("/v2/topics/staff", json!({"allowSelfSubscription": false}))
        .await;
    assert_eq!(status, StatusCode::OK, "{closed}");
    assert!(closed.get("allowSelfSubscription").is_none(), "{closed}");
    assert_eq!(closed["name"], "Staff");
    let mine = format!("{path}/tk_staff:si_ann");
    let (status, _) = call(&app, &ann, Method::DELETE, &mine, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(&app, &ann, Method::POST, &path, Some(json!({}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(
    inbox_topic_closed_is_not_joined,
    inbox_joins_only_open_topics
);

/// Issue 36: the Inbox never creates a topic, named or not.
async fn inbox_creates_no_topic(app: TestApp) {
    let ann = token(&app, "ann").await;
    let path = inbox_topic_path("ann-made");
    let (status, out) = call(&app, &ann, Method::POST, &path, Some(json!({}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let named = json!({"topic": {"name": "Mine"}});
    let (status, out) = call(&app, &ann, Method::POST, &path, Some(named)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert!(out["errors"].get("topic").is_some(), "{out}");
    let (status, _) = app.get("/v2/topics/ann-made").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the topic was not created");
}
db_test!(inbox_topic_is_never_created, inbox_creates_no_topic);

/// Issue 36: the Inbox never chooses a subscription's identifier: the server assigns the subscriber's own,
/// so Ann cannot take `tk_admins:si_carol`, which the operator's subscribe of carol then gets.
async fn inbox_chooses_no_identifier(app: TestApp) {
    let ann = token(&app, "ann").await;
    let _ = token(&app, "carol").await;
    let (status, admins) = app
        .post(
            "/v2/topics",
            json!({"key": "admins", "allowSelfSubscription": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{admins}");
    let path = inbox_topic_path("admins");
    let carols = json!({"identifier": "tk_admins:si_carol"});
    let (status, out) = call(&app, &ann, Method::POST, &path, Some(carols)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert!(out["errors"].get("identifier").is_some(), "{out}");
    let (status, out) = call(&app, &ann, Method::POST, &path, Some(json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["data"]["identifier"], "tk_admins:si_ann");
    let (status, out) = app
        .post(
            "/v2/topics/admins/subscriptions",
            json!({"subscriptions": ["carol"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["data"][0]["identifier"], "tk_admins:si_carol", "{out}");
}
db_test!(
    inbox_topic_identifier_is_assigned,
    inbox_chooses_no_identifier
);

/// Issue 36 (low): the Inbox's read of a subscription that is not the subscriber's, or of none, answers as
/// Novu does: 204 without a body (which `@novu/js` reads as "not subscribed"), not `200 {"data": null}`.
async fn subscription_of_another_or_none_is_no_content(app: TestApp) {
    let ann = token(&app, "ann").await;
    let bob = token(&app, "bob").await;
    let (status, _) = app
        .post(
            "/v2/topics",
            json!({"key": "watchers", "allowSelfSubscription": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let path = "/v1/inbox/topics/watchers/subscriptions";
    let (status, _) = call(&app, &ann, Method::POST, path, Some(json!({}))).await;
    assert_eq!(status, StatusCode::CREATED);
    let anns = format!("{path}/tk_watchers:si_ann");
    let (status, own) = call(&app, &ann, Method::GET, &anns, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(own["data"]["identifier"], "tk_watchers:si_ann");
    for (who, path) in [
        (&bob, anns.clone()),
        (&ann, format!("{path}/tk_watchers:si_bob")),
        (
            &ann,
            "/v1/inbox/topics/none/subscriptions/tk_none:si_ann".to_owned(),
        ),
    ] {
        let resp = app
            .client
            .get(app.url(&path))
            .bearer_auth(who)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::NO_CONTENT, "{path}");
        assert_eq!(resp.bytes().await.unwrap().len(), 0, "{path}: no body");
    }
}
db_test!(
    inbox_subscription_of_another_is_no_content,
    subscription_of_another_or_none_is_no_content
);

/// A snooze that is over is ended by the sweep of the socket layer (every 5 s): the message is listed as not
/// snoozed and no longer holds the time (the sweep announces it as new to the subscriber's sockets).
async fn snooze_ends(app: TestApp) {
    use tidings::store::messages::{MarkAs, MessageFilter};
    workflows(&app).await;
    trigger(&app, "news", "ann", 1).await;
    let t = token(&app, "ann").await;
    let (_, page) = call(&app, &t, Method::GET, "/v1/inbox/notifications", None).await;
    let id = page["data"][0]["id"].as_str().unwrap().to_owned();
    // Snoozed for a second and a half (the API's minimum is a minute).
    let until = tidings::domain::Timestamp::now().0 + 1_500;
    let f = MessageFilter {
        subscriber_ref: Some(app.subscriber_ref("ann").await.unwrap()),
        ids: vec![tidings::domain::MessageId::from(id.as_str())],
        ..Default::default()
    };
    let marked = app
        .store
        .mark_where(&app.tenant.environment_id, &f, MarkAs::Snooze(until))
        .await
        .unwrap();
    assert_eq!(marked, 1);
    let (_, snoozed) = call(
        &app,
        &t,
        Method::GET,
        "/v1/inbox/notifications?snoozed=true",
        None,
    )
    .await;
    assert_eq!(bodies(&snoozed), ["News 1"]);
    crate::support::eventually(|| async {
        let left = crate::support::count(
            &app,
            "select count(*) from messages where id = $1 and snoozed_until is not null",
            &id,
        )
        .await;
        (left == 0).then_some(())
    })
    .await;
    let (_, back) = call(
        &app,
        &t,
        Method::GET,
        "/v1/inbox/notifications?snoozed=false",
        None,
    )
    .await;
    assert_eq!(bodies(&back), ["News 1"]);
    // Ended once: nothing is left for another sweep.
    let again = app
        .store
        .end_snoozes(tidings::domain::Timestamp::now().0, 10)
        .await
        .unwrap();
    assert_eq!(again, 0);
}
db_test!(inbox_snooze_ends, snooze_ends);

/// Triggers `news` for `to` with `payload.n = n` and `context`, and waits until it settles.
async fn trigger_in(app: &TestApp, to: &str, n: i64, context: Value) {
    let tx = format!("news-{to}-{n}-ctx");
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "news", "to": to, "payload": {"n": n}, "transactionId": tx, "context": context}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    settled(app, &tx, 1).await;
}

/// A session of `subscriber` with `context` (and `contextHash` when given): its status and body.
async fn open_in(
    app: &TestApp,
    subscriber: &str,
    context: Value,
    hash: Option<String>,
) -> (StatusCode, Value) {
    let mut body = json!({"applicationIdentifier": app.application_identifier,
        "subscriberHash": hmac(&app.key, subscriber), "subscriber": subscriber, "context": context});
    if let Some(h) = hash {
        body["contextHash"] = json!(h);
    }
    open(app, body).await
}

/// Novu's multi-tenant Inbox: one subscriber's messages of two tenants, of none and of two keys. A session
/// opened with a context sees, counts and changes only the messages whose context keys equal its own; a
/// session without one only those without a context. With HMAC on, a context needs its `contextHash`.
async fn contexts(app: TestApp) {
    workflows(&app).await;
    trigger_in(&app, "ann", 1, json!({"tenant": "acme"})).await;
    trigger_in(
        &app,
        "ann",
        2,
        json!({"tenant": {"id": "globex", "data": {"name": "Globex"}}}),
    )
    .await;
    trigger(&app, "news", "ann", 3).await;
    trigger_in(&app, "ann", 4, json!({"app": "jira", "tenant": "acme"})).await;

    let session = |context: Value| {
        let app = &app;
        async move {
            let (status, out) = open_in(app, "ann", context, None).await;
            assert_eq!(status, StatusCode::CREATED, "{out}");
            out["data"].clone()
        }
    };
    let acme = session(json!({"tenant": "acme"})).await;
    let globex = session(json!({"tenant": {"id": "globex"}})).await;
    let both = session(json!({"tenant": "acme", "app": {"id": "jira", "data": {"x": 1}}})).await;
    let (status, none) = open(
        &app,
        json!({"applicationIdentifier": app.application_identifier, "subscriber": "ann"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{none}");
    let none = none["data"].clone();
    assert_eq!(acme["contextKeys"], json!(["tenant:acme"]));
    assert_eq!(both["contextKeys"], json!(["app:jira", "tenant:acme"]));
    assert_eq!(none.get("contextKeys"), None, "{none}");
    for s in [&acme, &globex, &both, &none] {
        assert_eq!(s["unreadCount"]["total"], 1, "{s}");
    }
    let t = |s: &Value| s["token"].as_str().unwrap().to_owned();
    let (acme, globex, both, none) = (t(&acme), t(&globex), t(&both), t(&none));
    let list = |token: String, query: &'static str| {
        let app = &app;
        async move {
            let (status, out) = call(
                app,
                &token,
                Method::GET,
                &format!("/v1/inbox/notifications{query}"),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{out}");
            bodies(&out)
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(acme.clone(), "").await, ["News 1"]);
    assert_eq!(list(globex.clone(), "").await, ["News 2"]);
    assert_eq!(list(none.clone(), "").await, ["News 3"]);
    assert_eq!(list(both.clone(), "").await, ["News 4"]);
    let unread = |token: String| {
        let app = &app;
        async move {
            let filters = urlencode(r#"[{"read":false},{"seen":false}]"#);
            let (status, out) = call(
                app,
                &token,
                Method::GET,
                &format!("/v1/inbox/notifications/count?filters={filters}"),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{out}");
            (
                out["data"][0]["count"].as_i64().unwrap(),
                out["data"][1]["count"].as_i64().unwrap(),
            )
        }
    };
    for token in [&acme, &globex, &none, &both] {
        assert_eq!(unread(token.clone()).await, (1, 1));
    }
    // The API key sees them all.
    let (_, all) = app.get("/v1/subscribers/ann/notifications/feed").await;
    assert_eq!(all["data"].as_array().map(Vec::len), Some(4), "{all}");

    // Actions: another context's message is not found; the session's own is changed.
    let (_, page) = call(&app, &globex, Method::GET, "/v1/inbox/notifications", None).await;
    let globex_id = page["data"][0]["id"].as_str().unwrap().to_owned();
    let (_, page) = call(&app, &acme, Method::GET, "/v1/inbox/notifications", None).await;
    let acme_id = page["data"][0]["id"].as_str().unwrap().to_owned();
    for (method, action, body) in [
        (Method::PATCH, "read", None),
        (Method::PATCH, "archive", None),
        (
            Method::PATCH,
            "complete",
            Some(json!({"actionType": "primary"})),
        ),
        (
            Method::PATCH,
            "snooze",
            Some(
                json!({"snoozeUntil": (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339()}),
            ),
        ),
        (Method::DELETE, "delete", None),
    ] {
        let path = format!("/v1/inbox/notifications/{globex_id}/{action}");
        let (status, out) = call(&app, &acme, method.clone(), &path, body.clone()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{action}: {out}");
    }
    assert_eq!(unread(globex.clone()).await, (1, 1));
    let (status, out) = call(
        &app,
        &acme,
        Method::PATCH,
        &format!("/v1/inbox/notifications/{acme_id}/read"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["data"]["isRead"], true);
    assert_eq!(unread(acme.clone()).await, (0, 0));
    assert_eq!(unread(globex.clone()).await, (1, 1));

    // Bulk actions: all of the session's context, nothing of another's.
    let (status, out) = call(
        &app,
        &none,
        Method::POST,
        "/v1/inbox/notifications/read",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(unread(none.clone()).await, (0, 0));
    for token in [&globex, &both] {
        assert_eq!(unread(token.clone()).await, (1, 1));
    }
    let (status, out) = call(
        &app,
        &globex,
        Method::POST,
        "/v1/inbox/notifications/seen",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(unread(globex.clone()).await, (1, 0));
    assert_eq!(unread(both.clone()).await, (1, 1));
    let (status, out) = call(
        &app,
        &both,
        Method::POST,
        "/v1/inbox/notifications/delete",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert!(list(both.clone(), "").await.is_empty());
    assert_eq!(list(acme.clone(), "").await, ["News 1"]);
    assert_eq!(list(globex.clone(), "").await, ["News 2"]);
    assert_eq!(list(none.clone(), "").await, ["News 3"]);
    // A session's context is recorded like a trigger's.
    let n = crate::support::count(
        &app,
        "select count(*) from contexts where environment_id = $1 and context_type = 'app'",
        app.tenant.environment_id.as_str(),
    )
    .await;
    assert_eq!(n, 1);

    // A context is validated like a trigger's.
    let six: serde_json::Map<String, Value> =
        (0..6).map(|i| (format!("k{i}"), json!("v"))).collect();
    let (status, out) = open_in(&app, "ann", Value::Object(six), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    let (status, out) = open_in(&app, "ann", json!({"tenant": 7}), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");

    // HMAC on: the context needs the HMAC of its canonical JSON (keys sorted, no spaces).
    app.integration(json!({"providerId": "novu", "channel": "in_app", "credentials": {"hmac": true}, "active": true}))
        .await;
    let context = json!({"tenant": {"id": "globex", "data": {"name": "Globex", "a": [1, "x"]}}});
    let canonical = r#"{"tenant":{"data":{"a":[1,"x"],"name":"Globex"},"id":"globex"}}"#;
    for hash in [
        None,
        Some(hmac(&app.key, "ann")),
        Some(hmac(&app.key, r#"{"tenant":"acme"}"#)),
        Some(hmac("another key", canonical)),
        Some("zz".into()),
    ] {
        let (status, out) = open_in(&app, "ann", context.clone(), hash).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
        assert_eq!(out["message"], "Please provide a valid context HMAC hash");
    }
    let (status, out) = open_in(&app, "ann", context, Some(hmac(&app.key, canonical))).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(
        list(out["data"]["token"].as_str().unwrap().to_owned(), "").await,
        ["News 2"]
    );
    // An empty context narrows to what no context sees, and needs no hash.
    let (status, out) = open_in(&app, "ann", json!({}), None).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(
        list(out["data"]["token"].as_str().unwrap().to_owned(), "").await,
        ["News 3"]
    );
}
db_test!(inbox_contexts, contexts);

/// Presence after a crash: a subscriber left online by a process that stopped without saying (its heartbeat
/// long past) is recorded offline by the sweep, its `lastOnlineAt` the last heartbeat; one whose heartbeat is
/// fresh stays online. Heartbeats are planted with the store's own refresh, at times chosen so that the
/// background sweep either must or cannot take each row whatever the clock says.
async fn presence_expires(app: TestApp) {
    let env = &app.tenant.environment_id;
    let mut records = std::collections::HashMap::new();
    for id in ["crashed", "fresh", "held", "gone"] {
        let created = app.subscriber(id, json!({})).await;
        let record = tidings::domain::SubscriberRef::from(created["_id"].as_str().unwrap());
        app.store
            .set_subscriber_online(env, &record, true)
            .await
            .unwrap();
        records.insert(id, record);
    }
    let now = tidings::domain::Timestamp::now().0;
    let days = |n: i64| now + n * 86_400_000;
    let ids = |v: &[&str]| v.iter().map(|s| records[s].clone()).collect::<Vec<_>>();
    let n = app
        .store
        .refresh_presence(env, &ids(&["fresh", "held", "gone"]), days(10))
        .await
        .unwrap();
    assert_eq!(n, 3);
    // The crashed process's last heartbeat: one second after 1970.
    app.store
        .refresh_presence(env, &ids(&["crashed"]), 1_000)
        .await
        .unwrap();
    let online = |id: &'static str| {
        let app = &app;
        async move {
            let (status, s) = app.get(&format!("/v2/subscribers/{id}")).await;
            assert_eq!(status, StatusCode::OK, "{s}");
            s
        }
    };
    let crashed = crate::support::eventually(|| async {
        let s = online("crashed").await;
        (s["isOnline"] == false).then_some(s)
    })
    .await;
    assert_eq!(
        crashed["lastOnlineAt"], "1970-01-01T00:00:01.000Z",
        "{crashed}"
    );
    // Swept by the same statement, with a heartbeat ahead of any stale bound.
    assert_eq!(online("fresh").await["isOnline"], true);

    // A heartbeat refreshed keeps its subscriber; one not refreshed goes (the sweep called with a bound
    // between the two, as a later sweep would see them).
    app.store
        .refresh_presence(env, &ids(&["held", "fresh"]), days(20))
        .await
        .unwrap();
    let gone = app.store.expire_presence(days(15), 100).await.unwrap();
    assert_eq!(
        gone,
        vec![(env.clone(), records["gone"].clone())],
        "{gone:?}"
    );
    for (id, is) in [("held", true), ("fresh", true), ("gone", false)] {
        assert_eq!(online(id).await["isOnline"], is, "{id}");
    }
    assert!(app
        .store
        .expire_presence(days(15), 100)
        .await
        .unwrap()
        .is_empty());
    // A subscriber offline is not refreshed back online by a heartbeat.
    assert_eq!(
        app.store
            .refresh_presence(env, &ids(&["gone", "crashed"]), days(30))
            .await
            .unwrap(),
        0
    );
}
db_test!(inbox_presence_expires, presence_expires);

/// A socket's upgrade needs a session token that verifies: none, a forged one and an expired one are refused
/// with a 401 before the WebSocket exists (the error does not echo the token); a valid one is upgraded.
async fn sockets_need_a_valid_token_before_the_upgrade(app: TestApp) {
    let upgrade_at = |path: &str, token: &str| {
        let mut query = vec![("EIO", "4"), ("transport", "websocket")];
        if !token.is_empty() {
            query.push(("token", token));
        }
        app.client
            .get(app.url(path))
            .query(&query)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
    };
    let upgrade = |token: &str| upgrade_at("/socket.io/", token);
    let valid = token(&app, "ann").await;
    let mut forged = valid.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let subscriber_ref = tidings::domain::SubscriberRef::from(
        app.get("/v2/subscribers/ann").await.1["_id"]
            .as_str()
            .unwrap(),
    );
    let mut expired = tidings::domain::session::SessionToken::starting_now(
        app.tenant.clone(),
        subscriber_ref,
        Vec::new(),
    );
    expired.expires_at = tidings::domain::Timestamp(tidings::domain::Timestamp::now().0 - 1);
    let expired = expired.sign(app.store.cipher());
    for (what, token) in [
        ("none", ""),
        ("forged", forged.as_str()),
        ("expired", expired.as_str()),
        ("junk", "x"),
    ] {
        let (status, body) = send(upgrade(token)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
        assert_error(&body, 401);
        assert_eq!(body["path"], "/socket.io/", "{what}");
        assert!(!body.to_string().contains(&valid[..20]), "{what}: {body}");
    }
    // socket.io answers every path below its own: none is a way round the check.
    let (status, body) = send(upgrade_at("/socket.io/x", "")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let resp = upgrade(&valid).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::SWITCHING_PROTOCOLS);
}
db_test!(
    inbox_socket_refusal,
    sockets_need_a_valid_token_before_the_upgrade
);

/// Issue 36 (low, schema conformance): the document describes the Inbox's answers as they are sent, under
/// both profiles: `{data: …}` around single objects and arrays (the notification page and the counts are
/// `{data, …}` already and stay as they are), and a 204 for a subscription the subscriber does not have.
async fn the_document_describes_the_inbox_wire(backend: crate::support::Backend) {
    use tidings::config::WireProfile;
    for profile in [WireProfile::Spec, WireProfile::Novu] {
        let app = TestApp::spawn_with(backend, profile).await;
        let (status, doc) = send(app.client.get(app.url("/openapi.json"))).await;
        assert_eq!(status, StatusCode::OK);
        let body = |path: &str, method: &str, status: &str| {
            doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
                .clone()
        };
        let schema = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
        let data = |inner: Value| json!({"type": "object", "required": ["data"], "properties": {"data": inner}});
        let subscription = "/v1/inbox/topics/{topicKey}/subscriptions";
        let one = "/v1/inbox/topics/{topicKey}/subscriptions/{identifier}";
        for (path, method, status, inner) in [
            ("/v1/inbox/session", "post", "201", schema("SessionOut")),
            (
                "/v1/inbox/preferences/global",
                "get",
                "200",
                schema("InboxPreferenceOut"),
            ),
            (
                "/v1/inbox/preferences",
                "patch",
                "200",
                schema("InboxPreferenceOut"),
            ),
            (
                "/v1/inbox/notifications/{id}/read",
                "patch",
                "200",
                schema("InboxNotificationOut"),
            ),
            (subscription, "post", "201", schema("InboxSubscriptionOut")),
            (one, "get", "200", schema("InboxSubscriptionOut")),
            (one, "patch", "200", schema("InboxSubscriptionOut")),
        ] {
            assert_eq!(
                body(path, method, status),
                data(inner),
                "{profile:?} {method} {path}"
            );
        }
        for (path, method) in [
            ("/v1/inbox/preferences", "get"),
            ("/v1/inbox/preferences/bulk", "patch"),
            (subscription, "get"),
        ] {
            let wrapped = body(path, method, "200");
            assert_eq!(wrapped["required"], json!(["data"]), "{path}: {wrapped}");
            assert_eq!(wrapped["properties"]["data"]["type"], "array", "{path}");
        }
        for (path, name) in [
            ("/v1/inbox/notifications", "NotificationsPageOut"),
            ("/v1/inbox/notifications/count", "CountsOut"),
        ] {
            assert_eq!(body(path, "get", "200"), schema(name), "{profile:?} {path}");
        }
        let none = &doc["paths"][one]["get"]["responses"]["204"];
        assert!(none.is_object() && none.get("content").is_none(), "{none}");
        // The activity's subscriber is one schema (left out when there is none), not a `oneOf` with null.
        let subscriber = &doc["components"]["schemas"]["ActivityOut"]["properties"]["subscriber"];
        assert_eq!(
            subscriber["$ref"],
            "#/components/schemas/ActivitySubscriberOut"
        );
        assert!(subscriber.get("oneOf").is_none(), "{subscriber}");
    }
}
db_test!(
    inbox_openapi_describes_its_wire,
    the_document_describes_the_inbox_wire,
    backend
);
