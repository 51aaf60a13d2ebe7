//! Subscriber search (`GET /v2/subscribers`, the activity feed's `search`): case-sensitive substrings of
//! email, phone and name, served by trigram indexes (FTS5 on SQLite, steered by the statistics of `search`;
//! pg_trgm on PostgreSQL).

use super::page::{Listing, Page, PageRequest, SortColumn};
use super::row::Table;
use super::search;
use super::sql::{glob_escape, like_escape, Sql};
use super::{Cost, Dialect, Store};
use crate::domain::subscriber::Subscriber;
use crate::domain::EnvironmentId;
use crate::error::Result;

/// What a subscriber search is ordered by (`id` breaks ties; ids sort by creation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriberOrder {
    Id,
    CreatedAt,
    UpdatedAt,
}

impl From<SubscriberOrder> for SortColumn {
    fn from(o: SubscriberOrder) -> Self {
        match o {
            SubscriberOrder::Id => SortColumn::Id,
            SubscriberOrder::CreatedAt => SortColumn::Int("created_at"),
            SubscriberOrder::UpdatedAt => SortColumn::Int("updated_at"),
        }
    }
}

/// Filters of `GET /v2/subscribers`, combined with AND. `email`, `phone`, `name` are case-sensitive substrings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubscriberSearch {
    pub email: Option<String>,
    pub phone: Option<String>,
    pub name: Option<String>,
    pub subscriber_id: Option<String>,
}

impl SubscriberSearch {
    /// Whether a substring term is long enough (three characters) for the trigram indexes, which SQLite
    /// reads steered by the trigram statistics.
    pub fn uses_trigrams(&self) -> bool {
        [&self.email, &self.phone, &self.name]
            .iter()
            .any(|t| t.as_ref().is_some_and(|t| t.chars().count() >= 3))
    }
}

impl Store {
    /// One page of the environment's non-deleted subscribers matching `search`.
    pub async fn search_subscribers(
        &self,
        env: &EnvironmentId,
        search: &SubscriberSearch,
        page: &PageRequest<SubscriberOrder>,
    ) -> Result<Page<Subscriber>> {
        // SQLite: when the trigram index narrows the rows, make the planner start from it (unary `+` keeps the
        // environment index out) instead of walking the environment's whole id index and probing each row.
        let trigram = self.dialect() == Dialect::Sqlite && search.uses_trigrams();
        let mut filter = Sql::new(if trigram {
            "+environment_id = "
        } else {
            "environment_id = "
        });
        filter.bind(env.as_str()).push(if trigram {
            " and +deleted = false"
        } else {
            " and deleted = false"
        });
        if let Some(id) = &search.subscriber_id {
            filter.push(" and subscriber_id = ").bind(id);
        }
        for (column, term) in [
            ("email", &search.email),
            ("phone", &search.phone),
            ("full_name", &search.name),
        ] {
            if let Some(term) = term {
                self.push_substring(&mut filter, column, term);
            }
        }
        let mut scope = Sql::new("environment_id = ");
        scope.bind(env.as_str());
        let listing = Listing {
            columns: Subscriber::COLUMNS,
            from: "subscribers",
            filter,
            cursor_scope: scope,
        };
        self.cursor_page::<Subscriber>(listing, &page.by_column())
            .await
    }

    /// A case-sensitive substring condition served by the trigram index of each database.
    fn push_substring(&self, filter: &mut Sql, column: &str, term: &str) {
        match self.dialect() {
            // SQLite, terms of 3+ characters: the FTS5 trigram index (case_sensitive 1). With trigram
            // statistics, match the rarest trigrams worth reading and recheck exactly; until they are read, GLOB.
            // Shorter terms have no trigram: `instr` on the row, and the keyset scan stops after a page.
            Dialect::Sqlite if term.chars().count() >= 3 => {
                let stats = self.search_stats.snapshot().0;
                // Five characters or more: the 5-gram index (migration 0009), else the trigram one.
                let long = term.chars().count() >= search::GRAM && stats.is_some();
                let index = if long {
                    format!("subscribers_{column}_grams")
                } else {
                    format!("subscribers_{column}_search")
                };
                filter
                    .push(" and seq in (select rowid from ")
                    .push(&index)
                    .push(" where ");
                match stats {
                    Some(stats) => {
                        let query = if long {
                            search::rare_gram_query(column, term, &stats)
                        } else {
                            search::rare_trigram_query(column, term, &stats)
                        };
                        filter.push(&index).push(" match ");
                        filter.bind(query).push(")");
                        push_instr(filter, column, term);
                    }
                    None => {
                        filter
                            .push(column)
                            .push(" glob ")
                            .bind(format!("*{}*", glob_escape(term)))
                            .push(")");
                    }
                }
            }
            Dialect::Sqlite => push_instr(filter, column, term),
            // PostgreSQL: GIN pg_trgm indexes serve LIKE; LIKE itself is case-sensitive.
            Dialect::Postgres => {
                filter.push(" and ").push(column).push(" like ");
                filter
                    .bind(format!("%{}%", like_escape(term)))
                    .push(" escape '\\'");
            }
        }
    }
}

impl Store {
    /// Claims a refresh of the trigram statistics when they are missing or old (SQLite; false on PostgreSQL,
    /// and while another refresh is under way). The claimer then reads them with
    /// [`Store::load_search_stats`]; the runtime does that in the background (`background::refresh_search_stats`).
    pub fn claim_stale_search_stats(&self) -> bool {
        self.dialect() == Dialect::Sqlite
            && self.search_stats.snapshot().1
            && self.search_stats.begin_refresh()
    }

    /// Reads the trigram statistics and ends the refresh claimed by [`Store::claim_stale_search_stats`]; on
    /// an error the statistics stay as they were.
    pub async fn load_search_stats(&self) -> Result<()> {
        let table = self.read_search_stats().await;
        self.search_stats
            .finish_refresh(table.as_ref().ok().cloned());
        table.map(|_| ())
    }

    async fn read_search_stats(&self) -> Result<search::Frequencies> {
        let mut table = search::Frequencies {
            rows: self
                .row::<(i64,)>(Cost::Scan, Sql::new("select count(*) from subscribers"))
                .await?
                .map_or(0, |(n,)| n),
            ..Default::default()
        };
        for column in ["email", "phone", "full_name"] {
            let q = Sql::new(&format!("select term, doc from subscribers_{column}_vocab"));
            let rows: Vec<(String, i64)> = self.rows(Cost::Scan, q).await?;
            table.grams.extend(
                rows.into_iter()
                    .map(|(term, doc)| ((column.to_owned(), term), doc)),
            );
        }
        Ok(table)
    }

    /// Whether trigram statistics are loaded (SQLite).
    pub fn search_stats_loaded(&self) -> bool {
        self.search_stats.snapshot().0.is_some()
    }

    /// Reads the trigram statistics now (SQLite; a no-op on PostgreSQL). Searches refresh them by themselves.
    pub async fn refresh_search_stats(&self) -> Result<()> {
        if self.dialect() == Dialect::Sqlite && self.search_stats.begin_refresh() {
            self.load_search_stats().await?;
        }
        Ok(())
    }
}

/// SQLite: ` and instr(<column>, <term>) > 0`, the exact (case-sensitive) substring check.
fn push_instr(filter: &mut Sql, column: &str, term: &str) {
    filter
        .push(" and instr(")
        .push(column)
        .push(", ")
        .bind(term)
        .push(") > 0");
}
