//! The expansion of fan-outs (triggers to topics, broadcasts): one loop per process claims the fan-out that
//! waited longest, reads its next batch of recipients from the cursor, and records their notifications and
//! first jobs through the trigger writer in the transaction that advances the cursor. A batch is recorded
//! exactly once — its advance is guarded by the lease and the position it was read from — so a process that
//! dies mid-batch loses nothing and sends nothing twice: the lease expires and any process reads the same
//! batch again. A claim covers at most [`BATCHES_PER_CLAIM`] batches, so fan-outs (of all environments) take
//! turns, and memory holds three batches, not a topic.
//!
//! Within a claim the batches form a pipeline (the worker keeps the lease from one to the next): while one
//! is written, the next is made into statements by the trigger writer and the one after it is read and
//! run, so the database writer waits for nothing but the database. The loop itself puts each batch in the
//! writer's line, in order (tasks only await the answers): a batch that reached the line before the one it
//! follows would find the cursor not yet where it starts, and be refused. The batches handed to the writer are
//! not visible yet to the next one's "reached already?" probe, so their recipients are passed over
//! explicitly. When one is not recorded after all (canceled, the lease lost), the one handed over after it
//! is not either — it advances the cursor from where that one would have left it — and the claim ends.
//!
//! A first step that is an in-app message due at once is run here, by the workers' own runner, and
//! completed in the batch's transaction: storing it needs nothing but the database, and a claim and a
//! completion per job would cost two more write transactions per recipient. Other first steps (deliveries
//! that call providers, delays, digests) are queued for the workers.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::steps::Runner;
use super::{first_rows, run_due_in_app, TriggerWriter, Wakeup};
use crate::domain::fanout::{Fanout, Position};
use crate::domain::job::{ExecutionDetail, Job, Notification};
use crate::domain::Timestamp;
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

/// Expands fan-outs until `shutdown`, as `worker`, each claim leased for `lease`.
pub async fn expand(
    store: Store,
    runner: Arc<Runner>,
    triggers: TriggerWriter,
    worker: String,
    lease: Duration,
    wakeup: Wakeup,
    shutdown: CancellationToken,
) {
    let lease_ms = lease.as_millis() as i64;
    let (store, runner, triggers, worker, woken) = (&store, &runner, &triggers, &worker, &wakeup);
    super::leased_work_loop(
        &wakeup,
        &shutdown,
        "expanding a fan-out failed",
        || async move {
            let expanded = expand_once(store, runner, triggers, worker, lease_ms).await?;
            if expanded {
                // Jobs queued beyond what the workers were handed.
                woken.notify();
            }
            Ok(expanded)
        },
    )
    .await;
}

/// Claims the fan-out whose turn it is, as `worker` for `lease_ms`, and expands up to
/// [`BATCHES_PER_CLAIM`] of its batches (see the module's notes). False when no fan-out was waiting.
pub async fn expand_once(
    store: &Store,
    runner: &Arc<Runner>,
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
    // The batches handed to the trigger writer and not known to be recorded yet, the oldest first: one is
    // written while the next is made into statements. When a batch is read, only the one handed over last
    // is among them (the one before it was waited for), so its recipients are the ones passed over.
    let mut recording: VecDeque<JoinHandle<crate::error::Result<bool>>> = VecDeque::new();
    let mut in_flight = HashSet::new();
    for n in 1..=BATCHES_PER_CLAIM {
        let batch = joined(crate::background::spawn(prepare(
            store.clone(),
            runner.clone(),
            worker.to_owned(),
            fanout.clone(),
            in_flight,
        )))
        .await?;
        let last = n == BATCHES_PER_CLAIM || batch.done;
        let keep_until = (!last).then(|| Timestamp::now().0 + lease_ms);
        in_flight = batch
            .rows
            .iter()
            .map(|(n, _, _)| n.subscriber_id.clone())
            .collect();
        let to = batch.to.clone();
        // Put in the writer's line here, in order; only the answer is awaited by a task of its own.
        recording.push_back(crate::background::spawn(record(
            triggers, worker, &fanout, batch, keep_until,
        )?));
        if last {
            break;
        }
        fanout.position = to;
        if recording.len() == 2 {
            let task = recording.pop_front().expect("two batches");
            if !joined(task).await? {
                // The batch after it is not recorded either: it advances from where this one would have.
                break;
            }
        }
    }
    for task in recording {
        joined(task).await?;
    }
    Ok(true)
}

/// Reads the next batch of a claimed `fanout`, runs its due in-app first steps, and records it, releasing
/// the lease (see the module's notes).
pub async fn expand_batch(
    store: &Store,
    runner: &Arc<Runner>,
    triggers: &TriggerWriter,
    worker: &str,
    fanout: Fanout,
) -> crate::error::Result<()> {
    let batch = prepare(
        store.clone(),
        runner.clone(),
        worker.to_owned(),
        fanout.clone(),
        HashSet::new(),
    )
    .await?;
    record(triggers, worker, &fanout, batch, None)?.await?;
    Ok(())
}

/// The outcome of a task of the expansion. Its parts run as tasks of their own: polled together, the long
/// stretches of work of one (running a batch's steps, making it into statements) would hold up the others,
/// and the trigger writer's task they wake (tokio runs a woken task next on the thread that woke it, where
/// no other thread can take it).
async fn joined<T>(task: JoinHandle<crate::error::Result<T>>) -> crate::error::Result<T> {
    task.await
        .map_err(|e| anyhow::anyhow!("a fan-out task failed: {e}"))?
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

/// Reads the batch of `fanout` at its position (`in_flight`: the recipients of the batch being recorded)
/// and runs its in-app first steps that are due now, as a claim would hand them to a worker.
async fn prepare(
    store: Store,
    runner: Arc<Runner>,
    worker: String,
    fanout: Fanout,
    in_flight: HashSet<String>,
) -> crate::error::Result<Prepared> {
    let batch = store.fanout_batch(&fanout, BATCH, in_flight).await?;
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
        rows.push(first_rows(n, &fanout.template, now));
    }
    let (ran, finished) = run_due_in_app(&store, &runner, &worker, &mut [&mut rows])
        .await
        .pop()
        .unwrap_or_default();
    Ok(Prepared {
        rows,
        ran,
        finished,
        to: batch.to,
        done: batch.done,
    })
}

/// Puts a prepared batch of `fanout` (read from its position) in the trigger writer's line with the advance
/// of its cursor — batches reach the database in the order this is called — and returns what awaits it: true
/// when it was recorded (the lease released, or kept until `keep_until`; its in-app messages announced by the store),
/// false when it was not: canceled meanwhile, or the lease went to another process that recorded it.
fn record(
    triggers: &TriggerWriter,
    worker: &str,
    fanout: &Fanout,
    batch: Prepared,
    keep_until: Option<i64>,
) -> crate::error::Result<
    impl std::future::Future<Output = crate::error::Result<bool>> + Send + 'static,
> {
    let recipients = batch.rows.len();
    let record = TriggerRecord {
        environment_id: fanout.environment_id.clone(),
        transaction_id: fanout.transaction_id.clone(),
        batch: batch.rows,
        fanout: None,
        ran_by: Some(worker.to_owned()),
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
    let submitted = triggers.submit(vec![record])?;
    let (finished, fanout_id) = (batch.finished, fanout.id.clone());
    Ok(async move {
        let recorded = submitted.answer().await?.first() == Some(&true);
        if recorded {
            crate::metrics::fanout_recipients(recipients);
            finished.into_iter().for_each(FinishedJob::count);
        } else {
            tracing::debug!(fanout = %fanout_id, "a fan-out batch was not recorded");
        }
        Ok(recorded)
    })
}
