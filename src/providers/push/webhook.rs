//! `push-webhook`: POSTs the push notification with its device tokens as JSON to the `webhookUrl`
//! credential, signed with `secretKey`.

use async_trait::async_trait;
use serde_json::json;

use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct PushWebhook;

#[async_trait]
impl Provider for PushWebhook {
    fn id(&self) -> &'static str {
        "push-webhook"
    }

    fn channel(&self) -> Channel {
        Channel::Push
    }

    async fn send(
        &self,
        ctx: &SendContext<'_>,
        msg: &Outbound,
    ) -> Result<Delivered, ProviderError> {
        let Outbound::Push(m) = msg else {
            return Err(ProviderError::wrong_channel(self.id()));
        };
        let url = ctx.credentials.require("webhookUrl")?;
        let body = json!({
            "target": m.tokens,
            "title": m.title,
            "content": m.content,
            "payload": m.data,
            "overrides": ctx.overrides,
        });
        let answer = http::post_webhook(ctx, &url, &body, "The push webhook").await?;
        Ok(answer.delivered("id"))
    }
}
