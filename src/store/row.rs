//! Row structs read by column name from either driver.
//!
//! `sql_row!` declares a struct and implements `sqlx::FromRow` for SQLite's and PostgreSQL's rows, reading each
//! field from the column of the same name. It does what `#[derive(sqlx::FromRow)]` did for these structs without
//! sqlx's proc-macro crate, which compiled a second copy of both drivers (and of SQLite's C source) for the host.
//! A field written `name: Type as Stored` is read as `Stored` and converted with `TryFrom`.

use std::fmt::Display;

macro_rules! sql_row {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $fty:ty $(as $stored:ty)? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $fty ),*
        }
        $crate::store::row::sql_row!(@impl $name, sqlx::sqlite::SqliteRow, $($field $(as $stored)?),*);
        $crate::store::row::sql_row!(@impl $name, sqlx::postgres::PgRow, $($field $(as $stored)?),*);
    };
    (@impl $name:ident, $row:ty, $($field:ident $(as $stored:ty)?),*) => {
        impl<'r> sqlx::FromRow<'r, $row> for $name {
            fn from_row(row: &'r $row) -> ::std::result::Result<Self, sqlx::Error> {
                ::std::result::Result::Ok(Self {
                    $( $field: $crate::store::row::sql_row!(@get row, $field $(as $stored)?) ),*
                })
            }
        }
    };
    (@get $row:ident, $field:ident) => {
        sqlx::Row::try_get($row, stringify!($field))?
    };
    (@get $row:ident, $field:ident as $stored:ty) => {
        $crate::store::row::convert(
            sqlx::Row::try_get::<$stored, _>($row, stringify!($field))?,
            stringify!($field),
        )?
    };
}
pub(crate) use sql_row;

/// Converts a stored value into its field's type; a value the type rejects is a decode error of its column.
pub(crate) fn convert<S, T>(stored: S, column: &str) -> Result<T, sqlx::Error>
where
    T: TryFrom<S>,
    T::Error: Display,
{
    T::try_from(stored).map_err(|e| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: e.to_string().into(),
    })
}

#[cfg(test)]
mod tests {
    use sqlx::sqlite::SqlitePoolOptions;

    #[derive(Debug, PartialEq, Eq)]
    struct Even(i64);

    impl TryFrom<i64> for Even {
        type Error = String;
        fn try_from(v: i64) -> Result<Self, String> {
            if v % 2 == 0 {
                Ok(Even(v))
            } else {
                Err(format!("{v} is odd"))
            }
        }
    }

    sql_row! {
        #[derive(Debug)]
        struct Sample {
            /// A documented field.
            name: String,
            note: Option<String>,
            even: Even as i64,
        }
    }

    #[tokio::test]
    async fn reads_fields_by_column_name_and_converts_marked_ones() {
        let pool = SqlitePoolOptions::new()
            .connect("sqlite::memory:")
            .await
            .unwrap();
        let row: Sample = sqlx::query_as("select 4 as even, null as note, 'a' as name")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(
            (row.name.as_str(), row.note, row.even),
            ("a", None, Even(4))
        );

        let err = sqlx::query_as::<_, Sample>("select 3 as even, 'n' as note, 'a' as name")
            .fetch_one(&pool)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, sqlx::Error::ColumnDecode { index, .. } if index == "even"),
            "{err:?}"
        );
        assert!(err.to_string().contains("3 is odd"), "{err}");

        let missing = sqlx::query_as::<_, Sample>("select 'a' as name, 2 as even")
            .fetch_one(&pool)
            .await
            .unwrap_err();
        assert!(
            matches!(&missing, sqlx::Error::ColumnNotFound(c) if c == "note"),
            "{missing:?}"
        );
    }
}
