//! How Tidings reads a SQLite file: one [`SqliteReader`] per store, with read-only rusqlite connections
//! (both crates link the same bundled SQLite, see `.cargo/config.toml`). Writes go through sqlx's single
//! writer connection; a thread of its own copies the write-ahead log into the database ([`checkpoint`]).
//!
//! # Threading model
//!
//! A read says what bounds its cost ([`Cost`]), and that picks the thread it runs on:
//!
//! - [`Cost::Point`]: rows found by key — one row by a unique key, or the rows of at most a page of keys (a
//!   page's jobs, its subscribers). These run at once on the runtime worker that asked, with an idle
//!   connection of the reader's pool ([`SqliteReader::point`]): a hand-off to another thread would cost more
//!   than the read. The hottest of them, a subscriber by id, joins the other point reads queued at that
//!   moment in one read transaction instead ([`SqliteReader::batched`], see [`batched`]).
//! - [`Cost::Scan`]: everything whose cost depends on the data — filtered pages, capped counts (up to 50,001
//!   rows), searches. A scan starts inline too, with an idle connection of the reader's pool, but SQLite
//!   interrupts it once it has run [`INLINE_BUDGET`] (a progress handler); then it runs again from the start
//!   on one of tokio's blocking threads, at most `max_scans` at a time. Most scans (a page served by an
//!   index) end within the budget and pay no hand-off; a slow one holds a runtime worker for the budget at
//!   most, so the health check and the point reads of other requests go on beside it (`tests/it/reads.rs`).
//!
//! Batched reads and scans take closures that own what they need (`'static`): a batch may run on another
//! request's task, and a scan outlives a request that gives up waiting. A scan's closure can run twice, so it
//! is `Fn` and starts from nothing each time (it returns rows rather than filling a visitor).
//!
//! Every read sees the latest committed data: WAL mode lets the readers run beside the writer, and each read
//! (or batch) takes its snapshot after it was asked for. The pool keeps the connections it opened, at most
//! one per runtime worker plus `max_scans`; the batch of by-id reads keeps one of its own.

mod batched;
pub(crate) mod checkpoint;
pub(crate) mod rows;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

/// Creates the data folder `dir` (and missing parents) readable by the owner only (0700). A folder that
/// exists is left as it is: it is the operator's.
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() || dir.exists() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Prepares a database file before SQLite opens it: its folder created 0700 when missing, and the file
/// created empty with mode 0600 (SQLite gives the `-wal` and `-shm` files it creates the database file's
/// mode). An existing file keeps its mode; one that others can read is reported.
pub(crate) fn prepare_database_file(file: &Path) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        create_private_dir(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(file) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(file)?.permissions().mode();
                if mode & 0o077 != 0 {
                    tracing::warn!(
                        file = %file.display(),
                        mode = format!("{:o}", mode & 0o777),
                        "the database file can be read by other users: chmod 600 it (and its -wal and -shm files)"
                    );
                }
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

use crate::error::{Error, Result};

/// What bounds a read's cost; it decides where the read runs (see the module's threading model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cost {
    /// Rows found by key: one row by a unique key, or the rows of at most a page of keys.
    Point,
    /// Anything else: filtered pages, counts, searches.
    Scan,
}

/// The reads of one SQLite file (see the module's threading model).
pub(crate) struct SqliteReader {
    path: Arc<Path>,
    points: batched::BatchReader,
    /// Connections not in use; a point read or a scan takes one (or opens one) and puts it back.
    idle: Arc<Mutex<Vec<Connection>>>,
    /// Bounds the scans running on blocking threads at once, and so the connections they hold.
    scans: Arc<Semaphore>,
    /// Set by [`SqliteReader::close`]: reads fail from then on.
    closed: AtomicBool,
}

impl std::fmt::Debug for SqliteReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteReader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteReader {
    /// The reader of the database file at `path`; connections open on first use.
    pub(crate) fn new(path: &Path, max_scans: usize) -> Self {
        Self {
            path: Arc::from(path),
            points: batched::BatchReader::new(path),
            idle: Arc::default(),
            scans: Arc::new(Semaphore::new(max_scans.max(1))),
            closed: AtomicBool::new(false),
        }
    }

    /// Refuses every read from now on (the store is shutting down); idle connections are closed.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.scans.close();
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Runs a point read on this thread, now, with an idle connection.
    pub(crate) fn point<T>(&self, read: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.check_open()?;
        let conn = self.take()?;
        let out = read(&conn);
        self.give_back(conn, out.is_ok());
        out
    }

    /// Runs a point read in the batch of point reads queued at this moment (see [`batched`]): for the
    /// hottest read, where many requests ask at once.
    pub(crate) async fn batched<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.check_open()?;
        self.points.run(read).await
    }

    /// Runs a scan (see the module's threading model): inline until [`INLINE_BUDGET`] is spent, then again
    /// on a blocking thread.
    pub(crate) async fn scan<T: Send + 'static>(
        &self,
        read: impl Fn(&Connection) -> Result<T> + Send + Sync + 'static,
    ) -> Result<T> {
        self.check_open()?;
        let conn = self.take()?;
        let deadline = Instant::now() + INLINE_BUDGET;
        let fired = Arc::new(AtomicBool::new(false));
        let flag = fired.clone();
        conn.progress_handler(
            PROGRESS_STEPS,
            Some(move || {
                let over = Instant::now() > deadline;
                flag.store(over, Ordering::Relaxed);
                over
            }),
        );
        let inline = read(&conn);
        conn.progress_handler(PROGRESS_STEPS, None::<fn() -> bool>);
        if inline.is_ok() || !fired.load(Ordering::Relaxed) {
            self.give_back(conn, inline.is_ok());
            return inline;
        }
        // Too long for a runtime worker: again from the start, where it may take its time.
        let permit = self
            .scans
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Internal(anyhow::anyhow!("the reader is closed")))?;
        let idle = self.idle.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let out = read(&conn);
            give_back(&idle, conn, out.is_ok());
            out
        })
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("a read stopped: {e}")))?
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Internal(anyhow::anyhow!("the store is closed")));
        }
        Ok(())
    }

    /// An idle connection of the pool, or a new one.
    fn take(&self) -> Result<Connection> {
        let taken = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match taken {
            Some(c) => Ok(c),
            None => Ok(open(&self.path).map_err(anyhow::Error::from)?),
        }
    }

    fn give_back(&self, conn: Connection, healthy: bool) {
        give_back(&self.idle, conn, healthy);
    }
}

/// Returns a connection to the pool, unless its read failed (e.g. the file was replaced): then it is dropped
/// and the next read opens another.
fn give_back(idle: &Mutex<Vec<Connection>>, conn: Connection, healthy: bool) {
    if healthy {
        idle.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(conn);
    }
}

/// How long a scan may run on a runtime worker before it moves to a blocking thread.
pub(crate) const INLINE_BUDGET: Duration = Duration::from_millis(1);

/// SQLite virtual-machine steps between two looks at the clock (about a few microseconds of work).
const PROGRESS_STEPS: i32 = 1000;

/// A read-only connection as the readers keep them.
pub(crate) fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
    Ok(conn)
}

/// Page cache of each reader connection, KiB: SQLite's default. 16 MB cut the pages a by-id lookup over a
/// million subscribers reads from the OS from 2.7 to 1.8, but the bigger cache's own lookups ate the saving
/// (docs/decisions.md).
const READER_CACHE_KIB: i64 = 2000;

/// A small database in WAL mode for the readers' tests: table `t` with one row.
#[cfg(test)]
pub(crate) mod fixture {
    use super::*;

    pub fn database() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "pragma journal_mode = wal; create table t (n integer); insert into t values (1);",
        )
        .unwrap();
        (dir, path)
    }

    /// The rows of `t`.
    pub fn count(c: &Connection) -> Result<i64> {
        c.query_row("select count(*) from t", [], |r| r.get(0))
            .map_err(|e| Error::Internal(e.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{count, database};
    use super::*;

    /// A scan that ends within the budget runs inline, on one reused connection, and sees what was
    /// committed before it was asked for.
    #[tokio::test]
    async fn short_scans_run_inline_and_reuse_their_connection() {
        let (_dir, path) = database();
        let reader = SqliteReader::new(&path, 2);
        let writer = Connection::open(&path).unwrap();
        for n in 1..=5 {
            if n > 1 {
                writer.execute("insert into t values (?1)", [n]).unwrap();
            }
            assert_eq!(reader.scan(count).await.unwrap(), n);
        }
        let here = std::thread::current().id();
        let there = reader
            .scan(|_| Ok(std::thread::current().id()))
            .await
            .unwrap();
        assert_eq!(here, there, "a short scan runs on the calling thread");
        assert_eq!(
            reader.idle.lock().unwrap().len(),
            1,
            "one connection served them all"
        );
        assert_eq!(reader.point(count).unwrap(), 5);
        assert_eq!(reader.batched(count).await.unwrap(), 5);
    }

    /// A scan that outlasts the budget is interrupted and runs again, to its end, on another thread.
    #[tokio::test]
    async fn a_long_scan_moves_to_a_blocking_thread() {
        let (_dir, path) = database();
        let reader = SqliteReader::new(&path, 2);
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        let (sum, thread) = reader
            .scan(move |c| {
                counted.fetch_add(1, Ordering::Relaxed);
                let sum: i64 = c
                    .query_row(
                        "with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000000)
                         select sum(i) from n",
                        [],
                        |r| r.get(0),
                    )
                    .map_err(|e| Error::Internal(e.into()))?;
                Ok((sum, std::thread::current().id()))
            })
            .await
            .unwrap();
        assert_eq!(sum, 2_000_000 * 2_000_001 / 2);
        assert_eq!(
            runs.load(Ordering::Relaxed),
            2,
            "interrupted once, then run to its end"
        );
        assert_ne!(thread, std::thread::current().id());
        assert_eq!(
            reader.idle.lock().unwrap().len(),
            1,
            "the connection came back"
        );
    }

    #[tokio::test]
    async fn a_failed_scan_drops_its_connection_and_the_next_one_opens_another() {
        let (_dir, path) = database();
        let reader = SqliteReader::new(&path, 2);
        let bad = reader
            .scan(|c| {
                c.query_row("select nope from t", [], |r| r.get::<_, i64>(0))
                    .map_err(|e| Error::Internal(e.into()))
            })
            .await;
        assert!(bad.is_err());
        assert!(reader.idle.lock().unwrap().is_empty());
        assert_eq!(reader.scan(count).await.unwrap(), 1);
    }
}
