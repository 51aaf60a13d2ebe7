//! A fan-out: a trigger to topics (or to every subscriber, a broadcast) recorded at once and expanded into
//! one notification per recipient by workers, batch after batch, from a cursor over the sources.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::job::Notification;
use super::workflow::{Step, StepType};
use super::{
    EnvironmentId, NotificationId, OrganizationId, SubscriberRef, Timestamp, TopicId, WorkflowRef,
};

/// Where a fan-out's recipients come from, expanded in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Source {
    /// A topic's subscriptions, in subscription-id order, but the subscriberIds in `exclude`.
    #[serde(rename_all = "camelCase")]
    Topic {
        topic_id: TopicId,
        topic_key: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        exclude: Vec<String>,
    },
    /// Every subscriber of the environment, in `_id` order (a broadcast).
    Everyone,
}

/// What every notification of a fan-out is made of (the trigger's, as it was when the trigger was recorded:
/// a workflow changed during the expansion does not change the notifications still to come).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Template {
    pub workflow_ref: WorkflowRef,
    pub workflow_identifier: String,
    pub steps: Vec<Step>,
    /// The provider each step type shows before its delivery (see `service::events::step_providers`).
    pub providers: Vec<(StepType, String)>,
    pub channels: Vec<String>,
    pub payload: Value,
    pub overrides: Option<Value>,
    pub actor: Option<Value>,
    pub tags: Vec<String>,
    pub severity: String,
    pub critical: bool,
    pub context_keys: Vec<String>,
}

/// A fan-out as stored: the template, the sources, who is never reached, and how far the expansion got.
#[derive(Debug, Clone, PartialEq)]
pub struct Fanout {
    pub id: String,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub transaction_id: String,
    pub template: Template,
    pub sources: Vec<Source>,
    /// subscriberIds skipped in every source: the trigger's actor.
    pub skip: Vec<String>,
    /// How far the expansion got.
    pub position: Position,
    /// Notifications written so far.
    pub recipients: i64,
    pub status: FanoutStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Where a fan-out's expansion is. Stored as [`FanoutStatus::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FanoutStatus {
    /// Batches remain; a worker claims the next.
    Running,
    /// Every source was expanded.
    Completed,
    /// Its trigger was canceled (`DELETE /v1/events/trigger/{transactionId}`) before the expansion ended.
    Canceled,
}

impl FanoutStatus {
    pub const ALL: [FanoutStatus; 3] = [Self::Running, Self::Completed, Self::Canceled];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Canceled => "canceled",
        }
    }
}

impl TryFrom<String> for FanoutStatus {
    type Error = String;

    /// A stored status; the error names the value.
    fn try_from(s: String) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| format!("unknown fan-out status {s:?}"))
    }
}

/// How far a fan-out got: the source being expanded, and the last subscription (or subscriber) id of it
/// already expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub source_index: i64,
    pub cursor: String,
}

/// One recipient: the subscriber, and — reached through a topic — the subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    pub subscriber_ref: SubscriberRef,
    pub subscriber_id: String,
    pub subscription: Option<Subscription>,
}

/// The topic and subscription through which a notification reached its subscriber.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    pub topic_id: TopicId,
    pub topic_key: String,
    pub identifier: String,
}

impl Template {
    /// The notification of one recipient of this template, in a trigger of `transaction_id`.
    pub fn notification(
        &self,
        organization_id: &OrganizationId,
        environment_id: &EnvironmentId,
        transaction_id: &str,
        reached: &Reached,
        now: Timestamp,
    ) -> Notification {
        let (topic_id, topic_key, subscription_identifier) = match &reached.subscription {
            Some(s) => (
                Some(s.topic_id.as_str().to_owned()),
                Some(s.topic_key.clone()),
                Some(s.identifier.clone()),
            ),
            None => (None, None, None),
        };
        Notification {
            id: NotificationId::new(),
            organization_id: organization_id.clone(),
            environment_id: environment_id.clone(),
            subscriber_ref: reached.subscriber_ref.clone(),
            subscriber_id: reached.subscriber_id.clone(),
            workflow_ref: self.workflow_ref.clone(),
            workflow_identifier: self.workflow_identifier.clone(),
            transaction_id: transaction_id.to_owned(),
            channels: self.channels.clone(),
            payload: self.payload.clone(),
            overrides: self.overrides.clone(),
            to: Some(serde_json::json!({ "subscriberId": reached.subscriber_id })),
            actor: self.actor.clone(),
            tags: self.tags.clone(),
            severity: self.severity.clone(),
            critical: self.critical,
            context_keys: self.context_keys.clone(),
            digested_notification_id: None,
            topic_id,
            topic_key,
            subscription_identifier,
            created_at: now,
            updated_at: now,
        }
    }
}
