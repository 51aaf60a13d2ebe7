//! Notifications (one per trigger and subscriber), jobs (one per notification step), execution details
//! and messages: what the engine produces and the activity feed reads.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::workflow::Step;
use super::{
    EnvironmentId, JobId, MessageId, NotificationId, OrganizationId, SubscriberRef, Timestamp,
    WorkflowRef,
};

/// Job states (Novu's names). A trigger creates the job of every step of its workflow: the first
/// `queued`, the others `pending` until the chain reaches them (a pending job is never claimed). A queued
/// job is `running` once a worker claims it, then ends `completed`, `failed`, `skipped` (its filters did
/// not match, or the chain stopped before it: throttled, or its event merged into an open digest),
/// `canceled` (`DELETE /v1/events/trigger/{transactionId}`, or an earlier step failed with
/// `shouldStopOnFail`), or `merged` (a digest job whose event joined another job's digest).
///
/// Stored and written on the wire as [`JobStatus::as_str`] (the serde form is the same). `Default` only lets
/// the store's job outcome be built with `..Default::default()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    #[default]
    Pending,
    Queued,
    Running,
    Completed,
    Failed,
    Skipped,
    Canceled,
    Merged,
}

impl JobStatus {
    pub const ALL: [JobStatus; 8] = [
        Self::Pending,
        Self::Queued,
        Self::Running,
        Self::Completed,
        Self::Failed,
        Self::Skipped,
        Self::Canceled,
        Self::Merged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Canceled => "canceled",
            Self::Merged => "merged",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl TryFrom<String> for JobStatus {
    type Error = String;

    /// A stored status; the error names the value.
    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s).ok_or_else(|| format!("unknown job status {s:?}"))
    }
}

/// Execution-detail states (Novu's names): what one event of a job's run says. Stored and written on the
/// wire as [`DetailStatus::as_str`] (the serde form is the same). Novu also has `ReadConfirmation`, which
/// nothing here records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DetailStatus {
    /// Under way: the first step queued by its trigger, a failover to the next integration.
    Pending,
    /// A later step reached by the chain.
    Queued,
    Success,
    /// Neither: throttled, canceled, invalid device tokens removed, …
    Warning,
    Failed,
}

impl DetailStatus {
    pub const ALL: [DetailStatus; 5] = [
        Self::Pending,
        Self::Queued,
        Self::Success,
        Self::Warning,
        Self::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Queued => "Queued",
            Self::Success => "Success",
            Self::Warning => "Warning",
            Self::Failed => "Failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl TryFrom<String> for DetailStatus {
    type Error = String;

    /// A stored status; the error names the value.
    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s).ok_or_else(|| format!("unknown execution detail status {s:?}"))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub id: NotificationId,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub subscriber_ref: SubscriberRef,
    pub subscriber_id: String,
    pub workflow_ref: WorkflowRef,
    pub workflow_identifier: String,
    pub transaction_id: String,
    pub channels: Vec<String>,
    pub payload: Value,
    pub overrides: Option<Value>,
    pub to: Option<Value>,
    pub actor: Option<Value>,
    pub tags: Vec<String>,
    pub severity: String,
    pub critical: bool,
    pub context_keys: Vec<String>,
    pub digested_notification_id: Option<NotificationId>,
    /// Through a topic: the topic and the identifier of the subscription that reached the subscriber.
    pub topic_id: Option<String>,
    pub topic_key: Option<String>,
    pub subscription_identifier: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: JobId,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub notification_id: NotificationId,
    pub subscriber_ref: SubscriberRef,
    pub subscriber_id: String,
    pub workflow_ref: WorkflowRef,
    pub transaction_id: String,
    pub step_index: i64,
    pub step: Step,
    pub status: JobStatus,
    pub provider_id: String,
    pub payload: Value,
    pub overrides: Option<Value>,
    pub digest: Option<Value>,
    pub digest_key: Option<String>,
    pub run_at: Timestamp,
    pub attempts: i64,
    pub dedupe_key: String,
    pub schedule_extensions_count: i64,
    /// Retry and failover state of a channel step (`engine::deliver`); `None` before its first attempt.
    pub delivery: Option<Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A notification as the activity feed shows it, borrowed from a row: only what the feed writes, the JSON
/// columns as the stored text (written into the response as they are, never parsed). Its organization and
/// environment are the reader's (every read is scoped to them), so they are not read.
#[derive(Debug, Clone, Copy)]
pub struct NotificationView<'a> {
    pub id: &'a str,
    pub subscriber_ref: &'a str,
    pub subscriber_id: &'a str,
    pub workflow_ref: &'a str,
    pub workflow_identifier: &'a str,
    pub transaction_id: &'a str,
    /// JSON array of channel names.
    pub channels: &'a str,
    pub payload: &'a str,
    pub to: Option<&'a str>,
    /// JSON array of strings.
    pub tags: &'a str,
    pub severity: &'a str,
    pub critical: bool,
    /// JSON array of `type:id` strings.
    pub context_keys: &'a str,
    pub digested_notification_id: Option<&'a str>,
    /// Reached through a topic: the topic's id and key.
    pub topic_id: Option<&'a str>,
    pub topic_key: Option<&'a str>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A job's state as the store's `jobs_of` reads it.
#[derive(Debug, Clone)]
pub struct JobSummary {
    pub id: JobId,
    pub notification_id: NotificationId,
    pub step_index: i64,
    pub status: JobStatus,
    pub provider_id: String,
    pub run_at: Timestamp,
    pub created_at: Timestamp,
}

impl TryFrom<JobView<'_>> for JobSummary {
    type Error = String;

    fn try_from(v: JobView<'_>) -> Result<Self, String> {
        Ok(Self {
            id: v.id.into(),
            notification_id: v.notification_id.into(),
            step_index: v.step_index,
            status: JobStatus::try_from(v.status.to_owned())?,
            provider_id: v.provider_id.to_owned(),
            run_at: v.run_at,
            created_at: v.created_at,
        })
    }
}

/// A job as the activity feed writes it, borrowed from a row; `step` is the stored step's JSON text. Its
/// workflow is its notification's.
#[derive(Debug, Clone, Copy)]
pub struct JobView<'a> {
    pub id: &'a str,
    pub notification_id: &'a str,
    pub step_index: i64,
    pub step: &'a str,
    /// A [`JobStatus`] as stored: the feed writes it as it is.
    pub status: &'a str,
    pub provider_id: &'a str,
    pub payload: &'a str,
    pub overrides: Option<&'a str>,
    pub digest: Option<&'a str>,
    pub run_at: Timestamp,
    pub schedule_extensions_count: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// An execution detail as the activity feed writes it, borrowed from a row.
#[derive(Debug, Clone, Copy)]
pub struct DetailView<'a> {
    pub id: &'a str,
    pub job_id: &'a str,
    /// A [`DetailStatus`] as stored.
    pub status: &'a str,
    pub detail: &'a str,
    pub source: &'a str,
    pub is_retry: bool,
    pub is_test: bool,
    pub provider_id: Option<&'a str>,
    pub raw: Option<&'a str>,
    pub created_at: Timestamp,
}

impl Job {
    /// The dedupe key of the job for step `index` of a notification: a retried step never makes a second job.
    pub fn dedupe(notification_id: &NotificationId, index: i64) -> String {
        format!("{notification_id}:{index}")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionDetail {
    pub id: String,
    pub environment_id: EnvironmentId,
    pub job_id: JobId,
    pub notification_id: NotificationId,
    pub status: DetailStatus,
    pub detail: String,
    /// `Credentials`, `Internal`, `Payload`, `Webhook`.
    pub source: String,
    pub is_retry: bool,
    pub is_test: bool,
    pub provider_id: Option<String>,
    pub raw: Option<String>,
    pub created_at: Timestamp,
}

impl ExecutionDetail {
    /// A new detail of `job`: a retry when the job ran before.
    pub fn for_job(job: &Job, status: DetailStatus, source: &str, text: impl Into<String>) -> Self {
        Self {
            id: super::new_object_id(),
            environment_id: job.environment_id.clone(),
            job_id: job.id.clone(),
            notification_id: job.notification_id.clone(),
            status,
            detail: text.into(),
            source: source.to_owned(),
            is_retry: job.attempts > 1,
            is_test: false,
            provider_id: Some(job.provider_id.clone()),
            raw: None,
            created_at: Timestamp::now(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: MessageId,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub notification_id: NotificationId,
    pub subscriber_ref: SubscriberRef,
    pub subscriber_id: String,
    pub workflow_ref: WorkflowRef,
    pub workflow_identifier: String,
    pub job_id: JobId,
    pub transaction_id: String,
    pub channel: super::Channel,
    pub subject: Option<String>,
    pub content: String,
    pub avatar: Option<String>,
    pub cta: Value,
    pub data: Option<Value>,
    pub payload: Value,
    pub overrides: Option<Value>,
    pub read: bool,
    pub seen: bool,
    pub last_read_date: Option<Timestamp>,
    pub last_seen_date: Option<Timestamp>,
    /// Archived by the subscriber (the Inbox's archive); archived messages stay readable.
    pub archived: bool,
    pub archived_at: Option<Timestamp>,
    /// When the subscriber first saw it (kept when it is marked unseen and seen again).
    pub first_seen_date: Option<Timestamp>,
    /// Hidden from the Inbox until then (the Inbox's snooze); a time past means it is back.
    pub snoozed_until: Option<Timestamp>,
    /// Its notification's tags and severity, which the Inbox filters by.
    pub tags: Vec<String>,
    pub severity: super::workflow::Severity,
    pub status: MessageStatus,
    pub provider_id: String,
    pub context_keys: Vec<String>,
    pub deleted: bool,
    /// Where a channel message went and how its delivery ended (empty for in-app messages).
    pub delivery: MessageDelivery,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// How a message's delivery ended: `sent`, or `error` (its provider refused it, or it could not be sent).
/// Stored and written on the wire as [`MessageStatus::as_str`] (the serde form is the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    Sent,
    Error,
}

impl MessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Error => "error",
        }
    }
}

impl TryFrom<String> for MessageStatus {
    type Error = String;

    /// A stored status; the error names the value.
    fn try_from(s: String) -> Result<Self, String> {
        match s.as_str() {
            "sent" => Ok(Self::Sent),
            "error" => Ok(Self::Error),
            _ => Err(format!("unknown message status {s:?}")),
        }
    }
}

impl Message {
    /// A new message of `job` (of notification `n`) on `channel`, created now: unread, unseen, not archived,
    /// with an empty body, the default redirect `cta`, status `sent` and no delivery record. The step fills in
    /// what it rendered and how it ended.
    pub fn of_job(job: &Job, n: &Notification, channel: super::Channel) -> Self {
        let now = Timestamp::now();
        Message {
            id: MessageId::new(),
            organization_id: job.organization_id.clone(),
            environment_id: job.environment_id.clone(),
            notification_id: job.notification_id.clone(),
            subscriber_ref: job.subscriber_ref.clone(),
            subscriber_id: job.subscriber_id.clone(),
            workflow_ref: job.workflow_ref.clone(),
            workflow_identifier: n.workflow_identifier.clone(),
            job_id: job.id.clone(),
            transaction_id: job.transaction_id.clone(),
            channel,
            subject: None,
            content: String::new(),
            avatar: None,
            cta: serde_json::json!({"type": "redirect", "data": {}}),
            data: None,
            payload: job.payload.clone(),
            overrides: job.overrides.clone(),
            read: false,
            seen: false,
            last_read_date: None,
            last_seen_date: None,
            archived: false,
            archived_at: None,
            first_seen_date: None,
            snoozed_until: None,
            tags: n.tags.clone(),
            // The notification's severity was checked when the workflow was saved.
            severity: super::workflow::Severity::parse(&n.severity)
                .unwrap_or(super::workflow::Severity::None),
            status: MessageStatus::Sent,
            provider_id: job.provider_id.clone(),
            context_keys: n.context_keys.clone(),
            deleted: false,
            delivery: MessageDelivery::default(),
            created_at: now,
            updated_at: now,
        }
    }
}

/// The delivery record of an email, SMS, chat or push message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageDelivery {
    pub email: Option<String>,
    pub phone: Option<String>,
    pub direct_webhook_url: Option<String>,
    pub device_tokens: Option<Vec<String>>,
    pub delivered_at: Option<Timestamp>,
    pub error_id: Option<String>,
    pub error_text: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_statuses_round_trip_through_their_stored_and_serde_forms() {
        let names: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "pending",
                "queued",
                "running",
                "completed",
                "failed",
                "skipped",
                "canceled",
                "merged"
            ]
        );
        for s in JobStatus::ALL {
            assert_eq!(JobStatus::parse(s.as_str()), Some(s));
            assert_eq!(JobStatus::try_from(s.as_str().to_owned()), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(
                serde_json::from_value::<JobStatus>(s.as_str().into()).unwrap(),
                s
            );
        }
        assert_eq!(JobStatus::parse("Completed"), None);
        assert_eq!(
            JobStatus::try_from("done".to_owned()),
            Err("unknown job status \"done\"".to_owned())
        );
    }

    #[test]
    fn detail_statuses_round_trip_through_their_stored_and_serde_forms() {
        let names: Vec<&str> = DetailStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ["Pending", "Queued", "Success", "Warning", "Failed"]);
        for s in DetailStatus::ALL {
            assert_eq!(DetailStatus::parse(s.as_str()), Some(s));
            assert_eq!(DetailStatus::try_from(s.as_str().to_owned()), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(
                serde_json::from_value::<DetailStatus>(s.as_str().into()).unwrap(),
                s
            );
        }
        assert_eq!(DetailStatus::parse("success"), None);
        assert_eq!(
            DetailStatus::try_from("ReadConfirmation".to_owned()),
            Err("unknown execution detail status \"ReadConfirmation\"".to_owned())
        );
    }
}
