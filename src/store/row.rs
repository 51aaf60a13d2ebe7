//! How rows are read and written, declared once.
//!
//! [`table!`] declares how a domain type is stored in its table; everything the store needs to read and write
//! it derives from that declaration, its secrets included (a `sealed` block: columns sealed with the store's
//! cipher, see [`Sealable`]). `sql_row!` declares a projection — a struct read from a `select` that is not a
//! whole stored type (a few columns, a count) — and implements `sqlx::FromRow` for PostgreSQL's and SQLite's
//! sqlx rows, reading each field from the column of the same name, the positional rusqlite reader
//! ([`ReadRow`](super::ReadRow)) the SQLite reads use, its fields in `select` order, and that select list
//! (`COLUMNS`). [`view!`] declares a borrowed view of a select's rows (the activity feed's, a subscriber's):
//! its select list and both its readers. All of them do what `#[derive(sqlx::FromRow)]` did without sqlx's
//! proc-macro crate, which compiled a second copy of both drivers (and of SQLite's C source) for the host.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use sqlx::types::Json;

use super::sql::{Arg, Sql};
use super::sqlite::rows::Columns;
use crate::crypto::{Cipher, CryptoError};
use crate::domain::channel::ProviderId;
use crate::domain::endpoint::{ConnectionMode, EndpointType};
use crate::domain::fanout::FanoutStatus;
use crate::domain::id::Id;
use crate::domain::job::{DetailStatus, JobStatus, MessageStatus};
use crate::domain::workflow::Severity;
use crate::domain::{Channel, IntegrationKind};
use crate::domain::{EnvironmentId, OrganizationId, Timestamp};

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
        impl $name {
            /// The select list of the fields, in the order the inline reader expects them.
            #[allow(dead_code)]
            $vis const COLUMNS: &'static str = $crate::store::row::table!(@join $(stringify!($field)),*);
        }
        $crate::store::row::sql_row!(@impl $name, sqlx::sqlite::SqliteRow, $($field),*);
        $crate::store::row::sql_row!(@impl $name, sqlx::postgres::PgRow, $($field),*);
        impl $crate::store::sqlite::rows::ReadRow for $name {
            fn read(r: &rusqlite::Row<'_>, _: &$crate::crypto::Cipher) -> rusqlite::Result<Self> {
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

/// Declares a borrowed view of a select's rows, once: the owned row struct `$name` (what PostgreSQL's rows
/// are read into), its select list (`$name::COLUMNS`), and both ways to the view `$view<'a>` — lent by an
/// owned row ([`ViewRow::view`](super::ViewRow::view)) or read straight from an inline SQLite row
/// ([`ViewRow::view_inline`](super::ViewRow::view_inline), allocation-free, by position). Each field names
/// its column kind (a type of [`column`]) and, when the column is named otherwise, `field as column`. The
/// select list and both readers come from the one list, so their column order cannot drift apart.
macro_rules! view {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident => $view:ident {
            $( $field:ident $(as $column:ident)? : $kind:ident ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $field: <$crate::store::row::column::$kind as $crate::store::row::ViewColumn>::Owned ),+
        }

        impl $name {
            /// The select list the readers expect, in their order.
            $vis const COLUMNS: &'static str = $crate::store::row::table!(
                @join $($crate::store::row::table!(@column $field $(as $column)?)),+
            );
        }

        $crate::store::row::view!(@sqlx sqlx::sqlite::SqliteRow, $name { $($field $(as $column)?: $kind),+ });
        $crate::store::row::view!(@sqlx sqlx::postgres::PgRow, $name { $($field $(as $column)?: $kind),+ });

        impl $crate::store::sqlite::rows::ReadRow for $name {
            fn read(r: &rusqlite::Row<'_>, _: &$crate::crypto::Cipher) -> rusqlite::Result<Self> {
                use $crate::store::row::{Column, ViewColumn};
                let mut c = $crate::store::sqlite::rows::Columns::new(r);
                // Fields are evaluated in the order written, which is the order of the select list.
                ::std::result::Result::Ok(Self {
                    $( $field: <<$crate::store::row::column::$kind as ViewColumn>::Owned as Column>::read(
                        &mut c, $crate::store::row::table!(@column $field $(as $column)?))?, )+
                })
            }
        }

        impl $crate::store::ViewRow for $name {
            type View<'a> = $view<'a>;

            fn view(&self) -> $view<'_> {
                use $crate::store::row::ViewColumn;
                $view { $( $field: $crate::store::row::column::$kind::view(&self.$field), )+ }
            }

            fn view_inline<'a>(r: &'a rusqlite::Row<'_>) -> rusqlite::Result<$view<'a>> {
                use $crate::store::row::ViewColumn;
                let mut c = $crate::store::sqlite::rows::Columns::new(r);
                // Fields are evaluated in the order written, which is the order of the select list.
                ::std::result::Result::Ok($view {
                    $( $field: $crate::store::row::column::$kind::inline(
                        &mut c, $crate::store::row::table!(@column $field $(as $column)?))?, )+
                })
            }
        }
    };
    (@sqlx $row:ty, $name:ident { $($field:ident $(as $column:ident)?: $kind:ident),+ }) => {
        impl<'r> sqlx::FromRow<'r, $row> for $name {
            fn from_row(row: &'r $row) -> ::std::result::Result<Self, sqlx::Error> {
                ::std::result::Result::Ok(Self {
                    $( $field: sqlx::Row::try_get(row, $crate::store::row::table!(@column $field $(as $column)?))?, )+
                })
            }
        }
    };
}
pub(crate) use view;

/// A column kind of a [`view!`]: what PostgreSQL's rows hold of it (`Owned`), what the view shows of it, and
/// how an inline SQLite row gives that directly.
pub(crate) trait ViewColumn {
    type Owned;
    type View<'a>;

    fn view(owned: &Self::Owned) -> Self::View<'_>;

    fn inline<'a>(c: &mut Columns<'a, '_>, name: &str) -> rusqlite::Result<Self::View<'a>>;
}

/// The column kinds of [`view!`] declarations.
pub(crate) mod column {
    use serde_json::value::RawValue;
    use sqlx::types::Json;

    use super::ViewColumn;
    use crate::domain::Timestamp;
    use crate::store::sqlite::rows::Columns;

    macro_rules! kinds {
        ($( $(#[$meta:meta])* $kind:ident: $owned:ty => $viewed:ty, |$o:ident| $view:expr, |$c:ident, $n:ident| $inline:expr; )+) => {
            $(
                $(#[$meta])*
                pub(crate) struct $kind;

                impl ViewColumn for $kind {
                    type Owned = $owned;
                    type View<'a> = $viewed;

                    fn view($o: &Self::Owned) -> Self::View<'_> {
                        $view
                    }

                    fn inline<'a>($c: &mut Columns<'a, '_>, $n: &str) -> rusqlite::Result<Self::View<'a>> {
                        $inline
                    }
                }
            )+
        };
    }

    kinds! {
        /// Text, borrowed.
        Text: String => &'a str, |o| o, |c, n| c.str(n);
        /// Nullable text, borrowed.
        OptText: Option<String> => Option<&'a str>, |o| o.as_deref(), |c, n| c.opt_str(n);
        /// JSON, as its text (JSONB on PostgreSQL, TEXT on SQLite), borrowed.
        JsonText: Json<Box<RawValue>> => &'a str, |o| o.0.get(), |c, n| c.str(n);
        /// Nullable JSON, as its text.
        OptJsonText: Option<Json<Box<RawValue>>> => Option<&'a str>,
            |o| o.as_ref().map(|j| j.0.get()), |c, n| c.opt_str(n);
        /// A BIGINT.
        Int: i64 => i64, |o| *o, |c, n| c.get(n);
        /// A boolean.
        Bool: bool => bool, |o| *o, |c, n| c.get(n);
        /// A time, stored as epoch milliseconds.
        Time: i64 => Timestamp, |o| Timestamp(*o), |c, n| c.get(n).map(Timestamp);
    }
}

/// Declares how a domain type is stored in a table, once: each field with the type the drivers read and
/// bind for its column (`String`, `i64`, `bool`, `Json<T>`, their `Option`s). A column named otherwise than
/// its field is written `field as column`; the fields of one nested struct follow in a `nested` block; fields
/// stored sealed by the store's cipher (secrets: credentials, tokens) follow in a `sealed` block, each with
/// the type of its clear value ([`Sealable`]: `String` or `Json<T>`, stored as TEXT); columns that are
/// written but never read back (values derived from the domain value, kept for indexes) follow in a
/// `written` block, each computed by a function of the domain value.
///
/// From that declaration it derives everything that used to be kept in step by hand: the read column list
/// ([`Table::COLUMNS`]), the written columns and their arguments in the same order ([`Table::WRITTEN`],
/// [`Table::args_with`]), and readers for both sqlx drivers and for inline rusqlite rows
/// (by position, each position checked against its column's name in debug builds). Each field converts to
/// and from its column's type through [`Stored`]. The readers build the domain value as a struct literal, so
/// a domain field the declaration forgets is a compile error.
///
/// A table with a `sealed` block is read and written only with the store's cipher: it gets no sqlx
/// `FromRow` (which could not open its sealed columns), only the readers the store's reads use
/// ([`ReadWith`](super::page::ReadWith), [`ReadRow`](super::ReadRow)), and its [`Table::Keys`] is the cipher.
macro_rules! table {
    (
        $domain:ident => $table:literal {
            $( $field:ident $(as $column:ident)? : $sty:ty ),+ $(,)?
        }
        $( nested $group:ident : $gty:ident { $( $nfield:ident : $nsty:ty ),+ $(,)? } )?
        sealed { $( $sfield:ident $(as $scolumn:ident)? : $ssty:ty ),+ $(,)? }
        $( written { $( $wcolumn:ident : $wty:ty = $wfn:expr ),+ $(,)? } )?
    ) => {
        $crate::store::row::table!(@table $crate::crypto::Cipher, $domain => $table
            { $($field $(as $column)?: $sty),+ }
            $( nested $group: $gty { $($nfield: $nsty),+ } )?
            sealed { $($sfield $(as $scolumn)?: $ssty),+ }
            $( written { $($wcolumn: $wty = $wfn),+ } )?);
        $crate::store::row::table!(@read_with sqlx::sqlite::SqliteRow, $domain { $($field $(as $column)?: $sty),+ }
            $( nested $group: $gty { $($nfield: $nsty),+ } )? sealed { $($sfield $(as $scolumn)?: $ssty),+ });
        $crate::store::row::table!(@read_with sqlx::postgres::PgRow, $domain { $($field $(as $column)?: $sty),+ }
            $( nested $group: $gty { $($nfield: $nsty),+ } )? sealed { $($sfield $(as $scolumn)?: $ssty),+ });
    };
    (
        $domain:ident => $table:literal {
            $( $field:ident $(as $column:ident)? : $sty:ty ),+ $(,)?
        }
        $( nested $group:ident : $gty:ident { $( $nfield:ident : $nsty:ty ),+ $(,)? } )?
        $( written { $( $wcolumn:ident : $wty:ty = $wfn:expr ),+ $(,)? } )?
    ) => {
        $crate::store::row::table!(@table (), $domain => $table
            { $($field $(as $column)?: $sty),+ }
            $( nested $group: $gty { $($nfield: $nsty),+ } )?
            sealed { }
            $( written { $($wcolumn: $wty = $wfn),+ } )?);
        $crate::store::row::table!(@sqlx sqlx::sqlite::SqliteRow, $domain { $($field $(as $column)?: $sty),+ }
            $( $group: $gty { $($nfield: $nsty),+ } )?);
        $crate::store::row::table!(@sqlx sqlx::postgres::PgRow, $domain { $($field $(as $column)?: $sty),+ }
            $( $group: $gty { $($nfield: $nsty),+ } )?);
    };
    (@table $keys:ty, $domain:ident => $table:literal
        { $( $field:ident $(as $column:ident)? : $sty:ty ),+ }
        $( nested $group:ident : $gty:ident { $( $nfield:ident : $nsty:ty ),+ } )?
        sealed { $( $sfield:ident $(as $scolumn:ident)? : $ssty:ty ),* }
        $( written { $( $wcolumn:ident : $wty:ty = $wfn:expr ),+ } )?
    ) => {
        impl $crate::store::row::Table for $domain {
            const TABLE: &'static str = $table;
            const COLUMNS: &'static str = $crate::store::row::table!(
                @join $($crate::store::row::table!(@column $field $(as $column)?)),+
                $($(, stringify!($nfield))+)?
                $(, $crate::store::row::table!(@column $sfield $(as $scolumn)?))*
            );
            const WRITTEN: &'static [&'static str] = &[
                $($crate::store::row::table!(@column $field $(as $column)?),)+
                $($(stringify!($nfield),)+)?
                $($crate::store::row::table!(@column $sfield $(as $scolumn)?),)*
                $($(stringify!($wcolumn),)+)?
            ];
            type Keys = $keys;

            #[allow(unused_variables)]
            fn args_with(&self, keys: &$keys) -> ::std::result::Result<::std::vec::Vec<$crate::store::sql::Arg>, serde_json::Error> {
                use $crate::store::row::Stored;
                ::std::result::Result::Ok(vec![
                    $( <_ as Stored<$sty>>::arg(&self.$field)?, )+
                    $($( <_ as Stored<$nsty>>::arg(&self.$group.$nfield)?, )+)?
                    $( <$ssty as $crate::store::row::Sealable>::seal(<_ as Stored<$ssty>>::arg(&self.$sfield)?, keys), )*
                    $($( <_ as Stored<$wty>>::arg(&$crate::store::row::derive(self, $wfn))?, )+)?
                ])
            }
        }

        impl $crate::store::sqlite::rows::ReadRow for $domain {
            #[allow(unused_variables)]
            fn read(r: &rusqlite::Row<'_>, cipher: &$crate::crypto::Cipher) -> rusqlite::Result<Self> {
                let mut c = $crate::store::sqlite::rows::Columns::new(r);
                // Fields are evaluated in the order written, which is the order of the columns.
                ::std::result::Result::Ok($domain {
                    $( $field: c.stored::<$sty, _>($crate::store::row::table!(@column $field $(as $column)?))?, )+
                    $( $group: $gty { $( $nfield: c.stored::<$nsty, _>(stringify!($nfield))?, )+ }, )?
                    $( $sfield: c.sealed::<$ssty, _>($crate::store::row::table!(@column $sfield $(as $scolumn)?), cipher)?, )*
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
    (@read_with $row:ty, $domain:ident { $($field:ident $(as $column:ident)?: $sty:ty),+ }
        $( nested $group:ident : $gty:ident { $($nfield:ident : $nsty:ty),+ } )?
        sealed { $( $sfield:ident $(as $scolumn:ident)? : $ssty:ty ),+ }) => {
        impl $crate::store::page::ReadWith<$row> for $domain {
            fn read_with(row: &$row, cipher: &$crate::crypto::Cipher) -> ::std::result::Result<Self, sqlx::Error> {
                use $crate::store::row::{get, get_sealed};
                ::std::result::Result::Ok($domain {
                    $( $field: get::<$sty, _, _>(row, $crate::store::row::table!(@column $field $(as $column)?))?, )+
                    $( $group: $gty { $( $nfield: get::<$nsty, _, _>(row, stringify!($nfield))?, )+ }, )?
                    $( $sfield: get_sealed::<$ssty, _, _>(row, $crate::store::row::table!(@column $sfield $(as $scolumn)?), cipher)?, )+
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
    /// The columns written, in the order of [`Table::args_with`]: the read ones, then the derived ones.
    const WRITTEN: &'static [&'static str];
    /// What writing a row needs besides the row: nothing (`()`), or the store's cipher for a table with
    /// sealed columns.
    type Keys;

    /// The values of [`Table::WRITTEN`], as bound arguments, the sealed ones sealed with `keys`.
    fn args_with(&self, keys: &Self::Keys) -> Result<Vec<Arg>, serde_json::Error>;

    /// The values of [`Table::WRITTEN`] of a table without sealed columns.
    fn args(&self) -> Result<Vec<Arg>, serde_json::Error>
    where
        Self: Table<Keys = ()>,
    {
        self.args_with(&())
    }
}

/// Calls a `written` column's function on the domain value (a function, so a closure's argument type is
/// known from the declaration).
pub(crate) fn derive<D, T>(value: &D, f: impl Fn(&D) -> T) -> T {
    f(value)
}

/// `insert into <table> (<written columns>) values ($1, …)` with `row`'s arguments.
pub(crate) fn insert<T: Table<Keys = ()>>(row: &T) -> Result<Sql, serde_json::Error> {
    insert_with(row, &())
}

/// [`insert`] of a table whose arguments need `keys` (see [`Table::Keys`]).
pub(crate) fn insert_with<T: Table>(row: &T, keys: &T::Keys) -> Result<Sql, serde_json::Error> {
    let mut q = Sql::new("insert into ");
    q.push(T::TABLE)
        .push(" (")
        .push(&T::WRITTEN.join(", "))
        .push(") values (");
    for (i, arg) in row.args_with(keys)?.into_iter().enumerate() {
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
pub(crate) fn update<T: Table<Keys = ()>>(
    row: &T,
    keep: &[&str],
) -> Result<Sql, serde_json::Error> {
    update_with(row, keep, &())
}

/// [`update`] of a table whose arguments need `keys` (see [`Table::Keys`]).
pub(crate) fn update_with<T: Table>(
    row: &T,
    keep: &[&str],
    keys: &T::Keys,
) -> Result<Sql, serde_json::Error> {
    debug_assert!(
        keep.iter().all(|k| T::WRITTEN.contains(k)),
        "{keep:?} names a column {} does not write",
        T::TABLE
    );
    let mut q = Sql::new("update ");
    q.push(T::TABLE).push(" set ");
    let mut first = true;
    for (column, arg) in T::WRITTEN.iter().zip(row.args_with(keys)?) {
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
    FanoutStatus,
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

/// The type of a `sealed` field's clear value in a [`table!`] declaration: how that value is sealed with the
/// store's cipher into the TEXT the column holds, and opened from it.
pub(crate) trait Sealable: Sized {
    /// The column's argument: `clear` (the value's argument, as [`Stored::arg`] makes it) sealed.
    fn seal(clear: Arg, cipher: &Cipher) -> Arg;

    /// The clear value of a stored one; an error names what failed.
    fn open(stored: &str, cipher: &Cipher) -> Result<Self, String>;
}

/// Text is stored as its sealed text, always.
impl Sealable for String {
    fn seal(clear: Arg, cipher: &Cipher) -> Arg {
        match clear {
            Arg::Text(text) => Arg::Text(cipher.encrypt(text.as_bytes())),
            other => unreachable!("a text value's argument is text: {other:?}"),
        }
    }

    fn open(stored: &str, cipher: &Cipher) -> Result<Self, String> {
        cipher.decrypt_string(stored).map_err(|e| e.to_string())
    }
}

/// Structured values are stored as their JSON text sealed, but for an empty list, which is stored as `[]`:
/// it holds no secret, and reading it costs no decryption.
impl<T: Serialize + DeserializeOwned> Sealable for Json<T> {
    fn seal(clear: Arg, cipher: &Cipher) -> Arg {
        match clear {
            Arg::Json(Value::Array(items)) if items.is_empty() => Arg::Text("[]".to_owned()),
            Arg::Json(value) => Arg::Text(cipher.encrypt(value.to_string().as_bytes())),
            other => unreachable!("a JSON value's argument is JSON: {other:?}"),
        }
    }

    fn open(stored: &str, cipher: &Cipher) -> Result<Self, String> {
        let text = open_json_text(stored, cipher).map_err(|e| e.to_string())?;
        serde_json::from_str(&text)
            .map(Json)
            .map_err(|e| e.to_string())
    }
}

/// The clear JSON text of a sealed JSON column (see [`Sealable`]). Stored text that is a JSON array or object
/// is clear — the empty list, and rows written before the column was sealed and not yet rewritten — for
/// sealed text is base64, which starts with neither; the rest is opened.
pub(crate) fn open_json_text<'a>(
    stored: &'a str,
    cipher: &Cipher,
) -> Result<Cow<'a, str>, CryptoError> {
    if stored.trim_start().starts_with(['[', '{']) {
        return Ok(Cow::Borrowed(stored));
    }
    cipher.decrypt_string(stored).map(Cow::Owned)
}

/// A sealed field read from a column of an sqlx row, opened with `cipher`; a value that does not open is a
/// decode error of that column.
pub(crate) fn get_sealed<'r, S, T, R>(
    row: &'r R,
    column: &str,
    cipher: &Cipher,
) -> Result<T, sqlx::Error>
where
    R: sqlx::Row,
    S: Sealable,
    T: Stored<S>,
    &'r str: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
{
    let stored = row.try_get::<&'r str, _>(column)?;
    S::open(stored, cipher)
        .and_then(T::load)
        .map_err(|e| sqlx::Error::ColumnDecode {
            index: column.to_owned(),
            source: format!("a sealed column: {e}").into(),
        })
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

/// Tenant ids in projections (`sql_row!`, tuples) and sqlx binds: read from and bound as their TEXT column
/// by both sqlx drivers, and read inline.
macro_rules! text_ids {
    ($($t:ty),+) => {
        $(
            impl<DB: sqlx::Database> sqlx::Type<DB> for $t
            where
                String: sqlx::Type<DB>,
            {
                fn type_info() -> DB::TypeInfo {
                    <String as sqlx::Type<DB>>::type_info()
                }
                fn compatible(ty: &DB::TypeInfo) -> bool {
                    <String as sqlx::Type<DB>>::compatible(ty)
                }
            }

            impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $t
            where
                String: sqlx::Decode<'r, DB>,
            {
                fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                    <String as sqlx::Decode<'r, DB>>::decode(value).map(<$t>::from)
                }
            }

            impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $t
            where
                String: sqlx::Encode<'q, DB>,
            {
                fn encode_by_ref(
                    &self,
                    buf: &mut <DB as sqlx::Database>::ArgumentBuffer<'q>,
                ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                    <String as sqlx::Encode<'q, DB>>::encode_by_ref(&self.0, buf)
                }
            }

            impl rusqlite::types::FromSql for $t {
                fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
                    String::column_result(value).map(<$t>::from)
                }
            }

            impl Column for $t {
                fn read(c: &mut Columns<'_, '_>, name: &str) -> rusqlite::Result<Self> {
                    c.get(name)
                }
            }
        )+
    };
}
text_ids!(OrganizationId, EnvironmentId);

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
        let cipher = crate::crypto::Cipher::from_bytes(&[1; 32]);
        let inline = stmt
            .query_row([], |r| <Thing as ReadRow>::read(r, &cipher))
            .unwrap();
        assert_eq!(inline, thing);
    }

    mod sealed {
        use sqlx::types::Json;

        #[derive(Debug, PartialEq)]
        pub struct Locker {
            pub id: String,
            pub token: String,
            pub items: Vec<String>,
        }

        crate::store::row::table! {
            Locker => "lockers" {
                id: String,
            }
            sealed {
                token as token_sealed: String,
                items: Json<Vec<String>>,
            }
        }
    }

    /// Sealed columns are declared as a column type: written sealed with the store's cipher (an empty list in
    /// clear), and read back opened by both libraries' readers; clear JSON (a row from before sealing) still
    /// reads, and another key does not open them.
    #[tokio::test]
    async fn sealed_columns_are_written_sealed_and_read_back_opened() {
        use super::{insert_with, Table};
        use crate::crypto::Cipher;
        use crate::store::page::ReadWith;
        use crate::store::sql::bind_args;
        use crate::store::sqlite::rows::ReadRow;
        use sealed::Locker;

        assert_eq!(Locker::COLUMNS, "id, token_sealed, items");
        let cipher = Cipher::from_bytes(&[7; 32]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let pool = SqlitePoolOptions::new().connect(&url).await.unwrap();
        sqlx::query("create table lockers (id text primary key, token_sealed text not null, items text not null)")
            .execute(&pool)
            .await
            .unwrap();
        let full = Locker {
            id: "a".into(),
            token: "xoxb-secret".into(),
            items: vec!["https://hooks.example/secret".into()],
        };
        let empty = Locker {
            id: "b".into(),
            token: "t".into(),
            items: vec![],
        };
        for l in [&full, &empty] {
            let q = insert_with(l, &cipher).unwrap();
            bind_args!(sqlx::query(&q.text), q.args)
                .execute(&pool)
                .await
                .unwrap();
        }
        let stored: Vec<(String, String)> =
            sqlx::query_as("select token_sealed, items from lockers order by id")
                .fetch_all(&pool)
                .await
                .unwrap();
        assert!(!stored[0].0.contains("secret") && !stored[0].1.contains("secret"));
        assert_eq!(cipher.decrypt_string(&stored[0].0).unwrap(), "xoxb-secret");
        assert_eq!(stored[1].1, "[]", "an empty list is stored in clear");
        // A row written before the column was sealed.
        sqlx::query("insert into lockers values ('c', $1, '[\"clear\"]')")
            .bind(cipher.encrypt(b"t"))
            .execute(&pool)
            .await
            .unwrap();

        let select = format!("select {} from lockers order by id", Locker::COLUMNS);
        let rows = sqlx::query(&select).fetch_all(&pool).await.unwrap();
        let read: Vec<Locker> = rows
            .iter()
            .map(|r| Locker::read_with(r, &cipher).unwrap())
            .collect();
        assert_eq!(&read[..2], &[full, empty]);
        assert_eq!(read[2].items, ["clear"]);
        let other = Cipher::from_bytes(&[8; 32]);
        let err = Locker::read_with(&rows[0], &other).unwrap_err();
        assert!(
            matches!(&err, sqlx::Error::ColumnDecode { index, .. } if index == "token_sealed"),
            "{err:?}"
        );

        let conn = rusqlite::Connection::open(&path).unwrap();
        let mut stmt = conn.prepare(&select).unwrap();
        let inline: Vec<Locker> = stmt
            .query_map([], |r| Locker::read(r, &cipher))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(inline, read);
        assert!(stmt.query_row([], |r| Locker::read(r, &other)).is_err());
    }

    #[test]
    fn statuses_are_stored_as_their_names() {
        use super::{Arg, Stored};
        use crate::domain::fanout::FanoutStatus;
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
        let fanouts: Vec<Arg> = FanoutStatus::ALL.iter().map(|s| s.arg().unwrap()).collect();
        assert_eq!(
            fanouts,
            ["running", "completed", "canceled"].map(|s| Arg::Text(s.to_owned()))
        );
        for s in FanoutStatus::ALL {
            assert_eq!(FanoutStatus::load(s.as_str().to_owned()), Ok(s));
        }
        let bad = FanoutStatus::load("done".to_owned()).unwrap_err();
        assert!(bad.contains("fan-out status \"done\""), "{bad}");
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
