//! Erasing deleted subscribers (issue 35) and deleted environments (issue 38). `DELETE /v2/subscribers/{id}`
//! removes the record and what is small or keyed by the reusable subscriberId at once, and records an erasure
//! (`store::erasures`); `DELETE /v1/environments/{id}` removes the environment and its keys at once and
//! records one too (`store::environment_erasures`). This loop, beside the job workers of every `serve` and
//! `worker` process, erases the rest in batches of at most [`BATCH`] rows, each a short transaction of its
//! own, so that a long history never holds the database writer for long: a subscriber's notifications lose
//! their recipient and their unstarted jobs, then its messages go; an environment's rows go table by table.
//! An erasure is claimed with a lease, renewed after every batch: a process that dies mid-erasure leaves it
//! to another once the lease runs out, and the batches already done stay done.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Wakeup;
use crate::domain::Timestamp;
use crate::error::Result;
use crate::store::Store;

/// Most rows one batch changes.
pub const BATCH: i64 = 500;
/// How long after the delete the erasure makes its last pass: a job that was running when the subscriber
/// (or environment) was deleted may still record a message until its lease (renewed while it runs) ends.
pub const GRACE_MS: i64 = 60_000;

/// Erases pending erasures until `shutdown`.
pub async fn sweep(
    store: Store,
    worker: String,
    lease: Duration,
    wakeup: Wakeup,
    shutdown: CancellationToken,
) {
    let lease_ms = lease.as_millis() as i64;
    let (store, worker, stopping) = (&store, &worker, &shutdown);
    super::leased_work_loop(
        &wakeup,
        &shutdown,
        "erasing a deleted subscriber or environment failed",
        || erase_one(store, worker, lease_ms, stopping),
    )
    .await;
}

/// Claims one erasure that is due (a subscriber's first, then an environment's) and works it through in
/// batches; `false` when none was.
pub async fn erase_one(
    store: &Store,
    worker: &str,
    lease_ms: i64,
    shutdown: &CancellationToken,
) -> Result<bool> {
    let now = Timestamp::now().0;
    if let Some(e) = store.claim_erasure(worker, now, lease_ms).await? {
        let e = &e;
        let batch = move || async move {
            match store.strip_erased_notifications(e, BATCH).await? {
                0 => store.delete_erased_messages(e, BATCH).await,
                n => Ok(n),
            }
        };
        let renew = move || store.renew_erasure(e, worker, Timestamp::now().0 + lease_ms);
        if work_through(shutdown, batch, renew).await? {
            match last_pass(e.created_at) {
                Some(at) => store.postpone_erasure(e, worker, at).await?,
                None => store.finish_erasure(e, worker).await?,
            }
        }
        return Ok(true);
    }
    let Some(e) = store
        .claim_environment_erasure(worker, now, lease_ms)
        .await?
    else {
        return Ok(false);
    };
    let e = &e;
    let batch = move || store.erase_environment_batch(e, BATCH);
    let renew = move || store.renew_environment_erasure(e, worker, Timestamp::now().0 + lease_ms);
    if work_through(shutdown, batch, renew).await? {
        match last_pass(e.created_at) {
            Some(at) => store.postpone_environment_erasure(e, worker, at).await?,
            None => store.finish_environment_erasure(e, worker).await?,
        }
    }
    Ok(true)
}

/// Runs `batch` (which answers how many rows it changed) until it changes none, renewing the lease after each
/// one; `true` when nothing is left, `false` when stopping or the lease was lost (what is done stays done,
/// the rest waits for the next claim).
async fn work_through<B, BF, R, RF>(
    shutdown: &CancellationToken,
    mut batch: B,
    mut renew: R,
) -> Result<bool>
where
    B: FnMut() -> BF,
    BF: Future<Output = Result<u64>>,
    R: FnMut() -> RF,
    RF: Future<Output = Result<bool>>,
{
    loop {
        if batch().await? == 0 {
            return Ok(true);
        }
        if shutdown.is_cancelled() || !renew().await? {
            return Ok(false);
        }
        tokio::task::yield_now().await;
    }
}

/// When the last pass of an erasure recorded at `created_at` is due, if it is not yet (`None`: now).
fn last_pass(created_at: i64) -> Option<i64> {
    let at = created_at + GRACE_MS;
    (Timestamp::now().0 < at).then_some(at)
}
