//! Issue 36, limits: concurrent writes to one new subscriber all succeed.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::db_test;
use crate::support::{send, TestApp};

/// 30 concurrent writes that each change a new subscriber: every one answers 2xx (none loses on the version
/// check), and the record left is one of the writes'.
async fn concurrent_writes_to_a_new_subscriber_succeed(app: TestApp) {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Race", "workflowId": "race", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "hi"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let names: Vec<String> = (0..30).map(|i| format!("name-{i}")).collect();
    // POST /v2/subscribers (upsert), then triggers whose `to` carries a profile, then PATCH.
    let rounds: [(&str, fn(&TestApp, &str, &str) -> reqwest::RequestBuilder); 3] = [
        ("created", |app, id, name| {
            app.req(Method::POST, "/v2/subscribers")
                .json(&json!({"subscriberId": id, "firstName": name}))
        }),
        ("triggered", |app, id, name| {
            app.req(Method::POST, "/v1/events/trigger")
                .json(&json!({"name": "race", "to": {"subscriberId": id, "firstName": name}}))
        }),
        ("patched", |app, id, name| {
            app.req(Method::PATCH, &format!("/v2/subscribers/{id}"))
                .json(&json!({"firstName": name}))
        }),
    ];
    let mut failed = Vec::new();
    for (id, build) in rounds {
        if id == "patched" {
            let (status, out) = app
                .post("/v2/subscribers", json!({"subscriberId": id}))
                .await;
            assert_eq!(status, StatusCode::CREATED, "{out}");
        }
        let tasks: Vec<_> = names
            .iter()
            .map(|name| tokio::spawn(send(build(&app, id, name))))
            .collect();
        for t in tasks {
            let (status, body) = t.await.unwrap();
            if !status.is_success() {
                failed.push(format!("{id}: {status} {body}"));
            }
        }
        let (status, s) = app.get(&format!("/v2/subscribers/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{s}");
        let first = s["firstName"].as_str().unwrap_or_default();
        assert!(names.iter().any(|n| n == first), "{id}: {s}");
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
db_test!(
    concurrent_subscriber_writes,
    concurrent_writes_to_a_new_subscriber_succeed
);
