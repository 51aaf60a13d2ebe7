//! The activity feed's JSON, written straight from the row views the service hands over
//! ([`ActivitySink`]): every fragment goes into one buffer as its row passes, and the page is put together
//! from those fragments at the end. The output is byte for byte what serializing the `…Out` types of
//! [`super::notifications`] gives (they document the schema; a test pins the two together), without an
//! owned copy of every row, a parse of every stored JSON column or a struct per field on the way.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::api::wire::JsonObject;
use crate::domain::filters::wire_filters;
use crate::domain::job::{DetailView, JobView, NotificationView};
use crate::domain::subscriber::SubscriberContact;
use crate::domain::workflow::StepType;
use crate::domain::{EnvironmentId, OrganizationId, Tenant};
use crate::error::Error;
use crate::service::activity::ActivitySink;

/// The stored step of a job, as far as the feed shows it (borrowed from the job's `step` text).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StepRef<'a> {
    #[serde(rename = "_id", borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    step_id: Cow<'a, str>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(rename = "type")]
    step_type: StepType,
    #[serde(borrow, default)]
    control_values: Option<&'a RawValue>,
    #[serde(borrow, default)]
    filters: Option<&'a RawValue>,
    #[serde(default)]
    should_stop_on_fail: bool,
}

/// The `to` member of a notification from the stored recipient: an object as it was given, a
/// subscriberId given as a string as `{"subscriberId": …}` (as Novu stores it; the SDKs' models want an
/// object). `None` (the member is left out) for anything else.
pub(crate) fn to_member(stored: &str) -> Option<Cow<'_, str>> {
    match stored.trim_start().as_bytes().first() {
        Some(b'{') => Some(Cow::Borrowed(stored)),
        Some(b'"') => Some(Cow::Owned(format!("{{\"subscriberId\":{stored}}}"))),
        _ => None,
    }
}

/// The `topics` member of a notification: `[{_topicId, topicKey}]` of the topic that reached its
/// subscriber, `[]` for a direct recipient.
pub(crate) fn topics_member(n: &NotificationView<'_>) -> String {
    match (n.topic_id, n.topic_key) {
        (Some(id), Some(key)) => {
            serde_json::json!([{ "_topicId": id, "topicKey": key }]).to_string()
        }
        _ => "[]".to_owned(),
    }
}

/// The `digest` member of a digest job as Novu's DigestMetadata has it: `type` always (`regular` for a
/// job stored without one, as merged jobs once were), members stored as `null` left out.
pub(crate) fn digest_member(stored: &str) -> String {
    let mut digest = match serde_json::from_str::<serde_json::Value>(stored) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    digest.retain(|_, v| !v.is_null());
    if !matches!(
        digest.get("type").and_then(serde_json::Value::as_str),
        Some("regular" | "backoff" | "timed")
    ) {
        digest.insert("type".into(), "regular".into());
    }
    serde_json::Value::Object(digest).to_string()
}

/// A notification of the page: its members before `subscriber` and after `jobs`, already written, and
/// what the members in between need.
struct Note {
    head: Range<usize>,
    tail: Range<usize>,
    subscriber_ref: Range<usize>,
    workflow_ref: Range<usize>,
    workflow_identifier: Range<usize>,
}

/// A job: its members before and after `executionDetails`, written; where it goes.
struct JobPart {
    note: usize,
    step_index: i64,
    created_at: i64,
    head: Range<usize>,
    tail: Range<usize>,
}

/// An execution detail, written; where it goes.
struct DetailPart {
    job: usize,
    created_at: i64,
    id: Range<usize>,
    body: Range<usize>,
}

/// A job's `step` member, written once for every job of the page with the same stored step.
struct StepPart {
    /// The stored step's text and the job's workflow (`_templateId`).
    text: Range<usize>,
    workflow_ref: Range<usize>,
    step_type: StepType,
    body: Range<usize>,
}

/// Ids (kept in the buffer) and what they name, sorted at the first lookup after a change (the rows of one
/// kind all arrive before the first lookup), then binary-searched: a page names at most a few hundred rows,
/// for which this beats hashing each id.
#[derive(Default)]
struct IdIndex {
    entries: Vec<(Range<usize>, usize)>,
    sorted: bool,
}

impl IdIndex {
    fn push(&mut self, id: Range<usize>, at: usize) {
        self.entries.push((id, at));
        self.sorted = false;
    }

    fn find(&mut self, buf: &[u8], id: &str) -> Option<usize> {
        if !self.sorted {
            self.entries
                .sort_by(|a, b| buf[a.0.clone()].cmp(&buf[b.0.clone()]));
            self.sorted = true;
        }
        self.entries
            .binary_search_by(|(r, _)| buf[r.clone()].cmp(id.as_bytes()))
            .ok()
            .map(|at| self.entries[at].1)
    }
}

/// Collects an activity page (or one record) of an environment as JSON fragments; [`ActivityJson::page`]
/// or [`ActivityJson::one`] puts them together.
pub struct ActivityJson {
    organization_id: OrganizationId,
    environment_id: EnvironmentId,
    /// Every written fragment, and the texts the notes refer to.
    buf: Vec<u8>,
    notes: Vec<Note>,
    note_ids: IdIndex,
    /// Known subscribers (by `_id`), written.
    subscribers: HashMap<String, Range<usize>>,
    workflow_names: HashMap<String, String>,
    jobs: Vec<JobPart>,
    job_ids: IdIndex,
    steps: Vec<StepPart>,
    details: Vec<DetailPart>,
    /// A stored job step that did not parse: the response is an error, as a failed read would be.
    error: Option<String>,
}

impl ActivityJson {
    pub fn new(tenant: &Tenant) -> Self {
        Self {
            organization_id: tenant.organization_id.clone(),
            environment_id: tenant.environment_id.clone(),
            buf: Vec::with_capacity(16 * 1024),
            notes: Vec::new(),
            note_ids: IdIndex::default(),
            subscribers: HashMap::new(),
            workflow_names: HashMap::new(),
            jobs: Vec::new(),
            job_ids: IdIndex::default(),
            steps: Vec::new(),
            details: Vec::new(),
            error: None,
        }
    }

    fn keep(&mut self, text: &str) -> Range<usize> {
        let start = self.buf.len();
        self.buf.extend_from_slice(text.as_bytes());
        start..self.buf.len()
    }

    /// The `step` member of job `j`, written (or found written for an earlier job of the page), and the
    /// step's type; `None` when the stored step does not parse.
    fn step_part(&mut self, j: &JobView<'_>, note: usize) -> Option<(StepType, Range<usize>)> {
        let workflow_ref = self.notes[note].workflow_ref.clone();
        if let Some(p) = self.steps.iter().find(|p| {
            self.buf[p.text.clone()] == *j.step.as_bytes()
                && self.buf[p.workflow_ref.clone()] == self.buf[workflow_ref.clone()]
        }) {
            return Some((p.step_type, p.body.clone()));
        }
        let step: StepRef<'_> = match serde_json::from_str(j.step) {
            Ok(step) => step,
            Err(e) => {
                self.error = Some(format!("job {}: unreadable stored step: {e}", j.id));
                return None;
            }
        };
        let template_id = self.text(&workflow_ref).to_owned();
        let start = self.buf.len();
        let mut s = JsonObject::open(&mut self.buf);
        s.str("_id", &step.id)
            .str("stepId", &step.step_id)
            .str("name", &step.name)
            .bool("active", true)
            .raw(
                "filters",
                &step
                    .filters
                    .map_or_else(|| "[]".to_owned(), |f| wire_filters(f.get())),
            )
            .str("_templateId", &template_id)
            .raw("_parentId", "null")
            .bool("shouldStopOnFail", step.should_stop_on_fail)
            .raw(
                "controlVariables",
                step.control_values.map_or("{}", RawValue::get),
            );
        s.close();
        let body = start..self.buf.len();
        let part = StepPart {
            text: self.keep(j.step),
            workflow_ref,
            step_type: step.step_type,
            body: body.clone(),
        };
        self.steps.push(part);
        Some((step.step_type, body))
    }

    fn text(&self, r: &Range<usize>) -> &str {
        // Only whole `&str`s are kept, at ranges recorded around them.
        std::str::from_utf8(&self.buf[r.clone()]).unwrap_or_default()
    }

    /// `{hasMore, data, pageSize, page}`.
    pub fn page(self, has_more: bool, page_size: i64, page: i64) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(self.buf.len() + 1024);
        let mut page_obj = JsonObject::open(&mut out);
        page_obj.bool("hasMore", has_more);
        self.write_notes(page_obj.key("data"))?;
        page_obj.int("pageSize", page_size).int("page", page);
        page_obj.close();
        Ok(out)
    }

    /// The single record (the caller made sure there is one).
    pub fn one(self) -> Result<Vec<u8>, Error> {
        let mut array = Vec::with_capacity(self.buf.len() + 1024);
        self.write_notes(&mut array)?;
        // `[record]` → `record`.
        Ok(array[1..array.len() - 1].to_vec())
    }

    /// Writes the notes as a JSON array.
    fn write_notes(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        if let Some(e) = &self.error {
            return Err(Error::Internal(anyhow::anyhow!("{e}")));
        }
        // Each note's jobs in step order (then creation order), each job's details oldest first.
        let mut job_order: Vec<usize> = (0..self.jobs.len()).collect();
        job_order.sort_by_key(|&j| {
            let p = &self.jobs[j];
            (p.note, p.step_index, p.created_at)
        });
        let mut detail_order: Vec<usize> = (0..self.details.len()).collect();
        detail_order.sort_by(|&a, &b| {
            let (a, b) = (&self.details[a], &self.details[b]);
            (a.job, a.created_at, &self.buf[a.id.clone()]).cmp(&(
                b.job,
                b.created_at,
                &self.buf[b.id.clone()],
            ))
        });
        let mut details_of_job: Vec<Range<usize>> = vec![0..0; self.jobs.len()];
        let mut at = 0;
        while at < detail_order.len() {
            let job = self.details[detail_order[at]].job;
            let start = at;
            while at < detail_order.len() && self.details[detail_order[at]].job == job {
                at += 1;
            }
            details_of_job[job] = start..at;
        }

        out.push(b'[');
        let mut next_job = 0;
        for (n, note) in self.notes.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&self.buf[note.head.clone()]);
            let mut obj = JsonObject::continued(out);
            // A deleted subscriber's profile is erased: its records have no `subscriber`.
            if let Some(written) = self.subscribers.get(self.text(&note.subscriber_ref)) {
                obj.key("subscriber")
                    .extend_from_slice(&self.buf[written.clone()]);
            }
            let identifier = self.text(&note.workflow_identifier);
            let mut template = JsonObject::open(obj.key("template"));
            template.str("_id", self.text(&note.workflow_ref)).str(
                "name",
                self.workflow_names
                    .get(self.text(&note.workflow_ref))
                    .map_or(identifier, String::as_str),
            );
            template.name("origin", "svc-cloud");
            let triggers = template.key("triggers");
            triggers.push(b'[');
            let mut trigger = JsonObject::open(triggers);
            trigger
                .str("type", "event")
                .str("identifier", identifier)
                .raw("variables", "[]");
            trigger.close();
            template.out().push(b']');
            template.close();
            let jobs = obj.key("jobs");
            jobs.push(b'[');
            let mut first_job = true;
            while next_job < job_order.len() && self.jobs[job_order[next_job]].note == n {
                let j = job_order[next_job];
                if !first_job {
                    jobs.push(b',');
                }
                first_job = false;
                jobs.extend_from_slice(&self.buf[self.jobs[j].head.clone()]);
                for (i, &d) in detail_order[details_of_job[j].clone()].iter().enumerate() {
                    if i > 0 {
                        jobs.push(b',');
                    }
                    jobs.extend_from_slice(&self.buf[self.details[d].body.clone()]);
                }
                jobs.extend_from_slice(&self.buf[self.jobs[j].tail.clone()]);
                next_job += 1;
            }
            jobs.push(b']');
            out.extend_from_slice(&self.buf[note.tail.clone()]);
        }
        out.push(b']');
        Ok(())
    }
}

impl ActivitySink for ActivityJson {
    fn notification(&mut self, n: NotificationView<'_>) {
        let start = self.buf.len();
        let mut obj = JsonObject::open(&mut self.buf);
        obj.str("_id", n.id)
            .str("_environmentId", self.environment_id.as_str())
            .str("_organizationId", self.organization_id.as_str())
            .str("_subscriberId", n.subscriber_ref)
            .str("_templateId", n.workflow_ref);
        if let Some(d) = n.digested_notification_id {
            obj.str("_digestedNotificationId", d);
        }
        obj.str("transactionId", n.transaction_id)
            .time("createdAt", n.created_at)
            .time("updatedAt", n.updated_at)
            .raw("channels", n.channels);
        let head = start..self.buf.len();
        let start = self.buf.len();
        let mut obj = JsonObject::continued(&mut self.buf);
        obj.raw("payload", n.payload);
        if let Some(to) = n.to.and_then(to_member) {
            obj.raw("to", &to);
        }
        obj.raw("tags", n.tags)
            .raw("topics", &topics_member(&n))
            .str("severity", n.severity)
            .bool("critical", n.critical)
            .raw("contextKeys", n.context_keys);
        obj.close();
        let tail = start..self.buf.len();
        let note = Note {
            head,
            tail,
            subscriber_ref: self.keep(n.subscriber_ref),
            workflow_ref: self.keep(n.workflow_ref),
            workflow_identifier: self.keep(n.workflow_identifier),
        };
        let id = self.keep(n.id);
        self.note_ids.push(id, self.notes.len());
        self.notes.push(note);
    }

    fn subscriber(&mut self, s: SubscriberContact<'_>) {
        let start = self.buf.len();
        let mut obj = JsonObject::open(&mut self.buf);
        obj.str("_id", s.id)
            .str("subscriberId", s.subscriber_id)
            .some_str("firstName", s.first_name)
            .some_str("lastName", s.last_name)
            .some_str("email", s.email)
            .some_str("phone", s.phone);
        obj.close();
        self.subscribers
            .insert(s.id.to_owned(), start..self.buf.len());
    }

    fn workflow(&mut self, id: &str, name: &str) {
        self.workflow_names.insert(id.to_owned(), name.to_owned());
    }

    fn job(&mut self, j: JobView<'_>) {
        let Some(note) = self.note_ids.find(&self.buf, j.notification_id) else {
            return;
        };
        let Some((step_type, step)) = self.step_part(&j, note) else {
            return;
        };
        let id = self.keep(j.id);
        let start = self.buf.len();
        let mut obj = JsonObject::open(&mut self.buf);
        obj.str("_id", j.id).str("type", step_type.as_str());
        if let Some(digest) = j.digest.filter(|_| step_type == StepType::Digest) {
            obj.raw("digest", &digest_member(digest));
        }
        obj.key("executionDetails").push(b'[');
        let head = start..self.buf.len();
        let start = self.buf.len();
        self.buf.extend_from_slice(b"],\"step\":");
        self.buf.extend_from_within(step);
        let mut obj = JsonObject::continued(&mut self.buf);
        if let Some(overrides) = j.overrides {
            obj.raw("overrides", overrides);
        }
        obj.raw("payload", j.payload)
            .name("providerId", j.provider_id)
            .str("status", j.status)
            .time("createdAt", j.created_at)
            .time("updatedAt", j.updated_at)
            .time("runAt", j.run_at)
            .int("scheduleExtensionsCount", j.schedule_extensions_count);
        obj.close();
        let tail = start..self.buf.len();
        self.job_ids.push(id, self.jobs.len());
        self.jobs.push(JobPart {
            note,
            step_index: j.step_index,
            created_at: j.created_at.0,
            head,
            tail,
        });
    }

    fn detail(&mut self, d: DetailView<'_>) {
        let Some(job) = self.job_ids.find(&self.buf, d.job_id) else {
            return;
        };
        let id = self.keep(d.id);
        let start = self.buf.len();
        let mut obj = JsonObject::open(&mut self.buf);
        obj.str("_id", d.id)
            .str("_jobId", d.job_id)
            .time("createdAt", d.created_at)
            .str("status", d.status)
            .str("detail", d.detail)
            .bool("isRetry", d.is_retry)
            .bool("isTest", d.is_test);
        if let Some(p) = d.provider_id {
            obj.name("providerId", p);
        }
        obj.opt_str("raw", d.raw).str("source", d.source);
        obj.close();
        self.details.push(DetailPart {
            job,
            created_at: d.created_at.0,
            id,
            body: start..self.buf.len(),
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::value::RawValue;

    use super::*;
    use crate::api::v1::notifications::{
        ActivityOut, ActivityPage, ActivitySubscriberOut, ActivityTemplateOut, ActivityTriggerOut,
        ExecutionDetailOut, JobOut, JobStepOut,
    };
    use crate::api::wire::{with_profile, IsoTime, WireName};
    use crate::config::WireProfile;
    use crate::domain::{EnvironmentId, OrganizationId, Timestamp};

    const T0: i64 = 1_795_600_000_000;

    fn tenant() -> Tenant {
        Tenant {
            organization_id: OrganizationId("org1".into()),
            environment_id: EnvironmentId("env1".into()),
        }
    }

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    fn note(id: &'static str, subscriber_ref: &'static str) -> NotificationView<'static> {
        NotificationView {
            id,
            subscriber_ref,
            subscriber_id: "ada",
            workflow_ref: "wf1",
            workflow_identifier: "comment-\"posted\"",
            transaction_id: "tx-1",
            channels: r#"["in_app","email"]"#,
            payload: r#"{"n":1,"s":"é\n"}"#,
            to: if id == "n1" { Some(r#""ada""#) } else { None },
            tags: r#"["a"]"#,
            severity: "high",
            critical: true,
            context_keys: r#"["tenant:t1"]"#,
            digested_notification_id: if id == "n2" { Some("n1") } else { None },
            topic_id: if id == "n2" { Some("t1") } else { None },
            topic_key: if id == "n2" { Some("team:\"a\"") } else { None },
            created_at: Timestamp(T0),
            updated_at: Timestamp(T0 + 5),
        }
    }

    const DIGEST_STEP: &str = r#"{"_id":"s1","stepId":"collect","name":"Collect","type":"digest","controlValues":{"amount":5},"filters":[{"on":"payload"}],"shouldStopOnFail":true,"extra":[1,2]}"#;
    const IN_APP_STEP: &str =
        r#"{"_id":"s2","stepId":"inbox","name":"In \"box\"","type":"in_app"}"#;

    fn job(id: &'static str, notification_id: &'static str, step_index: i64) -> JobView<'static> {
        JobView {
            id,
            notification_id,
            step_index,
            step: if step_index == 0 {
                DIGEST_STEP
            } else {
                IN_APP_STEP
            },
            status: "completed",
            provider_id: "svc",
            payload: r#"{"n":1}"#,
            overrides: if step_index == 0 {
                Some(r#"{"email":{}}"#)
            } else {
                None
            },
            digest: Some(r#"{"events":[{"n":1}]}"#),
            run_at: Timestamp(T0 + 1),
            schedule_extensions_count: step_index,
            created_at: Timestamp(T0),
            updated_at: Timestamp(T0 + 2),
        }
    }

    fn detail(id: &'static str, job_id: &'static str, at: i64) -> DetailView<'static> {
        DetailView {
            id,
            job_id,
            status: "Success",
            detail: "Done \"ok\"",
            source: "Internal",
            is_retry: at % 2 == 1,
            is_test: false,
            provider_id: if at == 0 { None } else { Some("svc-email") },
            raw: if at == 2 { Some("{\"x\":1}") } else { None },
            created_at: Timestamp(T0 + at),
        }
    }

    fn ada() -> SubscriberContact<'static> {
        SubscriberContact {
            id: "sub1",
            subscriber_id: "ada",
            first_name: Some("Ada"),
            last_name: None,
            email: Some("ada@example.com"),
            phone: None,
        }
    }

    /// The page through the sink: rows in the order the service hands them over, jobs and details
    /// shuffled (the sink orders them).
    fn rendered(with_workflow: bool) -> Vec<u8> {
        let mut sink = ActivityJson::new(&tenant());
        sink.notification(note("n1", "sub1"));
        sink.notification(note("n2", "gone"));
        sink.subscriber(ada());
        if with_workflow {
            sink.workflow("wf1", "Comment posted");
        }
        sink.job(job("j2", "n1", 1));
        sink.job(job("j1", "n1", 0));
        sink.job(job("j9", "elsewhere", 0));
        // The same stored step as j2's: its `step` member is written once and used twice.
        sink.job(job("j3", "n2", 1));
        sink.detail(detail("d3", "j1", 2));
        sink.detail(detail("d1", "j1", 0));
        sink.detail(detail("d2", "j2", 1));
        sink.detail(detail("d0", "j1", 0));
        sink.page(true, 50, 3).unwrap()
    }

    fn detail_out(d: DetailView<'_>) -> ExecutionDetailOut {
        ExecutionDetailOut {
            id: d.id.into(),
            job_id: d.job_id.into(),
            created_at: IsoTime(d.created_at),
            status: d.status.into(),
            detail: d.detail.into(),
            is_retry: d.is_retry,
            is_test: d.is_test,
            provider_id: d.provider_id.map(WireName::from),
            raw: d.raw.map(Into::into),
            source: d.source.into(),
        }
    }

    fn job_out(j: JobView<'_>, details: Vec<DetailView<'_>>) -> JobOut {
        let step: StepRef<'_> = serde_json::from_str(j.step).unwrap();
        JobOut {
            id: j.id.into(),
            job_type: step.step_type.as_str(),
            digest: j
                .digest
                .filter(|_| step.step_type == StepType::Digest)
                .map(|d| raw(&digest_member(d))),
            execution_details: details.into_iter().map(detail_out).collect(),
            step: JobStepOut {
                id: step.id.into_owned(),
                step_id: step.step_id.into_owned(),
                name: step.name.into_owned(),
                active: true,
                filters: raw(&step
                    .filters
                    .map_or_else(|| "[]".to_owned(), |f| wire_filters(f.get()))),
                template_id: "wf1".into(),
                parent_id: None,
                should_stop_on_fail: step.should_stop_on_fail,
                control_variables: raw(step.control_values.map_or("{}", RawValue::get)),
            },
            overrides: j.overrides.map(raw),
            payload: raw(j.payload),
            provider_id: WireName::from(j.provider_id),
            status: j.status.into(),
            created_at: IsoTime(j.created_at),
            updated_at: IsoTime(j.updated_at),
            run_at: IsoTime(j.run_at),
            schedule_extensions_count: j.schedule_extensions_count,
        }
    }

    fn activity_out(
        n: NotificationView<'_>,
        subscriber: Option<ActivitySubscriberOut>,
        name: &str,
        jobs: Vec<JobOut>,
    ) -> ActivityOut {
        ActivityOut {
            id: n.id.into(),
            environment_id: "env1".into(),
            organization_id: "org1".into(),
            subscriber_ref: n.subscriber_ref.into(),
            template_id: n.workflow_ref.into(),
            digested_notification_id: n.digested_notification_id.map(Into::into),
            transaction_id: n.transaction_id.into(),
            created_at: IsoTime(n.created_at),
            updated_at: IsoTime(n.updated_at),
            channels: raw(n.channels),
            subscriber,
            template: ActivityTemplateOut {
                id: n.workflow_ref.into(),
                name: name.into(),
                origin: WireName("svc-cloud".into()),
                triggers: vec![ActivityTriggerOut {
                    trigger_type: "event".into(),
                    identifier: n.workflow_identifier.into(),
                    variables: Vec::new(),
                }],
            },
            jobs,
            payload: raw(n.payload),
            to: n.to.and_then(to_member).map(|t| raw(&t)),
            tags: raw(n.tags),
            topics: serde_json::from_str(&super::topics_member(&n)).unwrap(),
            severity: n.severity.into(),
            critical: n.critical,
            context_keys: raw(n.context_keys),
        }
    }

    /// The same page through the schema types and serde.
    fn expected(with_workflow: bool) -> Vec<u8> {
        let name = if with_workflow {
            "Comment posted"
        } else {
            "comment-\"posted\""
        };
        let page = ActivityPage {
            has_more: true,
            data: vec![
                activity_out(
                    note("n1", "sub1"),
                    Some(ActivitySubscriberOut {
                        id: "sub1".into(),
                        subscriber_id: "ada".into(),
                        first_name: Some("Ada".into()),
                        last_name: None,
                        email: Some("ada@example.com".into()),
                        phone: None,
                    }),
                    name,
                    vec![
                        job_out(
                            job("j1", "n1", 0),
                            vec![
                                detail("d0", "j1", 0),
                                detail("d1", "j1", 0),
                                detail("d3", "j1", 2),
                            ],
                        ),
                        job_out(job("j2", "n1", 1), vec![detail("d2", "j2", 1)]),
                    ],
                ),
                activity_out(
                    note("n2", "gone"),
                    None,
                    name,
                    vec![job_out(job("j3", "n2", 1), Vec::new())],
                ),
            ],
            page_size: 50,
            page: 3,
        };
        serde_json::to_vec(&page).unwrap()
    }

    #[test]
    fn pages_are_what_the_schema_types_serialize_to() {
        for profile in [WireProfile::Spec, WireProfile::Novu] {
            for with_workflow in [true, false] {
                let (got, want) = with_profile(profile, || {
                    (rendered(with_workflow), expected(with_workflow))
                });
                assert_eq!(
                    String::from_utf8(got).unwrap(),
                    String::from_utf8(want).unwrap(),
                    "{profile:?}, workflow known: {with_workflow}"
                );
            }
        }
        // The profile shows in the output (the comparison above is not between two empty spellings).
        let novu = with_profile(WireProfile::Novu, || rendered(true));
        assert!(String::from_utf8(novu)
            .unwrap()
            .contains(r#""providerId":"novu-email""#));
    }

    #[test]
    fn one_record_is_the_object_alone() {
        let mut sink = ActivityJson::new(&tenant());
        sink.notification(note("n2", "gone"));
        let one: serde_json::Value = serde_json::from_slice(&sink.one().unwrap()).unwrap();
        assert_eq!(one["_id"], "n2");
        assert_eq!(one["_digestedNotificationId"], "n1");
        assert_eq!(one["jobs"], serde_json::json!([]));
        // Its subscriber was deleted: no profile, and no member the SDKs would refuse.
        assert_eq!(one.get("subscriber"), None);
        assert_eq!(one["_subscriberId"], "gone");
    }

    #[test]
    fn recipients_and_digests_take_the_shapes_the_sdks_want() {
        assert_eq!(
            to_member(r#""ada""#).as_deref(),
            Some(r#"{"subscriberId":"ada"}"#)
        );
        assert_eq!(
            to_member(r#"{"subscriberId":"ada","email":"a@x.io"}"#).as_deref(),
            Some(r#"{"subscriberId":"ada","email":"a@x.io"}"#)
        );
        assert_eq!(to_member("null"), None);
        // A merged job stored before digests kept their metadata; nulls left out.
        let merged: serde_json::Value =
            serde_json::from_str(&digest_member(r#"{"mergedInto":"j1"}"#)).unwrap();
        assert_eq!(
            merged,
            serde_json::json!({"type": "regular", "mergedInto": "j1"})
        );
        let stored = r#"{"type":"backoff","amount":null,"unit":null,"digestKey":null,"events":[]}"#;
        let clean: serde_json::Value = serde_json::from_str(&digest_member(stored)).unwrap();
        assert_eq!(clean, serde_json::json!({"type": "backoff", "events": []}));
    }

    #[test]
    fn an_unreadable_stored_step_fails_the_page() {
        let mut sink = ActivityJson::new(&tenant());
        sink.notification(note("n1", "sub1"));
        sink.job(JobView {
            step: "{not json",
            ..job("j1", "n1", 0)
        });
        assert!(sink.page(false, 10, 0).is_err());
    }
}
