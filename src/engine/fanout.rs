//! The expansion of fan-outs (triggers to topics, broadcasts): one loop per process claims the fan-out that
//! waited longest, reads its next batch of recipients from the cursor, and records their notifications and
//! first jobs through the trigger writer in the transaction that advances the cursor. A batch is recorded
//! exactly once — its advance is guarded by the lease and the position it was read from — so a process that
//! dies mid-batch loses nothing and sends nothing twice: the lease expires and any process reads the same
//! batch again. A claim covers at most [`BATCHES_PER_CLAIM`] batches, so fan-outs (of all environments) take
//! turns, and memory holds two batches, not a topic.
//!
//! Within a claim the next batch is read and run while the one before is being recorded (the worker keeps
//! the lease from one to the next): the database writer and the rest of the work overlap instead of taking
//! turns. The batch being recorded is not visible yet to the next one's "reached already?" probe, so its
//! recipients are passed over explicitly; when it is not recorded after all (canceled, the lease lost), the
//! next one is dropped unrecorded.
//!
//! A first step that is an in-app message due at once is run here, by the workers' own runner, and
//! completed in the batch's transaction: storing it needs nothing but the database, and a claim and a
//! completion per job would cost two more write transactions per recipient. Other first steps (deliveries
//! that call providers, delays, digests) are queued for the workers.

use std::collections::HashSet;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::steps::{Prefetched, Runner};
use super::{first_rows, prefetch, BatchReads, TriggerWriter, Wakeup};
use crate::domain::fanout::{Fanout, Position};
use crate::domain::job::{ExecutionDetail, Job, JobStatus, Notification};
use crate::domain::workflow::StepType;
use crate::domain::{EnvironmentId, Timestamp};
use crate::metrics::FinishedJob;
use crate::store::fanouts::Advance;
use crate::store::jobs::JobOutcome;
use crate::store::triggers::TriggerRecord;
use crate::store::Store;

/// Recipients per batch: a batch of a one-step in-app workflow writes five rows per recipient (notification,
/// job, two details, message) in one transaction, which other environments' triggers wait for (tens of ms
/// on SQLite).
pub const BATCH: usize = 500;

/// Most batches one claim expands before the fan-out goes back in line (4,000 recipients): another
/// environment's fan-out waits at most this long for its turn.
pub const BATCHES_PER_CLAIM: usize = 8;

/// How often an idle expansion loop looks for fan-outs other processes recorded (or left behind when they
/// stopped); fan-outs recorded by this process wake it at once.
const POLL: Duration = Duration::from_secs(1);

/// Expands fan-outs until `shutdown`, as `worker`, each claim leased for `lease`.
pub async fn expand(
    store: Store,
    runner: std::sync::Arc<Runner>,
    triggers: TriggerWriter,
    worker: String,
    lease: Duration,
    wakeup: Wakeup,
    shutdown: CancellationToken,
) {
    let lease_ms = lease.as_millis() as i64;
    while !shutdown.is_cancelled() {
        // Registered before the claim, so a fan-out recorded while it runs still wakes the loop.
        let woken = wakeup.notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let pause = match expand_once(&store, &runner, &triggers, &worker, lease_ms).await {
            Ok(true) => {
                // Jobs queued beyond what the workers were handed.
                wakeup.notify();
                continue;
            }
            Ok(false) => POLL,
            Err(e) => {
                tracing::warn!(error = ?e, "expanding a fan-out failed; it is retried when its lease expires");
                POLL
            }
        };
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.cancelled() => {}
        }
    }
}

/// Claims the fan-out whose turn it is, as `worker` for `lease_ms`, and expands up to
/// [`BATCHES_PER_CLAIM`] of its batches (see the module's notes). False when no fan-out was waiting.
pub async fn expand_once(
    store: &Store,
    runner: &Runner,
    triggers: &TriggerWriter,
    worker: &str,
    lease_ms: i64,
) -> crate::error::Result<bool> {
    if !store.fanouts_running().await? {
        return Ok(false);
    }
    let Some(mut fanout) = store.claim_fanout(worker, lease_ms).await? else {
        return Ok(false);
    };
    let mut batch = prepare(store, runner, worker, &fanout, HashSet::new()).await?;
    for n in 1..=BATCHES_PER_CLAIM {
        if n == BATCHES_PER_CLAIM || batch.done {
            record(triggers, worker, &fanout, batch, None).await?;
            break;
        }
        let keep_until = Timestamp::now().0 + lease_ms;
        let in_flight = batch
            .rows
            .iter()
            .map(|(n, _, _)| n.subscriber_id.clone())
            .collect();
        let mut next_fanout = fanout.clone();
        next_fanout.position = batch.to.clone();
        let (recorded, next) = tokio::join!(
            record(triggers, worker, &fanout, batch, Some(keep_until)),
            prepare(store, runner, worker, &next_fanout, in_flight),
        );
        if !recorded? {
            break;
        }
        (fanout, batch) = (next_fanout, next?);
    }
    Ok(true)
}

/// Reads the next batch of a claimed `fanout`, runs its due in-app first steps, and records it, releasing
/// the lease (see the module's notes).
pub async fn expand_batch(
    store: &Store,
    runner: &Runner,
    triggers: &TriggerWriter,
    worker: &str,
    fanout: Fanout,
) -> crate::error::Result<()> {
    let batch = prepare(store, runner, worker, &fanout, HashSet::new()).await?;
    record(triggers, worker, &fanout, batch, None).await?;
    Ok(())
}

/// A batch read and run, ready to be recorded.
struct Prepared {
    /// Per recipient: the notification, its jobs and their first details.
    rows: Vec<(Notification, Vec<Job>, Vec<ExecutionDetail>)>,
    /// The first jobs that ran (`rows[i]`'s, marked running), with their outcomes.
    ran: Vec<(usize, JobOutcome)>,
    finished: Vec<FinishedJob>,
    to: Position,
    done: bool,
}

/// Reads the batch of `fanout` at its position (`in_flight`: the recipients of a batch being recorded) and
/// runs its in-app first steps that are due now, as a claim would hand them to a worker.
async fn prepare(
    store: &Store,
    runner: &Runner,
    worker: &str,
    fanout: &Fanout,
    in_flight: HashSet<String>,
) -> crate::error::Result<Prepared> {
    let batch = store.fanout_batch(fanout, BATCH, in_flight).await?;
    let now = Timestamp::now();
    let mut rows = Vec::with_capacity(batch.reached.len());
    for to in &batch.reached {
        let n = fanout.template.notification(
            &fanout.organization_id,
            &fanout.environment_id,
            &fanout.transaction_id,
            to,
            now,
        );
        rows.push(first_rows(store, n, &fanout.template, now).await?);
    }
    let (at, running): (Vec<usize>, Vec<Job>) = rows
        .iter()
        .enumerate()
        .filter_map(|(i, (_, jobs, _))| {
            let job = jobs.first()?;
            let due = job.status == JobStatus::Queued && job.run_at <= now;
            (due && job.step.step_type == StepType::InApp).then(|| {
                let mut job = job.clone();
                job.status = JobStatus::Running;
                job.attempts += 1;
                (i, job)
            })
        })
        .unzip();
    let mut ran = Vec::with_capacity(running.len());
    let mut finished = Vec::with_capacity(running.len());
    if !running.is_empty() {
        let read = prefetch(store, &running).await;
        for (i, job) in at.into_iter().zip(running) {
            let (subscriber, preferences) = BatchReads::for_job(read.as_ref(), &job);
            let prefetched = Prefetched {
                notification: Some(&rows[i].0),
                subscriber: subscriber.as_ref().map(|s| s.as_deref()),
                preferences: preferences.as_deref(),
            };
            // `None`: it could not run now (an error reading what it needs); it is queued as usual.
            if let Some(outcome) = runner.run(&job, worker, prefetched).await {
                finished.push(FinishedJob::of(&job, &outcome));
                rows[i].1[0] = job;
                ran.push((i, outcome));
            }
        }
    }
    Ok(Prepared {
        rows,
        ran,
        finished,
        to: batch.to,
        done: batch.done,
    })
}

/// Records a prepared batch of `fanout` (read from its position) with the advance of its cursor; the lease
/// is released, or kept until `keep_until`. False when it was not recorded: canceled meanwhile, or the lease
/// went to another process that recorded it.
async fn record(
    triggers: &TriggerWriter,
    worker: &str,
    fanout: &Fanout,
    batch: Prepared,
    keep_until: Option<i64>,
) -> crate::error::Result<bool> {
    let recipients = batch.rows.len();
    let record = TriggerRecord {
        environment_id: EnvironmentId(fanout.environment_id.clone()),
        transaction_id: fanout.transaction_id.clone(),
        batch: batch.rows,
        fanout: None,
        advance: Some(Advance {
            fanout_id: fanout.id.clone(),
            worker: worker.to_owned(),
            from: fanout.position.clone(),
            to: batch.to,
            done: batch.done,
            keep_until,
        }),
        ran: batch.ran,
    };
    let recorded = triggers.insert_triggers(vec![record]).await?.first() == Some(&true);
    if recorded {
        crate::metrics::fanout_recipients(recipients);
        batch.finished.into_iter().for_each(FinishedJob::count);
    } else {
        tracing::debug!(fanout = %fanout.id, "a fan-out batch was not recorded");
    }
    Ok(recorded)
}
