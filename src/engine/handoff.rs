//! The hand-off from the trigger writer to this process's workers: the first job of a new notification that
//! is due at once is recorded already leased to them (as a claim would lease it) and handed over, with its
//! notification, after the commit: no claim statement and no read of the notification.

use std::sync::{Arc, RwLock};

use tokio::sync::mpsc;

use super::leases::Held;
use super::steps::Runner;
use crate::store::triggers::Lease;

/// A job a trigger recorded already leased to this process's workers, with its notification.
pub use crate::store::triggers::HandedJob;

/// Where the trigger writer hands the due first jobs of new notifications: this process's workers, as
/// `worker`, for `lease_ms` (see [`Handoff::hand_jobs_to`]).
#[derive(Clone)]
pub(crate) struct Slot {
    worker: String,
    lease_ms: i64,
    jobs: mpsc::Sender<HandedJob>,
    held: Held,
    /// The workers' runner: with it, the trigger writer runs the in-app first steps due at once itself
    /// ([`super::run_due_in_app`]) and records them completed with their triggers.
    pub(crate) runner: Option<Arc<Runner>>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("worker", &self.worker)
            .field("lease_ms", &self.lease_ms)
            .finish_non_exhaustive()
    }
}

impl Slot {
    /// The worker jobs are handed to.
    pub(crate) fn worker(&self) -> &str {
        &self.worker
    }

    /// The lease of a group of triggers: the due first jobs go to this slot's workers when the channel has
    /// room for all of them (the permits hold that room until the jobs are sent, after the commit).
    pub(crate) fn lease<'s>(
        &'s self,
    ) -> Lease<'s, impl FnOnce(usize) -> Option<mpsc::PermitIterator<'s, HandedJob>> + 's> {
        Lease {
            worker: &self.worker,
            lease_ms: self.lease_ms,
            reserve: |n| self.jobs.try_reserve_many(n).ok(),
        }
    }

    /// Hands the jobs recorded leased to the workers, in the room [`Slot::lease`] reserved; from now on the
    /// workers' lease renewer keeps them leased until they are completed.
    pub(crate) fn hand(&self, room: mpsc::PermitIterator<'_, HandedJob>, jobs: Vec<HandedJob>) {
        self.held.add(jobs.iter().map(|(job, _)| job.id.clone()));
        for (permit, job) in room.zip(jobs) {
            permit.send(job);
        }
    }
}

/// This process's hand-off: at most one set of workers takes jobs from the trigger writer. Cheap to clone;
/// clones share it.
#[derive(Debug, Clone, Default)]
pub struct Handoff(Arc<RwLock<Option<Slot>>>);

impl Handoff {
    /// From now on, the trigger writer records the first job of a new notification that is due at once
    /// already leased to `worker` (as a claim would) and hands it, with its notification, to the returned
    /// receiver after the commit: no claim statement and no read of the notification. At most `capacity`
    /// jobs wait there; beyond that, jobs are queued for claiming as usual. A job handed to workers that
    /// stop is claimed again when its lease expires, like any claimed job.
    pub fn hand_jobs_to(
        &self,
        worker: &str,
        lease_ms: i64,
        capacity: usize,
    ) -> mpsc::Receiver<HandedJob> {
        self.hand_held_jobs_to(worker, lease_ms, capacity, Held::default(), None)
    }

    /// As [`Handoff::hand_jobs_to`], and the handed jobs join `held`, the jobs whose leases the workers'
    /// renewer extends; with `runner`, the trigger writer runs the due in-app first steps with it.
    pub(crate) fn hand_held_jobs_to(
        &self,
        worker: &str,
        lease_ms: i64,
        capacity: usize,
        held: Held,
        runner: Option<Arc<Runner>>,
    ) -> mpsc::Receiver<HandedJob> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(Slot {
            worker: worker.to_owned(),
            lease_ms,
            jobs: tx,
            held,
            runner,
        });
        rx
    }

    /// Stops handing jobs to `worker` (see [`Handoff::hand_jobs_to`]).
    pub fn stop_handing_jobs(&self, worker: &str) {
        let mut slot = self.0.write().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|h| h.worker == worker) {
            *slot = None;
        }
    }

    /// The workers jobs are handed to now, if any.
    pub(crate) fn current(&self) -> Option<Slot> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
