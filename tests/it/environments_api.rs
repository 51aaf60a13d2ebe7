//! Environments created, changed and deleted through the API (issue 38): the new environment's key and
//! `applicationIdentifier` work at once and the key is shown only in the create's answer; an API key changes
//! and deletes only its own environment (403 for a sibling, 404 for another organization's); Development,
//! Production and an organization's last environment are not deleted; a deleted environment's keys are
//! refused at once and its rows are erased table by table in bounded batches, leaving other environments'.

use std::collections::BTreeMap;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use tidings::domain::{EnvironmentId, OrganizationId, Tenant};

use crate::db_test;
use crate::support::{count, eventually, execute, raw_sql, send, settled, Backend, TestApp};

/// `method path` with `key`, and its JSON body when given.
async fn as_key(
    app: &TestApp,
    key: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let req = app.req_as(key, method, path);
    send(match body {
        Some(b) => req.json(&b),
        None => req,
    })
    .await
}

/// Creates the environment `name` with the app's key: its `_id`, key and identifier.
async fn create(app: &TestApp, name: &str) -> (String, String, String) {
    let (status, out) = app
        .post(
            "/v1/environments",
            json!({"name": name, "color": "#3366ff"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let keys = out["apiKeys"].as_array().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(keys.len(), 1, "{out}");
    assert_eq!(keys[0]["_userId"], app.tenant.environment_id.0.as_str());
    (
        out["_id"].as_str().unwrap().to_owned(),
        keys[0]["key"].as_str().unwrap().to_owned(),
        out["identifier"].as_str().unwrap().to_owned(),
    )
}

/// Opens an Inbox session in the environment `identifier`: its status.
async fn session(app: &TestApp, identifier: &str, subscriber: &str) -> StatusCode {
    let body = json!({"applicationIdentifier": identifier, "subscriber": subscriber});
    send(app.client.post(app.url("/v1/inbox/session")).json(&body))
        .await
        .0
}

/// An in-app workflow `news` in the environment of `key`, and a trigger of it to `to`; the transaction.
async fn furnish(app: &TestApp, key: &str, to: &str) -> String {
    let workflow = json!({"name": "News", "workflowId": "news", "active": true,
        "steps": [{"name": "inbox", "stepId": "inbox", "type": "in_app", "controlValues": {"body": "Hi {{payload.n}}"}}]});
    let (status, out) = as_key(app, key, Method::POST, "/v2/workflows", Some(workflow)).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = as_key(
        app,
        key,
        Method::POST,
        "/v2/topics",
        Some(json!({"key": "team"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let tx = format!("{to}-tx");
    let trigger = json!({"name": "news", "to": to, "payload": {"n": 1}, "transactionId": tx});
    let req = app
        .req_as(key, Method::POST, "/v1/events/trigger")
        .header("idempotency-key", format!("{to}-idem"))
        .json(&trigger);
    let (status, out) = send(req).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    tx
}

/// Every table with an `environment_id` column, from the schema the migrations made.
async fn environment_tables(app: &TestApp) -> Vec<String> {
    let sql = match app.backend {
        Backend::Sqlite => {
            "select m.name from sqlite_master m, pragma_table_info(m.name) p \
             where m.type = 'table' and p.name = 'environment_id' order by m.name"
        }
        Backend::Postgres => {
            "select cast(table_name as text) from information_schema.columns \
             where column_name = 'environment_id' and table_schema = current_schema() order by 1"
        }
    };
    let tables = raw_sql(app, sql).await;
    assert!(tables.len() >= 20, "{tables:?}");
    tables
}

/// The rows of `env` in every table of [`environment_tables`] (and its throttle passes, environment row
/// and erasure aside).
async fn rows_of(app: &TestApp, tables: &[String], env: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for t in tables {
        let sql = format!("select count(*) from {t} where environment_id = $1");
        out.insert(t.clone(), count(app, &sql, env).await);
    }
    let sql = "select count(*) from throttle_passes where throttle_key like $1";
    out.insert(
        "throttle_passes".into(),
        count(app, sql, &format!("{env}|%")).await,
    );
    let sql = "select count(*) from environments where id = $1";
    out.insert("environments".into(), count(app, sql, env).await);
    out
}

fn nothing_left(rows: &BTreeMap<String, i64>) -> bool {
    rows.iter()
        .all(|(t, n)| *n == 0 || t == "environment_erasures")
}

async fn create_update_delete(app: TestApp) {
    let (id, key, identifier) = create(&app, "Staging").await;
    assert_eq!(identifier.len(), 12);
    // The new key triggers, the identifier opens Inbox sessions.
    let tx = furnish(&app, &key, "st-user").await;
    assert_eq!(
        session(&app, &identifier, "st-user").await,
        StatusCode::CREATED
    );
    // No list or get shows a key.
    let (status, listed) = app.get("/v1/environments").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let staging = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["_id"] == id.as_str())
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(staging["color"], "#3366ff");
    assert!(!listed.to_string().contains("apiKeys"), "{listed}");
    assert!(!listed.to_string().contains(&key), "{listed}");
    let (_, me) = as_key(&app, &key, Method::GET, "/v1/environments/me", None).await;
    assert_eq!(me["name"], "Staging");
    assert!(me.get("apiKeys").is_none(), "{me}");

    // Update: its own key only; what Tidings has no place for is refused.
    let path = format!("/v1/environments/{id}");
    let change = json!({"name": "Staging 2", "identifier": "staging-app", "color": "#00ff00"});
    let (status, other) = app.put(&path, change.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{other}");
    let (status, out) = as_key(&app, &key, Method::PUT, &path, Some(change)).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        (&out["name"], &out["identifier"], &out["color"]),
        (
            &json!("Staging 2"),
            &json!("staging-app"),
            &json!("#00ff00")
        )
    );
    assert!(out.get("apiKeys").is_none(), "{out}");
    assert_eq!(
        session(&app, "staging-app", "st-user").await,
        StatusCode::CREATED
    );
    assert_ne!(
        session(&app, &identifier, "st-user").await,
        StatusCode::CREATED
    );
    for body in [
        json!({"parentId": "5f0000000000000000000000"}),
        json!({"dns": {"inboundParseDomain": "in.example.com"}}),
        json!({"bridge": {"url": "https://bridge.example.com"}}),
        json!({"name": "production"}),
        json!({"name": ""}),
        json!({"name": "x".repeat(101)}),
        json!({"color": "blue"}),
        json!({"identifier": "no spaces"}),
    ] {
        let (status, out) = as_key(&app, &key, Method::PUT, &path, Some(body.clone())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {out}");
    }
    // Empty dns and bridge ask for nothing.
    let body = json!({"dns": {"inboundParseDomain": ""}, "bridge": {"url": ""}});
    let (status, out) = as_key(&app, &key, Method::PUT, &path, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let (status, out) = app
        .post(
            "/v1/environments",
            json!({"name": "Other", "color": "#000"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let taken = [
        json!({"name": "Other"}),
        json!({"identifier": out["identifier"].clone()}),
    ];
    for body in taken {
        let (status, out) = as_key(&app, &key, Method::PUT, &path, Some(body.clone())).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}: {out}");
    }
    let (status, out) = app
        .put(
            &format!("/v1/environments/{}", app.tenant.environment_id),
            json!({"name": "Dev"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    let (status, out) = app
        .put("/v1/environments/5f0000000000000000000000", json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");

    // Delete: its own key only; Development is protected.
    let (status, out) = app.delete(&path).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{out}");
    let (status, out) = app
        .delete(&format!("/v1/environments/{}", app.tenant.environment_id))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    let (status, out) = as_key(&app, &key, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out, json!({"acknowledged": true, "status": "deleted"}));
    // At once: the key, the identifier and the name.
    let (status, out) = as_key(&app, &key, Method::GET, "/v1/environments/me", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{out}");
    assert_ne!(
        session(&app, "staging-app", "st-user").await,
        StatusCode::CREATED
    );
    let (_, listed) = app.get("/v1/environments").await;
    assert!(!listed.to_string().contains(&id), "{listed}");
    let (status, out) = app.delete(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let (again, ..) = create(&app, "Staging 2").await;
    assert_ne!(again, id);
    // The workers erase its rows; the app's environment keeps its own.
    let _ = tx;
    let tables = environment_tables(&app).await;
    eventually(|| async {
        let rows = rows_of(&app, &tables, &id).await;
        nothing_left(&rows).then_some(())
    })
    .await;
    let (status, _) = app.get("/v1/environments/me").await;
    assert_eq!(status, StatusCode::OK);
}
db_test!(created_updated_deleted, create_update_delete);

/// A second organization with one environment `name`, made through the store: its tenant and key.
async fn second_organization(app: &TestApp, name: &str) -> (Tenant, String) {
    let org = OrganizationId::new();
    execute(
        app,
        &format!(
            "insert into organizations (id, name, created_at) values ('{org}', 'Other org', 1)"
        ),
    )
    .await;
    let env = app
        .store
        .insert_environment(&org, name, false, None)
        .await
        .unwrap();
    let tenant = Tenant {
        organization_id: org,
        environment_id: env.id,
    };
    let key = tidings::crypto::new_api_key();
    app.store.insert_api_key(&tenant, &key).await.unwrap();
    (tenant, key)
}

async fn organizations_and_last(app: TestApp) {
    let (solo, solo_key) = second_organization(&app, "Solo").await;
    let solo_path = format!("/v1/environments/{}", solo.environment_id);
    // Another organization's environment does not exist for this one.
    let (status, out) = app.put(&solo_path, json!({"name": "Mine"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let (status, out) = app.delete(&solo_path).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let dev = format!("/v1/environments/{}", app.tenant.environment_id);
    let (status, out) = as_key(&app, &solo_key, Method::PUT, &dev, Some(json!({}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let (_, listed) = as_key(&app, &solo_key, Method::GET, "/v1/environments", None).await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Solo"]);
    // Names are unique per organization: this one may have a Staging of its own.
    let (status, out) = as_key(
        &app,
        &solo_key,
        Method::POST,
        "/v1/environments",
        Some(json!({"name": "Staging", "color": "#111111"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (staging, staging_key) = (out["_id"].as_str().unwrap().to_owned(), out_key(&out));
    create(&app, "Staging").await;
    let (status, out) = app
        .post(
            "/v1/environments",
            json!({"name": " Staging ", "color": "#111111"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");
    for body in [
        json!({"name": "Development", "color": "#111111"}),
        json!({"name": "S", "color": "#111111", "parentId": "x"}),
        json!({"color": "#111111"}),
    ] {
        let (status, out) = app.post("/v1/environments", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {out}");
    }

    // Two environments deleting themselves at once: one goes, the last stays.
    let staging_path = format!("/v1/environments/{staging}");
    let (a, b) = tokio::join!(
        as_key(&app, &solo_key, Method::DELETE, &solo_path, None),
        as_key(&app, &staging_key, Method::DELETE, &staging_path, None),
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::BAD_REQUEST],
        "{a:?} {b:?}"
    );
    let last = if a.0 == StatusCode::OK { &b } else { &a };
    assert!(
        last.1["message"]
            .as_str()
            .unwrap_or("")
            .contains("last environment"),
        "{last:?}"
    );
}
db_test!(
    organizations_and_the_last_environment,
    organizations_and_last
);

/// The new environment's key in a create's answer.
fn out_key(out: &Value) -> String {
    out["apiKeys"][0]["key"].as_str().unwrap().to_owned()
}

async fn concurrent_creates(app: TestApp) {
    let body = json!({"name": "Twin", "color": "#123456"});
    let (a, b) = tokio::join!(
        app.post("/v1/environments", body.clone()),
        app.post("/v1/environments", body.clone()),
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::CREATED, StatusCode::CONFLICT],
        "{a:?} {b:?}"
    );
    let n = count(
        &app,
        "select count(*) from environments where name = $1",
        "Twin",
    )
    .await;
    assert_eq!(n, 1);
}
db_test!(concurrent_creates_of_one_name, concurrent_creates);

async fn erased_in_batches(mut app: TestApp) {
    let (doomed, key, _) = create(&app, "Doomed").await;
    let tx = furnish(&app, &key, "doomed-user").await;
    let kept_tx = furnish(&app, &app.key.clone(), "kept-user").await;
    let doomed_tenant = Tenant {
        organization_id: app.tenant.organization_id.clone(),
        environment_id: EnvironmentId::from(doomed.clone()),
    };
    // A large history: several batches of subscribers and of notifications (with jobs and details).
    app.store
        .seed_subscribers(&doomed_tenant, "bulk-", 1_200)
        .await
        .unwrap();
    let w = app
        .store
        .get_workflow(&doomed_tenant.environment_id, "news")
        .await
        .unwrap()
        .unwrap();
    app.store
        .seed_notifications(&doomed_tenant, &w, "bulk-", 1_100, 50)
        .await
        .unwrap();
    let _ = (
        settled_in(&app, &key, &tx).await,
        settled(&app, &kept_tx, 1).await,
    );
    // A webhook endpoint (issue 39), its app named by the environment's id.
    let hook = app
        .client
        .post(app.url(&format!("/api/v1/app/{doomed}/endpoint")))
        .header("Authorization", format!("Bearer {key}"))
        .json(&serde_json::json!({"url": "https://example.com/hook"}))
        .send()
        .await
        .unwrap();
    assert_eq!(hook.status(), StatusCode::CREATED);
    app.stop_workers().await;

    let tables = environment_tables(&app).await;
    let before = rows_of(&app, &tables, &doomed).await;
    for t in [
        "subscribers",
        "notifications",
        "jobs",
        "messages",
        "execution_details",
        "workflows",
        "topics",
        "trigger_transactions",
        "idempotency_keys",
        "webhook_endpoints",
    ] {
        assert!(before[t] > 0, "{t}: {before:?}");
    }
    let kept = app.tenant.environment_id.0.clone();
    let kept_before = rows_of(&app, &tables, &kept).await;

    let (status, out) = as_key(
        &app,
        &key,
        Method::DELETE,
        &format!("/v1/environments/{doomed}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        app.store
            .pending_environment_erasures(&app.tenant.organization_id)
            .await
            .unwrap(),
        1
    );
    // Worked through by hand, batch by batch.
    let e = app
        .store
        .claim_environment_erasure("t", tidings::domain::Timestamp::now().0, 60_000)
        .await
        .unwrap()
        .expect("the erasure is pending");
    let mut batches = 0;
    loop {
        let n = app.store.erase_environment_batch(&e, 500).await.unwrap();
        assert!(n <= 500, "{n}");
        if n == 0 {
            break;
        }
        batches += 1;
    }
    assert!(batches >= 6, "{batches} batches");
    let after = rows_of(&app, &tables, &doomed).await;
    assert!(nothing_left(&after), "{after:?}");
    assert_eq!(rows_of(&app, &tables, &kept).await, kept_before);
    app.store.finish_environment_erasure(&e, "t").await.unwrap();
    assert_eq!(
        app.store
            .pending_environment_erasures(&app.tenant.organization_id)
            .await
            .unwrap(),
        0
    );
    // The loop finds nothing more.
    let stop = CancellationToken::new();
    assert!(
        !tidings::engine::erasure::erase_one(&app.store, "t", 60_000, &stop)
            .await
            .unwrap()
    );
}
db_test!(
    a_deleted_environment_is_erased_in_batches,
    erased_in_batches
);

/// Waits until the trigger `tx` of the environment of `key` has its in-app message.
async fn settled_in(app: &TestApp, key: &str, tx: &str) -> Value {
    eventually(|| async {
        let path = format!("/v1/messages?transactionId={tx}");
        let (_, page) = as_key(app, key, Method::GET, &path, None).await;
        page["data"]
            .as_array()
            .filter(|a| !a.is_empty())
            .cloned()
            .map(Value::from)
    })
    .await
}
