//! The delivery engine: turns a workflow step into a job, and runs claimed jobs. Workers claim due jobs with
//! a lease; everything a job produces (message, execution details, the next step's job) is written in the
//! transaction that completes it, so a crashed worker's job is simply claimed again and never finishes twice.

mod deliver;
pub mod erasure;
pub mod fanout;
mod handoff;
mod leases;
pub mod steps;
mod trigger_writer;

pub use deliver::MAX_RETRIES;
pub use handoff::{HandedJob, Handoff};
pub use trigger_writer::TriggerWriter;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::domain::job::{DetailStatus, ExecutionDetail, Job, JobStatus, Notification};
use crate::domain::preference::SubscriberPreference;
use crate::domain::subscriber::Subscriber;
use crate::domain::workflow::{duration_ms, Step, StepType};
use crate::domain::{
    new_object_id, EnvironmentId, JobId, NotificationId, SubscriberRef, Timestamp, WorkflowRef,
};
use crate::store::jobs::JobOutcome;
use crate::store::Store;

/// How long a claimed job is reserved for its worker. A process renews the leases of all the jobs it holds
/// every third of this (`leases::renew`), so only a process that stopped lets its jobs go, and they are
/// claimed again at most this long after it died.
pub const LEASE_MS: i64 = 10_000;

/// This process's link from the trigger path to its workers: wakes idle workers when new jobs are queued
/// in this process (other processes poll), and holds the [`Handoff`] through which the trigger writer gives
/// them new notifications' due first jobs already leased.
#[derive(Clone, Default)]
pub struct Wakeup {
    notify: Arc<Notify>,
    handoff: Handoff,
}

impl Wakeup {
    pub fn notify(&self) {
        self.notify.notify_waiters();
    }

    /// Where the trigger writer hands jobs to this process's workers (see [`Handoff::hand_jobs_to`]).
    pub fn handoff(&self) -> &Handoff {
        &self.handoff
    }
}

/// `actor` of the template variables for a trigger's (or a preview's) actor: a subscriber id, as text or
/// `{subscriberId}`, is looked up and gives that subscriber's fields (delivery and preview alike).
pub async fn actor_variables(
    store: &Store,
    env: &EnvironmentId,
    actor: &Value,
) -> crate::error::Result<Value> {
    let found = match crate::render::inputs::actor_reference(actor) {
        Some(id) => store.get_subscriber(env, id).await?,
        None => None,
    };
    Ok(crate::render::inputs::actor_values(actor, found.as_ref()))
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
    status: DetailStatus,
    source: &str,
    text: impl Into<String>,
    raw: Option<String>,
) -> ExecutionDetail {
    ExecutionDetail {
        raw,
        ..ExecutionDetail::for_job(job, status, source, text)
    }
}

/// The key under which events of one subscriber, workflow step and digest key collapse: the subscriber's
/// record, not its reusable subscriberId (a subscriber deleted and created again starts afresh).
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
        job.environment_id, job.subscriber_ref, job.workflow_ref, step.step_id, key_value
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
        StepType::Digest => {
            let controls = &step.control_values;
            match controls.get("type").and_then(Value::as_str) {
                Some("timed") => next_timed(controls.get("timed").unwrap_or(&Value::Null), now)
                    .unwrap_or(Timestamp(now.0 + amount_unit())),
                _ => Timestamp(now.0 + amount_unit()),
            }
        }
        _ => now,
    }
}

/// The next time a timed digest fires after `now`: `timed.atTime` (`HH:MM`, UTC; midnight when absent) on
/// one of `timed.weekDays` (`monday`…`sunday`) and `timed.monthDays` (`1`…`31`, numbers or strings), when
/// given. `None` when no day in the coming year matches.
pub fn next_timed(timed: &Value, now: Timestamp) -> Option<Timestamp> {
    use chrono::{Datelike, NaiveTime, TimeZone, Utc};
    let at = timed
        .get("atTime")
        .and_then(Value::as_str)
        .and_then(|t| NaiveTime::parse_from_str(t, "%H:%M").ok())
        .unwrap_or(NaiveTime::MIN);
    let week_days: Vec<String> = timed
        .get("weekDays")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_ascii_lowercase)
                .collect()
        })
        .unwrap_or_default();
    let month_days: Vec<u32> = timed
        .get("monthDays")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|d| {
                    d.as_u64()
                        .map(|n| n as u32)
                        .or_else(|| d.as_str()?.trim().parse().ok())
                })
                .collect()
        })
        .unwrap_or_default();
    let start = Utc.timestamp_millis_opt(now.0).single()?.date_naive();
    for offset in 0..=366 {
        let day = start + chrono::Duration::days(offset);
        let weekday = day.weekday();
        let name = match weekday {
            chrono::Weekday::Mon => "monday",
            chrono::Weekday::Tue => "tuesday",
            chrono::Weekday::Wed => "wednesday",
            chrono::Weekday::Thu => "thursday",
            chrono::Weekday::Fri => "friday",
            chrono::Weekday::Sat => "saturday",
            chrono::Weekday::Sun => "sunday",
        };
        if !week_days.is_empty() && !week_days.iter().any(|d| d == name) {
            continue;
        }
        if !month_days.is_empty() && !month_days.contains(&day.day()) {
            continue;
        }
        let at_ms = Utc.from_utc_datetime(&day.and_time(at)).timestamp_millis();
        if at_ms > now.0 {
            return Some(Timestamp(at_ms));
        }
    }
    None
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
        id: JobId::new(),
        organization_id: n.organization_id.clone(),
        environment_id: n.environment_id.clone(),
        notification_id: n.id.clone(),
        subscriber_ref: n.subscriber_ref.clone(),
        subscriber_id: n.subscriber_id.clone(),
        workflow_ref: n.workflow_ref.clone(),
        transaction_id: n.transaction_id.clone(),
        step_index: index,
        step: step.clone(),
        status: JobStatus::Queued,
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
        let event = json!({"id": n.transaction_id, "time": now.to_iso(), "payload": n.payload});
        job.digest = Some(digest_metadata(step, vec![event]));
    }
    job
}

/// The jobs of a new notification, one per step: the first queued to run when its step says, the others
/// `pending` until the chain reaches them, each with the step as it is now (a later edit of the workflow does
/// not change them). `provider` names the provider a job of a step type shows until a delivery says which one
/// handled it. A first step that is a digest opens its window or joins the open one when it is recorded
/// (`store::digests`).
fn jobs_for_trigger(
    n: &Notification,
    steps: &[Step],
    provider: impl Fn(StepType) -> String,
    now: Timestamp,
) -> Vec<Job> {
    let mut jobs = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        let mut job = job_for_step(n, step, index as i64, None, now);
        job.provider_id = provider(step.step_type);
        if index > 0 {
            job.status = JobStatus::Pending;
            // Found by digest lookups, and given a run time, only once reached.
            job.digest_key = None;
            job.run_at = now;
        }
        jobs.push(job);
    }
    jobs
}

/// The provider a job of `step` shows before its delivery: the one `providers` names for its type (see
/// `service::events::step_providers`), else the channel's default.
pub fn step_provider(providers: &[(StepType, String)], step: StepType) -> String {
    providers
        .iter()
        .find(|(s, _)| *s == step)
        .map_or_else(|| provider_for(step).to_owned(), |(_, p)| p.clone())
}

/// A new notification's rows as a trigger records them: the notification, the jobs of all the template's
/// steps (the first queued, the others pending) and the first job's "Step queued" detail.
pub fn first_rows(
    n: Notification,
    template: &crate::domain::fanout::Template,
    now: Timestamp,
) -> (Notification, Vec<Job>, Vec<ExecutionDetail>) {
    let provider = |t| step_provider(&template.providers, t);
    let jobs = jobs_for_trigger(&n, &template.steps, provider, now);
    let queued = detail(
        &jobs[0],
        DetailStatus::Pending,
        "Internal",
        "Step queued",
        None,
    );
    (n, jobs, vec![queued])
}

/// A digest job's `digest` member as Novu's DigestMetadata has it: `type` always, the window and key only
/// when the step sets them (with the types the SDKs expect), `stepId` (which step's events later steps
/// read) and the events collected so far.
pub fn digest_metadata(step: &Step, events: Vec<Value>) -> Value {
    let c = &step.control_values;
    let number = |k: &str| match c.get(k) {
        Some(Value::Number(n)) => Some(Value::Number(n.clone())),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok().map(Value::from),
        _ => None,
    };
    let unit = |k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .filter(|u| {
                matches!(
                    *u,
                    "seconds" | "minutes" | "hours" | "days" | "weeks" | "months"
                )
            })
            .map(Value::from)
    };
    let kind = c
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| matches!(*t, "regular" | "backoff" | "timed"))
        .unwrap_or("regular");
    let mut d = serde_json::Map::new();
    d.insert("type".into(), kind.into());
    let optional = [
        ("amount", number("amount")),
        ("unit", unit("unit")),
        (
            "digestKey",
            c.get("digestKey")
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty())
                .map(Value::from),
        ),
        (
            "backoff",
            c.get("backoff").filter(|b| b.is_boolean()).cloned(),
        ),
        ("backoffAmount", number("backoffAmount")),
        ("backoffUnit", unit("backoffUnit")),
        ("timed", c.get("timed").and_then(timed_metadata)),
    ];
    for (key, value) in optional {
        if let Some(v) = value {
            d.insert(key.into(), v);
        }
    }
    d.insert("stepId".into(), step.step_id.clone().into());
    d.insert("events".into(), Value::Array(events));
    Value::Object(d)
}

/// The `timed` settings of a digest as DigestTimedConfig has them: `atTime` text, `weekDays` names,
/// `monthDays` numbers; what does not fit is left out.
fn timed_metadata(timed: &Value) -> Option<Value> {
    let t = timed.as_object()?;
    let mut out = serde_json::Map::new();
    if let Some(at) = t.get("atTime").and_then(Value::as_str) {
        out.insert("atTime".into(), at.into());
    }
    if let Some(days) = t.get("weekDays").and_then(Value::as_array) {
        let names: Vec<Value> = days
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_ascii_lowercase)
            .filter(|d| {
                matches!(
                    d.as_str(),
                    "monday"
                        | "tuesday"
                        | "wednesday"
                        | "thursday"
                        | "friday"
                        | "saturday"
                        | "sunday"
                )
            })
            .map(Value::from)
            .collect();
        out.insert("weekDays".into(), Value::Array(names));
    }
    if let Some(days) = t.get("monthDays").and_then(Value::as_array) {
        let numbers: Vec<Value> = days
            .iter()
            .filter_map(|d| d.as_u64().or_else(|| d.as_str()?.trim().parse().ok()))
            .map(Value::from)
            .collect();
        out.insert("monthDays".into(), Value::Array(numbers));
    }
    Some(Value::Object(out))
}

/// How a process runs its workers.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Jobs running at once.
    pub concurrency: usize,
    pub profile: crate::config::WireProfile,
    /// First backoff of a provider retry; doubled on each further retry, ±25 % jitter.
    pub retry_base: Duration,
    /// How long a claim reserves a job. The process renews the leases of every job it holds (claimed or
    /// handed over, running or waiting) every third of this, so only a process that stopped (crashed, lost
    /// the database) lets its jobs go to another, within this long.
    pub lease: Duration,
    /// `TIDINGS_PUBLIC_URL` (checked by `config::public_url`): when set, email steps carry one-click
    /// unsubscribe links under it.
    pub public_url: Option<String>,
    /// `TIDINGS_ALLOW_PRIVATE_NETWORKS`: whether steps and providers may call private, loopback and
    /// link-local addresses (see [`crate::outbound`]).
    pub allow_private_networks: bool,
}

impl WorkerOptions {
    /// `concurrency` jobs at once, provider retries after 1 s, 2 s, 4 s, public addresses only.
    pub fn new(concurrency: usize, profile: crate::config::WireProfile) -> Self {
        Self {
            concurrency,
            profile,
            retry_base: Duration::from_secs(1),
            lease: Duration::from_millis(LEASE_MS as u64),
            public_url: None,
            allow_private_networks: false,
        }
    }

    /// The workers `tidings serve` and `tidings worker` run, as the configuration sets them.
    pub fn from_config(cfg: &crate::config::Config) -> Self {
        Self {
            public_url: cfg.public_url.clone(),
            allow_private_networks: cfg.allow_private_networks,
            ..Self::new(cfg.workers, cfg.compat)
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
    let (concurrency, lease) = (options.concurrency, options.lease);
    crate::background::spawn(async move {
        let worker = format!("w-{}", new_object_id());
        let runner = Arc::new(steps::Runner::new(store.clone(), &options));
        // A claimed batch completes in one transaction, so batches are larger than the number of jobs
        // running at once (`concurrency`). Leases are renewed while the process holds its jobs, so a batch
        // of slow steps (HTTP calls of up to 10 s, `concurrency` at a time) may outlast one.
        let batch = (concurrency * 4).clamp(8, 256) as i64;
        let running = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
        let held = leases::Held::default();
        // New notifications' first jobs come straight from the trigger writer, already leased to us.
        let handed: Handed = Arc::new(std::sync::Mutex::new(wakeup.handoff().hand_held_jobs_to(
            &worker,
            lease.as_millis() as i64,
            2 * batch as usize,
            held.clone(),
        )));
        let mut loops = tokio::task::JoinSet::new();
        for _ in 0..LOOPS_PER_PROCESS {
            loops.spawn(worker_loop(
                store.clone(),
                runner.clone(),
                running.clone(),
                Claims {
                    worker: worker.clone(),
                    batch,
                    lease,
                    held: held.clone(),
                },
                handed.clone(),
                wakeup.clone(),
                shutdown.clone(),
            ));
        }
        // Fan-outs (triggers to topics, broadcasts) are expanded beside the jobs, with the same runner: a
        // batch's due in-app first steps run with it; its other first jobs are recorded as triggers' are
        // (handed to these workers only when they have room for a whole batch; claimed otherwise).
        loops.spawn(fanout::expand(
            store.clone(),
            runner.clone(),
            TriggerWriter::new(store.clone(), wakeup.handoff().clone()),
            worker.clone(),
            lease,
            wakeup.clone(),
            shutdown.clone(),
        ));
        // Deleted subscribers are erased beside the jobs, in bounded batches.
        loops.spawn(erasure::sweep(
            store.clone(),
            worker.clone(),
            lease,
            wakeup.clone(),
            shutdown.clone(),
        ));
        // The leases of everything the loops hold are renewed until the last loop has stopped.
        let renewing = leases::renew(store.clone(), worker.clone(), held, lease);
        tokio::select! {
            _ = async { while loops.join_next().await.is_some() {} } => {}
            _ = renewing => {}
        }
        // Jobs handed over but not started go back to the queue for another process (or the next start).
        wakeup.handoff().stop_handing_jobs(&worker);
        let left: Vec<JobId> = take_handed(&handed, usize::MAX)
            .into_iter()
            .map(|(job, _)| job.id)
            .collect();
        if let Err(e) = store.release_jobs(&worker, &left).await {
            tracing::warn!(error = ?e, "releasing handed jobs failed; their leases will expire");
        }
        tracing::debug!("worker stopped");
    })
}

/// How often an idle loop of leased work beside the jobs (fan-outs, erasures) looks for some; a wakeup
/// (work recorded by this process) comes sooner.
const IDLE_POLL: Duration = Duration::from_secs(1);

/// Runs `once` — claims one piece of leased work and does it, `true` when there was one — again at once while
/// it finds work, else after a wakeup or [`IDLE_POLL`], until `shutdown`. A failure is logged (`failed`) and
/// the work is claimed again once its lease runs out.
async fn leased_work_loop<F, Fut>(
    wakeup: &Wakeup,
    shutdown: &CancellationToken,
    failed: &str,
    mut once: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crate::error::Result<bool>>,
{
    while !shutdown.is_cancelled() {
        // Registered before the claim, so work recorded while it runs still wakes the loop.
        let woken = wakeup.notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        match once().await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = ?e, "{failed}; it is retried when its lease expires"),
        }
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep(IDLE_POLL) => {}
            _ = shutdown.cancelled() => {}
        }
    }
}

/// Claim loops per process: while one loop waits on the database (claiming, completing), another runs its
/// batch. They share the process's concurrency limit and worker id.
const LOOPS_PER_PROCESS: usize = 2;

/// How a claim loop claims: as whom, how many jobs at a time, for how long, and where it notes the jobs
/// it holds (for the lease renewer).
struct Claims {
    worker: String,
    batch: i64,
    lease: Duration,
    held: leases::Held,
}

/// The jobs the trigger writer hands to this process's claim loops (see [`Handoff::hand_jobs_to`]).
type Handed = Arc<std::sync::Mutex<tokio::sync::mpsc::Receiver<HandedJob>>>;

/// Up to `most` handed jobs that are waiting, without waiting.
fn take_handed(handed: &Handed, most: usize) -> Vec<HandedJob> {
    let mut rx = handed.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::new();
    while out.len() < most {
        match rx.try_recv() {
            Ok(job) => out.push(job),
            Err(_) => break,
        }
    }
    out
}

fn has_handed(handed: &Handed) -> bool {
    !handed.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
}

/// While handed jobs keep a claim loop busy, it still claims from the database at least this often.
const CLAIM_EVERY: Duration = Duration::from_millis(20);

/// How often a claim loop looks for jobs whose lease expired (their worker stopped). Such a job waits its
/// lease (`LEASE_MS`) anyway; looking on every claim cost each claim a second statement.
const RECLAIM_EVERY: Duration = Duration::from_secs(1);

/// Claims a batch of due jobs, runs it, completes it in one transaction; sleeps when there is nothing due.
async fn worker_loop(
    store: Store,
    runner: Arc<steps::Runner>,
    running: Arc<tokio::sync::Semaphore>,
    claims: Claims,
    handed: Handed,
    wakeup: Wakeup,
    shutdown: CancellationToken,
) {
    let mut claimer = Claimer {
        store: store.clone(),
        claims,
        handed,
        reclaimed_at: None,
        claimed_at: None,
    };
    while !shutdown.is_cancelled() {
        match claimer.next_batch().await {
            Next::Batch(batch) => batch.run(&store, &runner, &running, &claimer.claims).await,
            Next::ClaimFailed => {
                let pause = tokio::time::sleep(Duration::from_secs(1));
                if shutdown.run_until_cancelled(pause).await.is_none() {
                    break;
                }
            }
            Next::Nothing => {
                if !claimer.wait_for_work(&wakeup, &shutdown).await {
                    break;
                }
            }
        }
    }
}

/// What a claim loop found to do.
enum Next {
    Batch(Batch),
    /// Claiming failed and no handed job waits: try again shortly.
    ClaimFailed,
    Nothing,
}

/// Jobs to run together, with the notifications already read for them.
struct Batch {
    jobs: Vec<Job>,
    notifications: HashMap<NotificationId, Notification>,
}

/// Where a claim loop takes its jobs from: handed over by the trigger writer, or claimed from the database.
struct Claimer {
    store: Store,
    claims: Claims,
    handed: Handed,
    reclaimed_at: Option<std::time::Instant>,
    claimed_at: Option<std::time::Instant>,
}

impl Claimer {
    /// Jobs the trigger writer handed over come first; while they keep coming, the database is still asked
    /// at least every CLAIM_EVERY, with room for a quarter of a batch (delays, next steps).
    async fn next_batch(&mut self) -> Next {
        let batch = self.claims.batch;
        let claim_due = self.claimed_at.is_none_or(|at| at.elapsed() >= CLAIM_EVERY);
        let room = if claim_due { batch - batch / 4 } else { batch };
        let mut found = Batch {
            jobs: Vec::new(),
            notifications: HashMap::new(),
        };
        for (job, notification) in take_handed(&self.handed, room as usize) {
            found
                .notifications
                .insert(notification.id.clone(), notification);
            found.jobs.push(job);
        }
        if found.jobs.is_empty() || claim_due {
            let left = batch - found.jobs.len() as i64;
            match self.claim(left).await {
                Ok((claimed, notifications)) => {
                    found.notifications.extend(notifications);
                    found.jobs.extend(claimed);
                }
                Err(e) => {
                    tracing::warn!(error = ?e, "claiming jobs failed");
                    if found.jobs.is_empty() {
                        return Next::ClaimFailed;
                    }
                }
            }
        }
        if found.jobs.is_empty() {
            Next::Nothing
        } else {
            Next::Batch(found)
        }
    }

    /// Up to `most` due jobs from the database, with their notifications read in one query (a job whose
    /// notification is missing reads it itself).
    async fn claim(
        &mut self,
        most: i64,
    ) -> crate::error::Result<(Vec<Job>, Vec<(NotificationId, Notification)>)> {
        self.claimed_at = Some(std::time::Instant::now());
        // Expired leases are looked for at most every RECLAIM_EVERY: a claim is then one statement.
        let reclaim = self
            .reclaimed_at
            .is_none_or(|at| at.elapsed() >= RECLAIM_EVERY);
        if reclaim {
            self.reclaimed_at = Some(std::time::Instant::now());
        }
        let lease_ms = self.claims.lease.as_millis() as i64;
        let claimed = self
            .store
            .claim_jobs(&self.claims.worker, most, lease_ms, reclaim)
            .await?;
        self.claims.held.add(claimed.iter().map(|j| j.id.clone()));
        let keys: Vec<(String, NotificationId)> = claimed
            .iter()
            .map(|j| (j.environment_id.clone(), j.notification_id.clone()))
            .collect();
        let notifications = match self.store.get_notifications(&keys).await {
            Ok(list) => list.into_iter().map(|n| (n.id.clone(), n)).collect(),
            Err(e) => {
                tracing::warn!(error = ?e, "prefetching notifications failed");
                Vec::new()
            }
        };
        Ok((claimed, notifications))
    }

    /// Sleeps until a job is due, a trigger hands one over, or at most a second; false when shut down.
    async fn wait_for_work(&self, wakeup: &Wakeup, shutdown: &CancellationToken) -> bool {
        let wait = match self.store.next_job_due().await {
            Ok(Some(due)) => (due - Timestamp::now().0).clamp(5, 1000) as u64,
            _ => 1000,
        };
        // Listen before looking at the hand-over once more: a trigger hands its jobs over, then wakes us.
        let notified = wakeup.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if has_handed(&self.handed) {
            return true;
        }
        tokio::select! {
            _ = shutdown.cancelled() => false,
            _ = notified => true,
            _ = tokio::time::sleep(Duration::from_millis(wait)) => true,
        }
    }
}

impl Batch {
    /// Runs the batch's jobs concurrently (at most `running` at a time in the process), then completes
    /// them in one transaction (their leases are renewed meanwhile by the process's renewer).
    async fn run(
        self,
        store: &Store,
        runner: &Arc<steps::Runner>,
        running: &Arc<tokio::sync::Semaphore>,
        claims: &Claims,
    ) {
        let Batch {
            jobs,
            mut notifications,
        } = self;
        // And its subscribers and their preferences, a query each per environment (`None`: each job reads
        // its own).
        let read = prefetch(store, &jobs).await;
        let ids: Vec<JobId> = jobs.iter().map(|j| j.id.clone()).collect();
        let mut set = tokio::task::JoinSet::new();
        for job in jobs {
            let (runner, worker, running) =
                (runner.clone(), claims.worker.clone(), running.clone());
            let notification = notifications
                .remove(&job.notification_id)
                .filter(|n| n.environment_id == job.environment_id);
            let (subscriber, preferences) = BatchReads::for_job(read.as_ref(), &job);
            set.spawn(async move {
                let _permit = running.acquire_owned().await;
                let prefetched = steps::Prefetched {
                    notification: notification.as_ref(),
                    subscriber: subscriber.as_ref().map(|s| s.as_deref()),
                    preferences: preferences.as_deref(),
                };
                let outcome = runner.run(&job, &worker, prefetched).await;
                (job, outcome)
            });
        }
        let mut finished = Vec::new();
        while let Some(result) = set.join_next().await {
            match result {
                Ok((job, Some(outcome))) => finished.push((job, outcome)),
                Ok((_, None)) => {}
                Err(e) => tracing::error!(error = ?e, "a job task panicked; its lease will expire"),
            }
        }
        let items: Vec<(&Job, &JobOutcome)> = finished.iter().map(|(j, o)| (j, o)).collect();
        let completed = store.complete_jobs(&claims.worker, &items).await;
        // Done, or given up: a job whose completion failed is no longer renewed, so it is claimed again.
        claims.held.remove(&ids);
        match completed {
            Ok(owned) => {
                for ((job, outcome), ok) in finished.iter().zip(owned) {
                    if ok {
                        crate::metrics::job_finished(job, outcome);
                    } else {
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

/// What a batch reads for all its jobs.
pub(crate) struct BatchReads {
    /// The current subscribers by (environment, subscriberId).
    subscribers: HashMap<(String, String), Arc<Subscriber>>,
    /// The preferences of the subscribers of channel steps by (environment, subscriber `_id`): their global
    /// one and those for the batch's workflows.
    preferences: HashMap<(String, SubscriberRef), Vec<SubscriberPreference>>,
}

impl BatchReads {
    /// What `read` (`None`: nothing was read) holds for `job`, as [`steps::Prefetched`] wants it: its
    /// subscriber (`Some(None)`: none was found) and that subscriber's preferences.
    fn for_job(
        read: Option<&BatchReads>,
        job: &Job,
    ) -> (
        Option<Option<Arc<Subscriber>>>,
        Option<Vec<SubscriberPreference>>,
    ) {
        let subscriber: Option<Option<Arc<Subscriber>>> = read.map(|r| {
            r.subscribers
                .get(&(job.environment_id.clone(), job.subscriber_id.clone()))
                .cloned()
        });
        let preferences = read.map(|r| {
            subscriber
                .iter()
                .flatten()
                .find_map(|s| r.preferences.get(&(s.environment_id.clone(), s.id.clone())))
                .cloned()
                .unwrap_or_default()
        });
        (subscriber, preferences)
    }
}

/// The batch's subscribers, one query per environment, and the preferences of those its channel steps
/// reach, one more query per environment that has any; `None` when a read failed (each job then reads
/// its own).
pub(crate) async fn prefetch(store: &Store, jobs: &[Job]) -> Option<BatchReads> {
    let mut wanted: HashMap<&str, Vec<String>> = HashMap::new();
    for job in jobs {
        let ids = wanted.entry(job.environment_id.as_str()).or_default();
        if !ids.contains(&job.subscriber_id) {
            ids.push(job.subscriber_id.clone());
        }
    }
    let mut read = BatchReads {
        subscribers: HashMap::new(),
        preferences: HashMap::new(),
    };
    for (env, ids) in wanted {
        let env = EnvironmentId(env.to_owned());
        let found = match store.subscribers_by_ids(&env, &ids).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = ?e, "prefetching subscribers failed");
                return None;
            }
        };
        // The subscribers and workflows of this environment's channel steps, once each.
        let by_id: HashMap<&str, &SubscriberRef> = found
            .iter()
            .map(|s| (s.subscriber_id.as_str(), &s.id))
            .collect();
        let mut refs: Vec<SubscriberRef> = Vec::new();
        let mut workflows: Vec<WorkflowRef> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for job in jobs
            .iter()
            .filter(|j| j.environment_id == env.0 && j.step.step_type.channel().is_some())
        {
            let Some(s) = by_id.get(job.subscriber_id.as_str()) else {
                continue;
            };
            if seen.insert(s.as_str()) {
                refs.push((*s).clone());
            }
            if !workflows.contains(&job.workflow_ref) {
                workflows.push(job.workflow_ref.clone());
            }
        }
        if !refs.is_empty() {
            match store.preferences_for(&env, &refs, &workflows).await {
                Ok(rows) => {
                    for p in rows {
                        read.preferences
                            .entry((p.environment_id.clone(), p.subscriber_ref.clone()))
                            .or_default()
                            .push(p);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = ?e, "prefetching preferences failed");
                    return None;
                }
            }
        }
        read.subscribers.extend(found.into_iter().map(|s| {
            (
                (s.environment_id.clone(), s.subscriber_id.clone()),
                Arc::new(s),
            )
        }));
    }
    Some(read)
}

/// The outcome of a step that finished without producing anything else.
pub fn finished(status: JobStatus, details: Vec<ExecutionDetail>) -> JobOutcome {
    JobOutcome {
        status,
        details,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(iso: &str) -> Timestamp {
        Timestamp::parse(iso).unwrap()
    }

    #[test]
    fn timed_digests_fire_at_the_next_matching_time() {
        // 2026-11-22 is a Sunday.
        let now = at("2026-11-22T10:00:00.000Z");
        let next = |t: Value| next_timed(&t, now).map(|t| t.to_iso());
        assert_eq!(
            next(json!({"atTime": "11:15"})).as_deref(),
            Some("2026-11-22T11:15:00.000Z")
        );
        assert_eq!(
            next(json!({"atTime": "09:00"})).as_deref(),
            Some("2026-11-23T09:00:00.000Z")
        );
        assert_eq!(
            next(json!({"atTime": "09:00", "weekDays": ["friday", "Wednesday"]})).as_deref(),
            Some("2026-11-25T09:00:00.000Z")
        );
        assert_eq!(
            next(json!({"monthDays": ["1"]})).as_deref(),
            Some("2026-12-01T00:00:00.000Z")
        );
        assert_eq!(
            next(json!({"monthDays": [31], "weekDays": ["monday"]})).as_deref(),
            Some("2027-05-31T00:00:00.000Z")
        );
        assert_eq!(next(json!({"monthDays": [32]})), None);
    }

    /// A digest step with these controls.
    fn step(controls: Value) -> Step {
        Step {
            control_values: controls.as_object().unwrap().clone(),
            ..serde_json::from_value(
                json!({"_id": "s1", "stepId": "d", "name": "d", "type": "digest"}),
            )
            .unwrap()
        }
    }

    #[test]
    fn digest_metadata_has_a_type_and_no_nulls() {
        assert_eq!(
            digest_metadata(&step(json!({})), vec![]),
            json!({"type": "regular", "stepId": "d", "events": []})
        );
        assert_eq!(
            digest_metadata(
                &step(
                    json!({"type": "timed", "amount": "5", "unit": "fortnights", "digestKey": "",
                    "timed": {"atTime": "06:30", "weekDays": ["Monday", "funday"], "monthDays": [1, "15"]}})
                ),
                vec![json!({"id": "t1"})]
            ),
            json!({"type": "timed", "amount": 5.0, "stepId": "d", "events": [{"id": "t1"}],
                "timed": {"atTime": "06:30", "weekDays": ["monday"], "monthDays": [1, 15]}})
        );
        assert_eq!(
            digest_metadata(
                &step(
                    json!({"amount": 2, "unit": "minutes", "digestKey": "payload.thread",
                    "backoff": true, "backoffAmount": 30, "backoffUnit": "seconds"})
                ),
                vec![]
            ),
            json!({"type": "regular", "amount": 2, "unit": "minutes", "digestKey": "payload.thread",
                "backoff": true, "backoffAmount": 30, "backoffUnit": "seconds", "stepId": "d", "events": []})
        );
    }

    #[test]
    fn backoff_windows_come_from_the_controls() {
        assert_eq!(
            step(json!({"amount": 5, "unit": "minutes"})).digest_look_back(),
            None
        );
        assert_eq!(
            step(json!({"type": "backoff", "amount": 5, "unit": "minutes"})).digest_look_back(),
            Some(300_000)
        );
        assert_eq!(
            step(json!({"backoff": true, "amount": 5, "unit": "minutes",
                "backoffAmount": 30, "backoffUnit": "seconds"}))
            .digest_look_back(),
            Some(30_000)
        );
        assert_eq!(
            step(json!({"amount": 5, "unit": "minutes",
                "lookBackWindow": {"amount": 2, "unit": "hours"}}))
            .digest_look_back(),
            Some(7_200_000)
        );
    }
}
