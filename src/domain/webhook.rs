//! Outbound webhooks (issue 39): the endpoints an environment's events are pushed to, as the official Svix
//! clients manage them, and their signing secrets. Pure rules; the store keeps the endpoints
//! (`store::webhooks`), the service checks what callers send (`service::webhooks`).

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::subscriber::present;
use super::{EnvironmentId, OrganizationId, Timestamp};

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
        !self.disabled
            && self
                .event_types
                .as_ref()
                .is_none_or(|types| types.iter().any(|t| t == kind))
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
        e.disabled = true;
        assert!(!e.receives("message.read"));
    }
}
