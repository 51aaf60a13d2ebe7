//! The group-commit writer of triggers: requests that record triggers at the same moment share one
//! transaction (the writer is the bottleneck, not the rows). The rows are written by
//! [`Store::record_triggers`]; due first jobs go to this process's workers through the [`Handoff`].

use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot};

use super::handoff::Handoff;
use crate::error::Result;
use crate::store::triggers::{Recorded, TriggerRecord};
use crate::store::Store;

/// A request to the group-commit writer: the records and where to send their outcome.
type TriggerRequest = (Vec<TriggerRecord>, oneshot::Sender<Result<Vec<bool>>>);

/// Most triggers one group commit takes.
const GROUP_COMMIT_MAX: usize = 1000;

/// Records triggers through one group-commit writer, started on first use. Cheap to clone; clones share the
/// writer, which stops when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct TriggerWriter {
    store: Store,
    handoff: Handoff,
    queue: Arc<OnceLock<mpsc::UnboundedSender<TriggerRequest>>>,
}

impl TriggerWriter {
    /// A writer into `store` that hands due first jobs to the workers `handoff` names.
    pub fn new(store: Store, handoff: Handoff) -> Self {
        Self {
            store,
            handoff,
            queue: Default::default(),
        }
    }

    /// Records triggers, grouped with the triggers other requests are recording at the same moment into one
    /// transaction (group commit: the writer is the bottleneck, not the rows). Per record: true when it was
    /// recorded, false when its transaction id was seen before (then nothing of it is written).
    pub async fn insert_triggers(&self, records: Vec<TriggerRecord>) -> Result<Vec<bool>> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            crate::background::spawn(group_commit(self.store.clone(), self.handoff.clone(), rx));
            tx
        });
        let (done_tx, done_rx) = oneshot::channel();
        queue
            .send((records, done_tx))
            .map_err(|_| anyhow::anyhow!("the trigger writer has stopped"))?;
        done_rx
            .await
            .map_err(|_| anyhow::anyhow!("the trigger writer dropped the request"))?
    }
}

/// The writer behind [`TriggerWriter::insert_triggers`]: takes every request waiting, records them in one
/// transaction, and answers each with its share of the outcome. One group at a time, on both databases:
/// on PostgreSQL three groups under way at once made each group smaller and cost the database more per
/// event (2,955 → 2,425 single triggers/s end to end).
async fn group_commit(
    store: Store,
    handoff: Handoff,
    mut rx: mpsc::UnboundedReceiver<TriggerRequest>,
) {
    while let Some(first) = rx.recv().await {
        let mut requests = vec![first];
        let mut count = requests[0].0.len();
        while count < GROUP_COMMIT_MAX {
            match rx.try_recv() {
                Ok(more) => {
                    count += more.0.len();
                    requests.push(more);
                }
                Err(_) => break,
            }
        }
        commit_group(&store, &handoff, requests, count).await;
    }
}

/// Records one group of trigger requests in one transaction, hands the jobs recorded leased to this
/// process's workers, and answers each request.
async fn commit_group(
    store: &Store,
    handoff: &Handoff,
    requests: Vec<TriggerRequest>,
    count: usize,
) {
    let mut sizes = Vec::with_capacity(requests.len());
    let mut all = Vec::with_capacity(count);
    let mut replies = Vec::with_capacity(requests.len());
    for (records, reply) in requests {
        sizes.push(records.len());
        all.extend(records);
        replies.push(reply);
    }
    let slot = handoff.current();
    let recorded = store
        .record_triggers(&all, slot.as_ref().map(|s| s.lease()))
        .await;
    match recorded {
        Ok(Recorded { fresh, leased }) => {
            if let Some((permits, handed)) = leased {
                for (permit, job) in permits.zip(handed) {
                    permit.send(job);
                }
            }
            let mut fresh = fresh.into_iter();
            for (size, reply) in sizes.into_iter().zip(replies) {
                let _ = reply.send(Ok(fresh.by_ref().take(size).collect()));
            }
        }
        Err(e) => {
            let message = format!("{e:#}");
            for reply in replies {
                let _ = reply.send(Err(crate::error::Error::Internal(anyhow::anyhow!(
                    "{message}"
                ))));
            }
        }
    }
}
