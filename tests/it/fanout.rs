//! Triggers to topics and broadcasts (issue 23): recipients deduplicated across topics and direct entries,
//! `exclude` and the actor skipped, the activity feed's `topics` and its `topicKey` / `subscriptionId`
//! filters, cancel during the expansion, and the expansion's exactly-once property when a worker dies
//! between batches or loses its lease in the middle of one.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{json, Value};
use tidings::domain::fanout::FanoutStatus;
use tidings::domain::subscriber::ProfileInput;
use tidings::engine::fanout::{expand_batch, expand_once, BATCH};
use tidings::engine::steps::Runner;
use tidings::engine::{Handoff, TriggerWriter};
use tidings::service::subscribers;
use tidings::service::topics::{self, SubscriptionRequest};

use crate::db_test;
use crate::support::{assert_error, count, eventually, settled, Backend, TestApp};

async fn in_app_workflow(app: &TestApp, id: &str) {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": id, "workflowId": id, "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hello {{subscriber.subscriberId}}"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

/// The runner a process's workers use, for tests that drive the expansion themselves.
fn runner(app: &TestApp) -> Arc<Runner> {
    Arc::new(Runner::new(
        app.store.clone(),
        &crate::support::worker_options(app.profile),
    ))
}

/// Claims the fan-out waiting as `worker` and expands one batch of it (a worker that stops after it).
async fn expand_one_batch(
    app: &TestApp,
    runner: &Arc<Runner>,
    writer: &TriggerWriter,
    worker: &str,
) {
    let claimed = app
        .store
        .claim_fanout(worker, 60_000)
        .await
        .unwrap()
        .unwrap();
    expand_batch(&app.store, runner, writer, worker, claimed)
        .await
        .unwrap();
}

/// One claim of the fan-out waiting, expanded as `worker-a` with a trigger writer of its own (up to
/// `BATCHES_PER_CLAIM` batches, pipelined); false when none was waiting.
async fn expand_claim(app: &TestApp) -> bool {
    let writer = TriggerWriter::new(app.store.clone(), Handoff::default());
    expand_once(&app.store, &runner(app), &writer, "worker-a", 60_000)
        .await
        .unwrap()
}

/// The status of the transaction's (first) fan-out, and how many recipients it reached.
async fn fanout_state(app: &TestApp, tx: &str) -> (FanoutStatus, i64) {
    let f = app
        .store
        .fanouts_of(&app.tenant.environment_id, tx)
        .await
        .unwrap();
    (f[0].status, f[0].recipients)
}

async fn messages_of(app: &TestApp, tx: &str) -> i64 {
    count(
        app,
        "select count(*) from messages where transaction_id = $1",
        tx,
    )
    .await
}

async fn subscribe(app: &TestApp, key: &str, ids: &[&str]) {
    let (status, out) = app
        .post(
            &format!("/v2/topics/{key}/subscriptions"),
            json!({ "subscriptions": ids }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

async fn trigger(app: &TestApp, body: Value) -> String {
    let (status, out) = app.post("/v1/events/trigger", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["status"], "processed", "{out}");
    out["transactionId"].as_str().unwrap().to_owned()
}

/// `subscriberId → topics` of the settled activity items.
fn reached(items: &[Value]) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = items
        .iter()
        .map(|n| {
            (
                n["subscriber"]["subscriberId"].as_str().unwrap().to_owned(),
                n["topics"].clone(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn mixed_recipients(app: TestApp) {
    in_app_workflow(&app, "news").await;
    for id in ["s1", "s2", "s3", "s4", "s5", "boss", "loner"] {
        app.subscriber(id, json!({})).await;
    }
    subscribe(&app, "team-a", &["s1", "s2", "s3", "boss"]).await;
    subscribe(&app, "team-b", &["s3", "s4", "s5", "s2"]).await;
    let (_, a) = app.get("/v2/topics/team-a").await;
    let (_, b) = app.get("/v2/topics/team-b").await;

    // s1 directly (and in team-a), s2 excluded from team-a but reached through team-b, s3 in both topics,
    // the actor in team-a, an unknown topic that reaches no one, team-a named twice.
    let tx = trigger(
        &app,
        json!({"name": "news", "actor": {"subscriberId": "boss"}, "to": [
            "s1",
            {"type": "Topic", "topicKey": "team-a", "exclude": ["s2"]},
            {"type": "Topic", "topicKey": "team-b"},
            {"type": "Topic", "topicKey": "nobody-here"},
            {"type": "Topic", "topicKey": "team-a"},
        ]}),
    )
    .await;
    let items = settled(&app, &tx, 5).await;
    let topic = |t: &Value, key: &str| json!([{"_topicId": t["_id"], "topicKey": key}]);
    assert_eq!(
        reached(&items),
        vec![
            ("s1".to_owned(), json!([])),
            ("s2".to_owned(), topic(&b, "team-b")),
            ("s3".to_owned(), topic(&a, "team-a")),
            ("s4".to_owned(), topic(&b, "team-b")),
            ("s5".to_owned(), topic(&b, "team-b")),
        ]
    );
    for n in &items {
        assert_eq!(n["jobs"][0]["status"], "completed", "{n}");
        assert_eq!(n["to"]["subscriberId"], n["subscriber"]["subscriberId"]);
    }
    let (_, messages) = app
        .get(&format!("/v1/messages?transactionId={tx}&limit=50"))
        .await;
    assert_eq!(messages["data"].as_array().unwrap().len(), 5, "{messages}");

    // The activity filters: by topic key, by subscription identifier; each ANDed with the others.
    let (status, page) = app.get("/v1/notifications?topicKey=team-b").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["data"].as_array().unwrap().len(), 3);
    let (_, page) = app
        .get("/v1/notifications?subscriptionId=tk_team-a:si_s3")
        .await;
    let ids: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["subscriber"]["subscriberId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["s3"]);
    let (_, page) = app
        .get("/v1/notifications?topicKey=team-a&subscriberIds=s4")
        .await;
    assert_eq!(page["data"], json!([]));
    let (_, page) = app.get("/v1/notifications?topicKey=nobody-here").await;
    assert_eq!(page["data"], json!([]));

    // A trigger to topics only, whose every member is excluded or the actor: processed, reaching no one.
    let tx = trigger(
        &app,
        json!({"name": "news", "actor": "boss", "to": {"type": "Topic", "topicKey": "team-a",
            "exclude": ["s1", "s2", "s3"]}}),
    )
    .await;
    let fanouts = app
        .store
        .fanouts_of(&app.tenant.environment_id, &tx)
        .await
        .unwrap();
    let fanout = eventually(|| async {
        let f = app
            .store
            .fanouts_of(&app.tenant.environment_id, &tx)
            .await
            .unwrap();
        (f[0].status == FanoutStatus::Completed).then(|| f[0].clone())
    })
    .await;
    assert_eq!((fanouts.len(), fanout.recipients), (1, 0));
    let (_, page) = app
        .get(&format!("/v1/notifications?transactionId={tx}"))
        .await;
    assert_eq!(page["data"], json!([]));
}
db_test!(fanout_mixed_recipients, mixed_recipients);

async fn broadcast(app: TestApp) {
    in_app_workflow(&app, "all-hands").await;
    for id in ["a", "b", "c", "boss"] {
        app.subscriber(id, json!({})).await;
    }
    let (status, _) = app.delete("/v2/subscribers/c").await;
    assert_eq!(status, StatusCode::OK);
    let (status, out) = app
        .post(
            "/v1/events/trigger/broadcast",
            json!({"name": "all-hands", "payload": {"x": 1}, "actor": "boss", "transactionId": "bc-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(
        out,
        json!({"acknowledged": true, "status": "processed", "transactionId": "bc-1"})
    );
    let items = settled(&app, "bc-1", 2).await;
    assert_eq!(
        reached(&items),
        vec![("a".to_owned(), json!([])), ("b".to_owned(), json!([]))]
    );
    assert_eq!(items[0]["payload"], json!({"x": 1}));

    // A transaction id is used once; bad bodies; unknown workflow.
    let (status, out) = app
        .post(
            "/v1/events/trigger/broadcast",
            json!({"name": "all-hands", "transactionId": "bc-1"}),
        )
        .await;
    assert_eq!(
        (status, &out["status"]),
        (StatusCode::CREATED, &json!("error")),
        "{out}"
    );
    let (status, out) = app
        .post("/v1/events/trigger/broadcast", json!({"payload": {}}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_error(&out, 422);
    let (status, out) = app
        .post("/v1/events/trigger/broadcast", json!({"name": "nope"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
}
db_test!(fanout_broadcast, broadcast);

async fn validation(app: TestApp) {
    in_app_workflow(&app, "news").await;
    for (to, field) in [
        (json!({"type": "Topic", "topicKey": ""}), "to.topicKey"),
        (json!({"type": "Topic", "topicKey": "a b"}), "to.topicKey"),
        (json!({"type": "Topic"}), "to.topicKey"),
        (
            json!({"type": "Topic", "topicKey": "t", "exclude": "s1"}),
            "to.exclude",
        ),
        (
            json!({"type": "Topic", "topicKey": "t", "exclude": [1]}),
            "to.exclude",
        ),
        (
            json!([{"type": "Topic", "topicKey": "t", "exclude": vec!["x"; 101]}]),
            "to.exclude",
        ),
        (json!({"type": "Subscriber"}), "to"),
    ] {
        let (status, out) = app
            .post("/v1/events/trigger", json!({"name": "news", "to": to}))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{to}: {out}");
        assert_error(&out, 422);
        assert!(out.to_string().contains(field), "{to}: {out}");
    }
}
db_test!(fanout_validation, validation);

/// `n` subscribers `p0…` in topic `key`, written through the services (faster than HTTP in a debug build).
async fn big_topic(app: &TestApp, key: &str, n: usize) {
    let ids: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
    for id in &ids {
        subscribers::create(&app.store, &app.tenant, id, ProfileInput::default(), false)
            .await
            .unwrap();
    }
    for chunk in ids.chunks(100) {
        let entries = chunk
            .iter()
            .map(|id| SubscriptionRequest {
                subscriber_id: Some(id.clone()),
                identifier: None,
            })
            .collect();
        topics::subscribe(&app.store, &app.tenant, key, "subscriptions", entries, None)
            .await
            .unwrap();
    }
}

async fn notifications_of(app: &TestApp, tx: &str) -> i64 {
    count(
        app,
        "select count(*) from notifications where transaction_id = $1",
        tx,
    )
    .await
}

async fn distinct_recipients(app: &TestApp, tx: &str) -> i64 {
    count(
        app,
        "select count(distinct subscriber_ref) from notifications where transaction_id = $1",
        tx,
    )
    .await
}

/// A worker that dies between batches, and one that loses its lease in the middle of a batch (another
/// process took the fan-out over and recorded that batch): every recipient is reached exactly once.
async fn exactly_once(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    let total = 2 * BATCH + 37;
    in_app_workflow(&app, "news").await;
    big_topic(&app, "everyone", total).await;
    let tx = trigger(
        &app,
        json!({"name": "news", "to": [{"type": "Topic", "topicKey": "everyone"}]}),
    )
    .await;
    let writer = TriggerWriter::new(app.store.clone(), Handoff::default());
    let runner = runner(&app);

    // Worker A expands one batch, then "dies" (it is never heard of again). The in-app steps of the batch
    // were stored with it.
    expand_one_batch(&app, &runner, &writer, "worker-a").await;
    assert_eq!(notifications_of(&app, &tx).await, BATCH as i64);
    assert_eq!(messages_of(&app, &tx).await, BATCH as i64);

    // Worker B claims with a lease that has already run out (a stalled process); worker C takes the
    // fan-out over and records the same batch; B's copy of it is then refused.
    let stalled = app
        .store
        .claim_fanout("worker-b", -1)
        .await
        .unwrap()
        .unwrap();
    let taken = app
        .store
        .claim_fanout("worker-c", 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stalled.position, taken.position);
    expand_batch(&app.store, &runner, &writer, "worker-c", taken)
        .await
        .unwrap();
    expand_batch(&app.store, &runner, &writer, "worker-b", stalled)
        .await
        .unwrap();
    assert_eq!(notifications_of(&app, &tx).await, 2 * BATCH as i64);
    assert_eq!(messages_of(&app, &tx).await, 2 * BATCH as i64);

    // The process's own workers finish the rest.
    app.start_workers();
    eventually(|| async {
        let (status, _) = fanout_state(&app, &tx).await;
        (status == FanoutStatus::Completed).then_some(())
    })
    .await;
    assert_eq!(notifications_of(&app, &tx).await, total as i64);
    assert_eq!(distinct_recipients(&app, &tx).await, total as i64);
    assert_eq!(fanout_state(&app, &tx).await.1, total as i64);
    let messages = eventually(|| async {
        let n = messages_of(&app, &tx).await;
        (n == total as i64).then_some(n)
    })
    .await;
    assert_eq!(messages, total as i64);
}
db_test!(fanout_exactly_once, exactly_once, backend);

/// One claim expands several batches, each read while the one before is being recorded: a subscriber of
/// the batch still being recorded, reached again through a later topic in the next batch, is passed over
/// (the database cannot tell yet). The in-app messages are stored by the expansion itself.
async fn overlapping_batches(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    let total = BATCH + 5;
    in_app_workflow(&app, "news").await;
    big_topic(&app, "first", total).await;
    // The first batch's first hundred subscribers, read again at the start of the second batch.
    let again = (0..100)
        .map(|i| SubscriptionRequest {
            subscriber_id: Some(format!("p{i}")),
            identifier: None,
        })
        .collect();
    topics::subscribe(
        &app.store,
        &app.tenant,
        "second",
        "subscriptions",
        again,
        None,
    )
    .await
    .unwrap();
    let tx = trigger(
        &app,
        json!({"name": "news", "to": [
            {"type": "Topic", "topicKey": "first"}, {"type": "Topic", "topicKey": "second"}]}),
    )
    .await;
    assert!(expand_claim(&app).await);
    assert_eq!(
        fanout_state(&app, &tx).await,
        (FanoutStatus::Completed, total as i64)
    );
    assert_eq!(notifications_of(&app, &tx).await, total as i64);
    assert_eq!(distinct_recipients(&app, &tx).await, total as i64);
    assert_eq!(messages_of(&app, &tx).await, total as i64);
    // Stored as a worker's completion leaves a job: its worker kept, no lease, one attempt.
    let unlike_a_completion = count(
        &app,
        "select count(*) from jobs where transaction_id = $1 and not (status = 'completed' \
         and locked_by = 'worker-a' and locked_until is null and attempts = 1)",
        &tx,
    )
    .await;
    assert_eq!(unlike_a_completion, 0);
}
db_test!(fanout_overlapping_batches, overlapping_batches, backend);

/// An in-app first step stored by the expansion, already completed, still hands the chain on: the next
/// step's job is activated in the same transaction and the workers run it.
async fn chain_after_in_app(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "twice", "workflowId": "twice", "steps": [
                {"name": "First", "type": "in_app", "controlValues": {"body": "one"}},
                {"name": "Second", "type": "in_app", "controlValues": {"body": "two"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    big_topic(&app, "pair", 3).await;
    let tx = trigger(
        &app,
        json!({"name": "twice", "to": {"type": "Topic", "topicKey": "pair"}}),
    )
    .await;
    assert!(expand_claim(&app).await);
    let by_status = |status: &'static str| {
        let app = &app;
        let tx = &tx;
        async move {
            count(
                app,
                &format!(
                    "select count(*) from jobs where transaction_id = $1 and status = '{status}'"
                ),
                tx,
            )
            .await
        }
    };
    assert_eq!(
        (by_status("completed").await, by_status("queued").await),
        (3, 3)
    );
    assert_eq!(messages_of(&app, &tx).await, 3);
    app.start_workers();
    eventually(|| async { (messages_of(&app, &tx).await == 6).then_some(()) }).await;
    eventually(|| async { (by_status("completed").await == 6).then_some(()) }).await;
}
db_test!(fanout_chain_after_in_app, chain_after_in_app, backend);

/// Cancel during the expansion: the batch recorded before it is canceled (its jobs had not run: the
/// workflow waits first), and no batch follows.
async fn cancel(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    let total = BATCH + 10;
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "later", "workflowId": "later", "steps": [
                {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "hours"}},
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hello"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    big_topic(&app, "many", total).await;
    let tx = trigger(
        &app,
        json!({"name": "later", "to": {"type": "Topic", "topicKey": "many"}}),
    )
    .await;
    let writer = TriggerWriter::new(app.store.clone(), Handoff::default());
    let runner = runner(&app);
    expand_one_batch(&app, &runner, &writer, "worker-a").await;
    let (status, out) = app.delete(&format!("/v1/events/trigger/{tx}")).await;
    assert_eq!((status, &out), (StatusCode::OK, &json!(true)));
    app.start_workers();
    // Nothing is left to expand, and nothing was delivered.
    assert!(
        !expand_once(&app.store, &runner, &writer, "worker-a", 60_000)
            .await
            .unwrap()
    );
    assert_eq!(
        fanout_state(&app, &tx).await,
        (FanoutStatus::Canceled, BATCH as i64)
    );
    assert_eq!(notifications_of(&app, &tx).await, BATCH as i64);
    // Each notification's delay and in-app jobs.
    let canceled = count(
        &app,
        "select count(*) from jobs where status = 'canceled' and transaction_id = $1",
        &tx,
    )
    .await;
    assert_eq!(canceled, 2 * BATCH as i64);
    assert_eq!(messages_of(&app, &tx).await, 0);
}
db_test!(fanout_cancel, cancel, backend);

/// A topic of another environment is not reachable: its key names nothing here.
async fn tenants(app: TestApp) {
    in_app_workflow(&app, "news").await;
    app.subscriber("mine", json!({})).await;
    subscribe(&app, "shared-key", &["mine"]).await;
    let other = app.second_environment("Other").await;
    let (status, out) = crate::support::send(
        app.req_as(&other, reqwest::Method::POST, "/v2/workflows")
            .json(&json!({
            "name": "news", "workflowId": "news",
            "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "x"}}]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = crate::support::send(
        app.req_as(&other, reqwest::Method::POST, "/v1/events/trigger").json(&json!({
            "name": "news", "to": {"type": "Topic", "topicKey": "shared-key"}, "transactionId": "other-1"})),
    )
    .await;
    assert_eq!(
        (status, &out["status"]),
        (StatusCode::CREATED, &json!("processed")),
        "{out}"
    );
    let (status, out) = crate::support::send(
        app.req_as(
            &other,
            reqwest::Method::POST,
            "/v1/events/trigger/broadcast",
        )
        .json(&json!({"name": "news", "transactionId": "other-2"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    app.nothing_left_to_run().await;
    assert_eq!(notifications_of(&app, "other-1").await, 0);
    assert_eq!(notifications_of(&app, "other-2").await, 0);
}
db_test!(fanout_tenants, tenants);
