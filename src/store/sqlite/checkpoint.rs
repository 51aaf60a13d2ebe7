//! SQLite: a thread of its own copies the write-ahead log into the database. SQLite's automatic checkpoint
//! runs on the connection that commits, inside the commit: with one writer connection, every trigger and job
//! completion queued behind the copying and the file syncs of the checkpoint (a fifth of the writer's time
//! under a trigger load). Here a second connection checkpoints (PASSIVE: it never blocks the writer or the
//! readers) every [`INTERVAL`]. The writer keeps its own automatic checkpoint at a larger size as a bound:
//! the log restarts from its beginning only when a writer finds it fully copied, which a steady write load
//! leaves to the writer's checkpoint (by then the thread has copied nearly everything, so it is short).

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// How often the thread copies what the log gained.
const INTERVAL: Duration = Duration::from_millis(100);

/// Stops the thread when dropped (with the last clone of the store).
#[derive(Debug)]
pub(crate) struct Checkpointer {
    _stop: Sender<()>,
}

/// Starts the checkpoint thread for the database file at `path`; `None` if its connection cannot open
/// (then the writer's automatic checkpoint alone keeps the log short).
pub(crate) fn start(path: &Path) -> Option<Checkpointer> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )
    .map_err(|e| tracing::warn!(error = %e, "checkpoint thread not started"))
    .ok()?;
    let (stop, stopped) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("tidings-checkpoint".into())
        .spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
                // Nothing to do costs a look at the log's header; a busy log (another checkpoint
                // running, e.g. the writer's own) is left for the next round.
                if let Err(e) = conn.query_row("pragma wal_checkpoint(passive)", [], |_| Ok(())) {
                    tracing::debug!(error = %e, "background checkpoint");
                }
            }
        })
        .map_err(|e| tracing::warn!(error = %e, "checkpoint thread not started"))
        .ok()?;
    Some(Checkpointer { _stop: stop })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of the database file itself (what checkpoints write), not of its log.
    fn file_len(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    #[test]
    fn the_thread_copies_the_log_into_the_database_and_stops_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer = Connection::open(&path).unwrap();
        writer.pragma_update(None, "journal_mode", "wal").unwrap();
        // The writer never checkpoints on its own here.
        writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        writer
            .execute_batch("create table t (x text); pragma wal_checkpoint(truncate);")
            .unwrap();
        let before = file_len(&path);
        let checkpointer = start(&path).expect("started");
        writer
            .execute(
                "with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000)
                 insert into t select hex(randomblob(100)) from n",
                [],
            )
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while file_len(&path) <= before && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            file_len(&path) > before + 100_000,
            "the log was copied into the database file"
        );
        drop(checkpointer);
        // Stopped: new writes stay in the log.
        std::thread::sleep(INTERVAL * 2);
        let after = file_len(&path);
        writer
            .execute(
                "with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000)
                 insert into t select hex(randomblob(100)) from n",
                [],
            )
            .unwrap();
        std::thread::sleep(INTERVAL * 3);
        assert_eq!(file_len(&path), after);
    }
}
