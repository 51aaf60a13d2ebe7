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

/// A statement of the [`Sql`](super::sql::Sql) builder run inline: `$n` placeholders become SQLite's
/// numbered `?n`, and every [`Arg`](super::sql::Arg) is bound as sqlx would bind it (booleans as integers,
/// JSON as text). `map` reads one row.
pub(crate) fn query_inline<R>(
    path: &Path,
    q: &super::sql::Sql,
    map: fn(&rusqlite::Row<'_>) -> rusqlite::Result<R>,
) -> crate::error::Result<Vec<R>> {
    let mut out = Vec::new();
    visit_inline(path, q, |row| {
        out.push(map(row)?);
        Ok(())
    })?;
    Ok(out)
}

/// A statement of the [`Sql`](super::sql::Sql) builder run inline, each row handed to `visit` while it is
/// current (nothing is copied out of it unless `visit` copies).
pub(crate) fn visit_inline(
    path: &Path,
    q: &super::sql::Sql,
    mut visit: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<()>,
) -> crate::error::Result<()> {
    let text = numbered(&q.text);
    with_reader(path, |c| {
        let mut stmt = c.prepare_cached(&text)?;
        bind_all(&mut stmt, &q.args)?;
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            visit(row)?;
        }
        Ok(())
    })
    .map_err(|e| anyhow::Error::from(e).into())
}

/// The first column of the first row of an inline statement, if any.
pub(crate) fn scalar_inline<T: rusqlite::types::FromSql>(
    path: &Path,
    q: &super::sql::Sql,
) -> crate::error::Result<Option<T>> {
    Ok(query_inline(path, q, |r| r.get::<_, T>(0))?
        .into_iter()
        .next())
}

/// `$1` → `?1` (outside quoted strings). Byte by byte: `$`, `'` and digits are ASCII, so every other byte
/// (of any UTF-8 sequence) is copied as it is.
pub(crate) fn numbered(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut quoted = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\'' {
            quoted = !quoted;
        }
        if b == b'$' && !quoted && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            out.push(b'?');
        } else {
            out.push(b);
        }
    }
    // Only ASCII bytes were replaced by ASCII bytes.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

fn bind_all(stmt: &mut rusqlite::Statement<'_>, args: &[super::sql::Arg]) -> rusqlite::Result<()> {
    use super::sql::Arg;
    for (i, a) in args.iter().enumerate() {
        let at = i + 1;
        match a {
            Arg::Text(v) => stmt.raw_bind_parameter(at, v)?,
            Arg::OptText(v) => stmt.raw_bind_parameter(at, v)?,
            Arg::Int(v) => stmt.raw_bind_parameter(at, v)?,
            Arg::OptInt(v) => stmt.raw_bind_parameter(at, v)?,
            Arg::Bool(v) => stmt.raw_bind_parameter(at, i64::from(*v))?,
            Arg::OptBool(v) => stmt.raw_bind_parameter(at, v.map(i64::from))?,
            Arg::Json(v) => stmt.raw_bind_parameter(at, v.to_string())?,
            Arg::OptJson(v) => stmt.raw_bind_parameter(at, v.as_ref().map(|v| v.to_string()))?,
            Arg::Bytes(v) => stmt.raw_bind_parameter(at, v)?,
        }
    }
    Ok(())
}

/// A row type that can also be read inline from a rusqlite row (see [`Columns`]).
pub(crate) trait ReadRow: Sized {
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self>;
}

/// Reads a row's columns in `select` order. Looking a column up by name costs a scan of the statement's
/// column names per value, a large share of a 100-row page; reading by position does not. Each read still
/// names its column, and debug builds (the tests) check the name against the statement, so a `select` list
/// out of step with its reader fails loudly instead of mixing values up.
pub(crate) struct Columns<'a, 'r> {
    row: &'a rusqlite::Row<'r>,
    at: usize,
}

impl<'a, 'r> Columns<'a, 'r> {
    pub fn new(row: &'a rusqlite::Row<'r>) -> Self {
        Self { row, at: 0 }
    }

    fn next_index(&mut self, name: &str) -> usize {
        let at = self.at;
        self.at += 1;
        debug_assert_eq!(
            self.row.as_ref().column_name(at).ok(),
            Some(name),
            "column {at} of the select list"
        );
        at
    }

    /// The next column.
    pub fn get<T: rusqlite::types::FromSql>(&mut self, name: &str) -> rusqlite::Result<T> {
        let at = self.next_index(name);
        self.row.get(at)
    }

    /// The next column, read as its drivers' type `S` and loaded into the field type `T` (see
    /// [`Stored`](super::row::Stored)).
    pub fn stored<S: super::row::Column, T: super::row::Stored<S>>(
        &mut self,
        name: &str,
    ) -> rusqlite::Result<T> {
        let at = self.at;
        let stored = S::read(self, name)?;
        T::load(stored).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Null, e.into())
        })
    }

    /// The next column, text, borrowed from the row.
    pub fn str(&mut self, name: &str) -> rusqlite::Result<&'a str> {
        let at = self.next_index(name);
        self.row.get_ref(at)?.as_str().map_err(Into::into)
    }

    /// The next column, nullable text, borrowed from the row.
    pub fn opt_str(&mut self, name: &str) -> rusqlite::Result<Option<&'a str>> {
        let at = self.next_index(name);
        self.row.get_ref(at)?.as_str_or_null().map_err(Into::into)
    }

    /// The next column, JSON text, as `sqlx::types::Json<T>` (how the sqlx rows hold them).
    pub fn json<T: serde::de::DeserializeOwned>(
        &mut self,
        name: &str,
    ) -> rusqlite::Result<sqlx::types::Json<T>> {
        let at = self.next_index(name);
        let text = self.row.get_ref(at)?.as_str()?;
        parse_json(at, text)
    }

    /// The next column, nullable JSON text.
    pub fn opt_json<T: serde::de::DeserializeOwned>(
        &mut self,
        name: &str,
    ) -> rusqlite::Result<Option<sqlx::types::Json<T>>> {
        let at = self.next_index(name);
        match self.row.get_ref(at)?.as_str_or_null()? {
            Some(text) => parse_json(at, text).map(Some),
            None => Ok(None),
        }
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(
    at: usize,
    text: &str,
) -> rusqlite::Result<sqlx::types::Json<T>> {
    serde_json::from_str(text)
        .map(sqlx::types::Json)
        .map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Text, Box::new(e))
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_become_numbered_outside_strings() {
        assert_eq!(
            super::numbered("select '$1', x from t where a = $1 and b in ($2, $10)"),
            "select '$1', x from t where a = ?1 and b in (?2, ?10)"
        );
        assert_eq!(
            super::numbered("select 'é$1', 'ü' || $2 from t where a = $1"),
            "select 'é$1', 'ü' || ?2 from t where a = ?1"
        );
    }
}
