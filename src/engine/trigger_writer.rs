//! The group-commit writer of triggers: triggers that requests record at the same moment share one
//! transaction (the writer is the bottleneck, not the rows). The rows are made into statements by
//! [`Store::plan_triggers`] and written by [`Store::write_triggers`]; due first jobs go to this process's
//! workers through the [`Handoff`].
//!
//! Fairness: the writer keeps the waiting triggers per environment and forms each group by letting each
//! environment in turn take its waiting triggers up to [`TURN_ROWS`] rows (at least one trigger), until the
//! group holds [`GROUP_ROWS_MAX`] rows; the environment whose turn it was when a group filled up starts the
//! next one. A bulk request is split this way too (each of its triggers is atomic, the request is not: as in
//! Novu, its triggers are independent). So a trigger waits for at most one turn of each other environment
//! with triggers waiting, and every group is small: an environment sending 30,000 notifications delays
//! another's triggers by about two groups, not by its whole backlog, and turns counted in rows let an
//! environment of single triggers keep its pace beside one of large fan-outs.
//!
//! Isolation: when the database refuses a group, its halves are recorded on their own, and so on down to the
//! trigger that fails alone (bisection); every other trigger of the group is recorded, and only the request
//! that sent the refused one gets an error.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::handoff::Handoff;
use super::{run_due_in_app, FirstRows};
use crate::domain::EnvironmentId;
use crate::error::{Error, Result};
use crate::metrics::FinishedJob;
use crate::store::triggers::{Recorded, TriggerRecord};
use crate::store::Store;

/// A request to the group-commit writer: the records and where to send their outcomes.
type TriggerRequest = (Vec<TriggerRecord>, oneshot::Sender<Outcomes>);

/// Most rows (notifications, jobs, execution details) a group commit writes, unless one trigger alone has
/// more (a trigger is never split). A trigger to 100 recipients of a one-step workflow is 300 rows, a
/// single one-step trigger 3, so single triggers meet the cap only beyond 200 requests at once. It bounds
/// how long one group holds the writer (tens of ms on SQLite in a release build), which is what another
/// environment's trigger waits for.
pub const GROUP_ROWS_MAX: usize = 600;

/// Most rows one environment's turn takes within a group, unless its first trigger alone has more.
const TURN_ROWS: usize = GROUP_ROWS_MAX / 4;

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

    /// Records triggers, grouped with the triggers other requests are recording at the same moment (see the
    /// module's notes on fairness and isolation). Per record: true when it was recorded, false when its
    /// transaction id was seen before (then nothing of it is written). An error when any record failed;
    /// the others may have been recorded.
    pub async fn insert_triggers(&self, records: Vec<TriggerRecord>) -> Result<Vec<bool>> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        self.submit(records)?.answer().await
    }

    /// As [`TriggerWriter::insert_triggers`], with each record's own outcome: recorded (true), seen
    /// before (false), or why the database refused it (the others are recorded all the same).
    pub async fn insert_triggers_each(&self, records: Vec<TriggerRecord>) -> Result<Outcomes> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        self.submit(records)?.answer_each().await
    }

    /// Puts `records` in the writer's line now, behind every request of their environment put before
    /// (their transactions run in that order), and returns what answers them. For writes that must reach
    /// the database in the order they were made — a fan-out's batches, each advancing the cursor from where
    /// the one before left it — even when their answers are awaited by tasks polled in another order.
    pub fn submit(&self, records: Vec<TriggerRecord>) -> Result<Submitted> {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            crate::background::spawn(group_commit(self.store.clone(), self.handoff.clone(), rx));
            tx
        });
        let (done_tx, done_rx) = oneshot::channel();
        queue
            .send((records, done_tx))
            .map_err(|_| anyhow::anyhow!("the trigger writer has stopped"))?;
        Ok(Submitted(done_rx))
    }
}

/// Records in the trigger writer's line (see [`TriggerWriter::submit`]).
#[derive(Debug)]
pub struct Submitted(oneshot::Receiver<Outcomes>);

impl Submitted {
    /// Per record, whether it was recorded (as [`TriggerWriter::insert_triggers`] answers).
    pub async fn answer(self) -> Result<Vec<bool>> {
        self.answer_each()
            .await?
            .into_iter()
            .map(|o| o.map_err(|message| Error::Internal(anyhow::anyhow!("{message}"))))
            .collect()
    }

    /// Per record, its own outcome (as [`TriggerWriter::insert_triggers_each`] answers).
    pub async fn answer_each(self) -> Result<Outcomes> {
        Ok(self
            .0
            .await
            .map_err(|_| anyhow::anyhow!("the trigger writer dropped the request"))?)
    }
}

/// The writer behind [`TriggerWriter::insert_triggers`]: takes every request waiting into its line, records
/// the groups it forms one transaction at a time, in order, and answers each request once all its records
/// are through. Each group is recorded by a task of its own that makes it into statements while the group
/// before is being written, then waits for that one to end: the database waits for nothing but the
/// transactions. One transaction at a time, on both databases: on PostgreSQL three groups under way at once
/// made each group smaller and cost the database more per event (2,955 → 2,425 single triggers/s end to end).
async fn group_commit(
    store: Store,
    handoff: Handoff,
    mut rx: mpsc::UnboundedReceiver<TriggerRequest>,
) {
    let mut line = Line::default();
    // The group under way (its triggers' owners and its task), and the end of the last group begun.
    let mut writing: Option<(Owners, JoinHandle<Outcomes>)> = None;
    let mut last_end: Option<oneshot::Receiver<()>> = None;
    loop {
        if line.is_empty() {
            // The group under way may end before a request comes.
            let request = match &mut writing {
                Some((_, task)) => tokio::select! {
                    request = rx.recv() => request,
                    outcomes = task => {
                        let (owners, _) = writing.take().expect("under way");
                        line.answer_group(owners, outcomes);
                        continue;
                    }
                },
                None => rx.recv().await,
            };
            match request {
                Some(request) => line.add(request),
                None => break,
            }
        }
        while let Ok(request) = rx.try_recv() {
            line.add(request);
        }
        let (records, owners): (Vec<TriggerRecord>, Owners) = line
            .next_group()
            .into_iter()
            .map(|w| (w.record, (w.request, w.index)))
            .unzip();
        let after = last_end.take();
        let (end, ended) = oneshot::channel::<()>();
        last_end = Some(ended);
        let task = crate::background::spawn({
            let (store, handoff) = (store.clone(), handoff.clone());
            async move {
                let mut records = records;
                let ran = run_first_steps(&store, &handoff, &mut records).await;
                let outcomes = record_isolating(&store, &handoff, &records, after).await;
                drop(end);
                for (finished, outcome) in ran.into_iter().zip(&outcomes) {
                    if outcome == &Ok(true) {
                        finished.into_iter().for_each(FinishedJob::count);
                    }
                }
                outcomes
            }
        });
        // At most one group waits for its turn: the next one is formed from what came meanwhile.
        if let Some((owners, task)) = writing.replace((owners, task)) {
            line.answer_group(owners, task.await);
        }
    }
    if let Some((owners, task)) = writing {
        line.answer_group(owners, task.await);
    }
}

/// Per record of a group: the request that sent it, and its place in that request.
type Owners = Vec<(u64, usize)>;

/// Per record of a group: recorded (true) or seen before (false), or why it failed.
pub type Outcomes = Vec<Result<bool, String>>;

/// A trigger waiting for its group: which request sent it, and where in that request.
struct Waiting {
    request: u64,
    index: usize,
    record: TriggerRecord,
}

/// A request's answer as its triggers are recorded.
struct Answer {
    reply: oneshot::Sender<Outcomes>,
    outcomes: Outcomes,
    left: usize,
}

/// The triggers waiting for a group, in line per environment, and the environments' turns.
#[derive(Default)]
struct Line {
    waiting: HashMap<EnvironmentId, VecDeque<Waiting>>,
    /// The environments with triggers waiting, the one whose turn is next first.
    turns: VecDeque<EnvironmentId>,
    answers: HashMap<u64, Answer>,
    next_request: u64,
}

impl Line {
    fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    fn add(&mut self, (records, reply): TriggerRequest) {
        let request = self.next_request;
        self.next_request += 1;
        let count = records.len();
        for (index, record) in records.into_iter().enumerate() {
            let env = record.environment_id.clone();
            let line = self.waiting.entry(env.clone()).or_default();
            if line.is_empty() {
                self.turns.push_back(env);
            }
            line.push_back(Waiting {
                request,
                index,
                record,
            });
        }
        self.answers.insert(
            request,
            Answer {
                reply,
                outcomes: vec![Ok(false); count],
                left: count,
            },
        );
    }

    /// The next group: each environment in turn takes its waiting triggers up to [`TURN_ROWS`] rows (at
    /// least one trigger), until the next one would take the group past [`GROUP_ROWS_MAX`] rows (the first
    /// trigger is always taken). Turns are counted in rows, not triggers, so an environment sending single
    /// triggers moves as fast as its line allows beside one sending large ones.
    fn next_group(&mut self) -> Vec<Waiting> {
        let mut group = Vec::new();
        let mut rows = 0;
        'turns: while let Some(env) = self.turns.pop_front() {
            let line = self
                .waiting
                .get_mut(&env)
                .expect("an environment in turn waits");
            let mut turn = 0;
            while let Some(cost) = line.front().map(|w| rows_of(&w.record)) {
                if turn > 0 && turn + cost > TURN_ROWS {
                    break;
                }
                if !group.is_empty() && rows + cost > GROUP_ROWS_MAX {
                    // Its turn stays: it starts the next group.
                    self.turns.push_front(env);
                    break 'turns;
                }
                group.extend(line.pop_front());
                rows += cost;
                turn += cost;
            }
            if line.is_empty() {
                self.waiting.remove(&env);
            } else {
                self.turns.push_back(env);
            }
        }
        group
    }

    /// Notes the outcomes of a group's records (`owners`: their requests and places in them).
    fn answer_group(&mut self, owners: Owners, outcomes: Result<Outcomes, tokio::task::JoinError>) {
        let outcomes = outcomes.unwrap_or_else(|e| {
            vec![Err(format!("recording the triggers failed: {e}")); owners.len()]
        });
        for ((request, index), outcome) in owners.into_iter().zip(outcomes) {
            self.answer(request, index, outcome);
        }
    }

    /// Notes the outcome of one record; answers its request once all its records are through.
    fn answer(&mut self, request: u64, index: usize, outcome: Result<bool, String>) {
        let Some(answer) = self.answers.get_mut(&request) else {
            return;
        };
        answer.outcomes[index] = outcome;
        answer.left -= 1;
        if answer.left == 0 {
            let Answer {
                reply, outcomes, ..
            } = self.answers.remove(&request).expect("present");
            let _ = reply.send(outcomes);
        }
    }
}

/// The rows a trigger writes: per recipient its notification, its jobs and their first details (and its
/// fan-out's row, or the advance of its fan-out's cursor).
fn rows_of(record: &TriggerRecord) -> usize {
    let fanout = usize::from(record.fanout.is_some() || record.advance.is_some());
    fanout
        + record
            .batch
            .iter()
            .map(|(_, jobs, details)| 1 + jobs.len() + details.len())
            .sum::<usize>()
}

/// Runs the in-app first steps due at once of the triggers in `records` with this process's workers' runner,
/// if it has workers ([`run_due_in_app`]): they are completed in the transaction that records them, and
/// the workers neither claim nor complete them. A fan-out's batches come with theirs. Per record: what the
/// metrics count once it is recorded.
async fn run_first_steps(
    store: &Store,
    handoff: &Handoff,
    records: &mut [TriggerRecord],
) -> Vec<Vec<FinishedJob>> {
    let Some((runner, slot)) = handoff
        .current()
        .and_then(|slot| Some((slot.runner.clone()?, slot)))
    else {
        return Vec::new();
    };
    let mut batches: Vec<&mut Vec<FirstRows>> = records
        .iter_mut()
        .filter(|r| r.ran_by.is_none())
        .map(|r| &mut r.batch)
        .collect();
    let mut ran = run_due_in_app(store, &runner, slot.worker(), &mut batches)
        .await
        .into_iter();
    let mut finished = Vec::with_capacity(records.len());
    for r in records.iter_mut() {
        if r.ran_by.is_some() {
            finished.push(Vec::new());
            continue;
        }
        let (done, counted) = ran.next().unwrap_or_default();
        if !done.is_empty() {
            r.ran = done;
            r.ran_by = Some(slot.worker().to_owned());
        }
        finished.push(counted);
    }
    finished
}

/// Records `records` in one transaction, once `after` (the group before) ended; when the database refuses
/// it, each half on its own, down to the records that fail alone.
async fn record_isolating(
    store: &Store,
    handoff: &Handoff,
    records: &[TriggerRecord],
    mut after: Option<oneshot::Receiver<()>>,
) -> Outcomes {
    let mut outcomes = vec![Ok(false); records.len()];
    // The parts still to record, the next one last.
    let mut parts = Vec::new();
    parts.push(0..records.len());
    while let Some(part) = parts.pop() {
        match record(store, handoff, &records[part.clone()], after.take()).await {
            Ok(fresh) => {
                for (outcome, fresh) in outcomes[part].iter_mut().zip(fresh) {
                    *outcome = Ok(fresh);
                }
            }
            Err(e) if part.len() > 1 && refused(&e) => {
                tracing::warn!(error = %e, triggers = part.len(), "a group of triggers was refused; recording its halves apart");
                let middle = part.start + part.len() / 2;
                parts.push(middle..part.end);
                parts.push(part.start..middle);
            }
            Err(e) => {
                let message = format!("{e:#}");
                for outcome in &mut outcomes[part] {
                    *outcome = Err(message.clone());
                }
            }
        }
    }
    outcomes
}

/// Whether the database refused what a transaction wrote (a constraint, a value it cannot store), as
/// opposed to failing to run it at all (the connection or the pool): only then can a part of a group
/// succeed where the whole failed.
fn refused(e: &Error) -> bool {
    let Error::Internal(e) = e else {
        return true;
    };
    !matches!(
        e.downcast_ref::<sqlx::Error>(),
        Some(
            sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed
        )
    )
}

/// Records triggers in one transaction, made into statements at once and written once `after` ended, and
/// hands the jobs recorded leased to this process's workers.
async fn record(
    store: &Store,
    handoff: &Handoff,
    records: &[TriggerRecord],
    after: Option<oneshot::Receiver<()>>,
) -> Result<Vec<bool>> {
    let slot = handoff.current();
    let plan = store.plan_triggers(records, slot.as_ref().map(|s| s.lease()));
    if let Some(after) = after {
        // An error is its end too: the group before dropped its sender.
        let _ = after.await;
    }
    let Recorded { fresh, leased } = store.write_triggers(plan?).await?;
    if let (Some(slot), Some((room, jobs))) = (&slot, leased) {
        slot.hand(room, jobs);
    }
    Ok(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::Notification;

    /// A trigger of `env` to `recipients` recipients (notifications only: the line counts rows).
    fn trigger(env: &str, recipients: usize) -> TriggerRecord {
        let n: Notification = Notification {
            id: Default::default(),
            organization_id: Default::default(),
            environment_id: env.into(),
            subscriber_ref: Default::default(),
            subscriber_id: String::new(),
            workflow_ref: Default::default(),
            workflow_identifier: String::new(),
            transaction_id: String::new(),
            channels: Vec::new(),
            payload: serde_json::Value::Null,
            overrides: None,
            to: None,
            actor: None,
            tags: Vec::new(),
            severity: String::new(),
            critical: false,
            context_keys: Vec::new(),
            digested_notification_id: None,
            topic_id: None,
            topic_key: None,
            subscription_identifier: None,
            created_at: crate::domain::Timestamp(0),
            updated_at: crate::domain::Timestamp(0),
        };
        TriggerRecord {
            environment_id: n.environment_id.clone(),
            transaction_id: String::new(),
            batch: (0..recipients)
                .map(|_| (n.clone(), Vec::new(), Vec::new()))
                .collect(),
            fanout: None,
            advance: None,
            ran: Vec::new(),
            ran_by: None,
        }
    }

    fn envs(group: &[Waiting]) -> Vec<&str> {
        group
            .iter()
            .map(|w| w.record.environment_id.as_str())
            .collect()
    }

    /// Environments take turns, one trigger each; a group stops at its row budget, and the environment
    /// whose turn it was starts the next one; a large request is spread over groups.
    #[test]
    fn groups_interleave_environments_within_the_row_budget() {
        let mut line = Line::default();
        let (tx, _rx) = oneshot::channel();
        line.add(((0..10).map(|_| trigger("big", 250)).collect(), tx));
        let (tx, _rx) = oneshot::channel();
        line.add((vec![trigger("small", 1), trigger("small", 1)], tx));
        let (tx, _rx) = oneshot::channel();
        line.add((vec![trigger("other", 1)], tx));
        // A turn takes up to 150 rows: one big trigger (250), both small ones, the other one; then big's
        // second (503 rows in all), and its third would pass 600.
        assert_eq!(
            envs(&line.next_group()),
            ["big", "small", "small", "other", "big"]
        );
        assert_eq!(envs(&line.next_group()), ["big", "big"]);
        let mut rest = 0;
        while !line.is_empty() {
            let group = line.next_group();
            assert!(group.iter().map(|w| rows_of(&w.record)).sum::<usize>() <= GROUP_ROWS_MAX);
            rest += group.len();
        }
        assert_eq!(rest, 6);
        // A trigger larger than the budget goes alone.
        let (tx, _rx) = oneshot::channel();
        line.add((vec![trigger("huge", 700), trigger("huge", 1)], tx));
        assert_eq!(line.next_group().len(), 1);
        assert_eq!(line.next_group().len(), 1);
        assert!(line.is_empty());
    }
}
