//! A recorded corpus of real responses (issue #20): one fixed scenario of requests that calls every route the
//! server serves (with the error answers a client meets) after producing the engine states a real app meets,
//! run against a fresh app for each wire profile (`svc`, `novu`) and each database. Every exchange is written
//! as text — method, path, request headers and body, status, content type, the idempotency response headers
//! and the response body exactly as the server wrote it, with the volatile values replaced ([`normalise`]
//! lists the patterns) — and the replay is compared byte for byte with `tests/it/corpus/<profile>.txt`.
//!
//! Both databases answer with the same bytes except where the server copies a stored JSON column into the
//! response: PostgreSQL prints `jsonb` its own way. Those exchanges (and only those) are kept in
//! `tests/it/corpus/<profile>.postgres.txt`; see [`overlay`].
//!
//! On a mismatch the test prints a line diff of the first differing exchanges and writes the whole replay to
//! `target/tmp/corpus-<profile>-<backend>.txt`.
//!
//! **Re-recording** (only when a change of the wire output is intended; review the diff of the files):
//! `TIDINGS_CORPUS_RECORD=1 TIDINGS_TEST_POSTGRES_URL=… cargo test --test it corpus` rewrites the files
//! instead of comparing: SQLite's test writes `<profile>.txt`, PostgreSQL's replays on both databases and
//! writes `<profile>.postgres.txt`, failing when the two differ by more than JSON printing.
//!
//! Determinism: the app runs one worker and the scenario waits for each trigger to settle (polling, not
//! recorded) before the next request, so jobs run and messages are created in a fixed order; lists never mix
//! messages of notifications delivered at the same time (a bulk or multi-recipient trigger), whose order is
//! a race. The digest's three events are triggered back to back inside its 2-second window.

mod diff;
mod normalise;
mod overlay;
mod scenario;
mod scenario_engine;

use std::fmt::Write as _;
use std::path::PathBuf;

use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::Value;
use tidings::config::WireProfile;

use crate::db_test;
use crate::support::{worker_options, Backend, TestApp};
use normalise::Normaliser;

/// Response headers recorded besides the content type: the idempotency echo and replay marker.
const RECORDED_HEADERS: [&str; 3] = ["idempotency-key", "idempotency-replay", "retry-after"];

/// Which key a recorded request carries.
pub enum Auth {
    App,
    None,
    Header(&'static str),
}

/// One request of the scenario.
pub struct Call {
    method: Method,
    path: String,
    body: Option<String>,
    auth: Auth,
    headers: Vec<(&'static str, String)>,
}

impl Call {
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Self {
            method,
            path: path.into(),
            body: None,
            auth: Auth::App,
            headers: Vec::new(),
        }
    }

    /// A JSON body, sent as the exact text recorded.
    pub fn json(mut self, body: &Value) -> Self {
        self.body = Some(body.to_string());
        self
    }

    /// A body sent as is, with `content-type: application/json` (malformed JSON).
    pub fn raw(mut self, body: &str) -> Self {
        self.body = Some(body.to_owned());
        self
    }

    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }
}

/// Sends the scenario's requests and records every exchange.
pub struct Recorder<'a> {
    pub app: &'a TestApp,
    norm: Normaliser,
    text: String,
    count: usize,
}

impl<'a> Recorder<'a> {
    fn new(app: &'a TestApp) -> Self {
        let mut norm = Normaliser::default();
        norm.literal(&app.key, "<api-key>");
        norm.literal(&app.application_identifier, "<app-identifier>");
        Self {
            app,
            norm,
            text: String::new(),
            count: 0,
        }
    }

    pub fn profile(&self) -> WireProfile {
        self.app.profile
    }

    /// Sends `call`, records the exchange, and answers the body as JSON without the `novu` profile's
    /// `{"data": …}` envelope (`Value::Null` when it is not JSON).
    pub async fn send(&mut self, call: Call) -> Value {
        let mut req = self
            .app
            .client
            .request(call.method.clone(), self.app.url(&call.path));
        req = match call.auth {
            Auth::App => req.header("Authorization", format!("ApiKey {}", self.app.key)),
            Auth::None => req,
            Auth::Header(v) => req.header("Authorization", v),
        };
        for (name, value) in &call.headers {
            req = req.header(*name, value);
        }
        if let Some(body) = &call.body {
            req = req
                .header("content-type", "application/json")
                .body(body.clone());
        }
        let resp = req.send().await.expect("request");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body");
        let body = String::from_utf8_lossy(&bytes).into_owned();
        self.count += 1;
        let block = exchange(self.count, &call, status, &headers, &body);
        let block = self.norm.apply(&block);
        self.text.push_str(&block);
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        unwrap_data(value)
    }

    pub async fn get(&mut self, path: &str) -> Value {
        self.send(Call::new(Method::GET, path)).await
    }

    pub async fn post(&mut self, path: &str, body: Value) -> Value {
        self.send(Call::new(Method::POST, path).json(&body)).await
    }

    pub async fn put(&mut self, path: &str, body: Value) -> Value {
        self.send(Call::new(Method::PUT, path).json(&body)).await
    }

    pub async fn patch(&mut self, path: &str, body: Value) -> Value {
        self.send(Call::new(Method::PATCH, path).json(&body)).await
    }

    pub async fn delete(&mut self, path: &str) -> Value {
        self.send(Call::new(Method::DELETE, path)).await
    }
}

/// The body without the `novu` profile's envelope: `{"data": x}` (and nothing else) → `x`.
fn unwrap_data(v: Value) -> Value {
    match v {
        Value::Object(mut o) if o.len() == 1 && o.contains_key("data") => {
            o.remove("data").unwrap_or_default()
        }
        v => v,
    }
}

/// One exchange as recorded (before normalisation).
fn exchange(
    n: usize,
    call: &Call,
    status: reqwest::StatusCode,
    headers: &HeaderMap,
    body: &str,
) -> String {
    let mut s = format!("=== {n}. {} {}\n", call.method, call.path);
    match call.auth {
        Auth::App => {}
        Auth::None => s.push_str("> (no authorization)\n"),
        Auth::Header(v) => {
            let _ = writeln!(s, "> authorization: {v}");
        }
    }
    for (name, value) in &call.headers {
        let _ = writeln!(s, "> {name}: {value}");
    }
    if let Some(b) = &call.body {
        let _ = writeln!(s, "> {b}");
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let _ = writeln!(
        s,
        "--- {} {}",
        status.as_u16(),
        header("content-type").unwrap_or("(no content-type)")
    );
    for name in RECORDED_HEADERS {
        if let Some(v) = header(name) {
            let _ = writeln!(s, "< {name}: {v}");
        }
    }
    let _ = writeln!(s, "{body}\n");
    s
}

fn profile_name(profile: WireProfile) -> &'static str {
    match profile {
        WireProfile::Spec => "svc",
        WireProfile::Novu => "novu",
    }
}

/// `tests/it/corpus/<profile><suffix>.txt`.
fn corpus_file(profile: WireProfile, suffix: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/corpus")
        .join(format!("{}{suffix}.txt", profile_name(profile)))
}

/// Runs the scenario for `profile` against a fresh app on `backend`; answers the recorded text.
async fn scenario_text(backend: Backend, profile: WireProfile) -> String {
    let started = std::time::Instant::now();
    // One worker: jobs run one at a time, in a fixed order.
    let app = TestApp::spawn_full(backend, profile, false).await;
    let mut options = worker_options(profile);
    options.concurrency = 1;
    app.start_workers_with(options);
    let mut rec = Recorder::new(&app);
    scenario::run(&mut rec).await;
    eprintln!(
        "corpus {} on {backend:?}: {} exchanges in {:.1} s",
        profile_name(profile),
        rec.count,
        started.elapsed().as_secs_f64()
    );
    rec.text
}

/// Writes `text` to `path` whole (a rename: both databases may record at once).
fn write(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).expect("write the corpus");
    std::fs::rename(&tmp, path).expect("write the corpus");
    eprintln!("recorded {}", path.display());
}

fn recording() -> bool {
    std::env::var("TIDINGS_CORPUS_RECORD").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Runs the scenario for `profile` on `backend` and compares it with (or records it as) the corpus.
async fn replay(backend: Backend, profile: WireProfile) {
    let actual = scenario_text(backend, profile).await;
    let (base, overlay) = (corpus_file(profile, ""), corpus_file(profile, ".postgres"));
    if recording() {
        match backend {
            Backend::Sqlite => write(&base, &actual),
            Backend::Postgres => {
                // The overlay is what differs from SQLite's replay of the same scenario, run here.
                let sqlite = scenario_text(Backend::Sqlite, profile).await;
                write(
                    &overlay,
                    &overlay::differences(&sqlite, &actual).unwrap_or_else(|e| panic!("{e}")),
                );
            }
        }
        return;
    }
    let read = |path: &PathBuf| std::fs::read_to_string(path).unwrap_or_default();
    let expected = match backend {
        Backend::Sqlite => read(&base),
        Backend::Postgres => overlay::apply(&read(&base), &read(&overlay)),
    };
    if expected != actual {
        let name = format!("corpus-{}-{backend:?}", profile_name(profile)).to_lowercase();
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.txt"));
        let _ = std::fs::write(&out, &actual);
        let files = match backend {
            Backend::Sqlite => base.display().to_string(),
            Backend::Postgres => format!("{} with {}", base.display(), overlay.display()),
        };
        panic!(
            "the replay differs from {files} (whole replay: {}; re-record with TIDINGS_CORPUS_RECORD=1 if \
             the change is intended)\n{}",
            out.display(),
            diff::first_differences(&expected, &actual, 3)
        );
    }
}

async fn svc_profile(backend: Backend) {
    replay(backend, WireProfile::Spec).await;
}
db_test!(svc, svc_profile, backend);

async fn novu_profile(backend: Backend) {
    replay(backend, WireProfile::Novu).await;
}
db_test!(novu, novu_profile, backend);
