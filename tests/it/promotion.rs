//! Promotion (issue 38): a team builds workflows in Development, diffs and publishes them into Production,
//! changes and publishes again (the same `_id`s), deletes; syncs one workflow; an environment's tags; which
//! key may promote; another organization's environments; concurrent publishes; a step's retrieval.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tidings::domain::OrganizationId;
use tidings::service::environments;

use crate::db_test;
use crate::support::{assert_error, count, eventually, execute, send, TestApp};

/// Another environment of the app's organization: its `_id` and API key.
async fn environment(app: &TestApp, name: &str) -> (String, String) {
    let e = environments::create(&app.store, name, None).await.unwrap();
    (e.environment_id.0, e.api_key)
}

/// An environment of another organization: its `_id`.
async fn foreign_environment(app: &TestApp) -> String {
    let org = OrganizationId::new();
    execute(
        app,
        &format!(
            "insert into organizations (id, name, created_at) values ('{}', 'Elsewhere', 0)",
            org.as_str()
        ),
    )
    .await;
    let env = app
        .store
        .insert_environment(&org, "Production", false, None)
        .await
        .unwrap();
    env.id.0
}

async fn call(
    app: &TestApp,
    key: &str,
    method: Method,
    path: &str,
    body: Value,
) -> (StatusCode, Value) {
    send(app.req_as(key, method, path).json(&body)).await
}

fn inbox_step(step_id: &str, body: &str) -> Value {
    json!({"stepId": step_id, "name": step_id, "type": "in_app", "controlValues": {"body": body}})
}

async fn create_workflow(app: &TestApp, id: &str, tags: Value, steps: Vec<Value>) -> Value {
    let (status, w) = app
        .post(
            "/v2/workflows",
            json!({"name": id, "workflowId": id, "tags": tags, "steps": steps}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    w
}

/// A workflow of environment `key` by identifier.
async fn workflow_as(app: &TestApp, key: &str, id: &str) -> (StatusCode, Value) {
    send(app.req_as(key, Method::GET, &format!("/v2/workflows/{id}"))).await
}

fn actions(published: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = published["results"][0]["successful"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["resourceName"].as_str().unwrap().to_owned(),
                s["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

async fn end_to_end(app: TestApp) {
    let (prod, prod_key) = environment(&app, "Production").await;
    let dev = app.tenant.environment_id.0.clone();
    create_workflow(
        &app,
        "welcome",
        json!(["onboarding"]),
        vec![inbox_step("hello", "Hello {{ payload.name }}")],
    )
    .await;
    create_workflow(&app, "goodbye", json!([]), vec![inbox_step("bye", "Bye")]).await;

    // The diff lists both workflows as added, with their steps.
    let (status, diff) = app
        .post(&format!("/v2/environments/{prod}/diff"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{diff}");
    assert_eq!(diff["sourceEnvironmentId"], dev.as_str());
    assert_eq!(diff["targetEnvironmentId"], prod.as_str());
    assert_eq!(
        diff["summary"],
        json!({"totalEntities": 2, "totalChanges": 4, "hasChanges": true})
    );
    let goodbye = &diff["resources"][0];
    assert_eq!(goodbye["resourceType"], "REGULAR");
    assert_eq!(goodbye["sourceResource"]["id"], "goodbye");
    assert!(goodbye["targetResource"].is_null(), "{goodbye}");
    assert_eq!(goodbye["changes"][0]["action"], "added");
    assert_eq!(goodbye["changes"][1]["stepType"], "in_app");
    assert_eq!(goodbye["changes"][1]["newIndex"], 0);
    assert_eq!(
        goodbye["changes"][1]["diffs"]["new"]["controlValues"]["body"],
        "Bye"
    );
    assert_eq!(
        goodbye["summary"],
        json!({"added": 2, "modified": 0, "deleted": 0, "unchanged": 0})
    );

    // A dry run answers the same and writes nothing.
    let (status, dry) = app
        .post(
            &format!("/v2/environments/{prod}/publish"),
            json!({"dryRun": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{dry}");
    assert_eq!(
        actions(&dry),
        pairs(&[("goodbye", "created"), ("welcome", "created")])
    );
    let (_, listed) = send(app.req_as(&prod_key, Method::GET, "/v2/workflows")).await;
    assert_eq!(listed["totalCount"], 0, "{listed}");

    // Publish: both created in Production, under new ids.
    let (status, published) = app
        .post(&format!("/v2/environments/{prod}/publish"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{published}");
    assert_eq!(
        actions(&published),
        pairs(&[("goodbye", "created"), ("welcome", "created")])
    );
    assert_eq!(
        published["summary"],
        json!({"resources": 2, "successful": 2, "failed": 0, "skipped": 0})
    );
    let (status, first) = workflow_as(&app, &prod_key, "welcome").await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["_environmentId"], prod.as_str());
    assert_eq!(first["tags"], json!(["onboarding"]));
    let (_, in_dev) = app.get("/v2/workflows/welcome").await;
    assert_ne!(first["_id"], in_dev["_id"]);

    // A trigger in Production delivers the published workflow's message.
    let (status, t) = call(
        &app,
        &prod_key,
        Method::POST,
        "/v1/events/trigger",
        json!({"name": "welcome", "to": "ada", "payload": {"name": "Ada"}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    let content = eventually(|| async {
        let (_, page) =
            send(app.req_as(&prod_key, Method::GET, "/v1/messages?subscriberId=ada")).await;
        page["data"][0]["content"].as_str().map(str::to_owned)
    })
    .await;
    assert_eq!(content, "Hello Ada");

    // Nothing left to publish.
    let (_, diff) = app
        .post(&format!("/v2/environments/{prod}/diff"), json!({}))
        .await;
    assert_eq!(
        diff["summary"],
        json!({"totalEntities": 0, "totalChanges": 0, "hasChanges": false}),
        "{diff}"
    );

    // A change in Development: the diff shows the update, the publish keeps Production's ids.
    let (status, w) = app
        .put(
            "/v2/workflows/welcome",
            json!({"name": "welcome", "tags": ["onboarding"],
        "steps": [inbox_step("hello", "Hi {{ payload.name }}"), inbox_step("later", "Later")]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{w}");
    let (_, diff) = app
        .post(&format!("/v2/environments/{prod}/diff"), json!({}))
        .await;
    assert_eq!(diff["summary"]["totalEntities"], 1, "{diff}");
    let welcome = &diff["resources"][0];
    assert_eq!(welcome["targetResource"]["id"], "welcome");
    let changes = welcome["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2, "{welcome}");
    assert_eq!(changes[0]["action"], "modified");
    assert_eq!(changes[0]["previousIndex"], 0);
    assert_eq!(
        changes[0]["diffs"]["previous"]["controlValues"]["body"],
        "Hello {{ payload.name }}"
    );
    assert_eq!(
        changes[0]["diffs"]["new"]["controlValues"]["body"],
        "Hi {{ payload.name }}"
    );
    assert_eq!(changes[1]["action"], "added");
    let (status, published) = app
        .post(&format!("/v2/environments/{prod}/publish"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{published}");
    assert_eq!(actions(&published), pairs(&[("welcome", "updated")]));
    assert_eq!(
        published["results"][0]["skipped"][0]["resourceName"],
        "goodbye"
    );
    let (_, second) = workflow_as(&app, &prod_key, "welcome").await;
    assert_eq!(second["_id"], first["_id"], "the same workflow id");
    assert_eq!(
        second["steps"][0]["_id"], first["steps"][0]["_id"],
        "the same step id"
    );
    assert_eq!(
        second["steps"][0]["controlValues"]["body"],
        "Hi {{ payload.name }}"
    );
    assert_eq!(second["steps"][1]["stepId"], "later");

    // Deleted in Development, deleted in Production on publish.
    let (status, _) = app.delete("/v2/workflows/goodbye").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, diff) = app
        .post(&format!("/v2/environments/{prod}/diff"), json!({}))
        .await;
    assert_eq!(
        diff["resources"][0]["changes"][0]["action"], "deleted",
        "{diff}"
    );
    assert!(diff["resources"][0]["sourceResource"].is_null());
    let (_, published) = app
        .post(&format!("/v2/environments/{prod}/publish"), json!({}))
        .await;
    assert_eq!(actions(&published), pairs(&[("goodbye", "deleted")]));
    let (status, _) = workflow_as(&app, &prod_key, "goodbye").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = workflow_as(&app, &prod_key, "welcome").await;
    assert_eq!(status, StatusCode::OK);
}
db_test!(promotion_end_to_end, end_to_end);

/// `resources` publishes only the named workflows and deletes nothing; a workflow with issues is skipped.
async fn selected_and_broken(app: TestApp) {
    let (prod, prod_key) = environment(&app, "Production").await;
    create_workflow(&app, "one", json!([]), vec![inbox_step("s", "One")]).await;
    let two = create_workflow(&app, "two", json!([]), vec![inbox_step("s", "Two")]).await;
    create_workflow(
        &app,
        "broken",
        json!([]),
        vec![inbox_step("s", "Hi {{ payload.name ")],
    )
    .await;
    let (status, published) = app
        .post(
            &format!("/v2/environments/{prod}/publish"),
            json!({"resources": [{"resourceType": "REGULAR", "resourceId": two["_id"]}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{published}");
    assert_eq!(actions(&published), pairs(&[("two", "created")]));
    let (status, published) = app
        .post(&format!("/v2/environments/{prod}/publish"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{published}");
    assert_eq!(actions(&published), pairs(&[("one", "created")]));
    let skipped = &published["results"][0]["skipped"];
    let reasons: Vec<(&str, &str)> = skipped
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["resourceName"].as_str().unwrap(),
                s["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            ("broken", "The workflow has steps with issues"),
            ("two", "No changes")
        ]
    );
    let (status, _) = workflow_as(&app, &prod_key, "broken").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let many: Vec<Value> = (0..101)
        .map(|i| json!({"resourceType": "REGULAR", "resourceId": format!("w{i}")}))
        .collect();
    let (status, out) = app
        .post(
            &format!("/v2/environments/{prod}/publish"),
            json!({"resources": many}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
}
db_test!(promotion_selected_and_broken, selected_and_broken);

/// The key rule (docs/decisions.md): a key promotes only from its own environment, into any other
/// environment of its organization; another organization's environment is unknown.
async fn who_may_promote(app: TestApp) {
    let dev = app.tenant.environment_id.0.clone();
    let (prod, prod_key) = environment(&app, "Production").await;
    let foreign = foreign_environment(&app).await;
    create_workflow(&app, "welcome", json!([]), vec![inbox_step("s", "Hi")]).await;
    for op in ["diff", "publish"] {
        // Production's key: the default source is Development, not its own environment.
        let (status, out) = call(
            &app,
            &prod_key,
            Method::POST,
            &format!("/v2/environments/{prod}/{op}"),
            json!({}),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{op}: {out}");
        assert_error(&out, 403);
        // Development's key cannot name Production as the source.
        let (status, out) = app
            .post(
                &format!("/v2/environments/{dev}/{op}"),
                json!({"sourceEnvironmentId": prod}),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{op}: {out}");
        // Production's key promotes from Production (into Development).
        let (status, out) = call(
            &app,
            &prod_key,
            Method::POST,
            &format!("/v2/environments/{dev}/{op}"),
            json!({"sourceEnvironmentId": prod, "dryRun": true}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{op}: {out}");
        // The same environment on both sides.
        let (status, out) = app
            .post(&format!("/v2/environments/{dev}/{op}"), json!({}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{op}: {out}");
        assert_error(&out, 400);
        // Unknown, and another organization's: 404, as target and as source.
        for target in [foreign.as_str(), "0123456789abcdef01234567", "nope"] {
            let (status, out) = app
                .post(&format!("/v2/environments/{target}/{op}"), json!({}))
                .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{op} {target}: {out}");
            assert_error(&out, 404);
        }
        let (status, out) = app
            .post(
                &format!("/v2/environments/{prod}/{op}"),
                json!({"sourceEnvironmentId": foreign}),
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{op}: {out}");
        let (status, out) = app
            .post(
                &format!("/v2/environments/{prod}/{op}"),
                json!({"sourceEnvironmentId": 5}),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{op}: {out}");
    }
    // Nothing reached the other organization or Production.
    assert_eq!(
        count(
            &app,
            "select count(*) from workflows where environment_id = $1",
            &foreign
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &app,
            "select count(*) from workflows where environment_id = $1",
            &prod
        )
        .await,
        0
    );
}
db_test!(promotion_who_may_promote, who_may_promote);

async fn sync_one(app: TestApp) {
    let (prod, prod_key) = environment(&app, "Production").await;
    let foreign = foreign_environment(&app).await;
    let w = create_workflow(
        &app,
        "welcome",
        json!(["a"]),
        vec![inbox_step("hello", "Hello")],
    )
    .await;
    create_workflow(&app, "other", json!([]), vec![inbox_step("s", "Other")]).await;
    let (status, copy) = app
        .put(
            "/v2/workflows/welcome/sync",
            json!({"targetEnvironmentId": prod}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{copy}");
    assert_eq!(copy["_environmentId"], prod.as_str());
    assert_eq!(copy["workflowId"], "welcome");
    assert_ne!(copy["_id"], w["_id"]);
    let (status, read) = workflow_as(&app, &prod_key, "welcome").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["_id"], copy["_id"]);
    let (status, _) = workflow_as(&app, &prod_key, "other").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "only the synced workflow");
    // Again after a change (by `_id` this time): updated in place.
    let (status, _) = app
        .put(
            "/v2/workflows/welcome",
            json!({"name": "Welcome!", "steps": [inbox_step("hello", "Hello again")]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, again) = app
        .put(
            &format!("/v2/workflows/{}/sync", w["_id"].as_str().unwrap()),
            json!({"targetEnvironmentId": prod}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["_id"], copy["_id"]);
    assert_eq!(again["name"], "Welcome!");
    assert_eq!(again["steps"][0]["_id"], copy["steps"][0]["_id"]);
    assert_eq!(again["steps"][0]["controlValues"]["body"], "Hello again");
    // Errors.
    let dev = app.tenant.environment_id.0.clone();
    for (target, status) in [
        (dev.as_str(), 400),
        (foreign.as_str(), 404),
        ("0123456789abcdef01234567", 404),
    ] {
        let (got, out) = app
            .put(
                "/v2/workflows/welcome/sync",
                json!({"targetEnvironmentId": target}),
            )
            .await;
        assert_eq!(got.as_u16(), status, "{target}: {out}");
        assert_error(&out, status);
    }
    let (status, _) = app
        .put(
            "/v2/workflows/nope/sync",
            json!({"targetEnvironmentId": prod}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Production's workflow is not the Development key's.
    let (status, _) = app
        .put(
            &format!("/v2/workflows/{}/sync", copy["_id"].as_str().unwrap()),
            json!({"targetEnvironmentId": prod}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, out) = app.put("/v2/workflows/welcome/sync", json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    create_workflow(
        &app,
        "broken",
        json!([]),
        vec![inbox_step("s", "{{ payload.x ")],
    )
    .await;
    let (status, out) = app
        .put(
            "/v2/workflows/broken/sync",
            json!({"targetEnvironmentId": prod}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
}
db_test!(promotion_sync, sync_one);

async fn tags(app: TestApp) {
    let (prod, prod_key) = environment(&app, "Production").await;
    let foreign = foreign_environment(&app).await;
    create_workflow(&app, "a", json!(["onboarding", "beta"]), vec![]).await;
    create_workflow(&app, "b", json!(["beta"]), vec![]).await;
    let gone = create_workflow(&app, "c", json!(["gone"]), vec![]).await;
    app.delete(&format!("/v2/workflows/{}", gone["_id"].as_str().unwrap()))
        .await;
    let dev = app.tenant.environment_id.0.clone();
    let expected = json!([{"name": "beta"}, {"name": "onboarding"}]);
    for id in [dev.as_str(), app.application_identifier.as_str()] {
        let (status, out) = app.get(&format!("/v2/environments/{id}/tags")).await;
        assert_eq!(status, StatusCode::OK, "{out}");
        assert_eq!(out, expected);
    }
    // Another environment of the organization (read with another key), and its own.
    let (status, out) = send(app.req_as(
        &prod_key,
        Method::GET,
        &format!("/v2/environments/{dev}/tags"),
    ))
    .await;
    assert_eq!((status, out), (StatusCode::OK, expected));
    let (status, out) = app.get(&format!("/v2/environments/{prod}/tags")).await;
    assert_eq!((status, out), (StatusCode::OK, json!([])));
    for id in [foreign.as_str(), "0123456789abcdef01234567"] {
        let (status, out) = app.get(&format!("/v2/environments/{id}/tags")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
        assert_error(&out, 404);
    }
}
db_test!(promotion_tags, tags);

/// Two publishes at once into one target: every workflow once, written by one of them.
async fn concurrent_publishes(app: TestApp) {
    let (prod, _) = environment(&app, "Production").await;
    for i in 0..6 {
        create_workflow(
            &app,
            &format!("w{i}"),
            json!([]),
            vec![inbox_step("s", "x"), inbox_step("t", "y")],
        )
        .await;
    }
    let path = format!("/v2/environments/{prod}/publish");
    let ((s1, a), (s2, b)) = tokio::join!(app.post(&path, json!({})), app.post(&path, json!({})));
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::OK), "{a} {b}");
    let created = [&a, &b]
        .iter()
        .map(|p| {
            actions(p)
                .iter()
                .filter(|(_, action)| action == "created")
                .count()
        })
        .sum::<usize>();
    assert_eq!(created, 6, "{a} {b}");
    assert_eq!(
        count(
            &app,
            "select count(*) from workflows where environment_id = $1",
            &prod
        )
        .await,
        6
    );
    // A change and two publishes again: one update each, the same rows.
    for i in 0..6 {
        let (status, _) = app
            .put(
                &format!("/v2/workflows/w{i}"),
                json!({"name": format!("w{i}"), "steps": [inbox_step("s", "changed")]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let ((s1, a), (s2, b)) = tokio::join!(app.post(&path, json!({})), app.post(&path, json!({})));
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::OK), "{a} {b}");
    let updated = actions(&a).len() + actions(&b).len();
    assert_eq!(updated, 6, "{a} {b}");
    assert_eq!(
        count(
            &app,
            "select count(*) from workflows where environment_id = $1",
            &prod
        )
        .await,
        6
    );
}
db_test!(promotion_concurrent_publishes, concurrent_publishes);

async fn step_retrieve(app: TestApp) {
    let (_, prod_key) = environment(&app, "Production").await;
    let w = create_workflow(&app, "welcome", json!([]), vec![
        json!({"stepId": "wait", "name": "Wait", "type": "digest", "controlValues": {"amount": 5, "unit": "minutes"}}),
        inbox_step("hello", "Hello {{ payload.name }}"),
    ]).await;
    let step_id = w["steps"][1]["_id"].as_str().unwrap();
    for path in [
        "/v2/workflows/welcome/steps/hello".to_owned(),
        format!(
            "/v2/workflows/{}/steps/{step_id}",
            w["_id"].as_str().unwrap()
        ),
    ] {
        let (status, s) = app.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{s}");
        assert_eq!(s["_id"], step_id);
        assert_eq!(s["stepId"], "hello");
        assert_eq!(s["type"], "in_app");
        assert_eq!(s["workflowId"], "welcome");
        assert_eq!(s["workflowDatabaseId"], w["_id"]);
        assert_eq!(s["controls"]["values"]["body"], "Hello {{ payload.name }}");
        let vars = &s["variables"]["properties"];
        assert_eq!(
            vars["payload"]["properties"]["name"]["type"], "string",
            "{s}"
        );
        assert_eq!(
            vars["subscriber"]["properties"]["subscriberId"]["type"],
            "string"
        );
        assert!(
            vars["steps"]["properties"]["wait"]["properties"]["events"].is_object(),
            "the digest before it: {s}"
        );
    }
    for path in [
        "/v2/workflows/nope/steps/hello",
        "/v2/workflows/welcome/steps/nope",
    ] {
        let (status, out) = app.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {out}");
        assert_error(&out, 404);
    }
    let (status, _) =
        send(app.req_as(&prod_key, Method::GET, "/v2/workflows/welcome/steps/hello")).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another environment's workflow"
    );
}
db_test!(promotion_step_retrieve, step_retrieve);
