//! Channel endpoints (spec §2.2) and channel connections (§2.3): types, the shape each endpoint type
//! requires, and which providers each type suits.

use serde_json::Value;

use super::channel::{ProviderGroup, ProviderId};
use super::{Channel, EnvironmentId, OrganizationId, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointType {
    SlackChannel,
    SlackUser,
    Webhook,
    Phone,
    MsTeamsChannel,
    MsTeamsUser,
    TelegramChat,
}

impl EndpointType {
    pub const ALL: [EndpointType; 7] = [
        Self::SlackChannel,
        Self::SlackUser,
        Self::Webhook,
        Self::Phone,
        Self::MsTeamsChannel,
        Self::MsTeamsUser,
        Self::TelegramChat,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::SlackChannel => "slack_channel",
            Self::SlackUser => "slack_user",
            Self::Webhook => "webhook",
            Self::Phone => "phone",
            Self::MsTeamsChannel => "ms_teams_channel",
            Self::MsTeamsUser => "ms_teams_user",
            Self::TelegramChat => "telegram_chat",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether the endpoint data is a bearer secret, stored sealed: a webhook's URL lets anyone who has it
    /// post to the channel. The other types name a channel, a user or a number that is useless without the
    /// connection's or the integration's token (which are sealed themselves).
    pub fn is_secret(self) -> bool {
        self == Self::Webhook
    }

    /// (required keys, optional keys) of the `endpoint` object.
    fn keys(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Self::SlackChannel => (&["channelId"], &[]),
            Self::SlackUser => (&["userId"], &[]),
            Self::Webhook => (&["url"], &["channel"]),
            Self::Phone => (&["phoneNumber"], &[]),
            Self::MsTeamsChannel => (&["teamId", "channelId"], &[]),
            Self::MsTeamsUser => (&["userId"], &[]),
            Self::TelegramChat => (&["chatId"], &[]),
        }
    }

    /// Whether an endpoint of this type can be delivered through `provider`.
    pub fn suits(self, provider: &ProviderId) -> bool {
        let p = provider.as_str();
        match self {
            Self::SlackChannel | Self::SlackUser => matches!(p, "slack" | "svc-slack"),
            Self::MsTeamsChannel | Self::MsTeamsUser => p == "msteams",
            Self::TelegramChat => p == "telegram",
            Self::Phone => provider.group() == ProviderGroup::Sms || p == "whatsapp-business",
            Self::Webhook => matches!(
                p,
                "chat-webhook"
                    | "push-webhook"
                    | "email-webhook"
                    | "slack"
                    | "svc-slack"
                    | "discord"
                    | "msteams"
                    | "mattermost"
                    | "ryver"
                    | "zulip"
                    | "rocket-chat"
                    | "grafana-on-call"
                    | "getstream"
            ),
        }
    }
}

impl TryFrom<String> for EndpointType {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s).ok_or_else(|| format!("unknown endpoint type {s:?}"))
    }
}

/// Checks `endpoint` against `t`: exactly the type's keys, string values, E.164 phone numbers, absolute
/// http(s) webhook URLs. `Err` explains what is wrong.
pub fn validate_endpoint(t: EndpointType, endpoint: &Value) -> Result<(), String> {
    let Some(map) = endpoint.as_object() else {
        return Err("endpoint must be an object".to_owned());
    };
    let (required, optional) = t.keys();
    for key in required {
        match map.get(*key) {
            Some(Value::String(s)) if !s.trim().is_empty() => {}
            Some(_) => return Err(format!("{key} must be a non-empty string")),
            None => return Err(format!("{key} is required")),
        }
    }
    for (key, value) in map {
        if optional.contains(&key.as_str()) {
            if !value.is_string() {
                return Err(format!("{key} must be a string"));
            }
        } else if !required.contains(&key.as_str()) {
            return Err(format!("{key} is not a field of {}", t.as_str()));
        }
    }
    match t {
        EndpointType::Phone => {
            let n = map["phoneNumber"].as_str().unwrap_or_default();
            if !is_e164(n) {
                return Err("phoneNumber must be in E.164 format, e.g. +14155550123".to_owned());
            }
        }
        EndpointType::Webhook => {
            let u = map["url"].as_str().unwrap_or_default();
            match url::Url::parse(u) {
                Ok(parsed)
                    if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {}
                _ => return Err("url must be an absolute http(s) URL".to_owned()),
            }
        }
        _ => {}
    }
    Ok(())
}

/// `+` followed by 2 to 15 digits, the first not 0.
pub fn is_e164(s: &str) -> bool {
    let Some(digits) = s.strip_prefix('+') else {
        return false;
    };
    (2..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0')
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChannelEndpoint {
    pub id: String,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub identifier: String,
    pub endpoint_type: EndpointType,
    pub endpoint: Value,
    pub integration_identifier: String,
    pub provider_id: ProviderId,
    pub channel: Channel,
    pub connection_identifier: Option<String>,
    pub subscriber_id: Option<String>,
    pub context_keys: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A channel endpoint as the list shows it: only the shown fields, each as the stored text (the JSON
/// columns included), written into the page as it is: nothing parsed, interned or serialized again.
#[derive(Debug)]
pub struct EndpointListing {
    pub id: String,
    pub identifier: String,
    /// An [`EndpointType`]'s name.
    pub endpoint_type: String,
    /// JSON object.
    pub endpoint: String,
    pub integration_identifier: String,
    /// A canonical provider id (`svc-…` spellings included).
    pub provider_id: String,
    /// A [`Channel`]'s name.
    pub channel: String,
    pub connection_identifier: Option<String>,
    pub subscriber_id: Option<String>,
    /// A JSON array of strings.
    pub context_keys: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionMode {
    Subscriber,
    Shared,
}

impl ConnectionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Subscriber => "subscriber",
            Self::Shared => "shared",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "subscriber" => Some(Self::Subscriber),
            "shared" => Some(Self::Shared),
            _ => None,
        }
    }
}

impl TryFrom<String> for ConnectionMode {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s).ok_or_else(|| format!("unknown connection mode {s:?}"))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChannelConnection {
    pub id: String,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub identifier: String,
    pub integration_identifier: String,
    pub provider_id: ProviderId,
    pub channel: Channel,
    pub mode: ConnectionMode,
    pub subscriber_id: Option<String>,
    pub context_keys: Vec<String>,
    /// `{id, name?}`.
    pub workspace: Value,
    /// Decrypted access token.
    pub access_token: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoints_must_match_their_type_exactly() {
        use EndpointType::*;
        assert!(validate_endpoint(SlackChannel, &json!({"channelId": "C1"})).is_ok());
        assert!(validate_endpoint(SlackChannel, &json!({"userId": "U1"})).is_err());
        assert!(
            validate_endpoint(SlackChannel, &json!({"channelId": "C1", "extra": "x"})).is_err()
        );
        assert!(validate_endpoint(SlackChannel, &json!({"channelId": 5})).is_err());
        assert!(validate_endpoint(MsTeamsChannel, &json!({"teamId": "T"})).is_err());
        assert!(
            validate_endpoint(MsTeamsChannel, &json!({"teamId": "T", "channelId": "C"})).is_ok()
        );
        assert!(validate_endpoint(
            Webhook,
            &json!({"url": "https://x.example/h", "channel": "#a"})
        )
        .is_ok());
        assert!(validate_endpoint(Webhook, &json!({"url": "ftp://x.example/h"})).is_err());
        assert!(validate_endpoint(Webhook, &json!({"url": "/relative"})).is_err());
        assert!(
            validate_endpoint(Webhook, &json!({"url": "https://x.example", "channel": 1})).is_err()
        );
        assert!(validate_endpoint(Phone, &json!({"phoneNumber": "+14155550123"})).is_ok());
        assert!(validate_endpoint(Phone, &json!({"phoneNumber": "4155550123"})).is_err());
        assert!(validate_endpoint(Phone, &json!({"phoneNumber": "+0123"})).is_err());
        assert!(validate_endpoint(TelegramChat, &json!({"chatId": "-100"})).is_ok());
        assert!(validate_endpoint(TelegramChat, &json!("x")).is_err());
    }

    #[test]
    fn types_suit_their_providers() {
        let p = |s| ProviderId::parse(s).unwrap();
        assert!(EndpointType::SlackChannel.suits(&p("slack")));
        assert!(EndpointType::SlackChannel.suits(&p("novu-slack")));
        assert!(!EndpointType::SlackChannel.suits(&p("msteams")));
        assert!(EndpointType::MsTeamsUser.suits(&p("msteams")));
        assert!(EndpointType::Phone.suits(&p("twilio")));
        assert!(!EndpointType::Phone.suits(&p("slack")));
        assert!(EndpointType::Webhook.suits(&p("chat-webhook")));
        assert!(!EndpointType::Webhook.suits(&p("sendgrid")));
        assert!(EndpointType::TelegramChat.suits(&p("telegram")));
    }
}
