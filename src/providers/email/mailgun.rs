//! `mailgun`: `POST /v3/<domain>/messages` as `multipart/form-data`, HTTP basic auth `api:<apiKey>` (the
//! `user` credential replaces `api` when set). The `eu` region uses `api.eu.mailgun.net`.

use async_trait::async_trait;
use reqwest::multipart::{Form, Part};

use super::{named, override_fields, passthrough_request, scalar, sender, with_error_detail};
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Mailgun;

#[async_trait]
impl Provider for Mailgun {
    fn id(&self) -> &'static str {
        "mailgun"
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
        let domain = ctx.credentials.require("domain")?;
        let from = sender(ctx, m)?;

        let mut form = Form::new()
            .text("from", named(&from, m.sender_name.as_deref()))
            .text("subject", m.subject.clone())
            .text("html", m.html.clone());
        for to in &m.to {
            form = form.text("to", to.clone());
        }
        if let Some(text) = m.text.as_deref().filter(|t| !t.is_empty()) {
            form = form.text("text", text.to_owned());
        }
        for cc in &m.cc {
            form = form.text("cc", cc.clone());
        }
        for bcc in &m.bcc {
            form = form.text("bcc", bcc.clone());
        }
        if let Some(reply_to) = &m.reply_to {
            form = form.text("h:Reply-To", reply_to.clone());
        }
        for (k, v) in &m.headers {
            form = form.text(format!("h:{k}"), v.clone());
        }
        // Override fields become form fields (`o:tag`, `v:order`, …); an array repeats its field.
        for (k, v) in override_fields(ctx) {
            let values = match v {
                serde_json::Value::Array(items) => items.iter().filter_map(scalar).collect(),
                v => scalar(v).into_iter().collect::<Vec<_>>(),
            };
            for v in values {
                form = form.text(k.clone(), v);
            }
        }
        for a in &m.attachments {
            let part = Part::bytes(a.content.clone())
                .file_name(a.name.clone())
                .mime_str(&a.mime)
                .or_else(|_| {
                    Part::bytes(a.content.clone())
                        .file_name(a.name.clone())
                        .mime_str("application/octet-stream")
                })
                .map_err(|e| {
                    ProviderError::permanent(format!("Mailgun: attachment {}: {e}", a.name))
                })?;
            form = form.part("attachment", part);
        }

        let default = if ctx
            .credentials
            .get("region")
            .is_some_and(|r| r.eq_ignore_ascii_case("eu"))
        {
            "https://api.eu.mailgun.net"
        } else {
            "https://api.mailgun.net"
        };
        let url = format!("{}/v3/{domain}/messages", ctx.credentials.base_url(default));
        let user = ctx
            .credentials
            .get("user")
            .unwrap_or_else(|| "api".to_owned());
        let req = ctx
            .http
            .post(url)
            .basic_auth(user, Some(api_key))
            .multipart(form);
        let answer = http::send(passthrough_request(ctx, req), "Mailgun messages")
            .await
            .map_err(with_error_detail)?;
        Ok(answer.delivered("id"))
    }
}
