//! `plivo`: `POST /v1/Account/{accountSid}/Message/` with basic auth `accountSid:token` (Plivo's auth id
//! and token) and a JSON body `{src, dst, text}`.

use async_trait::async_trait;
use serde_json::json;

use super::{api_url, require_from};
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Plivo;

#[async_trait]
impl Provider for Plivo {
    fn id(&self) -> &'static str {
        "plivo"
    }

    fn channel(&self) -> Channel {
        Channel::Sms
    }

    async fn send(
        &self,
        ctx: &SendContext<'_>,
        msg: &Outbound,
    ) -> Result<Delivered, ProviderError> {
        let Outbound::Sms(m) = msg else {
            return Err(ProviderError::wrong_channel(self.id()));
        };
        let auth_id = ctx.credentials.require("accountSid")?;
        let token = ctx.credentials.require("token")?;
        let from = require_from(m.from.as_deref(), "Plivo")?;
        let url = api_url(
            &ctx.credentials.base_url("https://api.plivo.com"),
            &["v1", "Account", &auth_id, "Message", ""],
        )?;
        let req = ctx
            .http
            .post(url)
            .basic_auth(&auth_id, Some(&token))
            .json(&json!({"src": from, "dst": m.to, "text": m.content}));
        Ok(http::send(req, "Plivo Message")
            .await?
            .delivered("message_uuid.0"))
    }
}
