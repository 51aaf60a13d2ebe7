//! Digests and throttles under concurrency: events that arrive together — in one bulk, from parallel
//! requests, through two processes on one PostgreSQL database — meet one open digest per subscriber,
//! workflow, step and digest key value, and a throttle lets exactly its threshold through. The windows are
//! an hour long, so no window closes by the clock while a test sends; a test closes them itself (their
//! `run_at` set to the past) once it has counted them.

use std::collections::BTreeMap;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::db_test;
use crate::support::{self, count, eventually, execute, send, settled, TestApp};

/// A workflow whose digest (an hour, `digestKey` when given) feeds an in-app summary of its events.
fn comments_workflow(id: &str, digest_key: Option<&str>) -> Value {
    let mut controls = json!({"amount": 1, "unit": "hours"});
    if let Some(key) = digest_key {
        controls["digestKey"] = json!(key);
    }
    json!({"name": id, "workflowId": id, "steps": [
        {"name": "Digest", "stepId": "digest", "type": "digest", "controlValues": controls},
        {"name": "Inbox", "type": "in_app", "controlValues": {"body":
            "{{ steps.digest.eventCount }} new comments:{% for e in steps.digest.events %} {{ e.payload.n }}{% endfor %}"}}
    ]})
}

async fn create_workflow(app: &TestApp, body: Value) {
    let (status, out) = app.post("/v2/workflows", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

/// Sends every request at once and checks that each was accepted.
async fn all_at_once(requests: Vec<reqwest::RequestBuilder>) {
    let mut set = JoinSet::new();
    for r in requests {
        set.spawn(send(r));
    }
    while let Some(done) = set.join_next().await {
        let (status, out) = done.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
}

/// A trigger of `workflow` for `to` carrying `n` (and any other payload fields).
fn trigger(app: &TestApp, workflow: &str, to: &str, payload: Value) -> reqwest::RequestBuilder {
    app.req(Method::POST, "/v1/events/trigger")
        .json(&json!({"name": workflow, "to": to, "payload": payload}))
}

/// The digest jobs waiting for their window to close.
async fn open_digests(app: &TestApp) -> i64 {
    count(
        app,
        "select count(*) from jobs where digest_key is not null and status = 'queued' and $1 = $1",
        "",
    )
    .await
}

async fn jobs_with_status(app: &TestApp, step_index: i64, status: &str) -> i64 {
    count(
        app,
        &format!("select count(*) from jobs where step_index = {step_index} and status = $1"),
        status,
    )
    .await
}

/// Closes every open digest window now; the workers run them within a second.
async fn close_windows(app: &TestApp) {
    execute(
        app,
        "update jobs set run_at = 0 where digest_key is not null and status = 'queued'",
    )
    .await;
}

/// The in-app messages' bodies per subscriber, once there are `total` of them.
async fn bodies(app: &TestApp, total: usize) -> BTreeMap<String, Vec<String>> {
    eventually(|| async {
        let (status, page) = app.get("/v1/messages?channel=in_app&limit=100").await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let items = page["data"].as_array()?;
        if items.len() < total {
            return None;
        }
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for m in items {
            let subscriber = m["subscriberId"].as_str().unwrap().to_owned();
            out.entry(subscriber)
                .or_default()
                .push(m["content"].as_str().unwrap().to_owned());
        }
        Some(out)
    })
    .await
}

/// The numbers a summary lists, sorted.
fn listed(body: &str) -> Vec<i64> {
    let (_, list) = body.split_once(':').expect("a summary");
    let mut numbers: Vec<i64> = list
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    numbers.sort_unstable();
    numbers
}

/// A bulk of three events for one subscriber is one digest of three events, in the bulk's order; the two
/// events that joined it are recorded as merged, with a detail naming the digest, and their later steps
/// never run.
async fn a_bulk_is_one_digest(app: TestApp) {
    create_workflow(&app, comments_workflow("comments", None)).await;
    let events: Vec<Value> = (1..=3)
        .map(|n| json!({"name": "comments", "to": "ann", "payload": {"n": n}, "transactionId": format!("bulk-{n}")}))
        .collect();
    let (status, out) = app
        .post("/v1/events/trigger/bulk", json!({ "events": events }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(open_digests(&app).await, 1, "one open digest for the bulk");
    assert_eq!(jobs_with_status(&app, 0, "merged").await, 2);
    close_windows(&app).await;
    let first = settled(&app, "bulk-1", 1).await;
    let digest_job = &first[0]["jobs"][0];
    assert_eq!(digest_job["status"], "completed", "{digest_job}");
    let events = digest_job["digest"]["events"].as_array().unwrap();
    let order: Vec<i64> = events
        .iter()
        .map(|e| e["payload"]["n"].as_i64().unwrap())
        .collect();
    assert_eq!(order, [1, 2, 3], "oldest first");
    let closed = digest_job["executionDetails"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["detail"] == "Digest window closed with 3 event(s)");
    assert!(closed, "{digest_job}");
    for n in 2..=3 {
        let merged = settled(&app, &format!("bulk-{n}"), 1).await;
        let jobs = merged[0]["jobs"].as_array().unwrap();
        let statuses: Vec<&str> = jobs.iter().map(|j| j["status"].as_str().unwrap()).collect();
        assert_eq!(statuses, ["merged", "skipped"]);
        let joined = format!(
            "Event added to the open digest of job {}",
            digest_job["_id"].as_str().unwrap()
        );
        assert!(
            jobs[0]["executionDetails"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["detail"] == joined.as_str()),
            "{}",
            jobs[0]
        );
        assert_eq!(jobs[1]["executionDetails"], json!([]), "never ran");
    }
    let bodies = bodies(&app, 1).await;
    assert_eq!(bodies["ann"], ["3 new comments: 1 2 3"]);
}
db_test!(digest_bulk, a_bulk_is_one_digest);

/// Fifty triggers sent at once, ten for each of five subscribers, make five digests of ten events. The
/// subscribers are new: the triggers create them, in parallel, as they go.
async fn parallel_triggers_make_one_digest_each(app: TestApp) {
    create_workflow(&app, comments_workflow("comments", None)).await;
    let requests = (0..50)
        .map(|n| trigger(&app, "comments", &format!("sub-{}", n % 5), json!({"n": n})))
        .collect();
    all_at_once(requests).await;
    assert_eq!(open_digests(&app).await, 5);
    assert_eq!(jobs_with_status(&app, 0, "merged").await, 45);
    close_windows(&app).await;
    let bodies = bodies(&app, 5).await;
    assert_eq!(bodies.len(), 5, "{bodies:?}");
    for s in 0..5 {
        let got = &bodies[&format!("sub-{s}")];
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("10 new comments:"), "{got:?}");
        let expected: Vec<i64> = (0..50).filter(|n| n % 5 == s).collect();
        assert_eq!(listed(&got[0]), expected);
    }
}
db_test!(digest_parallel, parallel_triggers_make_one_digest_each);

/// A digest the chain reaches after a first step: ten events sent at once reach it from ten completions,
/// which open one window and join it.
async fn a_digest_reached_later_is_one_digest(app: TestApp) {
    create_workflow(
        &app,
        json!({"name": "Mid", "workflowId": "mid", "steps": [
            {"name": "First", "type": "in_app", "controlValues": {"body": "at once {{ payload.n }}"}},
            {"name": "Digest", "stepId": "digest", "type": "digest", "controlValues": {"amount": 1, "unit": "hours"}},
            {"name": "Summary", "type": "in_app", "controlValues": {"body":
                "{{ steps.digest.eventCount }} new comments:{% for e in steps.digest.events %} {{ e.payload.n }}{% endfor %}"}}
        ]}),
    )
    .await;
    let requests = (0..10)
        .map(|n| trigger(&app, "mid", "max", json!({"n": n})))
        .collect();
    all_at_once(requests).await;
    eventually(|| async {
        let reached =
            jobs_with_status(&app, 1, "queued").await + jobs_with_status(&app, 1, "merged").await;
        (reached == 10).then_some(())
    })
    .await;
    assert_eq!(open_digests(&app).await, 1);
    assert_eq!(jobs_with_status(&app, 1, "merged").await, 9);
    close_windows(&app).await;
    let bodies = bodies(&app, 11).await;
    let summaries: Vec<&String> = bodies["max"]
        .iter()
        .filter(|b| b.contains("new comments"))
        .collect();
    assert_eq!(summaries.len(), 1, "{bodies:?}");
    assert_eq!(listed(summaries[0]), (0..10).collect::<Vec<_>>());
}
db_test!(digest_reached_later, a_digest_reached_later_is_one_digest);

/// A digest key splits the events by its value: one open digest per thread.
async fn a_digest_key_splits_by_value(app: TestApp) {
    create_workflow(&app, comments_workflow("threads", Some("payload.thread"))).await;
    app.subscriber("kim", json!({})).await;
    let requests = (0..12)
        .map(|n| {
            let thread = ["a", "b", "c"][n % 3];
            trigger(&app, "threads", "kim", json!({"n": n, "thread": thread}))
        })
        .collect();
    all_at_once(requests).await;
    assert_eq!(open_digests(&app).await, 3, "one per thread");
    close_windows(&app).await;
    let bodies = bodies(&app, 3).await;
    let mut got: Vec<Vec<i64>> = bodies["kim"].iter().map(|b| listed(b)).collect();
    got.sort();
    assert_eq!(
        got,
        [vec![0, 3, 6, 9], vec![1, 4, 7, 10], vec![2, 5, 8, 11]]
    );
}
db_test!(digest_key_split, a_digest_key_splits_by_value);

/// Twenty triggers sent at once against a throttle of five in an hour: five get through, fifteen are
/// recorded as throttled and their later steps never run.
async fn parallel_triggers_meet_an_exact_throttle(app: TestApp) {
    create_workflow(
        &app,
        json!({"name": "Gate", "workflowId": "gate", "steps": [
            {"name": "Gate", "stepId": "gate", "type": "throttle", "controlValues": {"amount": 1, "unit": "hours", "threshold": 5}},
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "hi {{ payload.n }}"}}
        ]}),
    )
    .await;
    app.subscriber("tia", json!({})).await;
    let requests = (0..20)
        .map(|n| {
            app.req(Method::POST, "/v1/events/trigger").json(&json!({
                "name": "gate", "to": "tia", "payload": {"n": n}, "transactionId": format!("gate-{n}")
            }))
        })
        .collect();
    all_at_once(requests).await;
    let mut throttled = 0;
    let mut passed = 0;
    for n in 0..20 {
        let items = settled(&app, &format!("gate-{n}"), 1).await;
        let jobs = items[0]["jobs"].as_array().unwrap();
        match (jobs[0]["status"].as_str(), jobs[1]["status"].as_str()) {
            (Some("completed"), Some("completed")) => passed += 1,
            (Some("skipped"), Some("skipped")) => {
                let last = jobs[0]["executionDetails"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap();
                assert!(
                    last["detail"].as_str().unwrap().starts_with("Throttled"),
                    "{last}"
                );
                throttled += 1;
            }
            other => panic!("unexpected job statuses {other:?}"),
        }
    }
    assert_eq!((passed, throttled), (5, 15));
    assert_eq!(bodies(&app, 5).await["tia"].len(), 5);
}
db_test!(throttle_parallel, parallel_triggers_meet_an_exact_throttle);

/// Two `tidings serve` processes on one PostgreSQL database, fifty triggers sent at once to both: five
/// digests of ten events.
async fn two_processes() {
    use crate::inbox_instances::{FreshDatabase, Instance};
    let db = FreshDatabase::create(&support::postgres_url()).await;
    let encryption_key = tidings::crypto::Cipher::generate_base64();
    let api_key = format!("sk_digests_{}", tidings::domain::new_object_id());
    let (a, b) = tokio::join!(
        Instance::start("A", &db.url, &encryption_key, &api_key),
        Instance::start("B", &db.url, &encryption_key, &api_key)
    );
    let client = reqwest::Client::new();
    let post = |base: &str, path: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .header("Authorization", format!("ApiKey {api_key}"))
            .json(&body)
    };
    let (status, out) = send(post(
        &a.url,
        "/v2/workflows",
        comments_workflow("comments", None),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let requests = (0..50)
        .map(|n| {
            let base = if n % 2 == 0 { &a.url } else { &b.url };
            post(
                base,
                "/v1/events/trigger",
                json!({"name": "comments", "to": format!("sub-{}", n % 5), "payload": {"n": n}}),
            )
        })
        .collect();
    all_at_once(requests).await;
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let scalar = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let (open, merged) = (
        scalar("select count(*) from jobs where digest_key is not null and status = 'queued'")
            .await,
        scalar("select count(*) from jobs where step_index = 0 and status = 'merged'").await,
    );
    assert_eq!(
        (open, merged),
        (5, 45),
        "open and merged digest jobs\n--- A\n{}\n--- B\n{}",
        a.log(),
        b.log()
    );
    sqlx::query("update jobs set run_at = 0 where digest_key is not null and status = 'queued'")
        .execute(&pool)
        .await
        .unwrap();
    let summaries: Vec<String> = eventually(|| async {
        let rows: Vec<String> = sqlx::query_scalar(
            "select content from messages where channel = 'in_app' order by content",
        )
        .fetch_all(&pool)
        .await
        .ok()?;
        (rows.len() >= 5).then_some(rows)
    })
    .await;
    assert_eq!(summaries.len(), 5, "{summaries:?}");
    for body in &summaries {
        assert!(body.starts_with("10 new comments:"), "{summaries:?}");
        let numbers = listed(body);
        let rest = numbers[0] % 5;
        assert_eq!(
            numbers,
            (0..50).filter(|n| n % 5 == rest).collect::<Vec<_>>()
        );
    }
    pool.close().await;
}
crate::postgres_test!(two_processes_postgres, two_processes());
