//! `telegram`: the Bot API's `sendMessage` (`POST {baseUrl|https://api.telegram.org}/bot{token}/sendMessage`,
//! `{"chat_id", "text"}`) to the chat of a `telegram_chat` endpoint `{chatId}`.
//!
//! The bot token is the integration's `apiToken` credential (Novu's name for it), else its `token`
//! credential, else the access token of the endpoint's channel connection (a bot per connection). Telegram
//! has no webhook destination: a subscriber's `webhookUrl` credential cannot name a chat.
//!
//! The token is part of the URL path: it is removed from every message and recorded answer this provider
//! returns (the engine also redacts credential values, but only those of at least 6 characters).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{api_url, field, unsupported, with_overrides};
use crate::domain::endpoint::EndpointType;
use crate::domain::Channel;
use crate::providers::{
    http, redact, ChatTarget, Delivered, Failure, Outbound, Provider, ProviderError, SendContext,
};

const API: &str = "https://api.telegram.org";

pub struct Telegram;

#[async_trait]
impl Provider for Telegram {
    fn id(&self) -> &'static str {
        "telegram"
    }

    fn channel(&self) -> Channel {
        Channel::Chat
    }

    async fn send(
        &self,
        ctx: &SendContext<'_>,
        msg: &Outbound,
    ) -> Result<Delivered, ProviderError> {
        let Outbound::Chat(m) = msg else {
            return Err(ProviderError::wrong_channel(self.id()));
        };
        let (chat_id, connection_token) = match &m.target {
            ChatTarget::Endpoint {
                endpoint_type: t @ EndpointType::TelegramChat,
                data,
                access_token,
                ..
            } => (field(self.id(), *t, data, "chatId")?, access_token.clone()),
            ChatTarget::Endpoint { endpoint_type, .. } => {
                return Err(unsupported(self.id(), *endpoint_type))
            }
            ChatTarget::Webhook { .. } => return Err(ProviderError::permanent(
                "telegram delivers to telegram_chat channel endpoints ({chatId}); a webhookUrl \
                     credential cannot name a Telegram chat",
            )),
        };
        let token = ctx
            .credentials
            .get("apiToken")
            .or_else(|| ctx.credentials.get("token"))
            .or(connection_token.filter(|t| !t.trim().is_empty()))
            .ok_or_else(|| {
                ProviderError::permanent(
                    "telegram has no bot token: set the integration's `apiToken` credential (or give the \
                     endpoint a channel connection whose access token is the bot token)",
                )
            })?;
        let url = api_url(
            &ctx.credentials.base_url(API),
            &[&format!("bot{token}"), "sendMessage"],
        )?;
        let body = with_overrides(
            json!({"chat_id": chat_id, "text": m.content}),
            ctx.overrides,
        );
        let answer = http::send(ctx.http.post(url).json(&body), "Telegram sendMessage")
            .await
            .map_err(|e| scrub(with_retry_after(e), &token))?;
        if answer.body.get("ok").and_then(Value::as_bool) != Some(true) {
            let e = ProviderError {
                invalid_tokens: Vec::new(),
                failure: Failure::Permanent,
                message: format!(
                    "Telegram sendMessage failed: {}",
                    answer
                        .body
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("an answer without \"ok\": true")
                ),
                raw: Some(answer.raw),
            };
            return Err(scrub(e, &token));
        }
        let mut sent = answer.delivered("result.message_id");
        sent.raw = redact(&sent.raw, std::slice::from_ref(&token));
        Ok(sent)
    }
}

/// Telegram's 429 carries the wait in the body (`parameters.retry_after`, seconds), not in a header.
fn with_retry_after(mut e: ProviderError) -> ProviderError {
    if let Failure::Transient { retry_after: None } = e.failure {
        let secs = e
            .raw
            .as_deref()
            .and_then(|r| serde_json::from_str::<Value>(r).ok())
            .and_then(|r| r["body"]["parameters"]["retry_after"].as_f64())
            .filter(|s| *s >= 0.0);
        if let Some(secs) = secs {
            e.failure = Failure::Transient {
                retry_after: Some(Duration::from_secs_f64(secs)),
            };
        }
    }
    e
}

/// The error without the bot token.
fn scrub(mut e: ProviderError, token: &str) -> ProviderError {
    let secrets = [token.to_owned()];
    e.message = redact(&e.message, &secrets);
    e.raw = e.raw.map(|r| redact(&r, &secrets));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_from_the_body_and_the_token_scrubbed() {
        let raw = http::raw_text(
            429,
            r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7 (bot 42:SECRET)","parameters":{"retry_after":7}}"#,
        );
        let e = ProviderError {
            invalid_tokens: Vec::new(),
            failure: Failure::Transient { retry_after: None },
            message: "Telegram sendMessage answered 429 Too Many Requests: bot 42:SECRET".into(),
            raw: Some(raw),
        };
        let e = scrub(with_retry_after(e), "42:SECRET");
        assert_eq!(
            e.failure,
            Failure::Transient {
                retry_after: Some(Duration::from_secs(7))
            }
        );
        assert!(!e.message.contains("SECRET") && !e.raw.as_deref().unwrap().contains("SECRET"));
        let permanent = with_retry_after(ProviderError::permanent("x"));
        assert_eq!(permanent.failure, Failure::Permanent);
    }
}
