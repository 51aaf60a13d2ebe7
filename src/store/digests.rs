//! The rules that must hold whatever the concurrency, decided inside the transaction that records the event
//! and enforced by the database:
//! - **one open digest per digest key** (subscriber, workflow, step and digest key value): a digest job
//!   either opens the window of its key or joins the one already open (`merged`), in the transaction that
//!   records it — a trigger's group commit, or the completion that reaches the digest step. The unique
//!   index `jobs_open_digest` makes a second open window impossible;
//! - **a throttle's threshold**: a run goes through only while fewer than the threshold went through in the
//!   window (`throttle_passes`).
//!
//! Both decide under a lock of their key: on PostgreSQL a transaction-scoped advisory lock (taken at the
//! start of the transaction, keys in order, so two transactions never wait for each other in a circle); on
//! SQLite the single writer already runs one transaction at a time.

use sha2::{Digest, Sha256};

use super::sql::{Arg, Sql};
use super::{on_db, Dialect, Store};
use crate::domain::job::{DetailStatus, ExecutionDetail, Job, JobStatus};
use crate::domain::{JobId, Timestamp};
use crate::error::Result;

/// The first number of the advisory locks of digest and throttle keys (the second is the key's hash), apart
/// from the start-up lock's single number.
const KEY_LOCKS: i32 = 0x7464; // "td"

/// The statement that takes the locks of `keys` for the rest of the transaction, in the order of their
/// hashes; `None` on SQLite (one writer) or without keys. Two keys with the same hash share a lock, which
/// costs only waiting.
pub(super) fn key_locks<'k>(
    dialect: Dialect,
    keys: impl IntoIterator<Item = &'k str>,
) -> Option<Sql> {
    if dialect != Dialect::Postgres {
        return None;
    }
    let mut hashes: Vec<i64> = keys.into_iter().map(|k| i64::from(key_hash(k))).collect();
    if hashes.is_empty() {
        return None;
    }
    hashes.sort_unstable();
    hashes.dedup();
    // The array's elements come in order, and the aggregate makes every row's lock taken.
    let mut q = Sql::new(&format!(
        "select count(pg_advisory_xact_lock({KEY_LOCKS}, value::int4)) from jsonb_array_elements_text("
    ));
    q.bind(Arg::Json(serde_json::json!(hashes)));
    q.push(")");
    Some(q)
}

/// The lock number of a key: the first four bytes of its SHA-256.
fn key_hash(key: &str) -> i32 {
    let digest = Sha256::digest(key.as_bytes());
    i32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// The digest keys of `jobs` that open or join a window.
pub(super) fn digest_keys<'j>(
    jobs: impl IntoIterator<Item = &'j Job>,
) -> impl Iterator<Item = &'j str> {
    jobs.into_iter()
        .filter(|j| opening(j))
        .filter_map(|j| j.digest_key.as_deref())
}

/// Whether `job` is a digest job that opens a window or joins the open one: queued with a digest key.
pub(super) fn opening(job: &Job) -> bool {
    job.status == JobStatus::Queued && job.digest_key.is_some()
}

/// How a digest job was settled.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// It opened the window of its key.
    Opened,
    /// Its event joined the window open under this job.
    Merged(JobId),
    /// Its step was no longer pending (canceled meanwhile): nothing was written.
    Gone,
}

/// The statements that settle one digest job, by step; see [`settle_digests!`].
pub(super) struct Settling;

impl Settling {
    /// Reads (and on PostgreSQL locks) the pending row of a step the chain reaches, to know it is still
    /// pending.
    pub(super) fn pending(dialect: Dialect, job: &Job) -> Sql {
        let mut q = Sql::new("select status from jobs where dedupe_key = ");
        q.bind(job.dedupe_key.as_str());
        if dialect == Dialect::Postgres {
            q.push(" for update");
        }
        q
    }

    /// Appends the job's event to the open digest of its key, returning that digest's id: the row's lock
    /// holds it open (a claim skips or waits for it) until the transaction ends; nothing when no window is
    /// open.
    pub(super) fn join(dialect: Dialect, job: &Job, now: i64) -> Sql {
        let event = job
            .digest
            .as_ref()
            .and_then(|d| d.get("events"))
            .and_then(|e| e.get(0))
            .cloned()
            .unwrap_or_default();
        let mut q = Sql::new(match dialect {
            Dialect::Postgres => {
                "update jobs set digest = jsonb_set(coalesce(digest, '{}'::jsonb), '{events}', \
                 coalesce(digest -> 'events', '[]'::jsonb) || jsonb_build_array("
            }
            Dialect::Sqlite => {
                "update jobs set digest = json_set(coalesce(digest, '{}'), '$.events', \
                 json_insert(coalesce(json_extract(digest, '$.events'), json('[]')), '$[#]', json("
            }
        });
        q.bind(Arg::Json(event));
        q.push(match dialect {
            Dialect::Postgres => "::jsonb))",
            Dialect::Sqlite => ")))",
        });
        q.push(", updated_at = ").bind(now);
        q.push(" where digest_key = ")
            .bind(job.digest_key.as_deref().unwrap_or_default());
        q.push(" and status = 'queued' returning id");
        q
    }

    /// Whether a digest of the job's key was created inside its look-back window (backoff digests).
    pub(super) fn recent(job: &Job, since: i64) -> Sql {
        let mut q = Sql::new("select count(*) from jobs where digest_key = ");
        q.bind(job.digest_key.as_deref().unwrap_or_default());
        q.push(" and created_at >= ").bind(since);
        q
    }

    /// The job as settled: merged into `open` (its digest names it), or opening its window — at once for a
    /// backoff digest with nothing in its look-back window (`quiet`).
    pub(super) fn settled(job: &Job, open: Option<&str>, quiet: bool, now: i64) -> Job {
        let mut job = job.clone();
        match open {
            Some(open) => {
                job.status = JobStatus::Merged;
                let mut digest = match job.digest.take() {
                    Some(serde_json::Value::Object(m)) => m,
                    _ => serde_json::Map::from_iter([("type".to_owned(), "regular".into())]),
                };
                digest.insert("mergedInto".into(), open.into());
                job.digest = Some(serde_json::Value::Object(digest));
            }
            None if quiet => job.run_at = Timestamp(now),
            None => {}
        }
        job
    }

    /// The detail of a digest job that joined the window open under `open`, or — a step the chain reached —
    /// that opened its own.
    pub(super) fn detail(job: &Job, open: Option<&str>, reached: bool) -> Option<ExecutionDetail> {
        match open {
            Some(open) => Some(ExecutionDetail::for_job(
                job,
                DetailStatus::Success,
                "Internal",
                format!("Event added to the open digest of job {open}"),
            )),
            None if reached => Some(ExecutionDetail::for_job(
                job,
                DetailStatus::Queued,
                "Internal",
                format!("Step queued; runs at {}", job.run_at.to_iso()),
            )),
            None => None,
        }
    }

    /// Skips the later steps of a notification whose event joined another digest: that digest's chain
    /// delivers it.
    pub(super) fn skip_rest(job: &Job, now: i64) -> Sql {
        let mut q = Sql::new("update jobs set status = 'skipped', updated_at = ");
        q.bind(now);
        q.push(" where notification_id = ")
            .bind(job.notification_id.as_str());
        q.push(" and status = 'pending'");
        q
    }
}

/// Settles digest jobs in the transaction `$tx` (whose key locks are held): each, in the order of its key,
/// joins the window open for its key or opens it, and is written as settled — inserted (`$reached` false: the
/// first steps of new notifications) or activated from its pending row (`$reached` true: the steps the
/// chain reaches; one no longer pending is left alone) — with its detail and, when it joined, the end of its
/// chain. Evaluates to each job's id and [`Settled`]. A macro, as the transaction's type differs by database.
macro_rules! settle_digests {
    ($tx:expr, $dialect:expr, $jobs:expr, $reached:expr, $now:expr) => {{
        use $crate::store::digests::{Settled, Settling};
        use $crate::store::insert::{activate_jobs, insert_details, insert_jobs};
        use $crate::store::sql::bind_args;
        let dialect: $crate::store::Dialect = $dialect;
        let now: i64 = $now;
        let mut jobs: Vec<&$crate::domain::job::Job> = $jobs;
        jobs.sort_by(|a, b| a.digest_key.cmp(&b.digest_key));
        let mut out: Vec<($crate::domain::JobId, Settled)> = Vec::with_capacity(jobs.len());
        for job in jobs {
            if $reached {
                let q = Settling::pending(dialect, job);
                let status: Option<String> = bind_args!(sqlx::query_scalar(&q.text), q.args)
                    .fetch_optional(&mut *$tx)
                    .await?;
                if status.is_some_and(|s| s != "pending") {
                    out.push((job.id.clone(), Settled::Gone));
                    continue;
                }
            }
            let q = Settling::join(dialect, job, now);
            let open: Option<String> = bind_args!(sqlx::query_scalar(&q.text), q.args)
                .fetch_optional(&mut *$tx)
                .await?;
            let quiet = match (&open, job.step.digest_look_back()) {
                (None, Some(look_back)) => {
                    let q = Settling::recent(job, now - look_back);
                    let n: i64 = bind_args!(sqlx::query_scalar(&q.text), q.args)
                        .fetch_one(&mut *$tx)
                        .await?;
                    n == 0
                }
                _ => false,
            };
            let settled = Settling::settled(job, open.as_deref(), quiet, now);
            let mut writes = if $reached {
                activate_jobs(dialect, &[&settled])?
            } else {
                insert_jobs(dialect, &[&settled], None)?
            };
            if let Some(d) = Settling::detail(&settled, open.as_deref(), $reached) {
                writes.extend(insert_details(dialect, &[&d])?);
            }
            if open.is_some() {
                writes.push(Settling::skip_rest(&settled, now));
            }
            for q in writes {
                bind_args!(sqlx::query(&q.text), q.args)
                    .execute(&mut *$tx)
                    .await?;
            }
            out.push((
                job.id.clone(),
                match open {
                    Some(open) => Settled::Merged($crate::domain::JobId::from(open.as_str())),
                    None => Settled::Opened,
                },
            ));
        }
        out
    }};
}
pub(super) use settle_digests;

impl Store {
    /// Records a run of a throttle under `key` when fewer than `threshold` went through since `since`:
    /// answers whether it goes through and how many went through in the window, itself included. A job that
    /// went through before (and runs again after a crash) goes through again without counting twice.
    pub async fn pass_throttle(
        &self,
        key: &str,
        job: &JobId,
        since: i64,
        threshold: i64,
    ) -> Result<(bool, i64)> {
        let now = Timestamp::now().0;
        let dialect = self.dialect();
        let lock = key_locks(dialect, [key]);
        let passed = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            if let Some(q) = lock {
                super::sql::bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            sqlx::query("delete from throttle_passes where throttle_key = $1 and passed_at < $2")
                .bind(key).bind(since).execute(&mut *tx).await?;
            let (count, mine): (i64, i64) = sqlx::query_as(
                "select count(*), count(case when job_id = $2 then 1 end) from throttle_passes \
                 where throttle_key = $1")
                .bind(key).bind(job.as_str()).fetch_one(&mut *tx).await?;
            let passed = if mine > 0 {
                (true, count)
            } else if count < threshold {
                sqlx::query("insert into throttle_passes (throttle_key, job_id, passed_at) values ($1, $2, $3)")
                    .bind(key).bind(job.as_str()).bind(now).execute(&mut *tx).await?;
                (true, count + 1)
            } else {
                (false, count)
            };
            tx.commit().await.map(|_| passed)
        })?;
        Ok(passed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_locks_are_postgres_only_sorted_and_distinct() {
        assert!(key_locks(Dialect::Sqlite, ["a"]).is_none());
        assert!(key_locks(Dialect::Postgres, std::iter::empty()).is_none());
        let q = key_locks(Dialect::Postgres, ["b", "a", "b"]).unwrap();
        assert!(q.text.contains("pg_advisory_xact_lock"), "{}", q.text);
        let Arg::Json(serde_json::Value::Array(hashes)) = &q.args[0] else {
            panic!("{:?}", q.args)
        };
        let hashes: Vec<i64> = hashes.iter().map(|h| h.as_i64().unwrap()).collect();
        let mut expected = vec![i64::from(key_hash("a")), i64::from(key_hash("b"))];
        expected.sort_unstable();
        assert_eq!(hashes, expected);
    }
}
