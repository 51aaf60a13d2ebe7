//! `generic-sms`: POSTs `{to, content, from, sender?}` as JSON to the `baseUrl` credential (the operator's
//! own SMS gateway). The `apiKey` goes in the header named by `apiKeyRequestHeader` and the `secretKey` in
//! the one named by `secretKeyRequestHeader`, when those are set; the message id is read from the dotted
//! `idPath` of the answer (default `id`) and its date from `datePath` (default `date`).

use async_trait::async_trait;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{json, Value};

use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct GenericSms;

#[async_trait]
impl Provider for GenericSms {
    fn id(&self) -> &'static str {
        "generic-sms"
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
        let c = ctx.credentials;
        let url = c.require("baseUrl")?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ProviderError::permanent(
                "The generic SMS `baseUrl` credential is not an absolute http(s) URL",
            ));
        }
        let mut body = json!({"to": m.to, "content": m.content});
        if let Some(from) = &m.from {
            body["from"] = Value::from(from.as_str());
        }
        if let Some(sender) = c.get("from") {
            body["sender"] = Value::from(sender);
        }
        let mut req = ctx.http.post(&url).json(&body);
        for (name_key, value_key) in [
            ("apiKeyRequestHeader", "apiKey"),
            ("secretKeyRequestHeader", "secretKey"),
        ] {
            let (Some(name), Some(value)) = (c.get(name_key), c.get(value_key)) else {
                continue;
            };
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ProviderError::permanent(format!(
                    "The `{name_key}` credential is not a valid HTTP header name"
                ))
            })?;
            let value = HeaderValue::from_str(&value).map_err(|_| {
                ProviderError::permanent(format!(
                    "The `{value_key}` credential cannot be sent in an HTTP header"
                ))
            })?;
            req = req.header(name, value);
        }
        let answer = http::send(req, "The generic SMS gateway").await?;
        let id_path = c.get("idPath").unwrap_or_else(|| "id".to_owned());
        let date_path = c.get("datePath").unwrap_or_else(|| "date".to_owned());
        let date = http::lookup(&answer.body, &date_path).cloned();
        let mut delivered = answer.delivered(&id_path);
        // The raw answer, with the id and date the paths pointed at.
        if let Ok(Value::Object(mut raw)) = serde_json::from_str::<Value>(&delivered.raw) {
            raw.insert("messageId".into(), json!(delivered.id));
            raw.insert("date".into(), date.unwrap_or(Value::Null));
            delivered.raw = Value::Object(raw).to_string();
        }
        Ok(delivered)
    }
}
