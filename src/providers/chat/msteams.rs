//! `msteams`: Microsoft Teams.
//!
//! - An incoming webhook (the subscriber's `webhookUrl` credential or a `webhook` endpoint: a Workflows
//!   webhook or a legacy connector) gets a message with one Adaptive Card holding the text. A body that is
//!   itself a JSON object (a MessageCard or an Adaptive Card message written in the template) is sent as
//!   it is, as Novu does.
//! - An `ms_teams_channel` endpoint `{teamId, channelId}` is posted to through Microsoft Graph with its
//!   channel connection's access token: `POST /v1.0/teams/{teamId}/channels/{channelId}/messages`.
//! - An `ms_teams_user` endpoint `{userId}` takes three Graph calls with the connection's (delegated) token:
//!   `GET /v1.0/me` (the sender), `POST /v1.0/chats` for the one-on-one chat of the sender and the user
//!   (Graph returns the existing chat when there is one), then `POST /v1.0/chats/{chatId}/messages`.
//!
//! The `baseUrl` credential replaces `https://graph.microsoft.com` (national clouds, tests).

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{access_token, api_url, field, hook, with_overrides};
use crate::domain::endpoint::EndpointType;
use crate::domain::Channel;
use crate::providers::http::{self, Answer};
use crate::providers::{
    ChatTarget, Delivered, Failure, Outbound, Provider, ProviderError, SendContext,
};

const GRAPH: &str = "https://graph.microsoft.com";

pub struct MsTeams;

#[async_trait]
impl Provider for MsTeams {
    fn id(&self) -> &'static str {
        "msteams"
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
        let base = ctx.credentials.base_url(GRAPH);
        let message = || with_overrides(json!({"body": {"content": m.content}}), ctx.overrides);
        match &m.target {
            ChatTarget::Endpoint {
                endpoint_type: t @ EndpointType::MsTeamsChannel,
                data,
                access_token: token,
                ..
            } => {
                let team = field(self.id(), *t, data, "teamId")?;
                let channel = field(self.id(), *t, data, "channelId")?;
                let token = access_token(self.id(), *t, token)?;
                let url = api_url(
                    &base,
                    &["v1.0", "teams", &team, "channels", &channel, "messages"],
                )?;
                let answer = graph(ctx, token, url, Some(&message()), "channel message").await?;
                Ok(answer.delivered("id"))
            }
            ChatTarget::Endpoint {
                endpoint_type: t @ EndpointType::MsTeamsUser,
                data,
                access_token: token,
                ..
            } => {
                let user = field(self.id(), *t, data, "userId")?;
                let token = access_token(self.id(), *t, token)?;
                let me = graph(
                    ctx,
                    token,
                    format!("{}?$select=id", api_url(&base, &["v1.0", "me"])?),
                    None,
                    "GET /me (the sender of the chat)",
                )
                .await?;
                let me = id_of(&me, "GET /me")?;
                let chat = json!({
                    "chatType": "oneOnOne",
                    "members": [member(&base, &me), member(&base, &user)],
                });
                let chat = graph(
                    ctx,
                    token,
                    api_url(&base, &["v1.0", "chats"])?,
                    Some(&chat),
                    "create the one-on-one chat",
                )
                .await?;
                let chat = id_of(&chat, "create the one-on-one chat")?;
                let url = api_url(&base, &["v1.0", "chats", &chat, "messages"])?;
                let answer = graph(ctx, token, url, Some(&message()), "chat message").await?;
                Ok(answer.delivered("id"))
            }
            target => {
                let hook = hook(self.id(), target)?;
                let body = with_overrides(card(&m.content), ctx.overrides);
                let answer =
                    http::post_webhook(ctx, &hook.url, &body, "The Microsoft Teams webhook")
                        .await?;
                legacy_failure(&answer)?;
                Ok(Delivered {
                    id: None,
                    raw: answer.raw,
                    invalid_tokens: Vec::new(),
                })
            }
        }
    }
}

/// One Microsoft Graph call: a POST of `body`, or a GET without one.
async fn graph(
    ctx: &SendContext<'_>,
    token: &str,
    url: String,
    body: Option<&Value>,
    what: &str,
) -> Result<Answer, ProviderError> {
    let req = match body {
        Some(b) => ctx.http.post(url).json(b),
        None => ctx.http.get(url),
    };
    http::send(req.bearer_auth(token), &format!("Microsoft Graph {what}")).await
}

/// The `id` of a Graph answer.
fn id_of(answer: &Answer, what: &str) -> Result<String, ProviderError> {
    answer
        .body
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| ProviderError {
            invalid_tokens: Vec::new(),
            failure: Failure::Permanent,
            message: format!("Microsoft Graph {what}: the answer has no id"),
            raw: Some(answer.raw.clone()),
        })
}

/// A member of a one-on-one chat, by Azure AD object id or user principal name.
fn member(base: &str, user: &str) -> Value {
    json!({
        "@odata.type": "#microsoft.graph.aadUserConversationMember",
        "roles": ["owner"],
        // An OData string literal doubles its quotes.
        "user@odata.bind": format!("{base}/v1.0/users('{}')", user.replace('\'', "''")),
    })
}

/// The webhook payload: the body itself when it is a JSON object (a card written in the template), else a
/// message with one Adaptive Card holding the text.
fn card(content: &str) -> Value {
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(content.trim()) {
        return v;
    }
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": [{"type": "TextBlock", "text": content, "wrap": true}],
            },
        }],
    })
}

/// Legacy Office 365 connectors answer HTTP 200 with a text starting "Webhook message delivery failed" when
/// Teams refused the message; a throttled (429) or failing (5xx) Teams is worth retrying.
fn legacy_failure(answer: &Answer) -> Result<(), ProviderError> {
    let Value::String(text) = &answer.body else {
        return Ok(());
    };
    let text = text.trim();
    if !text.starts_with("Webhook message delivery failed") {
        return Ok(());
    }
    let transient = text.contains("HTTP error 429") || text.contains("HTTP error 5");
    Err(ProviderError {
        invalid_tokens: Vec::new(),
        failure: if transient {
            Failure::Transient { retry_after: None }
        } else {
            Failure::Permanent
        },
        message: format!(
            "The Microsoft Teams webhook refused the message: {}",
            http::truncate(text, 300)
        ),
        raw: Some(answer.raw.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_payloads_are_adaptive_cards_unless_the_body_is_a_card() {
        let v = card("Deploy done");
        assert_eq!(v["type"], "message");
        assert_eq!(
            v["attachments"][0]["content"]["body"][0]["text"],
            "Deploy done"
        );
        let own = r#"{"@type": "MessageCard", "text": "hi"}"#;
        assert_eq!(card(own), json!({"@type": "MessageCard", "text": "hi"}));
        assert_eq!(card("[1, 2]")["type"], "message");
    }

    #[test]
    fn legacy_connector_errors_in_a_200_are_failures() {
        let answer = |text: &str| Answer {
            status: 200,
            headers: Default::default(),
            body: Value::String(text.to_owned()),
            raw: http::raw_text(200, text),
        };
        assert!(legacy_failure(&answer("1")).is_ok());
        let e = legacy_failure(&answer(
            "Webhook message delivery failed with error: Microsoft Teams endpoint returned HTTP error 429",
        ))
        .unwrap_err();
        assert!(e.is_transient());
        let e = legacy_failure(&answer(
            "Webhook message delivery failed with error: Microsoft Teams endpoint returned HTTP error 413",
        ))
        .unwrap_err();
        assert!(!e.is_transient());
    }

    #[test]
    fn members_bind_users_by_id() {
        assert_eq!(
            member("https://graph.microsoft.com", "o'neil@x.com")["user@odata.bind"],
            "https://graph.microsoft.com/v1.0/users('o''neil@x.com')"
        );
    }
}
