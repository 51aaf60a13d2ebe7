//! The only place with SQL. A concrete [`Store`] over SQLite or PostgreSQL: each query is written once in a
//! portable subset (lowercase SQL, `$n` placeholders in order, `returning`, `on conflict`, epoch-ms BIGINT
//! times, JSON as TEXT/JSONB) and run on either pool through [`on_db!`]. Where the dialects must differ the
//! code says so in an explicit two-arm `match`.

pub mod channels;
pub mod contexts;
mod digests;
pub mod environment_erasures;
pub mod erasures;
pub mod fanouts;
pub mod idempotency;
pub mod inbox_events;
mod insert;
pub mod integrations;
pub mod jobs;
pub mod messages;
pub mod notifications;
pub mod outbox;
pub mod page;
pub mod preferences;
pub mod rate_limits;
mod row;
mod sealing;
pub mod search;
mod seed;
pub mod sql;
pub(crate) mod sqlite;
pub mod subscriber_search;
pub mod subscribers;
pub mod tenants;
pub mod topics;
pub mod triggers;
pub mod webhook_messages;
pub mod webhooks;
pub mod workflows;

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::crypto::Cipher;
use crate::error::{Error, Result};
pub(crate) use sqlite::rows::ReadRow;
pub(crate) use sqlite::Cost;

/// Runs one expression against whichever pool `$db` holds; the expression compiles once per driver.
macro_rules! on_db {
    ($db:expr, $p:ident => $e:expr) => {
        match $db {
            $crate::store::Db::Sqlite($p) => $e,
            $crate::store::Db::Postgres($p) => $e,
        }
    };
}
pub(crate) use on_db;

/// Embeds the migrations of both databases, which carry the same file names, in the binary.
macro_rules! embed_migrations {
    ($($file:literal),* $(,)?) => {
        const SQLITE_MIGRATIONS: &[(&str, &str)] =
            &[$(($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite/", $file)))),*];
        const POSTGRES_MIGRATIONS: &[(&str, &str)] =
            &[$(($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres/", $file)))),*];
    };
}

// A new migration goes into both folders and this list; a unit test compares the list with the folders.
embed_migrations!(
    "0001_init.sql",
    "0002_channels.sql",
    "0003_workflows.sql",
    "0004_engine.sql",
    "0005_search_vocab.sql",
    "0006_delivery.sql",
    "0007_write_path.sql",
    "0008_covering_endpoints.sql",
    "0009_search_grams.sql",
    "0010_digest_index.sql",
    "20261126032135_workflow_list.sql",
    "20261126074500_message_archive.sql",
    "20261126121948_sealed_subscriber_channels.sql",
    "20261126122008_rate_limits.sql",
    "20261126160000_subscriber_preferences.sql",
    "20261126170000_topics.sql",
    "20261126190000_fanouts.sql",
    "20261127070000_environment_identifier.sql",
    "20261127090000_inbox_messages.sql",
    "20261127100000_snoozed_messages.sql",
    "20261128235500_subscriber_erasure.sql",
    "20261129000000_one_open_digest.sql",
    "20261129001100_presence_heartbeat.sql",
    "20261129021000_inbox_sessions.sql",
    "20261129022000_sealed_secrets.sql",
    "20261129024000_topic_self_subscription.sql",
    "20261129030000_environment_erasure.sql",
    "20261129033000_context_list.sql",
    "20261129130000_webhook_endpoints.sql",
    "20261129160000_webhook_messages.sql",
);

static SQLITE_MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| migrator(SQLITE_MIGRATIONS));
static POSTGRES_MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| migrator(POSTGRES_MIGRATIONS));

/// A migrator over embedded `<version>_<description>.sql` files. Version, description, checksum (SHA-384 of the
/// text) and the `-- no-transaction` marker are derived as sqlx's `migrate!` derives them, so a database migrated
/// by an earlier build keeps matching its recorded checksums.
fn migrator(files: &'static [(&'static str, &'static str)]) -> Migrator {
    let migrations = files
        .iter()
        .map(|&(file, sql)| {
            let (version, rest) = file
                .split_once('_')
                .expect("a migration file is named <version>_<description>.sql");
            let version = version
                .parse()
                .expect("a migration file name starts with its version");
            let description = rest.trim_end_matches(".sql").replace('_', " ");
            let no_tx = sql.starts_with("-- no-transaction");
            Migration::new(
                version,
                Cow::Owned(description),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                no_tx,
            )
        })
        .collect();
    Migrator {
        migrations: Cow::Owned(migrations),
        ignore_missing: false,
        locking: true,
        no_tx: false,
    }
}

#[derive(Debug, Clone)]
pub enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// How to open the database.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub url: String,
    /// PostgreSQL only: a schema to create and use (tests give each run its own).
    pub pg_schema: Option<String>,
    pub max_connections: u32,
}

impl StoreOptions {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            pg_schema: None,
            max_connections: 16,
        }
    }
}

/// Handle to the database; cheap to clone. It holds connections and what is read through them (caches of
/// rows and statistics); the work that runs beside requests — the trigger writer, the hand-off to workers,
/// refreshes — belongs to the engine and the runtime (`engine::TriggerWriter`, `background`).
#[derive(Debug, Clone)]
pub struct Store {
    /// Reads: the SQLite file's reader (see `sqlite`), or the PostgreSQL pool.
    read: Reads,
    /// Writes. On SQLite a single connection, so writers queue in-process instead of fighting for the lock.
    write: Db,
    /// Shared: every request clones the store, so clones are reference counts, not copies.
    cipher: std::sync::Arc<Cipher>,
    /// Workflow definitions read by triggers and workers (see `workflows`).
    workflow_cache: std::sync::Arc<workflows::WorkflowCache>,
    /// SQLite only: trigram frequencies that steer substring search (see `search`).
    search_stats: std::sync::Arc<search::TrigramStats>,
    /// Changes of in-app messages, heard by every process (see `inbox_events`).
    inbox_events: inbox_events::InboxEvents,
    /// This process's webhook sender, as the outbox reaches it (`outbox::SenderLink`).
    webhook_sender: std::sync::Arc<outbox::SenderLink>,
    /// SQLite only: the thread that checkpoints the write-ahead log, stopped with the last clone.
    _checkpointer: Option<std::sync::Arc<sqlite::checkpoint::Checkpointer>>,
}

#[derive(Debug, Clone)]
enum Reads {
    Sqlite(std::sync::Arc<sqlite::SqliteReader>),
    Postgres(PgPool),
}

impl Store {
    pub async fn open(opts: &StoreOptions, cipher: Cipher) -> Result<Self> {
        match Self::dialect_of(&opts.url)? {
            Dialect::Sqlite => {
                let connect = sqlite_options(&opts.url)?;
                let file = connect.get_filename().to_path_buf();
                if file.as_os_str().is_empty() || file.as_os_str() == ":memory:" {
                    return Err(Error::Internal(anyhow::anyhow!(
                        "SQLite needs a database file (sqlite://path/to/file.db): the readers open their \
                         own connections, which an in-memory database does not share"
                    )));
                }
                let write = SqlitePoolOptions::new()
                    .test_before_acquire(false)
                    .max_connections(1)
                    .min_connections(1)
                    .connect_with(
                        connect
                            .pragma("cache_size", WRITER_CACHE_KIB)
                            .pragma("wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES),
                    )
                    .await?;
                // Scans beyond a few per core only add memory (each connection has its own page cache).
                let max_scans = opts.max_connections.clamp(2, 8) as usize;
                Ok(Self {
                    read: Reads::Sqlite(std::sync::Arc::new(sqlite::SqliteReader::new(
                        &file, max_scans,
                    ))),
                    write: Db::Sqlite(write),
                    cipher: std::sync::Arc::new(cipher),
                    _checkpointer: sqlite::checkpoint::start(&file).map(std::sync::Arc::new),
                    search_stats: Default::default(),
                    workflow_cache: Default::default(),
                    inbox_events: inbox_events::InboxEvents::local(),
                    webhook_sender: Default::default(),
                })
            }
            Dialect::Postgres => {
                let mut connect = PgConnectOptions::from_str(&opts.url)
                    .map_err(|e| anyhow::anyhow!("invalid PostgreSQL URL: {e}"))?
                    .application_name("tidings")
                    .statement_cache_capacity(PG_STATEMENT_CACHE);
                if let Some(schema) = &opts.pg_schema {
                    let admin = PgPoolOptions::new()
                        .max_connections(1)
                        .connect_with(connect.clone())
                        .await?;
                    sqlx::query(&format!("create schema if not exists \"{schema}\""))
                        .execute(&admin)
                        .await?;
                    admin.close().await;
                    connect = connect.options([("search_path", format!("\"{schema}\",public"))]);
                }
                let pool = PgPoolOptions::new()
                    .max_connections(opts.max_connections)
                    .min_connections(0)
                    .acquire_timeout(Duration::from_secs(10))
                    .idle_timeout(Duration::from_secs(300))
                    .connect_with(connect)
                    .await?;
                // One channel per schema: tests give each run a schema of the same database.
                let channel = match &opts.pg_schema {
                    Some(schema) => format!("tidings_inbox_{schema}"),
                    None => "tidings_inbox".to_owned(),
                };
                Ok(Self {
                    inbox_events: inbox_events::InboxEvents::postgres(pool.clone(), channel),
                    read: Reads::Postgres(pool.clone()),
                    write: Db::Postgres(pool),
                    cipher: std::sync::Arc::new(cipher),
                    search_stats: Default::default(),
                    workflow_cache: Default::default(),
                    webhook_sender: Default::default(),
                    _checkpointer: None,
                })
            }
        }
    }

    pub fn dialect_of(url: &str) -> Result<Dialect> {
        if url.starts_with("sqlite:") {
            Ok(Dialect::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Dialect::Postgres)
        } else {
            Err(Error::Internal(anyhow::anyhow!(
                "unsupported database URL (use sqlite://path or postgres://…): {}",
                crate::config::redact_url(url)
            )))
        }
    }

    pub fn dialect(&self) -> Dialect {
        match self.write {
            Db::Sqlite(_) => Dialect::Sqlite,
            Db::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The announcements of changes to in-app messages (see `inbox_events`).
    pub fn inbox_events(&self) -> &inbox_events::InboxEvents {
        &self.inbox_events
    }

    /// Notified when this process recorded webhook messages pending; other processes' are found by
    /// polling.
    pub fn webhooks_due(&self) -> &tokio::sync::Notify {
        &self.webhook_sender.due
    }

    /// This process's webhook sender, if one runs: the outbox records the messages it has room for
    /// already leased to it (`outbox::Sender`).
    pub fn webhook_sender(&self) -> Option<std::sync::Arc<dyn outbox::Sender>> {
        self.webhook_sender.current()
    }

    /// Makes `sender` this process's webhook sender (`None`: no sender any more, if `sender` was it).
    pub fn set_webhook_sender(&self, sender: &std::sync::Arc<dyn outbox::Sender>, on: bool) {
        self.webhook_sender.set(sender, on);
    }

    pub fn cipher(&self) -> &Cipher {
        &self.cipher
    }

    /// The SQLite file's reader, for the read that uses it directly (a subscriber by id, batched);
    /// `None` on PostgreSQL.
    pub(crate) fn sqlite_reader(&self) -> Option<&sqlite::SqliteReader> {
        match &self.read {
            Reads::Sqlite(reader) => Some(reader),
            Reads::Postgres(_) => None,
        }
    }

    pub(crate) fn w(&self) -> &Db {
        &self.write
    }

    /// Applies pending migrations. On PostgreSQL sqlx holds an advisory lock, so concurrent starts are safe.
    pub async fn migrate(&self) -> Result<()> {
        match &self.write {
            Db::Sqlite(p) => SQLITE_MIGRATOR.run(p).await?,
            Db::Postgres(p) => POSTGRES_MIGRATOR.run(p).await?,
        }
        // A SQL migration cannot encrypt: subscribers' channels stored in clear are sealed here.
        let sealed = self.seal_subscriber_channels().await?;
        if sealed > 0 {
            tracing::info!(
                sealed,
                "sealed the channel credentials of subscribers stored in clear"
            );
        }
        let rewritten = self.seal_clear_rows().await?;
        if rewritten > 0 {
            tracing::info!(
                rewritten,
                "sealed the secrets of rows an earlier version stored in clear"
            );
        }
        // Nor decrypt: environments from before `inbox_hmac` take it from their in-app integration here.
        self.decide_older_inbox_hmac().await?;
        Ok(())
    }

    /// Runs `f` while holding PostgreSQL's advisory lock `key` (on a connection of its own), so that processes
    /// starting together run it one after the other; on SQLite (one process) it just runs `f`.
    pub async fn exclusively<T, F>(&self, key: i64, f: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let Db::Postgres(p) = &self.write else {
            return f.await;
        };
        let mut conn = p.acquire().await?;
        sqlx::query("select pg_advisory_lock($1)")
            .bind(key)
            .execute(&mut *conn)
            .await?;
        let out = f.await;
        sqlx::query("select pg_advisory_unlock($1)")
            .bind(key)
            .execute(&mut *conn)
            .await?;
        out
    }

    /// Cheap liveness probe used by the health check: a point read.
    pub async fn ping(&self) -> Result<()> {
        self.rows::<(i64,)>(Cost::Point, sql::Sql::new("select cast(1 as bigint)"))
            .await
            .map(drop)
    }

    /// SQLite: copies the write-ahead log into the database and truncates it. Readers look every page up in
    /// the log first, so a log left long by a bulk load (a seed, a big import) slows every read until the
    /// next checkpoint restarts it; start-up and the seed commands call this. A no-op on PostgreSQL.
    pub async fn checkpoint(&self) -> Result<()> {
        if let Db::Sqlite(p) = &self.write {
            sqlx::query("pragma wal_checkpoint(truncate)")
                .execute(p)
                .await?;
        }
        Ok(())
    }

    /// After a bulk load of `tables` (the seed commands): on SQLite [`Store::checkpoint`]; on PostgreSQL
    /// `analyze` of those tables, so that the planner sees their rows before autovacuum gets to them — a
    /// keyset read of a topic just filled, planned for the hundred rows an empty table suggests, sorted the
    /// whole topic for every batch. Only the tables filled: one analyzed while empty is planned as empty
    /// until the next analyze (the job queue's claim, as it grew, without autovacuum).
    pub async fn after_bulk_load(&self, tables: &[&'static str]) -> Result<()> {
        match &self.write {
            Db::Sqlite(_) => self.checkpoint().await,
            Db::Postgres(p) => {
                sqlx::query(&format!("analyze {}", tables.join(", ")))
                    .execute(p)
                    .await?;
                Ok(())
            }
        }
    }

    pub async fn close(&self) {
        if let Reads::Sqlite(reader) = &self.read {
            reader.close();
        }
        on_db!(&self.write, p => p.close().await);
    }
}

/// The SQLite writer's page cache, in KiB (negative: SQLite's unit). Every trigger and job completion
/// updates index pages spread over large tables (transaction ids, subscribers); a cache that keeps them
/// saves a read per page per transaction. Not larger: a b-tree split that reorders its new pages parks one
/// under a page number past the end of the file, and every commit after that scans the whole cache's hash
/// table to drop it — at 64 MB that scan was 15 % of the writer's time under a trigger load.
const WRITER_CACHE_KIB: &str = "-8192";

/// Prepared statements each PostgreSQL connection keeps (sqlx's default is 100). The engine's multi-row
/// inserts change their text with the number of rows (a group of 1 to ~40 triggers, a batch of attempts),
/// so a transaction's dozen statement shapes come in a few hundred texts; with 100 kept, most were parsed
/// and planned again on every use.
const PG_STATEMENT_CACHE: usize = 1024;

/// Pages the write-ahead log grows to before the writer itself checkpoints (SQLite's default is 1,000).
/// The checkpoint thread (see `checkpoint`) copies the log every 100 ms, so the writer's checkpoint only
/// copies the last few pages and lets the log restart from its beginning; it also bounds the log should the
/// thread fall behind. Readers look pages up in the log's hash index, which stays cheap at this size
/// (~80 MB).
const WAL_AUTOCHECKPOINT_PAGES: &str = "20000";

fn sqlite_options(url: &str) -> Result<SqliteConnectOptions> {
    let opts = SqliteConnectOptions::from_str(url)
        .map_err(|e| anyhow::anyhow!("invalid SQLite URL: {e}"))?;
    let path = opts.get_filename().to_path_buf();
    if !path.as_os_str().is_empty() && path.as_os_str() != ":memory:" {
        sqlite::prepare_database_file(&path)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    }
    Ok(opts
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true)
        .pragma("temp_store", "memory")
        .pragma("cache_size", "-4000"))
}

/// True when a database error is a unique-constraint violation (portable: sqlx classifies both drivers).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

impl Store {
    /// The rows of a select on the read side: on SQLite where `cost` says (see `sqlite`), from the pool on
    /// PostgreSQL.
    pub(crate) async fn rows<R: page::PortableRow + ReadRow + 'static>(
        &self,
        cost: Cost,
        q: sql::Sql,
    ) -> Result<Vec<R>> {
        match &self.read {
            Reads::Sqlite(reader) => {
                let cipher = self.cipher.clone();
                let read = move |c: &rusqlite::Connection| {
                    Ok(sqlite::rows::query(c, &q, &cipher).map_err(anyhow::Error::from)?)
                };
                match cost {
                    Cost::Point => reader.point(read),
                    Cost::Scan => reader.scan(read).await,
                }
            }
            Reads::Postgres(p) => Ok(sql::bind_args!(sqlx::query(&q.text), q.args)
                .try_map(|row| R::read_with(&row, &self.cipher))
                .fetch_all(p)
                .await?),
        }
    }

    /// The rows of a select on the write pool: the read of a read-modify-write cycle, which must see the
    /// latest write (on PostgreSQL the write pool is the read pool).
    pub(crate) async fn rows_for_update<R: page::PortableRow>(
        &self,
        q: sql::Sql,
    ) -> Result<Vec<R>> {
        let cipher = self.cipher();
        Ok(
            on_db!(self.w(), p => sql::bind_args!(sqlx::query(&q.text), q.args)
            .try_map(|row| R::read_with(&row, cipher))
            .fetch_all(p)
            .await)?,
        )
    }

    /// The first row of a select on the read side, if any.
    pub(crate) async fn row<R: page::PortableRow + ReadRow + 'static>(
        &self,
        cost: Cost,
        q: sql::Sql,
    ) -> Result<Option<R>> {
        Ok(self.rows(cost, q).await?.into_iter().next())
    }

    /// Hands each row of a point read (see `sqlite`) to `visit` as a borrowed view: on SQLite while the row
    /// is current (no owned copy of it is made), on PostgreSQL after the rows arrived. Scans return rows
    /// ([`Store::rows`]): on SQLite they may run twice.
    pub(crate) async fn visit_rows<R: ViewRow>(
        &self,
        q: sql::Sql,
        mut visit: impl for<'v> FnMut(R::View<'v>) + Send,
    ) -> Result<()> {
        match &self.read {
            Reads::Sqlite(reader) => reader.point(|c| {
                let read = sqlite::rows::visit(c, &q, |row| {
                    visit(R::view_inline(row)?);
                    Ok(())
                });
                Ok(read.map_err(anyhow::Error::from)?)
            }),
            Reads::Postgres(p) => {
                let rows: Vec<R> = sql::bind_args!(sqlx::query(&q.text), q.args)
                    .try_map(|row| R::read_with(&row, &self.cipher))
                    .fetch_all(p)
                    .await?;
                for r in &rows {
                    visit(r.view());
                }
                Ok(())
            }
        }
    }
}

/// A row type that lends a borrowed view of itself, and builds the same view straight from a SQLite row:
/// the read side hands views to a visitor instead of collecting owned rows (see [`Store::visit_rows`]).
/// Declared with `row::view!`, which writes both from the view's one list of columns.
pub(crate) trait ViewRow: page::PortableRow {
    type View<'a>;

    fn view(&self) -> Self::View<'_>;

    fn view_inline<'a>(r: &'a rusqlite::Row<'_>) -> rusqlite::Result<Self::View<'a>>;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{migrator, POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS};

    fn files_in(dir: &str) -> BTreeSet<String> {
        let dir = format!("{}/migrations/{dir}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_embedded_migrations_are_the_files_of_both_folders() {
        for (dir, embedded) in [
            ("sqlite", SQLITE_MIGRATIONS),
            ("postgres", POSTGRES_MIGRATIONS),
        ] {
            let names: BTreeSet<String> = embedded.iter().map(|(f, _)| f.to_string()).collect();
            assert_eq!(
                names,
                files_in(dir),
                "{dir}: add the new file to embed_migrations!"
            );
            assert!(
                embedded.windows(2).all(|w| w[0].0 < w[1].0),
                "{dir}: keep the list in order"
            );
        }
    }

    #[test]
    fn embedded_migrations_are_named_and_summed_as_sqlx_names_them() {
        let m = migrator(SQLITE_MIGRATIONS);
        let fifth = &m.migrations[4];
        assert_eq!(
            (fifth.version, fifth.description.as_ref()),
            (5, "search vocab")
        );
        assert!(!fifth.no_tx);
        // SHA-384 of the text, as recorded in `_sqlx_migrations.checksum` by every earlier build.
        use sha2::Digest;
        assert_eq!(
            fifth.checksum.as_ref(),
            sha2::Sha384::digest(SQLITE_MIGRATIONS[4].1.as_bytes()).as_slice()
        );
        assert_eq!(m.migrations.len(), SQLITE_MIGRATIONS.len());
    }
}

/// Query plans on the migrated SQLite schema, for tests that pin which index a statement reads.
#[cfg(test)]
pub(crate) mod plans {
    /// An in-memory SQLite database with every migration applied.
    pub fn migrated() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for (file, sql) in super::SQLITE_MIGRATIONS {
            conn.execute_batch(sql)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
        conn
    }

    /// The plan's steps, joined with "; ".
    pub fn plan(conn: &rusqlite::Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("explain query plan {sql}")).unwrap();
        // Unbound parameters are NULL: the plan does not depend on their values.
        let mut rows = stmt.raw_query();
        let mut steps = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            steps.push(row.get::<_, String>(3).unwrap());
        }
        steps.join("; ")
    }
}
