//! `one-signal`: `POST /api/v1/notifications` with `Authorization: Basic <apiKey>` (the app's REST API key;
//! keys of the newer `os_v2_` kind are sent as `Key <apiKey>`) and
//! `{app_id, include_subscription_ids, headings: {en}, contents: {en}, data}` plus the provider overrides.
//! The device tokens are OneSignal subscription ids (the former player ids: `include_player_ids` is
//! deprecated in favour of `include_subscription_ids`); those in `errors.invalid_player_ids` are reported
//! as invalid.

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::merge_overrides;
use crate::domain::Channel;
use crate::providers::{http, Delivered, Outbound, Provider, ProviderError, SendContext};

pub struct OneSignal;

#[async_trait]
impl Provider for OneSignal {
    fn id(&self) -> &'static str {
        "one-signal"
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
        let api_key = ctx.credentials.require("apiKey")?;
        let app_id = ctx.credentials.require("applicationId")?;
        let mut body = Map::new();
        body.insert("app_id".into(), Value::from(app_id));
        body.insert("include_subscription_ids".into(), json!(m.tokens));
        if !m.title.is_empty() {
            body.insert("headings".into(), json!({"en": m.title}));
        }
        body.insert("contents".into(), json!({"en": m.content}));
        if m.data.is_object() {
            body.insert("data".into(), m.data.clone());
        }
        merge_overrides(
            &mut body,
            ctx.overrides,
            &["app_id", "include_subscription_ids", "include_player_ids"],
        );
        let scheme = if api_key.starts_with("os_v2_") {
            "Key"
        } else {
            "Basic"
        };
        let url = format!(
            "{}/api/v1/notifications",
            ctx.credentials.base_url("https://onesignal.com")
        );
        let req = ctx
            .http
            .post(url)
            .header("authorization", format!("{scheme} {api_key}"))
            .json(&Value::Object(body));
        let answer = http::send(req, "OneSignal notifications").await?;
        let errors = answer.body.get("errors").cloned().unwrap_or(Value::Null);
        let invalid: Vec<String> = errors
            .get("invalid_player_ids")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|t| m.tokens.iter().any(|own| own == t))
            .map(str::to_owned)
            .collect();
        let mut delivered = answer.delivered("id");
        delivered.id = delivered.id.filter(|id| !id.is_empty());
        if delivered.id.is_some() {
            delivered.invalid_tokens = invalid;
            return Ok(delivered);
        }
        // No notification was created (OneSignal answers 200 all the same).
        let message = if !invalid.is_empty() && invalid.len() == m.tokens.len() {
            format!(
                "OneSignal reported every device token ({}) invalid",
                invalid.len()
            )
        } else {
            let why = match &errors {
                Value::Array(a) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("; "),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            format!(
                "OneSignal created no notification{}",
                if why.is_empty() {
                    String::new()
                } else {
                    format!(": {why}")
                }
            )
        };
        Err(ProviderError {
            invalid_tokens: Vec::new(),
            raw: Some(delivered.raw),
            ..ProviderError::permanent(message)
        })
    }
}
