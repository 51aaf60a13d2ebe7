//! Recording triggers: a group of triggers in one transaction, with multi-row inserts. Grouping the triggers
//! of concurrent requests is the trigger writer's work (`engine::trigger_writer`); handing the due first jobs
//! to this process's workers is the hand-off's (`engine::handoff`). Here the rows are written.

use super::fanouts::Advance;
use super::insert::{
    append_digest_event, batched, insert_declared, insert_details, insert_jobs,
    insert_notifications, insert_rows,
};
use super::sql::{bind_args, Arg};
use super::{on_db, Dialect, Store};
use crate::domain::fanout::Fanout;
use crate::domain::job::{ExecutionDetail, Job, JobStatus, Notification};
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::Result;

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
pub type Leased<R> = (R, Vec<(Job, Notification)>);

/// What recording a group of triggers did.
pub struct Recorded<R> {
    /// Per record: true when it was recorded, false when its transaction id was seen before or its advance
    /// was no longer possible (then nothing of it was written).
    pub fresh: Vec<bool>,
    /// The jobs recorded already leased: `Some` when a lease was given and its `reserve` found room.
    pub leased: Option<Leased<R>>,
}

impl Store {
    /// Records triggers in one transaction, with multi-row inserts; with `lease`, the due first jobs are
    /// recorded already leased (see [`Lease`]) and returned once committed.
    pub async fn record_triggers<R, F: FnOnce(usize) -> Option<R>>(
        &self,
        records: &[TriggerRecord],
        lease: Option<Lease<'_, F>>,
    ) -> Result<Recorded<R>> {
        if records.is_empty() {
            return Ok(Recorded {
                fresh: Vec::new(),
                leased: None,
            });
        }
        let now = Timestamp::now().0;
        // In key order: concurrent transactions that share transaction ids (another process's group commit on
        // PostgreSQL) then wait for each other instead of deadlocking.
        let mut ordered: Vec<&TriggerRecord> = records.iter().collect();
        ordered.sort_by(|a, b| {
            (&a.environment_id.0, &a.transaction_id).cmp(&(&b.environment_id.0, &b.transaction_id))
        });
        let keys = insert_rows(
            "insert into trigger_transactions (environment_id, transaction_id, created_at)",
            "on conflict (environment_id, transaction_id) do nothing returning environment_id, transaction_id",
            ordered
                .iter()
                .filter(|r| r.advance.is_none())
                .map(|r| vec![Arg::from(r.environment_id.as_str()), Arg::from(&r.transaction_id), Arg::Int(now)])
                .collect(),
        );
        let dialect = self.dialect();
        let recorded = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let mut inserted: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
            for q in &keys {
                let rows: Vec<(String, String)> =
                    bind_args!(sqlx::query_as(&q.text), q.args.clone()).fetch_all(&mut *tx).await?;
                inserted.extend(rows);
            }
            // A transaction id repeated within this call counts once; a fan-out's batch counts when its cursor
            // moved.
            let mut fresh: Vec<bool> = Vec::with_capacity(records.len());
            for r in records {
                fresh.push(match &r.advance {
                    None => inserted.remove(&(r.environment_id.0.clone(), r.transaction_id.clone())),
                    Some(a) => {
                        let q = a.statement(r.batch.len(), now);
                        bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?.rows_affected() == 1
                    }
                });
            }
            let kept: Vec<&TriggerRecord> = records.iter().zip(&fresh).filter(|(_, f)| **f).map(|(r, _)| r).collect();
            let notifications: Vec<&Notification> = kept.iter().flat_map(|r| r.batch.iter().map(|b| &b.0)).collect();
            let jobs: Vec<&Job> = kept.iter().flat_map(|r| r.batch.iter().filter_map(|b| b.1.first())).collect();
            // The later steps' jobs, waiting for the chain to reach them.
            let later: Vec<&Job> = kept.iter().flat_map(|r| r.batch.iter().flat_map(|b| b.1.iter().skip(1))).collect();
            let (worker, reserve) = match lease {
                Some(l) => (Some((l.worker, now + l.lease_ms)), Some(l.reserve)),
                None => (None, None),
            };
            let (queued, leased) = split_due(&jobs, &notifications, now, reserve);
            let details: Vec<&ExecutionDetail> = kept.iter().flat_map(|r| r.batch.iter().flat_map(|b| &b.2)).collect();
            let fanouts: Vec<&Fanout> = kept.iter().filter_map(|r| r.fanout.as_deref()).collect();
            let mut inserts = insert_declared(&fanouts, "")?;
            inserts.extend(insert_notifications(&notifications)?);
            inserts.extend(insert_jobs(&queued, None)?);
            inserts.extend(insert_jobs(&later, None)?);
            if let Some(worker) = worker {
                let handed: Vec<&Job> = leased.iter().flat_map(|(_, handed)| handed.iter().map(|(j, _)| j)).collect();
                inserts.extend(insert_jobs(&handed, Some(worker))?);
            }
            inserts.extend(insert_details(&details)?);
            for q in batched(dialect, inserts) {
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            for (open, job) in digest_merges(&jobs) {
                let event = serde_json::json!({
                    "id": job.transaction_id, "time": job.created_at.to_iso(), "payload": job.payload,
                });
                append_digest_event!(&mut *tx, dialect, open, event, now);
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(Recorded { fresh, leased })
        })?;
        Ok(recorded)
    }
}

/// The first jobs of new notifications (`jobs[i]` the first job of `notifications[i]`) split into those
/// queued as usual and those that go to this process's workers already leased: the due ones, as far as
/// `reserve` has room for all of them, each with its notification and counted as a claim.
fn split_due<'j, R>(
    jobs: &[&'j Job],
    notifications: &[&Notification],
    now: i64,
    reserve: Option<impl FnOnce(usize) -> Option<R>>,
) -> (Vec<&'j Job>, Option<Leased<R>>) {
    if let Some(reserve) = reserve {
        let (due, rest): (Vec<usize>, Vec<usize>) = (0..jobs.len())
            .partition(|&i| jobs[i].status == JobStatus::Queued && jobs[i].run_at.0 <= now);
        if let Some(room) = reserve(due.len()) {
            let handed = due
                .into_iter()
                .map(|i| {
                    let mut job = jobs[i].clone();
                    job.status = JobStatus::Running;
                    job.attempts += 1;
                    (job, notifications[i].clone())
                })
                .collect();
            let queued = rest.into_iter().map(|i| jobs[i]).collect();
            return (queued, Some((room, handed)));
        }
    }
    (jobs.to_vec(), None)
}

/// The first jobs that merge their event into an open digest, by digest job (stable: each job's events stay
/// in order), so that concurrent transactions lock the jobs in the same order.
fn digest_merges<'j>(jobs: &[&'j Job]) -> Vec<(&'j str, &'j Job)> {
    let mut merges: Vec<(&str, &Job)> = jobs
        .iter()
        .filter_map(|job| {
            let open = job.digest.as_ref()?.get("mergedInto")?.as_str()?;
            Some((open, *job))
        })
        .collect();
    merges.sort_by_key(|(open, _)| *open);
    merges
}
