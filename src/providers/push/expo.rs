//! `expo`: Expo's push service, `POST /--/api/v2/push/send` with a JSON array of messages (one per device
//! token, at most 100 per request) `{to, title, body, data, …}` plus the provider overrides (`sound`,
//! `badge`, `ttl`, `channelId`, …), with `Authorization: Bearer <apiKey>` when the integration has an access
//! token. Expo answers one ticket per message; `DeviceNotRegistered` tickets report invalid tokens.

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{merge_overrides, Tally};
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

/// Expo accepts at most 100 messages per request.
const BATCH: usize = 100;

pub struct Expo;

#[async_trait]
impl Provider for Expo {
    fn id(&self) -> &'static str {
        "expo"
    }

    fn channel(&self) -> Channel {
        Channel::Push
    }

    async fn send(
        &self,
        ctx: &SendContext<'_>,
        msg: &Outbound,
    ) -> Result<Delivered, ProviderError> {
        let Outbound::Push(m) = msg else {
            return Err(ProviderError::wrong_channel(self.id()));
        };
        let url = format!(
            "{}/--/api/v2/push/send",
            ctx.credentials.base_url("https://exp.host")
        );
        let access_token = ctx.credentials.get("apiKey");
        let mut tally = Tally::default();
        for batch in m.tokens.chunks(BATCH) {
            let messages: Vec<Value> = batch
                .iter()
                .map(|token| {
                    let mut o = Map::new();
                    o.insert("to".into(), Value::from(token.as_str()));
                    if !m.title.is_empty() {
                        o.insert("title".into(), Value::from(m.title.as_str()));
                    }
                    o.insert("body".into(), Value::from(m.content.as_str()));
                    if m.data.is_object() {
                        o.insert("data".into(), m.data.clone());
                    }
                    merge_overrides(&mut o, ctx.overrides, &["to"]);
                    Value::Object(o)
                })
                .collect();
            let mut req = ctx
                .http
                .post(&url)
                .header("accept", "application/json")
                .json(&messages);
            if let Some(t) = &access_token {
                req = req.bearer_auth(t);
            }
            let answer = match http::send(req, "Expo push/send").await {
                Ok(a) => a,
                Err(e) => {
                    if let Some(raw) = &e.raw {
                        tally.answer(raw);
                    }
                    tally.failures.push(e);
                    continue;
                }
            };
            tally.answer(&answer.raw);
            let Some(tickets) = answer.body.get("data").and_then(Value::as_array) else {
                tally.failures.push(ProviderError {
                    invalid_tokens: Vec::new(),
                    raw: Some(answer.raw.clone()),
                    ..ProviderError::permanent("Expo push/send answered without push tickets")
                });
                continue;
            };
            for (i, ticket) in tickets.iter().enumerate() {
                let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
                if text(ticket, "status").as_deref() == Some("ok") {
                    tally.accepted(text(ticket, "id"));
                    continue;
                }
                let details = ticket.get("details").unwrap_or(&Value::Null);
                let error = text(details, "error").unwrap_or_default();
                let token = text(details, "expoPushToken").or_else(|| batch.get(i).cloned());
                match (error.as_str(), token) {
                    ("DeviceNotRegistered", Some(token)) => tally.invalid.push(token),
                    _ => {
                        let message = format!(
                            "Expo push ticket error {}: {}",
                            if error.is_empty() { "(none)" } else { &error },
                            text(ticket, "message").unwrap_or_default()
                        );
                        let e = if error == "MessageRateExceeded" {
                            ProviderError::transient(message)
                        } else {
                            ProviderError::permanent(message)
                        };
                        tally.failures.push(ProviderError {
                            invalid_tokens: Vec::new(),
                            raw: Some(answer.raw.clone()),
                            ..e
                        });
                    }
                }
            }
        }
        tally.finish("Expo")
    }
}
