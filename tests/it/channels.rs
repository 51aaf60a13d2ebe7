//! Channel connections and channel endpoints: creation rules, one connection per resource (also under
//! concurrency), endpoint shapes, list filters, pagination, deletion, and tenant isolation.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, send, TestApp};

async fn setup(app: &TestApp) {
    app.subscriber("alice", json!({})).await;
    app.subscriber("bob", json!({})).await;
    app.integration(json!({"providerId": "slack", "channel": "chat", "identifier": "slack-main", "active": true})).await;
    app.integration(
        json!({"providerId": "msteams", "channel": "chat", "identifier": "teams", "active": true}),
    )
    .await;
    app.integration(
        json!({"providerId": "twilio", "channel": "sms", "identifier": "sms", "active": true}),
    )
    .await;
    app.integration(json!({"providerId": "chat-webhook", "channel": "chat", "identifier": "hook", "active": true})).await;
    app.integration(
        json!({"providerId": "telegram", "channel": "chat", "identifier": "tg", "active": true}),
    )
    .await;
}

fn connection(extra: Value) -> Value {
    let mut body = json!({
        "integrationIdentifier": "slack-main",
        "workspace": {"id": "T123", "name": "Acme"},
        "auth": {"accessToken": "xoxb-secret"}
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

async fn connections_are_created_per_resource(app: TestApp) {
    setup(&app).await;
    let (status, c) = app
        .post(
            "/v1/channel-connections",
            connection(json!({"subscriberId": "alice"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["identifier"].as_str().unwrap();
    assert!(id.starts_with("chconn_") && id.len() == 19, "{id}");
    assert!(id[7..]
        .bytes()
        .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
    assert_eq!(c["channel"], "chat");
    assert_eq!(c["providerId"], "slack");
    assert_eq!(c["integrationIdentifier"], "slack-main");
    assert_eq!(c["subscriberId"], "alice");
    assert_eq!(c["contextKeys"], json!([]));
    assert_eq!(c["workspace"], json!({"id": "T123", "name": "Acme"}));
    assert_eq!(c["auth"], json!({"accessToken": "xoxb-secret"}));
    assert!(c["createdAt"].as_str().unwrap().ends_with('Z'));

    // A second one for the same subscriber and integration → 409 naming the first.
    let (status, err) = app
        .post(
            "/v1/channel-connections",
            connection(json!({"subscriberId": "alice"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&err, 409);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .ends_with(&format!("Connection ID: {id}")),
        "{err}"
    );
    assert!(err["message"]
        .as_str()
        .unwrap()
        .contains("subscriberId \"alice\""));
    // Another subscriber, or another integration, is another resource.
    let (status, _) = app
        .post(
            "/v1/channel-connections",
            connection(json!({"subscriberId": "bob"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = app
        .post(
            "/v1/channel-connections",
            connection(json!({"subscriberId": "alice", "integrationIdentifier": "teams"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    // Shared: tied to the context only; no subscriberId stored; one per exact context set.
    let (status, shared) = app
        .post(
            "/v1/channel-connections",
            connection(json!({"connectionMode": "shared", "subscriberId": "alice",
                "context": {"tenant": "acme", "region": {"id": "eu", "data": {"name": "Europe"}}}, "identifier": "acme-slack"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{shared}");
    assert_eq!(shared["subscriberId"], Value::Null);
    assert_eq!(shared["contextKeys"], json!(["region:eu", "tenant:acme"]));
    assert_eq!(shared["identifier"], "acme-slack");
    let (status, err) = app
        .post(
            "/v1/channel-connections",
            connection(
                json!({"connectionMode": "shared", "context": {"region": "eu", "tenant": "acme"}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "same set in another order");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("context [region:eu, tenant:acme]"),
        "{err}"
    );
    assert!(err["message"]
        .as_str()
        .unwrap()
        .ends_with("Connection ID: acme-slack"));
    let (status, _) = app
        .post(
            "/v1/channel-connections",
            connection(json!({"connectionMode": "shared", "context": {"tenant": "acme"}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "a subset is a different set");
    // Identifier taken.
    let (status, err) = app
        .post("/v1/channel-connections", connection(json!({"subscriberId": "bob", "integrationIdentifier": "teams", "identifier": "acme-slack"})))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("identifier \"acme-slack\" already exists"),
        "{err}"
    );

    // Rule violations.
    let cases = [
        (
            connection(json!({"connectionMode": "shared"})),
            StatusCode::BAD_REQUEST,
            "context is required when connectionMode is \"shared\"",
        ),
        (
            connection(json!({})),
            StatusCode::BAD_REQUEST,
            "Either subscriberId or context must be provided",
        ),
        (
            connection(json!({"context": {"tenant": "x"}})),
            StatusCode::BAD_REQUEST,
            "subscriberId is required when connectionMode is \"subscriber\"",
        ),
        (
            connection(json!({"subscriberId": "ghost"})),
            StatusCode::NOT_FOUND,
            "Subscriber not found: ghost",
        ),
        (
            connection(json!({"subscriberId": "alice", "integrationIdentifier": "nope"})),
            StatusCode::NOT_FOUND,
            "Integration not found: nope",
        ),
    ];
    for (body, status, message) in cases {
        let (got, err) = app.post("/v1/channel-connections", body.clone()).await;
        assert_eq!(got, status, "{body}");
        assert_eq!(err["message"], message, "{body}");
    }
    let (status, _) = app
        .post(
            "/v1/channel-connections",
            connection(json!({"subscriberId": "alice", "integrationIdentifier": "sms"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "not a chat integration");
    for bad in [
        json!({"subscriberId": "alice", "workspace": {"id": "T"}, "auth": {"accessToken": "x"}}),
        connection(json!({"subscriberId": "alice", "workspace": {"name": "no id"}})),
        connection(json!({"subscriberId": "alice", "auth": {}})),
        connection(json!({"subscriberId": "alice", "connectionMode": "team"})),
        connection(
            json!({"connectionMode": "shared", "context": {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6"}}),
        ),
        connection(json!({"connectionMode": "shared", "context": {"a": 5}})),
    ] {
        let (status, err) = app.post("/v1/channel-connections", bad.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad} → {err}");
        assert!(err["errors"].is_object());
    }
}
db_test!(connections_create, connections_are_created_per_resource);

async fn concurrent_duplicate_connections_one_wins(app: TestApp) {
    setup(&app).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let req = app
            .req(Method::POST, "/v1/channel-connections")
            .json(&connection(json!({"subscriberId": "alice"})));
        tasks.push(tokio::spawn(send(req)));
    }
    let mut created = Vec::new();
    let mut conflicts = 0;
    for t in tasks {
        let (status, body) = t.await.unwrap();
        match status {
            StatusCode::CREATED => created.push(body["identifier"].as_str().unwrap().to_owned()),
            StatusCode::CONFLICT => conflicts += 1,
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(created.len(), 1, "exactly one create wins");
    assert_eq!(conflicts, 7);
    let (_, page) = app.get("/v1/channel-connections?subscriberId=alice").await;
    assert_eq!(page["totalCount"], 1);
    assert_eq!(page["data"][0]["identifier"], created[0].as_str());
}
db_test!(
    connections_concurrent,
    concurrent_duplicate_connections_one_wins
);

async fn connections_read_update_delete(app: TestApp) {
    setup(&app).await;
    let (_, c) = app
        .post(
            "/v1/channel-connections",
            connection(json!({"subscriberId": "alice", "identifier": "c-alice"})),
        )
        .await;
    let (status, got) = app.get("/v1/channel-connections/c-alice").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, c);
    let (status, p) = app
        .patch(
            "/v1/channel-connections/c-alice",
            json!({"auth": {"accessToken": "xoxb-rotated"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{p}");
    assert_eq!(p["auth"]["accessToken"], "xoxb-rotated");
    assert_eq!(p["workspace"], c["workspace"]);
    assert!(p["updatedAt"].as_str() > c["updatedAt"].as_str());
    let (_, p) = app
        .patch(
            "/v1/channel-connections/c-alice",
            json!({"workspace": {"id": "T123", "name": "Renamed"}}),
        )
        .await;
    assert_eq!(p["workspace"]["name"], "Renamed");
    assert_eq!(p["auth"]["accessToken"], "xoxb-rotated");
    let (status, _) = app
        .patch("/v1/channel-connections/c-alice", json!({}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = app
        .patch(
            "/v1/channel-connections/c-alice",
            json!({"auth": {"token": "x"}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = app
        .patch(
            "/v1/channel-connections/none",
            json!({"auth": {"accessToken": "x"}}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // An endpoint using the connection is detached, not deleted, when the connection goes.
    let (status, e) = app
        .post(
            "/v1/channel-endpoints",
            json!({"type": "slack_channel", "endpoint": {"channelId": "C1"}, "integrationIdentifier": "slack-main",
                   "subscriberId": "alice", "connectionIdentifier": "c-alice", "identifier": "e-alice"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{e}");
    assert_eq!(e["connectionIdentifier"], "c-alice");
    let (status, body) = app.delete("/v1/channel-connections/c-alice").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, _) = app.get("/v1/channel-connections/c-alice").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, e) = app.get("/v1/channel-endpoints/e-alice").await;
    assert_eq!(e["connectionIdentifier"], Value::Null);
    assert_eq!(e["endpoint"], json!({"channelId": "C1"}));
    let (_, page) = app
        .get("/v1/channel-endpoints?connectionIdentifier=c-alice")
        .await;
    assert_eq!(page["totalCount"], 0);
    let (status, _) = app.delete("/v1/channel-connections/c-alice").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The slot is free again.
    let (status, _) = app
        .post(
            "/v1/channel-connections",
            connection(json!({"subscriberId": "alice"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
}
db_test!(connections_rud, connections_read_update_delete);

async fn endpoint(app: &TestApp, body: Value) -> Value {
    let (status, e) = app.post("/v1/channel-endpoints", body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body} → {e}");
    e
}

async fn endpoints_create_and_patch_per_type(app: TestApp) {
    setup(&app).await;
    // (type, integration, valid data, valid replacement, invalid replacements)
    let cases: Vec<(&str, &str, Value, Value, Vec<Value>)> = vec![
        (
            "slack_channel",
            "slack-main",
            json!({"channelId": "C1"}),
            json!({"channelId": "C2"}),
            vec![
                json!({}),
                json!({"channelId": 1}),
                json!({"userId": "U1"}),
                json!({"channelId": "C", "x": "y"}),
            ],
        ),
        (
            "slack_user",
            "slack-main",
            json!({"userId": "U1"}),
            json!({"userId": "U2"}),
            vec![
                json!({"channelId": "C1"}),
                json!({"userId": ""}),
                json!("U1"),
            ],
        ),
        (
            "webhook",
            "hook",
            json!({"url": "https://hooks.example.com/a"}),
            json!({"url": "http://10.0.0.1:8080/b", "channel": "#ops"}),
            vec![
                json!({"url": "not a url"}),
                json!({"url": "ftp://x.example"}),
                json!({"url": "https://x.example", "channel": 2}),
                json!({"channel": "#a"}),
            ],
        ),
        (
            "phone",
            "sms",
            json!({"phoneNumber": "+14155550123"}),
            json!({"phoneNumber": "+442071838750"}),
            vec![
                json!({"phoneNumber": "4155550123"}),
                json!({"phoneNumber": "+1 415 555"}),
                json!({"phoneNumber": "+0123456"}),
                json!({"phone": "+14155550123"}),
            ],
        ),
        (
            "ms_teams_channel",
            "teams",
            json!({"teamId": "T1", "channelId": "C1"}),
            json!({"teamId": "T2", "channelId": "C2"}),
            vec![
                json!({"teamId": "T1"}),
                json!({"channelId": "C1"}),
                json!({"teamId": "T1", "channelId": "C1", "userId": "U"}),
            ],
        ),
        (
            "ms_teams_user",
            "teams",
            json!({"userId": "U1"}),
            json!({"userId": "U9"}),
            vec![json!({"chatId": "1"})],
        ),
        (
            "telegram_chat",
            "tg",
            json!({"chatId": "-1001"}),
            json!({"chatId": "42"}),
            vec![json!({"chatId": 42}), json!([])],
        ),
    ];
    for (t, integration, data, replacement, invalid) in cases {
        let e = endpoint(&app, json!({"type": t, "endpoint": data, "integrationIdentifier": integration, "subscriberId": "alice"})).await;
        let id = e["identifier"].as_str().unwrap().to_owned();
        assert!(id.starts_with("chendp_") && id.len() == 19, "{id}");
        assert_eq!(e["type"], t);
        assert_eq!(e["endpoint"], data);
        assert_eq!(e["subscriberId"], "alice");
        assert_eq!(e["connectionIdentifier"], Value::Null);
        assert_eq!(e["contextKeys"], json!([]));
        assert_eq!(e["integrationIdentifier"], integration);
        let (status, p) = app
            .patch(
                &format!("/v1/channel-endpoints/{id}"),
                json!({"endpoint": replacement}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{t}: {p}");
        assert_eq!(p["endpoint"], replacement);
        assert!(
            p["updatedAt"].as_str() > e["updatedAt"].as_str(),
            "{t}: updatedAt changes"
        );
        assert_eq!(p["createdAt"], e["createdAt"]);
        for bad in invalid {
            let (status, err) = app
                .patch(
                    &format!("/v1/channel-endpoints/{id}"),
                    json!({"endpoint": bad}),
                )
                .await;
            if bad.is_object() {
                assert_eq!(status, StatusCode::BAD_REQUEST, "{t}: {bad} → {err}");
                assert!(
                    err["message"].as_str().unwrap().starts_with(&format!(
                        "Endpoint must match the required format for type \"{t}\""
                    )),
                    "{err}"
                );
            } else {
                // Not an object at all: a validation error of the body (design.md §3).
                assert_eq!(
                    status,
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "{t}: {bad} → {err}"
                );
                assert_eq!(
                    err["errors"]["endpoint"],
                    json!({"messages": ["endpoint must be an object"], "value": bad}),
                    "{err}"
                );
            }
            // Invalid data is also refused on create (422, field `endpoint`).
            let (status, err) = app
                .post("/v1/channel-endpoints", json!({"type": t, "endpoint": bad, "integrationIdentifier": integration, "subscriberId": "alice"}))
                .await;
            assert_eq!(
                status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{t}: {bad} → {err}"
            );
            assert!(err["errors"]["endpoint"].is_object());
        }
        let (_, got) = app.get(&format!("/v1/channel-endpoints/{id}")).await;
        assert_eq!(
            got["endpoint"], replacement,
            "{t}: refused patches changed nothing"
        );
    }
    let (status, err) = app
        .patch(
            "/v1/channel-endpoints/chendp_unknown",
            json!({"endpoint": {"channelId": "C"}}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(err["message"]
        .as_str()
        .unwrap()
        .starts_with("Channel endpoint with identifier \"chendp_unknown\" not found"));
    let (status, err) = app
        .patch("/v1/channel-endpoints/chendp_unknown", json!({}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    for bad in [json!("C123"), json!(null), json!(["C"]), json!(7)] {
        let (status, err) = app
            .patch(
                "/v1/channel-endpoints/chendp_unknown",
                json!({"endpoint": bad}),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {err}");
        assert_eq!(err["errors"]["endpoint"]["value"], bad, "{err}");
    }

    // Create rules.
    let base = json!({"type": "slack_channel", "endpoint": {"channelId": "C"}, "integrationIdentifier": "slack-main", "subscriberId": "alice"});
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let (status, _) = app
        .post(
            "/v1/channel-endpoints",
            with("integrationIdentifier", json!("teams")),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "slack_channel needs a Slack integration"
    );
    let (status, err) = app
        .post(
            "/v1/channel-endpoints",
            with("integrationIdentifier", json!("nope")),
        )
        .await;
    assert_eq!(
        (status, err["message"].as_str().unwrap()),
        (StatusCode::NOT_FOUND, "Integration not found: nope")
    );
    let (status, err) = app
        .post(
            "/v1/channel-endpoints",
            with("subscriberId", json!("ghost")),
        )
        .await;
    assert_eq!(
        (status, err["message"].as_str().unwrap()),
        (StatusCode::NOT_FOUND, "Subscriber not found: ghost")
    );
    let (status, err) = app
        .post(
            "/v1/channel-endpoints",
            with("connectionIdentifier", json!("chconn_nope")),
        )
        .await;
    assert_eq!(
        (status, err["message"].as_str().unwrap()),
        (
            StatusCode::NOT_FOUND,
            "Channel connection not found: chconn_nope"
        )
    );
    let (status, _) = app
        .post("/v1/channel-endpoints", with("type", json!("pager")))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = app
        .post("/v1/channel-endpoints", with("subscriberId", Value::Null))
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "needs a subscriber or a context"
    );
    endpoint(&app, with("identifier", json!("mine"))).await;
    let (status, _) = app
        .post("/v1/channel-endpoints", with("identifier", json!("mine")))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    // A connection of another integration cannot be used.
    app.post("/v1/channel-connections", connection(json!({"subscriberId": "bob", "integrationIdentifier": "teams", "identifier": "teams-bob"}))).await;
    let (status, _) = app
        .post(
            "/v1/channel-endpoints",
            with("connectionIdentifier", json!("teams-bob")),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // Context-only endpoint.
    let e = endpoint(&app, json!({"type": "slack_channel", "endpoint": {"channelId": "C"}, "integrationIdentifier": "slack-main",
        "context": {"tenant": "acme"}})).await;
    assert_eq!(e["subscriberId"], Value::Null);
    assert_eq!(e["contextKeys"], json!(["tenant:acme"]));
    // Delete.
    let (status, _) = app.delete("/v1/channel-endpoints/mine").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app.get("/v1/channel-endpoints/mine").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.delete("/v1/channel-endpoints/mine").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(endpoints_types, endpoints_create_and_patch_per_type);

fn identifiers(page: &Value) -> Vec<String> {
    let mut v: Vec<String> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["identifier"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

async fn endpoint_list_filters(app: TestApp) {
    setup(&app).await;
    app.post(
        "/v1/channel-connections",
        connection(json!({"subscriberId": "alice", "identifier": "conn-a"})),
    )
    .await;
    let specs = [
        (
            "e1",
            "slack_channel",
            "slack-main",
            json!({"channelId": "C1"}),
            Some("alice"),
            json!({"tenant": "acme", "region": "eu"}),
            Some("conn-a"),
        ),
        (
            "e2",
            "slack_user",
            "slack-main",
            json!({"userId": "U1"}),
            Some("alice"),
            json!({"tenant": "acme"}),
            None,
        ),
        (
            "e3",
            "phone",
            "sms",
            json!({"phoneNumber": "+14155550123"}),
            Some("alice"),
            json!({}),
            None,
        ),
        (
            "e4",
            "webhook",
            "hook",
            json!({"url": "https://h.example/x"}),
            Some("bob"),
            json!({"region": "eu", "tenant": "acme"}),
            None,
        ),
        (
            "e5",
            "ms_teams_user",
            "teams",
            json!({"userId": "U2"}),
            None,
            json!({"tenant": "acme"}),
            None,
        ),
        (
            "e6",
            "telegram_chat",
            "tg",
            json!({"chatId": "7"}),
            Some("bob"),
            json!({}),
            None,
        ),
    ];
    for (id, t, integration, data, sub, ctx, conn) in specs {
        let mut body = json!({"identifier": id, "type": t, "endpoint": data, "integrationIdentifier": integration, "context": ctx});
        if let Some(s) = sub {
            body["subscriberId"] = json!(s);
        }
        if let Some(c) = conn {
            body["connectionIdentifier"] = json!(c);
        }
        endpoint(&app, body).await;
    }
    let app_ref = &app;
    let q = |query: &'static str| async move {
        let (status, page) = app_ref.get(&format!("/v1/channel-endpoints?{query}")).await;
        assert_eq!(status, StatusCode::OK, "{query}: {page}");
        page
    };
    assert_eq!(
        identifiers(&q("limit=100").await),
        ["e1", "e2", "e3", "e4", "e5", "e6"]
    );
    assert_eq!(
        identifiers(&q("subscriberId=alice").await),
        ["e1", "e2", "e3"]
    );
    assert_eq!(
        identifiers(&q("contextKeys=tenant:acme&contextKeys=region:eu").await),
        ["e1", "e4"]
    );
    assert_eq!(
        identifiers(&q("contextKeys=region:eu&contextKeys=tenant:acme").await),
        ["e1", "e4"],
        "order-insensitive"
    );
    assert_eq!(
        identifiers(&q("contextKeys=tenant:acme").await),
        ["e2", "e5"],
        "exact set, not subset"
    );
    assert_eq!(
        identifiers(&q("contextKeys[]=tenant:acme").await),
        ["e2", "e5"]
    );
    assert_eq!(
        identifiers(&q("contextKeys=").await),
        ["e3", "e6"],
        "empty means no context"
    );
    assert_eq!(identifiers(&q("channel=sms").await), ["e3"]);
    assert_eq!(
        identifiers(&q("channel=chat").await),
        ["e1", "e2", "e4", "e5", "e6"]
    );
    assert_eq!(identifiers(&q("providerId=slack").await), ["e1", "e2"]);
    assert_eq!(identifiers(&q("providerId=telegram").await), ["e6"]);
    assert_eq!(identifiers(&q("integrationIdentifier=hook").await), ["e4"]);
    assert_eq!(identifiers(&q("connectionIdentifier=conn-a").await), ["e1"]);
    // Combined with AND.
    assert_eq!(
        identifiers(&q("subscriberId=alice&contextKeys=tenant:acme").await),
        ["e2"]
    );
    assert_eq!(
        identifiers(&q("subscriberId=bob&channel=chat&providerId=telegram").await),
        ["e6"]
    );
    assert_eq!(identifiers(&q("subscriberId=alice&providerId=slack&integrationIdentifier=slack-main&connectionIdentifier=conn-a&channel=chat&contextKeys=region:eu&contextKeys=tenant:acme").await), ["e1"]);
    assert_eq!(
        identifiers(&q("subscriberId=bob&providerId=slack").await),
        Vec::<String>::new()
    );
    let page = q("subscriberId=alice").await;
    assert_eq!(page["totalCount"], 3);
    assert_eq!(page["totalCountCapped"], false);
    // Bad filters.
    for bad in [
        "providerId=carrier-pigeon",
        "channel=fax",
        "contextKeys=nocolon",
        "limit=101",
        "orderBy=identifier",
    ] {
        let (status, err) = app.get(&format!("/v1/channel-endpoints?{bad}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {err}");
    }
    // Default order: newest first.
    let (_, page) = app.get("/v1/channel-endpoints").await;
    let order: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["identifier"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["e6", "e5", "e4", "e3", "e2", "e1"]);
    // A list item is the endpoint as a single read shows it (the list writes the stored JSON as it is).
    for listed in page["data"].as_array().unwrap() {
        let id = listed["identifier"].as_str().unwrap();
        let (_, single) = app.get(&format!("/v1/channel-endpoints/{id}")).await;
        assert_eq!(listed, &single, "{id}");
    }
    let e1 = &page["data"][5];
    assert_eq!(e1["endpoint"], json!({"channelId": "C1"}));
    assert_eq!(e1["contextKeys"], json!(["region:eu", "tenant:acme"]));

    // Connections list with the same filters.
    app.post("/v1/channel-connections", connection(json!({"connectionMode": "shared", "context": {"tenant": "acme"}, "identifier": "conn-shared"}))).await;
    let (_, page) = app
        .get("/v1/channel-connections?connectionMode=shared")
        .await;
    assert_eq!(identifiers(&page), ["conn-shared"]);
    let (_, page) = app
        .get("/v1/channel-connections?contextKeys=tenant:acme")
        .await;
    assert_eq!(identifiers(&page), ["conn-shared"]);
    let (_, page) = app
        .get("/v1/channel-connections?subscriberId=alice&providerId=slack")
        .await;
    assert_eq!(identifiers(&page), ["conn-a"]);
    let (_, page) = app.get("/v1/channel-connections").await;
    assert_eq!(page["totalCount"], 2);
}
db_test!(endpoint_filters, endpoint_list_filters);

async fn endpoint_pages_walk_both_ways(app: TestApp) {
    setup(&app).await;
    let n = app
        .store
        .seed_channel_endpoints(&app.tenant, "slack-main", "s", 23, 2, 3)
        .await
        .unwrap();
    assert_eq!(n, 23);
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut url = "/v1/channel-endpoints?limit=5&orderDirection=ASC".to_owned();
    loop {
        let (_, page) = app.get(&url).await;
        assert_eq!(page["totalCount"], 23);
        for e in page["data"].as_array().unwrap() {
            seen.push(e["identifier"].as_str().unwrap().to_owned());
        }
        let next = page["next"].as_str().map(str::to_owned);
        pages.push(page);
        match next {
            Some(c) => url = format!("/v1/channel-endpoints?limit=5&orderDirection=ASC&after={c}"),
            None => break,
        }
    }
    assert_eq!(pages.len(), 5);
    assert_eq!(
        seen,
        (1..=23).map(|i| format!("chendp_s{i}")).collect::<Vec<_>>()
    );
    assert_eq!(pages[0]["previous"], Value::Null);
    assert!(pages[4]["previous"].is_string());
    // Backwards from the last page.
    let mut back = Vec::new();
    let mut cursor = pages[4]["previous"].as_str().unwrap().to_owned();
    loop {
        let (_, page) = app
            .get(&format!(
                "/v1/channel-endpoints?limit=5&orderDirection=ASC&before={cursor}"
            ))
            .await;
        let ids: Vec<String> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["identifier"].as_str().unwrap().to_owned())
            .collect();
        back.splice(0..0, ids);
        match page["previous"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(back, seen[..20].to_vec());
    // Filters over the seeded set: subscriber s0/s1 alternate, contexts t0/t1/t2 rotate.
    let (_, page) = app
        .get("/v1/channel-endpoints?subscriberId=s1&limit=100")
        .await;
    assert_eq!(page["totalCount"], 12);
    let (_, page) = app
        .get("/v1/channel-endpoints?contextKeys=tenant:t0&limit=100")
        .await;
    assert_eq!(page["totalCount"], 7);
    let (_, page) = app
        .get("/v1/channel-endpoints?contextKeys=tenant:t0&subscriberId=s0&limit=100")
        .await;
    assert_eq!(
        identifiers(&page),
        ["chendp_s12", "chendp_s18", "chendp_s6"]
    );
    // Ordered by updatedAt after a patch: the patched endpoint comes first.
    app.patch(
        "/v1/channel-endpoints/chendp_s3",
        json!({"endpoint": {"channelId": "NEW"}}),
    )
    .await;
    let (_, page) = app
        .get("/v1/channel-endpoints?orderBy=updatedAt&limit=1")
        .await;
    assert_eq!(page["data"][0]["identifier"], "chendp_s3");
}
db_test!(endpoint_pages, endpoint_pages_walk_both_ways);

async fn other_environments_see_nothing(app: TestApp) {
    setup(&app).await;
    app.post(
        "/v1/channel-connections",
        connection(json!({"subscriberId": "alice", "identifier": "c1"})),
    )
    .await;
    endpoint(&app, json!({"identifier": "e1", "type": "slack_channel", "endpoint": {"channelId": "C"}, "integrationIdentifier": "slack-main", "subscriberId": "alice"})).await;
    let other = app.second_environment("Production").await;
    for path in ["/v1/channel-connections/c1", "/v1/channel-endpoints/e1"] {
        let (status, _) = send(app.req_as(&other, Method::GET, path)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        let (status, _) = send(app.req_as(&other, Method::DELETE, path)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    let (status, _) = send(
        app.req_as(&other, Method::PATCH, "/v1/channel-endpoints/e1")
            .json(&json!({"endpoint": {"channelId": "X"}})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(
        app.req_as(&other, Method::PATCH, "/v1/channel-connections/c1")
            .json(&json!({"auth": {"accessToken": "x"}})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for path in [
        "/v1/channel-connections",
        "/v1/channel-endpoints",
        "/v1/channel-endpoints?subscriberId=alice",
    ] {
        let (_, page) = send(app.req_as(&other, Method::GET, path)).await;
        assert_eq!(page["totalCount"], 0, "{path}");
        assert_eq!(page["data"], json!([]));
    }
    // Their integrations and subscribers are not visible either.
    let (status, err) = send(
        app.req_as(&other, Method::POST, "/v1/channel-connections")
            .json(&connection(json!({"subscriberId": "alice"}))),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{err}");
    // The first environment still has everything.
    let (_, e) = app.get("/v1/channel-endpoints/e1").await;
    assert_eq!(e["endpoint"]["channelId"], "C");
    let (_, page) = app.get("/v1/channel-connections").await;
    assert_eq!(page["totalCount"], 1);
}
db_test!(isolation, other_environments_see_nothing);
