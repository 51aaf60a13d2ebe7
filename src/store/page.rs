//! Keyset (cursor) pagination shared by every cursor list (design.md §3): order by (`sort`, `id`), the
//! cursor is an item's `id`, pages read `limit + 1` rows and `totalCount` stops counting at 50,001.

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use super::sql::{Arg, Sql};
use super::{Cost, ReadRow, Store};
use crate::crypto::Cipher;
use crate::domain::EnvironmentId;
use crate::error::Result;

/// Counting stops here; a count that reaches it is reported as [`TOTAL_COUNT_CAP`] with the capped flag.
pub const COUNT_LIMIT: i64 = 50_001;
pub const TOTAL_COUNT_CAP: i64 = 50_000;

/// A row type read from the rows of one sqlx driver, with the store's cipher at hand for its sealed
/// columns: any `FromRow` type (which has none), and the stored types declared with sealed columns (see
/// `row::table!`).
pub trait ReadWith<Row>: Sized {
    fn read_with(row: &Row, cipher: &Cipher) -> Result<Self, sqlx::Error>;
}

impl<Row: sqlx::Row, T: for<'r> sqlx::FromRow<'r, Row>> ReadWith<Row> for T {
    fn read_with(row: &Row, _: &Cipher) -> Result<Self, sqlx::Error> {
        T::from_row(row)
    }
}

/// A row type readable from both drivers.
pub trait PortableRow: ReadWith<SqliteRow> + ReadWith<PgRow> + Send + Unpin {}
impl<T> PortableRow for T where T: ReadWith<SqliteRow> + ReadWith<PgRow> + Send + Unpin {}

/// Gives the cursor of a row.
pub trait Keyed {
    fn key(&self) -> &str;
}

/// The column a list is ordered by; `id` itself breaks ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortColumn {
    /// Order by `id` alone (ids sort by creation).
    Id,
    /// A BIGINT column such as `created_at`.
    Int(&'static str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    After(String),
    Before(String),
}

/// One page of a cursor list. `S` is what it is ordered by: a list's own order type (such as
/// `ChannelOrder`) as callers outside the store build it, a [`SortColumn`] as the paginator reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest<S = SortColumn> {
    pub cursor: Option<Cursor>,
    pub include_cursor: bool,
    pub limit: i64,
    pub sort: S,
    pub descending: bool,
}

impl<S: Copy + Into<SortColumn>> PageRequest<S> {
    /// The same page, ordered by the column its list maps `sort` to.
    pub fn by_column(&self) -> PageRequest {
        PageRequest {
            cursor: self.cursor.clone(),
            include_cursor: self.include_cursor,
            limit: self.limit,
            sort: self.sort.into(),
            descending: self.descending,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub next: Option<String>,
    pub previous: Option<String>,
    pub total_count: i64,
    pub total_count_capped: bool,
}

impl<T> Page<T> {
    pub fn empty() -> Self {
        Self {
            data: Vec::new(),
            next: None,
            previous: None,
            total_count: 0,
            total_count_capped: false,
        }
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            next: self.next,
            previous: self.previous,
            total_count: self.total_count,
            total_count_capped: self.total_count_capped,
        }
    }

    /// [`Page::map`] with a conversion that may fail (the first failure is the result).
    pub fn try_map<U, E>(self, f: impl FnMut(T) -> Result<U, E>) -> Result<Page<U>, E> {
        Ok(Page {
            data: self.data.into_iter().map(f).collect::<Result<_, _>>()?,
            next: self.next,
            previous: self.previous,
            total_count: self.total_count,
            total_count_capped: self.total_count_capped,
        })
    }
}

/// `environment_id = $n`: the tenant condition a list's filter and cursor scope start with.
pub(crate) fn env_scope(env: &EnvironmentId) -> Sql {
    let mut s = Sql::new("environment_id = ");
    s.bind(env.as_str());
    s
}

/// What a list looks like to the paginator.
pub struct Listing<'a> {
    /// `select` list, e.g. `id, name, …`.
    pub columns: &'a str,
    /// Table (with alias if the filter uses one).
    pub from: &'a str,
    /// Filter (without cursor conditions). Must start with the tenant condition.
    pub filter: Sql,
    /// How to find the cursor row: a condition on the table restricted to the tenant, e.g. `environment_id = $1`.
    pub cursor_scope: Sql,
}

impl Store {
    /// Reads one page.
    pub(crate) async fn cursor_page<R: PortableRow + ReadRow + Keyed + 'static>(
        &self,
        listing: Listing<'_>,
        req: &PageRequest,
    ) -> Result<Page<R>> {
        let sort_col = match req.sort {
            SortColumn::Id => "id",
            SortColumn::Int(c) => c,
        };

        // The cursor row's sort key; an unknown cursor gives an empty page.
        let (backward, anchor) = match &req.cursor {
            None => (false, None),
            Some(c) => {
                let (backward, id) = match c {
                    Cursor::After(id) => (false, id),
                    Cursor::Before(id) => (true, id),
                };
                match self.cursor_anchor(&listing, req.sort, id).await? {
                    Some(v) => (backward, Some((v, id.clone()))),
                    None => return Ok(Page::empty()),
                }
            }
        };

        // Scan direction: forward pages follow the requested order; backward pages run against it.
        let scan_desc = req.descending != backward;
        let mut q = Sql::new("select ");
        q.push(listing.columns)
            .push(" from ")
            .push(listing.from)
            .push(" where ");
        q.append(&listing.filter);
        if let Some((value, id)) = &anchor {
            q.push(" and ");
            push_keyset(
                &mut q,
                sort_col,
                req.sort,
                value,
                id,
                scan_desc,
                req.include_cursor,
            );
        }
        push_order(&mut q, sort_col, req.sort, scan_desc);
        q.push(" limit ").bind(req.limit + 1);
        let mut rows: Vec<R> = self.rows(Cost::Scan, q).await?;
        let more_in_scan = rows.len() as i64 > req.limit;
        // A first page that holds every matching row is its own count; otherwise count (capped).
        let total = if anchor.is_none() && !more_in_scan {
            rows.len() as i64
        } else {
            self.count_capped(listing.from, &listing.filter).await?
        };
        rows.truncate(req.limit as usize);
        if backward {
            rows.reverse();
        }

        // Is there anything on the other side of the cursor? (only when a cursor was given)
        let other_side = match &anchor {
            Some(_) if !rows.is_empty() => {
                let edge =
                    if backward { rows.last() } else { rows.first() }.map(|r| r.key().to_owned());
                match edge {
                    Some(edge_id) => {
                        self.exists_beyond(&listing, sort_col, req.sort, &edge_id, !scan_desc)
                            .await?
                    }
                    None => false,
                }
            }
            _ => false,
        };

        let (has_next, has_prev) = if backward {
            (other_side, more_in_scan)
        } else {
            (more_in_scan, other_side)
        };
        let next = if has_next {
            rows.last().map(|r| r.key().to_owned())
        } else {
            None
        };
        let previous = if has_prev {
            rows.first().map(|r| r.key().to_owned())
        } else {
            None
        };
        Ok(Page {
            data: rows,
            next,
            previous,
            total_count: total.min(TOTAL_COUNT_CAP),
            total_count_capped: total >= COUNT_LIMIT,
        })
    }
}

impl Store {
    /// The capped count of the rows of `from` matching `filter` (it stops at [`COUNT_LIMIT`]).
    pub(crate) async fn count_capped(&self, from: &str, filter: &Sql) -> Result<i64> {
        self.count_at_most(from, filter, COUNT_LIMIT).await
    }

    /// How many rows of `from` match `filter`, counting no further than `limit`:
    /// `select count(*) from (select 1 … limit <limit>)`.
    pub(crate) async fn count_at_most(&self, from: &str, filter: &Sql, limit: i64) -> Result<i64> {
        let mut q = Sql::new("select count(*) from (select 1 from ");
        q.push(from).push(" where ").append(filter);
        q.push(" limit ").bind(limit).push(") t");
        Ok(self.row::<(i64,)>(Cost::Scan, q).await?.map_or(0, |(n,)| n))
    }

    /// The sort key of the row `id` in the list's scope, if there is one.
    async fn cursor_anchor(
        &self,
        listing: &Listing<'_>,
        sort: SortColumn,
        id: &str,
    ) -> Result<Option<Arg>> {
        let mut q = Sql::new("select ");
        match sort {
            SortColumn::Id => q.push("id"),
            SortColumn::Int(c) => q.push(c),
        };
        q.push(" from ")
            .push(listing.from)
            .push(" where ")
            .append(&listing.cursor_scope);
        q.push(" and id = ").bind(id);
        Ok(match sort {
            SortColumn::Id => self
                .row::<(String,)>(Cost::Point, q)
                .await?
                .map(|(v,)| Arg::Text(v)),
            SortColumn::Int(_) => self
                .row::<(i64,)>(Cost::Point, q)
                .await?
                .map(|(v,)| Arg::Int(v)),
        })
    }

    /// Is there a row past `edge_id` (exclusive) when scanning in direction `desc`?
    async fn exists_beyond(
        &self,
        listing: &Listing<'_>,
        sort_col: &str,
        sort: SortColumn,
        edge_id: &str,
        desc: bool,
    ) -> Result<bool> {
        let Some(value) = self.cursor_anchor(listing, sort, edge_id).await? else {
            return Ok(false);
        };
        let mut q = Sql::new("select 1 from ");
        q.push(listing.from)
            .push(" where ")
            .append(&listing.filter)
            .push(" and ");
        push_keyset(&mut q, sort_col, sort, &value, edge_id, desc, false);
        q.push(" limit 1");
        Ok(self.row::<(i32,)>(Cost::Scan, q).await?.is_some())
    }
}

fn push_keyset(
    q: &mut Sql,
    sort_col: &str,
    sort: SortColumn,
    value: &Arg,
    id: &str,
    desc: bool,
    inclusive: bool,
) {
    let op = match (desc, inclusive) {
        (true, false) => " < ",
        (true, true) => " <= ",
        (false, false) => " > ",
        (false, true) => " >= ",
    };
    let strict = if desc { " < " } else { " > " };
    match sort {
        SortColumn::Id => {
            q.push("id").push(op).bind(id);
        }
        SortColumn::Int(_) => {
            q.push("(").push(sort_col).push(strict).bind(value.clone());
            q.push(" or (")
                .push(sort_col)
                .push(" = ")
                .bind(value.clone());
            q.push(" and id").push(op).bind(id).push("))");
        }
    }
}

fn push_order(q: &mut Sql, sort_col: &str, sort: SortColumn, desc: bool) {
    let dir = if desc { " desc" } else { " asc" };
    match sort {
        SortColumn::Id => q.push(" order by id").push(dir),
        SortColumn::Int(_) => q
            .push(" order by ")
            .push(sort_col)
            .push(dir)
            .push(", id")
            .push(dir),
    };
}
