//! `twilio`: Programmable Messaging, `POST /2010-04-01/Accounts/{accountSid}/Messages.json` with basic auth
//! `accountSid:token` and a form body (`To`, `From` or `MessagingServiceSid`, `Body`).

use async_trait::async_trait;

use super::{api_url, require_from};
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Twilio;

#[async_trait]
impl Provider for Twilio {
    fn id(&self) -> &'static str {
        "twilio"
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
        let account = ctx.credentials.require("accountSid")?;
        let token = ctx.credentials.require("token")?;
        let from = require_from(m.from.as_deref(), "Twilio")?;
        // A Messaging Service SID (MG…) sends from the service's sender pool.
        let from_field = if from.len() == 34 && from.starts_with("MG") {
            "MessagingServiceSid"
        } else {
            "From"
        };
        let url = api_url(
            &ctx.credentials.base_url("https://api.twilio.com"),
            &["2010-04-01", "Accounts", &account, "Messages.json"],
        )?;
        let req = ctx
            .http
            .post(url)
            .basic_auth(&account, Some(&token))
            .form(&[
                ("To", m.to.as_str()),
                (from_field, from.as_str()),
                ("Body", m.content.as_str()),
            ]);
        Ok(http::send(req, "Twilio Messages").await?.delivered("sid"))
    }
}
