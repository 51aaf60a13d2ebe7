//! Workflows: create, retrieve by `_id` or identifier, list, replace, delete, validation, isolation.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, send, TestApp};

fn welcome() -> Value {
    json!({
        "name": "Welcome flow",
        "workflowId": "welcome",
        "description": "Greets new users",
        "tags": ["onboarding"],
        "severity": "high",
        "critical": true,
        "payloadSchema": {"type": "object", "properties": {"plan": {"type": "string"}}},
        "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"subject": "Hi {{subscriber.firstName}}", "body": "Welcome to {{payload.plan}}",
                "primaryAction": {"label": "Start", "redirect": {"url": "https://app.example.com/start", "target": "_blank"}}}},
            {"name": "Wait", "stepId": "wait-1", "type": "delay", "controlValues": {"amount": 5, "unit": "minutes"}},
            {"name": "Email", "type": "email", "controlValues": {"subject": "Welcome", "body": "<p>Hello</p>"},
                "filters": [{"isNegated": false, "type": "GROUP", "value": "AND", "children": [{"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"}]}]},
            {"name": "Call home", "type": "http_request", "controlValues": {"method": "POST", "url": "https://hooks.example.com/x", "body": {"a": "b"}}}
        ]
    })
}

async fn workflow_lifecycle(app: TestApp) {
    let (status, w) = app.post("/v2/workflows", welcome()).await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    let id = w["_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 24);
    assert_eq!(w["workflowId"], "welcome");
    assert_eq!(w["name"], "Welcome flow");
    assert_eq!(w["active"], true, "active by default");
    assert_eq!(w["status"], "ACTIVE");
    assert_eq!(w["severity"], "high");
    assert_eq!(w["critical"], true);
    assert_eq!(w["tags"], json!(["onboarding"]));
    assert_eq!(w["origin"], "svc-cloud");
    assert_eq!(w["payloadSchema"]["properties"]["plan"]["type"], "string");
    let steps = w["steps"].as_array().unwrap();
    let step_ids: Vec<&str> = steps
        .iter()
        .map(|s| s["stepId"].as_str().unwrap())
        .collect();
    assert_eq!(step_ids, ["inbox", "wait-1", "email", "call-home"]);
    let types: Vec<&str> = steps.iter().map(|s| s["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["in_app", "delay", "email", "http_request"]);
    assert_eq!(
        steps[0]["controlValues"]["body"],
        "Welcome to {{payload.plan}}"
    );
    assert_eq!(
        steps[0]["controls"]["values"]["body"],
        "Welcome to {{payload.plan}}"
    );
    assert_eq!(steps[2]["filters"][0]["children"][0]["field"], "plan");
    assert_eq!(steps[1]["workflowDatabaseId"], id.as_str());

    // Addressable by _id and by identifier.
    let (status, by_id) = app.get(&format!("/v2/workflows/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    let (_, by_identifier) = app.get("/v2/workflows/welcome").await;
    assert_eq!(by_id, by_identifier);
    assert_eq!(by_id, w);

    // Duplicate identifier.
    let (status, err) = app.post("/v2/workflows", welcome()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&err, 409);

    // Replace: steps matched by stepId keep their _id; a new step gets a new one.
    let inbox_id = steps[0]["_id"].clone();
    let (status, u) = app
        .put(
            "/v2/workflows/welcome",
            json!({"name": "Welcome v2", "active": false, "steps": [
                {"stepId": "inbox", "name": "Inbox", "type": "in_app", "controlValues": {"body": "New body"}},
                {"name": "SMS", "type": "sms", "controlValues": {"body": "Hi"}}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{u}");
    assert_eq!(u["name"], "Welcome v2");
    assert_eq!(u["workflowId"], "welcome", "kept when not given");
    assert_eq!(u["status"], "INACTIVE");
    assert_eq!(u["severity"], "high", "kept when not given");
    assert_eq!(u["steps"][0]["_id"], inbox_id);
    assert_eq!(u["steps"][0]["controlValues"], json!({"body": "New body"}));
    assert_eq!(u["steps"].as_array().unwrap().len(), 2);
    assert!(u["updatedAt"].as_str() > w["updatedAt"].as_str());

    // List.
    app.post("/v2/workflows", json!({"name": "Second", "steps": []}))
        .await;
    let (_, page) = app.get("/v2/workflows").await;
    assert_eq!(page["totalCount"], 2);
    let ids: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workflowId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["second", "welcome"]);
    let (_, page) = app.get("/v2/workflows?limit=1&orderDirection=ASC").await;
    assert_eq!(page["data"][0]["workflowId"], "welcome");
    assert!(page["next"].is_string());

    // Delete.
    let (status, _) = app.delete(&format!("/v2/workflows/{id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app.get("/v2/workflows/welcome").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.delete("/v2/workflows/welcome").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.post("/v2/workflows", welcome()).await;
    assert_eq!(status, StatusCode::CREATED, "the identifier is free again");
}
db_test!(lifecycle, workflow_lifecycle);

async fn workflow_validation(app: TestApp) {
    let cases = [
        (json!({"steps": []}), "name"),
        (
            json!({"name": "x", "workflowId": "has space"}),
            "workflowId",
        ),
        (json!({"name": "x", "severity": "urgent"}), "severity"),
        (
            json!({"name": "x", "steps": [{"type": "carrier_pigeon"}]}),
            "steps[0].type",
        ),
        (
            json!({"name": "x", "steps": [{"type": "email", "stepId": "a"}, {"type": "sms", "stepId": "a"}]}),
            "steps[1].stepId",
        ),
        (
            json!({"name": "x", "steps": [{"type": "delay", "controlValues": {"amount": 5, "unit": "years"}}]}),
            "steps[0].controlValues.unit",
        ),
        (
            json!({"name": "x", "steps": [{"type": "email", "controlValues": {"subject": 5}}]}),
            "steps[0].controlValues.subject",
        ),
        (
            json!({"name": "x", "steps": [{"type": "email", "controlValues": "text"}]}),
            "steps[0].controlValues",
        ),
        (
            json!({"name": "x", "steps": [{"type": "email", "filters": {"a": 1}}]}),
            "steps[0].filters",
        ),
        (
            json!({"name": "x", "steps": [{"type": "http_request", "controlValues": {"method": "FETCH"}}]}),
            "steps[0].controlValues.method",
        ),
        (
            json!({"name": "x", "payloadSchema": "nope"}),
            "payloadSchema",
        ),
    ];
    for (body, field) in cases {
        let (status, err) = app.post("/v2/workflows", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} → {err}");
        assert!(
            err["errors"][field]["messages"][0].is_string(),
            "{body} → {err}"
        );
    }
    let (_, page) = app.get("/v2/workflows").await;
    assert_eq!(page["totalCount"], 0);
    let (status, _) = app.put("/v2/workflows/nope", json!({"name": "x"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(validation, workflow_validation);

async fn workflows_are_isolated(app: TestApp) {
    let (_, w) = app.post("/v2/workflows", welcome()).await;
    let other = app.second_environment("Production").await;
    for path in [
        "/v2/workflows/welcome".to_owned(),
        format!("/v2/workflows/{}", w["_id"].as_str().unwrap()),
    ] {
        let (status, _) = send(app.req_as(&other, Method::GET, &path)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _) = send(app.req_as(&other, Method::DELETE, &path)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let (_, page) = send(app.req_as(&other, Method::GET, "/v2/workflows")).await;
    assert_eq!(page["totalCount"], 0);
    let (status, _) = send(
        app.req_as(&other, Method::POST, "/v2/workflows")
            .json(&welcome()),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "same identifier in another environment"
    );
    let (status, _) = app.get("/v2/workflows/welcome").await;
    assert_eq!(status, StatusCode::OK);
}
db_test!(isolation, workflows_are_isolated);
