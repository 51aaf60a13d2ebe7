//! Values the phases' unit tests start from.

use std::time::Duration;

use serde_json::{json, Value};

use crate::domain::channel::ProviderId;
use crate::domain::integration::Integration;
use crate::domain::job::{Job, JobStatus, Notification};
use crate::domain::subscriber::{
    ChannelCredentials, ChannelSettings, Subscriber, SubscriberProfile,
};
use crate::domain::workflow::Step;
use crate::domain::{Channel, IntegrationKind, Timestamp};

/// A job of step `step-1`, of type `step_type` (`email`, `sms`, `chat`, `push`), with these controls and
/// overrides.
pub(super) fn step_job(step_type: &str, controls: Value, overrides: Option<Value>) -> Job {
    let step: Step =
        serde_json::from_value(json!({"_id": "s1", "stepId": "step-1", "name": "step",
        "type": step_type, "controlValues": controls}))
        .unwrap();
    Job {
        id: "job-1".into(),
        organization_id: "org-1".into(),
        environment_id: "env-1".into(),
        notification_id: "n-1".into(),
        subscriber_ref: "sref-1".into(),
        subscriber_id: "sub-1".into(),
        workflow_ref: "wf-1".into(),
        transaction_id: "tx-1".into(),
        step_index: 0,
        step,
        status: JobStatus::Queued,
        provider_id: crate::engine::provider_for(serde_json::from_value(json!(step_type)).unwrap())
            .into(),
        payload: json!({"plan": "free"}),
        overrides,
        digest: None,
        digest_key: None,
        run_at: Timestamp(0),
        attempts: 1,
        dedupe_key: "n-1:0".into(),
        schedule_extensions_count: 0,
        delivery: None,
        created_at: Timestamp(0),
        updated_at: Timestamp(0),
    }
}

pub(super) fn notification() -> Notification {
    Notification {
        id: "n-1".into(),
        organization_id: "org-1".into(),
        environment_id: "env-1".into(),
        subscriber_ref: "sref-1".into(),
        subscriber_id: "sub-1".into(),
        workflow_ref: "wf-1".into(),
        workflow_identifier: "welcome".into(),
        transaction_id: "tx-1".into(),
        channels: vec![],
        payload: json!({"plan": "free"}),
        overrides: None,
        to: None,
        actor: None,
        tags: vec![],
        severity: "none".into(),
        critical: false,
        context_keys: vec![],
        digested_notification_id: None,
        topic_id: None,
        topic_key: None,
        subscription_identifier: None,
        created_at: Timestamp(0),
        updated_at: Timestamp(0),
    }
}

/// Subscriber `sub-1`, with an email address, no phone and no channel settings.
pub(super) fn subscriber() -> Subscriber {
    Subscriber {
        id: "sref-1".into(),
        organization_id: "org-1".into(),
        environment_id: "env-1".into(),
        subscriber_id: "sub-1".into(),
        profile: SubscriberProfile {
            first_name: Some("Ada".into()),
            email: Some("ada@example.com".into()),
            ..SubscriberProfile::default()
        },
        channels: vec![],
        is_online: None,
        last_online_at: None,
        deleted: false,
        version: 1,
        created_at: Timestamp(0),
        updated_at: Timestamp(0),
    }
}

/// Channel settings of a subscriber for `provider_id`, linked to integration `integration_id`.
pub(super) fn settings(
    provider_id: &str,
    integration_id: &str,
    credentials: ChannelCredentials,
) -> ChannelSettings {
    ChannelSettings {
        provider_id: provider_id.into(),
        integration_identifier: None,
        credentials,
        integration_id: integration_id.into(),
    }
}

/// An active email integration `id` (identifier `<id>-identifier`) of `provider_id`, created at `created`.
pub(super) fn integration(id: &str, provider_id: &str, created: i64) -> Integration {
    Integration {
        id: id.into(),
        organization_id: "org-1".into(),
        environment_id: "env-1".into(),
        name: id.into(),
        identifier: format!("{id}-identifier"),
        provider_id: ProviderId::from(provider_id.to_owned()),
        channel: Some(Channel::Email),
        kind: IntegrationKind::Delivery,
        credentials_sealed: String::new(),
        configurations: None,
        conditions: None,
        active: true,
        primary: false,
        priority: 0,
        deleted: false,
        deleted_at: None,
        deleted_by: None,
        version: 1,
        created_at: Timestamp(created),
        updated_at: Timestamp(created),
    }
}

/// A backoff whose jitter draw is zero: waits are exactly the base doubled per attempt.
pub const NO_JITTER: super::retry::Backoff = super::retry::Backoff {
    base: Duration::from_millis(100),
    draw: 0.0,
};

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
