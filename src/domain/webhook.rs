//! Outbound webhooks (issue 39): the endpoints an environment's events are pushed to, as the official Svix
//! clients manage them, and their signing secrets. Pure rules; the store keeps the endpoints
//! (`store::webhooks`), the service checks what callers send (`service::webhooks`).

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use serde_json::Value;

use super::job::{Message, MessageStatus};
use super::preference::{SubscriberPreference, WorkflowDefaults};
use super::subscriber::present;
use super::workflow::Workflow;
use super::{Channel, EnvironmentId, OrganizationId, Timestamp};

/// The events Tidings sends, with Novu's names.
pub const EVENT_TYPES: [&str; 16] = [
    "message.sent",
    "message.failed",
    "message.delivered",
    "message.seen",
    "message.read",
    "message.unread",
    "message.archived",
    "message.unarchived",
    "message.snoozed",
    "message.unsnoozed",
    "message.deleted",
    "workflow.created",
    "workflow.updated",
    "workflow.deleted",
    "workflow.published",
    "preference.updated",
];

/// Tidings' operational events, Svix's names: about the endpoints themselves rather than the notifications.
/// An endpoint receives them only when its `eventTypes` names them (one without a filter takes
/// [`EVENT_TYPES`]).
pub const OPERATIONAL_TYPES: [&str; 1] = ["endpoint.disabled"];

/// Whether an endpoint filtering on `types` (`None`: no filter) receives events of type `kind`.
pub fn types_receive(types: Option<&[String]>, kind: &str) -> bool {
    match types {
        None => !OPERATIONAL_TYPES.contains(&kind),
        Some(types) => types.iter().any(|t| t == kind),
    }
}

/// The types an endpoint may filter on: Novu's events, then the operational ones.
pub fn known_types() -> impl Iterator<Item = &'static str> {
    EVENT_TYPES.into_iter().chain(OPERATIONAL_TYPES)
}

/// What every endpoint secret starts with (Standard Webhooks).
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes of a secret Tidings makes (Svix's size).
const SECRET_BYTES: usize = 24;
/// The sizes of a secret's key a caller may give, in bytes (Standard Webhooks: 24 to 64).
const SECRET_KEY_BYTES: std::ops::RangeInclusive<usize> = 24..=64;
/// How long a rotated-out secret keeps signing, unless the rotation says otherwise: 24 hours, as Svix.
pub const ROTATION_GRACE_MS: i64 = 24 * 60 * 60 * 1000;

/// An endpoint of an environment: where its events go, which ones, and the secrets that sign them.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookEndpoint {
    /// `ep_` and 24 hex characters, so ids sort by creation.
    pub id: String,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    /// The caller's own unique name for it, usable wherever the id is.
    pub uid: Option<String>,
    pub url: String,
    pub description: String,
    pub disabled: bool,
    /// The event types it receives; `None`: all of them.
    pub event_types: Option<Vec<String>>,
    /// Svix's message channels; kept and shown, not yet used to filter (Tidings sends no channels).
    pub channels: Option<Vec<String>>,
    pub metadata: BTreeMap<String, String>,
    /// Most messages per second it is sent; `None`: no limit.
    pub throttle_rate: Option<i64>,
    pub secrets: EndpointSecrets,
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl WebhookEndpoint {
    /// A new endpoint of the environment, with a new id, signing with `secret`, every other field at its
    /// default (no URL yet).
    pub fn new(
        organization_id: OrganizationId,
        environment_id: EnvironmentId,
        secret: String,
        now: Timestamp,
    ) -> Self {
        Self {
            id: format!("ep_{}", super::new_object_id()),
            organization_id,
            environment_id,
            uid: None,
            url: String::new(),
            description: String::new(),
            disabled: false,
            event_types: None,
            channels: None,
            metadata: BTreeMap::new(),
            throttle_rate: None,
            secrets: EndpointSecrets::new(secret),
            version: 0,
            created_at: now,
            updated_at: now,
        }
    }

    /// Whether an event of type `kind` goes to this endpoint.
    pub fn receives(&self, kind: &str) -> bool {
        !self.disabled && types_receive(self.event_types.as_deref(), kind)
    }
}

/// What a caller sets on an endpoint, as Svix's clients send it when creating (`EndpointIn`), replacing
/// (`EndpointUpdate`/`EndpointUpsertIn`) and patching (`EndpointPatch`) one. On create and replace, a field
/// left out takes its default; on patch, it is left as it is; `null` clears a nullable one. Older clients
/// (1.x) send `filterTypes` and `rateLimit`: both spellings are read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EndpointIn)]
pub struct EndpointInput {
    pub url: Option<String>,
    pub description: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub uid: Option<Option<String>>,
    pub disabled: Option<bool>,
    #[serde(default, deserialize_with = "present", alias = "filterTypes")]
    #[schema(value_type = Option<Vec<String>>)]
    pub event_types: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    pub channels: Option<Option<Vec<String>>>,
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "present", alias = "rateLimit")]
    #[schema(value_type = Option<i64>)]
    pub throttle_rate: Option<Option<i64>>,
    /// Create only: `whsec_` + base64 of 24 to 64 bytes; a new one is made when absent.
    pub secret: Option<String>,
}

/// An endpoint's signing secrets, stored sealed: the current one, and those rotated out that still sign
/// until their time is up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointSecrets {
    /// `whsec_` + base64.
    pub key: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous: Vec<RetiredSecret>,
}

/// A secret rotated out, which signs beside the current one until `until` (epoch ms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredSecret {
    pub key: String,
    pub until: i64,
}

impl EndpointSecrets {
    pub fn new(key: String) -> Self {
        Self {
            key,
            previous: Vec::new(),
        }
    }

    /// The secrets that sign a message sent at `now`: the current one first.
    pub fn signing_keys(&self, now: Timestamp) -> impl Iterator<Item = &str> {
        std::iter::once(self.key.as_str()).chain(
            self.previous
                .iter()
                .filter(move |r| r.until > now.0)
                .map(|r| r.key.as_str()),
        )
    }

    /// Makes `key` the current secret; the old one signs for `grace_ms` more (none at 0). Those whose time is
    /// up are dropped.
    pub fn rotate(&mut self, key: String, now: Timestamp, grace_ms: i64) {
        let old = std::mem::replace(&mut self.key, key);
        self.previous.retain(|r| r.until > now.0);
        if grace_ms > 0 {
            self.previous.push(RetiredSecret {
                key: old,
                until: now.0 + grace_ms,
            });
        }
    }
}

/// The signature header of a message (`webhook-signature`, and `svix-signature` alike): `v1,<base64
/// HMAC-SHA256 of "{msg_id}.{timestamp}.{body}">` for each secret that signs at `now`, the current one first,
/// separated by spaces, so that a receiver holding either secret of a rotation accepts it. `timestamp` is the
/// `webhook-timestamp` header's, in Unix seconds.
pub fn signature(
    secrets: &EndpointSecrets,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
    now: Timestamp,
) -> Result<String, standardwebhooks::WebhookError> {
    let signatures = secrets
        .signing_keys(now)
        .map(|key| standardwebhooks::Webhook::new(key)?.sign(msg_id, timestamp, body))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(signatures.join(" "))
}

/// The object an event is about (the envelope's `object`), from its type's prefix: `message`, `workflow`,
/// `preference` or `endpoint`.
pub fn object_of(kind: &str) -> &str {
    kind.split_once('.').map_or(kind, |(object, _)| object)
}

/// An event's envelope, the body every attempt of its messages sends: `{id, type, object, data, timestamp,
/// environmentId}`, where `id` is `evt_` + `oid` (the messages' id is `msg_` + the same `oid`) and
/// `environmentId` the environment's public identifier (`applicationIdentifier`), as Novu sends it.
pub fn envelope(oid: &str, kind: &str, data: &Value, at: Timestamp, environment: &str) -> String {
    serde_json::json!({
        "id": format!("evt_{oid}"),
        "type": kind,
        "object": object_of(kind),
        "data": data,
        "timestamp": at.to_iso(),
        "environmentId": environment,
    })
    .to_string()
}

/// The events a new message emits, as Novu emits them once its step ran: `message.sent` for a message that
/// went out (an in-app one is `message.delivered` at once too), `message.failed` for one whose delivery
/// failed.
pub fn new_message_events(m: &Message) -> &'static [&'static str] {
    match (m.status, m.channel) {
        (MessageStatus::Error, _) => &["message.failed"],
        (MessageStatus::Sent, Channel::InApp) => &["message.sent", "message.delivered"],
        (MessageStatus::Sent, _) => &["message.sent"],
    }
}

/// A message event's `data`: `{object: <message>}`, and for `message.failed` its `error`. The message in
/// Novu's webhook shape; a field without a value is left out.
pub fn message_data(kind: &str, m: &Message) -> Value {
    let iso = |t: Option<Timestamp>| t.map(|t| Value::String(t.to_iso()));
    let mut object = serde_json::json!({
        "_id": m.id.as_str(),
        "_templateId": m.workflow_ref.as_str(),
        "_environmentId": m.environment_id.as_str(),
        "_organizationId": m.organization_id.as_str(),
        "_notificationId": m.notification_id.as_str(),
        "_jobId": m.job_id.as_str(),
        "subscriberId": m.subscriber_id,
        "templateIdentifier": m.workflow_identifier,
        "workflowId": m.workflow_identifier,
        "transactionId": m.transaction_id,
        "channel": m.channel.as_str(),
        "seen": m.seen,
        "read": m.read,
        "archived": m.archived,
        "status": m.status.as_str(),
        "providerId": m.provider_id,
        "contextKeys": m.context_keys,
        "createdAt": m.created_at.to_iso(),
        "updatedAt": m.updated_at.to_iso(),
    });
    let optional = [
        ("archivedAt", iso(m.archived_at)),
        ("snoozedUntil", iso(m.snoozed_until)),
        ("deliveredAt", iso(m.delivery.delivered_at)),
        ("lastSeenDate", iso(m.last_seen_date)),
        ("firstSeenDate", iso(m.first_seen_date)),
        ("lastReadDate", iso(m.last_read_date)),
        ("errorId", m.delivery.error_id.clone().map(Value::String)),
        (
            "errorText",
            m.delivery.error_text.clone().map(Value::String),
        ),
    ];
    if let Value::Object(fields) = &mut object {
        for (key, value) in optional {
            if let Some(v) = value {
                fields.insert(key.to_owned(), v);
            }
        }
        if m.channel == Channel::InApp {
            fields.insert("providerResponseId".into(), m.id.as_str().into());
        }
    }
    let mut data = serde_json::json!({ "object": object });
    if kind == "message.failed" {
        let text = m
            .delivery
            .error_text
            .as_deref()
            .unwrap_or("delivery failed");
        data["error"] = serde_json::json!({ "message": text });
    }
    data
}

/// A `preference.updated` event's `data`: the level as saved (`global`, or `template` for one workflow, with
/// the workflow), its channels as they now apply, and the subscriber's id.
pub fn preference_data(
    p: &SubscriberPreference,
    workflow: Option<&Workflow>,
    subscriber_id: &str,
) -> Value {
    let defaults = WorkflowDefaults::of(workflow.and_then(|w| w.preferences.as_ref()));
    let channels: serde_json::Map<String, Value> = Channel::ALL
        .iter()
        .zip(defaults.channels)
        .map(|(c, default)| {
            (
                c.as_str().to_owned(),
                Value::Bool(p.channels.get(*c).unwrap_or(default)),
            )
        })
        .collect();
    let mut object = serde_json::json!({
        "level": if workflow.is_some() { "template" } else { "global" },
        "enabled": p.enabled.unwrap_or(true),
        "channels": channels,
    });
    if let Some(w) = workflow {
        object["workflow"] = serde_json::json!({
            "id": w.id.as_str(),
            "identifier": w.workflow_id,
            "name": w.name,
            "critical": w.critical,
            "tags": w.tags,
            "severity": w.severity,
        });
    }
    serde_json::json!({ "object": object, "subscriberId": subscriber_id })
}

/// An example event of type `kind` (`send-example`): the type as Tidings names it and made-up `data` in the
/// shape real events have; `None` for a type Tidings does not send.
pub fn example_data(kind: &str) -> Option<(&'static str, Value)> {
    let kind = known_types().find(|t| *t == kind)?;
    let at = "2026-01-01T00:00:00.000Z";
    let data = match object_of(kind) {
        "message" => serde_json::json!({"object": {
            "_id": "000000000000000000000001", "_templateId": "000000000000000000000002",
            "_environmentId": "000000000000000000000003", "_organizationId": "000000000000000000000004",
            "_notificationId": "000000000000000000000005", "_jobId": "000000000000000000000006",
            "subscriberId": "example-subscriber", "templateIdentifier": "example-workflow",
            "workflowId": "example-workflow", "transactionId": "example-transaction", "channel": "in_app",
            "seen": false, "read": false, "archived": false, "status": "sent", "providerId": "svc",
            "contextKeys": [], "createdAt": at, "updatedAt": at}}),
        "workflow" => serde_json::json!({"object": {
            "_id": "000000000000000000000002", "workflowId": "example-workflow", "slug": "example-workflow",
            "name": "Example workflow", "tags": [], "active": true, "status": "ACTIVE", "critical": false,
            "severity": "none", "steps": [], "createdAt": at, "updatedAt": at}}),
        "preference" => serde_json::json!({
            "object": {"level": "global", "enabled": true,
                "channels": {"in_app": true, "email": false, "sms": true, "chat": true, "push": true}},
            "subscriberId": "example-subscriber"}),
        "endpoint" => endpoint_disabled_data(
            "example-app",
            "ep_000000000000000000000001",
            Some("example-endpoint"),
            Timestamp(1_767_225_600_000),
        ),
        _ => return None,
    };
    Some((kind, data))
}

/// The `data` of `endpoint.disabled`, as Svix sends it: the application (the environment's public
/// identifier), the endpoint, and when its failures began; `trigger` is `automatic` (5 days of failures).
pub fn endpoint_disabled_data(
    app_id: &str,
    endpoint_id: &str,
    endpoint_uid: Option<&str>,
    failing_since: Timestamp,
) -> Value {
    let mut data = serde_json::json!({
        "appId": app_id,
        "endpointId": endpoint_id,
        "failSince": failing_since.to_iso(),
        "trigger": "automatic",
    });
    if let Some(uid) = endpoint_uid {
        data["endpointUid"] = Value::String(uid.to_owned());
    }
    data
}

/// A new secret: `whsec_` + base64 of 24 random bytes.
pub fn new_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// A secret a caller gave (`whsec_` optional), as stored (`whsec_` + base64), or why it is refused.
pub fn parse_secret(given: &str) -> Result<String, &'static str> {
    let encoded = given.strip_prefix(SECRET_PREFIX).unwrap_or(given);
    let key = STANDARD
        .decode(encoded)
        .map_err(|_| "secret must be base64, optionally prefixed with whsec_")?;
    if !SECRET_KEY_BYTES.contains(&key.len()) {
        return Err("secret must hold 24 to 64 bytes");
    }
    Ok(format!("{SECRET_PREFIX}{encoded}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_made_and_checked_as_standard_webhooks_says() {
        let made = new_secret();
        assert!(made.starts_with("whsec_"), "{made}");
        assert_eq!(parse_secret(&made).as_deref(), Ok(made.as_str()));
        assert_ne!(made, new_secret());
        let vector = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        assert_eq!(parse_secret(vector).as_deref(), Ok(vector));
        assert_eq!(
            parse_secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").as_deref(),
            Ok(vector)
        );
        assert!(parse_secret("whsec_c2hvcnQ=").is_err());
        assert!(parse_secret("whsec_not base64!").is_err());
    }

    /// The vectors of `../shared/reference/webhooks.md`, computed with the official `standardwebhooks` library.
    #[test]
    fn signatures_match_the_standard_webhooks_vectors() {
        let secrets = EndpointSecrets::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into());
        let now = Timestamp(0);
        let sign = |s: &EndpointSecrets, id: &str, ts: i64, body: &str| {
            signature(s, id, ts, body.as_bytes(), now).unwrap()
        };
        assert_eq!(
            sign(
                &secrets,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                r#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        let body = r#"{"id":"evt_1","type":"message.sent"}"#;
        let first = "v1,2Y627bw+6Cb9Zv1qvQbvIviOllqkO3sVpS3bzYUkk/A=";
        assert_eq!(sign(&secrets, "msg_1", 1700000000, body), first);
        // While rotating, the new secret signs first and the old one after it.
        let mut rotating = secrets.clone();
        rotating.rotate(new_secret(), now, 1_000);
        let both = sign(&rotating, "msg_1", 1700000000, body);
        let (new, old) = both.split_once(' ').unwrap();
        assert!(new.starts_with("v1,") && new != first, "{both}");
        assert_eq!(old, first);
        assert_eq!(
            signature(
                &rotating,
                "msg_1",
                1700000000,
                body.as_bytes(),
                Timestamp(1_000)
            )
            .unwrap(),
            new
        );
    }

    #[test]
    fn a_rotated_secret_signs_until_its_grace_ends() {
        let mut s = EndpointSecrets::new("whsec_old".into());
        s.rotate("whsec_new".into(), Timestamp(1_000), 500);
        let keys: Vec<&str> = s.signing_keys(Timestamp(1_200)).collect();
        assert_eq!(keys, ["whsec_new", "whsec_old"]);
        let keys: Vec<&str> = s.signing_keys(Timestamp(1_500)).collect();
        assert_eq!(keys, ["whsec_new"]);
        // Expired ones are dropped at the next rotation; no grace keeps none.
        s.rotate("whsec_newer".into(), Timestamp(2_000), 0);
        assert!(s.previous.is_empty());
    }

    #[test]
    fn an_endpoint_receives_its_types_unless_disabled() {
        let mut e = WebhookEndpoint::new(
            OrganizationId::new(),
            EnvironmentId::new(),
            new_secret(),
            Timestamp(0),
        );
        assert!(e.id.starts_with("ep_") && e.id.len() == 27, "{}", e.id);
        assert!(e.receives("message.sent"));
        e.event_types = Some(vec!["message.read".into()]);
        assert!(!e.receives("message.sent"));
        assert!(e.receives("message.read"));
        e.event_types = None;
        assert!(
            !e.receives("endpoint.disabled"),
            "operational events only by name"
        );
        e.event_types = Some(vec!["endpoint.disabled".into()]);
        assert!(e.receives("endpoint.disabled"));
        e.disabled = true;
        assert!(!e.receives("endpoint.disabled"));
    }
}
