//! Chat providers, and what they share: reading the destination ([`ChatTarget`]) and applying the trigger's
//! provider overrides to a request body.

mod discord;
mod mattermost;
mod msteams;
mod slack;
mod telegram;
mod webhook;

use serde_json::Value;

use super::http::api_url;
use super::with_overrides;
use super::{ChatTarget, Provider, ProviderError};
use crate::domain::endpoint::EndpointType;

/// Every supported chat provider.
pub const ALL: &[&dyn Provider] = &[
    &webhook::ChatWebhook,
    &slack::Slack,
    &discord::Discord,
    &msteams::MsTeams,
    &mattermost::Mattermost,
    &telegram::Telegram,
];

/// The chat provider registered under `id`.
pub fn lookup(id: &str) -> Option<&'static dyn Provider> {
    ALL.iter().copied().find(|p| p.id() == id)
}

/// An incoming-webhook destination.
struct Hook {
    url: String,
    /// The `channel` credential, or the `channel` of a webhook endpoint.
    channel: Option<String>,
}

/// The incoming webhook of `target`: the subscriber's `webhookUrl` credential or a `webhook` endpoint; any
/// other endpoint type is an error naming it.
fn hook(provider: &str, target: &ChatTarget) -> Result<Hook, ProviderError> {
    match target {
        ChatTarget::Webhook { url, channel } => Ok(Hook {
            url: url.clone(),
            channel: channel.clone(),
        }),
        ChatTarget::Endpoint {
            endpoint_type: EndpointType::Webhook,
            data,
            ..
        } => Ok(Hook {
            url: text(data, "url").unwrap_or_default(),
            channel: text(data, "channel"),
        }),
        ChatTarget::Endpoint { endpoint_type, .. } => Err(unsupported(provider, *endpoint_type)),
    }
}

/// A non-empty string field of an endpoint's data.
fn text(data: &Value, key: &str) -> Option<String> {
    data.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A field an endpoint of type `t` must have (endpoints are validated on creation, so this only fails for
/// data written around the API).
fn field(
    provider: &str,
    t: EndpointType,
    data: &Value,
    key: &str,
) -> Result<String, ProviderError> {
    text(data, key).ok_or_else(|| {
        ProviderError::permanent(format!(
            "{provider}: the {} endpoint has no `{key}`",
            t.as_str()
        ))
    })
}

/// The error for an endpoint type `provider` cannot deliver to.
fn unsupported(provider: &str, t: EndpointType) -> ProviderError {
    ProviderError::permanent(format!(
        "{provider} cannot deliver to a {} endpoint",
        t.as_str()
    ))
}

/// The access token of an endpoint's channel connection, which API-posting providers need.
fn access_token<'a>(
    provider: &str,
    t: EndpointType,
    token: &'a Option<String>,
) -> Result<&'a str, ProviderError> {
    token
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            ProviderError::permanent(format!(
                "The {} endpoint needs a channel connection: {provider} posts with the connection's access token, \
                 and this endpoint has none (set its connectionIdentifier)",
                t.as_str()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_merge_over_the_body_then_passthrough() {
        let body = json!({"channel": "C1", "text": "hi", "meta": {"a": 1, "b": 2}});
        let out = with_overrides(
            body.clone(),
            &json!({"blocks": [{"type": "divider"}], "meta": {"b": 3},
                    "_passthrough": {"body": {"text": "replaced"}, "headers": {"x": "y"}}}),
        );
        assert_eq!(
            out,
            json!({"channel": "C1", "text": "replaced", "meta": {"a": 1, "b": 3}, "blocks": [{"type": "divider"}]})
        );
        assert_eq!(with_overrides(body.clone(), &json!({})), body);
        assert_eq!(with_overrides(body.clone(), &Value::Null), body);
    }

    #[test]
    fn hooks_come_from_webhook_credentials_and_endpoints_only() {
        let h = hook(
            "x",
            &ChatTarget::Webhook {
                url: "https://h.example/1".into(),
                channel: Some("#ops".into()),
            },
        )
        .unwrap();
        assert_eq!(
            (h.url.as_str(), h.channel.as_deref()),
            ("https://h.example/1", Some("#ops"))
        );
        let h = hook(
            "x",
            &ChatTarget::Endpoint {
                endpoint_type: EndpointType::Webhook,
                data: json!({"url": "https://h.example/2"}),
                access_token: None,
                workspace: None,
            },
        )
        .unwrap();
        assert_eq!((h.url.as_str(), h.channel), ("https://h.example/2", None));
        let e = hook(
            "discord",
            &ChatTarget::Endpoint {
                endpoint_type: EndpointType::SlackChannel,
                data: json!({"channelId": "C1"}),
                access_token: None,
                workspace: None,
            },
        )
        .err()
        .unwrap();
        assert_eq!(
            e.message,
            "discord cannot deliver to a slack_channel endpoint"
        );
        assert!(!e.is_transient());
    }
}
