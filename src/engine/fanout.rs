//! The expansion of fan-outs (triggers to topics, broadcasts): one loop per process claims the fan-out that
//! waited longest, reads its next batch of recipients from the cursor, and records their notifications and
//! first jobs through the trigger writer in the transaction that advances the cursor. A batch is recorded
//! exactly once — its advance is guarded by the lease and the position it was read from — so a process that
//! dies mid-batch loses nothing and sends nothing twice: the lease expires and any process reads the same
//! batch again. Each claim is one batch, so fan-outs (of all environments) take turns, and memory holds one
//! batch, not a topic.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{first_rows, TriggerWriter, Wakeup};
use crate::domain::fanout::Fanout;
use crate::domain::{EnvironmentId, Timestamp};
use crate::store::fanouts::Advance;
use crate::store::triggers::TriggerRecord;
use crate::store::Store;

/// Recipients per batch: a batch of a one-step workflow writes three rows per recipient (notification, job,
/// detail) in one transaction, which other environments' triggers wait for (tens of ms on SQLite).
pub const BATCH: usize = 500;

/// How often an idle expansion loop looks for fan-outs other processes recorded (or left behind when they
/// stopped); fan-outs recorded by this process wake it at once.
const POLL: Duration = Duration::from_secs(1);

/// Expands fan-outs until `shutdown`, as `worker`, each claim leased for `lease`.
pub async fn expand(
    store: Store,
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
        let pause = match expand_once(&store, &triggers, &worker, lease_ms).await {
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

/// Claims the fan-out whose turn it is, as `worker` for `lease_ms`, and expands its next batch (see the
/// module's notes). False when no fan-out was waiting.
pub async fn expand_once(
    store: &Store,
    triggers: &TriggerWriter,
    worker: &str,
    lease_ms: i64,
) -> crate::error::Result<bool> {
    if !store.fanouts_running().await? {
        return Ok(false);
    }
    let Some(fanout) = store.claim_fanout(worker, lease_ms).await? else {
        return Ok(false);
    };
    expand_batch(store, triggers, worker, fanout).await?;
    Ok(true)
}

/// Reads the next batch of a claimed `fanout` and records it (see the module's notes).
pub async fn expand_batch(
    store: &Store,
    triggers: &TriggerWriter,
    worker: &str,
    fanout: Fanout,
) -> crate::error::Result<()> {
    let batch = store.fanout_batch(&fanout, BATCH).await?;
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
    let recipients = rows.len();
    let record = TriggerRecord {
        environment_id: EnvironmentId(fanout.environment_id.clone()),
        transaction_id: fanout.transaction_id.clone(),
        batch: rows,
        fanout: None,
        advance: Some(Advance {
            fanout_id: fanout.id.clone(),
            worker: worker.to_owned(),
            from: fanout.position.clone(),
            to: batch.to,
            done: batch.done,
        }),
    };
    let recorded = triggers.insert_triggers(vec![record]).await?;
    if recorded.first() == Some(&true) {
        crate::metrics::fanout_recipients(recipients);
    } else {
        // Canceled meanwhile, or the lease went to another process that recorded this batch.
        tracing::debug!(fanout = %fanout.id, "a fan-out batch was not recorded");
    }
    Ok(())
}
