//! Cursor-pagination query parameters and the page body shared by every cursor list (spec §4.1).

use serde::Serialize;

use super::extract::QueryMap;
use crate::error::{Error, Result, Validation};
use crate::store::page::{Cursor, Page, PageRequest};

pub const DEFAULT_LIMIT: i64 = 10;
pub const MAX_LIMIT: i64 = 100;

/// Reads `after`, `before`, `limit`, `orderDirection`, `orderBy`, `includeCursor`.
/// `order_by` maps accepted `orderBy` values to the list's order (a store type); the first entry is the
/// default.
pub fn page_request<S: Copy>(
    q: &QueryMap,
    v: &mut Validation,
    order_by: &[(&str, S)],
) -> Result<PageRequest<S>> {
    let after = q.string("after");
    let before = q.string("before");
    if after.is_some() && before.is_some() {
        return Err(Error::bad_request(
            "Cannot specify both \"before\" and \"after\" cursors at the same time.",
        ));
    }
    let limit = q.int(v, "limit", 1, MAX_LIMIT).unwrap_or(DEFAULT_LIMIT);
    let descending = descending(q, v);
    let sort = match q.string("orderBy") {
        None => order_by[0].1,
        Some(name) => match order_by.iter().find(|(n, _)| *n == name) {
            Some((_, col)) => *col,
            None => {
                let names: Vec<&str> = order_by.iter().map(|(n, _)| *n).collect();
                v.add(
                    "orderBy",
                    format!("orderBy must be one of: {}", names.join(", ")),
                    name,
                );
                order_by[0].1
            }
        },
    };
    let include_cursor = q.bool(v, "includeCursor").unwrap_or(false);
    let cursor = after.map(Cursor::After).or(before.map(Cursor::Before));
    Ok(PageRequest {
        cursor,
        include_cursor,
        limit,
        sort,
        descending,
    })
}

/// `{data, next, previous, totalCount, totalCountCapped}`: all five always present.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CursorPage<T> {
    pub data: Vec<T>,
    pub next: Option<String>,
    pub previous: Option<String>,
    pub total_count: i64,
    pub total_count_capped: bool,
}

impl<T> CursorPage<T> {
    pub fn from_page<U>(page: Page<U>, f: impl FnMut(U) -> T) -> Self {
        let page = page.map(f);
        Self {
            data: page.data,
            next: page.next,
            previous: page.previous,
            total_count: page.total_count,
            total_count_capped: page.total_count_capped,
        }
    }
}

/// `orderDirection`: `DESC` (the default) or `ASC`, in any case; anything else is a validation error.
pub fn descending(q: &QueryMap, v: &mut Validation) -> bool {
    match q.string("orderDirection") {
        None => true,
        Some(d) if d.eq_ignore_ascii_case("desc") => true,
        Some(d) if d.eq_ignore_ascii_case("asc") => false,
        Some(d) => {
            v.add("orderDirection", "orderDirection must be ASC or DESC", d);
            true
        }
    }
}
