//! Topics and subscriptions (issue 23): the v2 routes, partial success, validation, 404s, cascades and
//! tenant isolation.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, send, TestApp};

async fn delete_with(app: &TestApp, path: &str, body: Value) -> (StatusCode, Value) {
    send(app.req(Method::DELETE, path).json(&body)).await
}

fn subscriber_ids(page: &Value) -> Vec<&str> {
    page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data in {page}"))
        .iter()
        .map(|s| s["subscriber"]["subscriberId"].as_str().unwrap())
        .collect()
}

async fn topic_routes(app: TestApp) {
    // Upsert: 201 the first time, 200 after (the name changes).
    let (status, created) = app
        .post("/v2/topics", json!({"key": "team:1", "name": "Team one"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["key"], "team:1");
    assert_eq!(created["name"], "Team one");
    assert_eq!(created["_id"].as_str().unwrap().len(), 24);
    assert!(created["createdAt"].as_str().unwrap().ends_with('Z'));
    let (status, again) = app
        .post("/v2/topics", json!({"key": "team:1", "name": "Team 1"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["_id"], created["_id"]);
    assert_eq!(again["name"], "Team 1");
    let (status, out) = app
        .post("/v2/topics?failIfExists=true", json!({"key": "team:1"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");
    assert_error(&out, 409);
    assert_eq!(
        (&out["_id"], &out["name"]),
        (&created["_id"], &json!("Team 1"))
    );
    let (status, same) = app.post("/v2/topics", json!({"key": "team:1"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(same["name"], "Team 1", "no name keeps the name");

    // Retrieve, rename.
    let (status, got) = app.get("/v2/topics/team:1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["name"], "Team 1");
    let (status, patched) = app
        .patch("/v2/topics/team:1", json!({"name": "Renamed"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["name"], "Renamed");
    assert_eq!(app.get("/v2/topics/team:1").await.1["name"], "Renamed");

    // List: cursor pages, key and name filters.
    for key in ["team:2", "team:3", "news"] {
        let (status, _) = app
            .post(
                "/v2/topics",
                json!({"key": key, "name": format!("Name {key}")}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, page) = app.get("/v2/topics?limit=2&orderDirection=ASC").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let keys: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["team:1", "team:2"]);
    assert_eq!(page["totalCount"], 4);
    assert_eq!(page["previous"], Value::Null);
    let next = page["next"].as_str().unwrap().to_owned();
    let (_, rest) = app
        .get(&format!(
            "/v2/topics?limit=2&orderDirection=ASC&after={next}"
        ))
        .await;
    let keys: Vec<&str> = rest["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["team:3", "news"]);
    assert_eq!(rest["next"], Value::Null);
    let (_, by_key) = app.get("/v2/topics?key=news").await;
    assert_eq!(by_key["data"].as_array().unwrap().len(), 1);
    assert_eq!(by_key["data"][0]["key"], "news");
    let (_, by_name) = app.get("/v2/topics?name=NAME%20TEAM").await;
    assert_eq!(by_name["data"].as_array().unwrap().len(), 2);

    // Delete: 200 acknowledged, then 404 everywhere.
    let (status, deleted) = app.delete("/v2/topics/team:1").await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted, json!({"acknowledged": true}));
    for (method, path) in [
        (Method::GET, "/v2/topics/team:1"),
        (Method::DELETE, "/v2/topics/team:1"),
        (Method::GET, "/v2/topics/team:1/subscriptions"),
        (Method::GET, "/v2/topics/team:1/subscriptions/x"),
    ] {
        let (status, body) = send(app.req(method.clone(), path)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {body}");
        assert_error(&body, 404);
    }
    let (status, _) = app.patch("/v2/topics/team:1", json!({"name": "x"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = delete_with(
        &app,
        "/v2/topics/team:1/subscriptions",
        json!({"subscriberIds": ["a"]}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(topics_crud, topic_routes);

async fn validation(app: TestApp) {
    for (body, field) in [
        (json!({"key": ""}), "key"),
        (json!({"key": "has space"}), "key"),
        (json!({"key": "a/b"}), "key"),
        (json!({"key": "."}), "key"),
        (json!({"key": ".."}), "key"),
        (json!({"key": "k".repeat(101)}), "key"),
        (json!({"key": "ok", "name": "n".repeat(201)}), "name"),
    ] {
        let (status, out) = app.post("/v2/topics", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {out}");
        assert_error(&out, 422);
        assert!(out["errors"][field].is_object(), "{body}: {out}");
    }
    let (status, out) = app.post("/v2/topics", json!({"name": "no key"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    let (status, out) = app.get("/v2/topics?limit=101").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");

    app.subscriber("ada", json!({})).await;
    let many: Vec<String> = (0..101).map(|i| format!("s{i}")).collect();
    for (body, field) in [
        (json!({"subscriberIds": many}), "subscriberIds"),
        (json!({"subscriberIds": []}), "subscriberIds"),
        (json!({}), "subscriptions"),
        (json!({"subscriptions": [7]}), "subscriptions[0]"),
        (
            json!({"subscriptions": [{"identifier": "x"}]}),
            "subscriptions[0].subscriberId",
        ),
        (
            json!({"subscriptions": [{"subscriberId": "ada", "identifier": ""}]}),
            "subscriptions[0].identifier",
        ),
        (
            json!({"subscriberIds": ["ada"], "preferences": [{"workflowId": "w"}]}),
            "preferences",
        ),
        (
            json!({"subscriberIds": ["ada"], "context": {"tenant": "t"}}),
            "context",
        ),
    ] {
        let (status, out) = app.post("/v2/topics/t1/subscriptions", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {out}");
        assert!(out["errors"][field].is_object(), "{field}: {out}");
    }
    let (status, out) = app
        .post(
            "/v2/topics/bad%20key/subscriptions",
            json!({"subscriberIds": ["ada"]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert!(out["errors"]["topicKey"].is_object(), "{out}");
    // Nothing was created by the refused requests.
    assert_eq!(app.get("/v2/topics").await.1["totalCount"], 0);
}
db_test!(topics_validation, validation);

async fn subscriptions(app: TestApp) {
    app.subscriber(
        "ada",
        json!({"firstName": "Ada", "email": "ada@example.com"}),
    )
    .await;
    app.subscriber("bob", json!({})).await;
    app.subscriber("cy", json!({})).await;

    // The topic is created by the first subscribe; one unknown subscriber fails alone.
    let (status, out) = app
        .post(
            "/v2/topics/watchers/subscriptions",
            json!({"subscriptions": ["ada", {"subscriberId": "bob", "identifier": "bob-watch"}, "ghost", "ada"],
                   "name": "Watchers"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(
        out["meta"],
        json!({"totalCount": 3, "successful": 2, "failed": 1})
    );
    assert_eq!(
        out["errors"],
        json!([{"subscriberId": "ghost", "code": "SUBSCRIBER_NOT_FOUND",
                "message": "Subscriber \"ghost\" was not found"}])
    );
    let data = out["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["identifier"], "tk_watchers:si_ada");
    assert_eq!(data[0]["topic"]["key"], "watchers");
    assert_eq!(data[0]["topic"]["name"], "Watchers");
    assert_eq!(data[0]["subscriber"]["subscriberId"], "ada");
    assert_eq!(data[0]["subscriber"]["firstName"], "Ada");
    assert_eq!(data[0]["subscriber"]["email"], "ada@example.com");
    assert_eq!(data[1]["identifier"], "bob-watch");
    let (_, topic) = app.get("/v2/topics/watchers").await;
    assert_eq!(topic["name"], "Watchers");

    // Subscribing again keeps the subscription (same _id).
    let (status, again) = app
        .post(
            "/v2/topics/watchers/subscriptions",
            json!({"subscriberIds": ["ada", "cy"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(again["data"][0]["_id"], data[0]["_id"]);
    assert!(again.get("errors").is_none(), "{again}");

    // An identifier another subscriber of the topic holds: 409, nothing written.
    app.subscriber("dee", json!({})).await;
    let (status, out) = app
        .post(
            "/v2/topics/watchers/subscriptions",
            json!({"subscriptions": [{"subscriberId": "dee", "identifier": "bob-watch"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");
    assert_error(&out, 409);

    // All unknown: 400 with the same body, no topic created.
    let (status, out) = app
        .post(
            "/v2/topics/empty/subscriptions",
            json!({"subscriberIds": ["nobody"]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_error(&out, 400);
    assert_eq!(out["data"], json!([]));
    assert_eq!(
        out["meta"],
        json!({"totalCount": 1, "successful": 0, "failed": 1})
    );
    assert_eq!(out["errors"][0]["code"], "SUBSCRIBER_NOT_FOUND");
    let (status, _) = app.get("/v2/topics/empty").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The topic's list, filtered by subscriberId, cursor pages.
    let (status, page) = app
        .get("/v2/topics/watchers/subscriptions?orderDirection=ASC")
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(subscriber_ids(&page), ["ada", "bob", "cy"]);
    assert_eq!(page["totalCount"], 3);
    let (_, one) = app
        .get("/v2/topics/watchers/subscriptions?subscriberId=bob")
        .await;
    assert_eq!(subscriber_ids(&one), ["bob"]);
    let (_, first) = app
        .get("/v2/topics/watchers/subscriptions?orderDirection=ASC&limit=2")
        .await;
    let next = first["next"].as_str().unwrap();
    let (_, second) = app
        .get(&format!(
            "/v2/topics/watchers/subscriptions?orderDirection=ASC&limit=2&after={next}"
        ))
        .await;
    assert_eq!(subscriber_ids(&second), ["cy"]);

    // One by identifier; PATCH with nothing to change answers it, with a name or preferences refuses.
    let (status, got) = app.get("/v2/topics/watchers/subscriptions/bob-watch").await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["identifier"], "bob-watch");
    assert_eq!(got["id"], data[1]["_id"]);
    let (status, _) = app.get("/v2/topics/watchers/subscriptions/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, patched) = app
        .patch("/v2/topics/watchers/subscriptions/bob-watch", json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["subscriber"]["subscriberId"], "bob");
    let (status, out) = app
        .patch(
            "/v2/topics/watchers/subscriptions/bob-watch",
            json!({"name": "n"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert!(out["errors"]["name"].is_object());

    // The v1 read of one membership.
    let (status, member) = app.get("/v1/topics/watchers/subscribers/bob").await;
    assert_eq!(status, StatusCode::OK, "{member}");
    assert_eq!(member["topicKey"], "watchers");
    assert_eq!(member["externalSubscriberId"], "bob");
    assert_eq!(member["_topicId"], topic["_id"]);
    assert_eq!(member["_subscriberId"], data[1]["subscriber"]["_id"]);
    for path in [
        "/v1/topics/watchers/subscribers/dee",
        "/v1/topics/nope/subscribers/bob",
    ] {
        let (status, out) = app.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {out}");
    }

    // A subscriber's subscriptions, over topics.
    app.post(
        "/v2/topics/other/subscriptions",
        json!({"subscriberIds": ["ada"]}),
    )
    .await;
    let (status, mine) = app
        .get("/v2/subscribers/ada/subscriptions?orderDirection=ASC")
        .await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    let keys: Vec<&str> = mine["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["topic"]["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["watchers", "other"]);
    let (_, filtered) = app.get("/v2/subscribers/ada/subscriptions?key=other").await;
    assert_eq!(filtered["data"].as_array().unwrap().len(), 1);
    let (status, _) = app.get("/v2/subscribers/ghost/subscriptions").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Unsubscribe: by subscriberId and by identifier; not subscribed and unknown fail alone.
    let (status, out) = delete_with(
        &app,
        "/v2/topics/watchers/subscriptions",
        json!({"subscriptions": [{"identifier": "bob-watch"}, "ada", "ghost"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["meta"],
        json!({"totalCount": 3, "successful": 2, "failed": 1})
    );
    assert_eq!(out["errors"][0]["subscriberId"], "ghost");
    assert_eq!(out["errors"][0]["code"], "SUBSCRIBER_NOT_FOUND");
    let (_, page) = app.get("/v2/topics/watchers/subscriptions").await;
    assert_eq!(subscriber_ids(&page), ["cy"]);
    let (status, out) = delete_with(
        &app,
        "/v2/topics/watchers/subscriptions",
        json!({"subscriberIds": ["ada"]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_eq!(out["errors"][0]["code"], "SUBSCRIPTION_NOT_FOUND");
}
db_test!(topics_subscriptions, subscriptions);

async fn cascades_and_tenants(app: TestApp) {
    for id in ["ada", "bob"] {
        app.subscriber(id, json!({})).await;
    }
    for key in ["a", "b"] {
        let (status, _) = app
            .post(
                &format!("/v2/topics/{key}/subscriptions"),
                json!({"subscriberIds": ["ada", "bob"]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    // Deleting a subscriber removes its subscriptions; a new subscriber of the same id starts afresh.
    let (status, _) = app.delete("/v2/subscribers/ada").await;
    assert_eq!(status, StatusCode::OK);
    for key in ["a", "b"] {
        let (_, page) = app.get(&format!("/v2/topics/{key}/subscriptions")).await;
        assert_eq!(subscriber_ids(&page), ["bob"]);
    }
    app.subscriber("ada", json!({})).await;
    let (_, mine) = app.get("/v2/subscribers/ada/subscriptions").await;
    assert_eq!(mine["data"], json!([]));

    // Deleting a topic removes its subscriptions; a topic of the same key starts empty.
    let (status, _) = app.delete("/v2/topics/a").await;
    assert_eq!(status, StatusCode::OK);
    let (_, bobs) = app.get("/v2/subscribers/bob/subscriptions").await;
    assert_eq!(bobs["data"].as_array().unwrap().len(), 1);
    assert_eq!(bobs["data"][0]["topic"]["key"], "b");
    app.post("/v2/topics", json!({"key": "a"})).await;
    let (_, page) = app.get("/v2/topics/a/subscriptions").await;
    assert_eq!(page["data"], json!([]));

    // Another environment sees none of it and cannot change it; its own topic of the same key is its own.
    let other = app.second_environment("Other").await;
    for (method, path) in [
        (Method::GET, "/v2/topics/b"),
        (Method::DELETE, "/v2/topics/b"),
        (Method::GET, "/v2/topics/b/subscriptions"),
        (Method::GET, "/v2/subscribers/bob/subscriptions"),
    ] {
        let (status, _) = send(app.req_as(&other, method.clone(), path)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
    }
    let (_, list) = send(app.req_as(&other, Method::GET, "/v2/topics")).await;
    assert_eq!(list["data"], json!([]));
    let (status, out) = send(
        app.req_as(&other, Method::POST, "/v2/topics/b/subscriptions")
            .json(&json!({"subscriberIds": ["bob"]})),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "bob is not a subscriber there: {out}"
    );
    let (status, _) = send(
        app.req_as(&other, Method::POST, "/v2/topics")
            .json(&json!({"key": "b"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, page) = app.get("/v2/topics/b/subscriptions").await;
    assert_eq!(subscriber_ids(&page), ["bob"]);
}
db_test!(topics_cascades, cascades_and_tenants);

async fn v1_routes(app: TestApp) {
    for id in ["ada", "bob"] {
        app.subscriber(id, json!({})).await;
    }
    let (status, created) = app
        .post("/v1/topics", json!({"key": "v1-news", "name": "News"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["key"], "v1-news");
    let id = created["_id"].as_str().unwrap().to_owned();
    let (status, out) = app.post("/v1/topics", json!({"key": "v1-news"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");
    assert_error(&out, 409);

    let (status, added) = app
        .post(
            "/v1/topics/v1-news/subscribers",
            json!({"subscribers": ["ada", "bob", "ghost"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{added}");
    assert_eq!(
        added,
        json!({"succeeded": ["ada", "bob"], "failed": {"notFound": ["ghost"]}})
    );
    let (_, page) = app.get("/v2/topics/v1-news/subscriptions").await;
    assert_eq!(page["totalCount"], 2);

    let (status, got) = app.get("/v1/topics/v1-news").await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["_id"], id.as_str());
    assert_eq!(
        (&got["key"], &got["name"]),
        (&json!("v1-news"), &json!("News"))
    );
    assert_eq!(got["subscribers"], json!([]));
    assert!(got["_environmentId"].is_string() && got["_organizationId"].is_string());

    let (status, renamed) = app
        .patch("/v1/topics/v1-news", json!({"name": "Renamed"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{renamed}");
    assert_eq!(renamed["name"], "Renamed");

    app.post("/v1/topics", json!({"key": "v1-other", "name": "Other"}))
        .await;
    let (status, list) = app.get("/v1/topics?page=0&pageSize=1").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(
        (&list["page"], &list["pageSize"], &list["totalCount"]),
        (&json!(0), &json!(1), &json!(2))
    );
    assert_eq!(list["data"][0]["key"], "v1-news");
    let (_, second) = app.get("/v1/topics?page=1&pageSize=1").await;
    assert_eq!(second["data"][0]["key"], "v1-other");
    let (_, by_key) = app.get("/v1/topics?key=v1-other").await;
    assert_eq!(by_key["totalCount"], 1);
    let (status, _) = app.get("/v1/topics?pageSize=101").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    let (status, out) = app
        .post(
            "/v1/topics/v1-news/subscribers/removal",
            json!({"subscribers": ["ada", "ghost"]}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    let (_, page) = app.get("/v2/topics/v1-news/subscriptions").await;
    assert_eq!(subscriber_ids(&page), ["bob"]);
    let (status, _) = app
        .post(
            "/v1/topics/nope/subscribers/removal",
            json!({"subscribers": ["ada"]}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, out) = app.delete("/v1/topics/v1-news").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    for path in ["/v1/topics/v1-news", "/v1/topics/v1-news/subscribers/bob"] {
        let (status, _) = app.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    // A method a topic path does not have is a 404, not a 405.
    let (status, _) = app
        .post("/v1/topics/v1-other/subscribers/bob", json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(topics_v1, v1_routes);

/// A subscriber deleted after a subscribe read it (the race between the two requests) gets no subscription:
/// the insert is made only while the subscriber exists, so no topic keeps a subscriber that is gone.
async fn subscribe_after_delete(app: TestApp) {
    use tidings::domain::topic::TopicSubscription;
    use tidings::domain::{SubscriberRef, SubscriptionId, Timestamp};

    let live = app.subscriber("still-here", json!({})).await;
    let gone = app.subscriber("gone", json!({})).await;
    let topic = tidings::service::topics::upsert(
        &app.store,
        &app.tenant,
        "racy",
        Default::default(),
        false,
    )
    .await
    .unwrap()
    .topic;
    let (status, _) = app.delete("/v2/subscribers/gone").await;
    assert_eq!(status, StatusCode::OK);
    let row = |s: &Value| TopicSubscription {
        id: SubscriptionId::new(),
        organization_id: app.tenant.organization_id.clone(),
        environment_id: app.tenant.environment_id.clone(),
        topic_id: topic.id.clone(),
        topic_key: topic.key.clone(),
        subscriber_ref: SubscriberRef::from(s["_id"].as_str().unwrap()),
        subscriber_id: s["subscriberId"].as_str().unwrap().to_owned(),
        identifier: format!("id-{}", s["subscriberId"].as_str().unwrap()),
        created_at: Timestamp::now(),
        updated_at: Timestamp::now(),
    };
    let stored = app
        .store
        .subscribe(&[row(&gone), row(&live)])
        .await
        .unwrap();
    let stored: Vec<&str> = stored.iter().map(|s| s.subscriber_id.as_str()).collect();
    assert_eq!(stored, ["still-here"]);
    let (status, page) = app.get("/v2/topics/racy/subscriptions").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(subscriber_ids(&page), ["still-here"]);
}
db_test!(topics_subscribe_after_delete, subscribe_after_delete);
