//! SQLite point reads on the hot path, run inline. sqlx hands every SQLite statement to a connection's
//! worker thread and back, which costs more than the lookup itself; for single-row reads by an indexed key
//! (a subscriber by id) this module runs the statement on the calling thread with a read-only rusqlite
//! connection kept per thread and database. WAL mode lets these readers run beside the writer; each
//! statement sees the latest committed data. Everything else goes through sqlx.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// Databases a thread keeps a connection to before it drops them all (tests open many).
const MAX_PER_THREAD: usize = 8;

thread_local! {
    static CONNECTIONS: RefCell<HashMap<PathBuf, Connection>> = RefCell::new(HashMap::new());
}

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "cache_size", -2000)?;
    Ok(conn)
}

/// Runs `f` with this thread's read-only connection to the database at `path`.
pub(crate) fn with_reader<T>(
    path: &Path,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    CONNECTIONS.with(|cell| {
        let mut conns = cell.borrow_mut();
        if !conns.contains_key(path) {
            if conns.len() >= MAX_PER_THREAD {
                conns.clear();
            }
            conns.insert(path.to_path_buf(), open(path)?);
        }
        let conn = conns.get(path).expect("inserted above");
        let result = f(conn);
        if result.is_err() {
            // A broken connection (e.g. the file was replaced) is reopened next time.
            conns.remove(path);
        }
        result
    })
}
