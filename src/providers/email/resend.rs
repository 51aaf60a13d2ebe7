//! `resend`: `POST /emails` (Bearer `apiKey`); the answer's `id` is the message id.

use async_trait::async_trait;
use serde_json::json;

use super::{apply_overrides, base64, named, passthrough_request, sender, with_error_detail};
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Resend;

#[async_trait]
impl Provider for Resend {
    fn id(&self) -> &'static str {
        "resend"
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
        let api_key = ctx.credentials.require("apiKey")?;
        let from = sender(ctx, m)?;

        let mut body = json!({
            "from": named(&from, m.sender_name.as_deref()),
            "to": m.to,
            "subject": m.subject,
            "html": m.html,
        });
        if let Some(text) = m.text.as_deref().filter(|t| !t.is_empty()) {
            body["text"] = json!(text);
        }
        if !m.cc.is_empty() {
            body["cc"] = json!(m.cc);
        }
        if !m.bcc.is_empty() {
            body["bcc"] = json!(m.bcc);
        }
        if let Some(reply_to) = &m.reply_to {
            body["reply_to"] = json!(reply_to);
        }
        if !m.headers.is_empty() {
            body["headers"] = m
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        if !m.attachments.is_empty() {
            body["attachments"] = m
                .attachments
                .iter()
                .map(|a| {
                    json!({
                        "filename": a.name,
                        "content": base64(&a.content),
                        "content_type": a.mime,
                    })
                })
                .collect();
        }
        apply_overrides(ctx, &mut body);

        let url = format!(
            "{}/emails",
            ctx.credentials.base_url("https://api.resend.com")
        );
        let req = ctx.http.post(url).bearer_auth(api_key).json(&body);
        let answer = http::send(passthrough_request(ctx, req), "Resend emails")
            .await
            .map_err(with_error_detail)?;
        Ok(answer.delivered("id"))
    }
}
