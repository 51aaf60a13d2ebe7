//! The edge (issue #21): the NUL character is refused with a 422 wherever a client can send one (body strings
//! and keys, query names and values, path segments) on both databases, and every list input has a cap that
//! passes at the cap and answers a 422 stating it one past the cap.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, send, TestApp};

/// A 422 whose `errors` names `field` with a message about the NUL character.
fn assert_nul_refused(status: StatusCode, body: &Value, field: &str) {
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {body}");
    assert_error(body, 422);
    let messages = &body["errors"][field]["messages"];
    assert!(
        messages[0]
            .as_str()
            .is_some_and(|m| m.contains("NUL character")),
        "{field}: {body}"
    );
}

/// A raw JSON body (so that `\u0000` escapes reach the server exactly as written).
async fn post_raw(app: &TestApp, path: &str, body: &str) -> (StatusCode, Value) {
    send(
        app.req(Method::POST, path)
            .header("content-type", "application/json")
            .body(body.to_owned()),
    )
    .await
}

async fn inbox_workflow(app: &TestApp) {
    let (status, w) = app
        .post(
            "/v2/workflows",
            json!({"name": "Note", "workflowId": "note", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hi {{payload.name}}"}}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
}

async fn notification_count(app: &TestApp) -> usize {
    let (status, page) = app.get("/v1/notifications?limit=50").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["data"].as_array().unwrap().len()
}

async fn nul_in_bodies_is_refused(app: TestApp) {
    inbox_workflow(&app).await;

    // A string value, a key, and a string deep inside a trigger's payload; nothing is stored.
    let cases = [
        (
            "/v2/subscribers",
            r#"{"subscriberId": "nul-value", "firstName": "A\u0000da"}"#,
            "firstName",
        ),
        (
            "/v2/subscribers",
            r#"{"subscriberId": "nul-key", "data": {"pl\u0000an": "pro"}}"#,
            "data",
        ),
        (
            "/v2/subscribers",
            "{\"subscriberId\": \"nul-id\\u0000\"}",
            "subscriberId",
        ),
        (
            "/v1/events/trigger",
            r#"{"name": "note", "to": "nul-trigger", "payload": {"deep": {"list": ["ok", "x\u0000"]}}}"#,
            "payload.deep.list[1]",
        ),
        (
            "/v1/events/trigger",
            r#"{"name": "note", "to": [{"subscriberId": "nul-to", "lastName": "\u0000"}]}"#,
            "to[0].lastName",
        ),
        (
            "/v1/events/trigger/bulk",
            r#"{"events": [{"name": "note", "to": "nul-bulk", "payload": {"\u0000": 1}}]}"#,
            "events[0].payload",
        ),
        (
            "/v2/workflows",
            r#"{"name": "N\u0000", "steps": []}"#,
            "name",
        ),
        (
            "/v1/integrations",
            r#"{"providerId": "sendgrid", "channel": "email", "credentials": {"apiKey": "k\u0000"}}"#,
            "credentials.apiKey",
        ),
    ];
    for (path, body, field) in cases {
        let (status, out) = post_raw(&app, path, body).await;
        assert_nul_refused(status, &out, field);
    }
    for id in ["nul-value", "nul-key", "nul-trigger", "nul-to", "nul-bulk"] {
        let (status, _) = app.get(&format!("/v2/subscribers/{id}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id} was stored");
    }
    assert_eq!(notification_count(&app).await, 0);
    let (_, workflows) = app.get("/v2/workflows").await;
    assert_eq!(workflows["totalCount"], 1, "{workflows}");
    let (_, integrations) = app.get("/v1/integrations").await;
    assert_eq!(integrations.as_array().map(Vec::len), Some(0));

    // An escaped backslash followed by `u0000` is six ordinary characters, stored as sent.
    let (status, out) = post_raw(
        &app,
        "/v2/subscribers",
        r#"{"subscriberId": "not-nul", "firstName": "a\\u0000b"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["firstName"], "a\\u0000b");
    // And a trigger without NUL is accepted after the refused ones.
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "note", "to": "clean", "payload": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

db_test!(nul_in_bodies, nul_in_bodies_is_refused);

async fn nul_in_queries_and_paths_is_refused(app: TestApp) {
    app.subscriber("ada", json!({})).await;
    let queries = [
        ("/v2/subscribers?email=a%00b", "email"),
        ("/v2/subscribers?subscriberId=%00", "subscriberId"),
        ("/v1/notifications?transactionId=tx%00", "transactionId"),
        ("/v1/notifications?channels=email&channels=%00", "channels"),
        ("/v1/messages?subscriberId=ada%00", "subscriberId"),
        (
            "/v1/channel-endpoints?contextKeys=tenant:%00",
            "contextKeys",
        ),
        ("/v2/workflows?tags[]=x%00", "tags[]"),
        ("/v2/workflows?query=%00", "query"),
        ("/v2/subscribers?a%00b=1", "query"),
    ];
    for (path, field) in queries {
        let (status, out) = app.get(path).await;
        assert_nul_refused(status, &out, field);
    }
    let paths = [
        (Method::GET, "/v2/subscribers/ada%00", "subscriberId"),
        (Method::DELETE, "/v2/subscribers/ada%00", "subscriberId"),
        (
            Method::GET,
            "/v1/subscribers/ada%00/notifications/feed",
            "subscriberId",
        ),
        (Method::DELETE, "/v1/events/trigger/tx%00", "transactionId"),
        (Method::GET, "/v1/channel-endpoints/x%00y", "identifier"),
        (Method::GET, "/v1/notifications/%00", "notificationId"),
        (Method::GET, "/v2/workflows/w%00", "workflowId"),
    ];
    for (method, path, field) in paths {
        let (status, out) = send(app.req(method.clone(), path)).await;
        assert_nul_refused(status, &out, field);
    }
    let (status, out) = app
        .post(
            "/v1/subscribers/ada%00/messages/mark-all",
            json!({"markAs": "read"}),
        )
        .await;
    assert_nul_refused(status, &out, "subscriberId");
    // The subscriber is still there, unchanged, and no other was made.
    let (status, _) = app.get("/v2/subscribers/ada").await;
    assert_eq!(status, StatusCode::OK);
    let (_, page) = app.get("/v2/subscribers").await;
    assert_eq!(page["totalCount"], 1, "{page}");
}

db_test!(
    nul_in_queries_and_paths,
    nul_in_queries_and_paths_is_refused
);

/// A 422 naming `field` and stating `cap`.
fn assert_over_cap(status: StatusCode, body: &Value, field: &str, cap: usize) {
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {body}");
    assert_error(body, 422);
    let message = body["errors"][field]["messages"][0].as_str().unwrap_or("");
    assert!(
        message.contains(&format!("at most {cap}")) || message.contains(&format!("1 to {cap}")),
        "{field}: {body}"
    );
}

fn object_ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{i:024x}")).collect()
}

async fn mark_as_caps_message_ids(app: TestApp) {
    app.subscriber("meg", json!({})).await;
    let path = "/v1/subscribers/meg/messages/mark-as";
    let (status, out) = app
        .post(
            path,
            json!({"messageId": object_ids(1000), "markAs": "read"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out, json!([]), "unknown ids are ignored");
    for n in [1001, 40_000] {
        let (status, out) = app
            .post(path, json!({"messageId": object_ids(n), "markAs": "read"}))
            .await;
        assert_over_cap(status, &out, "messageId", 1000);
        assert_eq!(out["errors"]["messageId"]["value"], n);
    }
}

db_test!(mark_as_cap, mark_as_caps_message_ids);

async fn triggers_cap_events_and_recipients(app: TestApp) {
    inbox_workflow(&app).await;
    let recipients = |n: usize| -> Vec<String> { (0..n).map(|i| format!("r{i}")).collect() };
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "note", "to": recipients(100)}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "note", "to": recipients(101)}),
        )
        .await;
    assert_over_cap(status, &out, "to", 100);

    let events = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"name": "note", "to": format!("b{}", i % 3)}))
            .collect()
    };
    let (status, out) = app
        .post("/v1/events/trigger/bulk", json!({"events": events(100)}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out.as_array().map(Vec::len), Some(100));
    let (status, out) = app
        .post("/v1/events/trigger/bulk", json!({"events": events(101)}))
        .await;
    assert_over_cap(status, &out, "events", 100);
}

db_test!(trigger_caps, triggers_cap_events_and_recipients);

async fn workflows_cap_tags_steps_and_filters(app: TestApp) {
    let tags = |n: usize| -> Vec<String> { (0..n).map(|i| format!("t{i}")).collect() };
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Tagged", "workflowId": "tagged", "tags": tags(16)}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["tags"].as_array().map(Vec::len), Some(16));
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Overtagged", "tags": tags(17)}),
        )
        .await;
    assert_over_cap(status, &out, "tags", 16);
    let (status, out) = app
        .put(
            "/v2/workflows/tagged",
            json!({"name": "Tagged", "tags": tags(17)}),
        )
        .await;
    assert_over_cap(status, &out, "tags", 16);
    let (status, out) = app
        .patch("/v2/workflows/tagged", json!({"tags": tags(17)}))
        .await;
    assert_over_cap(status, &out, "tags", 16);
    let (status, out) = app
        .patch("/v2/workflows/tagged", json!({"tags": tags(15)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");

    let steps = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"name": format!("s{i}"), "type": "in_app", "controlValues": {"body": "x"}}))
            .collect()
    };
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Long", "workflowId": "long", "steps": steps(50)}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Longer", "steps": steps(51)}),
        )
        .await;
    assert_over_cap(status, &out, "steps", 50);

    let filter = json!({"isNegated": false, "type": "GROUP", "value": "AND",
        "children": [{"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"}]});
    let filtered = |n: usize| {
        json!({"name": format!("Filtered {n}"), "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "x"}, "filters": vec![filter.clone(); n]}
        ]})
    };
    let (status, out) = app.post("/v2/workflows", filtered(100)).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = app.post("/v2/workflows", filtered(101)).await;
    assert_over_cap(status, &out, "steps[0].filters", 100);

    let integration = |n: usize| {
        json!({"providerId": "sendgrid", "channel": "email", "name": format!("SG {n}"),
            "credentials": {"apiKey": "k", "from": "a@example.com"}, "conditions": vec![filter.clone(); n]})
    };
    let (status, out) = app.post("/v1/integrations", integration(100)).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = app.post("/v1/integrations", integration(101)).await;
    assert_over_cap(status, &out, "conditions", 100);
}

db_test!(workflow_caps, workflows_cap_tags_steps_and_filters);

/// The `i`th value of a repeated query parameter.
type ValueOf = fn(usize) -> String;

async fn repeated_query_parameters_are_capped(app: TestApp) {
    let repeated = |key: &str, value: ValueOf, n: usize| -> String {
        (0..n)
            .map(|i| format!("{key}={}", value(i)))
            .collect::<Vec<_>>()
            .join("&")
    };
    let context: ValueOf = |i| format!("tenant:t{i}");
    let plain: ValueOf = |i| format!("v{i}");
    let email: ValueOf = |i| format!("u{i}%40example.com");
    let object_id: ValueOf = |i| format!("{i:024x}");
    let channel: ValueOf = |i| ["email", "sms", "in_app", "chat", "push"][i % 5].to_owned();
    let severity: ValueOf = |i| ["high", "medium", "low", "none"][i % 4].to_owned();
    let status: ValueOf = |i| ["ACTIVE", "INACTIVE"][i % 2].to_owned();
    let cases = [
        ("/v1/notifications", "channels", channel),
        ("/v1/notifications", "severity", severity),
        ("/v1/notifications", "contextKeys", context),
        ("/v1/notifications", "templates", object_id),
        ("/v1/notifications", "emails", email),
        ("/v1/notifications", "subscriberIds", plain),
        ("/v1/messages", "transactionId", plain),
        ("/v1/channel-endpoints", "contextKeys", context),
        ("/v1/channel-connections", "contextKeys", context),
        ("/v2/workflows", "tags", plain),
        ("/v2/workflows", "status", status),
    ];
    for (path, key, value) in cases {
        let (status, out) = app
            .get(&format!("{path}?{}", repeated(key, value, 100)))
            .await;
        assert_eq!(status, StatusCode::OK, "{path} {key}: {out}");
        let (status, out) = app
            .get(&format!("{path}?{}", repeated(key, value, 101)))
            .await;
        assert_over_cap(status, &out, key, 100);
    }
}

db_test!(query_caps, repeated_query_parameters_are_capped);

/// `/openapi.json` lists the statuses the edge sends on every operation, and the content type the server
/// sends for a bare number or boolean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_lists_the_edge_statuses() {
    let app = TestApp::spawn(crate::support::Backend::Sqlite).await;
    let (status, doc) = send(app.client.get(app.url("/openapi.json"))).await;
    assert_eq!(status, StatusCode::OK);
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = &op["responses"];
            let has = |status: &str| responses.get(status).is_some();
            // Unsubscribe links answer HTML pages (their refusals are 400 pages, never a 422); the edge's
            // 413 is still the error body.
            let pages = path.starts_with("/v1/unsubscribe/");
            let public = path.starts_with("/v1/health-check") || pages;
            // The Inbox's session needs no credential but is rate-limited.
            let session = path == "/v1/inbox/session";
            assert_eq!(has("401"), !public && !session, "{method} {path}: 401");
            assert_eq!(has("429"), !public, "{method} {path}: 429");
            if op.get("requestBody").is_some() {
                assert!(
                    has("413") && has("422") != pages,
                    "{method} {path}: 413, 422"
                );
            }
            if op["parameters"].as_array().is_some_and(|p| !p.is_empty()) {
                assert!(has("422") != pages, "{method} {path}: 422");
            }
            // The Svix-compatible routes answer their handlers' refusals in Svix's shapes; the edge's (401,
            // 413, 429) are the error body.
            let svix = path.starts_with("/api/v1/app/");
            for (code, response) in responses.as_object().unwrap() {
                let schema = &response["content"]["application/json"]["schema"]["$ref"];
                if pages && code == "400" {
                    assert!(
                        response["content"]["text/html"].is_object(),
                        "{method} {path}"
                    );
                } else if svix
                    && !matches!(code.as_str(), "401" | "413" | "429")
                    && !code.starts_with('2')
                {
                    let expected = if code == "422" {
                        "#/components/schemas/SvixValidationOut"
                    } else {
                        "#/components/schemas/SvixErrorOut"
                    };
                    assert_eq!(schema, expected, "{method} {path}: {code}");
                } else if !code.starts_with('2') {
                    assert_eq!(
                        schema, "#/components/schemas/ErrorBody",
                        "{method} {path}: {code}"
                    );
                }
            }
            operations += 1;
        }
    }
    assert!(operations > 40, "{operations} operations");
    for path in [
        "/v1/channel-endpoints",
        "/v1/channel-connections",
        "/v2/subscribers",
    ] {
        assert!(
            doc["paths"][path]["get"]["responses"]["400"].is_object(),
            "{path}: 400 for after with before"
        );
    }
    let content = |path: &str, method: &str, status: &str| {
        doc["paths"][path][method]["responses"][status]["content"]
            .as_object()
            .map(|c| c.keys().cloned().collect::<Vec<_>>())
    };
    assert_eq!(
        content(
            "/v1/subscribers/{subscriberId}/messages/mark-all",
            "post",
            "201"
        ),
        Some(vec!["application/json".to_owned()])
    );
    assert_eq!(
        content("/v1/events/trigger/{transactionId}", "delete", "200"),
        Some(vec!["application/json".to_owned()])
    );
    let required = &doc["components"]["schemas"]["ErrorBody"]["required"];
    assert_eq!(
        required,
        &json!(["statusCode", "timestamp", "path", "message", "error"])
    );
}
