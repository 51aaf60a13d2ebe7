//! Jobs: claimed with leases, renewed while they run, completed atomically with everything they produced
//! (execution details, message, the next step's job), retried, released, canceled; digest lookups.

use serde_json::Value;
use sqlx::types::Json;

use super::digests::{digest_keys, key_locks, opening};
use super::inbox_events::InboxEvent;
use super::insert::{activate_jobs, batched, fail_fast_sql, insert_details, insert_messages};
use super::row::{table, Table};
use super::sql::{bind_args, Arg, Sql};
use super::{on_db, Cost, Dialect, Store};
use crate::domain::job::{DetailStatus, ExecutionDetail, Job, JobStatus, Message};
use crate::domain::workflow::Step;
use crate::domain::{EnvironmentId, JobId, NotificationId, Timestamp};
use crate::error::Result;

/// What [`Store::claim_jobs`] leased: the jobs, the first `reclaimed` of them claimed again after their lease
/// expired (the engine records those as lease expiries; the store records no metrics).
#[derive(Debug)]
pub struct Claimed {
    pub jobs: Vec<Job>,
    pub reclaimed: usize,
}

table! {
    Job => "jobs" {
        id: String,
        organization_id: String,
        environment_id: String,
        notification_id: String,
        subscriber_ref: String,
        subscriber_id: String,
        workflow_ref: String,
        transaction_id: String,
        step_index: i64,
        step: Json<Step>,
        status: String,
        provider_id: String,
        payload: Json<Value>,
        overrides: Option<Json<Value>>,
        digest: Option<Json<Value>>,
        digest_key: Option<String>,
        run_at: i64,
        attempts: i64,
        dedupe_key: String,
        schedule_extensions_count: i64,
        delivery: Option<Json<Value>>,
        created_at: i64,
        updated_at: i64,
    }
    written {
        // The claim's partial indexes are per step type.
        step_type: String = |j: &Job| j.step.step_type.as_str().to_owned(),
    }
}

/// Everything a finished job leaves behind, written atomically with its final status.
#[derive(Debug, Default)]
pub struct JobOutcome {
    /// `completed`, `failed`, `skipped`, …
    pub status: JobStatus,
    pub details: Vec<ExecutionDetail>,
    pub message: Option<Message>,
    /// The job of the next step, if the chain goes on: its pending job activated (`queued`; a digest opens
    /// its window or joins the open one, see `store::digests`), or — a notification triggered before jobs
    /// were created pending — created.
    pub next: Option<Job>,
    /// The chain ends here: the notification's jobs still pending (after `next`) end with this status.
    pub rest: Option<JobStatus>,
    /// The provider that handled the job (a delivery through an integration), shown instead of the one
    /// the job was created with.
    pub provider_id: Option<String>,
    /// Instead of finishing, the job goes back to the queue (a provider retry or failover): its details are
    /// written and it runs again at `run_at` with this delivery state.
    pub retry: Option<Requeue>,
}

/// When and with which delivery state a job runs again.
#[derive(Debug, Clone)]
pub struct Requeue {
    pub run_at: i64,
    pub delivery: Value,
}

impl Store {
    /// Gives back jobs `worker` holds but will not run (a stopping process): queued again at once, their
    /// claim not counted as an attempt.
    pub async fn release_jobs(&self, worker: &str, ids: &[JobId]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut q = Sql::new(
            "update jobs set status = 'queued', locked_by = null, locked_until = null, attempts = attempts - 1, \
             updated_at = ",
        );
        q.bind(Timestamp::now().0)
            .push(" where status = 'running' and locked_by = ")
            .bind(worker);
        // A digest whose key opened another window meanwhile stays running: its lease runs out and it is
        // claimed again (one open window per key, `jobs_open_digest`).
        q.push(
            " and (digest_key is null or not exists (select 1 from jobs o \
             where o.digest_key = jobs.digest_key and o.status = 'queued'))",
        );
        q.push_in("id", ids);
        Ok(
            on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?,
        )
    }

    /// Claims up to `limit` due jobs for `worker` with a lease. With `reclaim_expired`, jobs whose lease
    /// expired (their worker died) are claimed again, before due ones; the claim says how many.
    pub async fn claim_jobs(
        &self,
        worker: &str,
        limit: i64,
        lease_ms: i64,
        reclaim_expired: bool,
    ) -> Result<Claimed> {
        let now = Timestamp::now().0;
        // Two statements, each served by the `jobs_due (status, run_at)` index in order and stopping after
        // `limit` rows. One statement with `(queued and due) or (running and expired) order by run_at` would
        // collect and sort the whole backlog on every claim.
        let expired = if reclaim_expired {
            self.claim_where(
                worker,
                "status = 'running' and locked_until < $3",
                limit,
                lease_ms,
                now,
            )
            .await?
        } else {
            Vec::new()
        };
        let reclaimed = expired.len();
        let left = limit - reclaimed as i64;
        let mut jobs = expired;
        if left > 0 {
            jobs.extend(
                self.claim_where(
                    worker,
                    "status = 'queued' and run_at <= $3",
                    left,
                    lease_ms,
                    now,
                )
                .await?,
            );
        }
        Ok(Claimed { jobs, reclaimed })
    }

    async fn claim_where(
        &self,
        worker: &str,
        condition: &str,
        limit: i64,
        lease_ms: i64,
        now: i64,
    ) -> Result<Vec<Job>> {
        // The dialects differ here: PostgreSQL skips rows other workers are claiming right now; SQLite has
        // a single writer, so the statement is already exclusive.
        let lock = match self.dialect() {
            Dialect::Postgres => " for update skip locked",
            Dialect::Sqlite => "",
        };
        let sql = format!(
            "update jobs set status = 'running', locked_by = $1, locked_until = $2, attempts = attempts + 1,
               updated_at = $3
             where id in (select id from jobs where {condition} order by run_at limit $4{lock})
             returning {}",
            Job::COLUMNS
        );
        Ok(on_db!(self.w(), p => sqlx::query_as::<_, Job>(&sql)
            .bind(worker).bind(now + lease_ms).bind(now).bind(limit).fetch_all(p).await)?)
    }

    /// Extends the leases `worker` holds on `ids` to `lease_ms` from now (jobs still running under it).
    pub async fn renew_leases(&self, worker: &str, ids: &[JobId], lease_ms: i64) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let now = Timestamp::now().0;
        let mut q = Sql::new("update jobs set locked_until = ");
        q.bind(now + lease_ms)
            .push(" where status = 'running' and locked_by = ")
            .bind(worker);
        q.push_in("id", ids);
        Ok(
            on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?,
        )
    }

    /// The earliest `run_at` of a queued job, to know how long a worker may sleep.
    pub async fn next_job_due(&self) -> Result<Option<i64>> {
        let q = Sql::new("select min(run_at) from jobs where status = 'queued'");
        // One end of the `(status, run_at)` index.
        Ok(self
            .row::<(Option<i64>,)>(Cost::Point, q)
            .await?
            .and_then(|(at,)| at))
    }

    /// Finishes a job this worker holds, with everything it produced, atomically. False when the lease was
    /// lost (another worker took the job over): then nothing is written.
    pub async fn complete_job(
        &self,
        job: &Job,
        worker: &str,
        outcome: &JobOutcome,
    ) -> Result<bool> {
        Ok(self
            .complete_jobs(worker, &[(job, outcome)])
            .await?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// Finishes several jobs this worker holds in one transaction, with multi-row inserts. Per job: false when
    /// its lease was lost (then nothing of it is written).
    pub async fn complete_jobs(
        &self,
        worker: &str,
        items: &[(&Job, &JobOutcome)],
    ) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let completion = Completion::plan(self, worker, items.to_vec())?;
        let (owned, recorded) = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let done = complete_in_transaction!(tx, completion);
            tx.commit().await.map(|_| done)
        })?;
        recorded.announce(self);
        self.inbox_events().publish(created(items, &owned));
        Ok(items
            .iter()
            .map(|(j, _)| owned.contains(j.id.as_str()))
            .collect())
    }

    /// A job by its dedupe key (`Job::dedupe`: a notification's step).
    pub async fn get_job_by_dedupe(&self, dedupe_key: &str) -> Result<Option<Job>> {
        let mut q = Sql::new("select ");
        q.push(Job::COLUMNS)
            .push(" from jobs where dedupe_key = ")
            .bind(dedupe_key);
        self.row(Cost::Point, q).await
    }

    /// Cancels the queued and pending jobs of a transaction (steps not run yet); returns how many.
    pub async fn cancel_transaction(
        &self,
        env: &EnvironmentId,
        transaction_id: &str,
    ) -> Result<u64> {
        let now = Timestamp::now();
        let n = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let ids: Vec<(String, String, String)> = sqlx::query_as(
                "select id, notification_id, provider_id from jobs
                 where environment_id = $1 and transaction_id = $2 and status in ('queued', 'pending')")
                .bind(env.as_str()).bind(transaction_id).fetch_all(&mut *tx).await?;
            for (id, notification_id, provider_id) in &ids {
                sqlx::query("update jobs set status = 'canceled', updated_at = $1 where id = $2 and status in ('queued', 'pending')")
                    .bind(now.0).bind(id).execute(&mut *tx).await?;
                let d = ExecutionDetail {
                    id: crate::domain::new_object_id(),
                    environment_id: env.clone(),
                    job_id: JobId::from(id.as_str()),
                    notification_id: NotificationId::from(notification_id.as_str()),
                    status: DetailStatus::Warning,
                    detail: "Canceled by DELETE /v1/events/trigger/{transactionId}".into(),
                    source: "Internal".into(),
                    is_retry: false,
                    is_test: false,
                    provider_id: Some(provider_id.clone()),
                    raw: None,
                    created_at: now,
                };
                for q in insert_details(self.dialect(), &[&d])? {
                    bind_args!(sqlx::query(&q.text), q.args.clone()).execute(&mut *tx).await?;
                }
            }
            tx.commit().await.map(|_| ids.len() as u64)
        })?;
        Ok(n)
    }

    pub async fn insert_details(&self, details: &[ExecutionDetail]) -> Result<()> {
        let refs: Vec<&ExecutionDetail> = details.iter().collect();
        for q in insert_details(self.dialect(), &refs)? {
            on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args.clone()).execute(p).await.map(|_| ()))?;
        }
        Ok(())
    }

    /// Returns a claimed job to the queue to run again at `run_at` (after a transient failure).
    pub async fn retry_job(&self, job: &Job, worker: &str, run_at: i64) -> Result<bool> {
        let n = on_db!(self.w(), p => sqlx::query(
            "update jobs set status = 'queued', locked_by = null, locked_until = null, run_at = $1, updated_at = $2
             where id = $3 and status = 'running' and locked_by = $4")
            .bind(run_at).bind(Timestamp::now().0).bind(job.id.as_str()).bind(worker).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }
}

/// The statements that finish `items` for `worker`, each guarded by the lease (`returning id`: the jobs it
/// still held): a requeue per retried job, then one status update per distinct final status and provider.
fn finish_statements(worker: &str, items: &[(&Job, &JobOutcome)], now: i64) -> Vec<Sql> {
    // A job stored already finished (see `Completion::held`) needs none.
    let items: Vec<&(&Job, &JobOutcome)> = items
        .iter()
        .filter(|(j, _)| j.status == JobStatus::Running)
        .collect();
    // One status update per distinct final status, each guarded by the lease.
    let mut updates = Vec::new();
    for (job, o) in items.iter().copied() {
        if let Some(r) = &o.retry {
            let mut q = Sql::new("update jobs set status = 'queued', locked_by = null, locked_until = null, run_at = ");
            q.bind(r.run_at)
                .push(", delivery = ")
                .bind(Arg::Json(r.delivery.clone()));
            if let Some(p) = &o.provider_id {
                q.push(", provider_id = ").bind(p.as_str());
            }
            q.push(", updated_at = ")
                .bind(now)
                .push(" where id = ")
                .bind(&job.id);
            q.push(" and status = 'running' and locked_by = ")
                .bind(worker);
            q.push(" returning id");
            updates.push(q);
        }
    }
    // Grouped by final status and provider (nearly always one group).
    let mut groups: Vec<(JobStatus, Option<&str>)> = items
        .iter()
        .copied()
        .filter(|(_, o)| o.retry.is_none())
        .map(|(_, o)| (o.status, o.provider_id.as_deref()))
        .collect();
    groups.sort_unstable_by_key(|&(s, p)| (s.as_str(), p));
    groups.dedup();
    for (status, provider) in groups {
        let ids: Vec<&JobId> = items
            .iter()
            .copied()
            .filter(|(_, o)| {
                o.status == status && o.provider_id.as_deref() == provider && o.retry.is_none()
            })
            .map(|(j, _)| &j.id)
            .collect();
        let mut q = Sql::new("update jobs set status = ");
        q.bind(status.as_str());
        if let Some(p) = provider {
            q.push(", provider_id = ").bind(p);
        }
        q.push(", locked_until = null, updated_at = ").bind(now);
        q.push(" where status = 'running' and locked_by = ")
            .bind(worker);
        q.push_in("id", &ids);
        q.push(" returning id");
        updates.push(q);
    }
    updates
}

/// The completion of jobs a worker holds, as statements made before the transaction begins — on SQLite the
/// single writer then waits for nothing but the database — on the assumption that the worker still holds
/// every job and every next step is still pending; [`complete_in_transaction!`] makes them again for the
/// jobs and steps that are.
pub(super) struct Completion<'a> {
    pub(super) dialect: Dialect,
    /// Seals what the messages record of their destinations (see `messages::sealed_message`).
    pub(super) cipher: std::sync::Arc<crate::crypto::Cipher>,
    /// This process's webhook sender: the new messages' events go to it leased when it has room.
    pub(super) sender: Option<std::sync::Arc<dyn super::outbox::Sender>>,
    pub(super) now: i64,
    pub(super) items: Vec<(&'a Job, &'a JobOutcome)>,
    /// The jobs stored with their final status by the transaction itself (a fan-out's in-app first steps,
    /// run before their rows were written): held without a status update.
    pub(super) held: Vec<&'a str>,
    /// The status updates, guarded by the lease (they return the ids of the jobs still held).
    pub(super) updates: Vec<Sql>,
    /// The locks of the digest keys of the next steps (PostgreSQL), taken first.
    pub(super) locks: Option<Sql>,
    /// The next steps' activations (they return the ids of the jobs activated); a digest's is made when it
    /// is settled.
    pub(super) activations: Vec<Sql>,
    /// Then the details, messages and ends of chains ([`completion_writes`]).
    pub(super) writes: Vec<Sql>,
}

impl<'a> Completion<'a> {
    pub(super) fn plan(
        store: &Store,
        worker: &str,
        items: Vec<(&'a Job, &'a JobOutcome)>,
    ) -> serde_json::Result<Self> {
        let (dialect, cipher) = (store.dialect(), &store.cipher);
        let now = Timestamp::now().0;
        let updates = finish_statements(worker, &items, now)
            .into_iter()
            .map(|q| fail_fast_sql(dialect, q))
            .collect();
        Ok(Self {
            dialect,
            now,
            held: items
                .iter()
                .filter(|(j, _)| j.status != JobStatus::Running)
                .map(|(j, _)| j.id.as_str())
                .collect(),
            locks: key_locks(dialect, digest_keys(next_jobs(&items))),
            activations: activations(dialect, &items)?,
            writes: completion_writes(dialect, cipher, &items, None, now)?,
            cipher: cipher.clone(),
            sender: store.webhook_sender(),
            items,
            updates,
        })
    }
}

/// Runs a [`Completion`] in the transaction `$tx` and evaluates to the ids of the jobs the worker still held
/// (`HashSet<String>`: nothing is written for the others) and the webhook messages of the new messages'
/// events (`store::outbox::Handover`, to announce once committed). A macro, as the transaction's type differs by
/// database.
macro_rules! complete_in_transaction {
    ($tx:expr, $completion:expr) => {{
        use $crate::store::digests::{opening, settle_digests, Settled};
        use $crate::store::jobs::{activations, completion_writes, next_jobs, Completion, JobOutcome};
        use $crate::store::sql::bind_args;
        let mut c: Completion = $completion;
        if let Some(q) = c.locks.take() {
            bind_args!(sqlx::query(&q.text), q.args).execute(&mut *$tx).await?;
        }
        let mut owned: std::collections::HashSet<String> = c.held.iter().map(|id| id.to_string()).collect();
        for q in std::mem::take(&mut c.updates) {
            let ids: Vec<String> =
                bind_args!(sqlx::query_scalar(&q.text), q.args).fetch_all(&mut *$tx).await?;
            owned.extend(ids);
        }
        let done: Vec<(&$crate::domain::job::Job, &JobOutcome)> =
            c.items.iter().filter(|(j, _)| owned.contains(j.id.as_str())).map(|(j, o)| (*j, *o)).collect();
        if done.len() != c.items.len() {
            c.activations = activations(c.dialect, &done)?;
        }
        // The next steps' jobs first: one no longer pending (canceled meanwhile) is not activated, and the
        // detail and digest event that came with its activation are not written either.
        let mut activated: std::collections::HashSet<String> = std::collections::HashSet::new();
        for q in std::mem::take(&mut c.activations) {
            let ids: Vec<String> = bind_args!(sqlx::query_scalar(&q.text), q.args).fetch_all(&mut *$tx).await?;
            activated.extend(ids);
        }
        let digests: Vec<&$crate::domain::job::Job> =
            next_jobs(&done).into_iter().filter(|j| opening(j)).collect();
        for (id, settled) in settle_digests!($tx, c.dialect, digests, true, c.now) {
            if settled != Settled::Gone {
                activated.insert(id.as_str().to_owned());
            }
        }
        if done.len() != c.items.len() || activated.len() != next_jobs(&done).len() {
            c.writes = completion_writes(c.dialect, &c.cipher, &done, Some(&activated), c.now)?;
        }
        for q in std::mem::take(&mut c.writes) {
            bind_args!(sqlx::query(&q.text), q.args).execute(&mut *$tx).await?;
        }
        // The new messages' events (`message.sent`, …), in the outbox.
        let messages: Vec<&$crate::domain::job::Message> =
            done.iter().filter_map(|(_, o)| o.message.as_ref()).collect();
        let recorded = if messages.is_empty() {
            $crate::store::outbox::Handover::new(None)
        } else {
            let mut envs: Vec<&str> = messages.iter().map(|m| m.environment_id.as_str()).collect();
            envs.sort_unstable();
            envs.dedup();
            $crate::store::outbox::record_events!($tx, c.dialect, c.sender.as_ref(), &envs, $crate::domain::Timestamp(c.now),
                |r: &$crate::store::outbox::Receivers| $crate::store::outbox::message_events(r, &messages, None))
        };
        (owned, recorded)
    }};
}
pub(super) use complete_in_transaction;

/// The announcements of the in-app messages that completing `items` created: those of the jobs in `owned`
/// (the ones the transaction completed). Every completion that writes messages announces them with this,
/// once committed.
pub(super) fn created(
    items: &[(&Job, &JobOutcome)],
    owned: &std::collections::HashSet<String>,
) -> Vec<InboxEvent> {
    items
        .iter()
        .filter(|(j, _)| owned.contains(j.id.as_str()))
        .filter_map(|(_, o)| o.message.as_ref().and_then(InboxEvent::created))
        .collect()
}

/// The activations of the next steps of the finished jobs `done` (see [`activate_jobs`]), but for the
/// digests, settled one by one ([`settle_digests!`]).
pub(super) fn activations(
    dialect: Dialect,
    done: &[(&Job, &JobOutcome)],
) -> serde_json::Result<Vec<Sql>> {
    let plain: Vec<&Job> = next_jobs(done)
        .into_iter()
        .filter(|j| !opening(j))
        .collect();
    Ok(activate_jobs(dialect, &plain)?
        .into_iter()
        .map(|q| fail_fast_sql(dialect, q))
        .collect())
}

/// The next steps' jobs that finished jobs activate.
pub(super) fn next_jobs<'a>(done: &[(&'a Job, &'a JobOutcome)]) -> Vec<&'a Job> {
    done.iter().filter_map(|(_, o)| o.next.as_ref()).collect()
}

/// What completing the finished jobs `done` writes after their next steps were activated: their execution
/// details and messages, and the end of the chains they stop. `activated`: the next steps' jobs that were
/// activated (`None`: all of them); the detail that came with a step that was not is left out.
pub(super) fn completion_writes(
    dialect: Dialect,
    cipher: &crate::crypto::Cipher,
    done: &[(&Job, &JobOutcome)],
    activated: Option<&std::collections::HashSet<String>>,
    now: i64,
) -> serde_json::Result<Vec<Sql>> {
    let lost = |o: &JobOutcome| {
        activated.is_some_and(|a| o.next.as_ref().is_some_and(|n| !a.contains(n.id.as_str())))
    };
    let details: Vec<&ExecutionDetail> = done
        .iter()
        .flat_map(|(_, o)| {
            o.details
                .iter()
                .filter(move |d| !(lost(o) && o.next.as_ref().is_some_and(|n| n.id == d.job_id)))
        })
        .collect();
    let messages: Vec<&Message> = done
        .iter()
        .filter_map(|(_, o)| o.message.as_ref())
        .collect();
    let mut writes = insert_details(dialect, &details)?;
    writes.extend(insert_messages(dialect, cipher, &messages)?);
    // After the activations: the jobs a stopped chain never reaches.
    writes.extend(end_chains(done, now));
    Ok(batched(dialect, writes))
}

/// The updates that end the pending jobs of the notifications whose chain stops with `done` (their
/// `rest`), one per final status.
fn end_chains(done: &[(&Job, &JobOutcome)], now: i64) -> Vec<Sql> {
    let mut rest: Vec<(&str, &str)> = done
        .iter()
        .filter(|(_, o)| o.retry.is_none())
        .filter_map(|(j, o)| Some((o.rest?.as_str(), j.notification_id.as_str())))
        .collect();
    rest.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    while at < rest.len() {
        let status = rest[at].0;
        let ids: Vec<String> = rest[at..]
            .iter()
            .take_while(|(s, _)| *s == status)
            .map(|(_, n)| (*n).to_owned())
            .collect();
        at += ids.len();
        let mut q = Sql::new("update jobs set status = ");
        q.bind(status).push(", updated_at = ").bind(now);
        q.push(" where status = 'pending'");
        q.push_in("notification_id", &ids);
        out.push(q);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::plans::{migrated, plan};

    /// The digest lookups (the open window, the look-back) search a digest index by key; both indexes are
    /// partial: jobs without a digest key, nearly all of them, add no entry to them.
    #[test]
    fn digest_lookups_use_the_partial_digest_indexes() {
        let conn = migrated();
        for sql in [
            "update jobs set updated_at = 1 where digest_key = $1 and status = 'queued' returning id",
            "select count(*) from jobs where digest_key = $1 and created_at >= $2",
        ] {
            let p = plan(&conn, sql);
            assert!(
                p.contains("INDEX jobs_digest (digest_key=?")
                    || p.contains("INDEX jobs_open_digest (digest_key=?"),
                "{sql}: {p}"
            );
        }
        for index in ["jobs_digest", "jobs_open_digest"] {
            let partial: bool = conn
                .query_row(
                    "select \"partial\" from pragma_index_list('jobs') where name = $1",
                    [index],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(partial, "{index}");
        }
    }
}
