//! `slack`: an incoming webhook (the subscriber's `webhookUrl` credential or a `webhook` endpoint) gets
//! `{"text"}` (no `channel`: an app's incoming webhook posts to the channel it was created for); a
//! `slack_channel` / `slack_user` endpoint is posted to with `chat.postMessage` and its channel
//! connection's access token (the `baseUrl` credential replaces `https://slack.com`).
//!
//! The Web API answers HTTP 200 with `{"ok": false, "error": "…"}` on failure: `ratelimited` and Slack's
//! internal errors are transient, everything else (`channel_not_found`, `not_in_channel`, `invalid_auth`,
//! …) permanent.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{access_token, field, hook, with_overrides};
use crate::domain::endpoint::EndpointType;
use crate::domain::Channel;
use crate::providers::http::{self, Answer};
use crate::providers::{
    ChatTarget, Delivered, Failure, Outbound, Provider, ProviderError, SendContext,
};

const API: &str = "https://slack.com";

/// `error` codes worth retrying.
const TRANSIENT: &[&str] = &[
    "ratelimited",
    "rate_limited",
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
    "team_added_to_org",
];

pub struct Slack;

#[async_trait]
impl Provider for Slack {
    fn id(&self) -> &'static str {
        "slack"
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
        if let ChatTarget::Endpoint {
            endpoint_type: t @ (EndpointType::SlackChannel | EndpointType::SlackUser),
            data,
            access_token: token,
            ..
        } = &m.target
        {
            let key = if *t == EndpointType::SlackChannel {
                "channelId"
            } else {
                "userId"
            };
            // A user id as `channel` posts to the app's direct messages with that user.
            let channel = field("slack", *t, data, key)?;
            let token = access_token("slack", *t, token)?;
            let url = format!("{}/api/chat.postMessage", ctx.credentials.base_url(API));
            let body = with_overrides(
                json!({"channel": channel, "text": m.content}),
                ctx.overrides,
            );
            let req = ctx
                .http
                .post(url)
                .bearer_auth(token)
                .header("content-type", "application/json; charset=utf-8")
                .body(body.to_string());
            return verdict(http::send(req, "Slack chat.postMessage").await?);
        }
        let hook = hook("slack", &m.target)?;
        let body = with_overrides(json!({"text": m.content}), ctx.overrides);
        let answer =
            http::post_webhook(ctx, &hook.url, &body, "The Slack incoming webhook").await?;
        // Slack answers the text `ok`; it has no message id.
        Ok(Delivered {
            id: None,
            raw: answer.raw,
            invalid_tokens: Vec::new(),
        })
    }
}

/// A 2xx answer of the Web API: delivered when `ok` is true (id = `ts`), else an error by its `error` code.
fn verdict(answer: Answer) -> Result<Delivered, ProviderError> {
    if answer.body.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(Delivered {
            id: answer
                .body
                .get("ts")
                .and_then(Value::as_str)
                .map(str::to_owned),
            raw: answer.raw,
            invalid_tokens: Vec::new(),
        });
    }
    let code = answer
        .body
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("an answer without \"ok\": true")
        .to_owned();
    let failure = if TRANSIENT.contains(&code.as_str()) {
        Failure::Transient { retry_after: None }
    } else {
        Failure::Permanent
    };
    Err(ProviderError {
        invalid_tokens: Vec::new(),
        failure,
        message: format!("Slack chat.postMessage failed: {code}{}", hint(&code)),
        raw: Some(answer.raw),
    })
}

/// What to do about the usual permanent errors.
fn hint(code: &str) -> &'static str {
    match code {
        "channel_not_found" => " (the channel does not exist, or the app cannot see it)",
        "not_in_channel" => " (the app is not a member of the channel: invite it)",
        "is_archived" => " (the channel is archived)",
        "invalid_auth" | "not_authed" | "token_revoked" | "token_expired" | "account_inactive" => {
            " (the connection's access token is not valid: reconnect the workspace)"
        }
        "missing_scope" => " (the token lacks the chat:write scope)",
        "msg_too_long" => " (the message is too long)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: Value) -> Answer {
        Answer {
            status: 200,
            headers: Default::default(),
            raw: http::raw_text(200, &body.to_string()),
            body,
        }
    }

    #[test]
    fn ok_false_is_a_failure_classified_by_its_code() {
        let sent = verdict(answer(json!({"ok": true, "ts": "1700000000.000100"}))).unwrap();
        assert_eq!(sent.id.as_deref(), Some("1700000000.000100"));

        let e = verdict(answer(json!({"ok": false, "error": "channel_not_found"}))).unwrap_err();
        assert_eq!(e.failure, Failure::Permanent);
        assert!(e.message.contains("channel_not_found"), "{}", e.message);
        assert!(e.raw.unwrap().contains("channel_not_found"));

        for code in ["not_in_channel", "invalid_auth"] {
            let e = verdict(answer(json!({"ok": false, "error": code}))).unwrap_err();
            assert!(!e.is_transient(), "{code}");
        }
        for code in ["ratelimited", "internal_error"] {
            let e = verdict(answer(json!({"ok": false, "error": code}))).unwrap_err();
            assert!(e.is_transient(), "{code}");
        }
        let e = verdict(answer(Value::String("ok".into()))).unwrap_err();
        assert!(!e.is_transient());
    }
}
