//! `sendgrid`: `POST /v3/mail/send` (Bearer `apiKey`); SendGrid answers `202` with an empty body and the
//! message id in `X-Message-Id`.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{apply_overrides, base64, passthrough_request, send_with_header_id, sender};
use crate::domain::Channel;
use crate::providers::{Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Sendgrid;

#[async_trait]
impl Provider for Sendgrid {
    fn id(&self) -> &'static str {
        "sendgrid"
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

        // SendGrid rejects an address that appears twice among a personalization's to, cc and bcc.
        let mut seen: Vec<String> = Vec::new();
        let mut unique = |list: &[String]| -> Vec<Value> {
            list.iter()
                .filter(|a| {
                    let key = a.trim().to_ascii_lowercase();
                    let fresh = !seen.contains(&key);
                    seen.push(key);
                    fresh
                })
                .map(|a| json!({"email": a}))
                .collect()
        };
        let mut personalization = json!({"to": unique(&m.to)});
        for (field, list) in [("cc", &m.cc), ("bcc", &m.bcc)] {
            let list = unique(list);
            if !list.is_empty() {
                personalization[field] = Value::Array(list);
            }
        }

        let mut sender_obj = json!({"email": from});
        if let Some(name) = m.sender_name.as_deref().filter(|n| !n.trim().is_empty()) {
            sender_obj["name"] = json!(name);
        }
        // text/plain must come before text/html.
        let mut content = Vec::new();
        if let Some(text) = m.text.as_deref().filter(|t| !t.is_empty()) {
            content.push(json!({"type": "text/plain", "value": text}));
        }
        content.push(json!({"type": "text/html", "value": m.html}));

        let mut body = json!({
            "personalizations": [personalization],
            "from": sender_obj,
            "subject": m.subject,
            "content": content,
        });
        if let Some(reply_to) = &m.reply_to {
            body["reply_to"] = json!({"email": reply_to});
        }
        if !m.attachments.is_empty() {
            body["attachments"] = m
                .attachments
                .iter()
                .map(|a| {
                    json!({
                        "content": base64(&a.content),
                        "filename": a.name,
                        "type": a.mime,
                        "disposition": "attachment",
                    })
                })
                .collect();
        }
        if !m.headers.is_empty() {
            body["headers"] = m
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        if let Some(pool) = ctx.credentials.get("ipPoolName") {
            body["ip_pool_name"] = json!(pool);
        }
        apply_overrides(ctx, &mut body);

        let url = format!(
            "{}/v3/mail/send",
            ctx.credentials.base_url("https://api.sendgrid.com")
        );
        let req = ctx.http.post(url).bearer_auth(api_key).json(&body);
        send_with_header_id(
            passthrough_request(ctx, req),
            "SendGrid mail/send",
            "x-message-id",
        )
        .await
    }
}
