//! How Tidings reads a SQLite file: one [`SqliteReader`] per store, with read-only rusqlite connections
//! (both crates link the same bundled SQLite, see `.cargo/config.toml`). Writes go through sqlx's single
//! writer connection; a thread of its own copies the write-ahead log into the database ([`checkpoint`]).
//!
//! # Threading model
//!
//! A read says what bounds its cost ([`Cost`]), and that picks the thread it runs on:
//!
//! - [`Cost::Point`]: rows found by key — one row by a unique key, or the rows of at most a page of keys (a
//!   page's jobs, its subscribers). These run inline on the runtime worker that asked, combined with the
//!   other point reads queued at that moment into one read transaction ([`batched`]). A hand-off to another
//!   thread would cost more than the read.
//! - [`Cost::Scan`]: everything whose cost depends on the data — filtered pages, capped counts (up to 50,001
//!   rows), searches. These run on tokio's blocking threads, at most `max_scans` at a time, each with an idle
//!   connection of the reader's pool, so a slow scan never holds a runtime worker: the health check and the
//!   point reads of other requests go on beside it (`tests/it/reads.rs`).
//!
//! Reads take closures that own what they need (`'static`): a batch may run on another request's task, and a
//! scan outlives a request that gives up waiting. Every read sees the latest committed data: WAL mode lets
//! the readers run beside the writer, and each batch or scan takes its snapshot after it was asked for.

mod batched;
pub(crate) mod checkpoint;
pub(crate) mod rows;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

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
    /// Connections of the scans not in use; a scan takes one (or opens one) and puts it back.
    idle: Arc<Mutex<Vec<Connection>>>,
    /// Bounds the scans running at once, and so the connections the scans open.
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

    /// Runs `read` where its cost says.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        cost: Cost,
        read: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Internal(anyhow::anyhow!("the store is closed")));
        }
        match cost {
            Cost::Point => self.points.run(read).await,
            Cost::Scan => self.scan(read).await,
        }
    }

    /// Runs `read` on a blocking thread with an idle connection.
    async fn scan<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let permit = self
            .scans
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Internal(anyhow::anyhow!("the reader is closed")))?;
        let (idle, path) = (self.idle.clone(), self.path.clone());
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let taken = idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
            let conn = match taken {
                Some(c) => c,
                None => open(&path).map_err(anyhow::Error::from)?,
            };
            let out = read(&conn);
            // A connection whose read failed is dropped (e.g. the file was replaced); the next scan opens one.
            if out.is_ok() {
                idle.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(conn);
            }
            out
        })
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("a read stopped: {e}")))?
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn database() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "pragma journal_mode = wal; create table t (n integer); insert into t values (1);",
        )
        .unwrap();
        (dir, path)
    }

    fn count(c: &Connection) -> Result<i64> {
        c.query_row("select count(*) from t", [], |r| r.get(0))
            .map_err(|e| Error::Internal(e.into()))
    }

    /// Scans run off the runtime's workers, reuse their connections, and see what was committed before
    /// they were asked for.
    #[tokio::test]
    async fn scans_run_on_blocking_threads_and_reuse_connections() {
        let (_dir, path) = database();
        let reader = SqliteReader::new(&path, 2);
        let writer = Connection::open(&path).unwrap();
        for n in 1..=5 {
            if n > 1 {
                writer.execute("insert into t values (?1)", [n]).unwrap();
            }
            assert_eq!(reader.run(Cost::Scan, count).await.unwrap(), n);
        }
        let here = std::thread::current().id();
        let there = reader
            .run(Cost::Scan, |_| Ok(std::thread::current().id()))
            .await
            .unwrap();
        assert_ne!(here, there, "a scan runs on another thread");
        assert_eq!(
            reader.idle.lock().unwrap().len(),
            1,
            "one connection served them all"
        );
        assert_eq!(reader.run(Cost::Point, count).await.unwrap(), 5);
    }

    #[tokio::test]
    async fn a_failed_scan_drops_its_connection_and_the_next_one_opens_another() {
        let (_dir, path) = database();
        let reader = SqliteReader::new(&path, 2);
        let bad = reader
            .run(Cost::Scan, |c| {
                c.query_row("select nope from t", [], |r| r.get::<_, i64>(0))
                    .map_err(|e| Error::Internal(e.into()))
            })
            .await;
        assert!(bad.is_err());
        assert!(reader.idle.lock().unwrap().is_empty());
        assert_eq!(reader.run(Cost::Scan, count).await.unwrap(), 1);
    }
}
