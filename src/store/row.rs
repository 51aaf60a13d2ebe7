//! How rows are read and written, declared once.
//!
//! [`table!`] declares how a domain type is stored in its table; everything the store needs to read and write
//! it derives from that declaration. `sql_row!` declares a projection — a struct read from a `select` that is
//! not a whole stored type (a view of a few columns, a count) — and implements `sqlx::FromRow` for PostgreSQL's
//! and SQLite's sqlx rows, reading each field from the column of the same name, and the positional rusqlite
//! reader ([`ReadRow`](super::ReadRow)) the SQLite reads use, its fields in `select` order. Both do what
//! `#[derive(sqlx::FromRow)]` did without sqlx's proc-macro crate, which compiled a second copy of both
//! drivers (and of SQLite's C source) for the host.

use serde::de::DeserializeOwned;
use serde::Serialize;
use sqlx::types::Json;

use super::sql::{Arg, Sql};
use super::sqlite::rows::Columns;
use crate::domain::channel::ProviderId;
use crate::domain::endpoint::{ConnectionMode, EndpointType};
use crate::domain::id::Id;
use crate::domain::job::{DetailStatus, JobStatus, MessageStatus};
use crate::domain::workflow::Severity;
use crate::domain::Timestamp;
use crate::domain::{Channel, IntegrationKind};

macro_rules! sql_row {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $fty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $fty ),*
        }
        $crate::store::row::sql_row!(@impl $name, sqlx::sqlite::SqliteRow, $($field),*);
        $crate::store::row::sql_row!(@impl $name, sqlx::postgres::PgRow, $($field),*);
        impl $crate::store::sqlite::rows::ReadRow for $name {
            fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
                let mut c = $crate::store::sqlite::rows::Columns::new(r);
                // Fields are evaluated in the order written, which must be the order of the select list
                // (checked by name in debug builds).
                ::std::result::Result::Ok(Self {
                    $( $field: <$fty as $crate::store::row::Column>::read(&mut c, stringify!($field))? ),*
                })
            }
        }
    };
    (@impl $name:ident, $row:ty, $($field:ident),*) => {
        impl<'r> sqlx::FromRow<'r, $row> for $name {
            fn from_row(row: &'r $row) -> ::std::result::Result<Self, sqlx::Error> {
                ::std::result::Result::Ok(Self {
                    $( $field: sqlx::Row::try_get(row, stringify!($field))? ),*
                })
            }
        }
    };
}
pub(crate) use sql_row;

/// Declares how a domain type is stored in a table, once: each field with the type the drivers read and
/// bind for its column (`String`, `i64`, `bool`, `Json<T>`, their `Option`s). A column named otherwise than
/// its field is written `field as column`; the fields of one nested struct follow in a `nested` block; columns
/// that are written but never read back (values derived from the domain value, kept for indexes) follow in a
/// `written` block, each computed by a function of the domain value.
///
/// From that declaration it derives everything that used to be kept in step by hand: the read column list
/// ([`Table::COLUMNS`]), the written columns and their arguments in the same order ([`Table::WRITTEN`],
/// [`Table::args`]), and readers for both sqlx drivers and for inline rusqlite rows
/// (by position, each position checked against its column's name in debug builds). Each field converts to
/// and from its column's type through [`Stored`]. The readers build the domain value as a struct literal, so
/// a domain field the declaration forgets is a compile error.
macro_rules! table {
    (
        $domain:ident => $table:literal {
            $( $field:ident $(as $column:ident)? : $sty:ty ),+ $(,)?
        }
        $( nested $group:ident : $gty:ident { $( $nfield:ident : $nsty:ty ),+ $(,)? } )?
        $( written { $( $wcolumn:ident : $wty:ty = $wfn:expr ),+ $(,)? } )?
    ) => {
        impl $crate::store::row::Table for $domain {
            const TABLE: &'static str = $table;
            const COLUMNS: &'static str = $crate::store::row::table!(
                @join $($crate::store::row::table!(@column $field $(as $column)?)),+ $($(, stringify!($nfield))+)?
            );
            const WRITTEN: &'static [&'static str] = &[
                $($crate::store::row::table!(@column $field $(as $column)?),)+
                $($(stringify!($nfield),)+)?
                $($(stringify!($wcolumn),)+)?
            ];

            fn args(&self) -> ::std::result::Result<::std::vec::Vec<$crate::store::sql::Arg>, serde_json::Error> {
                use $crate::store::row::Stored;
                ::std::result::Result::Ok(vec![
                    $( <_ as Stored<$sty>>::arg(&self.$field)?, )+
                    $($( <_ as Stored<$nsty>>::arg(&self.$group.$nfield)?, )+)?
                    $($( <_ as Stored<$wty>>::arg(&$crate::store::row::derive(self, $wfn))?, )+)?
                ])
            }
        }

        $crate::store::row::table!(@sqlx sqlx::sqlite::SqliteRow, $domain { $($field $(as $column)?: $sty),+ }
            $( $group: $gty { $($nfield: $nsty),+ } )?);
        $crate::store::row::table!(@sqlx sqlx::postgres::PgRow, $domain { $($field $(as $column)?: $sty),+ }
            $( $group: $gty { $($nfield: $nsty),+ } )?);

        impl $crate::store::sqlite::rows::ReadRow for $domain {
            fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
                let mut c = $crate::store::sqlite::rows::Columns::new(r);
                // Fields are evaluated in the order written, which is the order of the columns.
                ::std::result::Result::Ok($domain {
                    $( $field: c.stored::<$sty, _>($crate::store::row::table!(@column $field $(as $column)?))?, )+
                    $( $group: $gty { $( $nfield: c.stored::<$nsty, _>(stringify!($nfield))?, )+ }, )?
                })
            }
        }
    };
    (@sqlx $row:ty, $domain:ident { $($field:ident $(as $column:ident)?: $sty:ty),+ }
        $( $group:ident : $gty:ident { $($nfield:ident : $nsty:ty),+ } )?) => {
        impl<'r> sqlx::FromRow<'r, $row> for $domain {
            fn from_row(row: &'r $row) -> ::std::result::Result<Self, sqlx::Error> {
                use $crate::store::row::get;
                ::std::result::Result::Ok($domain {
                    $( $field: get::<$sty, _, _>(row, $crate::store::row::table!(@column $field $(as $column)?))?, )+
                    $( $group: $gty { $( $nfield: get::<$nsty, _, _>(row, stringify!($nfield))?, )+ }, )?
                })
            }
        }
    };
    (@column $field:ident) => { stringify!($field) };
    (@column $field:ident as $column:ident) => { stringify!($column) };
    (@join $first:expr $(, $rest:expr)*) => { concat!($first $(, ", ", $rest)*) };
}
pub(crate) use table;

/// A domain type stored as one row of a table, as [`table!`] declares it.
pub(crate) trait Table: Sized {
    /// The table's name.
    const TABLE: &'static str;
    /// The columns read back, in the order the readers expect them: `select {COLUMNS} from …`.
    const COLUMNS: &'static str;
    /// The columns written, in the order of [`Table::args`]: the read ones, then the derived ones.
    const WRITTEN: &'static [&'static str];

    /// The values of [`Table::WRITTEN`], as bound arguments.
    fn args(&self) -> Result<Vec<Arg>, serde_json::Error>;
}

/// Calls a `written` column's function on the domain value (a function, so a closure's argument type is
/// known from the declaration).
pub(crate) fn derive<D, T>(value: &D, f: impl Fn(&D) -> T) -> T {
    f(value)
}

/// `insert into <table> (<written columns>) values ($1, …)` with `row`'s arguments.
pub(crate) fn insert<T: Table>(row: &T) -> Result<Sql, serde_json::Error> {
    let mut q = Sql::new("insert into ");
    q.push(T::TABLE)
        .push(" (")
        .push(&T::WRITTEN.join(", "))
        .push(") values (");
    for (i, arg) in row.args()?.into_iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        q.bind(arg);
    }
    q.push(")");
    Ok(q)
}

/// `update <table> set <column> = $n, …` of every written column but those in `keep` (identity and creation
/// columns an update never changes); the caller appends its `where`.
pub(crate) fn update<T: Table>(row: &T, keep: &[&str]) -> Result<Sql, serde_json::Error> {
    debug_assert!(
        keep.iter().all(|k| T::WRITTEN.contains(k)),
        "{keep:?} names a column {} does not write",
        T::TABLE
    );
    let mut q = Sql::new("update ");
    q.push(T::TABLE).push(" set ");
    let mut first = true;
    for (column, arg) in T::WRITTEN.iter().zip(row.args()?) {
        if keep.contains(column) {
            continue;
        }
        if !first {
            q.push(", ");
        }
        first = false;
        q.push(column).push(" = ").bind(arg);
    }
    Ok(q)
}

/// How a field is stored in a column whose drivers' type is `S`: loaded back from it, and bound as an
/// [`Arg`] of the matching kind (so that a NULL is typed as its column on PostgreSQL).
pub(crate) trait Stored<S>: Sized {
    /// The field from its stored value; an error names what the value should have been.
    fn load(stored: S) -> Result<Self, String>;

    /// The stored value, to bind.
    fn arg(&self) -> Result<Arg, serde_json::Error>;

    /// A NULL of this column's kind.
    fn null() -> Arg;
}

/// The field read from a column of an sqlx row; a value it rejects is a decode error of that column.
pub(crate) fn get<'r, S, T, R>(row: &'r R, column: &str) -> Result<T, sqlx::Error>
where
    R: sqlx::Row,
    S: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    T: Stored<S>,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
{
    let stored = row.try_get::<S, _>(column)?;
    T::load(stored).map_err(|e| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: e.into(),
    })
}

impl Stored<String> for String {
    fn load(stored: String) -> Result<Self, String> {
        Ok(stored)
    }
    fn arg(&self) -> Result<Arg, serde_json::Error> {
        Ok(Arg::Text(self.clone()))
    }
    fn null() -> Arg {
        Arg::OptText(None)
    }
}

impl Stored<i64> for i64 {
    fn load(stored: i64) -> Result<Self, String> {
        Ok(stored)
    }
    fn arg(&self) -> Result<Arg, serde_json::Error> {
        Ok(Arg::Int(*self))
    }
    fn null() -> Arg {
        Arg::OptInt(None)
    }
}

impl Stored<bool> for bool {
    fn load(stored: bool) -> Result<Self, String> {
        Ok(stored)
    }
    fn arg(&self) -> Result<Arg, serde_json::Error> {
        Ok(Arg::Bool(*self))
    }
    fn null() -> Arg {
        Arg::OptBool(None)
    }
}

/// Times are stored as epoch milliseconds.
impl Stored<i64> for Timestamp {
    fn load(stored: i64) -> Result<Self, String> {
        Ok(Timestamp(stored))
    }
    fn arg(&self) -> Result<Arg, serde_json::Error> {
        Ok(Arg::Int(self.0))
    }
    fn null() -> Arg {
        Arg::OptInt(None)
    }
}

/// Structured fields are stored as JSON (TEXT on SQLite, JSONB on PostgreSQL).
impl<T: Serialize + DeserializeOwned> Stored<Json<T>> for T {
    fn load(stored: Json<T>) -> Result<Self, String> {
        Ok(stored.0)
    }
    fn arg(&self) -> Result<Arg, serde_json::Error> {
        serde_json::to_value(self).map(Arg::Json)
    }
    fn null() -> Arg {
        Arg::OptJson(None)
    }
}

/// Ids are stored as their text.
impl<T: Id> Stored<String> for T {
    fn load(stored: String) -> Result<Self, String> {
        Ok(T::from(stored))
    }
    fn arg(&self) -> Result<Arg, serde_json::Error> {
        Ok(Arg::Text(self.as_ref().to_owned()))
    }
    fn null() -> Arg {
        Arg::OptText(None)
    }
}

/// Domain values stored as their names: read back with `TryFrom<String>` (an unknown name is a decode error
/// that names it), written with `as_str()`.
macro_rules! stored_as_names {
    ($($t:ty),+) => {
        $(
            impl Stored<String> for $t {
                fn load(stored: String) -> Result<Self, String> {
                    Self::try_from(stored).map_err(|e| e.to_string())
                }
                fn arg(&self) -> Result<Arg, serde_json::Error> {
                    Ok(Arg::Text(self.as_str().to_owned()))
                }
                fn null() -> Arg {
                    Arg::OptText(None)
                }
            }
        )+
    };
}
stored_as_names!(
    JobStatus,
    MessageStatus,
    DetailStatus,
    Channel,
    EndpointType,
    IntegrationKind,
    ProviderId,
    Severity,
    ConnectionMode
);

impl<S, T: Stored<S>> Stored<Option<S>> for Option<T> {
    fn load(stored: Option<S>) -> Result<Self, String> {
        stored.map(T::load).transpose()
    }
    fn arg(&self) -> Result<Arg, serde_json::Error> {
        match self {
            Some(v) => v.arg(),
            None => Ok(T::null()),
        }
    }
    fn null() -> Arg {
        T::null()
    }
}

/// The type a column's value is read as from an inline rusqlite row (see [`Columns::stored`]).
pub(crate) trait Column: Sized {
    fn read(c: &mut Columns<'_, '_>, name: &str) -> rusqlite::Result<Self>;
}

macro_rules! plain_columns {
    ($($t:ty),*) => {
        $(
            impl Column for $t {
                fn read(c: &mut Columns<'_, '_>, name: &str) -> rusqlite::Result<Self> {
                    c.get(name)
                }
            }
        )*
    };
}
plain_columns!(
    String,
    Option<String>,
    i64,
    Option<i64>,
    i32,
    Option<i32>,
    bool,
    Option<bool>,
    Vec<u8>,
    Option<Vec<u8>>
);

impl<T: DeserializeOwned> Column for Json<T> {
    fn read(c: &mut Columns<'_, '_>, name: &str) -> rusqlite::Result<Self> {
        c.json(name)
    }
}

impl<T: DeserializeOwned> Column for Option<Json<T>> {
    fn read(c: &mut Columns<'_, '_>, name: &str) -> rusqlite::Result<Self> {
        c.opt_json(name)
    }
}

#[cfg(test)]
mod tests {
    use sqlx::sqlite::SqlitePoolOptions;

    sql_row! {
        #[derive(Debug)]
        struct Sample {
            /// A documented field.
            name: String,
            note: Option<String>,
            count: i64,
        }
    }

    #[tokio::test]
    async fn a_projection_reads_fields_by_column_name() {
        let pool = SqlitePoolOptions::new()
            .connect("sqlite::memory:")
            .await
            .unwrap();
        let row: Sample = sqlx::query_as("select 4 as count, null as note, 'a' as name")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!((row.name.as_str(), row.note, row.count), ("a", None, 4));

        let missing = sqlx::query_as::<_, Sample>("select 'a' as name, 2 as count")
            .fetch_one(&pool)
            .await
            .unwrap_err();
        assert!(
            matches!(&missing, sqlx::Error::ColumnNotFound(c) if c == "note"),
            "{missing:?}"
        );
    }

    mod declared {
        use serde_json::Value;
        use sqlx::types::Json;

        use crate::domain::Timestamp;

        #[derive(Debug, PartialEq)]
        pub struct Thing {
            pub id: String,
            pub first: Option<String>,
            pub last: Option<String>,
            pub count: i64,
            pub flag: bool,
            pub data: Option<Value>,
            pub tags: Vec<String>,
            pub inner: Inner,
            pub created_at: Timestamp,
        }

        #[derive(Debug, PartialEq)]
        pub struct Inner {
            pub seen_at: Option<Timestamp>,
        }

        crate::store::row::table! {
            Thing => "things" {
                id: String,
                first: Option<String>,
                last: Option<String>,
                count: i64,
                flag: bool,
                data: Option<Json<Value>>,
                tags: Json<Vec<String>>,
                created_at as created: i64,
            }
            nested inner: Inner {
                seen_at: Option<i64>,
            }
            written {
                full_name: Option<String> = |t: &Thing| match (&t.first, &t.last) {
                    (Some(f), Some(l)) => Some(format!("{f} {l}")),
                    _ => None,
                },
            }
        }
    }

    /// One declaration serves the select list, the insert and the readers of both libraries,
    /// with a column reaching into a nested struct and a written-only column derived from the value.
    #[tokio::test]
    async fn a_declared_table_writes_and_reads_back_through_both_libraries() {
        use super::Table;
        use crate::store::insert::insert_declared;
        use crate::store::sql::bind_args;
        use crate::store::sqlite::rows::ReadRow;
        use declared::{Inner, Thing};

        assert_eq!(
            Thing::COLUMNS,
            "id, first, last, count, flag, data, tags, created, seen_at"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let pool = SqlitePoolOptions::new().connect(&url).await.unwrap();
        sqlx::query(
            "create table things (id text primary key, first text, last text, full_name text, \
             count integer not null, flag boolean not null, data text, tags text not null, seen_at integer, \
             created integer not null)",
        )
        .execute(&pool)
        .await
        .unwrap();
        let thing = Thing {
            id: "a".into(),
            first: Some("Ada".into()),
            last: Some("Lovelace".into()),
            count: 3,
            flag: true,
            data: None,
            tags: vec!["x".into()],
            inner: Inner {
                seen_at: Some(crate::domain::Timestamp(7)),
            },
            created_at: crate::domain::Timestamp(5),
        };
        let q = insert_declared(crate::store::Dialect::Sqlite, &[&thing], "")
            .unwrap()
            .remove(0);
        assert_eq!(
            q.text,
            "insert into things (id, first, last, count, flag, data, tags, created, seen_at, full_name) \
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
        );
        bind_args!(sqlx::query(&q.text), q.args)
            .execute(&pool)
            .await
            .unwrap();
        let select = format!("select {} from things", Thing::COLUMNS);
        let read: Thing = sqlx::query_as(&select).fetch_one(&pool).await.unwrap();
        assert_eq!(read, thing);
        let name: String = sqlx::query_scalar("select full_name from things")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(name, "Ada Lovelace");

        let conn = rusqlite::Connection::open(&path).unwrap();
        let mut stmt = conn.prepare(&select).unwrap();
        let inline = stmt.query_row([], <Thing as ReadRow>::read).unwrap();
        assert_eq!(inline, thing);
    }

    #[test]
    fn statuses_are_stored_as_their_names() {
        use super::{Arg, Stored};
        use crate::domain::job::{DetailStatus, JobStatus};

        for s in JobStatus::ALL {
            let arg = <JobStatus as Stored<String>>::arg(&s).unwrap();
            assert_eq!(arg, Arg::Text(s.as_str().to_owned()));
            assert_eq!(JobStatus::load(s.as_str().to_owned()), Ok(s));
        }
        for s in DetailStatus::ALL {
            let arg = <DetailStatus as Stored<String>>::arg(&s).unwrap();
            assert_eq!(arg, Arg::Text(s.as_str().to_owned()));
            assert_eq!(DetailStatus::load(s.as_str().to_owned()), Ok(s));
        }
        assert_eq!(<JobStatus as Stored<String>>::null(), Arg::OptText(None));
        assert_eq!(
            <Option<DetailStatus> as Stored<Option<String>>>::arg(&None).unwrap(),
            Arg::OptText(None)
        );
        let bad = <JobStatus as Stored<String>>::load("done".to_owned()).unwrap_err();
        assert!(bad.contains("\"done\""), "{bad}");
    }

    #[test]
    fn ids_are_stored_and_bound_as_their_text() {
        use super::{Arg, Stored};
        use crate::domain::JobId;

        let id = JobId::from("6b05edefbd5e51c18e7ee068");
        assert_eq!(
            <JobId as Stored<String>>::arg(&id).unwrap(),
            Arg::Text(id.as_str().to_owned())
        );
        assert_eq!(Arg::from(&id), Arg::Text(id.as_str().to_owned()));
        assert_eq!(JobId::load(id.as_str().to_owned()), Ok(id));
        assert_eq!(
            <Option<JobId> as Stored<Option<String>>>::arg(&None).unwrap(),
            Arg::OptText(None)
        );
    }
}
