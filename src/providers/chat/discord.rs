//! `discord`: POSTs `{"content"}` to the Discord webhook URL (the subscriber's `webhookUrl` credential or a
//! `webhook` endpoint) with `wait=true`, so Discord answers with the created message and its id.

use async_trait::async_trait;
use serde_json::json;

use super::{hook, with_overrides};
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct Discord;

#[async_trait]
impl Provider for Discord {
    fn id(&self) -> &'static str {
        "discord"
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
        let hook = hook(self.id(), &m.target)?;
        let url = waiting(&hook.url)?;
        let body = with_overrides(json!({"content": m.content}), ctx.overrides);
        let answer = http::post_webhook(ctx, &url, &body, "The Discord webhook").await?;
        Ok(answer.delivered("id"))
    }
}

/// The webhook URL with `wait=true` (other query parameters, such as `thread_id`, kept).
fn waiting(url: &str) -> Result<String, ProviderError> {
    // The URL holds the webhook's token: it stays out of the message.
    let mut parsed = url::Url::parse(url).map_err(|_| {
        ProviderError::permanent("The Discord webhook URL is not an absolute http(s) URL")
    })?;
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(k, _)| k != "wait")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    parsed
        .query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .append_pair("wait", "true");
    Ok(parsed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_is_added_and_other_parameters_kept() {
        assert_eq!(
            waiting("https://discord.com/api/webhooks/1/abc").unwrap(),
            "https://discord.com/api/webhooks/1/abc?wait=true"
        );
        assert_eq!(
            waiting("https://discord.com/api/webhooks/1/abc?thread_id=9&wait=false").unwrap(),
            "https://discord.com/api/webhooks/1/abc?thread_id=9&wait=true"
        );
        assert!(waiting("/relative").is_err());
    }
}
