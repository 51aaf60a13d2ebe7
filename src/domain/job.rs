//! Notifications (one per trigger and subscriber), jobs (one per notification step), execution details
//! and messages: what the engine produces and the activity feed reads.

use serde_json::value::RawValue;
use serde_json::Value;

use super::workflow::{Step, StepSummary};
use super::Timestamp;

/// Job states. A job is `queued` until a worker claims it (`running`), then ends `completed`, `failed`,
/// `skipped` (filtered out or after a failed step with `shouldStopOnFail`), `canceled`, or `merged` (its
/// event was collapsed into another job's digest).
pub mod status {
    pub const QUEUED: &str = "queued";
    pub const RUNNING: &str = "running";
    pub const COMPLETED: &str = "completed";
    pub const FAILED: &str = "failed";
    pub const SKIPPED: &str = "skipped";
    pub const CANCELED: &str = "canceled";
    pub const MERGED: &str = "merged";
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub id: String,
    pub organization_id: String,
    pub environment_id: String,
    pub subscriber_ref: String,
    pub subscriber_id: String,
    pub workflow_ref: String,
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
    pub digested_notification_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: String,
    pub organization_id: String,
    pub environment_id: String,
    pub notification_id: String,
    pub subscriber_ref: String,
    pub subscriber_id: String,
    pub workflow_ref: String,
    pub transaction_id: String,
    pub step_index: i64,
    pub step: Step,
    pub status: String,
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

/// A notification as the activity feed shows it: only what the feed writes, the JSON columns kept as the
/// stored text (written into the response as they are, never parsed into maps and vectors).
#[derive(Debug, Clone)]
pub struct NotificationSummary {
    pub id: String,
    pub organization_id: String,
    pub environment_id: String,
    pub subscriber_ref: String,
    pub subscriber_id: String,
    pub workflow_ref: String,
    pub workflow_identifier: String,
    pub transaction_id: String,
    /// JSON array of channel names.
    pub channels: Box<RawValue>,
    pub payload: Box<RawValue>,
    pub to: Option<Box<RawValue>>,
    /// JSON array of strings.
    pub tags: Box<RawValue>,
    pub severity: String,
    pub critical: bool,
    /// JSON array of `type:id` strings.
    pub context_keys: Box<RawValue>,
    pub digested_notification_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A job as the activity feed shows it: only what the feed writes, the JSON columns kept as the stored text.
#[derive(Debug, Clone)]
pub struct JobSummary {
    pub id: String,
    pub notification_id: String,
    pub workflow_ref: String,
    pub step_index: i64,
    pub step: StepSummary,
    pub status: String,
    pub provider_id: String,
    pub payload: Box<RawValue>,
    pub overrides: Option<Box<RawValue>>,
    pub digest: Option<Box<RawValue>>,
    pub run_at: Timestamp,
    pub schedule_extensions_count: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Job {
    /// The dedupe key of the job for step `index` of a notification: a retried step never makes a second job.
    pub fn dedupe(notification_id: &str, index: i64) -> String {
        format!("{notification_id}:{index}")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionDetail {
    pub id: String,
    pub environment_id: String,
    pub job_id: String,
    pub notification_id: String,
    /// `Success`, `Warning`, `Failed`, `Pending`, `Queued`, `ReadConfirmation`.
    pub status: String,
    pub detail: String,
    /// `Credentials`, `Internal`, `Payload`, `Webhook`.
    pub source: String,
    pub is_retry: bool,
    pub is_test: bool,
    pub provider_id: Option<String>,
    pub raw: Option<String>,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub organization_id: String,
    pub environment_id: String,
    pub notification_id: String,
    pub subscriber_ref: String,
    pub subscriber_id: String,
    pub workflow_ref: String,
    pub workflow_identifier: String,
    pub job_id: String,
    pub transaction_id: String,
    pub channel: String,
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
    pub status: String,
    pub provider_id: String,
    pub context_keys: Vec<String>,
    pub deleted: bool,
    /// Where a channel message went and how its delivery ended (empty for in-app messages).
    pub delivery: MessageDelivery,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
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
