//! `mailersend`: `POST /v1/email` (Bearer `apiKey`); MailerSend answers `202` with an empty body and the
//! message id in `X-Message-Id`.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{apply_overrides, base64, passthrough_request, send_with_header_id, sender};
use crate::domain::Channel;
use crate::providers::{Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Mailersend;

#[async_trait]
impl Provider for Mailersend {
    fn id(&self) -> &'static str {
        "mailersend"
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

        let recipients =
            |list: &[String]| -> Value { list.iter().map(|a| json!({"email": a})).collect() };
        let mut sender_obj = json!({"email": from});
        if let Some(name) = m.sender_name.as_deref().filter(|n| !n.trim().is_empty()) {
            sender_obj["name"] = json!(name);
        }
        let mut body = json!({
            "from": sender_obj,
            "to": recipients(&m.to),
            "subject": m.subject,
            "html": m.html,
        });
        if let Some(text) = m.text.as_deref().filter(|t| !t.is_empty()) {
            body["text"] = json!(text);
        }
        if !m.cc.is_empty() {
            body["cc"] = recipients(&m.cc);
        }
        if !m.bcc.is_empty() {
            body["bcc"] = recipients(&m.bcc);
        }
        if let Some(reply_to) = &m.reply_to {
            body["reply_to"] = json!({"email": reply_to});
        }
        if !m.headers.is_empty() {
            body["headers"] = m
                .headers
                .iter()
                .map(|(k, v)| json!({"name": k, "value": v}))
                .collect();
        }
        if !m.attachments.is_empty() {
            body["attachments"] = m
                .attachments
                .iter()
                .map(|a| {
                    json!({
                        "filename": a.name,
                        "content": base64(&a.content),
                        "disposition": "attachment",
                    })
                })
                .collect();
        }
        apply_overrides(ctx, &mut body);

        let url = format!(
            "{}/v1/email",
            ctx.credentials.base_url("https://api.mailersend.com")
        );
        let req = ctx.http.post(url).bearer_auth(api_key).json(&body);
        send_with_header_id(
            passthrough_request(ctx, req),
            "MailerSend email",
            "x-message-id",
        )
        .await
    }
}
