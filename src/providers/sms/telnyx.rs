//! `telnyx`: `POST /v2/messages` with `Authorization: Bearer <apiKey>` and a JSON body `{from, to, text}`,
//! plus `messaging_profile_id` from the `messageProfileId` credential when set (then `from` may be left
//! out and Telnyx picks a number of the profile).

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{api_url, require_from};
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Telnyx;

#[async_trait]
impl Provider for Telnyx {
    fn id(&self) -> &'static str {
        "telnyx"
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
        let api_key = ctx.credentials.require("apiKey")?;
        let profile = ctx.credentials.get("messageProfileId");
        let from = m.from.as_deref().map(str::trim).filter(|f| !f.is_empty());
        let mut body = json!({"to": m.to, "text": m.content});
        if from.is_none() && profile.is_none() {
            // Without a messaging profile, Telnyx needs the sending number.
            require_from(None, "Telnyx")?;
        }
        if let Some(from) = from {
            body["from"] = Value::from(from);
        }
        if let Some(profile) = profile {
            body["messaging_profile_id"] = Value::from(profile);
        }
        let url = api_url(
            &ctx.credentials.base_url("https://api.telnyx.com"),
            &["v2", "messages"],
        )?;
        let req = ctx.http.post(url).bearer_auth(&api_key).json(&body);
        Ok(http::send(req, "Telnyx messages")
            .await?
            .delivered("data.id"))
    }
}
