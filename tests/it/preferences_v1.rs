//! Subscriber preferences through the v1 routes (issue 22): `GET /v1/subscribers/{id}/preferences`, by level
//! (`global`, `template`), `PATCH …/preferences/{workflowId}` and `PATCH …/preferences` (global), in the
//! shapes of Novu's v1 SDK models; their refusals; and the engine honouring what they set.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, settled, TestApp};

async fn workflow(app: &TestApp, body: Value) -> String {
    let (status, out) = app.post("/v2/workflows", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out["_id"].as_str().unwrap().to_owned()
}

fn in_app(step_id: &str) -> Value {
    json!({"name": step_id, "stepId": step_id, "type": "in_app", "controlValues": {"body": step_id}})
}

/// `news` (in-app and email, email off by default), `tips` (in-app), `alerts` (critical), `locked` (read-only
/// defaults), `quiet` (a delay only); answers the `_id`s of `news` and `tips`.
async fn workflows(app: &TestApp) -> (String, String) {
    let news = workflow(
        app,
        json!({"name": "News", "workflowId": "news", "steps": [in_app("inbox"),
            {"name": "mail", "type": "email", "controlValues": {"subject": "News", "body": "news"}}],
            "preferences": {"user": null, "workflow": {"all": {"enabled": true, "readOnly": false},
                "channels": {"email": {"enabled": false}}}}}),
    )
    .await;
    let tips = workflow(
        app,
        json!({"name": "Tips", "workflowId": "tips", "steps": [in_app("tip")]}),
    )
    .await;
    workflow(
        app,
        json!({"name": "Alerts", "workflowId": "alerts", "critical": true, "steps": [in_app("alert")]}),
    )
    .await;
    workflow(
        app,
        json!({"name": "Locked", "workflowId": "locked", "steps": [in_app("locked")],
            "preferences": {"workflow": {"all": {"enabled": true, "readOnly": true}, "channels": {}}}}),
    )
    .await;
    workflow(
        app,
        json!({"name": "Quiet", "workflowId": "quiet", "steps": [
            {"name": "wait", "type": "delay", "controlValues": {"amount": 1, "unit": "seconds"}}]}),
    )
    .await;
    (news, tips)
}

/// Every channel, with the ones named turned off.
fn channels_off(off: &[&str]) -> Value {
    let mut out = json!({"in_app": true, "email": true, "sms": true, "chat": true, "push": true});
    for c in off {
        out[*c] = Value::Bool(false);
    }
    out
}

fn template(id: &str, name: &str, identifier: &str) -> Value {
    json!({"_id": id, "name": name, "critical": false,
        "triggers": [{"type": "event", "identifier": identifier, "variables": []}]})
}

/// The item of workflow `identifier` in a v1 list.
fn item<'a>(list: &'a Value, identifier: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|p| p["template"]["triggers"][0]["identifier"] == identifier)
        .unwrap_or_else(|| panic!("no {identifier} in {list}"))
}

fn identifiers(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|p| p["template"]["triggers"][0]["identifier"].as_str().unwrap())
        .collect()
}

async fn ok(app: &TestApp, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let (status, out) = match body {
        Some(b) => crate::support::send(app.req(method, path).json(&b)).await,
        None => crate::support::send(app.req(method, path)).await,
    };
    assert_eq!(status, StatusCode::OK, "{path}: {out}");
    out
}

async fn shapes_and_levels(app: TestApp) {
    let (news, tips) = workflows(&app).await;
    app.subscriber("pat", json!({})).await;
    let get = |path: &'static str| ok(&app, reqwest::Method::GET, path, None);

    // Nothing chosen: each non-critical workflow with a channel step, oldest first, every channel shown.
    let list = get("/v1/subscribers/pat/preferences").await;
    assert_eq!(identifiers(&list), ["news", "tips", "locked"]);
    assert_eq!(
        item(&list, "news"),
        &json!({"template": template(&news, "News", "news"),
            "preference": {"enabled": true, "channels": channels_off(&["email"])}})
    );
    assert_eq!(
        item(&list, "tips"),
        &json!({"template": template(&tips, "Tips", "tips"),
            "preference": {"enabled": true, "channels": channels_off(&[])}})
    );
    // Only the channels of the workflow's steps.
    let list = get("/v1/subscribers/pat/preferences?includeInactiveChannels=false").await;
    assert_eq!(
        item(&list, "news")["preference"]["channels"],
        json!({"in_app": true, "email": false})
    );
    assert_eq!(
        item(&list, "tips")["preference"]["channels"],
        json!({"in_app": true})
    );
    // By level: the template level is the list; the global one is one item without a template.
    assert_eq!(
        get("/v1/subscribers/pat/preferences/template").await,
        get("/v1/subscribers/pat/preferences").await
    );
    assert_eq!(
        get("/v1/subscribers/pat/preferences/template?includeInactiveChannels=false").await,
        list
    );
    assert_eq!(
        get("/v1/subscribers/pat/preferences/global").await,
        json!([{"preference": {"enabled": true, "channels": channels_off(&[])}}])
    );

    // Global: SMS and chat off.
    let out = ok(
        &app,
        reqwest::Method::PATCH,
        "/v1/subscribers/pat/preferences",
        Some(json!({"preferences": [{"type": "sms", "enabled": false}, {"type": "chat", "enabled": false}]})),
    )
    .await;
    assert_eq!(
        out,
        json!({"preference": {"enabled": true, "channels": channels_off(&["sms", "chat"])}})
    );

    // One workflow: a channel (by identifier), then the whole workflow (by `_id`).
    let out = ok(
        &app,
        reqwest::Method::PATCH,
        "/v1/subscribers/pat/preferences/news",
        Some(json!({"channel": {"type": "email", "enabled": true}})),
    )
    .await;
    assert_eq!(
        out,
        json!({"template": template(&news, "News", "news"),
            "preference": {"enabled": true, "channels": channels_off(&["sms", "chat"])}})
    );
    let out = ok(
        &app,
        reqwest::Method::PATCH,
        &format!("/v1/subscribers/pat/preferences/{news}"),
        Some(json!({"enabled": false, "channel": {"type": "sms", "enabled": true}})),
    )
    .await;
    assert_eq!(
        out["preference"],
        json!({"enabled": false, "channels": channels_off(&["chat"])})
    );
    // What v1 set, v2 reads.
    let v2 = get("/v2/subscribers/pat/preferences").await;
    let news_v2 = v2["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["workflow"]["identifier"] == "news")
        .unwrap();
    assert_eq!(news_v2["enabled"], false, "{v2}");
    assert_eq!(news_v2["channels"], json!({"in_app": true, "email": true}));
    assert_eq!(
        v2["global"]["channels"],
        channels_off(&["sms", "chat"]),
        "{v2}"
    );

    // Global `enabled: false` turns off every workflow whose own level does not say otherwise; the
    // read-only one keeps its defaults.
    let out = ok(
        &app,
        reqwest::Method::PATCH,
        "/v1/subscribers/pat/preferences",
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(
        out,
        json!({"preference": {"enabled": false, "channels": channels_off(&["sms", "chat"])}})
    );
    ok(
        &app,
        reqwest::Method::PATCH,
        "/v1/subscribers/pat/preferences/news",
        Some(json!({"enabled": true})),
    )
    .await;
    let list = get("/v1/subscribers/pat/preferences").await;
    let enabled: Vec<(&str, bool)> = ["news", "tips", "locked"]
        .into_iter()
        .map(|w| {
            (
                w,
                item(&list, w)["preference"]["enabled"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(enabled, [("news", true), ("tips", false), ("locked", true)]);
    assert_eq!(
        item(&list, "locked")["preference"]["channels"],
        channels_off(&[])
    );
    assert_eq!(
        get("/v1/subscribers/pat/preferences/global").await,
        json!([{"preference": {"enabled": false, "channels": channels_off(&["sms", "chat"])}}])
    );
    // An empty change changes nothing.
    let out = ok(
        &app,
        reqwest::Method::PATCH,
        "/v1/subscribers/pat/preferences",
        Some(json!({})),
    )
    .await;
    assert_eq!(out["preference"]["enabled"], false);
}
db_test!(shapes, shapes_and_levels);

async fn refusals(app: TestApp) {
    workflows(&app).await;
    app.subscriber("pat", json!({})).await;
    let cases = [
        (
            "/v1/subscribers/nobody/preferences",
            json!({"enabled": false}),
            404,
            None,
        ),
        (
            "/v1/subscribers/nobody/preferences/news",
            json!({"enabled": false}),
            404,
            None,
        ),
        (
            "/v1/subscribers/pat/preferences/nope",
            json!({"enabled": false}),
            404,
            None,
        ),
        (
            "/v1/subscribers/pat/preferences/alerts",
            json!({"enabled": false}),
            400,
            None,
        ),
        (
            "/v1/subscribers/pat/preferences/locked",
            json!({"channel": {"type": "in_app", "enabled": false}}),
            400,
            None,
        ),
        (
            "/v1/subscribers/pat/preferences/news",
            json!({"channel": {"type": "tool", "enabled": false}}),
            422,
            Some(("channel.type", json!("tool"))),
        ),
        (
            "/v1/subscribers/pat/preferences",
            json!({"preferences": [{"type": "email", "enabled": true},
            {"type": "tool", "enabled": false}]}),
            422,
            Some(("preferences.1.type", json!("tool"))),
        ),
        (
            "/v1/subscribers/pat/preferences/news",
            json!({"channel": {"type": "email"}}),
            422,
            None,
        ),
        (
            "/v1/subscribers/pat/preferences/news",
            json!({"channel": {"type": "email", "enabled": "no"}}),
            422,
            None,
        ),
        (
            "/v1/subscribers/pat/preferences/news",
            json!({"enabled": "no"}),
            422,
            None,
        ),
        (
            "/v1/subscribers/pat/preferences",
            json!({"preferences": {"type": "email"}}),
            422,
            None,
        ),
        (
            "/v1/subscribers/pat/preferences",
            json!({"preferences": vec![json!({"type": "email", "enabled": true}); 6]}),
            422,
            Some(("preferences", json!(6))),
        ),
    ];
    for (path, body, code, field) in cases {
        let (status, out) = app.patch(path, body.clone()).await;
        assert_eq!(status.as_u16(), code, "{path} {body}: {out}");
        assert_error(&out, code);
        if let Some((field, value)) = field {
            assert_eq!(out["errors"][field]["value"], value, "{out}");
        }
    }
    for (path, code) in [
        ("/v1/subscribers/nobody/preferences", 404),
        ("/v1/subscribers/nobody/preferences/global", 404),
        ("/v1/subscribers/nobody/preferences/template", 404),
        ("/v1/subscribers/pat/preferences/weekly", 422),
        (
            "/v1/subscribers/pat/preferences?includeInactiveChannels=maybe",
            422,
        ),
    ] {
        let (status, out) = app.get(path).await;
        assert_eq!(status.as_u16(), code, "{path}: {out}");
        assert_error(&out, code);
    }
    // Nothing was stored by a refused change.
    let (_, list) = app.get("/v1/subscribers/pat/preferences").await;
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|p| p["preference"]["channels"]
                == channels_off(if p["template"]["name"] == "News" {
                    &["email"]
                } else {
                    &[]
                })
                && p["preference"]["enabled"] == true),
        "{list}"
    );
    // Another environment's subscriber is unknown here.
    let other = app.second_environment("other").await;
    for method in [reqwest::Method::GET, reqwest::Method::PATCH] {
        let req = app.req_as(&other, method.clone(), "/v1/subscribers/pat/preferences");
        let req = if method == reqwest::Method::PATCH {
            req.json(&json!({"enabled": false}))
        } else {
            req
        };
        let (status, out) = crate::support::send(req).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method}: {out}");
    }
}
db_test!(refusals, refusals);

/// Each job of `transaction_id` once settled: `(status, last execution detail)`.
async fn jobs(
    app: &TestApp,
    workflow: &str,
    to: &str,
    transaction_id: &str,
) -> Vec<(String, String)> {
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": workflow, "to": to, "payload": {}, "transactionId": transaction_id}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let items = settled(app, transaction_id, 1).await;
    items[0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            let detail = j["executionDetails"]
                .as_array()
                .and_then(|d| d.last())
                .and_then(|d| d["detail"].as_str())
                .unwrap_or_default();
            (j["status"].as_str().unwrap().to_owned(), detail.to_owned())
        })
        .collect()
}

fn all_skipped(jobs: &[(String, String)], why: &str) {
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    for (status, detail) in jobs {
        assert_eq!(status, "skipped", "{jobs:?}");
        assert_eq!(
            detail,
            &format!("Step skipped by the subscriber's preferences: {why}")
        );
    }
}

fn all_completed(jobs: &[(String, String)]) {
    let statuses: Vec<&str> = jobs.iter().map(|j| j.0.as_str()).collect();
    assert_eq!(statuses, ["completed", "completed"], "{jobs:?}");
}

async fn the_engine_honours_what_v1_sets(app: TestApp) {
    workflow(
        &app,
        json!({"name": "Pair", "workflowId": "pair", "steps": [in_app("a"), in_app("b")]}),
    )
    .await;
    for s in ["ann", "bob"] {
        app.subscriber(s, json!({})).await;
    }
    let patch = |path: &'static str, body: Value| {
        let app = &app;
        async move {
            let (status, out) = app.patch(path, body).await;
            assert_eq!(status, StatusCode::OK, "{path}: {out}");
        }
    };

    // The workflow's in-app channel off.
    patch(
        "/v1/subscribers/ann/preferences/pair",
        json!({"channel": {"type": "in_app", "enabled": false}}),
    )
    .await;
    all_skipped(
        &jobs(&app, "pair", "ann", "t-channel").await,
        "in_app is off in the subscriber's preference for this workflow",
    );
    // The channel on again, the whole workflow off.
    patch(
        "/v1/subscribers/ann/preferences/pair",
        json!({"channel": {"type": "in_app", "enabled": true}, "enabled": false}),
    )
    .await;
    all_skipped(
        &jobs(&app, "pair", "ann", "t-workflow").await,
        "this workflow is off in the subscriber's preference for this workflow",
    );
    // The workflow on again; then every notification off for bob.
    patch(
        "/v1/subscribers/ann/preferences/pair",
        json!({"enabled": true}),
    )
    .await;
    all_completed(&jobs(&app, "pair", "ann", "t-on").await);
    patch("/v1/subscribers/bob/preferences", json!({"enabled": false})).await;
    all_skipped(
        &jobs(&app, "pair", "bob", "t-global").await,
        "every notification is off in the subscriber's global preference",
    );
    // Ann's own level for the workflow wins over her global one.
    patch("/v1/subscribers/ann/preferences", json!({"enabled": false})).await;
    all_completed(&jobs(&app, "pair", "ann", "t-own-wins").await);
    // Global channels: bob on again, in-app off.
    patch(
        "/v1/subscribers/bob/preferences",
        json!({"enabled": true, "preferences": [{"type": "in_app", "enabled": false}]}),
    )
    .await;
    all_skipped(
        &jobs(&app, "pair", "bob", "t-global-channel").await,
        "in_app is off in the subscriber's global preference",
    );
}
db_test!(engine, the_engine_honours_what_v1_sets);
