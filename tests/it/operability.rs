//! Operability (issue 19): unknown routes answer 404, the request log and the engine's failure log, the
//! `environments list` / `rotate-key` commands, and the OpenAPI document of each wire profile.

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tidings::config::WireProfile;

use crate::db_test;
use crate::support::{assert_error, deliver_one, send, Backend, TestApp};

/// Everything the request and engine targets log in this test binary (one global subscriber, installed once).
pub(crate) fn captured() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "tidings::request=info,tidings::engine=warn",
            ))
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .try_init()
            .expect("no other global tracing subscriber in the test binary");
        buf
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The one captured line containing `needle` (waits up to 20 s: engine lines come from worker tasks).
pub(crate) async fn log_line(logs: &Arc<Mutex<Vec<u8>>>, needle: &str) -> String {
    for _ in 0..200 {
        let text = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(needle)).collect();
        match lines.as_slice() {
            [line] => return (*line).to_owned(),
            [] => tokio::time::sleep(Duration::from_millis(100)).await,
            more => panic!("{} lines contain {needle}: {more:?}", more.len()),
        }
    }
    panic!("no log line contains {needle}");
}

fn request_id(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("x-request-id")
        .expect("X-Request-Id on every response")
        .to_str()
        .unwrap()
        .to_owned()
}

async fn unknown_routes_answer_404(backend: Backend) {
    for profile in [WireProfile::Spec, WireProfile::Novu] {
        let app = TestApp::spawn_with(backend, profile).await;
        let cases = [
            (Method::PUT, "/v1/events/trigger/broadcast"),
            (Method::PUT, "/v2/workflows/some-workflow/steps"),
            (Method::DELETE, "/v1/integrations"),
            (Method::PATCH, "/v1/health-check"),
            (Method::GET, "/v1/events/trigger"),
            (Method::POST, "/v2/subscribers/sub-1"),
            (Method::GET, "/v9/nothing-here?x=1"),
        ];
        for (method, path) in cases {
            for authed in [true, false] {
                let req = if authed {
                    app.req(method.clone(), path)
                } else {
                    app.client.request(method.clone(), app.url(path))
                };
                let resp = req.json(&json!({})).send().await.unwrap();
                let status = resp.status();
                let text = resp.text().await.unwrap();
                assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {text}");
                let body: Value = serde_json::from_str(&text).unwrap();
                assert_error(&body, 404);
                assert_eq!(body["error"], "Not Found", "{body}");
                assert_eq!(body["path"], path, "{body}");
                assert_eq!(body["message"], format!("Cannot {method} {path}"), "{body}");
            }
        }
        // The routes that do exist still answer.
        let (status, _) = app.get("/v2/subscribers").await;
        assert_eq!(status, StatusCode::OK);
    }
}
db_test!(unknown_routes, unknown_routes_answer_404, backend);

async fn every_request_is_logged_with_its_route_and_id(app: TestApp) {
    let logs = captured();
    app.subscriber("log-ann", json!({})).await;

    // The client's id is kept, logged and echoed; the route is the template, not the path.
    let id = format!("it-{}", tidings::domain::new_object_id());
    let resp = app
        .req(Method::GET, "/v2/subscribers/log-ann")
        .header("x-request-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(request_id(&resp), id);
    let line = log_line(&logs, &format!("request_id={id}")).await;
    assert!(line.contains(" INFO tidings::request: request "), "{line}");
    assert!(
        line.contains("method=GET route=/v2/subscribers/{subscriberId} status=200 latency_us="),
        "{line}"
    );
    let latency: u64 = line
        .split("latency_us=")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("latency_us is a number");
    assert!(latency < 30_000_000, "{line}");

    // Without a usable client id one is generated (20 hex characters), logged and echoed.
    for header in [None, Some("two words")] {
        let mut req = app.client.get(app.url("/v1/health-check"));
        if let Some(h) = header {
            req = req.header("x-request-id", h);
        }
        let resp = req.send().await.unwrap();
        let generated = request_id(&resp);
        assert_eq!(generated.len(), 20, "{generated}");
        assert!(
            generated.bytes().all(|b| b.is_ascii_hexdigit()),
            "{generated}"
        );
        let line = log_line(&logs, &format!("request_id={generated}")).await;
        assert!(
            line.contains("method=GET route=/v1/health-check status=200"),
            "{line}"
        );
    }

    // A refused key is logged with the route it asked for; an unknown route as `-`.
    let resp = app
        .client
        .post(app.url("/v2/subscribers"))
        .json(&json!({"subscriberId": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let line = log_line(&logs, &format!("request_id={}", request_id(&resp))).await;
    assert!(
        line.contains("method=POST route=/v2/subscribers status=401"),
        "{line}"
    );
    let resp = app
        .req(Method::PATCH, "/v1/events/trigger/broadcast")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let line = log_line(&logs, &format!("request_id={}", request_id(&resp))).await;
    assert!(line.contains("method=PATCH route=- status=404"), "{line}");

    // A write that fails validation, with its route.
    let resp = app
        .req(Method::PATCH, "/v2/subscribers/log-ann")
        .json(&json!({"email": 5}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let line = log_line(&logs, &format!("request_id={}", request_id(&resp))).await;
    assert!(
        line.contains(&format!(
            "method=PATCH route=/v2/subscribers/{{subscriberId}} status={status}"
        )),
        "{line}"
    );
}
db_test!(request_log, every_request_is_logged_with_its_route_and_id);

async fn a_failed_step_is_logged_with_its_environment_notification_job_and_step(app: TestApp) {
    let logs = captured();
    let (job, _) = deliver_one(
        &app,
        "email",
        json!({"subject": "Hi", "body": "<p>Hi</p>"}),
        json!({"to": {"subscriberId": "no-mail"}, "payload": {}}),
    )
    .await;
    assert_eq!(job["status"], "failed", "{job}");
    let job_id = job["_id"].as_str().unwrap();
    let line = log_line(&logs, &format!("job={job_id}")).await;
    assert!(line.contains(" WARN tidings::engine"), "{line}");
    assert!(line.contains("step failed"), "{line}");
    assert!(
        line.contains(&format!("env={}", app.tenant.environment_id.as_str())),
        "{line}"
    );
    let (_, page) = app.get("/v1/notifications").await;
    let notification = page["data"][0]["_id"].as_str().unwrap();
    assert!(
        line.contains(&format!("notification={notification}")),
        "{line}"
    );
    let step = job["step"]["stepId"].as_str().unwrap_or("send");
    assert!(line.contains(&format!("step={step}")), "{line}");
    assert!(line.contains("detail="), "{line}");
}
db_test!(
    failure_log,
    a_failed_step_is_logged_with_its_environment_notification_job_and_step
);

/// How the `tidings` binary reaches this app's database.
pub(crate) fn database_url_for_binary(app: &TestApp) -> String {
    match &app.pg_schema {
        None => app.database_url.clone(),
        Some(schema) => {
            let sep = if app.database_url.contains('?') {
                '&'
            } else {
                '?'
            };
            format!(
                "{}{sep}options=-c%20search_path%3D{schema}%2Cpublic",
                app.database_url
            )
        }
    }
}

/// Runs `tidings environments <args>` on the app's database: (success, stdout, stderr).
fn environments(app: &TestApp, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tidings"))
        .arg("environments")
        .args(args)
        .env("DATABASE_URL", database_url_for_binary(app))
        .env("TIDINGS_ENCRYPTION_KEY", &app.encryption_key)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run tidings");
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

async fn environments_are_listed_and_keys_rotated(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let production_key = app.second_environment("Production").await;

    let (ok, out, err) = environments(&app, &["list"]);
    assert!(ok, "{err}");
    let listed: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 2, "{out}");
    assert_eq!(listed[0]["name"], "Development");
    assert_eq!(
        listed[0]["environmentId"],
        app.tenant.environment_id.as_str()
    );
    assert_eq!(
        listed[0]["organizationId"],
        app.tenant.organization_id.as_str()
    );
    assert_eq!(listed[1]["name"], "Production");
    let mut keys: Vec<&str> = listed[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "applicationIdentifier",
            "environmentId",
            "name",
            "organizationId"
        ]
    );
    assert_eq!(
        listed[0]["applicationIdentifier"],
        app.application_identifier
    );
    assert!(!out.contains(&app.key) && !out.contains(&production_key));

    // The old key is in use (and cached by the server) when it is rotated.
    let (status, _) = app.get("/v2/subscribers").await;
    assert_eq!(status, StatusCode::OK);
    let (ok, out, err) = environments(&app, &["rotate-key", "Development"]);
    assert!(ok, "{err}");
    let rotated: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(rotated["name"], "Development");
    assert_eq!(rotated["environmentId"], app.tenant.environment_id.as_str());
    // A new key, the same public identifier.
    assert_eq!(rotated["applicationIdentifier"], app.application_identifier);
    let new_key = rotated["apiKey"].as_str().unwrap();
    assert!(new_key.len() >= 32 && new_key != app.key, "{rotated}");

    // The new key works at once; the old one within the cache's bound, on this server too.
    let (status, _) = send(app.req_as(new_key, Method::GET, "/v2/subscribers")).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(tidings::api::auth::KEY_CACHE_TTL + Duration::from_millis(300)).await;
    let (status, body) = app.get("/v2/subscribers").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, _) = send(app.req_as(new_key, Method::GET, "/v2/subscribers")).await;
    assert_eq!(status, StatusCode::OK);
    // Only that environment's key changed.
    let (status, _) = send(app.req_as(&production_key, Method::GET, "/v2/subscribers")).await;
    assert_eq!(status, StatusCode::OK);
    // Signatures use the new key (the environment's only key now).
    assert_eq!(
        app.store
            .first_api_key(&app.tenant.environment_id)
            .await
            .unwrap()
            .as_deref(),
        Some(new_key)
    );

    let (ok, out, err) = environments(&app, &["rotate-key", "Staging"]);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("Environment \"Staging\" not found"), "{err}");
}
db_test!(
    environments_cli,
    environments_are_listed_and_keys_rotated,
    backend
);

/// Stops the server even when an assertion fails first.
pub(crate) struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_binary_logs_requests_without_colours_when_not_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_tidings"))
            .arg("serve")
            .current_dir(dir.path())
            .env("TIDINGS_LISTEN", "127.0.0.1:0")
            .env("TIDINGS_WORKERS", "1")
            .env_remove("RUST_LOG")
            .env_remove("TIDINGS_LOG")
            .env_remove("DATABASE_URL")
            .env_remove("TIDINGS_API_KEY")
            .env_remove("TIDINGS_ENCRYPTION_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tidings serve"),
    );
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = lines.clone();
        let stderr = child.0.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                lines.lock().unwrap().push(line);
            }
        })
    };
    let wait_for = |needle: &str| -> String {
        for _ in 0..300 {
            if let Some(l) = lines.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no line with {needle}: {:?}", lines.lock().unwrap());
    };
    let serving = wait_for("tidings is serving");
    let addr = serving
        .split("listen=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("listen address")
        .to_owned();
    let id = "binary-check-1";
    let status = std::thread::spawn(move || {
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            reqwest::Client::new()
                .get(format!("http://{addr}/v1/health-check"))
                .header("x-request-id", id)
                .send()
                .await
                .unwrap()
                .status()
        })
    })
    .join()
    .unwrap();
    assert_eq!(status, StatusCode::OK);
    let line = wait_for(&format!("request_id={id}"));
    drop(child);
    reader.join().unwrap();
    assert!(
        line.contains(
            "INFO tidings::request: request method=GET route=/v1/health-check status=200"
        ),
        "{line}"
    );
    let all = lines.lock().unwrap().join("\n");
    assert!(
        !all.contains('\u{1b}'),
        "colour codes in a piped log:\n{all}"
    );
}

async fn the_document_describes_each_profiles_wire(backend: Backend) {
    let spec = TestApp::spawn_with(backend, WireProfile::Spec).await;
    let novu = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let (status, spec_doc) = send(spec.client.get(spec.url("/openapi.json"))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, novu_doc) = send(novu.client.get(novu.url("/openapi.json"))).await;
    assert_eq!(status, StatusCode::OK);

    // `to`: a subscriberId, a subscriber object, a topic, or an array of them, in both profiles.
    for doc in [&spec_doc, &novu_doc] {
        let to = &doc["components"]["schemas"]["TriggerIn"]["properties"]["to"];
        let one_of = to["oneOf"].as_array().unwrap_or_else(|| panic!("{to}"));
        assert_eq!(one_of.len(), 4, "{to}");
        assert_eq!(one_of[0]["type"], "string");
        assert_eq!(one_of[1]["type"], "object");
        assert_eq!(one_of[1]["required"], json!(["subscriberId"]));
        assert_eq!(one_of[2]["type"], "object");
        assert_eq!(one_of[2]["required"], json!(["type", "topicKey"]));
        assert_eq!(one_of[2]["properties"]["type"]["enum"], json!(["Topic"]));
        assert_eq!(one_of[3]["type"], "array");
        let items = one_of[3]["items"]["oneOf"].as_array().unwrap();
        assert_eq!(items.len(), 3, "{to}");
        assert_eq!(items[0]["type"], "string");
        assert_eq!(items[1]["type"], "object");
        assert_eq!(items[2]["required"], json!(["type", "topicKey"]));
    }

    let body = |doc: &Value, path: &str, method: &str, status: &str| {
        doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
            .clone()
    };
    // A single object: as it is under `spec`, inside `{data}` under `novu`.
    let subscriber = json!({"$ref": "#/components/schemas/SubscriberOut"});
    assert_eq!(
        body(&spec_doc, "/v2/subscribers/{subscriberId}", "get", "200"),
        subscriber
    );
    let wrapped = body(&novu_doc, "/v2/subscribers/{subscriberId}", "get", "200");
    assert_eq!(wrapped["type"], "object");
    assert_eq!(wrapped["required"], json!(["data"]));
    assert_eq!(wrapped["properties"]["data"], subscriber);
    // A plain array too; the trigger's answer too.
    assert_eq!(
        body(&novu_doc, "/v1/integrations", "get", "200")["properties"]["data"]["type"],
        "array"
    );
    assert_eq!(
        body(&spec_doc, "/v1/integrations", "get", "200")["type"],
        "array"
    );
    assert_eq!(
        body(&novu_doc, "/v1/events/trigger", "post", "201")["properties"]["data"],
        body(&spec_doc, "/v1/events/trigger", "post", "201")
    );
    // Pages are never wrapped.
    for (path, method) in [
        ("/v2/subscribers", "get"),
        ("/v1/channel-endpoints", "get"),
        ("/v1/notifications", "get"),
        ("/v1/subscribers/{subscriberId}/notifications/feed", "get"),
    ] {
        let page = body(&spec_doc, path, method, "200");
        assert!(!page.is_null(), "{path}");
        assert_eq!(body(&novu_doc, path, method, "200"), page, "{path}");
    }
    // Error answers are the same in both.
    assert_eq!(
        spec_doc["paths"]["/v2/subscribers/{subscriberId}"]["get"]["responses"]["404"],
        novu_doc["paths"]["/v2/subscribers/{subscriberId}"]["get"]["responses"]["404"]
    );

    // Identifiers in the profile's spelling.
    let preview = |doc: &Value| {
        let mut names: Vec<String> = doc["components"]["schemas"]["PreviewOut"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        preview(&spec_doc),
        ["previewPayloadExample", "result", "schema", "svcSignature"]
    );
    assert_eq!(
        preview(&novu_doc),
        ["novuSignature", "previewPayloadExample", "result", "schema"]
    );
}
db_test!(
    openapi_profiles,
    the_document_describes_each_profiles_wire,
    backend
);
