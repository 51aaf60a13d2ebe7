//! Contexts (`type:id`, e.g. `tenant:acme`): the records a trigger, a channel connection or endpoint and an
//! Inbox session name, and that the contexts API creates, lists, changes and deletes. A context's key
//! `type:id` is its column `id` (derived from the two parts), the cursor of its list.

use serde_json::Value;
use sqlx::types::Json;

use super::page::{env_scope, Keyed, Listing, Page, PageRequest, SortColumn};
use super::row::sql_row;
use super::sql::{bind_args, like_escape, Sql};
use super::{is_unique_violation, on_db, Cost, Store};
use crate::domain::context::{Context, ContextEntry};
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::{Error, Result};

sql_row! {
    /// A stored context as read; `id` is its key `type:id`.
    struct ContextRow {
        id: String,
        context_type: String,
        context_id: String,
        data: Option<Json<Value>>,
        created_at: i64,
        updated_at: i64,
    }
}

impl Keyed for ContextRow {
    fn key(&self) -> &str {
        &self.id
    }
}

impl From<ContextRow> for Context {
    fn from(r: ContextRow) -> Self {
        Self {
            entry: ContextEntry {
                kind: r.context_type,
                id: r.context_id,
                data: r.data.map(|d| d.0),
            },
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
    }
}

/// What the context list is ordered by (the key breaks ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextOrder {
    CreatedAt,
    UpdatedAt,
}

impl From<ContextOrder> for SortColumn {
    fn from(o: ContextOrder) -> Self {
        match o {
            ContextOrder::CreatedAt => SortColumn::Int("created_at"),
            ContextOrder::UpdatedAt => SortColumn::Int("updated_at"),
        }
    }
}

/// Filters of the context list, combined with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextFilter {
    /// The exact type.
    pub kind: Option<String>,
    /// The exact id.
    pub id: Option<String>,
    /// A case-insensitive substring of the key `type:id`.
    pub search: Option<String>,
}

/// The context `kind:id` of `env`.
fn one(env: &EnvironmentId, kind: &str, id: &str) -> Sql {
    let mut q = env_scope(env);
    q.push(" and context_type = ").bind(kind);
    q.push(" and context_id = ").bind(id);
    q
}

const INSERT: &str =
    "insert into contexts (environment_id, context_type, context_id, data, created_at, updated_at)
     values ($1, $2, $3, $4, $5, $5)";

impl Store {
    /// Records contexts that do not exist yet (existing ones keep their data).
    pub async fn ensure_contexts(
        &self,
        env: &EnvironmentId,
        entries: &[ContextEntry],
    ) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let now = Timestamp::now().0;
        let q =
            format!("{INSERT} on conflict (environment_id, context_type, context_id) do nothing");
        for e in entries {
            on_db!(self.w(), p => sqlx::query(&q)
                .bind(env.as_str()).bind(&e.kind).bind(&e.id).bind(e.data.clone().map(Json)).bind(now)
                .execute(p).await.map(|_| ()))?;
        }
        Ok(())
    }

    /// Records a new context; `Err(Duplicate)` when `type:id` exists in the environment.
    pub async fn insert_context(&self, env: &EnvironmentId, c: &Context) -> Result<()> {
        let e = &c.entry;
        let res = on_db!(self.w(), p => sqlx::query(INSERT)
            .bind(env.as_str()).bind(&e.kind).bind(&e.id).bind(e.data.clone().map(Json))
            .bind(c.created_at.0)
            .execute(p).await.map(|_| ()));
        match res {
            Ok(()) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// The context `kind:id`.
    pub async fn get_context(
        &self,
        env: &EnvironmentId,
        kind: &str,
        id: &str,
    ) -> Result<Option<Context>> {
        let mut q = Sql::new("select ");
        q.push(ContextRow::COLUMNS).push(" from contexts where ");
        q.append(&one(env, kind, id));
        Ok(self
            .row::<ContextRow>(Cost::Point, q)
            .await?
            .map(Into::into))
    }

    /// The stored contexts of `type:id` keys, in the keys' order (unknown keys are left out).
    pub async fn get_contexts(
        &self,
        env: &EnvironmentId,
        keys: &[String],
    ) -> Result<Vec<ContextEntry>> {
        let mut out = Vec::with_capacity(keys.len());
        for (kind, id) in keys.iter().filter_map(|k| k.split_once(':')) {
            if let Some(c) = self.get_context(env, kind, id).await? {
                out.push(c.entry);
            }
        }
        Ok(out)
    }

    /// Replaces the data of the context `kind:id` (one statement); `None` when there is no such context.
    pub async fn update_context_data(
        &self,
        env: &EnvironmentId,
        kind: &str,
        id: &str,
        data: Value,
        now: Timestamp,
    ) -> Result<Option<Context>> {
        let mut q = Sql::new("update contexts set data = ");
        // A change is always later than the last one, even within a millisecond.
        q.bind(data)
            .push(", updated_at = case when updated_at < ")
            .bind(now.0);
        q.push(" then ")
            .bind(now.0)
            .push(" else updated_at + 1 end");
        q.push(" where ").append(&one(env, kind, id));
        q.push(" returning ").push(ContextRow::COLUMNS);
        let rows: Vec<ContextRow> = self.rows_for_update(q).await?;
        Ok(rows.into_iter().next().map(Into::into))
    }

    /// Deletes the context `kind:id`; false when there was none. What names it (channel connections and
    /// endpoints, notifications) keeps its key, as in Novu.
    pub async fn delete_context(&self, env: &EnvironmentId, kind: &str, id: &str) -> Result<bool> {
        let mut q = Sql::new("delete from contexts where ");
        q.append(&one(env, kind, id));
        let n = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args)
            .execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// A page of the environment's contexts.
    pub async fn list_contexts(
        &self,
        env: &EnvironmentId,
        filter: &ContextFilter,
        page: &PageRequest<ContextOrder>,
    ) -> Result<Page<Context>> {
        let mut where_ = env_scope(env);
        if let Some(kind) = &filter.kind {
            where_.push(" and context_type = ").bind(kind.as_str());
        }
        if let Some(id) = &filter.id {
            where_.push(" and context_id = ").bind(id.as_str());
        }
        if let Some(search) = &filter.search {
            let pattern = format!("%{}%", like_escape(&search.to_lowercase()));
            where_
                .push(" and lower(id) like ")
                .bind(pattern)
                .push(" escape '\\'");
        }
        let listing = Listing {
            columns: ContextRow::COLUMNS,
            from: "contexts",
            filter: where_,
            cursor_scope: env_scope(env),
        };
        let page = self
            .cursor_page::<ContextRow>(listing, &page.by_column())
            .await?;
        Ok(page.map(Into::into))
    }
}

#[cfg(test)]
mod tests {
    use crate::store::plans::{migrated, plan};

    #[test]
    fn context_lists_and_cursors_read_their_index() {
        let conn = migrated();
        let page = plan(
            &conn,
            "select id from contexts where environment_id = ?1 order by created_at desc, id desc limit 11",
        );
        assert!(page.contains("INDEX contexts_created"), "{page}");
        assert!(!page.contains("TEMP B-TREE"), "{page}");
        let cursor = plan(
            &conn,
            "select created_at from contexts where environment_id = ?1 and id = ?2",
        );
        assert!(cursor.contains("INDEX contexts_key"), "{cursor}");
    }
}
