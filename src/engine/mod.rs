//! The delivery engine: turns a workflow step into a job, and runs claimed jobs. Workers claim due jobs with
//! a lease; everything a job produces (message, execution details, the next step's job) is written in the
//! transaction that completes it, so a crashed worker's job is simply claimed again and never finishes twice.

mod deliver;
pub mod steps;

pub use deliver::MAX_RETRIES;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::domain::job::{status, ExecutionDetail, Job, Notification};
use crate::domain::workflow::{duration_ms, Step, StepType};
use crate::domain::{new_object_id, Timestamp};
use crate::store::engine::JobOutcome;
use crate::store::Store;

/// How long a claimed job is reserved for its worker.
pub const LEASE_MS: i64 = 60_000;

/// Wakes idle workers when new jobs are queued in this process (other processes poll).
#[derive(Clone, Default)]
pub struct Wakeup(Arc<Notify>);

impl Wakeup {
    pub fn notify(&self) {
        self.0.notify_waiters();
    }
}

/// The provider id recorded on a job of this step type (never missing; in-app uses `svc`).
pub fn provider_for(step: StepType) -> &'static str {
    match step {
        StepType::InApp
        | StepType::Delay
        | StepType::Digest
        | StepType::Throttle
        | StepType::Custom
        | StepType::HttpRequest => "svc",
        StepType::Email => "svc-email",
        StepType::Sms => "svc-sms",
        StepType::Chat | StepType::Push => "svc",
    }
}

/// A detail row for `job`.
pub fn detail(
    job: &Job,
    status: &str,
    source: &str,
    text: impl Into<String>,
    raw: Option<String>,
) -> ExecutionDetail {
    ExecutionDetail {
        id: new_object_id(),
        environment_id: job.environment_id.clone(),
        job_id: job.id.clone(),
        notification_id: job.notification_id.clone(),
        status: status.to_owned(),
        detail: text.into(),
        source: source.to_owned(),
        is_retry: job.attempts > 1,
        is_test: false,
        provider_id: Some(job.provider_id.clone()),
        raw,
        created_at: Timestamp::now(),
    }
}

/// The key under which events of one subscriber, workflow step and digest key collapse.
pub fn digest_key(job: &Job, step: &Step, payload: &Value) -> String {
    let key_path = step
        .control_values
        .get("digestKey")
        .and_then(Value::as_str)
        .unwrap_or("");
    let key_value = if key_path.is_empty() {
        String::new()
    } else {
        lookup(payload, key_path.trim_start_matches("payload."))
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    format!(
        "{}|{}|{}|{}|{}",
        job.environment_id, job.subscriber_id, job.workflow_ref, step.step_id, key_value
    )
}

/// A dotted path into a JSON value.
pub fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|p| !p.is_empty())
        .try_fold(v, |cur, part| match cur {
            Value::Object(m) => m.get(part),
            Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        })
}

/// When a job for `step` created now should run: delays and digest windows push it into the future.
pub fn run_at_for(step: &Step, payload: &Value, now: Timestamp) -> Timestamp {
    let amount_unit = || {
        let amount = step
            .control_values
            .get("amount")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let unit = step
            .control_values
            .get("unit")
            .and_then(Value::as_str)
            .unwrap_or("seconds");
        duration_ms(amount, unit).unwrap_or(0)
    };
    match step.step_type {
        StepType::Delay => match step.control_values.get("type").and_then(Value::as_str) {
            Some("scheduled") => {
                let path = step
                    .control_values
                    .get("delayPath")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                lookup(payload, path.trim_start_matches("payload."))
                    .and_then(Value::as_str)
                    .and_then(Timestamp::parse)
                    .map(|t| t.max(now))
                    .unwrap_or(now)
            }
            _ => Timestamp(now.0 + amount_unit()),
        },
        StepType::Digest => Timestamp(now.0 + amount_unit()),
        _ => now,
    }
}

/// The job for step `index` of a notification, queued to run when its step says.
pub fn job_for_step(
    n: &Notification,
    step: &Step,
    index: i64,
    digest: Option<Value>,
    now: Timestamp,
) -> Job {
    let mut job = Job {
        id: new_object_id(),
        organization_id: n.organization_id.clone(),
        environment_id: n.environment_id.clone(),
        notification_id: n.id.clone(),
        subscriber_ref: n.subscriber_ref.clone(),
        subscriber_id: n.subscriber_id.clone(),
        workflow_ref: n.workflow_ref.clone(),
        transaction_id: n.transaction_id.clone(),
        step_index: index,
        step: step.clone(),
        status: status::QUEUED.to_owned(),
        provider_id: provider_for(step.step_type).to_owned(),
        payload: n.payload.clone(),
        overrides: n.overrides.clone(),
        digest,
        digest_key: None,
        run_at: run_at_for(step, &n.payload, now),
        attempts: 0,
        dedupe_key: Job::dedupe(&n.id, index),
        schedule_extensions_count: 0,
        delivery: None,
        created_at: now,
        updated_at: now,
    };
    if step.step_type == StepType::Digest {
        job.digest_key = Some(digest_key(&job, step, &n.payload));
        let kind = step
            .control_values
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("regular");
        job.digest = Some(json!({
            "type": kind,
            "amount": step.control_values.get("amount"),
            "unit": step.control_values.get("unit"),
            "digestKey": step.control_values.get("digestKey"),
            "stepId": step.step_id,
            "events": [{"id": n.transaction_id, "time": now.to_iso(), "payload": n.payload}],
        }));
    }
    job
}

/// How a process runs its workers.
#[derive(Debug, Clone, Copy)]
pub struct WorkerOptions {
    /// Jobs running at once.
    pub concurrency: usize,
    pub profile: crate::config::WireProfile,
    /// First backoff of a provider retry; doubled on each further retry, ±25 % jitter.
    pub retry_base: Duration,
}

impl WorkerOptions {
    /// `concurrency` jobs at once, provider retries after 1 s, 2 s, 4 s.
    pub fn new(concurrency: usize, profile: crate::config::WireProfile) -> Self {
        Self {
            concurrency,
            profile,
            retry_base: Duration::from_secs(1),
        }
    }
}

/// Runs workers until `shutdown`: each claims a batch of due jobs, runs them, sleeps when idle.
pub fn spawn_workers(
    store: Store,
    options: WorkerOptions,
    wakeup: Wakeup,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let WorkerOptions {
        concurrency,
        profile,
        retry_base,
    } = options;
    tokio::spawn(async move {
        let worker = format!("w-{}", new_object_id());
        let runner = Arc::new(steps::Runner::new(store.clone(), profile, retry_base));
        // A claimed batch completes in one transaction, so batches are larger than the number of jobs
        // running at once (`concurrency`) — but small enough that a batch of slow steps (HTTP calls of up to
        // 10 s, `concurrency` at a time) finishes well inside the lease.
        let batch = (concurrency * 4).clamp(8, 256) as i64;
        let running = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
        let mut loops = tokio::task::JoinSet::new();
        for _ in 0..LOOPS_PER_PROCESS {
            loops.spawn(worker_loop(
                store.clone(),
                runner.clone(),
                running.clone(),
                batch,
                worker.clone(),
                wakeup.clone(),
                shutdown.clone(),
            ));
        }
        while loops.join_next().await.is_some() {}
        tracing::debug!("worker stopped");
    })
}

/// Claim loops per process: while one loop waits on the database (claiming, completing), another runs its
/// batch. They share the process's concurrency limit and worker id.
const LOOPS_PER_PROCESS: usize = 2;

/// Claims a batch of due jobs, runs it, completes it in one transaction; sleeps when there is nothing due.
async fn worker_loop(
    store: Store,
    runner: Arc<steps::Runner>,
    running: Arc<tokio::sync::Semaphore>,
    batch: i64,
    worker: String,
    wakeup: Wakeup,
    shutdown: CancellationToken,
) {
    while !shutdown.is_cancelled() {
        let jobs = match store.claim_jobs(&worker, batch, LEASE_MS).await {
            Ok(jobs) => jobs,
            Err(e) => {
                tracing::warn!(error = ?e, "claiming jobs failed");
                if shutdown
                    .run_until_cancelled(tokio::time::sleep(Duration::from_secs(1)))
                    .await
                    .is_none()
                {
                    break;
                }
                continue;
            }
        };
        if jobs.is_empty() {
            let wait = match store.next_job_due().await {
                Ok(Some(due)) => (due - Timestamp::now().0).clamp(5, 1000) as u64,
                _ => 1000,
            };
            let notified = wakeup.0.notified();
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = notified => {},
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {},
            }
            continue;
        }
        // The batch's notifications in one query (a job whose notification is missing reads it itself).
        let keys: Vec<(String, String)> = jobs
            .iter()
            .map(|j| (j.environment_id.clone(), j.notification_id.clone()))
            .collect();
        let mut notifications: HashMap<String, Notification> =
            match store.get_notifications(&keys).await {
                Ok(list) => list.into_iter().map(|n| (n.id.clone(), n)).collect(),
                Err(e) => {
                    tracing::warn!(error = ?e, "prefetching notifications failed");
                    HashMap::new()
                }
            };
        // Run the batch concurrently, then complete it in one transaction.
        let mut set = tokio::task::JoinSet::new();
        for job in jobs {
            let runner = runner.clone();
            let worker = worker.clone();
            let running = running.clone();
            let notification = notifications
                .remove(&job.notification_id)
                .filter(|n| n.environment_id == job.environment_id);
            set.spawn(async move {
                let _permit = running.acquire_owned().await;
                let outcome = runner.run(&job, &worker, notification.as_ref()).await;
                (job, outcome)
            });
        }
        let mut finished = Vec::new();
        while let Some(result) = set.join_next().await {
            match result {
                Ok((job, Some(outcome))) => finished.push((job, outcome)),
                Ok((_, None)) => {}
                Err(e) => {
                    tracing::error!(error = ?e, "a job task panicked; its lease will expire")
                }
            }
        }
        let items: Vec<(&Job, &JobOutcome)> = finished.iter().map(|(j, o)| (j, o)).collect();
        match store.complete_jobs(&worker, &items).await {
            Ok(owned) => {
                for ((job, _), ok) in finished.iter().zip(owned) {
                    if !ok {
                        tracing::info!(job = %job.id, "lease lost; another worker owns the job");
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = ?e, "completing jobs failed; they will be claimed again")
            }
        }
    }
}

/// The outcome of a step that finished without producing anything else.
pub fn finished(status: &str, details: Vec<ExecutionDetail>) -> JobOutcome {
    JobOutcome {
        status: status.to_owned(),
        details,
        ..Default::default()
    }
}
