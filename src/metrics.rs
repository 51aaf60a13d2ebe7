//! Prometheus metrics: what the process records as it works (the `metrics` crate's global recorder, installed
//! by [`install`] when a router is built) and what `GET /metrics` renders ([`render`]): those, plus the queue's
//! figures read from the database at that moment.
//!
//! Recording costs a registry lookup and an atomic add (a histogram adds a lock-free append, drained into its
//! buckets at each scrape and every [`UPKEEP_EVERY`]); request latencies skip the lookup ([`Route`] keeps
//! their handles). A process without the recorder (`tidings worker`)
//! records nothing.

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::http::Method;
use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Histogram,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::domain::job::Job;
use crate::store::jobs::JobOutcome;
use crate::store::rate_limits::{JobFigures, COUNT_LIMIT};
use crate::store::Store;

/// Latency of every request, by method, route template and status; its `_count` counts the requests.
pub const REQUEST_DURATION: &str = "tidings_http_request_duration_seconds";
/// HTTP connections open now (`server::serve` holds an [`Open`] for each one until it closes or upgrades).
pub const CONNECTIONS_OPEN: &str = "tidings_connections_open";
/// The Inbox's sockets open now (upgraded connections: `api::socket` has each hold an [`Open`]).
pub const SOCKETS_OPEN: &str = "tidings_sockets_open";
pub const TRIGGERS: &str = "tidings_triggers_total";
pub const JOBS_FINISHED: &str = "tidings_jobs_finished_total";
pub const DELIVERIES: &str = "tidings_deliveries_total";
pub const DELIVERY_RETRIES: &str = "tidings_delivery_retries_total";
pub const LEASE_EXPIRIES: &str = "tidings_job_lease_expiries_total";
pub const FANOUT_RECIPIENTS: &str = "tidings_fanout_recipients_total";
pub const RATE_LIMITED: &str = "tidings_rate_limit_rejections_total";

/// Request latency buckets, in seconds.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How often recorded latencies are folded into their buckets between scrapes (bounds their memory).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs the recorder once per process; `None` if another recorder was installed first.
pub fn install() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(REQUEST_DURATION.into()), LATENCY_BUCKETS)
                .and_then(PrometheusBuilder::install_recorder)
                .map_err(|e| tracing::warn!(error = %e, "metrics are off: no recorder"))
                .ok()?;
            describe();
            let upkeep = handle.clone();
            let spawned = std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "metrics upkeep thread not started; scrapes still drain");
            }
            Some(handle)
        })
        .as_ref()
}

fn describe() {
    describe_histogram!(
        REQUEST_DURATION,
        metrics::Unit::Seconds,
        "HTTP requests by method, route template and status: latency, and their count (_count)"
    );
    describe_gauge!(
        CONNECTIONS_OPEN,
        "HTTP connections open (a connection upgraded to a socket leaves it)"
    );
    describe_gauge!(SOCKETS_OPEN, "Inbox sockets open (upgraded connections)");
    describe_counter!(
        TRIGGERS,
        "Trigger events answered, by status (bulk counts each event)"
    );
    describe_counter!(
        FANOUT_RECIPIENTS,
        "Notifications written by topic and broadcast fan-outs"
    );
    describe_counter!(JOBS_FINISHED, "Jobs the workers finished, by final status");
    describe_counter!(
        DELIVERIES,
        "Channel deliveries (jobs of channel steps) by provider and outcome"
    );
    describe_counter!(
        DELIVERY_RETRIES,
        "Deliveries queued again for a retry or failover, by provider"
    );
    describe_counter!(
        LEASE_EXPIRIES,
        "Jobs claimed again after their worker's lease expired"
    );
    describe_counter!(
        RATE_LIMITED,
        "Requests refused with 429, by rate-limit category"
    );
}

/// The methods a request is labelled with (anything else is `other`).
const METHODS: [&str; 8] = [
    "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "other",
];

/// The statuses a request is labelled with: those Tidings answers, else the status's class.
const STATUSES: [&str; 27] = [
    "200", "201", "204", "301", "302", "304", "400", "401", "402", "403", "404", "405", "408",
    "409", "413", "415", "422", "429", "500", "502", "503", "504", "1xx", "2xx", "3xx", "4xx",
    "5xx",
];

/// One route's latency histograms, one per method and status it answered, each looked up in the recorder's
/// registry once: recording a request then costs two array indexes, an atomic load and the histogram's
/// lock-free append (no label vector built, hashed and looked up under the registry's lock per request).
/// The handles of a route are allocated when it answers its first request.
#[derive(Debug)]
pub struct Route {
    template: &'static str,
    histograms: OnceLock<Box<[OnceLock<Histogram>]>>,
}

impl Route {
    pub const fn new(template: &'static str) -> Self {
        Self {
            template,
            histograms: OnceLock::new(),
        }
    }

    /// The route's template (`/v2/subscribers/{subscriberId}`).
    pub fn template(&self) -> &'static str {
        self.template
    }

    /// One answered request. The recorder must be installed before the first ([`install`]: the router
    /// does it when it is built), else the handles are no-ops for good.
    pub fn request(&self, method: &Method, status: u16, elapsed: Duration) {
        let m = method_index(method);
        let s = status_index(status);
        let histograms = self.histograms.get_or_init(|| {
            (0..METHODS.len() * STATUSES.len())
                .map(|_| OnceLock::new())
                .collect()
        });
        histograms[m * STATUSES.len() + s]
            .get_or_init(|| {
                histogram!(REQUEST_DURATION, "method" => METHODS[m], "route" => self.template,
                    "status" => STATUSES[s])
            })
            .record(elapsed.as_secs_f64());
    }
}

fn method_index(method: &Method) -> usize {
    match *method {
        Method::GET => 0,
        Method::POST => 1,
        Method::PUT => 2,
        Method::PATCH => 3,
        Method::DELETE => 4,
        Method::HEAD => 5,
        Method::OPTIONS => 6,
        _ => 7,
    }
}

/// The index in [`STATUSES`] of the status's label.
fn status_index(status: u16) -> usize {
    let exact = match status {
        200 => Some(0),
        201 => Some(1),
        204 => Some(2),
        301 => Some(3),
        302 => Some(4),
        304 => Some(5),
        400 => Some(6),
        401 => Some(7),
        402 => Some(8),
        403 => Some(9),
        404 => Some(10),
        405 => Some(11),
        408 => Some(12),
        409 => Some(13),
        413 => Some(14),
        415 => Some(15),
        422 => Some(16),
        429 => Some(17),
        500 => Some(18),
        502 => Some(19),
        503 => Some(20),
        504 => Some(21),
        _ => None,
    };
    exact.unwrap_or(match status / 100 {
        1 => 22,
        2 => 23,
        3 => 24,
        4 => 25,
        _ => 26,
    })
}

/// `n` trigger events answered with `status` (`processed`, `trigger_not_active`, …).
pub fn triggers(status: &'static str, n: u64) {
    counter!(TRIGGERS, "status" => status).increment(n);
}

/// A job a worker finished (or queued again), as stored.
pub fn job_finished(job: &Job, outcome: &JobOutcome) {
    FinishedJob::of(job, outcome).count();
}

/// What [`job_finished`] counts of a job and its outcome, taken before they are handed on.
pub struct FinishedJob {
    /// The provider, for a delivery.
    provider: Option<String>,
    status: &'static str,
    retried: bool,
}

impl FinishedJob {
    pub fn of(job: &Job, outcome: &JobOutcome) -> Self {
        let is_delivery = job.step.step_type.delivery_channel().is_some();
        Self {
            provider: is_delivery.then(|| {
                outcome
                    .provider_id
                    .clone()
                    .unwrap_or_else(|| job.provider_id.clone())
            }),
            status: outcome.status.as_str(),
            retried: outcome.retry.is_some(),
        }
    }

    pub fn count(self) {
        if self.retried {
            if let Some(provider) = self.provider {
                counter!(DELIVERY_RETRIES, "provider" => provider).increment(1);
            }
            return;
        }
        counter!(JOBS_FINISHED, "status" => self.status).increment(1);
        if let Some(provider) = self.provider {
            counter!(DELIVERIES, "provider" => provider, "outcome" => self.status).increment(1);
        }
    }
}

/// `n` jobs claimed again after their lease expired.
pub fn lease_expiries(n: usize) {
    if n > 0 {
        counter!(LEASE_EXPIRIES).increment(n as u64);
    }
}

/// `n` recipients of a fan-out reached (their notifications written).
pub fn fanout_recipients(n: usize) {
    if n > 0 {
        counter!(FANOUT_RECIPIENTS).increment(n as u64);
    }
}

/// A request refused by the rate limit of `category`.
pub fn rate_limited(category: &'static str) {
    counter!(RATE_LIMITED, "category" => category).increment(1);
}

/// Counts one open thing in a gauge ([`CONNECTIONS_OPEN`], [`SOCKETS_OPEN`]) for as long as it lives.
#[derive(Debug)]
pub struct Open(&'static str);

impl Open {
    pub fn new(gauge: &'static str) -> Self {
        gauge!(gauge).increment(1.0);
        Self(gauge)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        gauge!(self.0).decrement(1.0);
    }
}

/// How long the queue's figures are reused: `/metrics` reads the database at most once in that time,
/// whatever the scrape rate.
pub const QUEUE_FIGURES_TTL: Duration = Duration::from_secs(1);

/// The queue's figures of the last read, reused for [`QUEUE_FIGURES_TTL`] (a failed read too); concurrent
/// scrapes wait for one read and share it.
#[derive(Default)]
pub struct QueueFigures(tokio::sync::Mutex<Option<(Instant, Option<JobFigures>)>>);

impl QueueFigures {
    async fn get(&self, store: &Store) -> Option<JobFigures> {
        let mut last = self.0.lock().await;
        if let Some((at, figures)) = *last {
            if at.elapsed() < QUEUE_FIGURES_TTL {
                return figures;
            }
        }
        let figures = store
            .job_figures()
            .await
            .map_err(|e| tracing::warn!(error = ?e, "metrics: reading the queue's figures failed"))
            .ok();
        *last = Some((Instant::now(), figures));
        figures
    }
}

/// The Prometheus text of everything recorded, followed by the queue's figures read from `store` at most
/// [`QUEUE_FIGURES_TTL`] ago (an error reading them leaves them out and says so in a comment).
pub async fn render(store: &Store, figures: &QueueFigures) -> String {
    let mut text = install().map(|h| h.render()).unwrap_or_default();
    match figures.get(store).await {
        Some(jobs) => {
            let lag = jobs.oldest_due.map_or(0.0, |at| {
                (crate::domain::Timestamp::now().0 - at).max(0) as f64 / 1000.0
            });
            let _ = write!(
                text,
                "# HELP tidings_jobs Jobs by state, read from the database (counts stop at {COUNT_LIMIT}): \
                 queued (due), scheduled (queued to run later), running (leased)\n\
                 # TYPE tidings_jobs gauge\n\
                 tidings_jobs{{state=\"queued\"}} {}\n\
                 tidings_jobs{{state=\"scheduled\"}} {}\n\
                 tidings_jobs{{state=\"running\"}} {}\n\
                 # HELP tidings_queue_depth Due jobs waiting for a worker\n\
                 # TYPE tidings_queue_depth gauge\n\
                 tidings_queue_depth {}\n\
                 # HELP tidings_oldest_due_job_lag_seconds How long the oldest due job has waited past its time\n\
                 # TYPE tidings_oldest_due_job_lag_seconds gauge\n\
                 tidings_oldest_due_job_lag_seconds {lag}\n",
                jobs.due, jobs.scheduled, jobs.running, jobs.due
            );
        }
        None => text.push_str("# tidings_jobs: the database did not answer\n"),
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_methods_are_labelled_from_fixed_tables() {
        let label = |status| STATUSES[status_index(status)];
        assert_eq!(label(200), "200");
        assert_eq!(label(201), "201");
        assert_eq!(label(429), "429");
        assert_eq!(label(504), "504");
        assert_eq!(label(418), "4xx");
        assert_eq!(label(206), "2xx");
        assert_eq!(label(101), "1xx");
        assert_eq!(label(599), "5xx");
        // Every exact label is the status it is the index of.
        for (i, l) in STATUSES.iter().enumerate().take(22) {
            assert_eq!(status_index(l.parse().unwrap()), i);
        }
        assert_eq!(METHODS[method_index(&Method::DELETE)], "DELETE");
        assert_eq!(METHODS[method_index(&Method::TRACE)], "other");
    }
}
