//! How a step becomes a job: its provider, when it runs (delays, digest windows, timed digests), its digest
//! key and metadata, the jobs of a trigger; and the execution details and outcomes steps record.

use serde_json::{json, Value};

use crate::domain::job::{DetailStatus, ExecutionDetail, Job, JobStatus, Notification};
use crate::domain::workflow::{duration_ms, Step, StepType};
use crate::domain::{EnvironmentId, JobId, Timestamp};
use crate::store::jobs::JobOutcome;
use crate::store::Store;

/// `actor` of the template variables for a trigger's (or a preview's) actor: a subscriber id, as text or
/// `{subscriberId}`, is looked up and gives that subscriber's fields (delivery and preview alike).
pub async fn actor_variables(
    store: &Store,
    env: &EnvironmentId,
    actor: &Value,
) -> crate::error::Result<Value> {
    let found = match crate::render::inputs::actor_reference(actor) {
        Some(id) => store.get_subscriber(env, id).await?,
        None => None,
    };
    Ok(crate::render::inputs::actor_values(actor, found.as_ref()))
}

/// The provider id recorded on a job of this step type (never missing; in-app uses `svc`).
pub fn provider_for(step: StepType) -> &'static str {
    match step {
        StepType::InApp
        | StepType::Delay
        | StepType::Digest
        | StepType::Throttle
        | StepType::Custom
        | StepType::HttpRequest => "svc",
        StepType::Email => "svc-email",
        StepType::Sms => "svc-sms",
        StepType::Chat | StepType::Push => "svc",
    }
}

/// A detail row for `job`.
pub fn detail(
    job: &Job,
    status: DetailStatus,
    source: &str,
    text: impl Into<String>,
    raw: Option<String>,
) -> ExecutionDetail {
    ExecutionDetail {
        raw,
        ..ExecutionDetail::for_job(job, status, source, text)
    }
}

/// The key under which events of one subscriber, workflow step and digest key collapse: the subscriber's
/// record, not its reusable subscriberId (a subscriber deleted and created again starts afresh).
pub fn digest_key(job: &Job, step: &Step, payload: &Value) -> String {
    let key_path = step
        .control_values
        .get("digestKey")
        .and_then(Value::as_str)
        .unwrap_or("");
    let key_value = if key_path.is_empty() {
        String::new()
    } else {
        lookup(payload, key_path.trim_start_matches("payload."))
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    format!(
        "{}|{}|{}|{}|{}",
        job.environment_id, job.subscriber_ref, job.workflow_ref, step.step_id, key_value
    )
}

/// A dotted path into a JSON value: the one the providers read their answers with.
pub use crate::providers::http::lookup;

/// When a job for `step` created now should run: delays and digest windows push it into the future.
pub fn run_at_for(step: &Step, payload: &Value, now: Timestamp) -> Timestamp {
    let amount_unit = || {
        let amount = step
            .control_values
            .get("amount")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let unit = step
            .control_values
            .get("unit")
            .and_then(Value::as_str)
            .unwrap_or("seconds");
        duration_ms(amount, unit).unwrap_or(0)
    };
    match step.step_type {
        StepType::Delay => match step.control_values.get("type").and_then(Value::as_str) {
            Some("scheduled") => {
                let path = step
                    .control_values
                    .get("delayPath")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                lookup(payload, path.trim_start_matches("payload."))
                    .and_then(Value::as_str)
                    .and_then(Timestamp::parse)
                    .map(|t| t.max(now))
                    .unwrap_or(now)
            }
            _ => Timestamp(now.0 + amount_unit()),
        },
        StepType::Digest => {
            let controls = &step.control_values;
            match controls.get("type").and_then(Value::as_str) {
                Some("timed") => next_timed(controls.get("timed").unwrap_or(&Value::Null), now)
                    .unwrap_or(Timestamp(now.0 + amount_unit())),
                _ => Timestamp(now.0 + amount_unit()),
            }
        }
        _ => now,
    }
}

/// The next time a timed digest fires after `now`: `timed.atTime` (`HH:MM`, UTC; midnight when absent) on
/// one of `timed.weekDays` (`monday`…`sunday`) and `timed.monthDays` (`1`…`31`, numbers or strings), when
/// given. `None` when no day in the coming year matches.
pub fn next_timed(timed: &Value, now: Timestamp) -> Option<Timestamp> {
    use chrono::{Datelike, NaiveTime, TimeZone, Utc};
    let at = timed
        .get("atTime")
        .and_then(Value::as_str)
        .and_then(|t| NaiveTime::parse_from_str(t, "%H:%M").ok())
        .unwrap_or(NaiveTime::MIN);
    let week_days: Vec<String> = timed
        .get("weekDays")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_ascii_lowercase)
                .collect()
        })
        .unwrap_or_default();
    let month_days: Vec<u32> = timed
        .get("monthDays")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|d| {
                    d.as_u64()
                        .map(|n| n as u32)
                        .or_else(|| d.as_str()?.trim().parse().ok())
                })
                .collect()
        })
        .unwrap_or_default();
    let start = Utc.timestamp_millis_opt(now.0).single()?.date_naive();
    for offset in 0..=366 {
        let day = start + chrono::Duration::days(offset);
        let weekday = day.weekday();
        let name = match weekday {
            chrono::Weekday::Mon => "monday",
            chrono::Weekday::Tue => "tuesday",
            chrono::Weekday::Wed => "wednesday",
            chrono::Weekday::Thu => "thursday",
            chrono::Weekday::Fri => "friday",
            chrono::Weekday::Sat => "saturday",
            chrono::Weekday::Sun => "sunday",
        };
        if !week_days.is_empty() && !week_days.iter().any(|d| d == name) {
            continue;
        }
        if !month_days.is_empty() && !month_days.contains(&day.day()) {
            continue;
        }
        let at_ms = Utc.from_utc_datetime(&day.and_time(at)).timestamp_millis();
        if at_ms > now.0 {
            return Some(Timestamp(at_ms));
        }
    }
    None
}

/// The job for step `index` of a notification, queued to run when its step says.
pub fn job_for_step(
    n: &Notification,
    step: &Step,
    index: i64,
    digest: Option<Value>,
    now: Timestamp,
) -> Job {
    let mut job = Job {
        id: JobId::new(),
        organization_id: n.organization_id.clone(),
        environment_id: n.environment_id.clone(),
        notification_id: n.id.clone(),
        subscriber_ref: n.subscriber_ref.clone(),
        subscriber_id: n.subscriber_id.clone(),
        workflow_ref: n.workflow_ref.clone(),
        transaction_id: n.transaction_id.clone(),
        step_index: index,
        step: step.clone(),
        status: JobStatus::Queued,
        provider_id: provider_for(step.step_type).to_owned(),
        payload: n.payload.clone(),
        overrides: n.overrides.clone(),
        digest,
        digest_key: None,
        run_at: run_at_for(step, &n.payload, now),
        attempts: 0,
        dedupe_key: Job::dedupe(&n.id, index),
        schedule_extensions_count: 0,
        delivery: None,
        created_at: now,
        updated_at: now,
    };
    if step.step_type == StepType::Digest {
        job.digest_key = Some(digest_key(&job, step, &n.payload));
        let event = json!({"id": n.transaction_id, "time": now.to_iso(), "payload": n.payload});
        job.digest = Some(digest_metadata(step, vec![event]));
    }
    job
}

/// The jobs of a new notification, one per step: the first queued to run when its step says, the others
/// `pending` until the chain reaches them, each with the step as it is now (a later edit of the workflow does
/// not change them). `provider` names the provider a job of a step type shows until a delivery says which one
/// handled it. A first step that is a digest opens its window or joins the open one when it is recorded
/// (`store::digests`).
fn jobs_for_trigger(
    n: &Notification,
    steps: &[Step],
    provider: impl Fn(StepType) -> String,
    now: Timestamp,
) -> Vec<Job> {
    let mut jobs = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        let mut job = job_for_step(n, step, index as i64, None, now);
        job.provider_id = provider(step.step_type);
        if index > 0 {
            job.status = JobStatus::Pending;
            // Found by digest lookups, and given a run time, only once reached.
            job.digest_key = None;
            job.run_at = now;
        }
        jobs.push(job);
    }
    jobs
}

/// The provider a job of `step` shows before its delivery: the one `providers` names for its type (see
/// `service::events::step_providers`), else the channel's default.
pub fn step_provider(providers: &[(StepType, String)], step: StepType) -> String {
    providers
        .iter()
        .find(|(s, _)| *s == step)
        .map_or_else(|| provider_for(step).to_owned(), |(_, p)| p.clone())
}

/// A new notification's rows as a trigger records them: the notification, the jobs of all the template's
/// steps (the first queued, the others pending) and the first job's "Step queued" detail.
pub fn first_rows(
    n: Notification,
    template: &crate::domain::fanout::Template,
    now: Timestamp,
) -> (Notification, Vec<Job>, Vec<ExecutionDetail>) {
    let provider = |t| step_provider(&template.providers, t);
    let jobs = jobs_for_trigger(&n, &template.steps, provider, now);
    let queued = detail(
        &jobs[0],
        DetailStatus::Pending,
        "Internal",
        "Step queued",
        None,
    );
    (n, jobs, vec![queued])
}

/// A digest job's `digest` member as Novu's DigestMetadata has it: `type` always, the window and key only
/// when the step sets them (with the types the SDKs expect), `stepId` (which step's events later steps
/// read) and the events collected so far.
pub fn digest_metadata(step: &Step, events: Vec<Value>) -> Value {
    let c = &step.control_values;
    let number = |k: &str| match c.get(k) {
        Some(Value::Number(n)) => Some(Value::Number(n.clone())),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok().map(Value::from),
        _ => None,
    };
    let unit = |k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .filter(|u| {
                matches!(
                    *u,
                    "seconds" | "minutes" | "hours" | "days" | "weeks" | "months"
                )
            })
            .map(Value::from)
    };
    let kind = c
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| matches!(*t, "regular" | "backoff" | "timed"))
        .unwrap_or("regular");
    let mut d = serde_json::Map::new();
    d.insert("type".into(), kind.into());
    let optional = [
        ("amount", number("amount")),
        ("unit", unit("unit")),
        (
            "digestKey",
            c.get("digestKey")
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty())
                .map(Value::from),
        ),
        (
            "backoff",
            c.get("backoff").filter(|b| b.is_boolean()).cloned(),
        ),
        ("backoffAmount", number("backoffAmount")),
        ("backoffUnit", unit("backoffUnit")),
        ("timed", c.get("timed").and_then(timed_metadata)),
    ];
    for (key, value) in optional {
        if let Some(v) = value {
            d.insert(key.into(), v);
        }
    }
    d.insert("stepId".into(), step.step_id.clone().into());
    d.insert("events".into(), Value::Array(events));
    Value::Object(d)
}

/// The `timed` settings of a digest as DigestTimedConfig has them: `atTime` text, `weekDays` names,
/// `monthDays` numbers; what does not fit is left out.
fn timed_metadata(timed: &Value) -> Option<Value> {
    let t = timed.as_object()?;
    let mut out = serde_json::Map::new();
    if let Some(at) = t.get("atTime").and_then(Value::as_str) {
        out.insert("atTime".into(), at.into());
    }
    if let Some(days) = t.get("weekDays").and_then(Value::as_array) {
        let names: Vec<Value> = days
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_ascii_lowercase)
            .filter(|d| {
                matches!(
                    d.as_str(),
                    "monday"
                        | "tuesday"
                        | "wednesday"
                        | "thursday"
                        | "friday"
                        | "saturday"
                        | "sunday"
                )
            })
            .map(Value::from)
            .collect();
        out.insert("weekDays".into(), Value::Array(names));
    }
    if let Some(days) = t.get("monthDays").and_then(Value::as_array) {
        let numbers: Vec<Value> = days
            .iter()
            .filter_map(|d| d.as_u64().or_else(|| d.as_str()?.trim().parse().ok()))
            .map(Value::from)
            .collect();
        out.insert("monthDays".into(), Value::Array(numbers));
    }
    Some(Value::Object(out))
}

/// The outcome of a step that finished without producing anything else.
pub fn finished(status: JobStatus, details: Vec<ExecutionDetail>) -> JobOutcome {
    JobOutcome {
        status,
        details,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(iso: &str) -> Timestamp {
        Timestamp::parse(iso).unwrap()
    }

    #[test]
    fn timed_digests_fire_at_the_next_matching_time() {
        // 2026-11-22 is a Sunday.
        let now = at("2026-11-22T10:00:00.000Z");
        let next = |t: Value| next_timed(&t, now).map(|t| t.to_iso());
        assert_eq!(
            next(json!({"atTime": "11:15"})).as_deref(),
            Some("2026-11-22T11:15:00.000Z")
        );
        assert_eq!(
            next(json!({"atTime": "09:00"})).as_deref(),
            Some("2026-11-23T09:00:00.000Z")
        );
        assert_eq!(
            next(json!({"atTime": "09:00", "weekDays": ["friday", "Wednesday"]})).as_deref(),
            Some("2026-11-25T09:00:00.000Z")
        );
        assert_eq!(
            next(json!({"monthDays": ["1"]})).as_deref(),
            Some("2026-12-01T00:00:00.000Z")
        );
        assert_eq!(
            next(json!({"monthDays": [31], "weekDays": ["monday"]})).as_deref(),
            Some("2027-05-31T00:00:00.000Z")
        );
        assert_eq!(next(json!({"monthDays": [32]})), None);
    }

    /// A digest step with these controls.
    fn step(controls: Value) -> Step {
        Step {
            control_values: controls.as_object().unwrap().clone(),
            ..serde_json::from_value(
                json!({"_id": "s1", "stepId": "d", "name": "d", "type": "digest"}),
            )
            .unwrap()
        }
    }

    #[test]
    fn digest_metadata_has_a_type_and_no_nulls() {
        assert_eq!(
            digest_metadata(&step(json!({})), vec![]),
            json!({"type": "regular", "stepId": "d", "events": []})
        );
        assert_eq!(
            digest_metadata(
                &step(
                    json!({"type": "timed", "amount": "5", "unit": "fortnights", "digestKey": "",
                    "timed": {"atTime": "06:30", "weekDays": ["Monday", "funday"], "monthDays": [1, "15"]}})
                ),
                vec![json!({"id": "t1"})]
            ),
            json!({"type": "timed", "amount": 5.0, "stepId": "d", "events": [{"id": "t1"}],
                "timed": {"atTime": "06:30", "weekDays": ["monday"], "monthDays": [1, 15]}})
        );
        assert_eq!(
            digest_metadata(
                &step(
                    json!({"amount": 2, "unit": "minutes", "digestKey": "payload.thread",
                    "backoff": true, "backoffAmount": 30, "backoffUnit": "seconds"})
                ),
                vec![]
            ),
            json!({"type": "regular", "amount": 2, "unit": "minutes", "digestKey": "payload.thread",
                "backoff": true, "backoffAmount": 30, "backoffUnit": "seconds", "stepId": "d", "events": []})
        );
    }

    #[test]
    fn backoff_windows_come_from_the_controls() {
        assert_eq!(
            step(json!({"amount": 5, "unit": "minutes"})).digest_look_back(),
            None
        );
        assert_eq!(
            step(json!({"type": "backoff", "amount": 5, "unit": "minutes"})).digest_look_back(),
            Some(300_000)
        );
        assert_eq!(
            step(json!({"backoff": true, "amount": 5, "unit": "minutes",
                "backoffAmount": 30, "backoffUnit": "seconds"}))
            .digest_look_back(),
            Some(30_000)
        );
        assert_eq!(
            step(json!({"amount": 5, "unit": "minutes",
                "lookBackWindow": {"amount": 2, "unit": "hours"}}))
            .digest_look_back(),
            Some(7_200_000)
        );
    }
}
