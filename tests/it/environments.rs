//! The environments an API key sees (issue 24): their public identifiers, the Inbox's `applicationIdentifier`,
//! never a key.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::db_test;
use crate::support::{send, TestApp};

fn identifier(e: &Value) -> &str {
    e["identifier"]
        .as_str()
        .unwrap_or_else(|| panic!("no identifier in {e}"))
}

async fn environments(app: TestApp) {
    let other_key = app.second_environment("Other").await;
    let (status, listed) = app.get("/v1/environments").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    // The `svc` wire profile: single bodies unwrapped (the `novu` profile wraps them in `data`).
    let listed = listed
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .clone();
    let names: Vec<&str> = listed.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names.last(), Some(&"Other"), "{listed:?}");
    for e in &listed {
        let id = identifier(e);
        assert_eq!(id.len(), 12, "{e}");
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{e}"
        );
        assert_eq!(
            e.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["_id", "_organizationId", "identifier", "name"],
            "only these members, never a key: {e}"
        );
    }
    assert_ne!(identifier(&listed[0]), identifier(&listed[1]));

    // `me` is the key's own environment.
    let (status, me) = app.get("/v1/environments/me").await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["_id"], app.tenant.environment_id.0.as_str());
    let (status, other) = send(app.req_as(&other_key, Method::GET, "/v1/environments/me")).await;
    assert_eq!(status, StatusCode::OK, "{other}");
    assert_eq!(other["name"], "Other");
    assert_eq!(other["identifier"], listed.last().unwrap()["identifier"]);

    // The CLI's list shows the same identifiers.
    let summaries = tidings::service::environments::list(&app.store)
        .await
        .unwrap();
    for e in &listed {
        let s = summaries
            .iter()
            .find(|s| s.environment_id.as_str() == e["_id"])
            .unwrap();
        assert_eq!(s.application_identifier, identifier(e));
    }

    let (status, _) = send(app.client.get(app.url("/v1/environments"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
db_test!(environments_and_identifiers, environments);
