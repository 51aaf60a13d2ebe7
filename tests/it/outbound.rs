//! Calls made on a workflow's behalf (`http_request` steps, providers, attachments) reach only public
//! addresses unless `TIDINGS_ALLOW_PRIVATE_NETWORKS` allows the rest, and a step's answer never carries its
//! `Authorization` header into the execution details.

use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::{Receiver, Reply};
use crate::support::{deliver_one, last_detail, settled, worker_options, Backend, TestApp};

/// An app whose workers refuse private addresses, as `tidings serve` runs by default.
async fn guarded(backend: Backend) -> TestApp {
    let app = TestApp::spawn_without_workers(backend).await;
    let mut options = worker_options(app.profile);
    options.allow_private_networks = false;
    app.start_workers_with(options);
    app
}

/// Runs a one-step `http_request` workflow with `controls` and returns its settled job.
async fn call(app: &TestApp, controls: Value) -> Value {
    let id = format!("call-{}", tidings::domain::new_object_id());
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": id, "workflowId": id,
                "steps": [{"name": "Call", "type": "http_request", "controlValues": controls}]}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{out}");
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": id, "to": "caller", "transactionId": id}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{out}");
    settled(app, &id, 1).await[0]["jobs"][0].clone()
}

/// The loopback receiver, by address and by name: neither is called, and the step fails saying why.
async fn steps_do_not_reach_private_addresses(backend: Backend) {
    let app = guarded(backend).await;
    let receiver = Receiver::start().await;
    let port = receiver.url.rsplit(':').next().unwrap().to_owned();
    for url in [
        format!("http://127.0.0.1:{port}/secret"),
        format!("http://localhost:{port}/secret"),
        format!("http://[::ffff:127.0.0.1]:{port}/secret"),
        // 169.254.169.254: cloud metadata; refused before any connection is tried (nothing listens).
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ] {
        let job = call(&app, json!({"method": "GET", "url": url})).await;
        assert_eq!(job["status"], "failed", "{url}: {job}");
        let detail = last_detail(&job);
        let text = detail["detail"].as_str().unwrap();
        assert!(
            text.contains("TIDINGS_ALLOW_PRIVATE_NETWORKS"),
            "{url}: the detail says why: {text}"
        );
        assert!(
            detail["raw"].is_null(),
            "{url}: nothing read back: {detail}"
        );
    }
    assert!(
        receiver.requests().is_empty(),
        "the private service was never called"
    );
}

db_test!(
    steps_refuse_private_addresses,
    steps_do_not_reach_private_addresses,
    backend
);

/// A provider's webhook URL (an integration credential) and an attachment URL are held to the same rule.
async fn providers_and_attachments_do_not_reach_private_addresses(backend: Backend) {
    let app = guarded(backend).await;
    let receiver = Receiver::start().await;
    let body = json!({"providerId": "email-webhook", "channel": "email", "active": true,
        "credentials": {"webhookUrl": format!("{}/mail", receiver.url), "from": "app@example.com"}});
    app.integration(body).await;
    let (job, _) = deliver_one(
        &app,
        "email",
        json!({"subject": "Hi", "body": "<p>Hi</p>"}),
        json!({"to": {"subscriberId": "ssrf-mail", "email": "ssrf@example.com"}}),
    )
    .await;
    assert_eq!(job["status"], "failed", "{job}");
    let details = job["executionDetails"].to_string();
    assert!(
        details.contains("TIDINGS_ALLOW_PRIVATE_NETWORKS"),
        "{details}"
    );
    let (job, _) = deliver_one(
        &app,
        "email",
        json!({"subject": "Hi", "body": "<p>Hi</p>"}),
        json!({"to": {"subscriberId": "ssrf-mail", "email": "ssrf@example.com"},
            "payload": {"attachments": [{"name": "a.txt", "url": format!("{}/file", receiver.url)}]}}),
    )
    .await;
    assert_eq!(job["status"], "failed", "{job}");
    assert!(
        receiver.requests().is_empty(),
        "neither the provider nor the attachment reached the private address: {:?}",
        receiver.requests()
    );
}

db_test!(
    providers_refuse_private_addresses,
    providers_and_attachments_do_not_reach_private_addresses,
    backend
);

/// With the setting (as tests run), the same step reaches the local service; an `Authorization` header it
/// echoes is redacted in the execution detail, whatever its scheme.
async fn an_echoed_authorization_header_is_redacted(app: TestApp) {
    let receiver = Receiver::start().await;
    receiver.always(Reply::json(
        200,
        json!({"headers": {"Authorization": "Token tk-0123456789abcdef"},
            "note": "echo of Token tk-0123456789abcdef and Bearer bx-9876543210"}),
    ));
    let job = call(
        &app,
        json!({"method": "POST", "url": format!("{}/echo", receiver.url),
            "headers": [{"key": "Authorization", "value": "Token tk-0123456789abcdef"}]}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    let got = receiver.wait_for(1).await;
    assert_eq!(
        got[0].header("authorization"),
        Some("Token tk-0123456789abcdef")
    );
    let raw = last_detail(&job)["raw"].as_str().unwrap().to_owned();
    assert!(!raw.contains("tk-0123456789abcdef"), "{raw}");
    assert!(!raw.contains("bx-9876543210"), "{raw}");
    assert!(raw.contains("[redacted]"), "{raw}");
    assert!(raw.contains("\"status\":200"), "{raw}");
}

db_test!(
    echoed_authorization_redacted,
    an_echoed_authorization_header_is_redacted
);

#[tokio::test]
async fn the_setting_is_read_and_checked() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidings"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("TIDINGS_ALLOW_PRIVATE_NETWORKS", "sometimes")
        .env("DATABASE_URL", "sqlite::memory:")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TIDINGS_ALLOW_PRIVATE_NETWORKS must be true or false"),
        "{err}"
    );
}
