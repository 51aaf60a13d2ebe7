//! Subscriber preferences (issue 22): the v2 routes, each level overriding the one before it, read-only and
//! critical workflows, and the engine skipping a step the preferences turn off, decided when the step runs.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, settled, TestApp};

async fn workflow(app: &TestApp, body: Value) -> Value {
    let (status, out) = app.post("/v2/workflows", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

/// `news` (in-app and email; email off by default), `alerts` (critical), `locked` (read-only defaults), and
/// `quiet` (a delay only: nothing to prefer).
async fn four_workflows(app: &TestApp) {
    workflow(
        app,
        json!({"name": "News", "workflowId": "news", "steps": [
        {"name": "Inbox", "type": "in_app", "controlValues": {"body": "news"}},
        {"name": "Mail", "type": "email", "controlValues": {"subject": "News", "body": "news"}}],
        "preferences": {"user": null, "workflow": {"all": {"enabled": true, "readOnly": false},
            "channels": {"email": {"enabled": false}}}}}),
    )
    .await;
    workflow(
        app,
        json!({"name": "Alerts", "workflowId": "alerts", "critical": true, "steps": [
        {"name": "Inbox", "type": "in_app", "controlValues": {"body": "alert"}}]}),
    )
    .await;
    workflow(
        app,
        json!({"name": "Locked", "workflowId": "locked", "steps": [
        {"name": "Inbox", "type": "in_app", "controlValues": {"body": "locked"}}],
        "preferences": {"workflow": {"all": {"enabled": true, "readOnly": true}, "channels": {}}}}),
    )
    .await;
    workflow(
        app,
        json!({"name": "Quiet", "workflowId": "quiet", "steps": [
        {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "seconds"}}]}),
    )
    .await;
}

fn identifiers(prefs: &Value) -> Vec<&str> {
    prefs["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workflow"]["identifier"].as_str().unwrap())
        .collect()
}

fn of<'a>(prefs: &'a Value, identifier: &str) -> &'a Value {
    prefs["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["workflow"]["identifier"] == identifier)
        .unwrap_or_else(|| panic!("no {identifier} in {prefs}"))
}

async fn routes_read_and_change_each_level(app: TestApp) {
    four_workflows(&app).await;
    app.subscriber("pat", json!({})).await;

    // Nothing chosen yet: the global preference is all on, each workflow shows its defaults, the
    // critical one and the one without a channel step are not listed.
    let (status, prefs) = app.get("/v2/subscribers/pat/preferences").await;
    assert_eq!(status, StatusCode::OK, "{prefs}");
    assert_eq!(
        prefs["global"],
        json!({"enabled": true, "channels": {"email": true, "sms": true, "in_app": true, "chat": true, "push": true}})
    );
    assert_eq!(identifiers(&prefs), ["news", "locked"]);
    let news = of(&prefs, "news");
    assert_eq!(news["enabled"], true);
    assert_eq!(news["channels"], json!({"email": false, "in_app": true}));
    assert_eq!(
        news["overrides"],
        json!([{"channel": "in_app", "source": "template"}, {"channel": "email", "source": "template"}])
    );
    assert_eq!(news["workflow"]["slug"], "news");
    assert_eq!(news["workflow"]["name"], "News");
    assert!(news.get("updatedAt").is_none(), "{news}");
    let (_, critical) = app
        .get("/v2/subscribers/pat/preferences?criticality=critical")
        .await;
    assert_eq!(identifiers(&critical), ["alerts"]);
    let (_, all) = app
        .get("/v2/subscribers/pat/preferences?criticality=all")
        .await;
    assert_eq!(identifiers(&all), ["news", "alerts", "locked"]);

    // Global: in-app off everywhere the subscriber may choose; the read-only workflow keeps its default.
    let (status, prefs) = app
        .patch(
            "/v2/subscribers/pat/preferences",
            json!({"channels": {"in_app": false}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{prefs}");
    assert_eq!(prefs["global"]["channels"]["in_app"], false);
    assert_eq!(prefs["global"]["channels"]["email"], true);
    let news = of(&prefs, "news");
    assert_eq!(news["channels"], json!({"email": false, "in_app": false}));
    assert_eq!(
        news["overrides"][0],
        json!({"channel": "in_app", "source": "subscriber"})
    );
    assert_eq!(of(&prefs, "locked")["channels"], json!({"in_app": true}));

    // The workflow's own level wins over the global one; by identifier or by `_id`.
    let (status, prefs) = app
        .patch(
            "/v2/subscribers/pat/preferences",
            json!({"workflowId": "news", "channels": {"email": true, "in_app": null}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{prefs}");
    let news = of(&prefs, "news");
    assert_eq!(news["channels"], json!({"email": true, "in_app": false}));
    assert_eq!(
        news["overrides"],
        json!([{"channel": "in_app", "source": "subscriber"}, {"channel": "email", "source": "subscriber"}])
    );
    assert!(
        news["updatedAt"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{news}"
    );
    let (_, w) = app.get("/v2/workflows/news").await;
    let id = w["_id"].as_str().unwrap();
    let (status, prefs) = app
        .patch(
            "/v2/subscribers/pat/preferences",
            json!({"workflowId": id, "channels": {"in_app": true}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{prefs}");
    assert_eq!(
        of(&prefs, "news")["channels"],
        json!({"email": true, "in_app": true})
    );
    // The global preference did not move.
    assert_eq!(prefs["global"]["channels"]["in_app"], false);

    // Bulk: every item or none; Inbox-shaped answers in the order given.
    let (status, out) = app
        .patch(
            "/v2/subscribers/pat/preferences/bulk",
            json!({"preferences": [{"workflowId": "news", "channels": {"email": false}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out.as_array().unwrap().len(), 1);
    assert_eq!(out[0]["level"], "template");
    assert_eq!(out[0]["channels"], json!({"email": false, "in_app": true}));
    assert_eq!(out[0]["workflow"]["identifier"], "news");
    assert_eq!(out[0]["workflow"]["id"], id);
    assert_eq!(out[0]["workflow"]["critical"], false);
    assert_eq!(out[0]["workflow"]["severity"], "none");
    let (status, out) = app
        .patch(
            "/v2/subscribers/pat/preferences/bulk",
            json!({"preferences": [{"workflowId": "news", "channels": {"email": true}},
                {"workflowId": "nope", "channels": {"email": true}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let (_, prefs) = app.get("/v2/subscribers/pat/preferences").await;
    assert_eq!(
        of(&prefs, "news")["channels"]["email"],
        false,
        "nothing changed"
    );

    // A deleted subscriber's preferences go with it; created again under the same id, it starts from the
    // defaults.
    let (_, s) = app.get("/v2/subscribers/pat").await;
    let old_ref = tidings::domain::SubscriberRef::from(s["_id"].as_str().unwrap().to_owned());
    let env = &app.tenant.environment_id;
    assert_eq!(
        app.store.preferences_of(env, &old_ref).await.unwrap().len(),
        2
    );
    let (status, _) = app.delete("/v2/subscribers/pat").await;
    assert_eq!(status, StatusCode::OK);
    assert!(app
        .store
        .preferences_of(env, &old_ref)
        .await
        .unwrap()
        .is_empty());
    let (status, _) = app.get("/v2/subscribers/pat/preferences").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.subscriber("pat", json!({})).await;
    let (_, prefs) = app.get("/v2/subscribers/pat/preferences").await;
    assert_eq!(prefs["global"]["channels"]["in_app"], true, "{prefs}");
    assert_eq!(
        of(&prefs, "news")["channels"],
        json!({"email": false, "in_app": true})
    );
}
db_test!(routes, routes_read_and_change_each_level);

async fn refusals(app: TestApp) {
    four_workflows(&app).await;
    app.subscriber("pat", json!({})).await;
    let cases = [
        (
            "/v2/subscribers/nobody/preferences",
            json!({"channels": {"email": false}}),
            404,
        ),
        (
            "/v2/subscribers/pat/preferences",
            json!({"workflowId": "nope", "channels": {"email": false}}),
            404,
        ),
        (
            "/v2/subscribers/pat/preferences",
            json!({"channels": {"tool": false}}),
            422,
        ),
        (
            "/v2/subscribers/pat/preferences",
            json!({"channels": {"email": "off"}}),
            422,
        ),
        (
            "/v2/subscribers/pat/preferences",
            json!({"channels": ["email"]}),
            422,
        ),
        (
            "/v2/subscribers/pat/preferences",
            json!({"schedule": {"isEnabled": true}}),
            422,
        ),
        (
            "/v2/subscribers/pat/preferences",
            json!({"workflowId": "alerts", "channels": {"in_app": false}}),
            400,
        ),
        (
            "/v2/subscribers/pat/preferences",
            json!({"workflowId": "locked", "channels": {"in_app": false}}),
            400,
        ),
        (
            "/v2/subscribers/pat/preferences/bulk",
            json!({"preferences": []}),
            422,
        ),
        (
            "/v2/subscribers/pat/preferences/bulk",
            json!({"preferences": [{"channels": {"email": true}}]}),
            422,
        ),
        (
            "/v2/subscribers/pat/preferences/bulk",
            json!({"preferences": [{"workflowId": "news"}]}),
            422,
        ),
        (
            "/v2/subscribers/nobody/preferences/bulk",
            json!({"preferences": [{"workflowId": "news", "channels": {"email": true}}]}),
            404,
        ),
    ];
    for (path, body, code) in cases {
        let (status, out) = app.patch(path, body.clone()).await;
        assert_eq!(status.as_u16(), code, "{path} {body}: {out}");
        assert_error(&out, code);
    }
    let too_many: Vec<Value> = (0..101)
        .map(|_| json!({"workflowId": "news", "channels": {"email": true}}))
        .collect();
    let (status, out) = app
        .patch(
            "/v2/subscribers/pat/preferences/bulk",
            json!({"preferences": too_many}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    for path in [
        "/v2/subscribers/nobody/preferences",
        "/v2/subscribers/pat/preferences?criticality=some",
        "/v2/subscribers/pat/preferences?contextKeys=tenant:acme",
    ] {
        let (status, out) = app.get(path).await;
        let code = if path.contains("nobody") { 404 } else { 422 };
        assert_eq!(status.as_u16(), code, "{path}: {out}");
    }
    // The 422 names the channel.
    let (_, out) = app
        .patch(
            "/v2/subscribers/pat/preferences",
            json!({"channels": {"tool": false}}),
        )
        .await;
    assert!(out.to_string().contains("channels.tool"), "{out}");
    // Another environment's subscriber is unknown here.
    let other = app.second_environment("other").await;
    let (status, _) = app
        .req_as(
            &other,
            reqwest::Method::GET,
            "/v2/subscribers/pat/preferences",
        )
        .send()
        .await
        .map(|r| (r.status(), ()))
        .unwrap();
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(refusals, refusals);

/// Each job of `transaction_id` once settled: `(stepId, status, last execution detail)`.
async fn outcome(app: &TestApp, transaction_id: &str) -> Vec<(String, String, Value)> {
    let items = settled(app, transaction_id, 1).await;
    items[0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["step"]["stepId"].as_str().unwrap_or_default().to_owned(),
                j["status"].as_str().unwrap().to_owned(),
                j["executionDetails"]
                    .as_array()
                    .unwrap()
                    .last()
                    .cloned()
                    .unwrap_or(Value::Null),
            )
        })
        .collect()
}

async fn trigger(app: &TestApp, workflow: &str, to: &str, transaction_id: &str) {
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": workflow, "to": to, "payload": {}, "transactionId": transaction_id}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

fn skipped_by(job: &(String, String, Value), words: &str, level: &str) {
    assert_eq!(job.1, "skipped", "{job:?}");
    let detail = job.2["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("Step skipped by the subscriber's preferences: "),
        "{detail}"
    );
    assert!(detail.contains(words), "{detail} lacks {words}");
    let raw: Value = serde_json::from_str(job.2["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw["preference"]["level"], level, "{raw}");
}

async fn the_engine_honours_each_level(app: TestApp) {
    four_workflows(&app).await;
    workflow(
        &app,
        json!({"name": "Two", "workflowId": "two", "steps": [
        {"name": "A", "stepId": "a", "type": "in_app", "controlValues": {"body": "a"}},
        {"name": "B", "stepId": "b", "type": "in_app", "controlValues": {"body": "b"}}]}),
    )
    .await;
    for s in ["ann", "bob"] {
        app.subscriber(s, json!({})).await;
    }

    // The workflow's default turns email off; in-app runs.
    trigger(&app, "news", "ann", "t-defaults").await;
    let jobs = outcome(&app, "t-defaults").await;
    assert_eq!(jobs[0].1, "completed", "{jobs:?}");
    skipped_by(
        &jobs[1],
        "email is off in the workflow's default preferences",
        "workflow_defaults",
    );
    assert_eq!(jobs[1].2["status"], "Success");

    // The subscriber's global preference turns in-app off: both steps skipped, the chain still ends.
    let (status, _) = app
        .patch(
            "/v2/subscribers/ann/preferences",
            json!({"channels": {"in_app": false}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    trigger(&app, "two", "ann", "t-global").await;
    let jobs = outcome(&app, "t-global").await;
    skipped_by(
        &jobs[0],
        "in_app is off in the subscriber's global preference",
        "subscriber_global",
    );
    skipped_by(&jobs[1], "global preference", "subscriber_global");
    // Another subscriber is not affected.
    trigger(&app, "two", "bob", "t-bob").await;
    let jobs = outcome(&app, "t-bob").await;
    assert_eq!(
        (jobs[0].1.as_str(), jobs[1].1.as_str()),
        ("completed", "completed")
    );

    // The workflow's own level turns it back on for that workflow only.
    let (status, _) = app
        .patch(
            "/v2/subscribers/ann/preferences",
            json!({"workflowId": "two", "channels": {"in_app": true}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    trigger(&app, "two", "ann", "t-own").await;
    let jobs = outcome(&app, "t-own").await;
    assert_eq!(
        (jobs[0].1.as_str(), jobs[1].1.as_str()),
        ("completed", "completed")
    );
    trigger(&app, "news", "ann", "t-news").await;
    let jobs = outcome(&app, "t-news").await;
    skipped_by(&jobs[0], "global preference", "subscriber_global");

    // Read-only defaults and critical workflows ignore the subscriber.
    for (wf, tx) in [("locked", "t-locked"), ("alerts", "t-alerts")] {
        trigger(&app, wf, "ann", tx).await;
        let jobs = outcome(&app, tx).await;
        assert_eq!(jobs[0].1, "completed", "{wf}: {jobs:?}");
    }
    // Messages exist for the completed steps only.
    let (_, page) = app
        .get("/v1/messages?subscriberId=ann&channel=in_app&limit=100")
        .await;
    let contents: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    let mut sorted = contents.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["a", "alert", "b", "locked", "news"],
        "{contents:?}"
    );
}
db_test!(engine, the_engine_honours_each_level);

async fn a_change_during_a_delay_applies(app: TestApp) {
    workflow(&app, json!({"name": "Later", "workflowId": "later", "steps": [
        {"name": "Wait", "stepId": "wait", "type": "delay", "controlValues": {"amount": 2, "unit": "seconds"}},
        {"name": "Inbox", "stepId": "inbox", "type": "in_app", "controlValues": {"body": "later"}}]})).await;
    app.subscriber("cy", json!({})).await;
    trigger(&app, "later", "cy", "t-later").await;
    // While the delay runs, the subscriber turns in-app off for this workflow.
    let (status, out) = app
        .patch(
            "/v2/subscribers/cy/preferences",
            json!({"workflowId": "later", "channels": {"in_app": false}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let jobs = outcome(&app, "t-later").await;
    assert_eq!(jobs[0].1, "completed", "{jobs:?}");
    skipped_by(
        &jobs[1],
        "in_app is off in the subscriber's preference for this workflow",
        "subscriber_workflow",
    );
}
db_test!(during_delay, a_change_during_a_delay_applies);
