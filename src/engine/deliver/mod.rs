//! Channel steps (email, SMS, chat, push), in phases, each a function with a typed input and output:
//!
//! 1. **resolve** the job's subscriber and overrides ([`Resolved`]);
//! 2. **render** the step's controls ([`render::render`] → [`Rendered`]);
//! 3. **choose** the integrations to try, in order ([`choose::candidates`]), fixed in the [`State`] at the
//!    first attempt, and fetch the attachments once ([`attachments`]);
//! 4. **send** through each integration in turn ([`attempt`]: provider, credentials, destinations from
//!    [`targets`], one [`attempt::Attempt`] each) until one delivers, one must be retried, or none is left;
//! 5. **record** how the run ended ([`Ending`]) as the job's outcome ([`record`]): its execution details,
//!    its message, and for a retry when it runs again with which state.
//!
//! Retries are durable: a transient failure puts the job back in the queue (`JobOutcome::retry`) with its
//! delivery state — which integration, which attempt, which destinations already received the message —
//! so no worker sleeps on a backoff and a crash loses nothing.

mod attachments;
mod attempt;
mod choose;
mod render;
mod retry;
mod targets;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::steps::{Chain, Runner};
use super::{detail, finished};
use crate::domain::job::{
    DetailStatus, ExecutionDetail, Job, JobStatus, Message, MessageDelivery, MessageStatus,
    Notification,
};
use crate::domain::subscriber::Subscriber;
use crate::domain::{Channel, EnvironmentId, Timestamp};
use crate::error::Result;
use crate::providers::Attachment;
use crate::store::jobs::{JobOutcome, Requeue};

use render::Rendered;

/// Retries of one integration after its first attempt, before failing over.
pub const MAX_RETRIES: u32 = 3;

/// Where a channel job stands between attempts (stored as the job's `delivery`: its JSON shape is read back
/// by jobs queued before an upgrade, so fields are only ever added, with a default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct State {
    /// The candidate integrations' ids, in the order they are tried (fixed at the first attempt).
    integrations: Vec<String>,
    /// Index into `integrations` of the one being tried.
    index: usize,
    /// Attempts already made on it.
    attempt: u32,
    /// Destinations that already received the message (never sent to twice).
    done: Vec<String>,
    /// Failed attempts to fetch the attachments.
    #[serde(default)]
    fetches: u32,
}

impl State {
    /// The state a job's earlier attempts left (`delivery`); the default before its first one (or when it
    /// cannot be read).
    fn resume(delivery: Option<&Value>) -> Self {
        delivery
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }
}

/// The channel job being run: what every phase reads.
#[derive(Clone, Copy)]
struct ChannelJob<'a> {
    job: &'a Job,
    n: &'a Notification,
    channel: Channel,
}

impl<'a> ChannelJob<'a> {
    fn new(job: &'a Job, n: &'a Notification) -> Self {
        let channel = job
            .step
            .step_type
            .delivery_channel()
            .unwrap_or(Channel::Push);
        Self { job, n, channel }
    }
}

/// The resolve phase's output: the job with its subscriber and the trigger's overrides.
struct Resolved<'a> {
    step: ChannelJob<'a>,
    env: EnvironmentId,
    subscriber: &'a Subscriber,
    /// The trigger's overrides (`null` when none).
    overrides: Value,
}

/// The resolve phase: a job whose subscriber was deleted since the trigger cannot be delivered.
fn resolve<'a>(
    step: ChannelJob<'a>,
    subscriber: Option<&'a Subscriber>,
) -> std::result::Result<Resolved<'a>, Undelivered> {
    let job = step.job;
    let Some(subscriber) = subscriber else {
        return Err(Undelivered {
            error_id: "subscriber_missing",
            text: format!("Subscriber {} no longer exists", job.subscriber_id),
        });
    };
    Ok(Resolved {
        step,
        env: job.environment_id.clone(),
        subscriber,
        overrides: job.overrides.clone().unwrap_or(Value::Null),
    })
}

/// What is sent: the rendered step, its attachments (fetched once for all attempts of a run) and an
/// email's one-click unsubscribe link (the template variable `unsubscribeUrl`).
struct Outgoing {
    rendered: Rendered,
    attachments: Vec<Attachment>,
    unsubscribe_url: Option<String>,
}

/// Why a channel step ends without delivering (or why one integration could not deliver).
#[derive(Debug, Clone, PartialEq)]
struct Undelivered {
    error_id: &'static str,
    text: String,
}

/// How a run of a channel step ends.
#[derive(Debug)]
enum Ending {
    /// Delivered through an integration of `provider_id`; `record` is the message's delivery record.
    Sent {
        provider_id: String,
        record: MessageDelivery,
    },
    /// Back to the queue, to run again after `wait` from `state`. `provider_id` names the provider that
    /// just failed (none when the attachments could not be fetched).
    Retry {
        provider_id: Option<String>,
        wait: Duration,
        state: State,
    },
    /// Not delivered: `provider_id` last tried it; `delivered_at` is set when some destinations were
    /// served before the run gave up.
    Failed {
        why: Undelivered,
        provider_id: Option<String>,
        delivered_at: Option<Timestamp>,
    },
}

/// A run of a channel step: its attempts' execution details, in order, what it rendered, and how it ended.
struct Run {
    details: Vec<ExecutionDetail>,
    rendered: Option<Rendered>,
    ending: Ending,
}

impl Run {
    /// A run that fails before any attempt.
    fn failed(why: Undelivered, rendered: Option<Rendered>) -> Self {
        Run {
            details: Vec::new(),
            rendered,
            ending: Ending::Failed {
                why,
                provider_id: None,
                delivered_at: None,
            },
        }
    }
}

impl Runner {
    /// Runs an email, SMS, chat or push step.
    pub(super) async fn channel(
        &self,
        job: &Job,
        n: &Notification,
        subscriber: Option<&Subscriber>,
        vars: &Value,
    ) -> Result<(JobOutcome, Chain)> {
        let step = ChannelJob::new(job, n);
        let run = self.run_channel(step, subscriber, vars).await?;
        record(step, run)
    }

    /// The phases up to the send: resolve, render, choose, fetch the attachments; then `send`.
    async fn run_channel(
        &self,
        step: ChannelJob<'_>,
        subscriber: Option<&Subscriber>,
        vars: &Value,
    ) -> Result<Run> {
        let r = match resolve(step, subscriber) {
            Ok(r) => r,
            Err(why) => return Ok(Run::failed(why, None)),
        };
        let controls = &step.job.step.control_values;
        let rendered = match render::render(&self.renderer, controls, step.channel, vars) {
            Ok(c) => c,
            Err(text) => {
                let why = Undelivered {
                    error_id: "render_failed",
                    text,
                };
                return Ok(Run::failed(why, None));
            }
        };
        let mut state = State::resume(step.job.delivery.as_ref());
        let active = self.active_integrations(&r).await?;
        let candidates = match choose::candidates(&r, &state, &active) {
            Ok(c) => c,
            Err(why) => return Ok(Run::failed(why, Some(rendered))),
        };
        state.integrations = choose::ids(&candidates);
        let attachments = if step.channel == Channel::Email {
            let list = r.overrides.get("email").and_then(|e| e.get("attachments"));
            match self.attachments(list).await {
                Ok(a) => a,
                Err(e) => {
                    let backoff = self.backoff();
                    return Ok(attachments::fetch_failed(
                        step.job, state, e, backoff, rendered,
                    ));
                }
            }
        } else {
            Vec::new()
        };
        let out = Outgoing {
            rendered,
            attachments,
            // The link the templates saw (see `Runner::unsubscribe_url`): one value for body and headers.
            unsubscribe_url: vars
                .get("unsubscribeUrl")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        self.send(&r, &candidates, state, out).await
    }
}

/// The record phase: turns how a run ended into the job's outcome — its details (a failure's verdict last),
/// its message (`sent` or `error`), for a retry when it runs again with which delivery state — and what
/// follows in the chain.
fn record(step: ChannelJob<'_>, run: Run) -> Result<(JobOutcome, Chain)> {
    let Run {
        mut details,
        rendered,
        ending,
    } = run;
    let job = step.job;
    match ending {
        Ending::Sent {
            provider_id,
            record,
        } => {
            let mut outcome = finished(JobStatus::Completed, details);
            outcome.provider_id = Some(provider_id.clone());
            outcome.message = Some(message(
                step,
                rendered.as_ref(),
                MessageStatus::Sent,
                provider_id,
                record,
            ));
            Ok((outcome, Chain::Continue))
        }
        Ending::Retry {
            provider_id,
            wait,
            state,
        } => {
            let mut outcome = finished(JobStatus::Queued, details);
            outcome.provider_id = provider_id;
            outcome.retry = Some(Requeue {
                run_at: Timestamp::now().0 + wait.as_millis() as i64,
                delivery: serde_json::to_value(&state)?,
            });
            Ok((outcome, Chain::Stop))
        }
        Ending::Failed {
            why,
            provider_id,
            delivered_at,
        } => {
            // The attempts' details come first, the final verdict last.
            let mut d = detail(
                job,
                DetailStatus::Failed,
                source_of(why.error_id),
                why.text.clone(),
                None,
            );
            d.is_retry = false;
            details.push(d);
            let mut outcome = finished(JobStatus::Failed, details);
            // The job names the provider that last tried it, as its execution details do.
            outcome.provider_id = provider_id.clone();
            let delivery = MessageDelivery {
                error_id: Some(why.error_id.to_owned()),
                error_text: Some(why.text),
                delivered_at,
                ..Default::default()
            };
            let provider_id = provider_id.unwrap_or_else(|| job.provider_id.clone());
            let m = message(
                step,
                rendered.as_ref(),
                MessageStatus::Error,
                provider_id,
                delivery,
            );
            outcome.message = Some(m);
            Ok((outcome, Chain::after_failure(job)))
        }
    }
}

/// The message record of a run.
fn message(
    step: ChannelJob<'_>,
    content: Option<&Rendered>,
    status: MessageStatus,
    provider_id: String,
    delivery: MessageDelivery,
) -> Message {
    let ChannelJob { job, n, channel } = step;
    Message {
        subject: content.and_then(|c| c.subject.clone()),
        content: content.map(|c| c.body.clone()).unwrap_or_default(),
        status,
        provider_id,
        delivery,
        ..Message::of_job(job, n, channel)
    }
}

/// The execution-detail source for an error id.
fn source_of(error_id: &str) -> &'static str {
    match error_id {
        "render_failed" | "attachment_failed" => "Payload",
        "subscriber_missing" => "Internal",
        _ => "Credentials",
    }
}

#[cfg(test)]
mod fixtures;

#[cfg(test)]
mod tests {
    use super::fixtures::{notification, step_job, subscriber};
    use super::*;
    use serde_json::json;

    fn run(details: Vec<ExecutionDetail>, ending: Ending) -> Run {
        Run {
            details,
            rendered: Some(Rendered {
                subject: Some("Hi".into()),
                body: "<p>Hello</p>".into(),
                text: Some("Hello".into()),
            }),
            ending,
        }
    }

    #[test]
    fn the_state_keeps_its_json_shape() {
        // Jobs queued by an older binary carry no `fetches`.
        let old =
            json!({"integrations": ["i1", ""], "index": 1, "attempt": 2, "done": ["email:a@b.c"]});
        let state = State::resume(Some(&old));
        assert_eq!(state.integrations, ["i1", ""]);
        assert_eq!((state.index, state.attempt, state.fetches), (1, 2, 0));
        assert_eq!(
            serde_json::to_value(&state).unwrap(),
            json!({"integrations": ["i1", ""], "index": 1, "attempt": 2, "done": ["email:a@b.c"],
                "fetches": 0})
        );
        // Unreadable or absent state: the first attempt.
        assert_eq!(State::resume(Some(&json!("x"))), State::default());
        assert_eq!(State::resume(None), State::default());
    }

    #[test]
    fn a_deleted_subscriber_is_not_resolved() {
        let job = step_job("email", json!({}), None);
        let n = notification();
        let step = ChannelJob::new(&job, &n);
        assert_eq!(step.channel, Channel::Email);
        let why = resolve(step, None).err().unwrap();
        assert_eq!(why.error_id, "subscriber_missing");
        assert_eq!(why.text, "Subscriber sub-1 no longer exists");
        let s = subscriber();
        let r = resolve(step, Some(&s)).ok().unwrap();
        assert_eq!(r.overrides, Value::Null);
        assert_eq!(r.env.as_str(), "env-1");
    }

    #[test]
    fn a_failure_records_its_verdict_last_and_an_error_message() {
        let job = step_job("sms", json!({}), None);
        let n = notification();
        let step = ChannelJob::new(&job, &n);
        let attempt = detail(&job, DetailStatus::Failed, "Credentials", "boom", None);
        let ending = Ending::Failed {
            why: Undelivered {
                error_id: "render_failed",
                text: "bad body".into(),
            },
            provider_id: None,
            delivered_at: Some(Timestamp(7)),
        };
        let (outcome, chain) = record(step, run(vec![attempt], ending)).unwrap();
        assert!(matches!(chain, Chain::Continue), "no shouldStopOnFail");
        assert_eq!(outcome.status, JobStatus::Failed);
        assert_eq!(outcome.provider_id, None);
        assert!(outcome.retry.is_none());
        let details: Vec<_> = outcome
            .details
            .iter()
            .map(|d| {
                (
                    d.status.as_str(),
                    d.source.as_str(),
                    d.detail.as_str(),
                    d.is_retry,
                )
            })
            .collect();
        assert_eq!(
            details,
            [
                ("Failed", "Credentials", "boom", false),
                ("Failed", "Payload", "bad body", false)
            ]
        );
        let m = outcome.message.unwrap();
        assert_eq!((m.status.as_str(), m.channel.as_str()), ("error", "sms"));
        // No provider tried it: the message names the job's.
        assert_eq!(m.provider_id, job.provider_id);
        assert_eq!(m.delivery.error_id.as_deref(), Some("render_failed"));
        assert_eq!(m.delivery.error_text.as_deref(), Some("bad body"));
        assert_eq!(m.delivery.delivered_at, Some(Timestamp(7)));
        assert_eq!(m.subject.as_deref(), Some("Hi"));
    }

    #[test]
    fn a_retry_goes_back_to_the_queue_with_its_state() {
        let job = step_job("email", json!({}), None);
        let n = notification();
        let step = ChannelJob::new(&job, &n);
        let state = State {
            integrations: vec!["i1".into(), "i2".into()],
            index: 1,
            attempt: 1,
            done: vec![],
            fetches: 0,
        };
        let ending = Ending::Retry {
            provider_id: Some("sendgrid".into()),
            wait: Duration::from_secs(60),
            state,
        };
        let before = Timestamp::now().0;
        let (outcome, chain) = record(step, run(vec![], ending)).unwrap();
        assert!(matches!(chain, Chain::Stop));
        assert_eq!(outcome.status, JobStatus::Queued);
        assert_eq!(outcome.provider_id.as_deref(), Some("sendgrid"));
        assert!(outcome.message.is_none());
        let retry = outcome.retry.unwrap();
        assert!(retry.run_at >= before + 60_000 && retry.run_at < before + 70_000);
        assert_eq!(
            retry.delivery,
            json!({"integrations": ["i1", "i2"], "index": 1, "attempt": 1, "done": [], "fetches": 0})
        );
    }

    #[test]
    fn a_delivery_records_a_sent_message() {
        let job = step_job("email", json!({}), None);
        let n = notification();
        let step = ChannelJob::new(&job, &n);
        let ending = Ending::Sent {
            provider_id: "sendgrid".into(),
            record: MessageDelivery {
                email: Some("a@b.c".into()),
                ..Default::default()
            },
        };
        let (outcome, chain) = record(step, run(vec![], ending)).unwrap();
        assert!(matches!(chain, Chain::Continue));
        assert_eq!(outcome.status, JobStatus::Completed);
        assert_eq!(outcome.provider_id.as_deref(), Some("sendgrid"));
        let m = outcome.message.unwrap();
        assert_eq!(
            (
                m.status.as_str(),
                m.provider_id.as_str(),
                m.content.as_str()
            ),
            ("sent", "sendgrid", "<p>Hello</p>")
        );
        assert_eq!(m.delivery.email.as_deref(), Some("a@b.c"));
        assert_eq!(m.workflow_identifier, n.workflow_identifier);
    }
}
