//! The sender of outbound webhooks (issue 39): takes the messages the outbox recorded (`store::outbox`),
//! posts each to its endpoint signed as Standard Webhooks (both the `webhook-*` and the `svix-*` headers),
//! and records how each attempt ended, in batches. A message is tried at once, then on Svix's schedule; only
//! a 2xx within 15 s counts, redirects are not followed. Each endpoint has at most
//! [`PER_ENDPOINT`] messages in flight (and its own rate limit, `throttleRate`), so a slow or dead endpoint
//! holds only its own share: the claim skips endpoints that are full.
//!
//! Messages reach the sender two ways. The outbox of this process records those the sender has room for
//! (a free slot of the process and of the endpoint, a token) already leased to it, and hands them over once
//! committed, with their bodies: no claim and no read. The others — recorded while the endpoint was full,
//! due again after a failure, recorded by another process, or left by a process that died — are recorded
//! pending and claimed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::domain::webhook::{signature, WebhookEndpoint};
use crate::domain::Timestamp;
use crate::store::outbox;
use crate::store::webhook_messages::{Attempt, Outgoing};
use crate::store::Store;

/// Svix's retry schedule: the waits after each failed attempt; after the last, the message has failed.
pub const RETRY_SCHEDULE: [Duration; 7] = [
    Duration::from_secs(5),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 60 * 60),
    Duration::from_secs(5 * 60 * 60),
    Duration::from_secs(10 * 60 * 60),
    Duration::from_secs(10 * 60 * 60),
];

/// Messages in flight per process.
const IN_FLIGHT: usize = 128;
/// Messages in flight per endpoint.
pub const PER_ENDPOINT: usize = 64;
/// Most messages one claim takes. An endpoint with less room than this is skipped by the claim, so a claim
/// never takes more of an endpoint's messages than it may send (which it would have to give back).
const CLAIM: usize = PER_ENDPOINT / 2;
/// How long a claim holds a message: past the 15 s a receiver has, with room to record the attempt. A
/// process that dies lets its messages go to another this long after their claim (they may then arrive
/// twice, with the same id and body).
const LEASE: Duration = Duration::from_secs(20);
/// How often an idle sender looks for messages other processes recorded (its own wake it at once).
const IDLE_POLL: Duration = Duration::from_secs(1);
/// What an attempt keeps of the receiver's answer.
const RESPONSE_KEPT: usize = 1024;
/// Attempts recorded per transaction.
const FINISH_BATCH: usize = 512;

/// How a process sends webhooks.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// `TIDINGS_ALLOW_PRIVATE_NETWORKS` (see [`crate::outbound`]).
    pub allow_private_networks: bool,
    /// The waits between attempts ([`RETRY_SCHEDULE`]; tests shorten it).
    pub schedule: Vec<Duration>,
}

/// What the sender knows of each endpoint's load: messages in flight, and its rate limit's bucket.
#[derive(Default)]
struct Load {
    in_flight: HashMap<String, usize>,
    /// For endpoints with a `throttleRate`: their bucket.
    buckets: HashMap<String, Bucket>,
}

/// A token bucket of `rate` tokens per second, holding at most `rate`.
struct Bucket {
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// The tokens now.
    fn refill(&mut self, now: Instant) -> f64 {
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.rate).min(self.rate);
        self.at = now;
        self.tokens
    }
}

impl Load {
    /// The endpoints the claim must skip: those with less room than a claim takes, or out of tokens.
    fn busy(&mut self) -> Vec<String> {
        let now = Instant::now();
        // A bucket full again is forgotten (it starts full when next needed).
        self.buckets.retain(|_, b| b.refill(now) < b.rate);
        let full = self
            .in_flight
            .iter()
            .filter(|(_, n)| **n > PER_ENDPOINT - CLAIM);
        let dry = self.buckets.iter().filter(|(_, b)| b.tokens < 1.0);
        full.map(|(e, _)| e.clone())
            .chain(dry.map(|(e, _)| e.clone()))
            .collect()
    }

    /// Takes a slot (and a token) of `endpoint` for one message; false when it has none.
    fn take(&mut self, endpoint: &str, throttle_rate: Option<i64>) -> bool {
        if self.in_flight.get(endpoint).copied().unwrap_or(0) >= PER_ENDPOINT {
            return false;
        }
        if let Some(rate) = throttle_rate.filter(|r| *r > 0) {
            let now = Instant::now();
            let rate = rate as f64;
            let bucket = self.buckets.entry(endpoint.to_owned()).or_insert(Bucket {
                rate,
                tokens: rate,
                at: now,
            });
            bucket.rate = rate;
            if bucket.refill(now) < 1.0 {
                return false;
            }
            bucket.tokens -= 1.0;
        }
        *self.in_flight.entry(endpoint.to_owned()).or_default() += 1;
        true
    }

    fn release(&mut self, endpoint: &str) {
        if let Some(n) = self.in_flight.get_mut(endpoint) {
            *n -= 1;
            if *n == 0 {
                self.in_flight.remove(endpoint);
            }
        }
    }
}

/// What the send loop, the sends and the outbox share: the endpoints' load and the process's slots. A
/// message holds a slot of the process and one of its endpoint from the moment it is claimed — or recorded
/// leased to this sender by the outbox ([`outbox::Sender`]) — until its attempt ended.
struct Shared {
    load: Mutex<Load>,
    /// The process's free slots ([`IN_FLIGHT`]); a taken slot's permit is forgotten until its release.
    slots: Semaphore,
    /// Told when a send ends: its endpoint (full until then) may take more.
    freed: Notify,
    /// The messages the outbox recorded leased to this sender, once committed.
    handed: mpsc::UnboundedSender<Outgoing>,
}

impl Shared {
    fn load(&self) -> std::sync::MutexGuard<'_, Load> {
        self.load.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn release(&self, endpoint: &str) {
        self.load().release(endpoint);
        self.slots.add_permits(1);
        self.freed.notify_one();
    }
}

impl outbox::Sender for Shared {
    fn take(&self, endpoint: &str, throttle_rate: Option<i64>) -> bool {
        let Ok(slot) = self.slots.try_acquire() else {
            return false;
        };
        if !self.load().take(endpoint, throttle_rate) {
            return false;
        }
        slot.forget();
        true
    }

    fn give_back(&self, endpoint: &str) {
        self.release(endpoint);
    }

    fn hand(&self, messages: Vec<Outgoing>) {
        for m in messages {
            // The loop holds the receiver while it is the store's sender; after that, the message's lease
            // runs out and it is claimed again.
            let _ = self.handed.send(m);
        }
    }

    fn lease_ms(&self) -> i64 {
        LEASE.as_millis() as i64
    }
}

/// Sends webhooks until `shutdown`.
pub(super) async fn send(store: Store, options: WebhookOptions, shutdown: CancellationToken) {
    // Made with the first message: a process whose environments have no endpoint never holds one.
    let mut client: Option<reqwest::Client> = None;
    let schedule = Arc::new(options.schedule);
    let (handed_tx, mut handed_rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        load: Mutex::new(Load::default()),
        slots: Semaphore::new(IN_FLIGHT),
        freed: Notify::new(),
        handed: handed_tx,
    });
    let link: Arc<dyn outbox::Sender> = shared.clone();
    store.set_webhook_sender(&link, true);
    let (done, finished) = mpsc::unbounded_channel::<Attempt>();
    let finisher = tokio::spawn(finish(store.clone(), finished));
    let mut handed: Vec<Outgoing> = Vec::new();
    // Claims are for messages recorded pending (announced), due again, or recorded by other processes:
    // made when woken, on the idle poll, and while pending messages wait for room.
    let (mut claim_now, mut behind) = (true, true);
    while !shutdown.is_cancelled() {
        let woken = store.webhooks_due().notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        // Handed messages first, whatever else the loop is doing: their leases run from their commit.
        while let Ok(m) = handed_rx.try_recv() {
            handed.push(m);
        }
        let mut ready = pair(&store, &shared, std::mem::take(&mut handed), true).await;
        let mut skipped = false;
        if claim_now && shared.slots.available_permits() > 0 {
            let claimed;
            (claimed, skipped) = claim(&store, &shared).await;
            behind = skipped || !claimed.is_empty();
            claim_now = !claimed.is_empty();
            ready.extend(claimed);
        } else if claim_now {
            // No free slot: claimed once a send ends.
            (claim_now, behind) = (false, true);
        }
        if !ready.is_empty() {
            let client = client
                .get_or_insert_with(|| {
                    crate::outbound::webhook_client(options.allow_private_networks)
                })
                .clone();
            for (m, endpoint) in ready {
                let (client, shared, done, schedule) = (
                    client.clone(),
                    shared.clone(),
                    done.clone(),
                    schedule.clone(),
                );
                tokio::spawn(async move {
                    let attempt = attempt(&client, &m, &endpoint, &schedule).await;
                    let _ = done.send(attempt);
                    shared.release(&endpoint.id);
                });
            }
        }
        if claim_now {
            continue;
        }
        tokio::select! {
            _ = handed_rx.recv_many(&mut handed, FINISH_BATCH) => {}
            // New messages recorded pending: claimed at once, unless the last claim found only full
            // endpoints' messages (it walked their backlog for nothing); then at most every 20 ms until a
            // send ends.
            _ = &mut woken => {
                if skipped {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (claim_now, behind) = (true, true);
            }
            _ = tokio::time::sleep(IDLE_POLL) => claim_now = true,
            _ = shutdown.cancelled() => {}
            // A send ended: wait a moment for others, so that the next claim takes several.
            _ = shared.freed.notified(), if behind => {
                tokio::time::sleep(Duration::from_millis(1)).await;
                claim_now = true;
            }
        }
    }
    store.set_webhook_sender(&link, false);
    // Handed over but not sent: given back at once rather than after their lease.
    handed_rx.close();
    while let Ok(m) = handed_rx.try_recv() {
        handed.push(m);
    }
    let held: Vec<&Outgoing> = handed.iter().collect();
    if let Err(e) = store.release_webhook_messages(&held).await {
        tracing::warn!(error = ?e, "giving webhook messages back failed; they are claimed again after their lease");
    }
    drop(done);
    let _ = finisher.await;
}

/// Claims as many messages as the process has free slots for (at most [`CLAIM`]), pairs each with its
/// endpoint and takes its slots ([`pair`]); also answers whether the claim skipped some endpoint (full, or
/// out of tokens).
async fn claim(store: &Store, shared: &Shared) -> (Vec<(Outgoing, Arc<WebhookEndpoint>)>, bool) {
    let busy = shared.load().busy();
    let skipped = !busy.is_empty();
    let busy: Vec<&str> = busy.iter().map(String::as_str).collect();
    let room = shared.slots.available_permits().min(CLAIM);
    let claimed = match store
        .claim_webhook_messages(room as i64, LEASE.as_millis() as i64, &busy)
        .await
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = ?e, "claiming webhook messages failed");
            return (Vec::new(), skipped);
        }
    };
    (pair(store, shared, claimed, false).await, skipped)
}

/// Pairs messages with their endpoints. Messages whose slots are not `taken` yet (claimed) take them now;
/// those beyond an endpoint's share are given back. Messages whose endpoint is gone or disabled fail
/// without a call.
async fn pair(
    store: &Store,
    shared: &Shared,
    messages: Vec<Outgoing>,
    taken: bool,
) -> Vec<(Outgoing, Arc<WebhookEndpoint>)> {
    if messages.is_empty() {
        return Vec::new();
    }
    let mut ids: Vec<&str> = messages.iter().map(|m| m.endpoint_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let endpoints: HashMap<String, Arc<WebhookEndpoint>> =
        match store.webhook_endpoints_by_id(&ids).await {
            Ok(found) => found
                .into_iter()
                .map(|e| (e.id.clone(), Arc::new(e)))
                .collect(),
            Err(e) => {
                tracing::warn!(error = ?e, "reading webhook endpoints failed");
                let held: Vec<&Outgoing> = messages.iter().collect();
                let _ = store.release_webhook_messages(&held).await;
                if taken {
                    messages.iter().for_each(|m| shared.release(&m.endpoint_id));
                }
                return Vec::new();
            }
        };
    let mut out = Vec::with_capacity(messages.len());
    let mut back = Vec::new();
    let mut gone = Vec::new();
    for m in messages {
        match endpoints.get(&m.endpoint_id) {
            Some(e) if !e.disabled => {
                if taken || outbox::Sender::take(shared, &e.id, e.throttle_rate) {
                    out.push((m, e.clone()));
                } else {
                    back.push(m);
                }
            }
            _ => {
                if taken {
                    shared.release(&m.endpoint_id);
                }
                gone.push(m);
            }
        }
    }
    let back_refs: Vec<&Outgoing> = back.iter().collect();
    if let Err(e) = store.release_webhook_messages(&back_refs).await {
        tracing::warn!(error = ?e, "giving webhook messages back failed; they are claimed again after their lease");
    }
    if !gone.is_empty() {
        // The endpoint was deleted or disabled since the message was recorded: it fails without a call.
        let attempts: Vec<Attempt> = gone
            .iter()
            .map(|m| Attempt {
                msg_id: m.id.clone(),
                endpoint_id: m.endpoint_id.clone(),
                environment_id: m.environment_id.clone(),
                url: String::new(),
                response: "endpoint disabled or deleted".into(),
                status_code: 0,
                duration_ms: 0,
                success: false,
                manual: false,
                retry_at: None,
                at: Timestamp::now(),
            })
            .collect();
        if let Err(e) = store.finish_webhook_attempts(&attempts).await {
            tracing::warn!(error = ?e, "failing webhook messages of disabled endpoints failed");
        }
    }
    out
}

/// One attempt to post `m` to `endpoint`.
pub async fn attempt(
    client: &reqwest::Client,
    m: &Outgoing,
    endpoint: &WebhookEndpoint,
    schedule: &[Duration],
) -> Attempt {
    let now = Timestamp::now();
    let started = Instant::now();
    let (success, abort, status_code, response) = post(client, m, endpoint, now).await;
    let tried = m.attempts as usize;
    let retry_at = (!success && !abort)
        .then(|| schedule.get(tried))
        .flatten()
        .map(|wait| Timestamp::now().0 + wait.as_millis() as i64);
    Attempt {
        msg_id: m.id.clone(),
        endpoint_id: m.endpoint_id.clone(),
        environment_id: m.environment_id.clone(),
        url: endpoint.url.clone(),
        response,
        status_code,
        duration_ms: started.elapsed().as_millis() as i64,
        success,
        manual: false,
        retry_at,
        at: now,
    }
}

/// Posts the message: whether it succeeded, whether the receiver asked for no retry
/// (`webhook-delivery: abort-message`), the status code (0 without an answer) and the start of the answer.
async fn post(
    client: &reqwest::Client,
    m: &Outgoing,
    endpoint: &WebhookEndpoint,
    now: Timestamp,
) -> (bool, bool, i64, String) {
    let timestamp = now.0 / 1000;
    let signed = match signature(&endpoint.secrets, &m.id, timestamp, m.body.as_bytes(), now) {
        Ok(s) => s,
        Err(e) => {
            return (
                false,
                true,
                0,
                format!("the endpoint's secret cannot sign: {e}"),
            )
        }
    };
    let timestamp = timestamp.to_string();
    let request = client
        .post(&endpoint.url)
        .header("content-type", "application/json")
        .header("webhook-id", &m.id)
        .header("webhook-timestamp", &timestamp)
        .header("webhook-signature", &signed)
        .header("svix-id", &m.id)
        .header("svix-timestamp", &timestamp)
        .header("svix-signature", &signed)
        .body(m.body.clone());
    match request.send().await {
        Ok(mut answer) => {
            let status = answer.status();
            let abort = answer
                .headers()
                .get("webhook-delivery")
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"abort-message"));
            let mut kept = Vec::new();
            while kept.len() < RESPONSE_KEPT {
                match answer.chunk().await {
                    Ok(Some(chunk)) => kept.extend_from_slice(&chunk),
                    _ => break,
                }
            }
            kept.truncate(RESPONSE_KEPT);
            let text = String::from_utf8_lossy(&kept).into_owned();
            (status.is_success(), abort, i64::from(status.as_u16()), text)
        }
        Err(e) => {
            let why = crate::outbound::refusal(&e).unwrap_or_else(|| {
                if e.is_timeout() {
                    "no answer within 15 s".to_owned()
                } else {
                    format!("{e}")
                }
            });
            (false, false, 0, why)
        }
    }
}

/// Records attempts as they end, in batches.
async fn finish(store: Store, mut finished: mpsc::UnboundedReceiver<Attempt>) {
    let mut batch = Vec::with_capacity(FINISH_BATCH);
    while finished.recv_many(&mut batch, FINISH_BATCH).await > 0 {
        loop {
            match store.finish_webhook_attempts(&batch).await {
                Ok(disabled) => {
                    for d in disabled {
                        tracing::warn!(
                            endpoint = d.id,
                            environment = d.environment_id,
                            "webhook endpoint disabled: it has failed for 5 days without a success"
                        );
                    }
                    break;
                }
                Err(e) => {
                    // Not lost: the messages stay claimed, and are sent again once their lease runs out.
                    tracing::warn!(error = ?e, "recording webhook attempts failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    if store.ping().await.is_err() {
                        break;
                    }
                }
            }
        }
        batch.clear();
    }
}
