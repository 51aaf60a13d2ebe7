//! Workflows; steps are stored as one JSON array per workflow.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::types::Json;

use super::outbox::{record_events, Event, Handover, Receivers};
use super::row::{insert, sql_row, table, update, Table};
use super::sql::{bind_args, like_escape, Sql};
use super::{is_unique_violation, on_db, Cost, Dialect, Store};
use crate::domain::id::is_object_id;
use crate::domain::promotion::Write;
use crate::domain::workflow::{Step, Workflow, WorkflowStatus};
use crate::domain::{EnvironmentId, Timestamp, WorkflowRef};
use crate::error::{Error, Result};

/// How long [`Store::get_workflow_cached`] reuses a definition it read. Writes through this process clear
/// the cache at once; another process's change reaches this one within this time.
pub const WORKFLOW_TTL: Duration = Duration::from_secs(1);

/// A workflow definition (or its absence) and when it was read.
type CachedWorkflow = (Instant, Option<Arc<Workflow>>);

/// Workflow definitions read by triggers and workers, by (environment, `_id` or identifier).
#[derive(Debug, Default)]
pub(crate) struct WorkflowCache {
    entries: Mutex<HashMap<(EnvironmentId, String), CachedWorkflow>>,
    /// Bumped by every write: a read that began before a write does not store what it read.
    generation: AtomicU64,
}

impl WorkflowCache {
    fn get(&self, key: &(EnvironmentId, String)) -> Option<Option<Arc<Workflow>>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < WORKFLOW_TTL)
            .map(|(_, w)| w.clone())
    }

    fn put(&self, key: (EnvironmentId, String), generation: u64, w: Option<Arc<Workflow>>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if entries.len() >= 10_000 {
            entries.clear();
        }
        entries.insert(key, (Instant::now(), w));
    }

    fn clear(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.clear();
    }
}

table! {
    Workflow => "workflows" {
        id: String,
        organization_id: String,
        environment_id: String,
        workflow_id: String,
        name: String,
        description: Option<String>,
        tags: Json<Vec<String>>,
        active: bool,
        critical: bool,
        severity: String,
        preferences: Option<Json<Value>>,
        payload_schema: Option<Json<Value>>,
        validate_payload: bool,
        steps: Json<Vec<Step>>,
        version: i64,
        created_at: i64,
        updated_at: i64,
    }
    written {
        // The list's status filter (`ERROR`) reads it.
        has_issues: bool = |w: &Workflow| w.has_issues(),
    }
}

/// What a workflow list is ordered by (`id` breaks ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowOrder {
    CreatedAt,
    UpdatedAt,
    Name,
}

impl WorkflowOrder {
    fn expression(self, dialect: Dialect) -> &'static str {
        match (self, dialect) {
            (Self::CreatedAt, _) => "created_at",
            (Self::UpdatedAt, _) => "updated_at",
            // Case-insensitive, then bytewise on both databases (PostgreSQL's collation would differ).
            (Self::Name, Dialect::Sqlite) => "lower(name)",
            (Self::Name, Dialect::Postgres) => "lower(name) collate \"C\"",
        }
    }
}

/// One page of `GET /v2/workflows` (offset pagination) and its filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowListQuery {
    pub limit: i64,
    pub offset: i64,
    pub order_by: WorkflowOrder,
    pub descending: bool,
    /// Case-insensitive substring of the name or the trigger identifier.
    pub query: Option<String>,
    /// Workflows carrying any of these tags.
    pub tags: Vec<String>,
    /// Workflows in any of these statuses.
    pub statuses: Vec<WorkflowStatus>,
}

impl Store {
    /// Inserts a new workflow; `Err(Duplicate)` when its workflowId is taken in the environment.
    /// `events`: what the creation emits (`workflow.created`), recorded with it (`store::outbox`).
    pub async fn insert_workflow(&self, w: &Workflow, events: &[Event]) -> Result<()> {
        let res = self.write_workflow(insert(w)?, events).await;
        self.workflow_cache.clear();
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// A workflow by `_id` or by its trigger identifier (`workflowId`).
    pub async fn get_workflow(
        &self,
        env: &EnvironmentId,
        id_or_identifier: &str,
    ) -> Result<Option<Workflow>> {
        let mut q = Sql::new("select ");
        q.push(Workflow::COLUMNS)
            .push(" from workflows where environment_id = ")
            .bind(env.as_str());
        q.push(" and deleted = false and ");
        if is_object_id(id_or_identifier) {
            q.push("(id = ")
                .bind(id_or_identifier)
                .push(" or workflow_id = ")
                .bind(id_or_identifier)
                .push(")");
        } else {
            q.push("workflow_id = ").bind(id_or_identifier);
        }
        q.push(" order by workflow_id = ")
            .bind(id_or_identifier)
            .push(" limit 1");
        // The read side (every trigger reads its workflow); the write connection is kept for writes (updates
        // re-check `version`).
        self.row(Cost::Point, q).await
    }

    /// [`Store::get_workflow`] through a short-lived cache (see [`WORKFLOW_TTL`]), for the reads every
    /// trigger and every job makes. Not for read-modify-write cycles: updates check the stored version.
    pub async fn get_workflow_cached(
        &self,
        env: &EnvironmentId,
        id_or_identifier: &str,
    ) -> Result<Option<Arc<Workflow>>> {
        let key = (env.clone(), id_or_identifier.to_owned());
        if let Some(w) = self.workflow_cache.get(&key) {
            return Ok(w);
        }
        let generation = self.workflow_cache.generation.load(Ordering::Acquire);
        let w = self
            .get_workflow(env, id_or_identifier)
            .await?
            .map(Arc::new);
        self.workflow_cache.put(key, generation, w.clone());
        Ok(w)
    }

    /// A page of the environment's workflows and the number matching the filters.
    pub async fn list_workflows(
        &self,
        env: &EnvironmentId,
        q: &WorkflowListQuery,
    ) -> Result<(Vec<Workflow>, i64)> {
        let mut filter = Sql::new(" from workflows where environment_id = ");
        filter.bind(env.as_str()).push(" and deleted = false");
        if let Some(text) = q.query.as_deref() {
            let pattern = format!("%{}%", like_escape(&text.to_lowercase()));
            filter
                .push(" and (lower(name) like ")
                .bind(pattern.as_str())
                .push(" escape '\\' or lower(workflow_id) like ")
                .bind(pattern)
                .push(" escape '\\')");
        }
        if !q.tags.is_empty() {
            filter.push_any_element(self.dialect(), "workflows.tags", &q.tags);
        }
        if !q.statuses.is_empty() {
            let conditions: Vec<&str> = q
                .statuses
                .iter()
                .map(|s| match s {
                    WorkflowStatus::Active => "(active = true and has_issues = false)",
                    WorkflowStatus::Inactive => "active = false",
                    WorkflowStatus::Error => "(active = true and has_issues = true)",
                })
                .collect();
            filter
                .push(" and (")
                .push(&conditions.join(" or "))
                .push(")");
        }
        let mut count = Sql::new("select count(*) as n");
        count.append(&filter);
        let counted: Vec<CountRow> = self.rows(Cost::Scan, count).await?;
        let total = counted.first().map_or(0, |c| c.n);

        let direction = if q.descending { "desc" } else { "asc" };
        let mut select = Sql::new("select ");
        select.push(Workflow::COLUMNS).append(&filter);
        select.push(&format!(
            " order by {} {direction}, id {direction} limit ",
            q.order_by.expression(self.dialect())
        ));
        select.bind(q.limit).push(" offset ").bind(q.offset);
        Ok((self.rows(Cost::Scan, select).await?, total))
    }

    /// Writes every mutable field if the stored version is still `expected_version`; `Err(Duplicate)` when
    /// the new workflowId is taken in the environment.
    /// `events`: what the change emits, recorded with it.
    pub async fn update_workflow(
        &self,
        w: &Workflow,
        expected_version: i64,
        events: &[Event],
    ) -> Result<bool> {
        let mut q = update(
            w,
            &["id", "organization_id", "environment_id", "created_at"],
        )?;
        q.push(" where environment_id = ")
            .bind(w.environment_id.as_str());
        q.push(" and id = ").bind(w.id.as_str());
        q.push(" and version = ").bind(expected_version);
        q.push(" and deleted = false");
        let res = self.write_workflow(q, events).await;
        self.workflow_cache.clear();
        match res {
            Ok(n) => Ok(n == 1),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// Soft delete (the trigger identifier becomes free), recorded with what it emits (`events`).
    pub async fn delete_workflow(
        &self,
        env: &EnvironmentId,
        id: &WorkflowRef,
        events: &[Event],
    ) -> Result<bool> {
        let mut q =
            Sql::new("update workflows set deleted = true, version = version + 1, updated_at = ");
        q.bind(Timestamp::now().0)
            .push(" where environment_id = ")
            .bind(env.as_str());
        q.push(" and id = ")
            .bind(id.as_str())
            .push(" and deleted = false");
        let n = self.write_workflow(q, events).await;
        self.workflow_cache.clear();
        Ok(n? == 1)
    }

    /// Runs `q`, a write of one workflow, and records `events` with it if it wrote a row; answers how many it
    /// wrote.
    async fn write_workflow(
        &self,
        q: Sql,
        events: &[Event],
    ) -> std::result::Result<u64, sqlx::Error> {
        let dialect = self.dialect();
        let sender = self.webhook_sender();
        on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let n = bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?.rows_affected();
            let webhooks = if n == 1 && !events.is_empty() {
                record_events!(tx, dialect, sender.as_ref(), &envs_of(events), Timestamp::now(), |_: &Receivers| events.to_vec())
            } else {
                Handover::new(None)
            };
            tx.commit().await.map(|()| (n, webhooks))
        })
        .map(|(n, webhooks)| {
            webhooks.announce(self);
            n
        })
    }
}

/// The environments of `events`, each once.
fn envs_of(events: &[Event]) -> Vec<&str> {
    let mut envs: Vec<&str> = events.iter().map(|e| e.environment_id.as_str()).collect();
    envs.sort_unstable();
    envs.dedup();
    envs
}

impl Store {
    /// Every workflow of the environment, by identifier, at most `cap + 1` (the caller refuses more than
    /// `cap`).
    pub async fn all_workflows(&self, env: &EnvironmentId, cap: usize) -> Result<Vec<Workflow>> {
        let mut q = Sql::new("select ");
        q.push(Workflow::COLUMNS)
            .push(" from workflows where environment_id = ")
            .bind(env.as_str())
            .push(" and deleted = false order by workflow_id limit ")
            .bind(i64::try_from(cap).unwrap_or(i64::MAX).saturating_add(1));
        self.rows(Cost::Scan, q).await
    }

    /// The distinct tags of the environment's workflows, sorted.
    pub async fn workflow_tags(&self, env: &EnvironmentId) -> Result<Vec<String>> {
        let elements = match self.dialect() {
            Dialect::Sqlite => "json_each(workflows.tags)",
            Dialect::Postgres => "jsonb_array_elements_text(workflows.tags) as t(value)",
        };
        let mut q = Sql::new(&format!(
            "select distinct value as name from workflows, {elements} where environment_id = "
        ));
        q.bind(env.as_str())
            .push(" and deleted = false order by name");
        let rows: Vec<TagRow> = self.rows(Cost::Scan, q).await?;
        Ok(rows.into_iter().map(|r| r.name).collect())
    }

    /// Applies a promotion's writes to environment `target` in one transaction. `Ok(false)` (nothing
    /// written) when a workflow changed since the plan read it: an update or delete finds another
    /// version, or a create finds its identifier taken.
    /// `events`: what the promotion emits (`workflow.published`), recorded with it.
    pub async fn apply_promotion(
        &self,
        target: &EnvironmentId,
        writes: &[Write],
        events: &[Event],
    ) -> Result<bool> {
        let dialect = self.dialect();
        let mut statements = Vec::with_capacity(writes.len());
        for w in writes {
            statements.push(match w {
                Write::Create(w) => insert(w)?,
                Write::Update {
                    workflow,
                    expected_version,
                } => {
                    let mut q = update(
                        workflow,
                        &["id", "organization_id", "environment_id", "created_at"],
                    )?;
                    q.push(" where environment_id = ").bind(target.as_str());
                    q.push(" and id = ").bind(workflow.id.as_str());
                    q.push(" and version = ").bind(*expected_version);
                    q.push(" and deleted = false");
                    q
                }
                Write::Delete {
                    id,
                    expected_version,
                    ..
                } => {
                    let mut q = Sql::new(
                        "update workflows set deleted = true, version = version + 1, updated_at = ",
                    );
                    q.bind(Timestamp::now().0);
                    q.push(" where environment_id = ").bind(target.as_str());
                    q.push(" and id = ").bind(id.as_str());
                    q.push(" and version = ").bind(*expected_version);
                    q.push(" and deleted = false");
                    q
                }
            });
        }
        let sender = self.webhook_sender();
        let res = on_db!(self.w(), p => async {
            let mut tx = p.begin().await?;
            for q in statements {
                match bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await {
                    Ok(r) if r.rows_affected() == 1 => {}
                    Ok(_) => return Ok(false),
                    Err(e) if is_unique_violation(&e) => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
            let webhooks = if events.is_empty() {
                Handover::new(None)
            } else {
                record_events!(tx, dialect, sender.as_ref(), &envs_of(events), Timestamp::now(), |_: &Receivers| events.to_vec())
            };
            tx.commit().await?;
            webhooks.announce(self);
            Ok(true)
        }.await);
        self.workflow_cache.clear();
        Ok(res?)
    }
}

impl Store {
    /// The names of workflows, by `_id`, deleted ones included (activity records outlive them), as
    /// `(id, name)`. One query.
    pub async fn workflow_names(
        &self,
        env: &EnvironmentId,
        ids: &[WorkflowRef],
    ) -> Result<Vec<(WorkflowRef, String)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new("select id, name from workflows where true");
        q.push_in("id", ids);
        q.push_tenant_check("environment_id", env.as_str());
        let rows: Vec<WorkflowNameRow> = self.rows(Cost::Point, q).await?;
        Ok(rows.into_iter().map(|r| (r.id.into(), r.name)).collect())
    }
}

sql_row! {
    struct CountRow {
        n: i64,
    }
}

sql_row! {
    struct TagRow {
        name: String,
    }
}

sql_row! {
    struct WorkflowNameRow {
        id: String,
        name: String,
    }
}
