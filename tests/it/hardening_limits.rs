//! Issue 36, limits: the Inbox's traffic never spends an API key's budget and is limited per environment,
//! client address and subscriber; refused API keys are cached and limited per address, without database
//! reads; `/metrics` reads the database at most once a second; a bulk is admitted at any events limit on
//! both databases; concurrent writes to one new subscriber all succeed.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tidings::api::ApiOptions;
use tidings::config::RateLimits;

use crate::db_test;
use crate::hardening_ops::{header, limits, scrape, Server};
use crate::support::{send, TestApp};

/// Another store on `app`'s database, which a test may close (its server then reads nothing more).
async fn other_store(app: &TestApp) -> tidings::store::Store {
    let mut opts = tidings::store::StoreOptions::new(app.database_url.clone());
    opts.pg_schema = app.pg_schema.clone();
    opts.max_connections = 2;
    let cipher = tidings::crypto::Cipher::from_base64(&app.encryption_key).unwrap();
    tidings::store::Store::open(&opts, cipher).await.unwrap()
}

fn with(rate_limits: RateLimits) -> ApiOptions {
    ApiOptions {
        rate_limits,
        ..ApiOptions::default()
    }
}

/// `POST /v1/inbox/session` on `server` for `subscriber`.
async fn session(app: &TestApp, server: &Server, subscriber: &str) -> reqwest::Response {
    app.client
        .post(format!("{}/v1/inbox/session", server.base))
        .json(&json!({"applicationIdentifier": app.application_identifier,
            "subscriber": {"subscriberId": subscriber}}))
        .send()
        .await
        .unwrap()
}

async fn token(app: &TestApp, server: &Server, subscriber: &str) -> String {
    let resp = session(app, server, subscriber).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    body["data"]["token"].as_str().unwrap().to_owned()
}

async fn unread_count(server: &Server, app: &TestApp, token: &str) -> reqwest::Response {
    app.client
        .get(format!("{}/v1/inbox/notifications/count", server.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

fn policy_category(resp: &reqwest::Response) -> String {
    let policy = header(resp, "ratelimit-policy").expect("RateLimit-Policy");
    let start = policy.find("category=\"").expect("a category") + 10;
    policy[start..].split('"').next().unwrap().to_owned()
}

/// Sessions and Inbox calls spend the `inbox` budget, never the API key's: with the key's `global` budget
/// at 5 tokens, 20 sessions and their calls leave it whole.
async fn the_inbox_never_spends_the_api_keys_budget(app: TestApp) {
    let server = Server::start(&app, limits(6000, 2000, 1)).await;
    for n in 0..20 {
        let resp = session(&app, &server, &format!("flood-{n}")).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        assert_eq!(policy_category(&resp), "inbox");
    }
    let token = token(&app, &server, "flood-0").await;
    for _ in 0..10 {
        assert_eq!(
            unread_count(&server, &app, &token).await.status(),
            StatusCode::OK
        );
    }
    for n in (0..5).rev() {
        let resp = server
            .req(&app, &app.key, Method::GET, "/v1/notifications")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "API-key call {n}");
        assert_eq!(header(&resp, "ratelimit-remaining").unwrap(), n.to_string());
    }
}
db_test!(
    inbox_budget_apart,
    the_inbox_never_spends_the_api_keys_budget
);

/// The Inbox's limits: per environment (`inbox`), per client address, per subscriber; none touches API-key
/// calls.
async fn the_inbox_is_limited_per_environment_address_and_subscriber(app: TestApp) {
    let refused = |resp: &reqwest::Response, category: &str| {
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(policy_category(resp), category);
        let wait: u64 = header(resp, "retry-after").unwrap().parse().unwrap();
        assert!((1..=2).contains(&wait), "{wait}");
    };
    let api_key_call = |server: &Server| {
        server
            .req(&app, &app.key, Method::GET, "/v1/notifications")
            .send()
    };

    // Per environment: 1/s, a bucket of 5, sessions and calls together.
    let server = Server::start(
        &app,
        with(RateLimits {
            inbox: 1,
            ..RateLimits::default()
        }),
    )
    .await;
    let ann = token(&app, &server, "ann").await;
    for n in 0..4 {
        let resp = session(&app, &server, &format!("env-{n}")).await;
        assert_eq!(resp.status(), StatusCode::CREATED, "{n}");
    }
    refused(&session(&app, &server, "env-5").await, "inbox");
    refused(&unread_count(&server, &app, &ann).await, "inbox");
    assert_eq!(
        api_key_call(&server).await.unwrap().status(),
        StatusCode::OK
    );

    // Per client address: 1/s, a bucket of 5 (every test client is 127.0.0.1).
    let options = RateLimits {
        inbox_per_address: 1,
        ..RateLimits::default()
    };
    let server = Server::start(&app, with(options)).await;
    let ann = token(&app, &server, "ann").await;
    for _ in 0..4 {
        assert_eq!(
            unread_count(&server, &app, &ann).await.status(),
            StatusCode::OK
        );
    }
    refused(&session(&app, &server, "bob").await, "inbox-address");
    refused(&unread_count(&server, &app, &ann).await, "inbox-address");
    assert_eq!(
        api_key_call(&server).await.unwrap().status(),
        StatusCode::OK
    );

    // Per subscriber: 1/s, a bucket of 5, its session and its calls together; another subscriber is not
    // affected.
    let options = RateLimits {
        inbox_per_subscriber: 1,
        ..RateLimits::default()
    };
    let server = Server::start(&app, with(options)).await;
    let ann = token(&app, &server, "ann").await;
    for _ in 0..4 {
        assert_eq!(
            unread_count(&server, &app, &ann).await.status(),
            StatusCode::OK
        );
    }
    refused(&unread_count(&server, &app, &ann).await, "inbox-subscriber");
    refused(&session(&app, &server, "ann").await, "inbox-subscriber");
    let bob = token(&app, &server, "bob").await;
    assert_eq!(
        unread_count(&server, &app, &bob).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        api_key_call(&server).await.unwrap().status(),
        StatusCode::OK
    );
}
db_test!(
    inbox_limits,
    the_inbox_is_limited_per_environment_address_and_subscriber
);

/// Behind a trusted proxy (`TIDINGS_TRUSTED_PROXIES`) the client is the address the proxy forwards; without
/// one, `X-Forwarded-For` is the client's to write and changes nothing.
async fn trusted_proxies_name_the_client(app: TestApp) {
    let options = |trusted: &str| ApiOptions {
        rate_limits: RateLimits {
            inbox_per_address: 1,
            ..RateLimits::default()
        },
        trusted_proxies: trusted
            .split(',')
            .filter_map(tidings::config::Network::parse)
            .collect(),
        ..ApiOptions::default()
    };
    let count = |server: &Server, token: &str, client: &str| {
        app.client
            .get(format!("{}/v1/inbox/notifications/count", server.base))
            .bearer_auth(token)
            .header("x-forwarded-for", client)
            .send()
    };
    let token = |server: &Server| {
        let req = app
            .client
            .post(format!("{}/v1/inbox/session", server.base))
            .header("x-forwarded-for", "198.51.100.9")
            .json(&json!({"applicationIdentifier": app.application_identifier,
                "subscriber": {"subscriberId": "ann"}}));
        async move {
            let (status, body) = send(req).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
            body["data"]["token"].as_str().unwrap().to_owned()
        }
    };

    let proxied = Server::start(&app, options("127.0.0.1, 10.0.0.0/8")).await;
    let ann = token(&proxied).await;
    for _ in 0..5 {
        let resp = count(&proxied, &ann, "203.0.113.1").await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
    }
    let resp = count(&proxied, &ann, "203.0.113.1").await.unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    // Another client behind the proxy has its own bucket, whatever it claims before the proxy's entry.
    let resp = count(&proxied, &ann, "203.0.113.1, 203.0.113.2")
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);

    let direct = Server::start(&app, options("")).await;
    let ann = token(&direct).await;
    for n in 0..4 {
        let resp = count(&direct, &ann, &format!("203.0.113.{n}"))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
    }
    let resp = count(&direct, &ann, "203.0.113.99").await.unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
}
db_test!(trusted_proxies, trusted_proxies_name_the_client);

/// A refused key is remembered (a repeat reads nothing), and a client address whose keys were refused too
/// often gets 429 without a lookup; a good key keeps being accepted. Proven by closing the server's store: a read
/// would fail with a 500.
async fn bad_keys_read_nothing(app: TestApp) {
    let store = other_store(&app).await;
    let server = Server::start_on(&app, store.clone(), ApiOptions::default()).await;
    let get = |key: &str| {
        server
            .req(&app, key, Method::GET, "/v1/notifications")
            .send()
    };
    assert_eq!(get(&app.key).await.unwrap().status(), StatusCode::OK);
    assert_eq!(
        get("bad-0").await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    store.close().await;
    for _ in 0..3 {
        let resp = get("bad-0").await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["message"], "API Key not found");
    }
    // The good key is still accepted (cached); its route then fails to read the closed store.
    let accepted = |status: StatusCode| status == StatusCode::INTERNAL_SERVER_ERROR;
    assert!(accepted(get(&app.key).await.unwrap().status()));

    // A flood of distinct bad keys: at 1 refusal a second per address (a bucket of 5), then 429s.
    let store = other_store(&app).await;
    let options = RateLimits {
        auth_failures: 1,
        ..RateLimits::default()
    };
    let server = Server::start_on(&app, store.clone(), with(options)).await;
    let get = |key: &str| {
        server
            .req(&app, key, Method::GET, "/v1/notifications")
            .send()
    };
    assert_eq!(get(&app.key).await.unwrap().status(), StatusCode::OK);
    let mut refused = 0;
    let mut n = 0;
    let limited = loop {
        n += 1;
        assert!(n <= 20, "no 429 after {refused} refused keys");
        let resp = get(&format!("flood-{n}")).await.unwrap();
        match resp.status() {
            StatusCode::UNAUTHORIZED => refused += 1,
            StatusCode::TOO_MANY_REQUESTS => break resp,
            other => panic!("{other}"),
        }
    };
    assert!(refused >= 5, "{refused}");
    assert_eq!(policy_category(&limited), "auth-failure");
    assert!(header(&limited, "retry-after").is_some());
    // Until a token is back (1 s) nothing is read: new keys get 429, the good key (cached) is accepted.
    store.close().await;
    for n in 0..5 {
        let resp = get(&format!("after-{n}")).await.unwrap();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS, "{n}");
    }
    assert!(accepted(get(&app.key).await.unwrap().status()));
}
db_test!(bad_key_flood, bad_keys_read_nothing);

/// `/metrics` reads the queue's figures at most once a second: a scrape right after one reads nothing
/// (the server's store is closed, and the figures are still there), one a second later reads again.
async fn metrics_read_the_database_once_a_second(app: TestApp) {
    let store = other_store(&app).await;
    let server = Server::start_on(&app, store.clone(), ApiOptions::default()).await;
    let figures = "tidings_jobs{state=\"queued\"}";
    let failed = "# tidings_jobs: the database did not answer";
    let text = scrape(&server.base, None).await;
    assert!(text.contains(figures), "{text}");
    store.close().await;
    let scrapes: Vec<_> = (0..10)
        .map(|_| tokio::spawn(scrape_owned(server.base.clone())))
        .collect();
    for s in scrapes {
        let text = s.await.unwrap();
        assert!(text.contains(figures) && !text.contains(failed), "{text}");
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let text = scrape(&server.base, None).await;
    assert!(text.contains(failed) && !text.contains(figures), "{text}");
}
db_test!(metrics_cache, metrics_read_the_database_once_a_second);

async fn scrape_owned(base: String) -> String {
    scrape(&base, None).await
}

/// At an events limit whose bucket holds fewer than 100 tokens (10/s: 55), a bulk costs the whole bucket:
/// admitted when it is full, then refused until it is full again — alike on SQLite and PostgreSQL.
async fn a_bulk_is_admitted_at_a_low_events_limit(app: TestApp) {
    let server = Server::start(&app, limits(10, 2000, 3000)).await;
    let bulk = || {
        server
            .req(&app, &app.key, Method::POST, "/v1/events/trigger/bulk")
            .json(&json!({"events": [{"name": "missing", "to": "s1"}]}))
            .send()
    };
    let resp = bulk().await.unwrap();
    assert_ne!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(header(&resp, "ratelimit-policy")
        .unwrap()
        .contains("category=\"trigger\";cost=\"bulk\""));
    assert!(
        header(&resp, "ratelimit-remaining")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            <= 1
    );
    let resp = bulk().await.unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = header(&resp, "retry-after").unwrap().parse().unwrap();
    assert!((5..=6).contains(&wait), "{wait}");
}
db_test!(
    bulk_low_events_limit,
    a_bulk_is_admitted_at_a_low_events_limit
);

/// 30 concurrent writes that each change a new subscriber: every one answers 2xx (none loses on the version
/// check), and the record left is one of the writes'.
async fn concurrent_writes_to_a_new_subscriber_succeed(app: TestApp) {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Race", "workflowId": "race", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "hi"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let names: Vec<String> = (0..30).map(|i| format!("name-{i}")).collect();
    // POST /v2/subscribers (upsert), then triggers whose `to` carries a profile, then PATCH.
    type Write = fn(&TestApp, &str, &str) -> reqwest::RequestBuilder;
    let rounds: [(&str, Write); 3] = [
        ("created", |app, id, name| {
            app.req(Method::POST, "/v2/subscribers")
                .json(&json!({"subscriberId": id, "firstName": name}))
        }),
        ("triggered", |app, id, name| {
            app.req(Method::POST, "/v1/events/trigger")
                .json(&json!({"name": "race", "to": {"subscriberId": id, "firstName": name}}))
        }),
        ("patched", |app, id, name| {
            app.req(Method::PATCH, &format!("/v2/subscribers/{id}"))
                .json(&json!({"firstName": name}))
        }),
    ];
    let mut failed = Vec::new();
    for (id, build) in rounds {
        if id == "patched" {
            let (status, out) = app
                .post("/v2/subscribers", json!({"subscriberId": id}))
                .await;
            assert_eq!(status, StatusCode::CREATED, "{out}");
        }
        let tasks: Vec<_> = names
            .iter()
            .map(|name| tokio::spawn(send(build(&app, id, name))))
            .collect();
        for t in tasks {
            let (status, body) = t.await.unwrap();
            if !status.is_success() {
                failed.push(format!("{id}: {status} {body}"));
            }
        }
        let (status, s) = app.get(&format!("/v2/subscribers/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{s}");
        let first = s["firstName"].as_str().unwrap_or_default();
        assert!(names.iter().any(|n| n == first), "{id}: {s}");
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
db_test!(
    concurrent_subscriber_writes,
    concurrent_writes_to_a_new_subscriber_succeed
);
