//! `mattermost`: POSTs `{"text", "channel"}` to the Mattermost incoming webhook (the subscriber's
//! `webhookUrl` credential or a `webhook` endpoint); `channel` (the subscriber's `channel` credential or the
//! endpoint's) is sent only when set, else the webhook posts to its own channel.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{hook, with_overrides};
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Mattermost;

#[async_trait]
impl Provider for Mattermost {
    fn id(&self) -> &'static str {
        "mattermost"
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
        let hook = hook(self.id(), &m.target)?;
        let mut body = json!({"text": m.content});
        if let Some(channel) = hook.channel {
            body["channel"] = Value::String(channel);
        }
        let body = with_overrides(body, ctx.overrides);
        let answer = http::post_webhook(ctx, &hook.url, &body, "The Mattermost webhook").await?;
        // Mattermost answers the text `ok`; it has no message id.
        Ok(Delivered {
            id: None,
            raw: answer.raw,
            invalid_tokens: Vec::new(),
        })
    }
}
