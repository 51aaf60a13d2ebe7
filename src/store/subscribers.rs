//! Subscribers: lookups, writes with optimistic concurrency (`version`), and indexed substring search.

use std::sync::LazyLock;

use serde_json::Value;
use sqlx::types::Json;

use super::insert::insert_rows_at_once;
use super::page::Keyed;
use super::row::{insert_with, table, update_with, view, Sealable, Stored, Table};
use super::sql::{bind_args, Sql};
use super::sqlite::rows::ReadRow;
use super::{is_unique_violation, on_db, Cost, Dialect, Store};
use crate::domain::subscriber::{
    ChannelSettings, Subscriber, SubscriberContact, SubscriberProfile,
};
use crate::domain::{EnvironmentId, SubscriberRef, Timestamp};
use crate::error::{Error, Result};

/// The most subscribers one heartbeat statement names.
const PRESENCE_BATCH: usize = 500;

table! {
    Subscriber => "subscribers" {
        id: String,
        organization_id: String,
        environment_id: String,
        subscriber_id: String,
        is_online: Option<bool>,
        last_online_at: Option<i64>,
        deleted: bool,
        version: i64,
        created_at: i64,
        updated_at: i64,
    }
    nested profile: SubscriberProfile {
        first_name: Option<String>,
        last_name: Option<String>,
        email: Option<String>,
        phone: Option<String>,
        avatar: Option<String>,
        locale: Option<String>,
        data: Option<Json<Value>>,
        timezone: Option<String>,
    }
    sealed {
        // The per-provider credentials: webhook URLs, device tokens. An empty list is stored as `[]`.
        channels: Json<Vec<ChannelSettings>>,
    }
    written {
        // What the name search reads: `firstName lastName`.
        full_name: String = Subscriber::full_name,
    }
}

impl Keyed for Subscriber {
    fn key(&self) -> &str {
        self.id.as_str()
    }
}

impl Store {
    /// Seals the channels of subscribers stored in clear (rows written before channels were sealed), a
    /// batch at a time; `migrate` runs it after the SQL migrations. Each row is rewritten only if it still
    /// holds what was read, so concurrent writers and other instances doing the same are safe. Returns how
    /// many rows it sealed.
    pub async fn seal_subscriber_channels(&self) -> Result<u64> {
        let mut sealed = 0;
        loop {
            let q = Sql::new(
                "select id, channels from subscribers where channels like '[%' and channels <> '[]' limit 500",
            );
            let rows: Vec<(String, String)> = self.rows(Cost::Scan, q).await?;
            if rows.is_empty() {
                return Ok(sealed);
            }
            for (id, clear) in rows {
                // Parsed and written again: the sealed text is what the declaration writes.
                let channels: Vec<ChannelSettings> = serde_json::from_str(&clear).map_err(|e| {
                    Error::Internal(anyhow::anyhow!("subscriber {id}'s stored channels: {e}"))
                })?;
                let mut q = Sql::new("update subscribers set channels = ");
                q.bind(<Json<Vec<ChannelSettings>> as Sealable>::seal(
                    Stored::<Json<_>>::arg(&channels).map_err(anyhow::Error::from)?,
                    self.cipher(),
                ));
                q.push(" where id = ").bind(id.as_str());
                q.push(" and channels = ").bind(clear.as_str());
                sealed += on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?;
            }
        }
    }
}

/// One non-deleted subscriber by subscriberId (`$1` the environment, `$2` the subscriberId), its `columns`.
fn by_id(columns: &str) -> String {
    format!(
        "select {columns} from subscribers where environment_id = $1 and subscriber_id = $2 and deleted = false"
    )
}

/// [`by_id`] of the stored subscriber.
static SUBSCRIBER_BY_ID: LazyLock<String> = LazyLock::new(|| by_id(Subscriber::COLUMNS));

/// [`SUBSCRIBER_BY_ID`] with its arguments.
fn subscriber_by_id(env: &EnvironmentId, subscriber_id: &str) -> Sql {
    let mut q = Sql::new(&SUBSCRIBER_BY_ID);
    q.args = vec![env.as_str().into(), subscriber_id.into()];
    q
}

impl Store {
    pub async fn get_subscriber(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
    ) -> Result<Option<Subscriber>> {
        self.row(Cost::Point, subscriber_by_id(env, subscriber_id))
            .await
    }

    /// Records whether the subscriber (its record, `_id`) has an Inbox socket open, and since when.
    pub async fn set_subscriber_online(
        &self,
        env: &EnvironmentId,
        subscriber: &SubscriberRef,
        online: bool,
    ) -> Result<()> {
        let now = Timestamp::now().0;
        let mut q = Sql::new("update subscribers set is_online = ");
        q.bind(online)
            .push(", last_online_at = ")
            .bind(now)
            .push(", online_heartbeat = ")
            .bind(now)
            .push(", version = version + 1, updated_at = ")
            .bind(now);
        q.push(" where environment_id = ")
            .bind(env.as_str())
            .push(" and id = ")
            .bind(subscriber.as_str())
            .push(" and deleted = false");
        on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args.clone()).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// Sets the online flag of the environment's subscriber `subscriber_id` through the API: going offline
    /// records `lastOnlineAt`. The flag has no heartbeat (the sweep of stale sockets leaves it alone) until
    /// the subscriber's sockets set it. False when there is no such subscriber.
    pub async fn set_online_flag(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
        online: bool,
    ) -> Result<bool> {
        let now = Timestamp::now().0;
        let mut q = Sql::new("update subscribers set is_online = ");
        q.bind(online).push(", last_online_at = ");
        if online {
            q.push("last_online_at");
        } else {
            q.bind(now);
        }
        q.push(", online_heartbeat = null, version = version + 1, updated_at = ")
            .bind(now)
            .push(" where environment_id = ")
            .bind(env.as_str())
            .push(" and subscriber_id = ")
            .bind(subscriber_id)
            .push(" and deleted = false");
        let n = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Records that a process still holds sockets of these online subscribers of `env` at `at` (Unix ms):
    /// their heartbeat. At most [`PRESENCE_BATCH`] ids a statement.
    pub async fn refresh_presence(
        &self,
        env: &EnvironmentId,
        subscribers: &[SubscriberRef],
        at: i64,
    ) -> Result<u64> {
        let mut n = 0;
        for ids in subscribers.chunks(PRESENCE_BATCH) {
            let mut q = Sql::new("update subscribers set online_heartbeat = ");
            q.bind(at)
                .push(" where environment_id = ")
                .bind(env.as_str())
                .push(" and deleted = false and is_online = true");
            q.push_in("id", ids);
            n += on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args.clone())
                .execute(p).await.map(|r| r.rows_affected()))?;
        }
        Ok(n)
    }

    /// Records offline (at most `limit`) the subscribers online whose heartbeat is older than `stale_before`
    /// (Unix ms): the process that held their sockets stopped without saying. `lastOnlineAt` becomes the last
    /// heartbeat. Answers them as `(environment, subscriber record)`; atomic per subscriber, so that processes
    /// sweeping together each answer a different one.
    pub async fn expire_presence(
        &self,
        stale_before: i64,
        limit: i64,
    ) -> Result<Vec<(EnvironmentId, SubscriberRef)>> {
        let now = Timestamp::now().0;
        // The condition is repeated outside the subquery: a heartbeat refreshed since is left alone. The
        // subquery's `is_online = true` is the partial index's predicate, written alike so that it serves.
        let mut q = Sql::new(
            "update subscribers set is_online = false, last_online_at = online_heartbeat, version = version + 1, updated_at = ",
        );
        q.bind(now)
            .push(" where id in (select id from subscribers where is_online = true and online_heartbeat < ")
            .bind(stale_before)
            .push(" limit ")
            .bind(limit)
            .push(") and is_online = true and online_heartbeat < ")
            .bind(stale_before)
            .push(" returning environment_id, id");
        let rows = on_db!(self.w(), p => bind_args!(sqlx::query_as::<_, (EnvironmentId, String)>(&q.text), q.args.clone()).fetch_all(p).await)?;
        Ok(rows
            .into_iter()
            .map(|(env, id)| (env, SubscriberRef(id)))
            .collect())
    }

    /// The subscriberId of the environment's current (not deleted) subscriber with `_id` `id`.
    pub async fn subscriber_id_of(
        &self,
        env: &EnvironmentId,
        id: &SubscriberRef,
    ) -> Result<Option<String>> {
        let mut q = Sql::new("select subscriber_id from subscribers where environment_id = ");
        q.bind(env.as_str())
            .push(" and id = ")
            .bind(id.as_str())
            .push(" and deleted = false");
        Ok(self.row::<(String,)>(Cost::Point, q).await?.map(|(s,)| s))
    }

    /// The subscriberId of a non-deleted subscriber record and its environment's session epoch, in one
    /// point read (what every Inbox request checks its session against).
    pub async fn session_subscriber(
        &self,
        env: &EnvironmentId,
        id: &SubscriberRef,
    ) -> Result<Option<(String, i64)>> {
        let mut q = Sql::new(
            "select s.subscriber_id, e.session_epoch from subscribers s \
             join environments e on e.id = s.environment_id where s.environment_id = ",
        );
        q.bind(env.as_str())
            .push(" and s.id = ")
            .bind(id.as_str())
            .push(" and s.deleted = false");
        self.row::<(String, i64)>(Cost::Point, q).await
    }

    /// A non-deleted subscriber by subscriberId handed to `visit`; `None` when there is none. On SQLite
    /// `visit` runs on the task that runs the read's batch (see `store::sqlite`).
    pub async fn visit_subscriber<T: Send + 'static>(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
        visit: impl FnOnce(Subscriber) -> T + Send + 'static,
    ) -> Result<Option<T>> {
        let Some(reader) = self.sqlite_reader() else {
            return Ok(self.get_subscriber(env, subscriber_id).await?.map(visit));
        };
        // SQLite: through the reader's batches of point reads, as one statement per batch.
        let (env, id) = (env.clone(), subscriber_id.to_owned());
        let cipher = self.cipher.clone();
        reader
            .batched(move |c| {
                let read = || -> rusqlite::Result<Option<Subscriber>> {
                    let mut statement = c.prepare_cached(&SUBSCRIBER_BY_ID)?;
                    let mut rows = statement.query(rusqlite::params![env.as_str(), id])?;
                    rows.next()?
                        .map(|row| <Subscriber as ReadRow>::read(row, &cipher))
                        .transpose()
                };
                let found = read().map_err(|e| Error::from(anyhow::Error::from(e)))?;
                Ok(found.map(visit))
            })
            .await
    }

    /// Same as [`Store::get_subscriber`] but on the write pool, for read-modify-write cycles.
    pub async fn get_subscriber_for_update(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
    ) -> Result<Option<Subscriber>> {
        let rows = self
            .rows_for_update(subscriber_by_id(env, subscriber_id))
            .await?;
        Ok(rows.into_iter().next())
    }

    /// Inserts a new subscriber; `Err(Duplicate)` when the subscriberId is taken in the environment.
    pub async fn insert_subscriber(&self, s: &Subscriber) -> Result<()> {
        let q = insert_with(s, self.cipher())?;
        let res = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()));
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes every mutable field of `s` if its stored version is still `expected_version`.
    /// Returns false when another writer got there first (the caller re-reads and retries).
    pub async fn update_subscriber(&self, s: &Subscriber, expected_version: i64) -> Result<bool> {
        let mut q = update_with(
            s,
            &[
                "id",
                "organization_id",
                "environment_id",
                "subscriber_id",
                "created_at",
            ],
            self.cipher(),
        )?;
        q.push(" where environment_id = ")
            .bind(s.environment_id.as_str());
        q.push(" and id = ").bind(s.id.as_str());
        q.push(" and version = ").bind(expected_version);
        let res = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(res == 1)
    }
}

/// The columns an upsert of an existing subscriber leaves as stored: its identity and creation, its presence
/// and its channels (none of which a profile import sets).
const UPSERT_KEEPS: [&str; 9] = [
    "id",
    "organization_id",
    "environment_id",
    "subscriber_id",
    "is_online",
    "last_online_at",
    "deleted",
    "channels",
    "created_at",
];

impl Store {
    /// Writes `rows` (of one environment) in one transaction, a multi-row upsert on the environment's
    /// subscriberId: a row of version 0 is inserted unless its subscriberId exists; a row of version `n > 0`
    /// replaces the profile of the stored one only while that is still at version `n - 1`. Answers the
    /// subscriberIds written with their version (0: created); a row missing from the answer lost to a
    /// concurrent writer (the caller reads it again). The search indexes follow through the table's
    /// triggers, as for single writes; rows go in subscriberId order, so concurrent upserts over the same
    /// ids lock them in the same order.
    pub async fn upsert_subscribers(&self, rows: &[Subscriber]) -> Result<Vec<(String, i64)>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut rows: Vec<&Subscriber> = rows.iter().collect();
        rows.sort_unstable_by(|a, b| a.subscriber_id.cmp(&b.subscriber_id));
        let args = rows
            .iter()
            .map(|r| r.args_with(self.cipher()))
            .collect::<serde_json::Result<Vec<_>>>()?;
        let head = format!(
            "insert into subscribers ({})",
            Subscriber::WRITTEN.join(", ")
        );
        let set: Vec<String> = Subscriber::WRITTEN
            .iter()
            .filter(|c| !UPSERT_KEEPS.contains(c))
            .map(|c| format!("{c} = excluded.{c}"))
            .collect();
        let tail = format!(
            "on conflict (environment_id, subscriber_id) where deleted = false do update set {} \
             where subscribers.version = excluded.version - 1 returning subscriber_id, version",
            set.join(", ")
        );
        let statements = insert_rows_at_once(self.dialect(), &head, &tail, args);
        let written = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let mut written = Vec::with_capacity(rows.len());
            for q in statements {
                let got: Vec<(String, i64)> =
                    bind_args!(sqlx::query_as(&q.text), q.args).fetch_all(&mut *tx).await?;
                written.extend(got);
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(written)
        })?;
        Ok(written)
    }
}

impl Store {
    /// What activity records show of subscribers, by `_id`, deleted ones included (activity records
    /// outlive them), each handed to `visit`. One query.
    pub async fn visit_contacts_by_refs(
        &self,
        env: &EnvironmentId,
        refs: &[SubscriberRef],
        visit: impl for<'v> FnMut(SubscriberContact<'v>) + Send,
    ) -> Result<()> {
        if refs.is_empty() {
            return Ok(());
        }
        let mut q = Sql::new("select ");
        q.push(ContactRow::COLUMNS)
            .push(" from subscribers where deleted = false");
        q.push_in("id", refs);
        q.push_tenant_check("environment_id", env.as_str());
        self.visit_rows::<ContactRow>(q, visit).await
    }

    /// The environment's current (not deleted) subscribers among `subscriber_ids`, in one query: what the
    /// workers read for a whole batch instead of one [`Store::get_subscriber`] per job.
    pub async fn subscribers_by_ids(
        &self,
        env: &EnvironmentId,
        subscriber_ids: &[String],
    ) -> Result<Vec<Subscriber>> {
        if subscriber_ids.is_empty() {
            return Ok(Vec::new());
        }
        let q = subscribers_by_ids_sql(self.dialect(), env, subscriber_ids);
        self.rows(Cost::Point, q).await
    }

    /// subscriberIds of the environment's subscribers whose email is one of `emails` (exact).
    pub async fn subscriber_ids_by_emails(
        &self,
        env: &EnvironmentId,
        emails: &[String],
    ) -> Result<Vec<String>> {
        if emails.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new("select subscriber_id from subscribers where environment_id = ");
        q.bind(env.as_str()).push(" and deleted = false");
        q.push_in("email", emails);
        // Many subscribers may share an email: not a read by key.
        let rows: Vec<(String,)> = self.rows(Cost::Scan, q).await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }
}

/// `get_subscriber` on SQLite, run inline (see `store::fast`).
/// The statement of [`Store::subscribers_by_ids`]. On SQLite it names its index: from about eight ids on,
/// the planner (without statistics) preferred an `(environment_id, deleted, …)` index and read every
/// subscriber of the environment — 77 % of a trigger load's time at 100,000 subscribers. PostgreSQL without
/// statistics (a table just loaded, before autovacuum's analyze) did the same with an `in` list (60 ms per
/// 500 ids at 100,000 subscribers): there the ids are a `values` list joined laterally to one probe of the
/// unique `(environment_id, subscriber_id)` index each, a nested loop whatever the statistics say (3.9 ms).
/// The `limit 1` (one row per id anyway) keeps the planner from flattening the join into a hash join.
fn subscribers_by_ids_sql(dialect: Dialect, env: &EnvironmentId, subscriber_ids: &[String]) -> Sql {
    match dialect {
        Dialect::Sqlite => {
            let mut q = Sql::new("select ");
            q.push(Subscriber::COLUMNS)
                .push(" from subscribers indexed by subscribers_identifier where environment_id = ")
                .bind(env.as_str())
                .push(" and deleted = false");
            q.push_in("subscriber_id", subscriber_ids);
            q
        }
        Dialect::Postgres => {
            let mut q = Sql::new("select s.* from (values ");
            for (i, id) in subscriber_ids.iter().enumerate() {
                q.push(if i == 0 { "(" } else { ", (" })
                    .bind(id.as_str())
                    .push(")");
            }
            q.push(") as v(id) cross join lateral (select ")
                .push(Subscriber::COLUMNS)
                .push(" from subscribers where environment_id = ")
                .bind(env.as_str())
                .push(" and deleted = false and subscriber_id = v.id limit 1) as s");
            q
        }
    }
}

view! {
    /// What activity records show of a subscriber (see [`SubscriberContact`]).
    struct ContactRow => SubscriberContact {
        id: Text,
        subscriber_id: Text,
        first_name: OptText,
        last_name: OptText,
        email: OptText,
        phone: OptText,
    }
}

#[cfg(test)]
mod plan_tests {
    use super::super::plans::{migrated, plan};
    use super::*;

    /// A batch's subscribers are read through the (environment, subscriberId) index, not by scanning the
    /// environment through one of its other indexes.
    #[test]
    fn subscribers_by_ids_read_the_identifier_index() {
        let conn = migrated();
        let ids: Vec<String> = (0..32).map(|i| format!("s{i}")).collect();
        let q = subscribers_by_ids_sql(Dialect::Sqlite, &EnvironmentId("e".into()), &ids);
        let p = plan(&conn, &q.text);
        assert!(
            p.contains("USING INDEX subscribers_identifier (environment_id=? AND subscriber_id=?)"),
            "{p}"
        );
    }
}
