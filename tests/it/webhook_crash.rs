//! Outbound webhooks survive a crash (issue 39): `tidings serve` is killed with SIGKILL while 5,000 triggers
//! arrive, then started again on the same database; every trigger it acknowledged (201) reaches the receiver
//! as `message.sent` at least once, and a message id that arrives twice carries the same body both times.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::Receiver;
use crate::support::{own_url, Backend, TestApp};

const TRIGGERS: usize = 5_000;
/// Triggers in flight at once.
const CONCURRENCY: usize = 16;

/// `tidings serve` on the app's database; answers the process and its base URL.
fn serve(app: &TestApp) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidings"))
        .arg("serve")
        .env("DATABASE_URL", own_url(app))
        .env("TIDINGS_LISTEN", "127.0.0.1:0")
        .env("TIDINGS_ENCRYPTION_KEY", &app.encryption_key)
        .env("TIDINGS_ALLOW_PRIVATE_NETWORKS", "true")
        .env("TIDINGS_RATE_LIMIT_EVENTS", "10000000")
        .env("TIDINGS_RATE_LIMIT_GLOBAL", "10000000")
        .env("RUST_LOG", "warn")
        .env_remove("TIDINGS_API_KEY")
        .env_remove("TIDINGS_COMPAT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tidings serve");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("Serving the API on ") {
                let url = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                let _ = tx.send(url);
            }
        }
    });
    let base = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("tidings serve did not start");
    (child, base)
}

/// Sends triggers `from..to` to `base`, `CONCURRENCY` at a time; answers the transaction ids acknowledged
/// (201). `sent` counts the requests that got an answer.
async fn trigger_range(
    base: String,
    key: String,
    range: std::ops::Range<usize>,
    sent: Arc<AtomicUsize>,
) -> Vec<String> {
    let client = reqwest::Client::new();
    let next = Arc::new(AtomicUsize::new(range.start));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        let (client, next, sent) = (client.clone(), next.clone(), sent.clone());
        let (base, key, end) = (base.clone(), key.clone(), range.end);
        tasks.spawn(async move {
            let mut acked = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    return acked;
                }
                let tx = format!("crash-{i}");
                let answer = client
                    .post(format!("{base}/v1/events/trigger"))
                    .header("Authorization", format!("ApiKey {key}"))
                    .json(
                        &json!({"name": "hello", "to": format!("s{}", i % 50), "payload": {"i": i},
                        "transactionId": tx}),
                    )
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await;
                if let Ok(r) = answer {
                    sent.fetch_add(1, Ordering::Relaxed);
                    if r.status() == StatusCode::CREATED {
                        acked.push(tx);
                    }
                }
            }
        });
    }
    let mut acked = Vec::new();
    while let Some(done) = tasks.join_next().await {
        acked.extend(done.unwrap());
    }
    acked
}

async fn killed_mid_load(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    let r = Receiver::start().await;
    let (mut child, base) = serve(&app);
    let client = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, scheme: &str| {
        client
            .request(method, format!("{base}{path}"))
            .header("Authorization", format!("{scheme} {}", app.key))
    };
    let created = call(
        reqwest::Method::POST,
        &format!("/api/v1/app/{}/endpoint", app.application_identifier),
        "Bearer",
    )
    .json(&json!({"url": r.url, "filterTypes": ["message.sent"]}))
    .send()
    .await
    .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let workflow = call(reqwest::Method::POST, "/v2/workflows", "ApiKey")
        .json(&json!({"name": "hello", "workflowId": "hello", "steps": [
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hi {{ payload.i }}"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(workflow.status(), StatusCode::CREATED);

    // The first part of the load, and SIGKILL once a third of it was answered.
    let sent = Arc::new(AtomicUsize::new(0));
    let load = tokio::spawn(trigger_range(
        base.clone(),
        app.key.clone(),
        0..TRIGGERS / 2,
        sent.clone(),
    ));
    let started = Instant::now();
    while sent.load(Ordering::Relaxed) < TRIGGERS / 3 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the load did not get going"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let mut acked = load.await.unwrap();
    let before = acked.len();
    assert!(
        (TRIGGERS / 3..TRIGGERS / 2).contains(&before),
        "acknowledged before the kill: {before}"
    );

    // Started again: the rest of the load, then every acknowledged trigger's message.sent.
    let (mut child, base) = serve(&app);
    acked.extend(trigger_range(base.clone(), app.key.clone(), TRIGGERS / 2..TRIGGERS, sent).await);
    let wanted: HashSet<String> = acked.iter().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let received = loop {
        let received = r.requests();
        let seen: HashSet<String> = received
            .iter()
            .map(|q| {
                q.json()["data"]["object"]["transactionId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        let missing = wanted.difference(&seen).count();
        if missing == 0 {
            break received;
        }
        assert!(
            Instant::now() < deadline,
            "{missing} of {} acknowledged triggers never reached the receiver",
            wanted.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    child.kill().unwrap();
    child.wait().unwrap();

    // A message id seen twice (sent, then the process died before recording it) has the same body.
    let mut bodies: HashMap<String, Vec<Value>> = HashMap::new();
    for q in &received {
        bodies
            .entry(q.header("webhook-id").unwrap().to_owned())
            .or_default()
            .push(q.json());
    }
    let repeated: Vec<&Vec<Value>> = bodies.values().filter(|b| b.len() > 1).collect();
    for b in &repeated {
        assert!(
            b.iter().all(|x| x == &b[0]),
            "a message id with two bodies: {b:?}"
        );
    }
    // Nothing invented: every message names a trigger that was recorded (acknowledged, or recorded just
    // before the kill cut its answer off).
    assert!(bodies.len() >= wanted.len());
    assert!(
        bodies.len() <= TRIGGERS,
        "{} messages for {TRIGGERS} triggers",
        bodies.len()
    );
    eprintln!(
        "crash test: {} acknowledged ({before} before the kill), {} messages, {} received twice",
        wanted.len(),
        bodies.len(),
        repeated.len()
    );
}
db_test!(webhooks_survive_sigkill, killed_mid_load, backend);
