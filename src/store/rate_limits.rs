//! Rate-limit buckets shared by the instances on PostgreSQL (see `api::ratelimit`), and the job figures
//! `/metrics` reads when scraped.

pub use super::page::COUNT_LIMIT;
use super::sql::Sql;
use super::{Db, Store};
use crate::domain::Timestamp;
use crate::error::{Error, Result};

/// What a take from a shared bucket got.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Take {
    /// Tokens handed to the caller: what it asked for, or what the bucket held if less.
    pub granted: f64,
    /// Tokens left in the bucket.
    pub left: f64,
}

/// The queue as `/metrics` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobFigures {
    /// Queued jobs that are due (the queue depth).
    pub due: i64,
    /// Queued jobs that run later (delays, digests, retries waiting out their backoff).
    pub scheduled: i64,
    /// Jobs a worker holds under a lease.
    pub running: i64,
    /// `run_at` of the oldest due job, epoch ms.
    pub oldest_due: Option<i64>,
}

impl Store {
    /// Takes up to `want` tokens from the bucket of (`environment`, `category`), which holds at most
    /// `burst` tokens and refills at `per_second` (a new bucket starts full). One statement on the database's
    /// clock, so instances whose clocks differ agree. PostgreSQL only: on SQLite the buckets live in process.
    pub async fn take_rate_tokens(
        &self,
        environment: &str,
        category: &str,
        want: f64,
        burst: f64,
        per_second: f64,
    ) -> Result<Take> {
        let Db::Postgres(pool) = self.w() else {
            return Err(Error::Internal(anyhow::anyhow!(
                "shared rate-limit buckets are kept on PostgreSQL only"
            )));
        };
        // `available` is the bucket refilled up to now; `granted` what this take gets of it. Every SET
        // expression reads the row as it was before the update.
        const NOW: &str = "floor(extract(epoch from clock_timestamp()) * 1000)::bigint";
        let available =
            format!("least($4, b.tokens + greatest(0, {NOW} - b.updated_at) * $5 / 1000.0)");
        let granted = format!("least($3, greatest(0, floor({available})))");
        let sql = format!(
            "insert into rate_limit_buckets as b (environment_id, category, tokens, granted, updated_at)
             values ($1, $2, $4 - least($3, $4), least($3, $4), {NOW})
             on conflict (environment_id, category) do update set
               tokens = {available} - {granted}, granted = {granted}, updated_at = {NOW}
             returning granted, tokens"
        );
        let (granted, left): (f64, f64) = sqlx::query_as(&sql)
            .bind(environment)
            .bind(category)
            .bind(want)
            .bind(burst)
            .bind(per_second)
            .fetch_one(pool)
            .await?;
        Ok(Take { granted, left })
    }

    /// The queue's figures, each count stopping at [`COUNT_LIMIT`]: four reads of the due-jobs index.
    pub async fn job_figures(&self) -> Result<JobFigures> {
        let now = Timestamp::now().0;
        let mut due = Sql::new("status = 'queued' and run_at <= ");
        due.bind(now);
        let mut scheduled = Sql::new("status = 'queued' and run_at > ");
        scheduled.bind(now);
        let running = Sql::new("status = 'running'");
        Ok(JobFigures {
            due: self.count_capped("jobs", &due).await?,
            scheduled: self.count_capped("jobs", &scheduled).await?,
            running: self.count_capped("jobs", &running).await?,
            oldest_due: self.next_job_due().await?.filter(|at| *at <= now),
        })
    }
}
