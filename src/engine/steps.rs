//! Step executors: what each step type does when its job runs, and which job comes next.

use serde_json::{json, Map, Value};

use super::{detail, finished, job_for_step};
use crate::config::WireProfile;
use crate::domain::filters::{passes, StepFilter};
use crate::domain::job::{DetailStatus, Job, JobStatus, Message, Notification};
use crate::domain::preference::{Effective, Source, SubscriberPreference, WorkflowDefaults};
use crate::domain::subscriber::Subscriber;
use crate::domain::unsubscribe::UnsubscribeToken;
use crate::domain::workflow::{StepType, Workflow};
use crate::domain::{skip, Channel, EnvironmentId, SubscriberRef, Timestamp};
use crate::error::Result;
use crate::render::inputs::{
    context_values, environment_values, subscriber_values, template_variables, workflow_values,
    TemplateInputs,
};
use crate::render::{sanitization_disabled, sanitize_in_app, Renderer};
use crate::store::jobs::JobOutcome;
use crate::store::Store;

/// Attempts before a job that keeps failing on infrastructure errors is given up.
const MAX_ATTEMPTS: i64 = 5;

pub struct Runner {
    pub(super) store: Store,
    pub(super) renderer: Renderer,
    pub(super) http: reqwest::Client,
    pub(super) profile: WireProfile,
    /// First backoff of a provider retry (doubled on each further retry).
    pub(super) retry_base: std::time::Duration,
    /// Environment names by id (for `env.name`).
    env_names: std::sync::Mutex<std::collections::HashMap<EnvironmentId, String>>,
    /// `TIDINGS_PUBLIC_URL`: the base of emails' unsubscribe links (none without it).
    public_url: Option<String>,
}

/// What a worker read for its whole batch, handed to each job so that it need not read it again.
#[derive(Debug, Default, Clone, Copy)]
pub struct Prefetched<'a> {
    /// The job's notification; `None`: not read with the batch (the job reads it).
    pub notification: Option<&'a Notification>,
    /// The job's subscriber: `Some(None)` when the batch's read found none (deleted); `None` when the
    /// batch's subscribers were not read (the job reads its own).
    pub subscriber: Option<Option<&'a Subscriber>>,
    /// The subscriber's preferences (global, and for the job's workflow) when the job is a channel step;
    /// `None` when the batch did not read them (the job reads its own).
    pub preferences: Option<&'a [SubscriberPreference]>,
}

/// What a step decided about the rest of the chain.
pub(super) enum Chain {
    Continue,
    Stop,
}

impl Chain {
    /// What follows a failed step: the chain stops only when the step says `shouldStopOnFail`.
    pub(super) fn after_failure(job: &Job) -> Self {
        if job.step.should_stop_on_fail {
            Chain::Stop
        } else {
            Chain::Continue
        }
    }
}

impl Runner {
    /// The runner of a process's workers, as `options` set them.
    pub fn new(store: Store, options: &super::WorkerOptions) -> Self {
        Self {
            store,
            renderer: Renderer::default(),
            http: crate::outbound::client(options.allow_private_networks),
            profile: options.profile,
            retry_base: options.retry_base,
            env_names: Default::default(),
            public_url: options.public_url.clone(),
        }
    }

    /// Runs one claimed job and returns what completes it. On an infrastructure error the job is put back
    /// with backoff (or, after the last attempt, completed as failed) and `None` is returned.
    /// `prefetched` holds what the caller read with the batch (the rest is read here).
    pub async fn run(
        &self,
        job: &Job,
        worker: &str,
        prefetched: Prefetched<'_>,
    ) -> Option<JobOutcome> {
        match self.execute(job, prefetched).await {
            Ok(outcome) => {
                if outcome.status == JobStatus::Failed {
                    let why = outcome
                        .details
                        .iter()
                        .rev()
                        .find(|d| d.status == DetailStatus::Failed);
                    tracing::warn!(
                        env = %job.environment_id,
                        notification = %job.notification_id,
                        job = %job.id,
                        step = %job.step.step_id,
                        detail = why.map_or("", |d| d.detail.as_str()),
                        "step failed"
                    );
                }
                Some(outcome)
            }
            Err(e) => {
                tracing::warn!(
                    env = %job.environment_id,
                    notification = %job.notification_id,
                    job = %job.id,
                    step = %job.step.step_id,
                    attempt = job.attempts,
                    error = ?e,
                    "job failed"
                );
                if job.attempts >= MAX_ATTEMPTS {
                    let text = format!("Gave up after {MAX_ATTEMPTS} attempts");
                    let mut outcome = finished(
                        JobStatus::Failed,
                        vec![detail(job, DetailStatus::Failed, "Internal", text, None)],
                    );
                    // The chain cannot go on without this step.
                    outcome.rest = Some(JobStatus::Canceled);
                    return Some(outcome);
                }
                // Exponential backoff with jitter: 1 s, 2 s, 4 s, … ± 25 %.
                let base = 1000i64 << (job.attempts.clamp(1, 10) - 1);
                let jitter = (rand::random::<f64>() - 0.5) * 0.5 * base as f64;
                let at = Timestamp::now().0 + base + jitter as i64;
                if let Err(e) = self.store.retry_job(job, worker, at).await {
                    tracing::warn!(
                        env = %job.environment_id,
                        notification = %job.notification_id,
                        job = %job.id,
                        step = %job.step.step_id,
                        error = ?e,
                        "rescheduling failed; the lease will expire"
                    );
                }
                None
            }
        }
    }

    async fn execute(&self, job: &Job, prefetched: Prefetched<'_>) -> Result<JobOutcome> {
        let env = job.environment_id.clone();
        let fetched;
        let notification = match prefetched.notification {
            Some(n) => Some(n),
            None => {
                fetched = self
                    .store
                    .get_notification(&env, &job.notification_id)
                    .await?;
                fetched.as_ref()
            }
        };
        let Some(notification) = notification else {
            let d = detail(
                job,
                DetailStatus::Failed,
                "Internal",
                "The notification of this job no longer exists",
                None,
            );
            return Ok(finished(JobStatus::Failed, vec![d]));
        };
        let fetched_subscriber;
        let subscriber = match prefetched.subscriber {
            Some(s) => s,
            None => {
                fetched_subscriber = self.store.get_subscriber(&env, &job.subscriber_id).await?;
                fetched_subscriber.as_ref()
            }
        };
        // The job's own record: one deleted since the trigger is gone, whoever has its subscriberId now.
        let subscriber = subscriber.filter(|s| s.id == job.subscriber_ref);
        if let Some(outcome) = self
            .preferred(job, notification, subscriber, prefetched.preferences)
            .await?
        {
            return Ok(outcome);
        }
        let subscriber_json = subscriber.map(subscriber_values).unwrap_or(Value::Null);

        let filters: Vec<StepFilter> = job
            .step
            .filters
            .iter()
            .filter_map(|f| serde_json::from_value(f.clone()).ok())
            .collect();
        if !passes(&filters, &subscriber_json, &job.payload) {
            let d = detail(
                job,
                DetailStatus::Success,
                "Internal",
                "Step skipped: its filters did not match",
                None,
            );
            let mut outcome = finished(JobStatus::Skipped, vec![d]);
            self.chain(&mut outcome, Chain::Continue, job, notification)
                .await?;
            return Ok(outcome);
        }

        let vars = self
            .variables(
                job,
                notification,
                subscriber_json,
                subscriber.map(|s| &s.id),
                &env,
            )
            .await?;
        if !job.step.issues.controls.contains_key("skip") {
            if let Some(outcome) = self.condition(job, notification, &vars).await? {
                return Ok(outcome);
            }
        }

        if let Some(outcome) = self.issues(job, notification).await? {
            return Ok(outcome);
        }

        let (mut outcome, chain) = self.act(job, notification, subscriber, &vars, &env).await?;
        self.chain(&mut outcome, chain, job, notification).await?;
        Ok(outcome)
    }

    /// A step saved with issues (as Novu keeps such workflows): `None` when it has none, else the failed
    /// outcome saying why instead of failing to render.
    async fn issues(&self, job: &Job, notification: &Notification) -> Result<Option<JobOutcome>> {
        if job.step.issues.is_empty() {
            return Ok(None);
        }
        let d = detail(
            job,
            DetailStatus::Failed,
            "Internal",
            format!(
                "The step cannot run: its controls have issues ({}). Fix the workflow and trigger again",
                job.step.issues.summary()
            ),
            None,
        );
        let chain = Chain::after_failure(job);
        let mut outcome = finished(JobStatus::Failed, vec![d]);
        self.chain(&mut outcome, chain, job, notification).await?;
        Ok(Some(outcome))
    }

    /// What the step itself does, by its type; the chain goes on after it or stops.
    async fn act(
        &self,
        job: &Job,
        notification: &Notification,
        subscriber: Option<&Subscriber>,
        vars: &Value,
        env: &EnvironmentId,
    ) -> Result<(JobOutcome, Chain)> {
        Ok(match job.step.step_type {
            StepType::InApp => self.in_app(job, notification, vars)?,
            StepType::Delay => {
                let d = detail(
                    job,
                    DetailStatus::Success,
                    "Internal",
                    "Delay finished",
                    None,
                );
                (finished(JobStatus::Completed, vec![d]), Chain::Continue)
            }
            StepType::Digest => {
                let count = job
                    .digest
                    .as_ref()
                    .and_then(|d| d.get("events"))
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let d = detail(
                    job,
                    DetailStatus::Success,
                    "Internal",
                    format!("Digest window closed with {count} event(s)"),
                    None,
                );
                (finished(JobStatus::Completed, vec![d]), Chain::Continue)
            }
            StepType::Throttle => self.throttle(job).await?,
            StepType::Custom => {
                let d = detail(
                    job,
                    DetailStatus::Success,
                    "Internal",
                    "Custom step: nothing runs on the server",
                    None,
                );
                (finished(JobStatus::Completed, vec![d]), Chain::Continue)
            }
            StepType::Email | StepType::Sms | StepType::Chat | StepType::Push => {
                self.channel(job, notification, subscriber, vars).await?
            }
            StepType::HttpRequest => self.http_request(job, env, vars).await?,
        })
    }

    /// The subscriber's preferences (`domain::preference`), decided when the step runs: `None` when the
    /// step runs (not a channel step, a critical workflow, the channel on, or no subscriber: delivery says
    /// so), else the `skipped` outcome naming the preference, and the chain goes on.
    async fn preferred(
        &self,
        job: &Job,
        notification: &Notification,
        subscriber: Option<&Subscriber>,
        prefetched: Option<&[SubscriberPreference]>,
    ) -> Result<Option<JobOutcome>> {
        let (Some(channel), Some(subscriber)) = (job.step.step_type.channel(), subscriber) else {
            return Ok(None);
        };
        if notification.critical {
            return Ok(None);
        }
        let env = job.environment_id.clone();
        let read;
        let levels = match prefetched {
            Some(levels) => levels,
            None => {
                read = self
                    .store
                    .preferences_for(
                        &env,
                        std::slice::from_ref(&subscriber.id),
                        std::slice::from_ref(&job.workflow_ref),
                    )
                    .await?;
                &read[..]
            }
        };
        let global = levels.iter().find(|p| p.workflow_ref.is_none());
        let own = levels
            .iter()
            .find(|p| p.workflow_ref.as_ref() == Some(&job.workflow_ref));
        let defaults = self
            .store
            .get_workflow_cached(&env, job.workflow_ref.as_str())
            .await?
            .map(|w| WorkflowDefaults::of(w.preferences.as_ref()))
            .unwrap_or_default();
        let effective = Effective::of(false, defaults, global, own);
        let Err(why) = effective.allows(channel) else {
            return Ok(None);
        };
        let (on, source) = if effective.enabled.0 {
            effective.channel(channel)
        } else {
            effective.enabled
        };
        let raw = json!({
            "preference": {
                "channel": channel.as_str(),
                "enabled": on,
                "level": match source {
                    Source::Workflow => "workflow_defaults",
                    Source::SubscriberGlobal => "subscriber_global",
                    Source::SubscriberWorkflow => "subscriber_workflow",
                },
                "source": source.wire(),
            }
        });
        let d = detail(
            job,
            DetailStatus::Success,
            "Internal",
            format!("Step skipped by the subscriber's preferences: {why}"),
            Some(raw.to_string()),
        );
        let mut outcome = finished(JobStatus::Skipped, vec![d]);
        self.chain(&mut outcome, Chain::Continue, job, notification)
            .await?;
        Ok(Some(outcome))
    }

    /// The step condition (`controlValues.skip`, JSON Logic over the template variables): `None` when the
    /// step runs (no condition, or it holds), else the finished outcome: `skipped` when it is false (the
    /// chain goes on, as after unmatched `filters`), `failed` when it cannot be evaluated (a workflow
    /// saved before conditions were checked).
    async fn condition(
        &self,
        job: &Job,
        notification: &Notification,
        vars: &Value,
    ) -> Result<Option<JobOutcome>> {
        let Some(condition) = job
            .step
            .control_values
            .get("skip")
            .filter(|s| skip::is_set(Some(s)))
        else {
            return Ok(None);
        };
        let (status, chain, d) = match skip::step_runs(Some(condition), vars, chrono::Utc::now()) {
            Ok(true) => return Ok(None),
            Ok(false) => {
                let raw = json!({
                    "skip": condition,
                    "values": skip::read_variables(condition, vars),
                });
                let d = detail(
                    job,
                    DetailStatus::Success,
                    "Internal",
                    "Step skipped: its condition (controlValues.skip) is false",
                    Some(raw.to_string()),
                );
                (JobStatus::Skipped, Chain::Continue, d)
            }
            Err(e) => {
                let d = detail(
                    job,
                    DetailStatus::Failed,
                    "Internal",
                    format!("The step's condition (controlValues.skip) cannot be evaluated: {e}"),
                    None,
                );
                let chain = Chain::after_failure(job);
                (JobStatus::Failed, chain, d)
            }
        };
        let mut outcome = finished(status, vec![d]);
        self.chain(&mut outcome, chain, job, notification).await?;
        Ok(Some(outcome))
    }

    /// What the outcome of `job` does to the notification's later jobs: activates the next one when the
    /// chain goes on, or settles the pending ones when it stops here (`skipped` after a throttle or a step
    /// that skipped the rest, `canceled` after a failure). Nothing for the last step (no read, no write:
    /// a one-step workflow's completion writes what it always did) or a job going back to the queue.
    async fn chain(
        &self,
        outcome: &mut JobOutcome,
        chain: Chain,
        job: &Job,
        n: &Notification,
    ) -> Result<()> {
        let more = job.step_index + 1 < n.channels.len() as i64;
        if !more || outcome.retry.is_some() {
            return Ok(());
        }
        match chain {
            Chain::Continue => {
                outcome.next = self.next_job(job, n).await?;
                attach_queued(outcome);
            }
            Chain::Stop => {
                outcome.rest = Some(if outcome.status == JobStatus::Skipped {
                    JobStatus::Skipped
                } else {
                    JobStatus::Canceled
                });
            }
        }
        Ok(())
    }

    /// The template variables of `job`, built by the same [`template_variables`] as the step
    /// preview: the trigger's payload, context and actor (a subscriber id is looked up), the
    /// subscriber, the environment, earlier steps' outputs, the workflow and an email's unsubscribe link.
    async fn variables(
        &self,
        job: &Job,
        n: &Notification,
        subscriber: Value,
        subscriber_ref: Option<&SubscriberRef>,
        env: &EnvironmentId,
    ) -> Result<Value> {
        let context = if n.context_keys.is_empty() {
            Value::Null
        } else {
            context_values(&self.store.get_contexts(env, &n.context_keys).await?)
        };
        let actor = match n.actor.as_ref().filter(|a| !a.is_null()) {
            None => Value::Null,
            Some(a) => super::actor_variables(&self.store, env, a).await?,
        };
        let workflow = self
            .store
            .get_workflow_cached(env, job.workflow_ref.as_str())
            .await?;
        let unsubscribe_url = self.unsubscribe_url(job, n, subscriber_ref, workflow.as_deref());
        Ok(template_variables(TemplateInputs {
            payload: job.payload.clone(),
            subscriber,
            actor,
            context,
            env: self.environment_values(env).await?,
            steps: steps_vars(job),
            workflow: workflow.map_or(Value::Null, |w| workflow_values(&w)),
            unsubscribe_url,
        }))
    }

    /// An email step's one-click unsubscribe link (`{TIDINGS_PUBLIC_URL}/v1/unsubscribe/{token}`): only
    /// with `TIDINGS_PUBLIC_URL` set, for an existing subscriber, and in a workflow whose email the subscriber
    /// may turn off (not critical, its defaults not read-only), since the link could not do it otherwise.
    fn unsubscribe_url(
        &self,
        job: &Job,
        n: &Notification,
        subscriber: Option<&SubscriberRef>,
        workflow: Option<&Workflow>,
    ) -> Option<String> {
        let (Some(base), Some(subscriber), Some(workflow)) =
            (self.public_url.as_deref(), subscriber, workflow)
        else {
            return None;
        };
        if job.step.step_type != StepType::Email
            || n.critical
            || workflow.critical
            || WorkflowDefaults::of(workflow.preferences.as_ref()).read_only
        {
            return None;
        }
        let token = UnsubscribeToken {
            environment_id: job.environment_id.clone(),
            subscriber_ref: subscriber.clone(),
            workflow_ref: workflow.id.clone(),
        }
        .sign(self.store.cipher());
        Some(format!("{base}/v1/unsubscribe/{token}"))
    }

    /// `env` of an environment; names never change, so each is read once per process.
    async fn environment_values(&self, env: &EnvironmentId) -> Result<Value> {
        let cached = self
            .env_names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(env)
            .cloned();
        let name = match cached {
            Some(name) => name,
            None => {
                let Some(name) = self.store.environment_name(env).await? else {
                    return Ok(Value::Null);
                };
                self.env_names
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(env.clone(), name.clone());
                name
            }
        };
        Ok(environment_values(&name))
    }

    /// The job of the step after `job`, activated: its pending job from the trigger, with the step as it
    /// was then (as Novu does: an edit of the workflow reaches the next trigger, not the chains under way),
    /// or — a notification triggered before pending jobs existed — one made from the workflow's current
    /// definition. A digest step opens its window or joins the open one when the completion records it
    /// (`store::digests`). `None` when the next job was settled meanwhile (canceled).
    async fn next_job(&self, job: &Job, n: &Notification) -> Result<Option<Job>> {
        let index = job.step_index + 1;
        let now = Timestamp::now();
        let pending = self
            .store
            .get_job_by_dedupe(&Job::dedupe(&n.id, index))
            .await?;
        let mut next = match pending {
            Some(p) if p.status == JobStatus::Pending => {
                let mut next = job_for_step(n, &p.step, index, job.digest.clone(), now);
                next.id = p.id;
                next.provider_id = p.provider_id;
                next.created_at = p.created_at;
                next
            }
            Some(_) => return Ok(None),
            None => {
                let env = job.environment_id.clone();
                let Some(workflow) = self
                    .store
                    .get_workflow_cached(&env, job.workflow_ref.as_str())
                    .await?
                else {
                    return Ok(None);
                };
                let Some(step) = workflow.steps.get(index as usize) else {
                    return Ok(None);
                };
                job_for_step(n, step, index, job.digest.clone(), now)
            }
        };
        next.payload = job.payload.clone();
        Ok(Some(next))
    }

    fn in_app(&self, job: &Job, n: &Notification, vars: &Value) -> Result<(JobOutcome, Chain)> {
        let controls = template_controls(&job.step.control_values);
        let rendered = match self.renderer.render_value(&controls, vars) {
            Ok(mut v) => {
                if !sanitization_disabled(&job.step.control_values) {
                    sanitize_in_app(&mut v);
                }
                v
            }
            Err(e) => {
                let d = detail(
                    job,
                    DetailStatus::Failed,
                    "Payload",
                    format!("The in-app template could not be rendered: {e}"),
                    None,
                );
                let chain = Chain::after_failure(job);
                return Ok((finished(JobStatus::Failed, vec![d]), chain));
            }
        };
        let text = |k: &str| rendered.get(k).and_then(Value::as_str).map(str::to_owned);
        let action = |k: &str| rendered.get(k).filter(|a| a.is_object()).cloned();
        let mut buttons = Vec::new();
        for (key, kind) in [
            ("primaryAction", "primary"),
            ("secondaryAction", "secondary"),
        ] {
            // As the preview: a button needs text, so an action whose label is missing or renders empty
            // is left out (a missing label is also a step issue at save).
            let label = action(key)
                .and_then(|a| {
                    a.get("label")
                        .and_then(Value::as_str)
                        .map(str::trim)
                        .map(str::to_owned)
                })
                .filter(|l| !l.is_empty());
            if let Some(label) = label {
                let mut button = json!({"type": kind, "content": label});
                // Where the button leads, as the Inbox shows it (`primaryAction.redirect`).
                if let Some(redirect) = action(key).and_then(|a| a.get("redirect").cloned()) {
                    for field in ["url", "target"] {
                        if let Some(v) = redirect.get(field).filter(|v| v.is_string()) {
                            button[field] = v.clone();
                        }
                    }
                }
                buttons.push(button);
            }
        }
        // The message's own redirect, else its primary action's.
        let redirect_url = rendered
            .get("redirect")
            .and_then(|r| r.get("url"))
            .or_else(|| {
                rendered
                    .get("primaryAction")
                    .and_then(|a| a.get("redirect"))
                    .and_then(|r| r.get("url"))
            })
            .cloned();
        let mut cta = json!({"type": "redirect", "data": {}});
        if let Some(url) = redirect_url {
            cta["data"]["url"] = url;
        }
        if !buttons.is_empty() {
            cta["action"] = json!({"status": "pending", "buttons": buttons});
        }
        let message = Message {
            subject: text("subject"),
            content: text("body").unwrap_or_default(),
            avatar: text("avatar"),
            cta,
            data: rendered.get("data").filter(|d| d.is_object()).cloned(),
            provider_id: "svc".to_owned(),
            ..Message::of_job(job, n, Channel::InApp)
        };
        let d = detail(
            job,
            DetailStatus::Success,
            "Internal",
            "In-app message created",
            Some(json!({"messageId": message.id}).to_string()),
        );
        let mut outcome = finished(JobStatus::Completed, vec![d]);
        outcome.message = Some(message);
        Ok((outcome, Chain::Continue))
    }
}

/// The JSON body an `http_request` step sends (and signs): the rendered body as an object — given as an
/// object or as `[{key, value}]` pairs — for methods with a body, else `{}`.
pub fn request_body(method: &str, body: Option<&Value>) -> Value {
    if matches!(method, "GET" | "DELETE" | "HEAD" | "OPTIONS") {
        return json!({});
    }
    match body {
        Some(Value::Object(m)) => Value::Object(m.clone()),
        Some(Value::Array(pairs)) => Value::Object(
            pairs
                .iter()
                .filter_map(|p| {
                    Some((
                        p.get("key")?.as_str()?.to_owned(),
                        p.get("value").cloned().unwrap_or(Value::Null),
                    ))
                })
                .collect(),
        ),
        _ => json!({}),
    }
}

/// For a job run before its notification's rows were written ([`super::run_due_in_app`]): [`Runner::next_job`]
/// found no pending job of the next step and made one from the workflow, but the trigger records it, as
/// `recorded`, in the transaction that completes this one. The next job takes the recorded one's identity,
/// as `next_job` does with a pending job it reads, and so do its details.
pub(super) fn adopt_recorded_next(outcome: &mut JobOutcome, recorded: &Job) {
    let Some(next) = outcome.next.as_mut() else {
        return;
    };
    if next.step_index != recorded.step_index || next.id == recorded.id {
        return;
    }
    let made = std::mem::replace(&mut next.id, recorded.id.clone());
    let made_provider = std::mem::replace(&mut next.provider_id, recorded.provider_id.clone());
    next.created_at = recorded.created_at;
    for d in outcome.details.iter_mut().filter(|d| d.job_id == made) {
        d.job_id = recorded.id.clone();
        if d.provider_id.as_deref() == Some(made_provider.as_str()) {
            d.provider_id = Some(recorded.provider_id.clone());
        }
    }
}

/// Links the next job into the outcome with its first execution detail (`Queued`). A digest's detail is
/// written when the completion settles it: whether it opened its window or joined the open one.
fn attach_queued(outcome: &mut JobOutcome) {
    let Some(next) = outcome.next.as_ref() else {
        return;
    };
    if next.digest_key.is_some() {
        return;
    }
    let text = if next.run_at.0 > Timestamp::now().0 {
        format!("Step queued; runs at {}", next.run_at.to_iso())
    } else {
        "Step queued".to_owned()
    };
    let mut queued = detail(next, DetailStatus::Queued, "Internal", text, None);
    queued.is_retry = false;
    outcome.details.push(queued);
}

/// The controls a step renders: all but the condition (`skip` is JSON Logic, not a template, and is
/// not checked as one).
pub fn template_controls(controls: &Map<String, Value>) -> Value {
    let mut controls = controls.clone();
    controls.remove("skip");
    Value::Object(controls)
}

/// `steps.<digestStepId>.events` / `eventCount` for steps after a digest.
fn steps_vars(job: &Job) -> Value {
    let mut steps = Map::new();
    if let Some(d) = &job.digest {
        if let Some(events) = d.get("events").and_then(Value::as_array) {
            let step_id = d
                .get("stepId")
                .and_then(Value::as_str)
                .unwrap_or("digest")
                .to_owned();
            steps.insert(
                step_id,
                json!({"events": events, "eventCount": events.len()}),
            );
        }
    }
    Value::Object(steps)
}
