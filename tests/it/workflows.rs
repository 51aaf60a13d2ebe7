//! Workflows: create, retrieve by `_id` or identifier, list, replace, delete, validation, isolation.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tidings::config::WireProfile;

use crate::db_test;
use crate::support::{assert_error, send, settled, Backend, TestApp};

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
    let ids: Vec<&str> = page["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workflowId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["second", "welcome"]);
    let (_, page) = app.get("/v2/workflows?limit=1&orderDirection=ASC").await;
    assert_eq!(page["workflows"][0]["workflowId"], "welcome");
    assert_eq!(page["workflows"].as_array().unwrap().len(), 1);

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

    // Preferences: every bad field of `{user, workflow}` at once, with its value.
    let (status, err) = app
        .post(
            "/v2/workflows",
            json!({"name": "x", "preferences": {
                "user": {"all": {"enabled": "yes"}, "channels": {"fax": {"enabled": true}, "email": {"enabled": 1}}},
                "workflow": {"channels": {}},
                "other": 1
            }}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    let errors = err["errors"].as_object().unwrap();
    let mut fields: Vec<&str> = errors.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "preferences.other",
            "preferences.user.all.enabled",
            "preferences.user.channels.email.enabled",
            "preferences.user.channels.fax",
            "preferences.workflow.all"
        ],
        "{err}"
    );
    assert_eq!(errors["preferences.user.all.enabled"]["value"], "yes");
    assert_eq!(
        errors["preferences.user.channels.email.enabled"]["value"],
        1
    );
    for bad in [json!("all"), json!({"user": []})] {
        let (status, err) = app
            .post("/v2/workflows", json!({"name": "x", "preferences": bad}))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad} → {err}");
    }
    let (_, page) = app.get("/v2/workflows").await;
    assert_eq!(page["totalCount"], 0, "nothing was stored");
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

/// `{workflows, totalCount}` in both profiles (wrapped as `{data: …}` in `novu`), items as Novu's
/// WorkflowListResponseDto, Novu's query parameters, validated.
async fn list_shape_filters_and_paging(backend: Backend) {
    for profile in [WireProfile::Spec, WireProfile::Novu] {
        let app = TestApp::spawn_with(backend, profile).await;
        let unwrap = |body: Value| match profile {
            WireProfile::Spec => body,
            WireProfile::Novu => {
                assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
                body["data"].clone()
            }
        };
        for (name, tags, active, body) in [
            ("Alpha", json!(["ops"]), true, "Hi"),
            ("beta digest", json!(["billing", "ops"]), false, "Hi"),
            ("Gamma", json!([]), true, "Hello {{ payload.name "),
        ] {
            let (status, out) = app
                .post(
                    "/v2/workflows",
                    json!({"name": name, "tags": tags, "active": active, "steps": [
                        {"name": "Inbox", "type": "in_app", "controlValues": {"body": body}},
                        {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "hours"}}
                    ]}),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{out}");
        }
        let (status, page) = app.get("/v2/workflows").await;
        assert_eq!(status, StatusCode::OK);
        let page = unwrap(page);
        let mut keys: Vec<&String> = page.as_object().unwrap().keys().collect();
        keys.sort_unstable();
        assert_eq!(keys, ["totalCount", "workflows"], "{profile:?}: {page}");
        assert_eq!(page["totalCount"], 3);
        let items = page["workflows"].as_array().unwrap();
        let ids: Vec<&str> = items
            .iter()
            .map(|w| w["workflowId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["gamma", "beta-digest", "alpha"], "newest first");
        let alpha = &items[2];
        for key in [
            "_id",
            "slug",
            "name",
            "createdAt",
            "updatedAt",
            "origin",
            "status",
        ] {
            assert!(alpha[key].is_string(), "{key}: {alpha}");
        }
        assert_eq!(alpha["stepTypeOverviews"], json!(["in_app", "delay"]));
        assert_eq!(
            alpha["steps"],
            json!([{"slug": "inbox", "type": "in_app"}, {"slug": "wait", "type": "delay"}])
        );
        assert_eq!(alpha["tags"], json!(["ops"]));
        assert_eq!(alpha["status"], "ACTIVE");
        let origin = match profile {
            WireProfile::Spec => "svc-cloud",
            WireProfile::Novu => "novu-cloud",
        };
        assert_eq!(alpha["origin"], origin);
        assert_eq!(items[1]["status"], "INACTIVE");
        assert_eq!(items[0]["status"], "ERROR");
        assert_eq!(
            items[0]["steps"][0]["issues"]["controls"]["body"][0]["issueType"],
            "ILLEGAL_VARIABLE_IN_CONTROL_VALUE"
        );
        assert!(alpha.get("description").is_none(), "{alpha}");

        let names = |page: &Value| -> Vec<String> {
            page["workflows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["workflowId"].as_str().unwrap().to_owned())
                .collect()
        };
        for (query, expected, total) in [
            (
                "orderBy=name&orderDirection=ASC",
                vec!["alpha", "beta-digest", "gamma"],
                3,
            ),
            (
                "orderBy=name&orderDirection=DESC&limit=1&offset=1",
                vec!["beta-digest"],
                3,
            ),
            (
                "orderBy=updatedAt&orderDirection=ASC&limit=2",
                vec!["alpha", "beta-digest"],
                3,
            ),
            ("offset=3", vec![], 3),
            ("query=DIGE", vec!["beta-digest"], 1),
            ("query=gam", vec!["gamma"], 1),
            ("query=%25", vec![], 0),
            ("tags=ops", vec!["beta-digest", "alpha"], 2),
            ("tags=billing&tags=none", vec!["beta-digest"], 1),
            ("status=ACTIVE", vec!["alpha"], 1),
            (
                "status=INACTIVE&status=ERROR",
                vec!["gamma", "beta-digest"],
                2,
            ),
            ("status=ERROR&tags=ops", vec![], 0),
            ("limit=2.0", vec!["gamma", "beta-digest"], 3),
        ] {
            let (status, page) = app.get(&format!("/v2/workflows?{query}")).await;
            assert_eq!(status, StatusCode::OK, "{query}: {page}");
            let page = unwrap(page);
            assert_eq!(names(&page), expected, "{query}");
            assert_eq!(page["totalCount"], total, "{query}");
        }
        let (status, err) = app
            .get("/v2/workflows?limit=0&offset=-1&orderBy=lastTriggeredAt&orderDirection=sideways&status=DRAFT")
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
        assert_error(&err, 422);
        for field in ["limit", "offset", "orderBy", "orderDirection", "status"] {
            assert!(
                err["errors"][field]["messages"][0].is_string(),
                "{field}: {err}"
            );
        }
        assert_eq!(err["errors"]["status"]["value"], "DRAFT");
        let (status, _) = app.get("/v2/workflows?limit=101").await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    }
}
db_test!(list, list_shape_filters_and_paging, backend);

/// A workflow without a description has no `description` key (never `null`), on create, get, list, PUT
/// and PATCH.
async fn description_is_absent_when_unset(app: TestApp) {
    let (status, w) = app
        .post("/v2/workflows", json!({"name": "Plain", "steps": []}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert!(w.get("description").is_none(), "{w}");
    let (_, got) = app.get("/v2/workflows/plain").await;
    assert!(got.get("description").is_none(), "{got}");
    let (_, put) = app
        .put("/v2/workflows/plain", json!({"name": "Plain", "steps": []}))
        .await;
    assert!(put.get("description").is_none(), "{put}");
    let (_, patched) = app
        .patch("/v2/workflows/plain", json!({"description": "Now set"}))
        .await;
    assert_eq!(patched["description"], "Now set");
    let (_, patched) = app
        .patch("/v2/workflows/plain", json!({"description": null}))
        .await;
    assert!(patched.get("description").is_none(), "{patched}");
}
db_test!(description, description_is_absent_when_unset);

/// Preferences are stored as sent and answered as Novu's `{user, default}`; `{user: null, workflow: null}`
/// round-trips.
async fn preferences_round_trip(app: TestApp) {
    let user = json!({"all": {"enabled": false, "readOnly": true}, "channels": {"email": {"enabled": false}}});
    let workflow =
        json!({"all": {"enabled": true}, "channels": {"sms": {"enabled": false}, "in_app": {}}});
    let defaults = json!({"all": {"enabled": true, "readOnly": false}, "channels": {
        "in_app": {"enabled": true}, "email": {"enabled": true}, "sms": {"enabled": true},
        "chat": {"enabled": true}, "push": {"enabled": true}}});

    let (status, w) = app
        .post(
            "/v2/workflows",
            json!({"name": "Prefs", "preferences": {"user": user, "workflow": workflow}, "steps": []}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert_eq!(w["preferences"], json!({"user": user, "default": workflow}));
    let (_, got) = app.get("/v2/workflows/prefs").await;
    assert_eq!(
        got["preferences"],
        json!({"user": user, "default": workflow})
    );

    // PUT without preferences keeps them.
    let (_, put) = app
        .put("/v2/workflows/prefs", json!({"name": "Prefs", "steps": []}))
        .await;
    assert_eq!(
        put["preferences"],
        json!({"user": user, "default": workflow})
    );

    // PUT with both levels null: no user preferences, the defaults.
    let (status, put) = app
        .put(
            "/v2/workflows/prefs",
            json!({"name": "Prefs", "preferences": {"user": null, "workflow": null}, "steps": []}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{put}");
    assert_eq!(
        put["preferences"],
        json!({"user": null, "default": defaults})
    );
    let (_, got) = app.get("/v2/workflows/prefs").await;
    assert_eq!(
        got["preferences"],
        json!({"user": null, "default": defaults})
    );

    // Only the user level.
    let (_, put) = app
        .put(
            "/v2/workflows/prefs",
            json!({"name": "Prefs", "preferences": {"user": user}, "steps": []}),
        )
        .await;
    assert_eq!(
        put["preferences"],
        json!({"user": user, "default": defaults})
    );

    // Without preferences at all: no user level, the defaults.
    let (_, w) = app
        .post("/v2/workflows", json!({"name": "None", "steps": []}))
        .await;
    assert_eq!(w["preferences"], json!({"user": null, "default": defaults}));
}
db_test!(preferences, preferences_round_trip);

/// `PATCH /v2/workflows/{workflowId}`: absent fields unchanged, `null` clears description and payloadSchema,
/// every bad field in one 422, 404 naming the id, idempotent, answered like GET (enveloped in `novu`).
async fn patch_changes_only_what_is_sent(backend: Backend) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let (status, created) = app.post("/v2/workflows", welcome()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let w = created["data"].clone();

    let (status, out) = app
        .patch("/v2/workflows/welcome", json!({"active": false}))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let p = out["data"].clone();
    assert_eq!(p["active"], false);
    assert_eq!(p["status"], "INACTIVE");
    for key in [
        "name",
        "description",
        "tags",
        "payloadSchema",
        "validatePayload",
        "steps",
        "severity",
        "critical",
        "preferences",
    ] {
        assert_eq!(p[key], w[key], "{key} unchanged");
    }
    assert!(p["updatedAt"].as_str() > w["updatedAt"].as_str());

    let id = w["_id"].as_str().unwrap();
    let (status, out) = app
        .patch(
            &format!("/v2/workflows/{id}"),
            json!({"name": "Renamed", "description": null, "tags": ["a", "b"], "active": true,
                   "payloadSchema": null, "validatePayload": true, "isTranslationEnabled": false}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let p = out["data"].clone();
    assert_eq!(p["name"], "Renamed");
    assert!(p.get("description").is_none(), "{p}");
    assert_eq!(p["tags"], json!(["a", "b"]));
    assert_eq!(
        (p["active"].clone(), p["status"].clone()),
        (json!(true), json!("ACTIVE"))
    );
    assert_eq!(p["payloadSchema"], Value::Null);
    assert_eq!(p["validatePayload"], true);
    assert_eq!(p["workflowId"], "welcome");
    let (_, got) = app.get("/v2/workflows/welcome").await;
    assert_eq!(got, out, "answered like GET");

    // Every bad field at once, with its value; nothing changes.
    let (status, err) = app
        .patch(
            "/v2/workflows/welcome",
            json!({"active": "yes", "name": 5, "description": 7, "tags": "x", "validatePayload": 1,
                   "isTranslationEnabled": "no"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_error(&err, 422);
    for (field, value) in [
        ("active", json!("yes")),
        ("name", json!(5)),
        ("description", json!(7)),
        ("tags", json!("x")),
        ("validatePayload", json!(1)),
        ("isTranslationEnabled", json!("no")),
    ] {
        assert_eq!(err["errors"][field]["value"], value, "{field}: {err}");
    }
    for body in [json!({"name": "  "}), json!({"payloadSchema": "nope"})] {
        let (status, err) = app.patch("/v2/workflows/welcome", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} → {err}");
    }
    let (_, got) = app.get("/v2/workflows/welcome").await;
    assert_eq!(got["data"]["name"], "Renamed");

    let (status, err) = app
        .patch(
            "/v2/workflows/0123456789abcdef01234567",
            json!({"active": true}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&err, 404);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("0123456789abcdef01234567"),
        "{err}"
    );

    // Idempotent like every PATCH.
    let send_once = || {
        send(
            app.req(Method::PATCH, "/v2/workflows/welcome")
                .header("idempotency-key", "patch-1")
                .json(&json!({"name": "Once"})),
        )
    };
    let (status, first) = send_once().await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let resp = app
        .req(Method::PATCH, "/v2/workflows/welcome")
        .header("idempotency-key", "patch-1")
        .json(&json!({"name": "Once"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["idempotency-replay"], "true");
    let replay: Value = resp.json().await.unwrap();
    assert_eq!(replay, first);
}
db_test!(patch, patch_changes_only_what_is_sent, backend);

/// A broken template is saved (as Novu does) with Novu-style step issues and status ERROR; fixing it
/// clears them; a job reaching the step fails and says why.
async fn broken_templates_are_saved_with_issues(app: TestApp) {
    let body = json!({"name": "Broken", "steps": [
        {"name": "Inbox", "type": "in_app", "controlValues": {
            "subject": "Fine {{ payload.name }}",
            "body": "Hello {{ payload.name ",
            "primaryAction": {"label": "{% if %}", "redirect": {"url": "https://x.example"}}}},
        {"name": "Mail", "type": "email", "controlValues": {"subject": "{{ payload.x | nosuchfilter }}", "body": "<p>ok</p>"}},
        {"name": "Text", "type": "sms", "controlValues": {"body": "fine"}}
    ]});
    let (status, w) = app.post("/v2/workflows", body).await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert_eq!(w["active"], true);
    assert_eq!(w["status"], "ERROR");
    let inbox = &w["steps"][0]["issues"]["controls"];
    let mut keys: Vec<&String> = inbox.as_object().unwrap().keys().collect();
    keys.sort_unstable();
    assert_eq!(keys, ["body", "primaryAction.label"], "{inbox}");
    let issue = &inbox["body"][0];
    assert_eq!(issue["issueType"], "ILLEGAL_VARIABLE_IN_CONTROL_VALUE");
    assert!(
        issue["variableName"]
            .as_str()
            .unwrap()
            .contains("{{ payload.name"),
        "{issue}"
    );
    assert!(issue["message"].as_str().unwrap().len() > 10, "{issue}");
    let mail = &w["steps"][1]["issues"]["controls"]["subject"][0];
    assert_eq!(mail["issueType"], "ILLEGAL_VARIABLE_IN_CONTROL_VALUE");
    assert!(
        mail["message"].as_str().unwrap().contains("nosuchfilter"),
        "{mail}"
    );
    assert!(w["steps"][2].get("issues").is_none(), "{w}");
    let (_, got) = app.get("/v2/workflows/broken").await;
    assert_eq!(got, w);

    // A trigger is accepted; the job reaching the in-app step fails, naming the issue.
    app.subscriber("ann", json!({})).await;
    let (status, out) = app
        .post("/v1/events/trigger", json!({"name": "broken", "to": "ann", "transactionId": "t-broken", "payload": {"name": "Ann"}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let items = settled(&app, "t-broken", 1).await;
    let job = &items[0]["jobs"][0];
    assert_eq!(job["status"], "failed", "{job}");
    let detail = job["executionDetails"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["status"] == "Failed")
        .unwrap_or_else(|| panic!("no failed detail: {job}"));
    let text = detail["detail"].as_str().unwrap();
    assert!(text.contains("issues") && text.contains("body:"), "{text}");
    let (_, messages) = app
        .get("/v1/messages?transactionId=t-broken&channel=in_app")
        .await;
    assert_eq!(messages["data"], json!([]), "no message was created");

    // Fixing the templates clears the issues.
    let (status, fixed) = app
        .put(
            "/v2/workflows/broken",
            json!({"name": "Broken", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hello {{ payload.name }}"}}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{fixed}");
    assert_eq!(fixed["status"], "ACTIVE");
    assert!(fixed["steps"][0].get("issues").is_none(), "{fixed}");
    let (_, page) = app.get("/v2/workflows?status=ERROR").await;
    assert_eq!(page["totalCount"], 0);

    // Inactive wins over issues.
    let (_, w) = app
        .post(
            "/v2/workflows",
            json!({"name": "Off", "active": false, "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "{{ oops "}}]}),
        )
        .await;
    assert_eq!(w["status"], "INACTIVE");
    assert!(w["steps"][0]["issues"]["controls"]["body"].is_array());
}
db_test!(issues, broken_templates_are_saved_with_issues);

/// A step condition (`controlValues.skip`) that cannot be evaluated is saved as a step issue under
/// `skip` (status ERROR), naming where in the expression; the job reaching the step fails saying so.
/// A valid condition is stored as sent and raises no issue.
async fn malformed_skip_conditions_are_step_issues(app: TestApp) {
    let body = json!({"name": "Cond", "steps": [
        {"name": "Bad", "type": "in_app", "controlValues": {"body": "hi",
         "skip": {"and": [{"regex": [{"var": "payload.plan"}, "p.*"]}, {"==": [{"var": "plan"}, "pro"]},
                          {"==": [{"var": "payload.plan"}]}]}}},
        {"name": "Text", "type": "sms", "controlValues": {"body": "hi", "skip": "payload.plan == pro"}},
        {"name": "Good", "type": "chat", "controlValues": {"body": "hi",
         "skip": {"and": [{"==": [{"var": "payload.plan"}, "{{ not liquid"]}]}}}
    ]});
    let (status, w) = app.post("/v2/workflows", body).await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert_eq!(w["status"], "ERROR");
    let issues = &w["steps"][0]["issues"]["controls"];
    assert_eq!(issues.as_object().unwrap().len(), 1, "{issues}");
    let skip: Vec<(&str, &str)> = issues["skip"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["variableName"].as_str().unwrap(),
                i["issueType"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        skip,
        [
            ("and.0.regex", "ILLEGAL_VARIABLE_IN_CONTROL_VALUE"),
            ("and.1.==.0.var", "ILLEGAL_VARIABLE_IN_CONTROL_VALUE"),
            ("and.2.==", "ILLEGAL_VARIABLE_IN_CONTROL_VALUE"),
        ],
        "{issues}"
    );
    assert!(issues["skip"][0]["message"]
        .as_str()
        .unwrap()
        .contains("Unknown operator \"regex\""));
    assert!(issues["skip"][1]["message"]
        .as_str()
        .unwrap()
        .contains("Unknown variable \"plan\""));
    let text = &w["steps"][1]["issues"]["controls"]["skip"][0];
    assert_eq!(text["issueType"], "ILLEGAL_VARIABLE_IN_CONTROL_VALUE");
    assert!(text.get("variableName").is_none(), "{text}");
    assert!(w["steps"][2].get("issues").is_none(), "{w}");
    assert_eq!(
        w["steps"][2]["controlValues"]["skip"]["and"][0]["=="][1],
        "{{ not liquid"
    );

    app.subscriber("ann", json!({})).await;
    app.post(
        "/v1/events/trigger",
        json!({"name": "cond", "to": "ann", "transactionId": "t-cond", "payload": {"plan": "pro"}}),
    )
    .await;
    let items = settled(&app, "t-cond", 1).await;
    let job = &items[0]["jobs"][0];
    assert_eq!(job["status"], "failed", "{job}");
    let failed = job["executionDetails"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["status"] == "Failed")
        .unwrap_or_else(|| panic!("no failed detail: {job}"));
    assert!(
        failed["detail"]
            .as_str()
            .unwrap()
            .contains("skip: Unknown operator"),
        "{failed}"
    );

    // Fixed, the issue goes.
    let (status, fixed) = app
        .put(
            "/v2/workflows/cond",
            json!({"name": "Cond", "steps": [{"name": "Bad", "type": "in_app", "controlValues": {
                "body": "hi", "skip": {"!=": [{"var": "payload.plan"}, null]}}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{fixed}");
    assert_eq!(fixed["status"], "ACTIVE", "{fixed}");
}
db_test!(skip_issues, malformed_skip_conditions_are_step_issues);

/// Step filters are normalised on save into the shape both SDKs require (`isNegated`, `type`, `value`,
/// string `value`s, `operator`, `on`); an unknown enum value is a 422 naming the member. Filters stored
/// before normalisation (an old row) are shown in that shape by the activity, and still evaluated.
async fn step_filters_are_normalised(app: TestApp) {
    let (status, w) = app
        .post(
            "/v2/workflows",
            json!({"name": "Filt", "steps": [{"name": "Pros", "type": "in_app", "controlValues": {"body": "hi"},
                "filters": [{"value": "or", "children": [
                    {"field": "plan", "value": "pro", "_id": "ignored"},
                    {"field": "data.level", "value": 3, "operator": "LARGER_EQUAL", "on": "subscriber"}]}]}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert_eq!(
        w["steps"][0]["filters"],
        json!([{"isNegated": false, "type": "GROUP", "value": "OR", "children": [
            {"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"},
            {"field": "data.level", "value": "3", "operator": "LARGER_EQUAL", "on": "subscriber"}]}])
    );

    let (status, err) = app
        .post(
            "/v2/workflows",
            json!({"name": "Bad", "steps": [{"type": "sms", "filters": [
                {"type": "FANCY", "children": [{"field": "plan", "operator": "SOUNDS_LIKE", "on": "tenant"}, {"value": "x"}]}]}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    let mut fields: Vec<&String> = err["errors"].as_object().unwrap().keys().collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "steps[0].filters[0].children[0].on",
            "steps[0].filters[0].children[0].operator",
            "steps[0].filters[0].children[1].field",
            "steps[0].filters[0].type",
        ],
        "{err}"
    );
    assert_eq!(
        err["errors"]["steps[0].filters[0].children[0].operator"]["value"],
        "SOUNDS_LIKE"
    );

    // An old row: filters stored as they were sent before normalisation.
    let env = &app.tenant.environment_id;
    let mut stored = app.store.get_workflow(env, "filt").await.unwrap().unwrap();
    stored.steps[0].filters = vec![json!({"children": [{"field": "plan", "value": "pro"}]})];
    let expected = stored.version;
    stored.version += 1;
    assert!(app
        .store
        .update_workflow(&stored, expected, &[])
        .await
        .unwrap());
    app.subscriber("fay", json!({})).await;
    for (tx, plan) in [("t-f-pro", "pro"), ("t-f-free", "free")] {
        app.post(
            "/v1/events/trigger",
            json!({"name": "filt", "to": "fay", "transactionId": tx, "payload": {"plan": plan}}),
        )
        .await;
    }
    let pro = settled(&app, "t-f-pro", 1).await;
    assert_eq!(pro[0]["jobs"][0]["status"], "completed");
    let free = settled(&app, "t-f-free", 1).await;
    assert_eq!(free[0]["jobs"][0]["status"], "skipped");
    let want = json!([{"isNegated": false, "type": "GROUP", "value": "AND", "children": [
        {"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"}]}]);
    assert_eq!(free[0]["jobs"][0]["step"]["filters"], want);
    let id = free[0]["_id"].as_str().unwrap();
    let (_, one) = app.get(&format!("/v1/notifications/{id}")).await;
    assert_eq!(one["jobs"][0]["step"]["filters"], want, "{one}");
}
db_test!(filters_normalised, step_filters_are_normalised);
