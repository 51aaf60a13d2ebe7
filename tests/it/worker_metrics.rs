//! `tidings worker --metrics-listen`: a worker process (this build's binary, on the test app's database)
//! serves its own `/metrics`, behind `TIDINGS_METRICS_TOKEN` as `serve`'s is, and counts the jobs it
//! finishes there. The test app runs no workers, so every job is the binary's.

use std::process::{Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::db_test;
use crate::operability::{database_url_for_binary, KillOnDrop};
use crate::support::{eventually, settled, Backend, TestApp};

/// The value of the sample `name{labels}` in Prometheus text, if present.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
}

async fn worker_serves_its_metrics(backend: Backend) {
    let app = TestApp::spawn_without_workers(backend).await;
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_tidings"))
            .args(["worker", "--metrics-listen", "127.0.0.1:0"])
            .env("TIDINGS_WORKERS", "2")
            .env("DATABASE_URL", database_url_for_binary(&app))
            .env("TIDINGS_ENCRYPTION_KEY", &app.encryption_key)
            .env("TIDINGS_METRICS_TOKEN", "scrape-me")
            .env("RUST_LOG", "info")
            .env_remove("TIDINGS_LOG")
            .env_remove("TIDINGS_API_KEY")
            .env_remove("TIDINGS_METRICS_LISTEN")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tidings worker"),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("worker metrics") {
                if let Some(rest) = line.split("listen=").nth(1) {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_owned());
                }
            }
        }
    });
    let addr = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("the worker announces its metrics address");
    let url = format!("http://{addr}/metrics");

    // The token rule of `serve`.
    let client = reqwest::Client::new();
    let resp = client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(resp.headers().get("www-authenticate").unwrap(), "Bearer");
    let resp = client.get(&url).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let scrape = || async {
        let resp = client
            .get(&url)
            .bearer_auth("scrape-me")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.text().await.unwrap()
    };
    let before = scrape().await;
    assert!(before.contains("tidings_queue_depth"), "{before}");
    assert_eq!(
        sample(&before, "tidings_jobs_finished_total{status=\"completed\"}"),
        None,
        "{before}"
    );

    // Three in-app notifications, run by the worker process: its own jobs appear in its metrics.
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Hello", "workflowId": "hello", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hi {{payload.n}}"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    for n in 0..3 {
        let tx = format!("wm-{n}");
        let (status, out) = app
            .post(
                "/v1/events/trigger",
                json!({"name": "hello", "to": "ann", "payload": {"n": n}, "transactionId": tx}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
        settled(&app, &tx, 1).await;
    }
    let text = eventually(|| async {
        let text = scrape().await;
        (sample(&text, "tidings_jobs_finished_total{status=\"completed\"}") == Some(3.0))
            .then_some(text)
    })
    .await;
    assert!(
        text.contains("# TYPE tidings_jobs_finished_total counter"),
        "{text}"
    );
    assert_eq!(sample(&text, "tidings_queue_depth"), Some(0.0), "{text}");
    drop(child);
}
db_test!(worker_metrics, worker_serves_its_metrics, backend);
