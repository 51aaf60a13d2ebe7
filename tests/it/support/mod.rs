//! Test harness: [`TestApp`] runs the real router on `127.0.0.1:0` with a fresh database (SQLite in a
//! temporary folder, or its own PostgreSQL schema when `TIDINGS_TEST_POSTGRES_URL` is set) and an API key.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::Value;
use tidings::api::{router, AppState};
use tidings::config::WireProfile;
use tidings::crypto::Cipher;
use tidings::domain::Tenant;
use tidings::service::environments;
use tidings::store::{Store, StoreOptions};
use tokio::sync::OnceCell;

pub mod receiver;
pub mod sdk;
pub mod smtp;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The PostgreSQL server the PostgreSQL cases use (`TIDINGS_TEST_POSTGRES_URL`). A PostgreSQL case is
/// ignored unless asked for ([`postgres_test!`]); asked for without the variable, it fails here rather than
/// pass without having run.
pub fn postgres_url() -> String {
    std::env::var("TIDINGS_TEST_POSTGRES_URL")
        .ok()
        .filter(|s| !s.is_empty())
        .expect(
            "a PostgreSQL case needs TIDINGS_TEST_POSTGRES_URL \
             (e.g. postgres://postgres@127.0.0.1:5432/test)",
        )
}

/// A test that runs on PostgreSQL: `postgres_test!(name, future)` awaits `future`. It is ignored (libtest's
/// "skipped") unless run with `--ignored` or `--include-ignored`, which `.ci/run` does with
/// `TIDINGS_TEST_POSTGRES_URL` set, failing if any is left out; run without the variable, it fails.
#[macro_export]
macro_rules! postgres_test {
    ($name:ident, $run:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = "PostgreSQL: set TIDINGS_TEST_POSTGRES_URL and run with --include-ignored"]
        async fn $name() {
            $crate::support::postgres_url();
            $run.await;
        }
    };
}

/// Runs `case` on SQLite and on PostgreSQL: `db_test!(name, case)` hands it a fresh app on each backend,
/// `db_test!(name, case, backend)` hands it the backend (for cases that start their apps themselves). The
/// PostgreSQL case is a [`postgres_test!`].
#[macro_export]
macro_rules! db_test {
    ($name:ident, $case:path) => {
        $crate::db_test!(@both $name, |backend| async move {
            $case($crate::support::TestApp::spawn(backend).await).await
        });
    };
    ($name:ident, $case:path, backend) => {
        $crate::db_test!(@both $name, $case);
    };
    (@both $name:ident, $run:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                ($run)($crate::support::Backend::Sqlite).await;
            }
            $crate::postgres_test!(postgres, ($run)($crate::support::Backend::Postgres));
        }
    };
}

/// Workers as tests run them: provider retries after 100 ms, 200 ms, 400 ms instead of seconds, and
/// calls to the tests' local servers allowed (`TIDINGS_ALLOW_PRIVATE_NETWORKS`).
pub fn worker_options(profile: WireProfile) -> tidings::engine::WorkerOptions {
    let mut o = tidings::engine::WorkerOptions::new(4, profile);
    o.retry_base = std::time::Duration::from_millis(100);
    o.allow_private_networks = true;
    o
}

pub struct TestApp {
    pub base: String,
    pub key: String,
    /// The environment's public identifier (the Inbox's `applicationIdentifier`).
    pub application_identifier: String,
    pub tenant: Tenant,
    pub store: Store,
    pub client: reqwest::Client,
    pub backend: Backend,
    pub profile: WireProfile,
    _dir: Option<tempfile::TempDir>,
    server: tokio::task::JoinHandle<()>,
    pub workers: tokio_util::sync::CancellationToken,
    /// The in-process workers started so far (see [`TestApp::stop_workers`]).
    worker_tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    pub wakeup: tidings::engine::Wakeup,
    /// How to reach this app's database from another process.
    pub database_url: String,
    pub pg_schema: Option<String>,
    pub encryption_key: String,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
        self.workers.cancel();
    }
}

static SCHEMA_COUNTER: AtomicU64 = AtomicU64::new(0);
static PG_CLEANUP: OnceCell<()> = OnceCell::const_new();

/// Drops schemas left by test runs more than an hour old.
async fn cleanup_old_schemas(url: &str) {
    let Ok(pool) = sqlx::PgPool::connect(url).await else {
        return;
    };
    let cutoff = chrono::Utc::now().timestamp() - 3600;
    let names: Vec<String> = sqlx::query_scalar(
        "select nspname::text from pg_namespace where nspname like 'tidings_t_%'",
    )
    .fetch_all(&pool)
    .await
    .unwrap_or_default();
    for name in names {
        let ts = name
            .trim_start_matches("tidings_t_")
            .split('_')
            .next()
            .and_then(|t| t.parse::<i64>().ok());
        if ts.is_some_and(|t| t < cutoff) {
            let _ = sqlx::query(&format!("drop schema if exists \"{name}\" cascade"))
                .execute(&pool)
                .await;
        }
    }
    pool.close().await;
}

/// Serves `app` as `tidings serve` does, with the default connection settings, until aborted.
pub async fn serve(listener: tokio::net::TcpListener, app: axum::Router) {
    let options = tidings::server::ServerOptions::default();
    tidings::server::serve(
        listener,
        app,
        options,
        Default::default(),
        std::future::pending(),
    )
    .await
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, WireProfile::Spec).await
    }

    pub async fn spawn_with(backend: Backend, profile: WireProfile) -> Self {
        Self::spawn_full(backend, profile, true).await
    }

    /// An app whose in-process workers are not running (start them with [`TestApp::start_workers`]).
    pub async fn spawn_without_workers(backend: Backend) -> Self {
        Self::spawn_full(backend, WireProfile::Spec, false).await
    }

    pub async fn spawn_full(backend: Backend, profile: WireProfile, with_workers: bool) -> Self {
        let encryption_key = Cipher::generate_base64();
        let cipher = Cipher::from_base64(&encryption_key).unwrap();
        let (opts, dir) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}/tidings.db", dir.path().display());
                let mut opts = StoreOptions::new(url);
                opts.max_connections = 4;
                (opts, Some(dir))
            }
            Backend::Postgres => {
                let url = postgres_url();
                PG_CLEANUP.get_or_init(|| cleanup_old_schemas(&url)).await;
                let schema = format!(
                    "tidings_t_{}_{}_{}",
                    chrono::Utc::now().timestamp(),
                    std::process::id(),
                    SCHEMA_COUNTER.fetch_add(1, Ordering::Relaxed)
                );
                let mut opts = StoreOptions::new(url);
                opts.pg_schema = Some(schema);
                opts.max_connections = 4;
                (opts, None)
            }
        };
        let store = Store::open(&opts, cipher).await.expect("open store");
        store.migrate().await.expect("migrate");
        let created = environments::create(&store, "Development", None)
            .await
            .expect("environment");
        let tenant = Tenant {
            organization_id: created.organization_id.clone(),
            environment_id: created.environment_id.clone(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = AppState::new(store.clone(), profile);
        let workers = tokio_util::sync::CancellationToken::new();
        let wakeup = state.wakeup.clone();
        let mut worker_tasks = Vec::new();
        if with_workers {
            worker_tasks.push(tidings::engine::spawn_workers(
                store.clone(),
                worker_options(profile),
                wakeup.clone(),
                workers.clone(),
            ));
        }
        let app = router(state);
        let server = tokio::spawn(async move {
            serve(listener, app).await;
        });
        Self {
            workers,
            worker_tasks: std::sync::Mutex::new(worker_tasks),
            wakeup,
            database_url: opts.url.clone(),
            pg_schema: opts.pg_schema.clone(),
            encryption_key,
            base: format!("http://{addr}"),
            key: created.api_key,
            application_identifier: created.application_identifier,
            tenant,
            store,
            client: reqwest::Client::new(),
            backend,
            profile,
            _dir: dir,
            server,
        }
    }

    /// Starts this app's in-process workers (for apps spawned without them).
    pub fn start_workers(&self) {
        self.start_workers_with(worker_options(self.profile));
    }

    /// Starts this app's in-process workers with `options`.
    pub fn start_workers_with(&self, options: tidings::engine::WorkerOptions) {
        let task = tidings::engine::spawn_workers(
            self.store.clone(),
            options,
            self.wakeup.clone(),
            self.workers.clone(),
        );
        self.worker_tasks.lock().unwrap().push(task);
    }

    /// Stops this app's in-process workers and waits until they have stopped; [`TestApp::start_workers`]
    /// starts new ones.
    pub async fn stop_workers(&mut self) {
        self.workers.cancel();
        let tasks = std::mem::take(&mut *self.worker_tasks.lock().unwrap());
        for task in tasks {
            let _ = task.await;
        }
        self.workers = tokio_util::sync::CancellationToken::new();
    }

    /// Waits until nothing is left to run in this app's database (every environment's) — no job queued or
    /// running, no fan-out still expanding — so that a test can then assert what did not happen, where a
    /// pause would only be long enough on an idle machine. Not for jobs that wait on a delay or a digest.
    pub async fn nothing_left_to_run(&self) {
        eventually(|| async {
            let sql = "select count(*) from jobs where status in ('queued', $1)";
            let jobs = count(self, sql, "running").await;
            let sql = "select count(*) from fanouts where status = $1";
            let fanouts = count(self, sql, "running").await;
            (jobs + fanouts == 0).then_some(())
        })
        .await;
    }

    /// Stops the HTTP server and starts a new one (fresh in-memory state) on the same database,
    /// as a process restart would.
    pub async fn restart(&mut self) {
        self.server.abort();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = router(AppState::new(self.store.clone(), self.profile));
        self.server = tokio::spawn(async move {
            serve(listener, app).await;
        });
        self.base = format!("http://{addr}");
    }

    /// A second environment in the same database; returns its API key.
    pub async fn second_environment(&self, name: &str) -> String {
        environments::create(&self.store, name, None)
            .await
            .unwrap()
            .api_key
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A request with this app's API key.
    pub fn req(&self, method: Method, path: &str) -> RequestBuilder {
        self.client
            .request(method, self.url(path))
            .header("Authorization", format!("ApiKey {}", self.key))
    }

    /// A request with another key.
    pub fn req_as(&self, key: &str, method: Method, path: &str) -> RequestBuilder {
        self.client
            .request(method, self.url(path))
            .header("Authorization", format!("ApiKey {key}"))
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        send(self.req(Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        send(self.req(Method::POST, path).json(&body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        send(self.req(Method::PUT, path).json(&body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        send(self.req(Method::PATCH, path).json(&body)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        send(self.req(Method::DELETE, path)).await
    }

    /// Creates a subscriber and returns its body.
    /// The record (`_id`) of the current subscriber `subscriber_id`, `None` when there is none.
    pub async fn subscriber_ref(
        &self,
        subscriber_id: &str,
    ) -> Option<tidings::domain::SubscriberRef> {
        self.store
            .get_subscriber(&self.tenant.environment_id, subscriber_id)
            .await
            .unwrap()
            .map(|s| s.id)
    }

    pub async fn subscriber(&self, id: &str, extra: Value) -> Value {
        let mut body = serde_json::json!({ "subscriberId": id });
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        let (status, out) = self.post("/v2/subscribers", body).await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
        out
    }

    /// Creates an integration and returns its body.
    pub async fn integration(&self, body: Value) -> Value {
        let (status, out) = self.post("/v1/integrations", body).await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
        out
    }
}

/// Sends and returns status plus JSON body (`Value::Null` when empty).
pub async fn send(req: RequestBuilder) -> (StatusCode, Value) {
    let resp = req.send().await.expect("request");
    let status = resp.status();
    let bytes = resp.bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    (status, body)
}

/// Asserts the design.md error body: status, timestamp, path, message, reason phrase.
pub fn assert_error(body: &Value, status: u16) {
    assert_eq!(body["statusCode"], status, "{body}");
    assert!(
        body["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{body}"
    );
    assert!(
        body["path"].as_str().is_some_and(|p| p.starts_with('/')),
        "{body}"
    );
    assert!(body["message"].is_string(), "{body}");
    assert!(body["error"].is_string(), "{body}");
}

/// The address of a connection of the test's own to its database (on PostgreSQL, with its schema on the
/// search path).
pub fn own_url(app: &TestApp) -> String {
    match (app.backend, &app.pg_schema) {
        (Backend::Postgres, Some(schema)) => {
            let sep = if app.database_url.contains('?') {
                '&'
            } else {
                '?'
            };
            format!(
                "{}{sep}options=-c%20search_path%3D{schema}",
                app.database_url
            )
        }
        _ => app.database_url.clone(),
    }
}

/// A statement on the app's database as another client would run it (its own connection, the app's
/// PostgreSQL schema): the first column of each row as text.
pub async fn raw_sql(app: &TestApp, sql: &str) -> Vec<String> {
    match app.backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(&app.database_url).await.unwrap();
            let rows: Vec<(String,)> = sqlx::query_as(sql).fetch_all(&pool).await.unwrap();
            pool.close().await;
            rows.into_iter().map(|(t,)| t).collect()
        }
        Backend::Postgres => {
            use std::str::FromStr;
            let schema = app.pg_schema.clone().unwrap();
            let options = sqlx::postgres::PgConnectOptions::from_str(&app.database_url)
                .unwrap()
                .options([("search_path", format!("\"{schema}\",public"))]);
            let pool = sqlx::PgPool::connect_with(options).await.unwrap();
            let rows: Vec<(String,)> = sqlx::query_as(sql).fetch_all(&pool).await.unwrap();
            pool.close().await;
            rows.into_iter().map(|(t,)| t).collect()
        }
    }
}

/// The one number `sql` (bound to `arg`) selects, read over a connection of the test's own.
pub async fn count(app: &TestApp, sql: &str, arg: &str) -> i64 {
    let url = own_url(app);
    match app.backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
            let (n,): (i64,) = sqlx::query_as(sql)
                .bind(arg)
                .fetch_one(&pool)
                .await
                .unwrap();
            pool.close().await;
            n
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            let (n,): (i64,) = sqlx::query_as(sql)
                .bind(arg)
                .fetch_one(&pool)
                .await
                .unwrap();
            pool.close().await;
            n
        }
    }
}

/// Runs the statement `sql` over a connection of the test's own; returns the rows it changed.
pub async fn execute(app: &TestApp, sql: &str) -> u64 {
    let url = own_url(app);
    match app.backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
            let n = sqlx::query(sql)
                .execute(&pool)
                .await
                .unwrap()
                .rows_affected();
            pool.close().await;
            n
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            let n = sqlx::query(sql)
                .execute(&pool)
                .await
                .unwrap()
                .rows_affected();
            pool.close().await;
            n
        }
    }
}

/// Polls until `f` returns Some, for up to 20 s.
pub async fn eventually<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..400 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("condition not reached in 20 s");
}

/// Polls the activity feed until every job of `transaction_id` has finished; returns the activity items.
pub async fn settled(app: &TestApp, transaction_id: &str, notifications: usize) -> Vec<Value> {
    let path = format!("/v1/notifications?transactionId={transaction_id}");
    eventually(|| async {
        let (status, page) = app.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let items = page["data"].as_array()?.clone();
        let done = items.len() == notifications
            && items.iter().all(|n| {
                n["jobs"].as_array().is_some_and(|jobs| {
                    !jobs.is_empty()
                        && jobs.iter().all(|j| {
                            !matches!(j["status"].as_str(), Some("pending" | "queued" | "running"))
                        })
                })
            });
        done.then_some(items)
    })
    .await
}

/// Creates a one-step workflow `workflow_id` of `step_type` with `controls`, triggers it with `trigger`
/// (its `name` and `transactionId` are filled in), waits until it settles, and returns the step's job
/// (with its `executionDetails`) and the step's message from `GET /v1/messages` (null when none).
pub async fn deliver_one(
    app: &TestApp,
    step_type: &str,
    controls: Value,
    mut trigger: Value,
) -> (Value, Value) {
    let workflow_id = format!("wf-{}", tidings::domain::new_object_id());
    let (status, out) = app
        .post(
            "/v2/workflows",
            serde_json::json!({"name": workflow_id, "workflowId": workflow_id,
                "steps": [{"name": "Send", "type": step_type, "controlValues": controls}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let transaction_id = format!("t-{}", tidings::domain::new_object_id());
    trigger["name"] = Value::from(workflow_id);
    trigger["transactionId"] = Value::from(transaction_id.clone());
    let (status, out) = app.post("/v1/events/trigger", trigger).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let items = settled(app, &transaction_id, 1).await;
    let job = items[0]["jobs"][0].clone();
    let (status, page) = app
        .get(&format!(
            "/v1/messages?transactionId={transaction_id}&channel={step_type}"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let message = page["data"].get(0).cloned().unwrap_or(Value::Null);
    (job, message)
}

/// A job's last execution detail (a settled job's: what its step came to).
pub fn last_detail(job: &Value) -> &Value {
    job["executionDetails"].as_array().unwrap().last().unwrap()
}

/// A receiver answering every request with `reply`.
pub async fn replying_always(reply: receiver::Reply) -> receiver::Receiver {
    let r = receiver::Receiver::start().await;
    r.always(reply);
    r
}

/// A receiver answering its first request with `reply` (then its default answer).
pub async fn replying_once(reply: receiver::Reply) -> receiver::Receiver {
    let r = receiver::Receiver::start().await;
    r.reply([reply]);
    r
}

/// The one request `r` got, a `POST` to `path`.
pub async fn only_post(r: &receiver::Receiver, path: &str) -> receiver::Received {
    let got = r.wait_for(1).await;
    let seen: Vec<String> = got
        .iter()
        .map(|g| format!("{} {}", g.method, g.path))
        .collect();
    assert_eq!(got.len(), 1, "{seen:?}");
    let req = got[0].clone();
    assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", path));
    req
}
