//! Erasing deleted subscribers (issue 35). `DELETE /v2/subscribers/{id}` removes the record and what is
//! small or keyed by the reusable subscriberId at once, and records an erasure (`store::erasures`); this
//! loop, beside the job workers of every `serve` and `worker` process, erases the rest in batches of at most
//! [`BATCH`] rows, each a short transaction of its own, so that a subscriber with a long history never holds
//! the database writer for long: first the notifications lose their recipient and their unstarted jobs, then
//! the messages go. An erasure is claimed with a lease, renewed after every batch: a process that dies
//! mid-erasure leaves it to another once the lease runs out, and the batches already done stay done.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Wakeup;
use crate::domain::Timestamp;
use crate::error::Result;
use crate::store::Store;

/// Most rows one batch changes.
pub const BATCH: i64 = 500;
/// How long after the delete the erasure makes its last pass: a job that was running when the subscriber
/// was deleted may still record a message until its lease (renewed while it runs) ends.
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
        "erasing a deleted subscriber failed",
        || erase_one(store, worker, lease_ms, stopping),
    )
    .await;
}

/// Claims one erasure that is due and works it through in batches; `false` when none was.
pub async fn erase_one(
    store: &Store,
    worker: &str,
    lease_ms: i64,
    shutdown: &CancellationToken,
) -> Result<bool> {
    let Some(e) = store
        .claim_erasure(worker, Timestamp::now().0, lease_ms)
        .await?
    else {
        return Ok(false);
    };
    loop {
        let mut done = store.strip_erased_notifications(&e, BATCH).await?;
        if done == 0 {
            done = store.delete_erased_messages(&e, BATCH).await?;
        }
        if done == 0 {
            break;
        }
        // Stopping, or the lease was lost: what is done stays done, the rest waits for the next claim.
        if shutdown.is_cancelled()
            || !store
                .renew_erasure(&e, worker, Timestamp::now().0 + lease_ms)
                .await?
        {
            return Ok(true);
        }
        tokio::task::yield_now().await;
    }
    let last_pass = e.created_at + GRACE_MS;
    if Timestamp::now().0 < last_pass {
        store.postpone_erasure(&e, worker, last_pass).await?;
    } else {
        store.finish_erasure(&e, worker).await?;
    }
    Ok(true)
}
