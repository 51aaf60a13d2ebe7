//! Outbound webhooks (issue 39): the Svix-compatible endpoint routes beyond what the official clients' scenarios
//! (`novu_sdk::webhook_endpoints_*`) drive — the authentication scheme of each family of routes, concurrent
//! creates through `PUT`, the cap on an environment's endpoints, and bodies that are not JSON objects.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{count, TestApp};

fn endpoints(app: &TestApp) -> String {
    format!("/api/v1/app/{}/endpoint", app.application_identifier)
}

async fn bearer(
    app: &TestApp,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    crate::inbox::call(app, &app.key, method, path, body).await
}

/// The Svix routes take the key as `Bearer`, Novu's as `ApiKey`; neither takes the other's. Every app name the
/// clients may use (the applicationIdentifier, the environment's id, Novu's `o-…-e-…` uid) is the key's
/// environment.
async fn schemes_and_app_names(app: TestApp) {
    let (status, _) = bearer(&app, Method::GET, &endpoints(&app), None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app.get(&endpoints(&app)).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "ApiKey on a Svix route: {body}"
    );
    let (status, body) = bearer(&app, Method::GET, "/v2/subscribers", None).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "Bearer on a Novu route: {body}"
    );

    let env = app.tenant.environment_id.as_str();
    let org = app.tenant.organization_id.as_str();
    for name in [env.to_owned(), format!("o-{org}-e-{env}")] {
        let (status, body) = bearer(
            &app,
            Method::POST,
            &format!("/api/v1/app/{name}/endpoint"),
            Some(json!({"url": "https://example.com/hook"})),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {body}");
    }
    let (_, page) = bearer(&app, Method::GET, &endpoints(&app), None).await;
    assert_eq!(page["data"].as_array().unwrap().len(), 2, "{page}");
    let (status, body) = bearer(&app, Method::GET, "/api/v1/app/app_unknown/endpoint", None).await;
    assert_eq!(
        (status, &body["code"]),
        (StatusCode::NOT_FOUND, &json!("not_found")),
        "{body}"
    );
    // Not a JSON object: Svix's validation shape.
    let resp = app
        .client
        .post(app.url(&endpoints(&app)))
        .header("Authorization", format!("Bearer {}", app.key))
        .body("[1, 2]")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = resp.json().await.unwrap();
    assert!(body["detail"][0]["msg"].is_string(), "{body}");
    // A method the route does not have is a 404, as an unknown route.
    let (status, _) = bearer(&app, Method::DELETE, &endpoints(&app), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(webhook_schemes_and_app_names, schemes_and_app_names);

/// Concurrent `PUT`s of one unknown uid create it once; the others replace it.
async fn concurrent_replaces_create_once(app: TestApp) {
    let url = app.url(&format!("{}/shared-hook", endpoints(&app)));
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..6 {
        let (client, url, key) = (app.client.clone(), url.clone(), app.key.clone());
        calls.spawn(async move {
            let resp = client
                .put(url)
                .header("Authorization", format!("Bearer {key}"))
                .json(&json!({"url": format!("https://example.com/{i}"), "description": format!("call {i}")}))
                .send()
                .await
                .unwrap();
            let status = resp.status();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        });
    }
    let answers = calls.join_all().await;
    let created = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    assert_eq!(created, 1, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|(s, b)| matches!(*s, StatusCode::CREATED | StatusCode::OK)
                && b["uid"] == "shared-hook"),
        "{answers:?}"
    );
    let n = count(
        &app,
        "select count(*) from webhook_endpoints where environment_id = $1",
        app.tenant.environment_id.as_str(),
    )
    .await;
    assert_eq!(n, 1);
}
db_test!(webhook_concurrent_replaces, concurrent_replaces_create_once);

/// An environment holds at most 100 endpoints; deleting one makes room.
async fn endpoints_are_capped(app: TestApp) {
    let mut last = Value::Null;
    for i in 0..100 {
        let (status, body) = bearer(
            &app,
            Method::POST,
            &endpoints(&app),
            Some(json!({"url": format!("https://example.com/{i}")})),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{i}: {body}");
        last = body;
    }
    let (status, body) = bearer(
        &app,
        Method::POST,
        &endpoints(&app),
        Some(json!({"url": "https://example.com/one-too-many"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("at most 100"),
        "{body}"
    );
    let one = format!("{}/{}", endpoints(&app), last["id"].as_str().unwrap());
    let (status, _) = bearer(&app, Method::DELETE, &one, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = bearer(
        &app,
        Method::POST,
        &endpoints(&app),
        Some(json!({"url": "https://example.com/room"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
db_test!(webhook_endpoints_capped, endpoints_are_capped);
