//! Fan-outs: claimed with a short lease, read batch by batch from a cursor over their sources. A batch's
//! notifications and the cursor's advance are written together by `Store::write_triggers` (see [`Advance`]).

use std::collections::HashSet;

use sqlx::types::Json;

use super::row::{sql_row, table};
use super::sql::Sql;
use super::{on_db, Cost, Dialect, Store};
use crate::domain::fanout::{
    Fanout, FanoutStatus, Position, Reached, Source, Subscription, Template,
};
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::Result;

table! {
    Fanout => "fanouts" {
        id: String,
        organization_id: String,
        environment_id: String,
        transaction_id: String,
        template: Json<Template>,
        sources: Json<Vec<Source>>,
        skip: Json<Vec<String>>,
        recipients: i64,
        status: String,
        created_at: i64,
        updated_at: i64,
    }
    nested position: Position {
        source_index: i64,
        cursor: String,
    }
}

sql_row! {
    struct ReachedRow {
        id: String,
        subscriber_ref: String,
        subscriber_id: String,
        identifier: Option<String>,
    }
}

/// A batch's move of a fan-out's cursor, written in the transaction that records the batch's notifications
/// and guarded by the lease and the position the batch was read from: a batch read twice (a lease that
/// expired under a slow worker, two processes) is recorded once, the other copy writes nothing.
#[derive(Debug, Clone)]
pub struct Advance {
    pub fanout_id: String,
    pub worker: String,
    pub from: Position,
    pub to: Position,
    /// The last source is exhausted: the fan-out completes.
    pub done: bool,
    /// The worker goes on with the next batch: it keeps the lease, renewed until this time (epoch ms),
    /// instead of releasing it (ignored when `done`).
    pub keep_until: Option<i64>,
}

/// One batch of a fan-out: the recipients read from its position, where the next batch starts, and whether
/// the sources are exhausted.
pub struct Batch {
    pub reached: Vec<Reached>,
    pub to: Position,
    pub done: bool,
}

/// Subscribers probed per "already reached?" statement (bounded bound parameters).
const PROBES_PER_QUERY: usize = 500;

impl Advance {
    /// `update fanouts …` that moves the cursor from `from` to `to` (counting `recipients` more), releases
    /// the lease so that the next batch may be claimed by any process (or renews it, with `keep_until`),
    /// and completes the fan-out when `done`; it changes one row only while `worker` holds the lease and the
    /// cursor is still at `from`.
    pub(super) fn statement(&self, recipients: usize, now: i64) -> Sql {
        let mut q = Sql::new("update fanouts set source_index = ");
        q.bind(self.to.source_index)
            .push(", cursor = ")
            .bind(self.to.cursor.as_str())
            .push(", recipients = recipients + ")
            .bind(recipients as i64)
            .push(", status = ")
            .bind(
                if self.done {
                    FanoutStatus::Completed
                } else {
                    FanoutStatus::Running
                }
                .as_str(),
            );
        match self.keep_until.filter(|_| !self.done) {
            Some(until) => q.push(", locked_until = ").bind(until),
            None => q.push(", locked_by = null, locked_until = null"),
        };
        q.push(", updated_at = ")
            .bind(now)
            .push(" where id = ")
            .bind(self.fanout_id.as_str())
            .push(" and status = 'running' and locked_by = ")
            .bind(self.worker.as_str())
            .push(" and source_index = ")
            .bind(self.from.source_index)
            .push(" and cursor = ")
            .bind(self.from.cursor.as_str());
        q
    }
}

impl Store {
    /// Claims the running fan-out that advanced longest ago and whose lease is free (or expired), for
    /// `worker` until `lease_ms` from now. One batch per claim: the batch's advance releases it, so fan-outs
    /// take turns and every process may take the next batch.
    pub async fn claim_fanout(&self, worker: &str, lease_ms: i64) -> Result<Option<Fanout>> {
        let now = Timestamp::now().0;
        let lock = match self.dialect() {
            Dialect::Postgres => " for update skip locked",
            Dialect::Sqlite => "",
        };
        let sql = format!(
            "update fanouts set locked_by = $1, locked_until = $2
             where id in (select id from fanouts
                          where status = 'running' and (locked_until is null or locked_until < $3)
                          order by updated_at limit 1{lock})
             returning {}",
            <Fanout as super::row::Table>::COLUMNS
        );
        let claimed = on_db!(self.w(), p => sqlx::query_as::<_, Fanout>(&sql)
            .bind(worker).bind(now + lease_ms).bind(now).fetch_optional(p).await)?;
        Ok(claimed)
    }

    /// The recipients of the next `limit` rows of `fanout`'s sources from its position on, in order, each
    /// once: a subscriber skipped by the fan-out (its actor, a topic's `exclude`), or already reached by its
    /// transaction (a direct recipient, an earlier topic or batch, one who left and joined again), is passed
    /// over. `in_flight`: subscriber ids reached by a batch that is being recorded (not visible yet), passed
    /// over as well.
    pub async fn fanout_batch(
        &self,
        fanout: &Fanout,
        limit: usize,
        in_flight: HashSet<String>,
    ) -> Result<Batch> {
        let mut at = fanout.position.clone();
        let mut read = 0;
        let mut candidates: Vec<(&Source, ReachedRow)> = Vec::new();
        let mut done = true;
        while let Some(source) = fanout.sources.get(at.source_index as usize) {
            let want = limit - read;
            let rows: Vec<ReachedRow> = self
                .rows(Cost::Scan, batch_query(fanout, source, &at.cursor, want))
                .await?;
            read += rows.len();
            let exhausted = rows.len() < want;
            if let Some(last) = rows.last() {
                at.cursor = last.id.clone();
            }
            let excluded: HashSet<&str> = match source {
                Source::Topic { exclude, .. } => exclude.iter().map(String::as_str).collect(),
                Source::Everyone => HashSet::new(),
            };
            candidates.extend(
                rows.into_iter()
                    .filter(|r| {
                        !excluded.contains(r.subscriber_id.as_str())
                            && !fanout.skip.contains(&r.subscriber_id)
                    })
                    .map(|r| (source, r)),
            );
            if !exhausted {
                done = false;
                break;
            }
            at = Position {
                source_index: at.source_index + 1,
                cursor: String::new(),
            };
        }
        let mut reached_before = in_flight;
        for chunk in candidates.chunks(PROBES_PER_QUERY) {
            let ids: Vec<&str> = chunk
                .iter()
                .map(|(_, r)| r.subscriber_id.as_str())
                .collect();
            let found: Vec<(String,)> = self
                .rows(Cost::Point, reached_query(self.dialect(), fanout, &ids))
                .await?;
            reached_before.extend(found.into_iter().map(|(id,)| id));
        }
        let mut reached = Vec::with_capacity(candidates.len());
        for (source, row) in candidates {
            // A subscriber in two topics of this batch: the first reaches it.
            if !reached_before.insert(row.subscriber_id.clone()) {
                continue;
            }
            reached.push(Reached {
                subscriber_ref: row.subscriber_ref.into(),
                subscriber_id: row.subscriber_id,
                subscription: match (source, row.identifier) {
                    (
                        Source::Topic {
                            topic_id,
                            topic_key,
                            ..
                        },
                        Some(identifier),
                    ) => Some(Subscription {
                        topic_id: topic_id.clone(),
                        topic_key: topic_key.clone(),
                        identifier,
                    }),
                    _ => None,
                },
            });
        }
        Ok(Batch {
            reached,
            to: at,
            done,
        })
    }

    /// Whether any fan-out is running (a read through `fanouts_running`: idle expansion loops, woken by every
    /// trigger, look before they claim, which is a write).
    pub async fn fanouts_running(&self) -> Result<bool> {
        let q = Sql::new("select cast(1 as bigint) from fanouts where status = 'running' limit 1");
        Ok(self.row::<(i64,)>(Cost::Point, q).await?.is_some())
    }

    /// Cancels the running fan-outs of a transaction: no batch is expanded after this. The number canceled.
    pub async fn cancel_fanouts(&self, env: &EnvironmentId, transaction_id: &str) -> Result<u64> {
        let now = Timestamp::now().0;
        Ok(on_db!(self.w(), p => sqlx::query(
            "update fanouts set status = 'canceled', locked_by = null, locked_until = null, updated_at = $1
             where environment_id = $2 and transaction_id = $3 and status = 'running'")
            .bind(now).bind(env.as_str()).bind(transaction_id).execute(p).await.map(|r| r.rows_affected()))?)
    }

    /// The fan-outs of a transaction, oldest first.
    pub async fn fanouts_of(
        &self,
        env: &EnvironmentId,
        transaction_id: &str,
    ) -> Result<Vec<Fanout>> {
        let mut q = Sql::new(&format!(
            "select {} from fanouts where environment_id = ",
            <Fanout as super::row::Table>::COLUMNS
        ));
        q.bind(env.as_str())
            .push(" and transaction_id = ")
            .bind(transaction_id)
            .push(" order by id");
        self.rows(Cost::Point, q).await
    }
}

/// Which of the subscriberIds `ids` the fan-out's transaction reached already: one probe each of
/// `notifications_subscriber`, among the subscriber's notifications since the fan-out was recorded (when its
/// trigger's direct recipients got theirs). `|| ''` keeps the planners off the transaction's index, which
/// would read every notification the fan-out wrote so far, for each batch. The dialects differ: PostgreSQL
/// takes an `in` list as one filter over a range when its statistics are stale (a fresh table, autovacuum
/// off), so each id is probed in a lateral join that can only run as a nested loop.
fn reached_query(dialect: Dialect, fanout: &Fanout, ids: &[&str]) -> Sql {
    let mut probe = Sql::new("n.environment_id = ");
    probe
        .bind(fanout.environment_id.as_str())
        .push(" and n.created_at >= ")
        .bind(fanout.created_at.0)
        .push(" and n.transaction_id || '' = ")
        .bind(fanout.transaction_id.as_str());
    match dialect {
        Dialect::Sqlite => {
            let mut q = Sql::new("select n.subscriber_id from notifications n where ");
            q.append(&probe);
            q.push_in("n.subscriber_id", ids);
            q
        }
        Dialect::Postgres => {
            let mut q = Sql::new("select v.id from (values ");
            for (i, id) in ids.iter().enumerate() {
                q.push(if i == 0 { "(" } else { ", (" }).bind(*id).push(")");
            }
            q.push(") as v(id) cross join lateral (select 1 from notifications n where ")
                .append(&probe)
                .push(" and n.subscriber_id = v.id limit 1) as hit");
            q
        }
    }
}

/// The next `limit` rows of `source` after `cursor`, in id order (served by `topic_subscriptions_fanout`,
/// or `subscribers_env_id` for everyone).
fn batch_query(fanout: &Fanout, source: &Source, cursor: &str, limit: usize) -> Sql {
    let mut q = match source {
        Source::Topic { topic_id, .. } => {
            let mut q = Sql::new(
                "select s.id, s.subscriber_ref, s.subscriber_id, s.identifier from topic_subscriptions s \
                 where s.topic_id = ",
            );
            q.bind(topic_id.as_str());
            q
        }
        Source::Everyone => {
            let mut q = Sql::new(
                "select s.id, s.id as subscriber_ref, s.subscriber_id, cast(null as text) as identifier \
                 from subscribers s where s.environment_id = ",
            );
            q.bind(fanout.environment_id.as_str())
                .push(" and s.deleted = false");
            q
        }
    };
    q.push(" and s.id > ")
        .bind(cursor)
        .push(" order by s.id limit ")
        .bind(limit as i64);
    q
}
