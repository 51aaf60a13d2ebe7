//! Authentication, error bodies, the two wire profiles, query parsing, health and the API reference.

use reqwest::{Method, StatusCode};
use serde_json::json;
use tidings::config::WireProfile;

use crate::db_test;
use crate::support::{assert_error, send, Backend, TestApp};

async fn unauthenticated_requests_get_401(app: TestApp) {
    let (status, body) = send(app.client.get(app.url("/v2/subscribers"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_error(&body, 401);
    assert_eq!(body["message"], "Missing authorization header");

    let cases = [
        ("Bearer abc", "Invalid authentication scheme: \"Bearer\""),
        ("apikey abc", "Invalid authentication scheme: \"apikey\""),
        ("ApiKey ", "Unauthorized"),
        ("ApiKey", "Unauthorized"),
        (
            "ApiKey 00000000000000000000000000000000",
            "API Key not found",
        ),
    ];
    for (header, message) in cases {
        let (status, body) = send(
            app.client
                .get(app.url("/v2/subscribers/x"))
                .header("Authorization", header),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{header}");
        assert_eq!(body["message"], message, "{header}");
        assert_eq!(body["path"], "/v2/subscribers/x");
    }
    // Every authenticated route refuses a request without a key.
    for (method, path) in [
        (Method::POST, "/v2/subscribers"),
        (Method::PATCH, "/v2/subscribers/a"),
        (Method::DELETE, "/v2/subscribers/a"),
        (Method::PUT, "/v1/subscribers/a/credentials"),
        (Method::GET, "/v1/integrations"),
        (Method::POST, "/v1/integrations"),
    ] {
        let (status, _) = send(app.client.request(method.clone(), app.url(path))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    // A valid key works.
    let (status, _) = app.get("/v2/subscribers").await;
    assert_eq!(status, StatusCode::OK);
}
db_test!(unauthenticated, unauthenticated_requests_get_401);

async fn health_docs_and_unknown_routes(app: TestApp) {
    let (status, body) = send(app.client.get(app.url("/v1/health-check"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
    let (status, body) = send(app.client.get(app.url("/v1/health-check/ready"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["database"], "up");

    let (status, body) = app.get("/v9/nothing-here?x=1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, 404);
    assert_eq!(body["path"], "/v9/nothing-here?x=1");

    let (status, doc) = send(app.client.get(app.url("/openapi.json"))).await;
    assert_eq!(status, StatusCode::OK);
    let paths = doc["paths"].as_object().expect("paths");
    let expect = [
        ("/v1/health-check", "get"),
        ("/v2/subscribers", "get"),
        ("/v2/subscribers", "post"),
        ("/v2/subscribers/{subscriberId}", "get"),
        ("/v2/subscribers/{subscriberId}", "patch"),
        ("/v2/subscribers/{subscriberId}", "delete"),
        ("/v1/subscribers/{subscriberId}/credentials", "put"),
        ("/v1/subscribers/{subscriberId}/credentials", "patch"),
        (
            "/v1/subscribers/{subscriberId}/credentials/{providerId}",
            "delete",
        ),
        ("/v1/integrations", "get"),
        ("/v1/integrations", "post"),
        ("/v1/integrations/active", "get"),
        ("/v1/integrations/{integrationId}", "put"),
        ("/v1/integrations/{integrationId}", "delete"),
        ("/v1/integrations/{integrationId}/set-primary", "post"),
        ("/v1/channel-connections", "get"),
        ("/v1/channel-connections", "post"),
        ("/v1/channel-connections/{identifier}", "get"),
        ("/v1/channel-connections/{identifier}", "patch"),
        ("/v1/channel-connections/{identifier}", "delete"),
        ("/v1/channel-endpoints", "get"),
        ("/v1/channel-endpoints", "post"),
        ("/v1/channel-endpoints/{identifier}", "get"),
        ("/v1/channel-endpoints/{identifier}", "patch"),
        ("/v1/channel-endpoints/{identifier}", "delete"),
        ("/v2/workflows", "get"),
        ("/v2/workflows", "post"),
        ("/v2/workflows/{workflowId}", "get"),
        ("/v2/workflows/{workflowId}", "put"),
        ("/v2/workflows/{workflowId}", "patch"),
        ("/v2/workflows/{workflowId}", "delete"),
        ("/v2/workflows/{workflowId}/step/{stepId}/preview", "post"),
        ("/v1/events/trigger", "post"),
        ("/v1/events/trigger/bulk", "post"),
        ("/v1/events/trigger/{transactionId}", "delete"),
        ("/v1/notifications", "get"),
        ("/v1/notifications/{notificationId}", "get"),
        ("/v1/messages", "get"),
        ("/v1/messages/{messageId}", "delete"),
        ("/v1/subscribers/{subscriberId}/notifications/feed", "get"),
        ("/v1/subscribers/{subscriberId}/notifications/unseen", "get"),
        ("/v1/subscribers/{subscriberId}/messages/mark-as", "post"),
        ("/v1/subscribers/{subscriberId}/messages/mark-all", "post"),
        ("/v1/subscribers/{subscriberId}/preferences", "get"),
        ("/v1/subscribers/{subscriberId}/preferences", "patch"),
        (
            "/v1/subscribers/{subscriberId}/preferences/{parameter}",
            "get",
        ),
        (
            "/v1/subscribers/{subscriberId}/preferences/{parameter}",
            "patch",
        ),
        ("/v1/health-check/ready", "get"),
    ];
    for (path, method) in expect {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "openapi lacks {method} {path}"
        );
    }
    assert!(doc["components"]["securitySchemes"]["ApiKey"].is_object());

    let resp = app.client.get(app.url("/docs")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let html = resp.text().await.unwrap();
    assert!(html.contains("/openapi.json") && html.contains("<html"));
}
db_test!(health_docs, health_docs_and_unknown_routes);

async fn server_errors_carry_an_error_id_and_no_internals(app: TestApp) {
    // Closing the pools makes every storage call fail: the client must see a generic 500.
    app.store.close().await;
    let (status, body) = app.get("/v2/subscribers/someone").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_error(&body, 500);
    assert!(
        body["errorId"].as_str().is_some_and(|id| id.len() == 36),
        "{body}"
    );
    let text = body.to_string().to_lowercase();
    assert!(
        !text.contains("pool") && !text.contains("sqlx") && !text.contains("closed"),
        "{body}"
    );
}
db_test!(
    server_errors,
    server_errors_carry_an_error_id_and_no_internals
);

async fn query_values_are_parsed_as_clients_send_them(app: TestApp) {
    for i in 0..3 {
        app.subscriber(&format!("q{i}"), json!({})).await;
    }
    let (status, body) = app.get("/v2/subscribers?limit=2.0&unknownKey=1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    let (status, body) = app.get("/v2/subscribers?limit=abc").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["errors"]["limit"]["messages"][0],
        "limit must be an integer"
    );
    assert_eq!(body["errors"]["limit"]["value"], "abc");
    let (status, _) = app.get("/v2/subscribers?limit=2.5").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, body) = app.get("/v2/subscribers?includeCursor=maybe").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body["errors"]["includeCursor"].is_object());
    // `+` is a space.
    app.subscriber(
        "spacey",
        json!({"firstName": "Grace", "lastName": "Hopper"}),
    )
    .await;
    let (_, body) = app.get("/v2/subscribers?name=Grace+Hop").await;
    assert_eq!(body["data"][0]["subscriberId"], "spacey");
}
db_test!(query_parsing, query_values_are_parsed_as_clients_send_them);

async fn novu_profile(backend: Backend) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    // Single objects are wrapped.
    let (status, body) = app
        .post(
            "/v2/subscribers",
            json!({"subscriberId": "n1", "email": "n1@example.com"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body["data"]["subscriberId"], "n1");
    assert_eq!(body.as_object().unwrap().len(), 1, "only `data`: {body}");
    let (_, body) = app.get("/v2/subscribers/n1").await;
    assert_eq!(body["data"]["email"], "n1@example.com");
    // Pages are not.
    let (_, body) = app.get("/v2/subscribers").await;
    assert_eq!(body["data"][0]["subscriberId"], "n1");
    assert_eq!(body["totalCount"], 1);
    // Identifiers carrying the service name are spelled `novu…`; both spellings are accepted on input.
    let (status, body) = app
        .post(
            "/v1/integrations",
            json!({"providerId": "svc", "channel": "in_app"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["data"]["providerId"], "novu");
    let (_, body) = app
        .post(
            "/v1/integrations",
            json!({"providerId": "novu-email", "channel": "email"}),
        )
        .await;
    assert_eq!(body["data"]["providerId"], "novu-email");
    let (_, list) = app.get("/v1/integrations").await;
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["providerId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["novu", "novu-email"]);
    // Also in a subscriber's channels, which the by-id read writes on the store's read thread.
    let (status, body) = app
        .post(
            "/v1/integrations",
            json!({"providerId": "novu-slack", "channel": "chat", "active": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = app
        .put(
            "/v1/subscribers/n1/credentials",
            json!({"providerId": "novu-slack", "credentials": {"webhookUrl": "https://hooks.example.com/n1"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, body) = app.get("/v2/subscribers/n1").await;
    assert_eq!(
        body["data"]["channels"][0]["providerId"], "novu-slack",
        "{body}"
    );
    assert_eq!(
        body["data"]["channels"][0]["credentials"]["webhookUrl"],
        "https://hooks.example.com/n1"
    );
    // Errors are never wrapped.
    let (status, body) = app.get("/v2/subscribers/missing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, 404);
}

async fn spec_profile(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, body) = app
        .post(
            "/v1/integrations",
            json!({"providerId": "novu", "channel": "in_app"}),
        )
        .await;
    assert_eq!(body["providerId"], "svc");
    assert!(body.get("data").is_none());
    let (_, list) = app.get("/v1/integrations").await;
    assert!(
        list.is_array(),
        "spec profile answers the array itself: {list}"
    );
    assert_eq!(list[0]["providerId"], "svc");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_profiles_sqlite() {
    novu_profile(Backend::Sqlite).await;
    spec_profile(Backend::Sqlite).await;
}

crate::postgres_test!(wire_profiles_postgres, async {
    novu_profile(Backend::Postgres).await;
    spec_profile(Backend::Postgres).await;
});
