//! `idempotency-key` (design.md §3): replay, in-flight 409, different request 422, long key 400,
//! per environment, for POST/PUT/PATCH/DELETE, surviving a restart.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::db_test;
use crate::support::{assert_error, TestApp};

async fn keyed(
    app: &TestApp,
    method: Method,
    path: &str,
    key: &str,
    body: Option<serde_json::Value>,
) -> reqwest::Response {
    let mut req = app.req(method, path).header("idempotency-key", key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap()
}

async fn replay_and_mismatch(mut app: TestApp) {
    let body = json!({"subscriberId": "idem-1", "email": "i1@example.com"});
    let first = keyed(
        &app,
        Method::POST,
        "/v2/subscribers",
        "key-1",
        Some(body.clone()),
    )
    .await;
    assert_eq!(first.status(), StatusCode::CREATED);
    assert_eq!(first.headers()["idempotency-key"], "key-1");
    assert!(first.headers().get("idempotency-replay").is_none());
    let first_body: serde_json::Value = first.json().await.unwrap();

    let again = keyed(
        &app,
        Method::POST,
        "/v2/subscribers",
        "key-1",
        Some(body.clone()),
    )
    .await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers()["idempotency-replay"], "true");
    assert_eq!(again.headers()["idempotency-key"], "key-1");
    assert!(again.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let again_body: serde_json::Value = again.json().await.unwrap();
    assert_eq!(again_body, first_body, "the stored response, byte for byte");

    // Same key, different body → 422; nothing is created.
    let other = keyed(
        &app,
        Method::POST,
        "/v2/subscribers",
        "key-1",
        Some(json!({"subscriberId": "idem-2"})),
    )
    .await;
    assert_eq!(other.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(other.headers()["idempotency-key"], "key-1");
    let err: serde_json::Value = other.json().await.unwrap();
    assert_error(&err, 422);
    assert_eq!(
        err["message"],
        "Request with key \"key-1\" is being reused for a different body"
    );
    let (status, _) = app.get("/v2/subscribers/idem-2").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Same key on another path is a different request too.
    let other_path = keyed(
        &app,
        Method::PATCH,
        "/v2/subscribers/idem-1",
        "key-1",
        Some(body.clone()),
    )
    .await;
    assert_eq!(other_path.status(), StatusCode::UNPROCESSABLE_ENTITY);

    // PATCH twice with one key changes the subscriber once.
    let p1 = keyed(
        &app,
        Method::PATCH,
        "/v2/subscribers/idem-1",
        "patch-1",
        Some(json!({"firstName": "A"})),
    )
    .await;
    assert_eq!(p1.status(), StatusCode::OK);
    let p2 = keyed(
        &app,
        Method::PATCH,
        "/v2/subscribers/idem-1",
        "patch-1",
        Some(json!({"firstName": "A"})),
    )
    .await;
    assert_eq!(p2.headers()["idempotency-replay"], "true");
    let (_, s) = app.get("/v2/subscribers/idem-1").await;
    assert_eq!(s["__v"], 1);

    // DELETE with a key: the replay answers the stored 200 rather than a 404.
    let d1 = keyed(
        &app,
        Method::DELETE,
        "/v2/subscribers/idem-1",
        "del-1",
        None,
    )
    .await;
    assert_eq!(d1.status(), StatusCode::OK);
    let d2 = keyed(
        &app,
        Method::DELETE,
        "/v2/subscribers/idem-1",
        "del-1",
        None,
    )
    .await;
    assert_eq!(d2.status(), StatusCode::OK);
    assert_eq!(d2.headers()["idempotency-replay"], "true");

    // Errors below 500 are stored and replayed as well.
    let e1 = keyed(
        &app,
        Method::POST,
        "/v2/subscribers",
        "bad-1",
        Some(json!({"subscriberId": "x", "email": "no"})),
    )
    .await;
    assert_eq!(e1.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let e2 = keyed(
        &app,
        Method::POST,
        "/v2/subscribers",
        "bad-1",
        Some(json!({"subscriberId": "x", "email": "no"})),
    )
    .await;
    assert_eq!(e2.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(e2.headers()["idempotency-replay"], "true");

    // GET ignores the key but echoes it.
    let g = keyed(&app, Method::GET, "/v2/subscribers", "key-1", None).await;
    assert_eq!(g.status(), StatusCode::OK);
    assert_eq!(g.headers()["idempotency-key"], "key-1");
    assert!(g.headers().get("idempotency-replay").is_none());

    // Records live in the database: a restarted server replays them.
    app.restart().await;
    let after_restart = keyed(&app, Method::POST, "/v2/subscribers", "key-1", Some(body)).await;
    assert_eq!(after_restart.status(), StatusCode::CREATED);
    assert_eq!(after_restart.headers()["idempotency-replay"], "true");
    assert_eq!(
        after_restart.json::<serde_json::Value>().await.unwrap(),
        first_body
    );
}
db_test!(replay, replay_and_mismatch);

async fn in_flight_and_limits(app: TestApp) {
    // A request with this key is still running (recorded as in progress with the same request hash).
    let body = br#"{"subscriberId":"slow"}"#;
    let mut hashed = b"POST\n/v2/subscribers\n".to_vec();
    hashed.extend_from_slice(body);
    let hash = tidings::crypto::sha256_hex(&hashed);
    let begun = app
        .store
        .begin_idempotent(&app.tenant.environment_id, "busy", &hash, 60_000)
        .await
        .unwrap();
    assert_eq!(
        begun,
        tidings::store::idempotency::IdempotencyBegin::Started
    );
    let resp = app
        .req(Method::POST, "/v2/subscribers")
        .header("idempotency-key", "busy")
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(resp.headers()["retry-after"], "1");
    assert_eq!(resp.headers()["idempotency-key"], "busy");
    let err: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        err["message"],
        "Request with key \"busy\" is currently being processed. Please retry after 1 second"
    );
    let (status, _) = app.get("/v2/subscribers/slow").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "the conflicting request did not run"
    );

    // Keys over 255 characters are refused before anything runs.
    let long = "k".repeat(256);
    let resp = keyed(
        &app,
        Method::POST,
        "/v2/subscribers",
        &long,
        Some(json!({"subscriberId": "long"})),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let err: serde_json::Value = resp.json().await.unwrap();
    assert_error(&err, 400);
    assert!(err["message"]
        .as_str()
        .unwrap()
        .contains("exceeded the maximum allowed length of 255"));
    let (status, _) = app.get("/v2/subscribers/long").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let ok = "k".repeat(255);
    let resp = keyed(
        &app,
        Method::POST,
        "/v2/subscribers",
        &ok,
        Some(json!({"subscriberId": "long"})),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::CREATED);

    // Keys are per environment: another environment may use the same key for its own request.
    let other = app.second_environment("Other").await;
    let resp = app
        .req_as(&other, Method::POST, "/v2/subscribers")
        .header("idempotency-key", ok.as_str())
        .json(&json!({"subscriberId": "theirs"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert!(resp.headers().get("idempotency-replay").is_none());
}
db_test!(in_flight, in_flight_and_limits);
