//! `chat-webhook`: POSTs the chat message as JSON to the destination's webhook URL (the subscriber's
//! `webhookUrl` credential or a `webhook` channel endpoint), signed with the `secretKey` credential.

use async_trait::async_trait;
use serde_json::json;

use crate::domain::endpoint::EndpointType;
use crate::domain::Channel;
use crate::providers::{
    http, ChatTarget, Delivered, Outbound, Provider, ProviderError, SendContext,
};

pub struct ChatWebhook;

#[async_trait]
impl Provider for ChatWebhook {
    fn id(&self) -> &'static str {
        "chat-webhook"
    }

    fn channel(&self) -> Channel {
        Channel::Chat
    }

    async fn send(
        &self,
        ctx: &SendContext<'_>,
        msg: &Outbound,
    ) -> Result<Delivered, ProviderError> {
        let Outbound::Chat(m) = msg else {
            return Err(ProviderError::wrong_channel(self.id()));
        };
        let (url, channel) = match &m.target {
            ChatTarget::Webhook { url, channel } => (url.clone(), channel.clone()),
            ChatTarget::Endpoint {
                endpoint_type: EndpointType::Webhook,
                data,
                ..
            } => (
                data.get("url")
                    .and_then(|u| u.as_str())
                    .unwrap_or_default()
                    .to_owned(),
                data.get("channel")
                    .and_then(|c| c.as_str())
                    .map(str::to_owned),
            ),
            ChatTarget::Endpoint { endpoint_type, .. } => {
                return Err(ProviderError::permanent(format!(
                    "chat-webhook cannot deliver to a {} endpoint",
                    endpoint_type.as_str()
                )))
            }
        };
        let body = json!({"content": m.content, "channel": channel, "payload": m.payload});
        let answer = http::post_webhook(ctx, &url, &body, "The chat webhook").await?;
        Ok(answer.delivered("id"))
    }
}
