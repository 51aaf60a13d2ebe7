//! `email-webhook`: POSTs the email as JSON to the `webhookUrl` credential, signed with `secretKey`.

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::json;

use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct EmailWebhook;

#[async_trait]
impl Provider for EmailWebhook {
    fn id(&self) -> &'static str {
        "email-webhook"
    }

    fn channel(&self) -> Channel {
        Channel::Email
    }

    async fn send(
        &self,
        ctx: &SendContext<'_>,
        msg: &Outbound,
    ) -> Result<Delivered, ProviderError> {
        let Outbound::Email(m) = msg else {
            return Err(ProviderError::wrong_channel(self.id()));
        };
        let url = ctx.credentials.require("webhookUrl")?;
        let attachments: Vec<_> = m
            .attachments
            .iter()
            .map(|a| {
                json!({
                    "name": a.name,
                    "mime": a.mime,
                    "file": base64::engine::general_purpose::STANDARD.encode(&a.content),
                })
            })
            .collect();
        let body = json!({
            "to": m.to,
            "from": m.from,
            "senderName": m.sender_name,
            "subject": m.subject,
            "html": m.html,
            "text": m.text,
            "replyTo": m.reply_to,
            "cc": m.cc,
            "bcc": m.bcc,
            "attachments": attachments,
            "headers": m.headers.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "payload": m.payload,
        });
        let answer = http::post_webhook(ctx, &url, &body, "The email webhook").await?;
        Ok(answer.delivered("id"))
    }
}
