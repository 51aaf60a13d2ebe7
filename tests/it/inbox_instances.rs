//! The Inbox's real-time socket across instances: two `tidings serve` processes (this build's binary) on one
//! fresh PostgreSQL database, with the same encryption key and bootstrap API key, on two ports. The official
//! Inbox client `@novu/js` (`tests/sdk-ts/inbox_instances.mjs`) holds its socket on instance A while the API
//! key triggers and marks messages through instance B, and hears every change (PostgreSQL `LISTEN/NOTIFY`
//! between the processes); and the other way round. PostgreSQL only (`TIDINGS_TEST_POSTGRES_URL`).
//!
//! The database is a fresh one, not a schema of the test database: a `NOTIFY` reaches every listener of the
//! database, and the binary's channel does not depend on the schema.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tidings::crypto::Cipher;

use crate::operability::KillOnDrop;
use crate::support;

/// Prefix of the databases this test creates (those left by a run that crashed are dropped after an hour).
const PREFIX: &str = "tidings_inst_";
/// Tells apart the databases one test process creates within the same second.
static CREATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A database created for one run, dropped (with its connections) when this is dropped.
pub(crate) struct FreshDatabase {
    admin_url: String,
    name: String,
    pub(crate) url: String,
}

impl FreshDatabase {
    pub(crate) async fn create(admin_url: &str) -> Self {
        let admin = sqlx::PgPool::connect(admin_url)
            .await
            .expect("connect to TIDINGS_TEST_POSTGRES_URL");
        drop_stale_databases(&admin).await;
        let name = format!(
            "{PREFIX}{}_{}_{}",
            chrono::Utc::now().timestamp(),
            std::process::id(),
            CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        sqlx::query(&format!("create database \"{name}\""))
            .execute(&admin)
            .await
            .expect("create the database");
        admin.close().await;
        let mut url = reqwest::Url::parse(admin_url).expect("TIDINGS_TEST_POSTGRES_URL is a URL");
        url.set_path(&format!("/{name}"));
        Self {
            admin_url: admin_url.to_owned(),
            name,
            url: url.to_string(),
        }
    }
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        // A runtime of its own: this may run inside the test's runtime, which cannot block on itself.
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let admin = sqlx::PgPool::connect(&admin_url).await?;
                    sqlx::query(&format!("drop database if exists \"{name}\" with (force)"))
                        .execute(&admin)
                        .await?;
                    admin.close().await;
                    Ok::<_, sqlx::Error>(())
                })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("the test database {} was not dropped: {e}", self.name);
        }
    }
}

/// Drops the databases of runs more than an hour old.
async fn drop_stale_databases(admin: &sqlx::PgPool) {
    let cutoff = chrono::Utc::now().timestamp() - 3600;
    let names: Vec<String> =
        sqlx::query_scalar("select datname::text from pg_database where datname like $1")
            .bind(format!("{PREFIX}%"))
            .fetch_all(admin)
            .await
            .unwrap_or_default();
    for name in names {
        let started = name
            .trim_start_matches(PREFIX)
            .split('_')
            .next()
            .and_then(|t| t.parse::<i64>().ok());
        if started.is_some_and(|t| t < cutoff) {
            let _ = sqlx::query(&format!("drop database if exists \"{name}\" with (force)"))
                .execute(admin)
                .await;
        }
    }
}

/// One `tidings serve` process, stopped when dropped; its log lines are kept for failure messages.
pub(crate) struct Instance {
    _child: KillOnDrop,
    pub(crate) url: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Instance {
    /// Starts `tidings serve` on `database_url` and a free port, and waits until it serves.
    pub(crate) async fn start(
        name: &str,
        database_url: &str,
        encryption_key: &str,
        api_key: &str,
    ) -> Self {
        Self::start_with(name, database_url, encryption_key, api_key, &[]).await
    }

    /// [`Instance::start`] with more variables set.
    pub(crate) async fn start_with(
        name: &str,
        database_url: &str,
        encryption_key: &str,
        api_key: &str,
        vars: &[(&str, &str)],
    ) -> Self {
        let mut child = KillOnDrop(
            Command::new(env!("CARGO_BIN_EXE_tidings"))
                .envs(vars.iter().copied())
                .arg("serve")
                .env("DATABASE_URL", database_url)
                .env("TIDINGS_LISTEN", "127.0.0.1:0")
                .env("TIDINGS_ENCRYPTION_KEY", encryption_key)
                .env("TIDINGS_API_KEY", api_key)
                .env("TIDINGS_COMPAT", "novu")
                .env("TIDINGS_WORKERS", "2")
                .env("RUST_LOG", "info,tidings::request=warn")
                .env_remove("TIDINGS_LOG")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start tidings serve"),
        );
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let stderr = child.0.stderr.take().unwrap();
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                lines.lock().unwrap().push(line);
            }
        });
        for _ in 0..600 {
            let serving = log
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains("tidings is serving"))
                .cloned();
            if let Some(line) = serving {
                let addr = line
                    .split("listen=")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .expect("the listen address");
                return Self {
                    _child: child,
                    url: format!("http://{addr}"),
                    log,
                };
            }
            if let Ok(Some(status)) = child.0.try_wait() {
                panic!(
                    "instance {name} exited with {status}:\n{}",
                    log.lock().unwrap().join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "instance {name} does not serve after 60 s:\n{}",
            log.lock().unwrap().join("\n")
        );
    }

    pub(crate) fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

/// A socket on one instance hears what the API does on the other.
async fn two_instances() {
    // Dropped last: the instances (declared after) stop first.
    let db = FreshDatabase::create(&support::postgres_url()).await;
    let encryption_key = Cipher::generate_base64();
    let api_key = format!("sk_inst_{}", tidings::domain::new_object_id());
    // Both at once on the empty database: they migrate and bootstrap one after the other (an advisory lock
    // each), so they end with one organization and one "Development" environment holding the key.
    let (a, b) = tokio::join!(
        Instance::start("A", &db.url, &encryption_key, &api_key),
        Instance::start("B", &db.url, &encryption_key, &api_key)
    );
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let counts: (i64, i64, i64) = sqlx::query_as(
        "select (select count(*) from organizations), (select count(*) from environments), \
         (select count(*) from api_keys)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(counts, (1, 1, 1), "organizations, environments, keys");

    tokio::task::spawn_blocking(support::sdk::node_modules)
        .await
        .unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk-ts/inbox_instances.mjs");
    let (url_a, url_b, key) = (a.url.clone(), b.url.clone(), api_key.clone());
    let run = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .env("TIDINGS_URL", url_b)
            .env("TIDINGS_KEY", key)
            .env("TIDINGS_URL_A", url_a)
            .output()
            .expect("run node")
    });
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("inbox_instances.mjs ends within 3 minutes")
        .unwrap();
    assert!(
        out.status.success(),
        "tests/sdk-ts/inbox_instances.mjs failed:\n--- stdout\n{}\n--- stderr\n{}\n--- instance A\n{}\n--- instance B\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        a.log(),
        b.log()
    );
}
crate::postgres_test!(postgres, two_instances());
