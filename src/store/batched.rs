//! SQLite: point reads served by a thread of their own, in batches. A request queues its read and awaits the
//! answer; the thread takes everything queued when it wakes and runs it in one read transaction. Compared with
//! reading inline on the runtime's workers (see `fast`), a batch pays the WAL read lock, the file-size check
//! and the shared-memory mutex once instead of once per read, two workers no longer contend for that mutex,
//! and the thread keeps SQLite's code and the upper B-tree pages in its CPU caches (docs/decisions.md).
//!
//! One transaction per batch keeps reads fresh: a read joins a batch only if it was queued before the batch's
//! snapshot was taken, so everything committed before its request arrived (in particular every write whose
//! answer the client had already received) is visible to it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rusqlite::Connection;

use crate::error::{Error, Result};

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// The queue of one database's read thread; the thread stops when the last clone of the store drops this.
#[derive(Debug)]
pub(crate) struct BatchReader {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    stopped: bool,
    /// The thread waits on the condition variable (so the next job has to wake it).
    asleep: bool,
}

/// How many times the thread, finding no reads, yields the CPU and looks again before it goes to sleep.
/// Under load the next reads arrive within a few yields, and a thread found awake spares the cost of waking
/// it, which on a busy machine is more than a read's own; an idle thread is asleep after these few yields.
const IDLE_YIELDS: u32 = 64;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A job never runs under this lock, so a poisoned lock still holds a consistent queue.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl BatchReader {
    /// Starts the read thread of the database file at `path`.
    pub(crate) fn start(path: &Path) -> Result<Self> {
        let shared = Arc::new(Shared::default());
        let thread_shared = shared.clone();
        let path = path.to_path_buf();
        std::thread::Builder::new()
            .name("tidings-reader".into())
            .spawn(move || serve(&path, &thread_shared))
            .map_err(|e| {
                Error::Internal(anyhow::anyhow!("could not start the read thread: {e}"))
            })?;
        Ok(Self { shared })
    }

    /// Runs `read` on the read thread, inside the transaction of the batch it joins.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |c| {
            let _ = tx.send(read(c));
        });
        {
            let mut queue = self.shared.lock();
            queue.jobs.push(job);
            // Only a sleeping thread needs waking, and only once.
            if queue.asleep {
                queue.asleep = false;
                self.shared.wake.notify_one();
            }
        }
        rx.await.unwrap_or_else(|_| {
            Err(Error::Internal(anyhow::anyhow!(
                "the read thread dropped a read (see the log)"
            )))
        })
    }
}

impl Drop for BatchReader {
    fn drop(&mut self) {
        let mut queue = self.shared.lock();
        queue.stopped = true;
        queue.asleep = false;
        self.shared.wake.notify_one();
    }
}

fn serve(path: &Path, shared: &Shared) {
    let mut conn: Option<Connection> = None;
    let mut batch: Vec<Job> = Vec::new();
    loop {
        let mut yields = 0;
        loop {
            let mut queue = shared.lock();
            if !queue.jobs.is_empty() {
                std::mem::swap(&mut batch, &mut queue.jobs);
                break;
            }
            if queue.stopped {
                return;
            }
            if yields < IDLE_YIELDS {
                drop(queue);
                yields += 1;
                std::thread::yield_now();
                continue;
            }
            queue.asleep = true;
            while queue.asleep && !queue.stopped {
                queue = shared.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
            }
            queue.asleep = false;
            yields = 0;
        }
        if conn.is_none() {
            match super::fast::open(path) {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    // Dropping the jobs answers each of them with an error; the next batch tries again.
                    tracing::error!(error = %e, "the read thread could not open the database");
                    batch.clear();
                    continue;
                }
            }
        }
        let c = conn.as_ref().expect("opened above");
        // `begin` is deferred: the snapshot is taken by the batch's first read, after the queue was taken.
        let in_transaction = c.execute_batch("begin").is_ok();
        for job in batch.drain(..) {
            if catch_unwind(AssertUnwindSafe(|| job(c))).is_err() {
                tracing::error!("a read panicked on the read thread");
            }
        }
        if in_transaction && c.execute_batch("commit").is_err() {
            // A connection that cannot end its transaction is replaced rather than left holding a snapshot.
            conn = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn database() -> (tempfile::TempDir, PathBuf) {
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

    /// A read queued after a commit sees it (the batch's snapshot is taken after the queue was taken),
    /// and concurrent reads all get their own answers.
    #[tokio::test]
    async fn reads_see_what_was_committed_before_they_were_queued() {
        let (_dir, path) = database();
        let reader = Arc::new(BatchReader::start(&path).unwrap());
        let writer = Connection::open(&path).unwrap();
        assert_eq!(reader.run(count).await.unwrap(), 1);
        for n in 2..=20 {
            writer.execute("insert into t values (?1)", [n]).unwrap();
            let reads: Vec<_> = (0..8)
                .map(|_| {
                    let reader = reader.clone();
                    tokio::spawn(async move { reader.run(count).await })
                })
                .collect();
            for read in reads {
                assert_eq!(read.await.unwrap().unwrap(), n);
            }
        }
    }

    #[tokio::test]
    async fn a_failing_or_panicking_read_leaves_the_others_and_the_thread_alone() {
        let (_dir, path) = database();
        let reader = BatchReader::start(&path).unwrap();
        let bad = reader.run(|c| {
            c.query_row("select nope from t", [], |r| r.get::<_, i64>(0))
                .map_err(|e| Error::Internal(e.into()))
        });
        let panics = reader.run(|_| -> Result<i64> { panic!("a read that panics") });
        let good = reader.run(count);
        let (bad, panics, good) = tokio::join!(bad, panics, good);
        assert!(bad.is_err());
        assert!(panics.is_err());
        assert_eq!(good.unwrap(), 1);
        assert_eq!(reader.run(count).await.unwrap(), 1);
    }
}
