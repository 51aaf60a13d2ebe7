//! Subscribers: create/upsert, retrieve, patch, soft delete, search, credentials, validation, isolation.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::db_test;
use crate::support::{assert_error, send, TestApp};

fn is_iso_millis(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 24 && s.ends_with('Z') && s.as_bytes()[19] == b'.')
}

async fn create_and_retrieve(app: TestApp) {
    let (status, s) = app
        .post(
            "/v2/subscribers",
            json!({
                "subscriberId": "  ada  ", "firstName": "Ada", "lastName": "Lovelace", "email": "ada@example.com",
                "phone": "+15550001", "avatar": "https://example.com/a.png", "locale": "en_GB",
                "timezone": "Europe/London", "data": {"plan": "pro", "seats": 3}
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{s}");
    assert_eq!(s["subscriberId"], "ada", "subscriberId is trimmed");
    assert!(s["_id"]
        .as_str()
        .is_some_and(|id| id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit())));
    assert_ne!(s["_id"], s["subscriberId"]);
    assert_eq!(s["firstName"], "Ada");
    assert_eq!(s["lastName"], "Lovelace");
    assert_eq!(s["email"], "ada@example.com");
    assert_eq!(s["phone"], "+15550001");
    assert_eq!(s["avatar"], "https://example.com/a.png");
    assert_eq!(s["locale"], "en_GB");
    assert_eq!(s["timezone"], "Europe/London");
    assert_eq!(s["data"], json!({"plan": "pro", "seats": 3}));
    assert_eq!(s["channels"], json!([]));
    assert_eq!(s["topics"], json!([]));
    assert_eq!(s["isOnline"], Value::Null);
    assert_eq!(s["lastOnlineAt"], Value::Null);
    assert_eq!(s["__v"], 0);
    assert_eq!(s["deleted"], false);
    assert_eq!(s["_environmentId"], app.tenant.environment_id.0.as_str());
    assert_eq!(s["_organizationId"], app.tenant.organization_id.0.as_str());
    assert!(
        is_iso_millis(&s["createdAt"]) && is_iso_millis(&s["updatedAt"]),
        "{s}"
    );

    let (status, got) = app.get("/v2/subscribers/ada").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, s);

    // Unset fields are present as null.
    let bare = app.subscriber("bare", json!({})).await;
    for f in [
        "firstName",
        "lastName",
        "email",
        "phone",
        "avatar",
        "locale",
        "timezone",
        "data",
    ] {
        assert_eq!(bare[f], Value::Null, "{f}");
    }

    let (status, body) = app.get("/v2/subscribers/nobody").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, 404);
    assert_eq!(body["message"], "Subscriber: nobody was not found");
}
db_test!(create_retrieve, create_and_retrieve);

async fn create_upserts_or_conflicts(app: TestApp) {
    let first = app
        .subscriber(
            "u1",
            json!({"email": "one@example.com", "firstName": "One"}),
        )
        .await;
    // Without failIfExists, a second create updates the given fields only.
    let (status, second) = app
        .post(
            "/v2/subscribers",
            json!({"subscriberId": "u1", "lastName": "Two"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(second["_id"], first["_id"]);
    assert_eq!(second["firstName"], "One");
    assert_eq!(second["lastName"], "Two");
    assert_eq!(second["__v"], 1);
    let (status, body) = app
        .post(
            "/v2/subscribers?failIfExists=true",
            json!({"subscriberId": "u1", "lastName": "Three"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&body, 409);
    assert_eq!(body["message"], "Subscriber with id \"u1\" already exists");
    let (_, got) = app.get("/v2/subscribers/u1").await;
    assert_eq!(got["lastName"], "Two", "a refused create changes nothing");
}
db_test!(upsert_conflict, create_upserts_or_conflicts);

async fn validation_rules(app: TestApp) {
    let cases = [
        (json!({}), "subscriberId"),
        (json!({"subscriberId": "   "}), "subscriberId"),
        (json!({"subscriberId": "x".repeat(256)}), "subscriberId"),
        (json!({"subscriberId": 5}), "subscriberId"),
        (
            json!({"subscriberId": "v", "email": "not-an-email"}),
            "email",
        ),
        (
            json!({"subscriberId": "v", "timezone": "Mars/Olympus"}),
            "timezone",
        ),
        (json!({"subscriberId": "v", "data": [1, 2]}), "data"),
        (json!({"subscriberId": "v", "data": "text"}), "data"),
        (
            json!({"subscriberId": "v", "avatar": "not a url"}),
            "avatar",
        ),
        (json!({"subscriberId": "v", "firstName": 12}), "firstName"),
    ];
    for (body, field) in cases {
        let (status, err) = app.post("/v2/subscribers", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_error(&err, 422);
        assert!(
            err["errors"][field]["messages"][0].is_string(),
            "{body} → {err}"
        );
    }
    let (status, err) = send(app.req(Method::POST, "/v2/subscribers").body("{not json")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(err["errors"]["body"].is_object(), "{err}");
    // Several bad fields are reported together.
    let (_, err) = app
        .post(
            "/v2/subscribers",
            json!({"subscriberId": "v", "email": "x", "timezone": "y"}),
        )
        .await;
    assert!(
        err["errors"]["email"].is_object() && err["errors"]["timezone"].is_object(),
        "{err}"
    );
    // Nothing was stored by the refused requests.
    let (_, page) = app.get("/v2/subscribers").await;
    assert_eq!(page["totalCount"], 0);
}
db_test!(validation, validation_rules);

async fn patch_changes_only_given_fields(app: TestApp) {
    let s = app
        .subscriber(
            "p1",
            json!({"firstName": "Ada", "lastName": "L", "email": "a@example.com", "phone": "+1"}),
        )
        .await;
    let (status, p) = app
        .patch(
            "/v2/subscribers/p1",
            json!({"lastName": "Lovelace", "phone": null, "data": {"k": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{p}");
    assert_eq!(p["firstName"], "Ada");
    assert_eq!(p["lastName"], "Lovelace");
    assert_eq!(p["email"], "a@example.com");
    assert_eq!(p["phone"], Value::Null);
    assert_eq!(p["data"], json!({"k": 1}));
    assert_eq!(p["__v"], 1);
    assert_eq!(p["_id"], s["_id"]);
    assert_eq!(p["createdAt"], s["createdAt"]);
    assert!(
        p["updatedAt"].as_str() > s["updatedAt"].as_str(),
        "updatedAt moves forward"
    );
    let (_, p2) = app.patch("/v2/subscribers/p1", json!({})).await;
    assert_eq!(p2["__v"], 2, "every change bumps __v");
    // The name search follows the new name.
    let (_, page) = app.get("/v2/subscribers?name=Ada+Lovelace").await;
    assert_eq!(page["totalCount"], 1);

    let (status, err) = app
        .patch("/v2/subscribers/p1", json!({"email": "bad"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(err["errors"]["email"].is_object());
    let (status, _) = app
        .patch("/v2/subscribers/ghost", json!({"firstName": "x"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(patch, patch_changes_only_given_fields);

async fn delete_is_soft_and_leaves_search(app: TestApp) {
    let s = app
        .subscriber("d1", json!({"email": "gone@example.com"}))
        .await;
    let (status, body) = app.delete("/v2/subscribers/d1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"acknowledged": true, "status": "deleted"}));
    let (status, _) = app.get("/v2/subscribers/d1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, page) = app.get("/v2/subscribers?email=gone@").await;
    assert_eq!(page["totalCount"], 0);
    let (status, _) = app.delete("/v2/subscribers/d1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The id can be used again; it is a new subscriber.
    let again = app.subscriber("d1", json!({})).await;
    assert_ne!(again["_id"], s["_id"]);
    assert_eq!(again["email"], Value::Null);
    // Read back, it is the new one, not the deleted one (which, on SQLite, holds the id's slot).
    let (status, read) = app.get("/v2/subscribers/d1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["_id"], again["_id"]);
}
db_test!(delete, delete_is_soft_and_leaves_search);

async fn search_filters(app: TestApp) {
    search_assertions(&app).await;
    // Again once the trigram statistics are loaded (SQLite then matches the rarest trigrams).
    for _ in 0..100 {
        app.store.refresh_search_stats().await.unwrap();
        if app.store.search_stats_loaded() || app.backend == crate::support::Backend::Postgres {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    search_assertions(&app).await;
}

/// Creates (or, the second time, updates) the people, then checks every filter.
async fn search_assertions(app: &TestApp) {
    let people = [
        (
            "s1",
            "Ada",
            "Lovelace",
            "ada.lovelace@example.com",
            "+441234567890",
        ),
        (
            "s2",
            "Grace",
            "Hopper",
            "grace@navy.example.org",
            "+15551234567",
        ),
        (
            "s3",
            "Alan",
            "Turing",
            "Alan.Turing@Example.com",
            "+447700900123",
        ),
        ("s10", "Ada", "Byron", "byron_ada%x@example.com", "+3312345"),
    ];
    for (id, first, last, email, phone) in people {
        app.subscriber(
            id,
            json!({"firstName": first, "lastName": last, "email": email, "phone": phone}),
        )
        .await;
    }
    let ids = |page: &Value| -> Vec<String> {
        let mut v: Vec<String> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["subscriberId"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    let app_ref = app;
    let q = |query: &'static str| async move {
        app_ref.get(&format!("/v2/subscribers?{query}")).await.1
    };
    assert_eq!(
        ids(&q("email=example.com").await),
        ["s1", "s10"],
        "case-sensitive substring"
    );
    assert_eq!(ids(&q("email=Example.com").await), ["s3"]);
    assert_eq!(ids(&q("email=example").await), ["s1", "s10", "s2"]);
    assert_eq!(ids(&q("email=%25x").await), ["s10"], "% is literal");
    assert_eq!(ids(&q("email=_ada").await), ["s10"], "_ is literal");
    assert_eq!(
        ids(&q("email=a_a").await),
        Vec::<String>::new(),
        "_ is not a wildcard"
    );
    assert_eq!(ids(&q("phone=12345").await), ["s1", "s10", "s2"]);
    assert_eq!(
        ids(&q("phone=44").await),
        ["s1", "s3"],
        "short terms work too"
    );
    assert_eq!(ids(&q("name=Ada").await), ["s1", "s10"]);
    assert_eq!(
        ids(&q("name=a+L").await),
        ["s1"],
        "name is first + space + last"
    );
    assert_eq!(
        ids(&q("name=ada").await),
        Vec::<String>::new(),
        "case-sensitive"
    );
    assert_eq!(
        ids(&q("subscriberId=s1").await),
        ["s1"],
        "exact, not prefix"
    );
    assert_eq!(ids(&q("subscriberId=s").await), Vec::<String>::new());
    assert_eq!(
        ids(&q("name=Ada&email=byron").await),
        ["s10"],
        "filters combine with AND"
    );
    assert_eq!(ids(&q("name=Ada&phone=%2B44").await), ["s1"]);
    assert_eq!(
        ids(&q("email=").await).len(),
        4,
        "an empty filter is ignored"
    );
    let page = q("email=example").await;
    assert_eq!(page["totalCount"], 3);
    assert_eq!(page["totalCountCapped"], false);
    // Search terms with GLOB/LIKE metacharacters are literal.
    app.subscriber(
        "star",
        json!({"email": "a*b?c@example.com", "phone": "+1[55]*5?9"}),
    )
    .await;
    assert_eq!(ids(&q("email=a*b%3Fc").await), ["star"]);
    assert_eq!(ids(&q("email=a*c").await), Vec::<String>::new());
    assert_eq!(ids(&q("phone=[55]").await), ["star"]);
    assert_eq!(ids(&q("phone=*5%3F").await), ["star"]);
    assert_eq!(ids(&q("phone=1*9").await), Vec::<String>::new());
    // Deleted subscribers leave the search (and the second round starts from the same people).
    let (status, _) = app.delete("/v2/subscribers/star").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids(&q("email=a*b%3Fc").await), Vec::<String>::new());
}
db_test!(search, search_filters);

/// Long terms (SQLite: the 5-gram index), with statistics read before the rows existed, across updates,
/// non-ASCII text and soft deletes.
async fn search_long_terms(app: TestApp) {
    app.subscriber("warm", json!({"email": "warm@example.com"}))
        .await;
    app.store.refresh_search_stats().await.unwrap();
    let app_ref = &app;
    let ids = |query: String| async move {
        let (status, page) = app_ref.get(&format!("/v2/subscribers?{query}")).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let mut v: Vec<String> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["subscriberId"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    for (id, first, last, email) in [
        ("u1", "Zoë", "Ångström", "zoe.angstrom@uni.example.se"),
        ("u2", "Björk", "Guðmundsdóttir", "bjork@music.example.is"),
        ("u3", "Zoë", "Åberg", "zoe.aberg@uni.example.se"),
    ] {
        app.subscriber(
            id,
            json!({"firstName": first, "lastName": last, "email": email}),
        )
        .await;
    }
    assert_eq!(ids("name=%C3%85ngstr%C3%B6m".into()).await, ["u1"]);
    assert_eq!(ids("name=Zo%C3%AB+%C3%85".into()).await, ["u1", "u3"]);
    assert_eq!(ids("name=mundsd%C3%B3".into()).await, ["u2"]);
    assert_eq!(ids("email=uni.example.se".into()).await, ["u1", "u3"]);
    assert_eq!(ids("email=zoe.angstrom@uni".into()).await, ["u1"]);
    assert_eq!(
        ids("email=zoe.angstrom@unix".into()).await,
        Vec::<String>::new()
    );
    // An update re-indexes the changed column only.
    let (status, _) = app
        .patch("/v2/subscribers/u1", json!({"email": "z.a@lab.example.no"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids("email=zoe.angstrom".into()).await, Vec::<String>::new());
    assert_eq!(ids("email=lab.example".into()).await, ["u1"]);
    assert_eq!(ids("name=%C3%85ngstr%C3%B6m".into()).await, ["u1"]);
    // A subscriber without an email (nothing indexed) that gets one.
    app.subscriber("late", json!({})).await;
    let (status, _) = app
        .patch(
            "/v2/subscribers/late",
            json!({"email": "late.comer@uni.example.se"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids("email=late.comer".into()).await, ["late"]);
    assert_eq!(ids("email=uni.example.se".into()).await, ["late", "u3"]);
    let (status, _) = app
        .patch("/v2/subscribers/late", json!({"email": null}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids("email=late.comer".into()).await, Vec::<String>::new());
    // A term longer than any value, and one made of a repeated gram.
    assert_eq!(
        ids(format!("email={}", "x".repeat(300))).await,
        Vec::<String>::new()
    );
    app.subscriber("rep", json!({"phone": "+1000000000"})).await;
    assert_eq!(ids("phone=0000000".into()).await, ["rep"]);
    assert_eq!(ids("phone=00000000000".into()).await, Vec::<String>::new());
    let (status, _) = app.delete("/v2/subscribers/u3").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        ids("email=uni.example.se".into()).await,
        Vec::<String>::new()
    );
    assert_eq!(ids("name=Zo%C3%AB+%C3%85".into()).await, ["u1"]);
}
db_test!(search_long, search_long_terms);

async fn push_integration(app: &TestApp, identifier: &str, active: bool) -> Value {
    app.integration(
        json!({"providerId": "fcm", "channel": "push", "identifier": identifier, "active": active}),
    )
    .await
}

async fn credentials_put_replaces_device_tokens(app: TestApp) {
    app.subscriber("c1", json!({})).await;
    let integration = push_integration(&app, "fcm-main", true).await;
    let (status, s) = app
        .put(
            "/v1/subscribers/c1/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": ["t1", "t2", "t1"], "webhookUrl": "https://hook.example.com", "unknownKey": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["__v"], 1);
    let ch = &s["channels"][0];
    assert_eq!(ch["providerId"], "fcm");
    assert_eq!(ch["_integrationId"], integration["_id"]);
    assert_eq!(ch["integrationIdentifier"], "fcm-main");
    assert_eq!(
        ch["credentials"],
        json!({"deviceTokens": ["t1", "t2"], "webhookUrl": "https://hook.example.com"})
    );

    // Replace: new list wins, other credentials stay.
    let (_, s) = app
        .put(
            "/v1/subscribers/c1/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": ["t3"]}}),
        )
        .await;
    assert_eq!(s["channels"].as_array().unwrap().len(), 1);
    assert_eq!(
        s["channels"][0]["credentials"]["deviceTokens"],
        json!(["t3"])
    );
    assert_eq!(
        s["channels"][0]["credentials"]["webhookUrl"],
        "https://hook.example.com"
    );
    // Absent deviceTokens keep the list; [] clears it.
    let (_, s) = app
        .put(
            "/v1/subscribers/c1/credentials",
            json!({"providerId": "fcm", "credentials": {"title": "T"}}),
        )
        .await;
    assert_eq!(
        s["channels"][0]["credentials"]["deviceTokens"],
        json!(["t3"])
    );
    assert_eq!(s["channels"][0]["credentials"]["title"], "T");
    let (_, s) = app
        .put(
            "/v1/subscribers/c1/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": []}}),
        )
        .await;
    assert_eq!(s["channels"][0]["credentials"]["deviceTokens"], json!([]));
    assert_eq!(s["__v"], 4);
    // The retrieved subscriber matches.
    let (_, got) = app.get("/v2/subscribers/c1").await;
    assert_eq!(got["channels"], s["channels"]);

    // PATCH appends (deduplicated).
    let (_, s) = app
        .patch(
            "/v1/subscribers/c1/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": ["a", "b"]}}),
        )
        .await;
    let (status, s2) = app
        .patch(
            "/v1/subscribers/c1/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": ["b", "c"]}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        s["channels"][0]["credentials"]["deviceTokens"],
        json!(["a", "b"])
    );
    assert_eq!(
        s2["channels"][0]["credentials"]["deviceTokens"],
        json!(["a", "b", "c"])
    );
}
db_test!(credentials_put, credentials_put_replaces_device_tokens);

async fn credentials_rules(app: TestApp) {
    app.subscriber("c2", json!({})).await;
    // No integration at all → 400.
    let body = json!({"providerId": "fcm", "credentials": {"deviceTokens": ["x"]}});
    let (status, err) = app
        .put("/v1/subscribers/c2/credentials", body.clone())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert_error(&err, 400);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("do not have active fcm integration"),
        "{err}"
    );
    // An inactive one does not count either.
    push_integration(&app, "fcm-off", false).await;
    let (status, _) = app
        .put("/v1/subscribers/c2/credentials", body.clone())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    push_integration(&app, "fcm-on", true).await;
    // integrationIdentifier must name an active one.
    let (status, _) = app
        .put(
            "/v1/subscribers/c2/credentials",
            json!({"providerId": "fcm", "integrationIdentifier": "fcm-off", "credentials": {}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, s) = app
        .put("/v1/subscribers/c2/credentials", json!({"providerId": "fcm", "integrationIdentifier": "fcm-on", "credentials": {"deviceTokens": ["x"]}}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s["channels"][0]["integrationIdentifier"], "fcm-on");
    // Unknown subscriber → 404.
    let (status, err) = app
        .put("/v1/subscribers/ghost/credentials", body.clone())
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(err["message"], "Subscriber: ghost was not found");
    // providerId must be a chat/push provider; credentials must be an object.
    for bad in [
        json!({"providerId": "sendgrid", "credentials": {}}),
        json!({"providerId": "carrier-pigeon", "credentials": {}}),
        json!({"providerId": "fcm"}),
        json!({"providerId": "fcm", "credentials": {"deviceTokens": "x"}}),
        json!({"credentials": {}}),
    ] {
        let (status, err) = app.put("/v1/subscribers/c2/credentials", bad.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad} → {err}");
    }
    // At most 100 device tokens.
    let many: Vec<String> = (0..101).map(|i| format!("tok{i}")).collect();
    let (status, err) = app
        .put(
            "/v1/subscribers/c2/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": many}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["currentCount"], 101);
    assert_eq!(err["limit"], 100);
    let hundred: Vec<String> = (0..100).map(|i| format!("tok{i}")).collect();
    let (status, _) = app
        .put(
            "/v1/subscribers/c2/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": hundred}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, err) = app
        .patch(
            "/v1/subscribers/c2/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": ["one-more"]}}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "appending past 100 is refused too: {err}"
    );
    let (_, s) = app.get("/v2/subscribers/c2").await;
    assert_eq!(
        s["channels"][0]["credentials"]["deviceTokens"]
            .as_array()
            .unwrap()
            .len(),
        100
    );

    // A chat credential, given in the novu spelling, is stored in the canonical one.
    app.integration(json!({"providerId": "novu-slack", "channel": "chat", "active": true}))
        .await;
    let (status, s) = app
        .put("/v1/subscribers/c2/credentials", json!({"providerId": "novu-slack", "credentials": {"webhookUrl": "https://hooks.slack.com/x"}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["channels"][1]["providerId"], "svc-slack");

    // DELETE removes the provider's entries.
    let (status, body) = app.delete("/v1/subscribers/c2/credentials/fcm").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (_, s) = app.get("/v2/subscribers/c2").await;
    let providers: Vec<&str> = s["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["providerId"].as_str().unwrap())
        .collect();
    assert_eq!(providers, ["svc-slack"]);
    let (status, _) = app.delete("/v1/subscribers/c2/credentials/fcm").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.delete("/v1/subscribers/ghost/credentials/fcm").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
db_test!(credentials_rules_, credentials_rules);

async fn concurrent_appends_lose_nothing(app: TestApp) {
    app.subscriber("race", json!({})).await;
    push_integration(&app, "fcm", true).await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let req = app.req(Method::PATCH, "/v1/subscribers/race/credentials").json(
            &json!({"providerId": "fcm", "credentials": {"deviceTokens": [format!("tok-{i}")]}}),
        );
        tasks.push(tokio::spawn(send(req)));
    }
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (_, s) = app.get("/v2/subscribers/race").await;
    let mut tokens: Vec<String> =
        serde_json::from_value(s["channels"][0]["credentials"]["deviceTokens"].clone()).unwrap();
    tokens.sort();
    assert_eq!(
        tokens,
        (0..8).map(|i| format!("tok-{i}")).collect::<Vec<_>>()
    );
    assert_eq!(s["__v"], 8);
}
db_test!(concurrent_appends, concurrent_appends_lose_nothing);

async fn environments_are_isolated(app: TestApp) {
    app.subscriber("mine", json!({"email": "mine@example.com"}))
        .await;
    push_integration(&app, "fcm", true).await;
    let other = app.second_environment("Production").await;
    let (status, _) = send(app.req_as(&other, Method::GET, "/v2/subscribers/mine")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, page) = send(app.req_as(&other, Method::GET, "/v2/subscribers?email=mine")).await;
    assert_eq!(page["totalCount"], 0);
    assert_eq!(page["data"], json!([]));
    let (status, _) = send(
        app.req_as(&other, Method::PATCH, "/v2/subscribers/mine")
            .json(&json!({"firstName": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(app.req_as(&other, Method::DELETE, "/v2/subscribers/mine")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(
        app.req_as(&other, Method::PUT, "/v1/subscribers/mine/credentials")
            .json(&json!({"providerId": "fcm", "credentials": {"deviceTokens": ["x"]}})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The other environment can create the same subscriberId; it is a different subscriber.
    let (status, theirs) = send(
        app.req_as(&other, Method::POST, "/v2/subscribers")
            .json(&json!({"subscriberId": "mine"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(theirs["email"], Value::Null);
    // …but cannot attach credentials without an integration of its own.
    let (status, _) = send(
        app.req_as(&other, Method::PUT, "/v1/subscribers/mine/credentials")
            .json(&json!({"providerId": "fcm", "credentials": {"deviceTokens": ["x"]}})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, mine) = app.get("/v2/subscribers/mine").await;
    assert_eq!(mine["email"], "mine@example.com");
}
db_test!(isolation, environments_are_isolated);
