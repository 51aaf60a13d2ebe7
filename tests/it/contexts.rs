//! Contexts (issue 38): `/v2/contexts` creates, lists, reads, changes and deletes the records triggers and
//! channel connections name; validation, 404s (also another environment's), 409 also under concurrency,
//! and the same record seen from both sides (a trigger's context listed, an API context rendered).

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, send, settled, TestApp};

fn keys(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data in {page}"))
        .iter()
        .map(|c| {
            format!(
                "{}:{}",
                c["type"].as_str().unwrap(),
                c["id"].as_str().unwrap()
            )
        })
        .collect()
}

async fn create(app: &TestApp, body: Value) -> Value {
    let (status, out) = app.post("/v2/contexts", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

async fn refused(
    app: &TestApp,
    method: Method,
    path: &str,
    body: Value,
    status: StatusCode,
) -> Value {
    let (got, out) = send(app.req(method, path).json(&body)).await;
    assert_eq!(got, status, "{path} {body}: {out}");
    assert_error(&out, status.as_u16());
    out
}

async fn context_routes(app: TestApp) {
    let acme = create(
        &app,
        json!({"type": "tenant", "id": "acme", "data": {"name": "Acme", "plan": {"seats": 3}}}),
    )
    .await;
    assert_eq!(
        (&acme["type"], &acme["id"], &acme["data"]),
        (
            &json!("tenant"),
            &json!("acme"),
            &json!({"name": "Acme", "plan": {"seats": 3}})
        )
    );
    assert!(acme["createdAt"].as_str().unwrap().ends_with('Z'), "{acme}");
    assert_eq!(acme["createdAt"], acme["updatedAt"]);
    let bare = create(&app, json!({"type": "app", "id": "jira"})).await;
    assert_eq!(bare["data"], json!({}), "no data is an empty object");
    let null = create(&app, json!({"type": "app", "id": "wiki", "data": null})).await;
    assert_eq!(null["data"], json!({}));

    let (status, got) = app.get("/v2/contexts/tenant/acme").await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got, acme);

    // PATCH replaces the data, and only the data.
    let (status, patched) = app
        .patch(
            "/v2/contexts/tenant/acme",
            json!({"data": {"name": "Acme Corp"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["data"], json!({"name": "Acme Corp"}));
    assert_eq!(patched["createdAt"], acme["createdAt"]);
    assert!(
        patched["updatedAt"].as_str() > acme["updatedAt"].as_str(),
        "{patched}"
    );
    assert_eq!(app.get("/v2/contexts/tenant/acme").await.1, patched);

    // A taken type:id is a 409 and changes nothing.
    let out = refused(
        &app,
        Method::POST,
        "/v2/contexts",
        json!({"type": "tenant", "id": "acme", "data": {"name": "Other"}}),
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(
        out["message"],
        "Context with type 'tenant' and id 'acme' already exists"
    );
    assert_eq!(app.get("/v2/contexts/tenant/acme").await.1, patched);

    // Unknown: 404 on every route, also for a type or id no context can have.
    let long = "x".repeat(101);
    for path in [
        "/v2/contexts/tenant/nobody".to_owned(),
        "/v2/contexts/nobody/acme".to_owned(),
        format!("/v2/contexts/tenant/{long}"),
    ] {
        for (method, body) in [
            (Method::GET, Value::Null),
            (Method::PATCH, json!({"data": {}})),
            (Method::DELETE, Value::Null),
        ] {
            refused(&app, method, &path, body, StatusCode::NOT_FOUND).await;
        }
    }

    // Delete: 204, then gone.
    let (status, out) = app.delete("/v2/contexts/app/jira").await;
    assert_eq!((status, out), (StatusCode::NO_CONTENT, Value::Null));
    refused(
        &app,
        Method::GET,
        "/v2/contexts/app/jira",
        Value::Null,
        StatusCode::NOT_FOUND,
    )
    .await;
    refused(
        &app,
        Method::DELETE,
        "/v2/contexts/app/jira",
        Value::Null,
        StatusCode::NOT_FOUND,
    )
    .await;
    create(&app, json!({"type": "app", "id": "jira"})).await;
}

async fn bad_input_is_refused(app: TestApp) {
    let long = "x".repeat(101);
    let big = json!({"blob": "x".repeat(64 * 1024)});
    for (body, field) in [
        (json!({"id": "acme"}), "type"),
        (json!({"type": "tenant"}), "id"),
        (json!({"type": "ten:ant", "id": "acme"}), "type"),
        (json!({"type": "tenant", "id": ""}), "id"),
        (json!({"type": "tenant", "id": long}), "id"),
        (json!({"type": 5, "id": "acme"}), "type"),
        (
            json!({"type": "tenant", "id": "acme", "data": "text"}),
            "data",
        ),
        (json!({"type": "tenant", "id": "acme", "data": [1]}), "data"),
        (json!({"type": "tenant", "id": "acme", "data": big}), "data"),
    ] {
        let out = refused(
            &app,
            Method::POST,
            "/v2/contexts",
            body.clone(),
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert!(out.to_string().contains(field), "{body}: {out}");
    }
    // Just under the bound is accepted (64 KiB serialized).
    let fits = "x".repeat(64 * 1024 - r#"{"blob":""}"#.len());
    create(
        &app,
        json!({"type": "tenant", "id": "big", "data": {"blob": fits}}),
    )
    .await;
    assert_eq!(
        app.get("/v2/contexts?limit=1").await.1["totalCount"],
        1,
        "nothing else was stored"
    );

    for body in [
        json!({}),
        json!({"data": null}),
        json!({"data": "x"}),
        json!({"data": big}),
    ] {
        refused(
            &app,
            Method::PATCH,
            "/v2/contexts/tenant/big",
            body,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    for query in [
        "limit=0",
        "limit=101",
        "orderBy=name",
        "orderDirection=up",
        "includeCursor=maybe",
        &format!("id={long}"),
        "type=a:b",
        &format!("search={}", "x".repeat(202)),
    ] {
        refused(
            &app,
            Method::GET,
            &format!("/v2/contexts?{query}"),
            Value::Null,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    refused(
        &app,
        Method::GET,
        "/v2/contexts?after=a:b&before=a:b",
        Value::Null,
        StatusCode::BAD_REQUEST,
    )
    .await;
}

async fn contexts_are_listed_by_cursor(app: TestApp) {
    for (kind, id) in [
        ("tenant", "acme"),
        ("tenant", "globex"),
        ("app", "jira"),
        ("app", "tenant-tools"),
        ("region", "eu"),
    ] {
        create(&app, json!({"type": kind, "id": id, "data": {"n": id}})).await;
    }
    let (status, all) = app.get("/v2/contexts?limit=100").await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(
        (
            &all["totalCount"],
            &all["totalCountCapped"],
            &all["next"],
            &all["previous"]
        ),
        (&json!(5), &json!(false), &Value::Null, &Value::Null)
    );
    // Newest first (by createdAt, then by key); ASC is the reverse.
    let newest_first = keys(&all);
    let mut sorted: Vec<(String, String)> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["createdAt"].as_str().unwrap().to_owned(),
                format!(
                    "{}:{}",
                    c["type"].as_str().unwrap(),
                    c["id"].as_str().unwrap()
                ),
            )
        })
        .collect();
    sorted.sort();
    sorted.reverse();
    assert_eq!(
        newest_first,
        sorted.into_iter().map(|(_, k)| k).collect::<Vec<_>>()
    );
    let mut oldest_first = newest_first.clone();
    oldest_first.reverse();
    assert_eq!(
        keys(&app.get("/v2/contexts?orderDirection=ASC").await.1),
        oldest_first
    );
    assert_eq!(
        app.get("/v2/contexts").await.1["data"]
            .as_array()
            .unwrap()
            .len(),
        5,
        "default limit 10"
    );

    // Pages of two, forward then back.
    let (_, first) = app.get("/v2/contexts?limit=2").await;
    assert_eq!(keys(&first), newest_first[..2]);
    assert_eq!(
        (&first["previous"], &first["totalCount"]),
        (&Value::Null, &json!(5))
    );
    let next = first["next"].as_str().unwrap().to_owned();
    assert_eq!(next, newest_first[1], "the cursor is the key");
    let (_, second) = app.get(&format!("/v2/contexts?limit=2&after={next}")).await;
    assert_eq!(keys(&second), newest_first[2..4]);
    let (_, third) = app
        .get(&format!(
            "/v2/contexts?limit=2&after={}",
            second["next"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        (keys(&third), &third["next"]),
        (newest_first[4..].to_vec(), &Value::Null)
    );
    let (_, back) = app
        .get(&format!(
            "/v2/contexts?limit=2&before={}",
            third["previous"].as_str().unwrap()
        ))
        .await;
    assert_eq!(keys(&back), newest_first[2..4]);
    let (_, with) = app
        .get(&format!(
            "/v2/contexts?limit=2&after={next}&includeCursor=true"
        ))
        .await;
    assert_eq!(keys(&with), newest_first[1..3]);
    let (_, unknown) = app.get("/v2/contexts?after=tenant:nobody").await;
    assert_eq!(
        (keys(&unknown).len(), &unknown["totalCount"]),
        (0, &json!(0))
    );

    // Filters: exact type, exact id, a case-insensitive substring of type:id.
    let filtered = |q: &'static str| {
        let app = &app;
        async move {
            let (status, page) = app
                .get(&format!("/v2/contexts?orderDirection=ASC&{q}"))
                .await;
            assert_eq!(status, StatusCode::OK, "{q}: {page}");
            let mut k = keys(&page);
            k.sort();
            (k, page["totalCount"].as_i64().unwrap())
        }
    };
    assert_eq!(
        filtered("type=tenant").await,
        (vec!["tenant:acme".into(), "tenant:globex".into()], 2)
    );
    assert_eq!(filtered("id=eu").await, (vec!["region:eu".into()], 1));
    assert_eq!(
        filtered("type=app&id=jira").await,
        (vec!["app:jira".into()], 1)
    );
    assert_eq!(
        filtered("search=TENANT").await,
        (
            vec![
                "app:tenant-tools".into(),
                "tenant:acme".into(),
                "tenant:globex".into()
            ],
            3
        )
    );
    assert_eq!(
        filtered("search=nt%3Aac").await,
        (vec!["tenant:acme".into()], 1)
    );
    assert_eq!(
        filtered("search=%25").await,
        (vec![], 0),
        "% is matched literally"
    );
    assert_eq!(filtered("id=nobody").await, (vec![], 0));

    // orderBy=updatedAt: a changed context comes first.
    let (status, _) = app
        .patch("/v2/contexts/tenant/acme", json!({"data": {}}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, by_update) = app.get("/v2/contexts?orderBy=updatedAt&limit=1").await;
    assert_eq!(keys(&by_update), ["tenant:acme"]);
}

async fn another_environment_is_apart(app: TestApp) {
    create(
        &app,
        json!({"type": "tenant", "id": "acme", "data": {"owner": "a"}}),
    )
    .await;
    let other = app.second_environment("Other").await;
    let (status, page) = send(app.req_as(&other, Method::GET, "/v2/contexts")).await;
    assert_eq!(
        (status, page["totalCount"].clone()),
        (StatusCode::OK, json!(0)),
        "{page}"
    );
    for (method, body) in [
        (Method::GET, Value::Null),
        (Method::PATCH, json!({"data": {"owner": "b"}})),
        (Method::DELETE, Value::Null),
    ] {
        let (status, out) = send(
            app.req_as(&other, method, "/v2/contexts/tenant/acme")
                .json(&body),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    }
    // The other environment has its own tenant:acme.
    let (status, theirs) = send(
        app.req_as(&other, Method::POST, "/v2/contexts")
            .json(&json!({"type": "tenant", "id": "acme", "data": {"owner": "b"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    assert_eq!(
        app.get("/v2/contexts/tenant/acme").await.1["data"],
        json!({"owner": "a"})
    );
}

async fn concurrent_creates_make_one(app: TestApp) {
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let req = app
                .req(Method::POST, "/v2/contexts")
                .json(&json!({"type": "tenant", "id": "race", "data": {"try": i}}));
            tokio::spawn(send(req))
        })
        .collect();
    let mut created = Vec::new();
    let mut conflicts = 0;
    for t in tasks {
        let (status, body) = t.await.unwrap();
        match status {
            StatusCode::CREATED => created.push(body),
            StatusCode::CONFLICT => conflicts += 1,
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(
        (created.len(), conflicts),
        (1, 11),
        "exactly one create wins"
    );
    let (_, stored) = app.get("/v2/contexts/tenant/race").await;
    assert_eq!(
        stored["data"], created[0]["data"],
        "the one created is the one stored"
    );
}

/// Triggers `ctx` (one in-app step rendering the region's and the tenant's data) to u1 with `context`;
/// answers the message's content.
async fn rendered(app: &TestApp, context: Value) -> String {
    let transaction_id = format!("t-{}", tidings::domain::new_object_id());
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "ctx", "to": "u1", "context": context, "transactionId": transaction_id}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    settled(app, &transaction_id, 1).await;
    let (status, page) = app
        .get(&format!(
            "/v1/messages?transactionId={transaction_id}&channel=in_app"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["data"][0]["content"].as_str().unwrap().to_owned()
}

async fn triggers_and_the_api_share_contexts(app: TestApp) {
    app.subscriber("u1", json!({})).await;
    let body = "region=[{{ context.region.id }}:{{ context.region.data.name }}] \
        tenant=[{{ context.tenant.id }}:{{ context.tenant.data.name }}]";
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Ctx", "workflowId": "ctx", "steps": [
                {"name": "Inbox", "stepId": "inbox", "type": "in_app", "controlValues": {"body": body}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");

    // A context created here is the one a trigger naming it renders.
    create(
        &app,
        json!({"type": "region", "id": "eu", "data": {"name": "Europe"}}),
    )
    .await;
    assert_eq!(
        rendered(
            &app,
            json!({"region": "eu", "tenant": {"id": "acme", "data": {"name": "Acme"}}})
        )
        .await,
        "region=[eu:Europe] tenant=[acme:Acme]"
    );
    // The trigger's own context is listed and readable here, with its data.
    let (status, acme) = app.get("/v2/contexts/tenant/acme").await;
    assert_eq!(status, StatusCode::OK, "{acme}");
    assert_eq!(acme["data"], json!({"name": "Acme"}));
    let (_, page) = app.get("/v2/contexts?orderDirection=ASC").await;
    assert_eq!(keys(&page), ["region:eu", "tenant:acme"]);
    // A trigger naming a context without data records it with none: `{}` here.
    rendered(&app, json!({"tenant": "initech"})).await;
    assert_eq!(
        app.get("/v2/contexts/tenant/initech").await.1["data"],
        json!({})
    );

    // Changed here, the next trigger renders the new data; deleted, it renders none.
    let (status, _) = app
        .patch(
            "/v2/contexts/region/eu",
            json!({"data": {"name": "Europa"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        rendered(&app, json!({"region": "eu"})).await,
        "region=[eu:Europa] tenant=[:]"
    );
    let (status, _) = app.delete("/v2/contexts/region/eu").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app.get("/v2/contexts/region/eu").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn deleting_a_context_keeps_its_connections(app: TestApp) {
    app.integration(
        json!({"providerId": "slack", "channel": "chat", "identifier": "slack-main", "active": true}),
    )
    .await;
    let (status, conn) = app
        .post(
            "/v1/channel-connections",
            json!({"integrationIdentifier": "slack-main", "connectionMode": "shared",
                "context": {"tenant": {"id": "acme", "data": {"name": "Acme"}}},
                "workspace": {"id": "T1"}, "auth": {"accessToken": "xoxb-1"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{conn}");
    // The connection recorded its context: the API sees it.
    assert_eq!(
        app.get("/v2/contexts/tenant/acme").await.1["data"],
        json!({"name": "Acme"})
    );

    // As in Novu, deleting the context leaves what names it.
    let (status, _) = app.delete("/v2/contexts/tenant/acme").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let identifier = conn["identifier"].as_str().unwrap();
    let (status, kept) = app
        .get(&format!("/v1/channel-connections/{identifier}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{kept}");
    assert_eq!(kept["contextKeys"], json!(["tenant:acme"]));
    let (_, listed) = app
        .get("/v1/channel-connections?contextKeys=tenant:acme")
        .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    let (status, _) = app.get("/v2/contexts/tenant/acme").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // And it can be created again.
    create(&app, json!({"type": "tenant", "id": "acme"})).await;
}

db_test!(routes, context_routes);
db_test!(validation, bad_input_is_refused);
db_test!(list, contexts_are_listed_by_cursor);
db_test!(other_environment, another_environment_is_apart);
db_test!(concurrent_create, concurrent_creates_make_one);
db_test!(triggers, triggers_and_the_api_share_contexts);
db_test!(connections, deleting_a_context_keeps_its_connections);
