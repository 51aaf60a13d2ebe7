//! SQLite: point reads in batches, one read transaction per batch. A request queues its read, lets the other
//! requests that are ready on its worker queue theirs, and then runs everything queued unless another task is
//! already doing so (flat combining); the reads of the other tasks are answered through their channels.
//! Compared with reading inline, each request on its own, a batch pays the WAL read lock, the
//! file-size check and the shared-memory mutex once instead of once per read, and the two workers never contend
//! for that mutex. Compared with a read thread of its own (the previous design), no read waits for a thread to
//! be woken and no answer needs one woken (docs/decisions.md).
//!
//! One transaction per batch keeps reads fresh: a read joins a batch only if it was queued before the batch's
//! snapshot was taken, so everything committed before its request arrived (in particular every write whose
//! answer the client had already received) is visible to it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, TryLockError};

use rusqlite::Connection;

use crate::error::{Error, Result};

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// The read queue of one database file and the connection that serves it.
pub(crate) struct BatchReader {
    path: PathBuf,
    queue: Mutex<Vec<Job>>,
    /// Held by the task that is running batches (the combiner); `None` until the first batch opens it, and
    /// again after a failure, so that the next batch reopens it.
    conn: Mutex<Option<Connection>>,
}

impl std::fmt::Debug for BatchReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A poisoned lock is taken anyway: a job never panics while either lock is held (each runs under
/// `catch_unwind`), so the data behind it is consistent.
fn relock<T>(r: std::sync::LockResult<MutexGuard<'_, T>>) -> MutexGuard<'_, T> {
    r.unwrap_or_else(|p| p.into_inner())
}

impl BatchReader {
    /// The batch reader of the database file at `path`; it opens its connection on first use.
    pub(crate) fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            queue: Mutex::new(Vec::new()),
            conn: Mutex::new(None),
        }
    }

    /// Runs `read` inside the transaction of the batch it joins, on whichever task runs that batch.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |c| {
            let _ = tx.send(read(c));
        });
        relock(self.queue.lock()).push(job);
        // Let the other requests that are ready on this worker queue their reads too, so that one
        // transaction serves them all.
        tokio::task::yield_now().await;
        self.combine();
        rx.await.unwrap_or_else(|_| {
            Err(Error::Internal(anyhow::anyhow!(
                "a queued read was dropped (see the log)"
            )))
        })
    }

    /// Runs the queued reads unless another task is doing so. That task looks at the queue again after it
    /// lets go of the connection, so a read queued while it held it is never left behind.
    fn combine(&self) {
        loop {
            let mut conn = match self.conn.try_lock() {
                Ok(conn) => conn,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return,
            };
            loop {
                let batch = std::mem::take(&mut *relock(self.queue.lock()));
                if batch.is_empty() {
                    break;
                }
                self.run_batch(&mut conn, batch);
            }
            if !self.hand_back(conn) {
                return;
            }
        }
    }

    /// Lets go of the connection. True when reads are queued: they may have been queued while it was held,
    /// when their own tasks could not take it, so the caller must run them.
    fn hand_back(&self, conn: MutexGuard<'_, Option<Connection>>) -> bool {
        drop(conn);
        !relock(self.queue.lock()).is_empty()
    }

    fn run_batch(&self, conn: &mut Option<Connection>, batch: Vec<Job>) {
        if conn.is_none() {
            match super::open(&self.path) {
                Ok(c) => *conn = Some(c),
                Err(e) => {
                    // Dropping the jobs answers each of them with an error; the next batch tries again.
                    tracing::error!(error = %e, "could not open the database for reading");
                    return;
                }
            }
        }
        let c = conn.as_ref().expect("opened above");
        // `begin` is deferred: the snapshot is taken by the batch's first read, after the queue was taken.
        let in_transaction = c.execute_batch("begin").is_ok();
        for job in batch {
            if catch_unwind(AssertUnwindSafe(|| job(c))).is_err() {
                tracing::error!("a batched read panicked");
            }
        }
        if in_transaction && c.execute_batch("commit").is_err() {
            // A connection that cannot end its transaction is replaced rather than left holding a snapshot.
            *conn = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{count, database};
    use super::*;
    use std::sync::Arc;

    /// A read queued after a commit sees it (the batch's snapshot is taken after the queue was taken),
    /// and concurrent reads all get their own answers.
    #[tokio::test]
    async fn reads_see_what_was_committed_before_they_were_queued() {
        let (_dir, path) = database();
        let reader = Arc::new(BatchReader::new(&path));
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
    async fn a_failing_or_panicking_read_leaves_the_others_and_the_reader_alone() {
        let (_dir, path) = database();
        let reader = BatchReader::new(&path);
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

    /// Reads from many tasks on several workers, queued while other tasks run batches, are all answered:
    /// a read is never left in the queue with no task to run it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn every_read_queued_from_many_workers_is_answered() {
        let (_dir, path) = database();
        let reader = Arc::new(BatchReader::new(&path));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let reader = reader.clone();
                tokio::spawn(async move {
                    let mut sum = 0;
                    for _ in 0..50 {
                        sum += reader.run(count).await.unwrap();
                    }
                    sum
                })
            })
            .collect();
        let all = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            let mut total = 0;
            for t in tasks {
                total += t.await.unwrap();
            }
            total
        });
        assert_eq!(all.await.expect("every read is answered"), 64 * 50);
    }

    /// The hand-over that keeps a read from being stranded: it is queued while another task holds the
    /// connection, so its own task gives up; the holder runs it when it lets go.
    // The guard stands for a batch another task is running; this runtime has one thread, so holding it
    // across the awaits blocks nothing but the read under test.
    #[allow(clippy::await_holding_lock)]
    #[tokio::test]
    async fn a_read_queued_while_another_task_runs_a_batch_is_run_by_that_task() {
        let (_dir, path) = database();
        let reader = Arc::new(BatchReader::new(&path));
        let held = relock(reader.conn.lock());
        let queued = tokio::spawn({
            let reader = reader.clone();
            async move { reader.run(count).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(
            relock(reader.queue.lock()).len(),
            1,
            "queued, and not run by its own task"
        );
        assert!(!queued.is_finished());
        if reader.hand_back(held) {
            reader.combine();
        }
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), queued).await;
        assert_eq!(answer.expect("the read is run").unwrap().unwrap(), 1);
    }
}
