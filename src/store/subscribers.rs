//! Subscribers: lookups, writes with optimistic concurrency (`version`), and indexed substring search.

use std::sync::LazyLock;

use serde_json::value::RawValue;
use serde_json::Value;
use sqlx::types::Json;

use super::page::Keyed;
use super::row::{sql_row, table, update, Table};
use super::sql::{bind_args, Arg, Sql};
use super::sqlite::rows::{Columns, ReadRow};
use super::{is_unique_violation, on_db, Cost, Dialect, Store, ViewRow};
use crate::domain::subscriber::{ChannelSettings, Subscriber, SubscriberContact, SubscriberView};
use crate::domain::{EnvironmentId, SubscriberRef, Timestamp};
use crate::error::{Error, Result};

table! {
    Subscriber => "subscribers" {
        id: String,
        organization_id: String,
        environment_id: String,
        subscriber_id: String,
        first_name: Option<String>,
        last_name: Option<String>,
        email: Option<String>,
        phone: Option<String>,
        avatar: Option<String>,
        locale: Option<String>,
        timezone: Option<String>,
        data: Option<Json<Value>>,
        channels: Json<Vec<ChannelSettings>>,
        is_online: Option<bool>,
        last_online_at: Option<i64>,
        deleted: bool,
        version: i64,
        created_at: i64,
        updated_at: i64,
    }
    written {
        // What the name search reads: `firstName lastName`.
        full_name: String = |s: &Subscriber| s.full_name(),
    }
}

impl Keyed for Subscriber {
    fn key(&self) -> &str {
        self.id.as_str()
    }
}

/// One non-deleted subscriber by subscriberId (`$1` the environment, `$2` the subscriberId).
static SUBSCRIBER_BY_ID: LazyLock<String> = LazyLock::new(|| {
    format!(
        "select {} from subscribers where environment_id = $1 and subscriber_id = $2 and deleted = false",
        Subscriber::COLUMNS
    )
});

/// SQLite: [`SUBSCRIBER_BY_ID`] read at the subscriber's [`slot`] (`?3`) only: one descent of the table's b-tree.
static SUBSCRIBER_AT_SLOT_SQLITE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "select {} from subscribers \
         where seq = ?3 and environment_id = ?1 and subscriber_id = ?2 and deleted = false",
        Subscriber::COLUMNS
    )
});

/// Bits of a [`slot`]: rowids 1..=2^32. The search indexes store the gaps between rowids, so a wider range
/// makes them bigger (2^40 took a million subscribers' database from 679 to 965 MB); a narrower one makes
/// subscribers share slots more often (here about one in 10,000 of a million takes the slower path).
const SLOT_BITS: u32 = 32;

/// SQLite only: the rowid (`seq`) a subscriber is stored at when it is free, a hash (SHA-256) of its
/// environment and subscriberId. A lookup by subscriberId reads that row first: one descent of the table's
/// b-tree instead of one of the identifier index and then one of the table (docs/decisions.md).
///
/// The slot is a guess that is checked: its row is taken only if its environment and subscriberId match and
/// it is not deleted, which the unique index `subscribers_identifier` makes unambiguous. A subscriber whose
/// slot was taken when it was created (by a soft-deleted predecessor with the same subscriberId, by a
/// collision, or in a database written before slots) gets an ordinary rowid and is found through the index.
pub(super) fn slot(environment_id: &str, subscriber_id: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(environment_id)
        .chain_update([0u8])
        .chain_update(subscriber_id)
        .finalize();
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    1 + (u64::from_be_bytes(head) & ((1 << SLOT_BITS) - 1)) as i64
}

/// SQLite: the environment's non-deleted subscriber `subscriber_id`, from its [`slot`] when it is stored
/// there and through the identifier index otherwise, handed to `read` while the row is current.
fn read_subscriber_inline<T>(
    c: &rusqlite::Connection,
    env: &EnvironmentId,
    subscriber_id: &str,
    read: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Option<T>> {
    let at_slot = slot(env.as_str(), subscriber_id);
    let mut statement = c.prepare_cached(&SUBSCRIBER_AT_SLOT_SQLITE)?;
    let mut rows = statement.query(rusqlite::params![env.as_str(), subscriber_id, at_slot])?;
    if let Some(row) = rows.next()? {
        return read(row).map(Some);
    }
    drop(rows);
    let mut statement = c.prepare_cached(&SUBSCRIBER_BY_ID)?;
    let mut rows = statement.query(rusqlite::params![env.as_str(), subscriber_id])?;
    match rows.next()? {
        Some(row) => read(row).map(Some),
        None => Ok(None),
    }
}

/// A non-deleted subscriber by subscriberId, read through `db`.
async fn subscriber_on(
    db: &super::Db,
    env: &EnvironmentId,
    subscriber_id: &str,
) -> Result<Option<Subscriber>> {
    Ok(
        on_db!(db, p => sqlx::query_as::<_, Subscriber>(&SUBSCRIBER_BY_ID)
        .bind(env.as_str()).bind(subscriber_id).fetch_optional(p).await)?,
    )
}

impl Store {
    pub async fn get_subscriber(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
    ) -> Result<Option<Subscriber>> {
        if let Some(reader) = self.sqlite_reader() {
            return reader.point(|c| {
                // `Subscriber::read` checks each column's name against the select list in debug builds.
                Ok(
                    read_subscriber_inline(c, env, subscriber_id, Subscriber::read)
                        .map_err(anyhow::Error::from)?,
                )
            });
        }
        subscriber_on(self.w(), env, subscriber_id).await
    }

    /// A non-deleted subscriber by subscriberId handed to `visit` as a borrowed view; `None` when there is
    /// none. On SQLite `visit` runs while the row is current, on the task that runs the read's batch (see
    /// `store::sqlite`).
    pub async fn visit_subscriber<T: Send + 'static>(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
        visit: impl FnOnce(SubscriberView<'_>) -> T + Send + 'static,
    ) -> Result<Option<T>> {
        if let Some(reader) = self.sqlite_reader() {
            let (env, id) = (env.clone(), subscriber_id.to_owned());
            return reader
                .batched(move |c| {
                    read_subscriber_inline(c, &env, &id, |row| {
                        SubscriberViewRow::view_inline(row).map(visit)
                    })
                    .map_err(|e| anyhow::Error::from(e).into())
                })
                .await;
        }
        // On PostgreSQL the write pool is the read pool.
        let row: Option<SubscriberViewRow> = on_db!(self.w(), p => sqlx::query_as::<_, SubscriberViewRow>(&SUBSCRIBER_BY_ID)
            .bind(env.as_str()).bind(subscriber_id).fetch_optional(p).await)?;
        Ok(row.map(|r| visit(r.view())))
    }

    /// Same as [`Store::get_subscriber`] but on the write pool, for read-modify-write cycles.
    pub async fn get_subscriber_for_update(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
    ) -> Result<Option<Subscriber>> {
        subscriber_on(self.w(), env, subscriber_id).await
    }

    /// Inserts a new subscriber; `Err(Duplicate)` when the subscriberId is taken in the environment.
    pub async fn insert_subscriber(&self, s: &Subscriber) -> Result<()> {
        let mut args = s.args()?;
        let columns = Subscriber::WRITTEN.join(", ");
        let values = (1..=args.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        // SQLite stores the subscriber at its slot when no row holds it (a null rowid is the next free one);
        // PostgreSQL has no rowid to choose.
        let text = match self.dialect() {
            Dialect::Sqlite => {
                args.push(Arg::Int(slot(&s.environment_id, &s.subscriber_id)));
                let at = args.len();
                format!(
                    "insert into subscribers (seq, {columns}) values ((select case when exists \
                     (select 1 from subscribers where seq = ${at}) then null else ${at} end), {values})"
                )
            }
            Dialect::Postgres => format!("insert into subscribers ({columns}) values ({values})"),
        };
        let res = on_db!(self.w(), p => bind_args!(sqlx::query(&text), args).execute(p).await.map(|r| r.rows_affected()));
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes every mutable field of `s` if its stored version is still `expected_version`.
    /// Returns false when another writer got there first (the caller re-reads and retries).
    pub async fn update_subscriber(&self, s: &Subscriber, expected_version: i64) -> Result<bool> {
        let mut q = update(
            s,
            &[
                "id",
                "organization_id",
                "environment_id",
                "subscriber_id",
                "created_at",
            ],
        )?;
        q.push(" where environment_id = ")
            .bind(s.environment_id.as_str());
        q.push(" and id = ").bind(s.id.as_str());
        q.push(" and version = ").bind(expected_version);
        let res = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(res == 1)
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
        let mut q = Sql::new(
            "select id, subscriber_id, first_name, last_name, email, phone from subscribers where true",
        );
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
/// subscriber of the environment — 77 % of a trigger load's time at 100,000 subscribers.
fn subscribers_by_ids_sql(dialect: Dialect, env: &EnvironmentId, subscriber_ids: &[String]) -> Sql {
    let mut q = Sql::new("select ");
    q.push(Subscriber::COLUMNS).push(match dialect {
        Dialect::Sqlite => " from subscribers indexed by subscribers_identifier",
        Dialect::Postgres => " from subscribers",
    });
    q.push(" where environment_id = ")
        .bind(env.as_str())
        .push(" and deleted = false");
    q.push_in("subscriber_id", subscriber_ids);
    q
}

sql_row! {
    struct ContactRow {
        id: String,
        subscriber_id: String,
        first_name: Option<String>,
        last_name: Option<String>,
        email: Option<String>,
        phone: Option<String>,
    }
}

impl ViewRow for ContactRow {
    type View<'a> = SubscriberContact<'a>;

    fn view(&self) -> SubscriberContact<'_> {
        SubscriberContact {
            id: &self.id,
            subscriber_id: &self.subscriber_id,
            first_name: self.first_name.as_deref(),
            last_name: self.last_name.as_deref(),
            email: self.email.as_deref(),
            phone: self.phone.as_deref(),
        }
    }

    fn view_inline<'a>(r: &'a rusqlite::Row<'_>) -> rusqlite::Result<SubscriberContact<'a>> {
        let mut c = Columns::new(r);
        Ok(SubscriberContact {
            id: c.str("id")?,
            subscriber_id: c.str("subscriber_id")?,
            first_name: c.opt_str("first_name")?,
            last_name: c.opt_str("last_name")?,
            email: c.opt_str("email")?,
            phone: c.opt_str("phone")?,
        })
    }
}

sql_row! {
    /// [`SubscriberView`]'s row on PostgreSQL: the JSON columns as text.
    struct SubscriberViewRow {
        id: String,
        organization_id: String,
        environment_id: String,
        subscriber_id: String,
        first_name: Option<String>,
        last_name: Option<String>,
        email: Option<String>,
        phone: Option<String>,
        avatar: Option<String>,
        locale: Option<String>,
        timezone: Option<String>,
        data: Option<Json<Box<RawValue>>>,
        channels: Json<Box<RawValue>>,
        is_online: Option<bool>,
        last_online_at: Option<i64>,
        deleted: bool,
        version: i64,
        created_at: i64,
        updated_at: i64,
    }
}

impl ViewRow for SubscriberViewRow {
    type View<'a> = SubscriberView<'a>;

    fn view(&self) -> SubscriberView<'_> {
        SubscriberView {
            id: &self.id,
            organization_id: &self.organization_id,
            environment_id: &self.environment_id,
            subscriber_id: &self.subscriber_id,
            first_name: self.first_name.as_deref(),
            last_name: self.last_name.as_deref(),
            email: self.email.as_deref(),
            phone: self.phone.as_deref(),
            avatar: self.avatar.as_deref(),
            locale: self.locale.as_deref(),
            timezone: self.timezone.as_deref(),
            data: self.data.as_ref().map(|j| j.0.get()),
            channels: self.channels.0.get(),
            is_online: self.is_online,
            last_online_at: self.last_online_at.map(Timestamp),
            deleted: self.deleted,
            version: self.version,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
        }
    }

    fn view_inline<'a>(r: &'a rusqlite::Row<'_>) -> rusqlite::Result<SubscriberView<'a>> {
        let mut c = Columns::new(r);
        Ok(SubscriberView {
            id: c.str("id")?,
            organization_id: c.str("organization_id")?,
            environment_id: c.str("environment_id")?,
            subscriber_id: c.str("subscriber_id")?,
            first_name: c.opt_str("first_name")?,
            last_name: c.opt_str("last_name")?,
            email: c.opt_str("email")?,
            phone: c.opt_str("phone")?,
            avatar: c.opt_str("avatar")?,
            locale: c.opt_str("locale")?,
            timezone: c.opt_str("timezone")?,
            data: c.opt_str("data")?,
            channels: c.str("channels")?,
            is_online: c.get("is_online")?,
            last_online_at: c.get::<Option<i64>>("last_online_at")?.map(Timestamp),
            deleted: c.get("deleted")?,
            version: c.get("version")?,
            created_at: Timestamp(c.get("created_at")?),
            updated_at: Timestamp(c.get("updated_at")?),
        })
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

#[cfg(test)]
mod slot_tests {
    use super::super::plans::{migrated, plan};
    use super::*;
    use crate::domain::Tenant;
    use crate::service::subscribers::{self as service, SubscriberFields};

    const ENV: &str = "6b074794ef99cfe4297df173";

    /// Slots are part of the stored data: a change of the function would leave every existing subscriber
    /// off its slot (still found, through the index, but slower), so the function is pinned. The values are
    /// the first 8 bytes of SHA-256(environment, 0, subscriberId), big-endian, masked to 32 bits, plus one,
    /// as computed outside this code.
    #[test]
    fn slots_are_pinned_and_in_range() {
        assert_eq!(slot(ENV, "bench1"), 747_661_660);
        assert_eq!(slot(ENV, "bench2"), 825_139_908);
        assert_ne!(
            slot(ENV, "bench1"),
            slot("6b074794ef99cfe4297df174", "bench1")
        );
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(slot("ab", "c"), slot("a", "bc"));
        for n in 0..10_000 {
            let s = slot(ENV, &format!("s{n}"));
            assert!((1..=1 << SLOT_BITS).contains(&s), "{s}");
        }
    }

    #[test]
    fn the_slot_read_is_one_rowid_lookup() {
        let p = plan(&migrated(), &SUBSCRIBER_AT_SLOT_SQLITE);
        assert_eq!(p, "SEARCH subscribers USING INTEGER PRIMARY KEY (rowid=?)");
    }

    fn insert(c: &rusqlite::Connection, seq: i64, subscriber_id: &str, deleted: bool) {
        c.execute(
            "insert into subscribers (seq, id, organization_id, environment_id, subscriber_id, deleted, \
             created_at, updated_at) values (?1, ?2, 'o', ?3, ?4, ?5, 0, 0)",
            rusqlite::params![seq, format!("id-{seq}"), ENV, subscriber_id, deleted],
        )
        .unwrap();
    }

    fn read(c: &rusqlite::Connection, subscriber_id: &str) -> Option<String> {
        read_subscriber_inline(c, &EnvironmentId(ENV.into()), subscriber_id, |r| {
            r.get::<_, String>("id")
        })
        .unwrap()
    }

    /// A row at the slot is the subscriber only if it matches; otherwise the index finds it.
    #[test]
    fn a_slot_is_checked_and_the_index_finds_the_rest() {
        let c = migrated();
        insert(&c, slot(ENV, "at-slot"), "at-slot", false);
        insert(&c, 5, "legacy", false);
        // A deleted predecessor holds the slot; its successor lives elsewhere.
        insert(&c, slot(ENV, "reused"), "reused", true);
        insert(&c, 6, "reused", false);
        // Another subscriber holds the slot (a collision).
        insert(&c, slot(ENV, "displaced"), "squatter", false);
        insert(&c, 7, "displaced", false);
        // A subscriber of another environment at this environment's slot.
        c.execute(
            "insert into subscribers (seq, id, organization_id, environment_id, subscriber_id, \
             created_at, updated_at) values (?1, 'foreign', 'o', 'other-env', 'stranger', 0, 0)",
            [slot(ENV, "stranger")],
        )
        .unwrap();

        let at = |s: &str| Some(format!("id-{s}"));
        assert_eq!(read(&c, "at-slot"), at(&slot(ENV, "at-slot").to_string()));
        assert_eq!(read(&c, "legacy"), at("5"));
        assert_eq!(read(&c, "reused"), at("6"));
        assert_eq!(read(&c, "displaced"), at("7"));
        assert_eq!(
            read(&c, "squatter"),
            at(&slot(ENV, "displaced").to_string())
        );
        assert_eq!(read(&c, "stranger"), None);
        assert_eq!(read(&c, "nobody"), None);
    }

    /// Created and seeded subscribers are stored at their slots; one whose slot is taken is stored
    /// elsewhere and still read.
    #[tokio::test]
    async fn writes_use_the_slot_when_it_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/t.db", dir.path().display());
        let cipher = crate::crypto::Cipher::from_base64(&crate::crypto::Cipher::generate_base64());
        let store = Store::open(&super::super::StoreOptions::new(url), cipher.unwrap())
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let created = crate::service::environments::create(&store, "Test", None)
            .await
            .unwrap();
        let tenant = Tenant {
            organization_id: crate::domain::OrganizationId(created.organization_id),
            environment_id: EnvironmentId(created.environment_id),
        };
        let env = tenant.environment_id.as_str().to_owned();
        let seq_of = |subscriber_id: &str, deleted: bool| {
            let q = sqlx::query_scalar::<_, i64>(
                "select seq from subscribers where environment_id = ?1 and subscriber_id = ?2 and deleted = ?3",
            )
            .bind(env.clone())
            .bind(subscriber_id.to_owned())
            .bind(deleted);
            let db = store.w().clone();
            async move {
                match db {
                    super::super::Db::Sqlite(p) => q.fetch_one(&p).await.unwrap(),
                    super::super::Db::Postgres(_) => unreachable!("a SQLite store"),
                }
            }
        };
        let id_of = |subscriber_id: &'static str| {
            let store = store.clone();
            let env = tenant.environment_id.clone();
            async move {
                store
                    .visit_subscriber(&env, subscriber_id, |s| SubscriberRef::from(s.id))
                    .await
                    .unwrap()
            }
        };

        let first = service::create(&store, &tenant, "ada", SubscriberFields::default(), false)
            .await
            .unwrap()
            .subscriber;
        assert_eq!(seq_of("ada", false).await, slot(&env, "ada"));
        assert_eq!(id_of("ada").await, Some(first.id.clone()));

        // Deleted, the row keeps its slot; the new subscriber with that id gets another rowid.
        service::delete(&store, &tenant, "ada").await.unwrap();
        assert_eq!(id_of("ada").await, None);
        let second = service::create(&store, &tenant, "ada", SubscriberFields::default(), false)
            .await
            .unwrap()
            .subscriber;
        assert_eq!(seq_of("ada", true).await, slot(&env, "ada"));
        assert_ne!(seq_of("ada", false).await, slot(&env, "ada"));
        assert_eq!(id_of("ada").await, Some(second.id));

        assert_eq!(
            store.seed_subscribers(&tenant, "seed", 300).await.unwrap(),
            300
        );
        for n in [1, 150, 300] {
            let id = format!("seed{n}");
            assert_eq!(seq_of(&id, false).await, slot(&env, &id), "{id}");
        }

        // A seeded subscriber whose slot another row holds is stored elsewhere.
        let squatter = slot(&env, "late1");
        if let super::super::Db::Sqlite(p) = store.w() {
            sqlx::query(
                "insert into subscribers (seq, id, organization_id, environment_id, subscriber_id, \
                 created_at, updated_at) values (?1, 'squatter', 'o', ?2, 'squatter', 0, 0)",
            )
            .bind(squatter)
            .bind(env.clone())
            .execute(p)
            .await
            .unwrap();
        }
        assert_eq!(store.seed_subscribers(&tenant, "late", 1).await.unwrap(), 1);
        assert_ne!(seq_of("late1", false).await, squatter);
        assert!(id_of("late1").await.is_some());
        assert_eq!(id_of("squatter").await, Some("squatter".into()));
    }
}
