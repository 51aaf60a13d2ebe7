//! Channels and provider ids (spec §2.1). Provider ids are kept in their canonical `svc` spelling;
//! the `novu…` spelling is accepted on input and produced on output only by the wire profile.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    InApp,
    Email,
    Sms,
    Chat,
    Push,
}

impl Channel {
    pub const ALL: [Channel; 5] = [
        Channel::InApp,
        Channel::Email,
        Channel::Sms,
        Channel::Chat,
        Channel::Push,
    ];

    /// What a validation error says of a name that is not a channel.
    pub const EXPECTED: &'static str = "the channel must be one of in_app, email, sms, chat, push";

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::InApp => "in_app",
            Channel::Email => "email",
            Channel::Sms => "sms",
            Channel::Chat => "chat",
            Channel::Push => "push",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// Whether an integration delivers messages on a channel or is an agent integration (no channel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IntegrationKind {
    Delivery,
    Agent,
}

impl IntegrationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IntegrationKind::Delivery => "delivery",
            IntegrationKind::Agent => "agent",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "delivery" => Some(Self::Delivery),
            "agent" => Some(Self::Agent),
            _ => None,
        }
    }
}

impl TryFrom<String> for IntegrationKind {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s).ok_or_else(|| format!("unknown integration kind {s:?}"))
    }
}

impl TryFrom<String> for Channel {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s).ok_or_else(|| format!("unknown channel {s:?}"))
    }
}

impl From<String> for ProviderId {
    /// A stored id (see [`ProviderId::from_stored`]).
    fn from(s: String) -> Self {
        Self::from_stored(&s)
    }
}

/// The group a provider belongs to in the spec's ProviderId set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderGroup {
    Email,
    Sms,
    Push,
    /// `svc` itself: the in-app provider.
    InApp,
    Chat,
    Agent,
}

const EMAIL: &[&str] = &[
    "emailjs",
    "mailgun",
    "mailjet",
    "mandrill",
    "nodemailer",
    "postmark",
    "sendgrid",
    "sendinblue",
    "ses",
    "netcore",
    "infobip-email",
    "resend",
    "plunk",
    "mailersend",
    "mailtrap",
    "clickatell",
    "outlook365",
    "svc-email",
    "sparkpost",
    "email-webhook",
    "braze",
    "svc-email-agent",
];
const SMS: &[&str] = &[
    "nexmo",
    "plivo",
    "sms77",
    "sms-central",
    "sns",
    "telnyx",
    "twilio",
    "gupshup",
    "firetext",
    "infobip-sms",
    "burst-sms",
    "bulk-sms",
    "isend-sms",
    "forty-six-elks",
    "kannel",
    "maqsam",
    "termii",
    "africas-talking",
    "svc-sms",
    "sendchamp",
    "generic-sms",
    "clicksend",
    "bandwidth",
    "messagebird",
    "simpletexting",
    "azure-sms",
    "ring-central",
    "brevo-sms",
    "eazy-sms",
    "mobishastra",
    "afro-message",
    "unifonic",
    "smsmode",
    "imedia",
    "sinch",
    "isendpro-sms",
    "cm-telecom",
];
const PUSH: &[&str] = &[
    "fcm",
    "apns",
    "expo",
    "one-signal",
    "pushpad",
    "push-webhook",
    "pusher-beams",
    "appio",
];
const CHAT: &[&str] = &[
    "slack",
    "discord",
    "msteams",
    "mattermost",
    "ryver",
    "zulip",
    "grafana-on-call",
    "getstream",
    "rocket-chat",
    "whatsapp-business",
    "chat-webhook",
    "svc-slack",
    "telegram",
];
const AGENT: &[&str] = &["anthropic", "svc-anthropic", "anthropic-aws"];

/// Converts the `novu` spelling of an identifier (`novu`, `novu-email`, …) to the canonical `svc` one.
pub fn canonical_spelling(s: &str) -> std::borrow::Cow<'_, str> {
    if s == "novu" {
        return "svc".into();
    }
    match s.strip_prefix("novu-") {
        Some(rest) => format!("svc-{rest}").into(),
        None => s.into(),
    }
}

/// A provider id of the spec's full set, canonical spelling. Ids of the set borrow the static table;
/// only an id read back from the database that is not in it (a provider since removed) is owned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProviderId(Cow<'static, str>);

impl ProviderId {
    /// Accepts either spelling; `None` when the id is not in the spec's set.
    pub fn parse(s: &str) -> Option<Self> {
        known_provider(&canonical_spelling(s)).map(|id| Self(Cow::Borrowed(id)))
    }

    /// Trusted constructor for values read back from the database.
    pub fn from_stored(s: &str) -> Self {
        Self(match known_provider(s) {
            Some(id) => Cow::Borrowed(id),
            None => Cow::Owned(s.to_owned()),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as a `'static` string when it is one of the spec's set (always, for ids made by [`Self::parse`]).
    pub fn as_static(&self) -> Option<&'static str> {
        match self.0 {
            Cow::Borrowed(id) => Some(id),
            Cow::Owned(_) => None,
        }
    }

    pub fn group(&self) -> ProviderGroup {
        provider_group(&self.0).unwrap_or(ProviderGroup::Chat)
    }

    /// The channel this provider delivers on; `None` for agent providers.
    pub fn channel(&self) -> Option<Channel> {
        match self.group() {
            ProviderGroup::Email => Some(Channel::Email),
            ProviderGroup::Sms => Some(Channel::Sms),
            ProviderGroup::Push => Some(Channel::Push),
            ProviderGroup::InApp => Some(Channel::InApp),
            ProviderGroup::Chat => Some(Channel::Chat),
            ProviderGroup::Agent => None,
        }
    }

    /// True for the 21 chat and push providers a subscriber can hold credentials for.
    pub fn is_subscriber_provider(&self) -> bool {
        matches!(self.group(), ProviderGroup::Chat | ProviderGroup::Push)
    }
}

/// The spec's spelling of `s` from the static tables, when `s` is in the set.
fn known_provider(s: &str) -> Option<&'static str> {
    if s == "svc" {
        return Some("svc");
    }
    [EMAIL, SMS, PUSH, CHAT, AGENT]
        .into_iter()
        .flat_map(|group| group.iter())
        .find(|id| **id == s)
        .copied()
}

fn provider_group(s: &str) -> Option<ProviderGroup> {
    if s == "svc" {
        Some(ProviderGroup::InApp)
    } else if EMAIL.contains(&s) {
        Some(ProviderGroup::Email)
    } else if SMS.contains(&s) {
        Some(ProviderGroup::Sms)
    } else if PUSH.contains(&s) {
        Some(ProviderGroup::Push)
    } else if CHAT.contains(&s) {
        Some(ProviderGroup::Chat)
    } else if AGENT.contains(&s) {
        Some(ProviderGroup::Agent)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_accept_both_spellings_and_know_their_channel() {
        let p = ProviderId::parse("novu-email").unwrap();
        assert_eq!(p.as_str(), "svc-email");
        assert_eq!(p.channel(), Some(Channel::Email));
        assert_eq!(
            ProviderId::parse("novu").unwrap().channel(),
            Some(Channel::InApp)
        );
        assert_eq!(
            ProviderId::parse("svc-slack").unwrap().channel(),
            Some(Channel::Chat)
        );
        assert_eq!(ProviderId::parse("anthropic").unwrap().channel(), None);
        assert_eq!(
            ProviderId::parse("twilio").unwrap().channel(),
            Some(Channel::Sms)
        );
        assert_eq!(
            ProviderId::parse("fcm").unwrap().channel(),
            Some(Channel::Push)
        );
        assert!(ProviderId::parse("carrier-pigeon").is_none());
    }

    #[test]
    fn subscriber_providers_are_the_21_chat_and_push_ids() {
        assert_eq!(CHAT.len() + PUSH.len(), 21);
        assert!(ProviderId::parse("fcm").unwrap().is_subscriber_provider());
        assert!(ProviderId::parse("novu-slack")
            .unwrap()
            .is_subscriber_provider());
        assert!(!ProviderId::parse("sendgrid")
            .unwrap()
            .is_subscriber_provider());
        assert!(!ProviderId::parse("svc").unwrap().is_subscriber_provider());
    }

    #[test]
    fn set_sizes_match_the_spec() {
        assert_eq!(EMAIL.len(), 22);
        assert_eq!(SMS.len(), 37);
        assert_eq!(PUSH.len(), 8);
        assert_eq!(CHAT.len(), 13);
    }
}
