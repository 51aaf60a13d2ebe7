//! Integrations: configured delivery (or agent) providers of an environment (spec §2.5).

use serde_json::Value;

use super::channel::{Channel, IntegrationKind, ProviderGroup, ProviderId};
use super::{EnvironmentId, IntegrationId, OrganizationId, Timestamp};

#[derive(Debug, Clone, PartialEq)]
pub struct Integration {
    pub id: IntegrationId,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub identifier: String,
    pub provider_id: ProviderId,
    pub channel: Option<Channel>,
    pub kind: IntegrationKind,
    /// AES-256-GCM ciphertext of the credentials JSON object.
    pub credentials_sealed: String,
    pub configurations: Option<Value>,
    pub conditions: Option<Value>,
    pub active: bool,
    pub primary: bool,
    pub priority: i64,
    pub deleted: bool,
    pub deleted_at: Option<Timestamp>,
    pub deleted_by: Option<String>,
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Integration {
    /// The order in which delivery tries a channel's integrations: the primary first, then by
    /// descending priority, then the newest.
    pub fn delivery_order(a: &Integration, b: &Integration) -> std::cmp::Ordering {
        b.primary
            .cmp(&a.primary)
            .then(b.priority.cmp(&a.priority))
            .then(b.created_at.0.cmp(&a.created_at.0))
    }
}

/// Why a provider/channel/kind combination is refused; `None` when it is consistent.
pub fn check_provider_channel(
    provider: &ProviderId,
    channel: Option<Channel>,
    kind: IntegrationKind,
) -> Option<String> {
    match (kind, provider.group(), channel) {
        (IntegrationKind::Agent, ProviderGroup::Agent, None) => None,
        (IntegrationKind::Agent, ProviderGroup::Agent, Some(_)) => {
            Some("agent integrations have no channel: omit channel".to_owned())
        }
        (IntegrationKind::Agent, _, _) => Some(format!(
            "provider {} is not an agent provider",
            provider.as_str()
        )),
        (IntegrationKind::Delivery, ProviderGroup::Agent, _) => Some(format!(
            "provider {} is an agent provider: set kind to agent",
            provider.as_str()
        )),
        (IntegrationKind::Delivery, _, None) => Some("channel is required".to_owned()),
        (IntegrationKind::Delivery, _, Some(c)) => match provider.channel() {
            Some(expected) if expected == c => None,
            Some(expected) => Some(format!(
                "provider {} delivers on channel {}, not {}",
                provider.as_str(),
                expected.as_str(),
                c.as_str()
            )),
            None => Some("channel is required".to_owned()),
        },
    }
}

/// `<slug of name>-<6 chars>`: the identifier given to an integration created without one.
pub fn generated_identifier(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    let suffix = &super::id::new_identifier("")[..6];
    if slug.is_empty() {
        format!("integration-{suffix}")
    } else {
        format!("{slug}-{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ProviderId {
        ProviderId::parse(s).unwrap()
    }

    #[test]
    fn provider_must_match_channel_and_kind() {
        assert_eq!(
            check_provider_channel(
                &p("sendgrid"),
                Some(Channel::Email),
                IntegrationKind::Delivery
            ),
            None
        );
        assert!(check_provider_channel(
            &p("sendgrid"),
            Some(Channel::Sms),
            IntegrationKind::Delivery
        )
        .is_some());
        assert!(check_provider_channel(&p("sendgrid"), None, IntegrationKind::Delivery).is_some());
        assert_eq!(
            check_provider_channel(&p("anthropic"), None, IntegrationKind::Agent),
            None
        );
        assert!(check_provider_channel(
            &p("anthropic"),
            Some(Channel::Chat),
            IntegrationKind::Agent
        )
        .is_some());
        assert!(check_provider_channel(&p("slack"), None, IntegrationKind::Agent).is_some());
        assert_eq!(
            check_provider_channel(&p("novu"), Some(Channel::InApp), IntegrationKind::Delivery),
            None
        );
    }

    #[test]
    fn generated_identifiers_are_slugs() {
        let id = generated_identifier("My SendGrid (prod)");
        assert!(id.starts_with("my-sendgrid-prod-"), "{id}");
        assert_eq!(id.len(), "my-sendgrid-prod-".len() + 6);
        assert!(generated_identifier("!!").starts_with("integration-"));
    }
}
