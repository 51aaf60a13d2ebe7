//! The leases this process holds, and their renewer. A job a worker claimed, or that the trigger writer
//! handed over already leased, is reserved until `locked_until`; one renewer per process extends the leases
//! of every job the process still means to run or complete, so the lease can be short (`LEASE_MS`): a
//! process that dies stops renewing, and its jobs — handed over but not started included — are claimed
//! again by another worker once their lease runs out.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::domain::JobId;
use crate::store::Store;

/// The jobs this process's workers hold: claimed, or handed over by the trigger writer, and not yet
/// completed. Cheap to clone; clones share the set.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held(Arc<Mutex<HashSet<JobId>>>);

impl Held {
    pub(crate) fn add(&self, ids: impl IntoIterator<Item = JobId>) {
        self.lock().extend(ids);
    }

    /// No longer held: completed, or given up (a job whose completion failed is left to expire and be
    /// claimed again; renewing it would keep it from everyone for as long as this process lives).
    pub(crate) fn remove<'a>(&self, ids: impl IntoIterator<Item = &'a JobId>) {
        let mut held = self.lock();
        for id in ids {
            held.remove(id);
        }
    }

    pub(crate) fn ids(&self) -> Vec<JobId> {
        self.lock().iter().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<JobId>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Extends the lease of every job `held` names to `lease` from now, every third of `lease`, as long as the
/// future runs (one statement per round, guarded by `locked_by = worker` and `status = 'running'`).
pub(crate) async fn renew(store: Store, worker: String, held: Held, lease: Duration) {
    let every = lease / 3;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let ids = held.ids();
        if ids.is_empty() {
            continue;
        }
        if let Err(e) = store
            .renew_leases(&worker, &ids, lease.as_millis() as i64)
            .await
        {
            tracing::warn!(error = ?e, "renewing leases failed");
        }
    }
}
