//! `postmark`: `POST /email` with the server token in `X-Postmark-Server-Token`; the answer's `MessageID` is
//! the message id.

use async_trait::async_trait;
use serde_json::json;

use super::{apply_overrides, base64, named, passthrough_request, sender, with_error_detail};
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Postmark;

#[async_trait]
impl Provider for Postmark {
    fn id(&self) -> &'static str {
        "postmark"
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
        let token = ctx.credentials.require("apiKey")?;
        let from = sender(ctx, m)?;

        let mut body = json!({
            "From": named(&from, m.sender_name.as_deref()),
            "To": m.to.join(", "),
            "Subject": m.subject,
            "HtmlBody": m.html,
        });
        if let Some(text) = m.text.as_deref().filter(|t| !t.is_empty()) {
            body["TextBody"] = json!(text);
        }
        if !m.cc.is_empty() {
            body["Cc"] = json!(m.cc.join(", "));
        }
        if !m.bcc.is_empty() {
            body["Bcc"] = json!(m.bcc.join(", "));
        }
        if let Some(reply_to) = &m.reply_to {
            body["ReplyTo"] = json!(reply_to);
        }
        if !m.headers.is_empty() {
            body["Headers"] = m
                .headers
                .iter()
                .map(|(k, v)| json!({"Name": k, "Value": v}))
                .collect();
        }
        if !m.attachments.is_empty() {
            body["Attachments"] = m
                .attachments
                .iter()
                .map(|a| {
                    json!({
                        "Name": a.name,
                        "Content": base64(&a.content),
                        "ContentType": a.mime,
                    })
                })
                .collect();
        }
        apply_overrides(ctx, &mut body);

        let url = format!(
            "{}/email",
            ctx.credentials.base_url("https://api.postmarkapp.com")
        );
        let req = ctx
            .http
            .post(url)
            .header("accept", "application/json")
            .header("x-postmark-server-token", token)
            .json(&body);
        let answer = http::send(passthrough_request(ctx, req), "Postmark email")
            .await
            .map_err(with_error_detail)?;
        Ok(answer.delivered("MessageID"))
    }
}
