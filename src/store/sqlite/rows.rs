//! Statements of the [`Sql`](crate::store::sql::Sql) builder on a rusqlite connection, and the positional
//! row readers ([`ReadRow`], [`Columns`]) the SQLite reads use.

use rusqlite::Connection;

use crate::crypto::Cipher;
use crate::store::sql::{Arg, Sql};

/// Runs a statement of the [`Sql`] builder, each row handed to `visit` while it is current (nothing is
/// copied out of it unless `visit` copies). Every [`Arg`] is bound as sqlx would bind it (booleans as
/// integers, JSON as text).
pub(crate) fn visit(
    c: &Connection,
    q: &Sql,
    mut visit: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let mut stmt = c.prepare_cached(&q.text)?;
    bind_all(&mut stmt, &q.args)?;
    let mut rows = stmt.raw_query();
    while let Some(row) = rows.next()? {
        visit(row)?;
    }
    Ok(())
}

/// The rows of a statement, each read by `R`.
pub(crate) fn query<R: ReadRow>(
    c: &Connection,
    q: &Sql,
    cipher: &Cipher,
) -> rusqlite::Result<Vec<R>> {
    let mut out = Vec::new();
    visit(c, q, |row| {
        out.push(R::read(row, cipher)?);
        Ok(())
    })?;
    Ok(out)
}

/// Binds `args` by position. SQLite reads the builder's `$n` as a named parameter and numbers parameters in
/// the order they first appear, which the builder keeps equal to `n` (checked in debug builds).
fn bind_all(stmt: &mut rusqlite::Statement<'_>, args: &[Arg]) -> rusqlite::Result<()> {
    for (i, a) in args.iter().enumerate() {
        let at = i + 1;
        debug_assert!(
            stmt.parameter_name(at)
                .is_some_and(|name| name[1..] == at.to_string()),
            "parameter {at} of {:?}",
            stmt.expanded_sql()
        );
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

/// A row type that can also be read inline from a rusqlite row (see [`Columns`]), with the store's cipher
/// at hand for its sealed columns, if any.
pub(crate) trait ReadRow: Sized {
    fn read(r: &rusqlite::Row<'_>, cipher: &Cipher) -> rusqlite::Result<Self>;
}

/// A single column (a count, an id): the row type of scalar selects, as sqlx reads them on PostgreSQL.
impl<T: rusqlite::types::FromSql> ReadRow for (T,) {
    fn read(r: &rusqlite::Row<'_>, _: &Cipher) -> rusqlite::Result<Self> {
        r.get(0).map(|v| (v,))
    }
}

/// Two columns (a term and its count).
impl<A: rusqlite::types::FromSql, B: rusqlite::types::FromSql> ReadRow for (A, B) {
    fn read(r: &rusqlite::Row<'_>, _: &Cipher) -> rusqlite::Result<Self> {
        Ok((r.get(0)?, r.get(1)?))
    }
}

/// Reads a row's columns in `select` order: the readers `table!`, `view!` and `sql_row!` write, whose select
/// lists come from the same declarations (`COLUMNS`). Looking a column up by name costs a scan of the
/// statement's column names per value, a large share of a 100-row page; reading by position does not. Each
/// read still names its column, and debug builds (the tests) check the name against the statement, so a
/// `select` list out of step with its reader fails loudly instead of mixing values up.
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
    /// [`Stored`](crate::store::row::Stored)).
    pub fn stored<S: crate::store::row::Column, T: crate::store::row::Stored<S>>(
        &mut self,
        name: &str,
    ) -> rusqlite::Result<T> {
        let at = self.at;
        let stored = S::read(self, name)?;
        T::load(stored).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Null, e.into())
        })
    }

    /// The next column, sealed text (see [`Sealable`](crate::store::row::Sealable)), opened with `cipher` into
    /// its clear type `S` and loaded into the field type `T`.
    pub fn sealed<S: crate::store::row::Sealable, T: crate::store::row::Stored<S>>(
        &mut self,
        name: &str,
        cipher: &crate::crypto::Cipher,
    ) -> rusqlite::Result<T> {
        let at = self.at;
        let stored = self.str(name)?;
        S::open(stored, cipher).and_then(T::load).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Text, e.into())
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
