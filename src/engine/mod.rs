//! The delivery engine: turns a workflow step into a job, and runs claimed jobs. Workers claim due jobs with
//! a lease; everything a job produces (message, execution details, the next step's job) is written in the
//! transaction that completes it, so a crashed worker's job is simply claimed again and never finishes twice.

mod actions;
mod deliver;
pub mod erasure;
pub mod fanout;
mod handoff;
mod leases;
mod plan;
pub mod steps;
mod trigger_writer;
pub mod webhooks;

pub use deliver::MAX_RETRIES;
pub use handoff::{HandedJob, Handoff};
pub use plan::{
    actor_variables, detail, digest_key, digest_metadata, finished, first_rows, job_for_step,
    lookup, next_timed, provider_for, run_at_for, step_provider,
};
pub use trigger_writer::TriggerWriter;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::domain::job::{ExecutionDetail, Job, JobStatus, Notification};
use crate::domain::preference::SubscriberPreference;
use crate::domain::subscriber::Subscriber;
use crate::domain::workflow::StepType;
use crate::domain::{
    new_object_id, EnvironmentId, JobId, NotificationId, SubscriberRef, Timestamp, WorkflowRef,
};
use crate::metrics::FinishedJob;
use crate::store::jobs::{Claimed, JobOutcome};
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
    /// The waits between a webhook message's attempts ([`webhooks::RETRY_SCHEDULE`]; tests shorten it).
    pub webhook_schedule: Vec<Duration>,
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
            webhook_schedule: webhooks::RETRY_SCHEDULE.to_vec(),
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
            Some(runner.clone()),
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
        // Webhook messages are sent beside the jobs.
        loops.spawn(webhooks::send(
            store.clone(),
            webhooks::WebhookOptions {
                allow_private_networks: options.allow_private_networks,
                schedule: options.webhook_schedule.clone(),
            },
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
        let Claimed {
            jobs: claimed,
            reclaimed,
        } = self
            .store
            .claim_jobs(&self.claims.worker, most, lease_ms, reclaim)
            .await?;
        crate::metrics::lease_expiries(reclaimed);
        self.claims.held.add(claimed.iter().map(|j| j.id.clone()));
        let keys: Vec<(EnvironmentId, NotificationId)> = claimed
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
    subscribers: HashMap<(EnvironmentId, String), Arc<Subscriber>>,
    /// The preferences of the subscribers of channel steps by (environment, subscriber `_id`): their global
    /// one and those for the batch's workflows.
    preferences: HashMap<(EnvironmentId, SubscriberRef), Vec<SubscriberPreference>>,
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
    let mut wanted: HashMap<&EnvironmentId, Vec<String>> = HashMap::new();
    for job in jobs {
        let ids = wanted.entry(&job.environment_id).or_default();
        if !ids.contains(&job.subscriber_id) {
            ids.push(job.subscriber_id.clone());
        }
    }
    let mut read = BatchReads {
        subscribers: HashMap::new(),
        preferences: HashMap::new(),
    };
    for (env, ids) in wanted {
        let found = match store.subscribers_by_ids(env, &ids).await {
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
            .filter(|j| j.environment_id == *env && j.step.step_type.channel().is_some())
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
            match store.preferences_for(env, &refs, &workflows).await {
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

/// A new notification's rows as a trigger records them ([`first_rows`]).
pub(crate) type FirstRows = (Notification, Vec<Job>, Vec<ExecutionDetail>);

/// What [`run_due_in_app`] ran of one batch of rows: `(i, outcome)` for the first job of its `i`-th
/// notification, in the order of `i`, and what the metrics count of each once it is recorded.
pub(crate) type Ran = (Vec<(usize, JobOutcome)>, Vec<FinishedJob>);

/// Runs the first steps of `batches` that are in-app messages due now, as a claim would hand them to
/// `worker` (their subscribers and preferences read once for all of them), and stores each job as it ended
/// (or running, when it is retried) in its row: the transaction that records the rows completes them (see
/// `TriggerRecord::ran`). Storing an in-app message needs nothing but the database, so running it before the
/// rows are written costs no claim and no completion of its own, and a transaction that fails or finds its
/// trigger recorded before leaves nothing behind. A job that could not run now (an error reading what it
/// needs) is left queued. Per batch: what ran.
pub(crate) async fn run_due_in_app(
    store: &Store,
    runner: &steps::Runner,
    worker: &str,
    batches: &mut [&mut Vec<FirstRows>],
) -> Vec<Ran> {
    let mut out: Vec<Ran> = batches.iter().map(|_| Ran::default()).collect();
    let now = Timestamp::now();
    let (at, jobs): (Vec<(usize, usize)>, Vec<Job>) = batches
        .iter()
        .enumerate()
        .flat_map(|(b, rows)| rows.iter().enumerate().map(move |(i, r)| (b, i, &r.1)))
        .filter_map(|(b, i, jobs)| {
            let job = jobs.first()?;
            let due = job.status == JobStatus::Queued && job.run_at <= now;
            (due && job.step.step_type == StepType::InApp).then(|| {
                let mut job = job.clone();
                job.status = JobStatus::Running;
                job.attempts += 1;
                ((b, i), job)
            })
        })
        .unzip();
    if jobs.is_empty() {
        return out;
    }
    let read = prefetch(store, &jobs).await;
    for ((b, i), mut job) in at.into_iter().zip(jobs) {
        let (subscriber, preferences) = BatchReads::for_job(read.as_ref(), &job);
        let prefetched = steps::Prefetched {
            notification: Some(&batches[b][i].0),
            subscriber: subscriber.as_ref().map(|s| s.as_deref()),
            preferences: preferences.as_deref(),
        };
        let Some(mut outcome) = runner.run(&job, worker, prefetched).await else {
            continue;
        };
        if let Some(recorded) = batches[b][i].1.get(1) {
            steps::adopt_recorded_next(&mut outcome, recorded);
        }
        out[b].1.push(FinishedJob::of(&job, &outcome));
        if outcome.retry.is_none() {
            // Stored as it ended: its completion needs no status update (see `Completion::held`).
            job.status = outcome.status;
            if let Some(p) = &outcome.provider_id {
                job.provider_id.clone_from(p);
            }
            job.updated_at = Timestamp::now();
        }
        batches[b][i].1[0] = job;
        out[b].0.push((i, outcome));
    }
    out
}
