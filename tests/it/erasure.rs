//! A deleted subscriber's data stays with it (issue 35): a subscriber created again under a deleted one's
//! subscriberId is another record, and no route scoped to a subscriber — the v1 feed, its counts and marks,
//! `/v1/messages?subscriberId=`, the Inbox, activity filters, topics, endpoints, credentials, preferences —
//! shows it the first one's data; the delete erases the first one's rows (at once, or in background batches
//! that resume after a crash). The socket is checked with `@novu/js` in `tests/sdk-ts/erasure.mjs`.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use tidings::domain::{SubscriberRef, Timestamp};
use tidings::store::erasures::Erasure;

use crate::db_test;
use crate::support::{count, eventually, send, settled, TestApp};

async fn inbox_token(app: &TestApp, subscriber: &str) -> String {
    let (status, out) = send(app.client.post(app.url("/v1/inbox/session")).json(&json!({
        "applicationIdentifier": app.application_identifier,
        "subscriber": {"subscriberId": subscriber}
    })))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out["data"]["token"].as_str().unwrap().to_owned()
}

async fn inbox(app: &TestApp, token: &str, method: Method, path: &str) -> (StatusCode, Value) {
    send(app.client.request(method, app.url(path)).bearer_auth(token)).await
}

async fn trigger(app: &TestApp, to: &str, n: i64) -> String {
    let tx = format!("{to}-{n}");
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "news", "to": {"subscriberId": to, "email": "ts@example.com"},
                   "payload": {"n": n}, "transactionId": tx}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    settled(app, &tx, 1).await;
    tx
}

fn contents(page: &Value, key: &str) -> Vec<String> {
    let mut out: Vec<String> = page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"))
        .iter()
        .map(|m| m[key].as_str().unwrap_or_else(|| panic!("{m}")).to_owned())
        .collect();
    out.sort();
    out
}

/// Everything `ts-user` has: 3 in-app messages (one read), push credentials, a Slack endpoint and connection,
/// a preference, a topic subscription and an Inbox session. Answers the session's token and a message id.
async fn furnish(app: &TestApp) -> (String, String) {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "News", "workflowId": "news", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "News {{payload.n}}"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    app.integration(
        json!({"providerId": "fcm", "channel": "push", "identifier": "fcm-main", "active": true}),
    )
    .await;
    app.integration(
        json!({"providerId": "slack", "channel": "chat", "identifier": "slack-main", "active": true}),
    )
    .await;
    app.subscriber(
        "ts-user",
        json!({"firstName": "Old", "email": "ts@example.com"}),
    )
    .await;
    for n in 1..=3 {
        trigger(app, "ts-user", n).await;
    }
    let (status, out) = app
        .put(
            "/v1/subscribers/ts-user/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": ["old-device"]}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let (status, out) = app
        .post(
            "/v1/channel-connections",
            json!({"identifier": "c-ts", "integrationIdentifier": "slack-main", "subscriberId": "ts-user",
                   "workspace": {"id": "T1"}, "auth": {"accessToken": "xoxb-old"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = app
        .post(
            "/v1/channel-endpoints",
            json!({"identifier": "e-ts", "type": "slack_channel", "endpoint": {"channelId": "C1"},
                   "integrationIdentifier": "slack-main", "subscriberId": "ts-user"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = app
        .post(
            "/v2/topics/watchers/subscriptions",
            json!({"subscriptions": ["ts-user"]}),
        )
        .await;
    assert!(status.is_success(), "{out}");
    let (status, out) = app
        .patch(
            "/v2/subscribers/ts-user/preferences",
            json!({"channels": {"email": false}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let (_, feed) = app.get("/v1/subscribers/ts-user/notifications/feed").await;
    assert_eq!(feed["totalCount"], 3, "{feed}");
    let old_message = feed["data"][0]["_id"].as_str().unwrap().to_owned();
    let (status, _) = app
        .post(
            "/v1/subscribers/ts-user/messages/mark-as",
            json!({"messageId": old_message, "markAs": "read"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    (inbox_token(app, "ts-user").await, old_message)
}

/// The rows of the old record left in the database: messages, notifications still naming it, profile,
/// preferences, subscriptions, endpoints and connections.
async fn left_of(app: &TestApp, old: &SubscriberRef) -> [i64; 5] {
    let r = old.as_str();
    [
        count(app, "select count(*) from messages where subscriber_ref = $1", r).await,
        count(
            app,
            "select count(*) from notifications where subscriber_ref = $1 and (subscriber_id <> '' or to_value is not null)",
            r,
        )
        .await,
        count(app, "select count(*) from subscribers where id = $1", r).await
            + count(app, "select count(*) from subscriber_preferences where subscriber_ref = $1", r).await
            + count(app, "select count(*) from topic_subscriptions where subscriber_ref = $1", r).await,
        count(
            app,
            "select count(*) from channel_endpoints where subscriber_id = $1",
            "ts-user",
        )
        .await,
        count(
            app,
            "select count(*) from channel_connections where subscriber_id = $1",
            "ts-user",
        )
        .await,
    ]
}

/// The old record's notifications' execution details that still hold a provider's raw answer.
async fn raw_details_of(app: &TestApp, old: &SubscriberRef) -> i64 {
    count(
        app,
        "select count(*) from execution_details where raw is not null \
         and notification_id in (select id from notifications where subscriber_ref = $1)",
        old.as_str(),
    )
    .await
}

async fn recreated_subscriber_sees_nothing_of_the_deleted_one(mut app: TestApp) {
    let (old_token, old_message) = furnish(&app).await;
    let old = app.subscriber_ref("ts-user").await.unwrap();
    // No worker erases until the first round of checks is done: they run before the erasure for certain.
    app.stop_workers().await;
    let (status, out) = app.delete("/v2/subscribers/ts-user").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out, json!({"acknowledged": true, "status": "deleted"}));
    // At once: the profile, credentials, preferences, subscriptions, endpoints and connections.
    let left = left_of(&app, &old).await;
    assert_eq!(left[2..], [0, 0, 0], "{left:?}");
    // The old session is over.
    let (status, _) = inbox(&app, &old_token, Method::GET, "/v1/inbox/notifications").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let created = app
        .subscriber("ts-user", json!({"email": "ts@example.com"}))
        .await;
    let new = app.subscriber_ref("ts-user").await.unwrap();
    assert_ne!(new, old);
    assert_eq!(created["_id"], new.as_str());
    assert_eq!(created["channels"], json!([]), "{created}");
    assert_eq!(created["firstName"], Value::Null, "{created}");
    let token = inbox_token(&app, "ts-user").await;

    // Before the background erasure has run and after it, the new record sees nothing of the old one.
    for round in ["before the erasure", "after the erasure"] {
        if round == "after the erasure" {
            let left = left_of(&app, &old).await;
            assert_eq!(
                left[..2],
                [3, 3],
                "nothing erased before the workers run: {left:?}"
            );
            assert_eq!(
                raw_details_of(&app, &old).await,
                3,
                "the in-app steps' answers"
            );
            app.start_workers();
            eventually(|| async {
                let left = left_of(&app, &old).await;
                (left[..2] == [0, 0]).then_some(())
            })
            .await;
            assert_eq!(raw_details_of(&app, &old).await, 0);
        }
        let (_, feed) = app.get("/v1/subscribers/ts-user/notifications/feed").await;
        assert_eq!(
            (
                feed["totalCount"].as_i64(),
                feed["data"].as_array().map(Vec::len)
            ),
            (Some(0), Some(0)),
            "{round}: {feed}"
        );
        for path in [
            "/v1/subscribers/ts-user/notifications/unseen",
            "/v1/subscribers/ts-user/notifications/unseen?seen=true",
        ] {
            let (_, unseen) = app.get(path).await;
            assert_eq!(unseen["count"], 0, "{round}: {path}: {unseen}");
        }
        let (status, marked) = app
            .post(
                "/v1/subscribers/ts-user/messages/mark-as",
                json!({"messageId": old_message, "markAs": "unread"}),
            )
            .await;
        assert_eq!(
            (status, marked),
            (StatusCode::CREATED, json!([])),
            "{round}"
        );
        let (status, n) = app
            .post(
                "/v1/subscribers/ts-user/messages/mark-all",
                json!({"markAs": "read"}),
            )
            .await;
        assert_eq!((status, n), (StatusCode::CREATED, json!(0)), "{round}");
        let (_, listed) = app.get("/v1/messages?subscriberId=ts-user").await;
        assert_eq!(listed["totalCount"], 0, "{round}: {listed}");
        assert_eq!(listed["data"], json!([]), "{round}: {listed}");

        let (status, list) = inbox(&app, &token, Method::GET, "/v1/inbox/notifications").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list["data"], json!([]), "{round}: {list}");
        let (_, counts) = inbox(
            &app,
            &token,
            Method::GET,
            "/v1/inbox/notifications/count?filters=%5B%7B%22read%22%3Afalse%7D%5D",
        )
        .await;
        assert_eq!(counts["data"][0]["count"], 0, "{round}: {counts}");
        for action in ["read", "unread", "archive", "complete", "revert", "delete"] {
            let (method, path) = match action {
                "delete" => (
                    Method::DELETE,
                    format!("/v1/inbox/notifications/{old_message}/delete"),
                ),
                "complete" | "revert" => (
                    Method::PATCH,
                    format!("/v1/inbox/notifications/{old_message}/{action}"),
                ),
                _ => (
                    Method::PATCH,
                    format!("/v1/inbox/notifications/{old_message}/{action}"),
                ),
            };
            let mut req = app
                .client
                .request(method, app.url(&path))
                .bearer_auth(&token);
            if matches!(action, "complete" | "revert") {
                req = req.json(&json!({"actionType": "primary"}));
            }
            let (status, out) = send(req).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{round}: {action}: {out}");
        }

        // Activity: the filters by subscriberId, e-mail and search name the new record only.
        for query in [
            "subscriberIds=ts-user",
            "emails=ts@example.com",
            "search=ts-user",
        ] {
            let (_, page) = app.get(&format!("/v1/notifications?{query}")).await;
            assert_eq!(page["data"], json!([]), "{round}: {query}: {page}");
        }
        // The old notifications stay in the activity feed, without a subscriber.
        let (_, all) = app.get("/v1/notifications?limit=50").await;
        let items = all["data"].as_array().unwrap();
        assert_eq!(items.len(), 3, "{round}: {all}");
        for item in items {
            assert_eq!(item["_subscriberId"], old.as_str(), "{item}");
            assert!(item.get("subscriber").is_none(), "{round}: {item}");
        }
        let id = items[0]["_id"].as_str().unwrap();
        let (status, one) = app.get(&format!("/v1/notifications/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(one.get("subscriber").is_none(), "{round}: {one}");
        if round == "after the erasure" {
            assert!(
                one.get("to").is_none(),
                "the recipient as given is erased: {one}"
            );
        }

        // Topics, endpoints, connections, preferences.
        let (_, subs) = app.get("/v2/subscribers/ts-user/subscriptions").await;
        assert_eq!(subs["data"], json!([]), "{round}: {subs}");
        let (_, subs) = app.get("/v2/topics/watchers/subscriptions").await;
        assert_eq!(subs["data"], json!([]), "{round}: {subs}");
        let (_, topics) = inbox(
            &app,
            &token,
            Method::GET,
            "/v1/inbox/topics/watchers/subscriptions",
        )
        .await;
        assert_eq!(topics["data"], json!([]), "{round}: {topics}");
        for path in [
            "/v1/channel-endpoints?subscriberId=ts-user",
            "/v1/channel-connections?subscriberId=ts-user",
        ] {
            let (_, page) = app.get(path).await;
            assert_eq!(page["totalCount"], 0, "{round}: {path}: {page}");
        }
        let (_, prefs) = app.get("/v2/subscribers/ts-user/preferences").await;
        assert_eq!(
            prefs["global"]["channels"]["email"], true,
            "{round}: {prefs}"
        );
        let (_, profile) = app.get("/v2/subscribers/ts-user").await;
        assert_eq!(profile["channels"], json!([]), "{round}: {profile}");
    }

    // The new record's own messages are its, and only they.
    for n in 11..=12 {
        trigger(&app, "ts-user", n).await;
    }
    let (_, feed) = app.get("/v1/subscribers/ts-user/notifications/feed").await;
    assert_eq!(contents(&feed, "content"), ["News 11", "News 12"], "{feed}");
    assert!(feed["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["_subscriberId"] == new.as_str()));
    let (_, unseen) = app
        .get("/v1/subscribers/ts-user/notifications/unseen")
        .await;
    assert_eq!(unseen["count"], 2);
    let (_, listed) = app.get("/v1/messages?subscriberId=ts-user").await;
    assert_eq!(listed["totalCount"], 2, "{listed}");
    let (_, list) = inbox(&app, &token, Method::GET, "/v1/inbox/notifications").await;
    assert_eq!(contents(&list, "body"), ["News 11", "News 12"], "{list}");
    let (_, page) = app.get("/v1/notifications?subscriberIds=ts-user").await;
    let items = page["data"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{page}");
    assert!(items.iter().all(|i| i["subscriber"]["_id"] == new.as_str()));
    let (status, n) = app
        .post(
            "/v1/subscribers/ts-user/messages/mark-all",
            json!({"markAs": "read"}),
        )
        .await;
    assert_eq!((status, n), (StatusCode::CREATED, json!(2)));
    // The old record's rows are gone for good; its notifications stay, stripped.
    assert_eq!(left_of(&app, &old).await, [0; 5]);
    assert_eq!(
        count(
            &app,
            "select count(*) from notifications where subscriber_ref = $1",
            old.as_str()
        )
        .await,
        3
    );
}
db_test!(
    erasure_recreated_subscriber,
    recreated_subscriber_sees_nothing_of_the_deleted_one
);

/// The erasure works in bounded batches, and one that a process abandoned mid-way (its lease ran out) is
/// finished by another; its row goes after the last pass.
async fn erasure_resumes_in_batches(mut app: TestApp) {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "News", "workflowId": "news", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "News {{payload.n}}"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    for n in 1..=5 {
        trigger(&app, "ts-user", n).await;
    }
    let old = app.subscriber_ref("ts-user").await.unwrap();
    // No worker of this app erases: the test plays the workers.
    app.stop_workers().await;
    let subscriber = app
        .store
        .get_subscriber(&app.tenant.environment_id, "ts-user")
        .await
        .unwrap()
        .unwrap();
    assert!(app.store.delete_subscriber(&subscriber).await.unwrap());
    assert!(!app.store.delete_subscriber(&subscriber).await.unwrap());
    assert_eq!(
        app.store
            .pending_erasures(&app.tenant.environment_id)
            .await
            .unwrap(),
        1
    );
    let now = Timestamp::now().0;
    // A process claims it, does one batch of two, and dies.
    let e: Erasure = app
        .store
        .claim_erasure("dead", now, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.subscriber_ref, old.as_str());
    assert_eq!(
        app.store.claim_erasure("alive", now, 1_000).await.unwrap(),
        None
    );
    assert_eq!(
        app.store.strip_erased_notifications(&e, 2).await.unwrap(),
        2
    );
    assert_eq!(app.store.delete_erased_messages(&e, 2).await.unwrap(), 2);
    assert_eq!(left_of(&app, &old).await[..2], [3, 3]);
    // Its lease runs out: another claims it and goes on where it stopped, two rows at a time.
    let later = now + 1_000;
    let e = app
        .store
        .claim_erasure("alive", later, 60_000)
        .await
        .unwrap()
        .unwrap();
    let mut stripped = Vec::new();
    loop {
        let n = app.store.strip_erased_notifications(&e, 2).await.unwrap();
        stripped.push(n);
        if n == 0 {
            break;
        }
    }
    assert_eq!(stripped, [2, 1, 0]);
    let mut deleted = Vec::new();
    loop {
        let n = app.store.delete_erased_messages(&e, 2).await.unwrap();
        deleted.push(n);
        if n == 0 {
            break;
        }
    }
    assert_eq!(deleted, [2, 1, 0]);
    assert_eq!(left_of(&app, &old).await, [0; 5]);
    // The dead process cannot end what it no longer holds; the holder can.
    app.store.finish_erasure(&e, "dead").await.unwrap();
    assert_eq!(
        app.store
            .pending_erasures(&app.tenant.environment_id)
            .await
            .unwrap(),
        1
    );
    app.store.finish_erasure(&e, "alive").await.unwrap();
    assert_eq!(
        app.store
            .pending_erasures(&app.tenant.environment_id)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        count(
            &app,
            "select count(*) from notifications where subscriber_ref = $1",
            old.as_str()
        )
        .await,
        5
    );
}
db_test!(erasure_resumes, erasure_resumes_in_batches);

/// Two processes sweeping one database (on PostgreSQL, two stores on one schema): each erasure is claimed by
/// one of them at a time, and together they erase every deleted subscriber.
async fn two_processes_share_the_erasures(mut app: TestApp) {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "News", "workflowId": "news", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "News {{payload.n}}"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let names: Vec<String> = (0..6).map(|i| format!("gone-{i}")).collect();
    for name in &names {
        trigger(&app, name, 1).await;
        trigger(&app, name, 2).await;
    }
    let mut refs = Vec::new();
    for name in &names {
        refs.push(app.subscriber_ref(name).await.unwrap());
    }
    app.stop_workers().await;
    for name in &names {
        let (status, _) = app.delete(&format!("/v2/subscribers/{name}")).await;
        assert_eq!(status, StatusCode::OK);
    }
    let other = match app.backend {
        crate::support::Backend::Sqlite => app.store.clone(),
        crate::support::Backend::Postgres => {
            let mut opts = tidings::store::StoreOptions::new(app.database_url.clone());
            opts.pg_schema = app.pg_schema.clone();
            opts.max_connections = 2;
            let cipher = tidings::crypto::Cipher::from_base64(&app.encryption_key).unwrap();
            tidings::store::Store::open(&opts, cipher).await.unwrap()
        }
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let sweep = |store: tidings::store::Store, worker: &'static str| {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut claimed = 0;
            while tidings::engine::erasure::erase_one(&store, worker, 10_000, &stop)
                .await
                .unwrap()
            {
                claimed += 1;
            }
            claimed
        })
    };
    let (a, b) = (sweep(app.store.clone(), "a"), sweep(other, "b"));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    // Each erasure was worked through once (then put off until its last pass).
    assert_eq!(a + b, names.len(), "a {a}, b {b}");
    for r in &refs {
        assert_eq!(left_of(&app, r).await[..3], [0, 0, 0], "{r}");
    }
    // None is due again before its last pass.
    assert_eq!(
        app.store
            .claim_erasure("c", Timestamp::now().0, 1_000)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        app.store
            .pending_erasures(&app.tenant.environment_id)
            .await
            .unwrap(),
        6,
        "kept for the last pass a minute after the delete"
    );
}
db_test!(erasure_two_processes, two_processes_share_the_erasures);
