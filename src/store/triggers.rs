//! Recording triggers: a group of triggers in one transaction, with multi-row inserts. Grouping the triggers
//! of concurrent requests is the trigger writer's work (`engine::trigger_writer`); handing the due first jobs
//! to this process's workers is the hand-off's (`engine::handoff`). Here the rows are written.

use super::digests::{digest_keys, key_locks, opening, settle_digests};
use super::fanouts::Advance;
use super::insert::{
    batched, fail_fast_sql, insert_declared, insert_details, insert_jobs, insert_notifications,
    insert_rows,
};
use super::jobs::{complete_in_transaction, created, Completion, JobOutcome};
use super::sql::{bind_args, Arg, Sql};
use super::{on_db, Dialect, Store};
use crate::domain::fanout::Fanout;
use crate::domain::job::{ExecutionDetail, Job, JobStatus, Notification};
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::Result;
use std::collections::HashSet;

/// One trigger to record: its transaction id and, per recipient, the notification, the jobs of its steps
/// in step order (the first queued or merged, the others pending or skipped; never empty) and the first
/// job's first execution details.
pub struct TriggerRecord {
    pub environment_id: EnvironmentId,
    pub transaction_id: String,
    pub batch: Vec<(Notification, Vec<Job>, Vec<ExecutionDetail>)>,
    /// A trigger to topics: the fan-out recorded with it, expanded later by workers.
    pub fanout: Option<Box<Fanout>>,
    /// A batch of a fan-out (not a trigger of its own: its transaction id was recorded by the trigger): it
    /// is recorded only when this advance of the fan-out's cursor is still possible.
    pub advance: Option<Advance>,
    /// The first jobs a worker already ran (in-app steps due at once: `engine::run_due_in_app`), as
    /// `(i, outcome)` for `batch[i]`'s first job (marked running), in the order of `i`. They are recorded
    /// leased to that worker, `ran_by`, and completed with their outcomes in the same transaction, instead of
    /// being queued for a claim.
    pub ran: Vec<(usize, JobOutcome)>,
    pub ran_by: Option<String>,
}

/// Where the first jobs of new notifications that are due at once may go already leased (as a claim would
/// lease them): to `worker`, until `lease_ms` from now, when `reserve(n)` finds room for all `n` of them. It
/// returns what holds that room, or `None`: then they are queued for claiming as usual.
pub struct Lease<'a, F> {
    pub worker: &'a str,
    pub lease_ms: i64,
    pub reserve: F,
}

/// Jobs recorded already leased, each with its notification, and the room a [`Lease`]'s `reserve` gave them.
pub type Leased<R> = (R, Vec<HandedJob>);

/// A job recorded already leased, with its notification.
pub type HandedJob = (Job, Notification);

/// What recording a group of triggers did.
pub struct Recorded<R> {
    /// Per record: true when it was recorded, false when its transaction id was seen before or its advance
    /// was no longer possible (then nothing of it was written).
    pub fresh: Vec<bool>,
    /// The jobs recorded already leased: `Some` when a lease was given and its `reserve` found room.
    pub leased: Option<Leased<R>>,
}

/// A group of triggers made into statements, ready to be written by [`Store::write_triggers`]: the work of
/// recording them that needs no database, done beforehand — the trigger writer makes the next group's plan
/// while the group before is being written.
pub struct TriggerPlan<'r, R> {
    records: &'r [TriggerRecord],
    dialect: Dialect,
    now: i64,
    /// With a lease: the worker the due first jobs go to, and until when.
    worker: Option<(&'r str, i64)>,
    /// The locks of the digest keys of every record (PostgreSQL), taken first.
    locks: Option<Sql>,
    /// The inserts of the triggers' keys, and per record the advance of its fan-out's cursor.
    keys: Vec<Sql>,
    advances: Vec<Option<Sql>>,
    rows: TriggerRows<'r>,
    leased: Option<Leased<R>>,
    /// Made on the assumption that every record is fresh; in the rare case that one is not, they are made
    /// again for those that are.
    inserts: Vec<Sql>,
    completion: Option<Completion<'r>>,
}

impl Store {
    /// Makes a group of triggers into statements (see [`TriggerPlan`]); with `lease`, the due first jobs are
    /// recorded already leased (see [`Lease`]).
    pub fn plan_triggers<'r, R, F: FnOnce(usize) -> Option<R>>(
        &self,
        records: &'r [TriggerRecord],
        lease: Option<Lease<'r, F>>,
    ) -> Result<TriggerPlan<'r, R>> {
        let now = Timestamp::now().0;
        let dialect = self.dialect();
        // In key order: concurrent transactions that share transaction ids (another process's group commit on
        // PostgreSQL) then wait for each other instead of deadlocking.
        let mut ordered: Vec<&TriggerRecord> = records.iter().collect();
        ordered.sort_by(|a, b| {
            (&a.environment_id, &a.transaction_id).cmp(&(&b.environment_id, &b.transaction_id))
        });
        let keys = insert_rows(
            dialect,
            "insert into trigger_transactions (environment_id, transaction_id, created_at)",
            "on conflict (environment_id, transaction_id) do nothing returning environment_id, transaction_id",
            ordered
                .iter()
                .filter(|r| r.advance.is_none())
                .map(|r| vec![Arg::from(r.environment_id.as_str()), Arg::from(&r.transaction_id), Arg::Int(now)])
                .collect(),
        )
        .into_iter()
        .map(|q| fail_fast_sql(dialect, q))
        .collect();
        let advances = records
            .iter()
            .map(|r| {
                let a = r.advance.as_ref()?;
                Some(fail_fast_sql(dialect, a.statement(r.batch.len(), now)))
            })
            .collect();
        let (worker, reserve) = match lease {
            Some(l) => (Some((l.worker, now + l.lease_ms)), Some(l.reserve)),
            None => (None, None),
        };
        let all: Vec<&TriggerRecord> = records.iter().collect();
        let (rows, leased) = TriggerRows::plan(&all, now, reserve);
        let inserts = rows.statements(dialect, worker, &leased, now)?;
        let completion = rows.completion(self)?;
        let mut keys_to_lock: Vec<&str> = digest_keys(rows.openings.iter().copied()).collect();
        if let Some(c) = &completion {
            keys_to_lock.extend(digest_keys(
                c.items.iter().filter_map(|(_, o)| o.next.as_ref()),
            ));
        }
        Ok(TriggerPlan {
            records,
            dialect,
            now,
            worker,
            locks: key_locks(dialect, keys_to_lock),
            keys,
            advances,
            rows,
            leased,
            inserts,
            completion,
        })
    }

    /// Writes a planned group of triggers in one transaction, with multi-row inserts; the jobs recorded
    /// leased are returned once committed.
    pub async fn write_triggers<R>(&self, plan: TriggerPlan<'_, R>) -> Result<Recorded<R>> {
        let TriggerPlan {
            records,
            dialect,
            now,
            worker,
            locks,
            keys,
            advances,
            mut rows,
            leased,
            mut inserts,
            mut completion,
        } = plan;
        if records.is_empty() {
            return Ok(Recorded {
                fresh: Vec::new(),
                leased,
            });
        }
        let recorded = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            if let Some(q) = locks {
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            let mut inserted: std::collections::HashSet<(EnvironmentId, String)> = std::collections::HashSet::new();
            for q in keys {
                let rows: Vec<(EnvironmentId, String)> =
                    bind_args!(sqlx::query_as(&q.text), q.args).fetch_all(&mut *tx).await?;
                inserted.extend(rows);
            }
            // A transaction id repeated within this call counts once; a fan-out's batch counts when its cursor
            // moved.
            let mut fresh: Vec<bool> = Vec::with_capacity(records.len());
            for (r, advance) in records.iter().zip(advances) {
                fresh.push(match advance {
                    None => inserted.remove(&(r.environment_id.clone(), r.transaction_id.clone())),
                    Some(q) => {
                        bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?.rows_affected() == 1
                    }
                });
            }
            let leased = if fresh.iter().all(|f| *f) {
                leased
            } else {
                let kept: Vec<&TriggerRecord> = records.iter().zip(&fresh).filter(|(_, f)| **f).map(|(r, _)| r).collect();
                let leased = rows.keep(&kept, leased);
                inserts = rows.statements(dialect, worker, &leased, now)?;
                completion = rows.completion(self)?;
                leased
            };
            for q in std::mem::take(&mut inserts) {
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            settle_digests!(tx, dialect, rows.openings.clone(), false, now);
            let (announced, webhooks) = match completion.take() {
                Some(completion) => {
                    let items = completion.items.clone();
                    let (owned, webhooks) = complete_in_transaction!(tx, completion);
                    (created(&items, &owned), webhooks)
                }
                None => (Vec::new(), super::outbox::Handover::new(None)),
            };
            tx.commit().await?;
            Ok::<_, sqlx::Error>((Recorded { fresh, leased }, announced, webhooks))
        })?;
        let (recorded, announced, webhooks) = recorded;
        self.inbox_events().publish(announced);
        webhooks.announce(self);
        Ok(recorded)
    }
}

/// The rows a group of triggers writes, by kind, in record order.
struct TriggerRows<'r> {
    fanouts: Vec<&'r Fanout>,
    notifications: Vec<&'r Notification>,
    /// The first jobs that open a digest window or join the open one, settled in the transaction.
    openings: Vec<&'r Job>,
    /// The first jobs that did not run yet, each with its notification.
    waiting: Vec<(&'r Job, &'r Notification)>,
    /// Of those, the ones queued for claiming: not handed to this process's workers.
    queued: Vec<&'r Job>,
    /// The first jobs a fan-out's worker already ran, with their outcomes, and that worker.
    ran: Vec<(&'r Job, &'r JobOutcome)>,
    ran_by: Option<&'r str>,
    /// The later steps' jobs, waiting for the chain to reach them.
    later: Vec<&'r Job>,
    details: Vec<&'r ExecutionDetail>,
}

impl<'r> TriggerRows<'r> {
    fn of(records: &[&'r TriggerRecord]) -> Self {
        let batch = || records.iter().flat_map(|r| r.batch.iter());
        let mut ran = Vec::new();
        let mut ran_by = None;
        let mut waiting = Vec::new();
        let mut openings = Vec::new();
        for r in records {
            let worker = r.ran_by.as_deref();
            let mut outcomes = r.ran.iter().filter(|_| worker.is_some()).peekable();
            for (i, (n, jobs, _)) in r.batch.iter().enumerate() {
                let Some(job) = jobs.first() else { continue };
                if opening(job) {
                    openings.push(job);
                    continue;
                }
                match outcomes.next_if(|(at, _)| *at == i) {
                    Some((_, outcome)) => {
                        ran.push((job, outcome));
                        ran_by = worker;
                    }
                    None => waiting.push((job, n)),
                }
            }
        }
        Self {
            fanouts: records.iter().filter_map(|r| r.fanout.as_deref()).collect(),
            notifications: batch().map(|b| &b.0).collect(),
            openings,
            queued: waiting.iter().map(|(job, _)| *job).collect(),
            waiting,
            ran,
            ran_by,
            later: batch().flat_map(|b| b.1.iter().skip(1)).collect(),
            details: batch().flat_map(|b| &b.2).collect(),
        }
    }

    /// The rows of `records`, with the due first jobs handed over as far as `reserve` finds room (see
    /// [`split_due`]).
    fn plan<R>(
        records: &[&'r TriggerRecord],
        now: i64,
        reserve: Option<impl FnOnce(usize) -> Option<R>>,
    ) -> (Self, Option<Leased<R>>) {
        let mut rows = Self::of(records);
        let (queued, leased) = split_due(&rows.waiting, now, reserve);
        rows.queued = queued;
        (rows, leased)
    }

    /// Narrows the rows to those of `kept` (the records that turned out fresh), and the jobs `leased` to
    /// theirs.
    fn keep<R>(
        &mut self,
        kept: &[&'r TriggerRecord],
        leased: Option<Leased<R>>,
    ) -> Option<Leased<R>> {
        *self = Self::of(kept);
        let (room, handed) = leased?;
        let notifications: HashSet<&str> =
            self.notifications.iter().map(|n| n.id.as_str()).collect();
        let handed: Vec<HandedJob> = handed
            .into_iter()
            .filter(|(job, _)| notifications.contains(job.notification_id.as_str()))
            .collect();
        let handed_ids: HashSet<&str> = handed.iter().map(|(job, _)| job.id.as_str()).collect();
        self.queued
            .retain(|job| !handed_ids.contains(job.id.as_str()));
        Some((room, handed))
    }

    /// The inserts, with the handed jobs stored leased to `worker` (until the given time), and the jobs
    /// that ran stored with the worker that ran them — as they ended, or running when they are retried —
    /// and completed next, in the same transaction.
    fn statements<R>(
        &self,
        dialect: Dialect,
        worker: Option<(&str, i64)>,
        leased: &Option<Leased<R>>,
        now: i64,
    ) -> serde_json::Result<Vec<Sql>> {
        let mut inserts = insert_declared(dialect, &self.fanouts, "")?;
        inserts.extend(insert_notifications(dialect, &self.notifications)?);
        inserts.extend(insert_jobs(dialect, &self.queued, None)?);
        inserts.extend(insert_jobs(dialect, &self.later, None)?);
        if let (Some(worker), Some((_, handed))) = (worker, leased) {
            let handed: Vec<&Job> = handed.iter().map(|(job, _)| job).collect();
            inserts.extend(insert_jobs(dialect, &handed, Some(worker))?);
        }
        if let Some(by) = self.ran_by {
            let ran: Vec<&Job> = self.ran.iter().map(|(job, _)| *job).collect();
            inserts.extend(insert_jobs(dialect, &ran, Some((by, now)))?);
        }
        inserts.extend(insert_details(dialect, &self.details)?);
        Ok(batched(dialect, inserts))
    }

    /// The completion of the jobs that ran.
    fn completion(&self, store: &Store) -> serde_json::Result<Option<Completion<'r>>> {
        match self.ran_by {
            Some(by) if !self.ran.is_empty() => {
                Completion::plan(store, by, self.ran.clone()).map(Some)
            }
            _ => Ok(None),
        }
    }
}

/// The first jobs of new notifications that did not run yet (each with its notification) split into those
/// queued as usual and those that go to this process's workers already leased: the due ones, as far as
/// `reserve` has room for all of them, each with its notification and counted as a claim.
fn split_due<'j, R>(
    waiting: &[(&'j Job, &Notification)],
    now: i64,
    reserve: Option<impl FnOnce(usize) -> Option<R>>,
) -> (Vec<&'j Job>, Option<Leased<R>>) {
    if let Some(reserve) = reserve {
        let (due, rest): (Vec<&(&Job, &Notification)>, Vec<_>) = waiting
            .iter()
            .partition(|w| w.0.status == JobStatus::Queued && w.0.run_at.0 <= now);
        if let Some(room) = reserve(due.len()) {
            let handed = due
                .into_iter()
                .map(|w| {
                    let mut job = w.0.clone();
                    job.status = JobStatus::Running;
                    job.attempts += 1;
                    (job, w.1.clone())
                })
                .collect();
            let queued = rest.into_iter().map(|w| w.0).collect();
            return (queued, Some((room, handed)));
        }
    }
    (waiting.iter().map(|w| w.0).collect(), None)
}
