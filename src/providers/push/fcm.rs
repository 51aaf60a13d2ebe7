//! `fcm`: Firebase Cloud Messaging HTTP v1. The `serviceAccount` credential holds a Google service account's
//! JSON key; an RS256-signed JWT of it is exchanged at the account's `token_uri` for an OAuth access token
//! (cached per account until shortly before it expires), then each device token gets one
//! `POST /v1/projects/{project_id}/messages:send`.
//!
//! Tokens FCM answers as unregistered (404 `NOT_FOUND`/`UNREGISTERED`) or malformed (400 `INVALID_ARGUMENT`
//! about the registration token) are reported in [`Delivered::invalid_tokens`] for removal.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{failed_answer, Tally};
use crate::domain::Channel;
use crate::providers::{
    http, Delivered, Failure, Outbound, Provider, ProviderError, PushMessage, SendContext,
};

const SCOPE: &str = "https://www.googleapis.com/auth/firebase.messaging";
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

pub struct Fcm;

/// The fields of a service account key that FCM needs.
#[derive(Deserialize)]
struct ServiceAccount {
    client_email: String,
    private_key: String,
    #[serde(default)]
    private_key_id: Option<String>,
    #[serde(default)]
    token_uri: Option<String>,
    project_id: String,
}

impl ServiceAccount {
    fn from_credentials(ctx: &SendContext<'_>) -> Result<Self, ProviderError> {
        let missing = || {
            ProviderError::permanent(
                "The integration's credentials have no `serviceAccount`: set it to the service account's JSON key",
            )
        };
        let parsed = match ctx.credentials.0.get("serviceAccount") {
            Some(Value::String(s)) if !s.trim().is_empty() => serde_json::from_str(s),
            Some(v @ Value::Object(_)) => serde_json::from_value(v.clone()),
            _ => return Err(missing()),
        };
        let sa: ServiceAccount = parsed.map_err(|e| {
            ProviderError::permanent(format!(
                "The `serviceAccount` credential is not a service account JSON key \
                 (client_email, private_key, project_id): {e}"
            ))
        })?;
        Ok(sa)
    }

    fn token_uri(&self) -> &str {
        self.token_uri
            .as_deref()
            .filter(|u| !u.is_empty())
            .unwrap_or(GOOGLE_TOKEN_URI)
    }

    fn cache_key(&self) -> String {
        format!("{}\n{}", self.client_email, self.token_uri())
    }
}

struct CachedToken {
    token: String,
    until: Instant,
}

/// Access tokens by service account (and token endpoint).
static TOKENS: LazyLock<Mutex<HashMap<String, CachedToken>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// An access token for `sa`: the cached one, else a fresh one from the token endpoint.
async fn access_token(ctx: &SendContext<'_>, sa: &ServiceAccount) -> Result<String, ProviderError> {
    let key = sa.cache_key();
    {
        let mut cache = TOKENS.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|_, t| t.until > Instant::now());
        if let Some(t) = cache.get(&key) {
            return Ok(t.token.clone());
        }
    }
    let now = chrono::Utc::now().timestamp();
    let claims = json!({
        "iss": sa.client_email,
        "scope": SCOPE,
        "aud": sa.token_uri(),
        "iat": now,
        "exp": now + 3600,
    });
    let mut header = Header::new(Algorithm::RS256);
    header.kid = sa.private_key_id.clone().filter(|k| !k.is_empty());
    let signing_key = EncodingKey::from_rsa_pem(sa.private_key.as_bytes()).map_err(|_| {
        ProviderError::permanent(
            "The `serviceAccount` credential's private_key is not an RSA private key in PEM form",
        )
    })?;
    let assertion = jsonwebtoken::encode(&header, &claims, &signing_key).map_err(|e| {
        ProviderError::permanent(format!("Signing the FCM access-token request failed: {e}"))
    })?;
    let req = ctx.http.post(sa.token_uri()).form(&[
        ("grant_type", JWT_BEARER),
        ("assertion", assertion.as_str()),
    ]);
    let answer = http::send(req, "The FCM access-token exchange").await?;
    let Some(token) = answer
        .body
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return Err(ProviderError {
            invalid_tokens: Vec::new(),
            raw: Some(answer.raw),
            ..ProviderError::transient(
                "The FCM access-token exchange answered without an access_token",
            )
        });
    };
    let lifetime = answer
        .body
        .get("expires_in")
        .and_then(Value::as_u64)
        .unwrap_or(3600);
    // Renew five minutes before expiry (half-way for short-lived tokens).
    let keep = lifetime.saturating_sub(300.min(lifetime / 2));
    TOKENS.lock().unwrap_or_else(|e| e.into_inner()).insert(
        key,
        CachedToken {
            token: token.to_owned(),
            until: Instant::now() + Duration::from_secs(keep),
        },
    );
    Ok(token.to_owned())
}

/// FCM `data` holds string values only: other values are written out as JSON (nulls are left out).
fn string_data(data: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in data.as_object().into_iter().flatten() {
        match v {
            Value::Null => {}
            Value::String(s) => {
                out.insert(k.clone(), Value::from(s.as_str()));
            }
            other => {
                out.insert(k.clone(), Value::from(other.to_string()));
            }
        }
    }
    out
}

/// The `messages:send` body for one token. Provider overrides give `android`, `apns`, `webpush`,
/// `fcmOptions` and `data` (which wins over the message's); `type: "data"` sends a data-only message with
/// the title and body inside `data`.
fn message_body(token: &str, m: &PushMessage, overrides: &Value) -> Value {
    let mut data = string_data(overrides.get("data").unwrap_or(&m.data));
    let mut message = Map::new();
    message.insert("token".into(), Value::from(token));
    if overrides.get("type").and_then(Value::as_str) == Some("data") {
        data.insert("title".into(), Value::from(m.title.as_str()));
        data.insert("body".into(), Value::from(m.content.as_str()));
    } else {
        let mut notification = Map::new();
        if !m.title.is_empty() {
            notification.insert("title".into(), Value::from(m.title.as_str()));
        }
        notification.insert("body".into(), Value::from(m.content.as_str()));
        message.insert("notification".into(), Value::Object(notification));
    }
    if !data.is_empty() {
        message.insert("data".into(), Value::Object(data));
    }
    for key in ["android", "apns", "webpush"] {
        if let Some(v) = overrides.get(key).filter(|v| v.is_object()) {
            message.insert(key.into(), v.clone());
        }
    }
    if let Some(v) = overrides
        .get("fcmOptions")
        .or_else(|| overrides.get("fcm_options"))
        .filter(|v| v.is_object())
    {
        message.insert("fcm_options".into(), v.clone());
    }
    json!({ "message": message })
}

/// Whether FCM's error answer says the token itself is bad: unregistered (404 `NOT_FOUND`, error code
/// `UNREGISTERED`) or not a valid registration token (400 `INVALID_ARGUMENT` about the registration token).
fn token_rejected(status: u64, body: &Value) -> bool {
    let error = body.get("error").unwrap_or(&Value::Null);
    let text = |k: &str| error.get(k).and_then(Value::as_str).unwrap_or_default();
    let codes: Vec<&str> = error
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| d.get("errorCode").and_then(Value::as_str))
        .collect();
    if codes.contains(&"UNREGISTERED") {
        return true;
    }
    match status {
        404 => text("status") == "NOT_FOUND",
        400 => {
            (text("status") == "INVALID_ARGUMENT" || codes.contains(&"INVALID_ARGUMENT"))
                && text("message")
                    .to_ascii_lowercase()
                    .contains("registration token")
        }
        _ => false,
    }
}

#[async_trait]
impl Provider for Fcm {
    fn id(&self) -> &'static str {
        "fcm"
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
        let sa = ServiceAccount::from_credentials(ctx)?;
        let base = ctx.credentials.base_url("https://fcm.googleapis.com");
        let mut url = url::Url::parse(&base).map_err(|_| {
            ProviderError::permanent(format!("The FCM address {base} is not a valid URL"))
        })?;
        url.path_segments_mut()
            .map_err(|_| {
                ProviderError::permanent(format!("The FCM address {base} is not a valid URL"))
            })?
            .pop_if_empty()
            .extend(["v1", "projects", &sa.project_id, "messages:send"]);
        let token = access_token(ctx, &sa).await?;
        let mut tally = Tally::default();
        for device in &m.tokens {
            let req = ctx
                .http
                .post(url.clone())
                .bearer_auth(&token)
                .json(&message_body(device, m, ctx.overrides));
            match http::send(req, "FCM messages:send").await {
                Ok(answer) => {
                    let name = answer
                        .body
                        .get("name")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    tally.answer(&answer.raw);
                    tally.accepted(name);
                }
                Err(e) => {
                    if let Some(raw) = &e.raw {
                        tally.answer(raw);
                    }
                    match failed_answer(&e) {
                        Some((status, body)) if token_rejected(status, &body) => {
                            tally.invalid.push(device.clone());
                        }
                        Some((401, _)) => {
                            // The access token expired or was revoked early: the next attempt gets a new one.
                            TOKENS
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .remove(&sa.cache_key());
                            tally.failures.push(ProviderError {
                                invalid_tokens: Vec::new(),
                                failure: Failure::Transient { retry_after: None },
                                ..e
                            });
                        }
                        _ => tally.failures.push(e),
                    }
                }
            }
        }
        tally.finish("FCM")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_values_are_strings_and_overrides_win() {
        let m = PushMessage {
            tokens: vec!["t1".into()],
            title: "Hi".into(),
            content: "Body".into(),
            data: json!({"n": 1, "ok": true, "s": "x", "o": {"a": [1]}, "z": null}),
            payload: json!({}),
        };
        let body = message_body("t1", &m, &json!({}));
        assert_eq!(
            body,
            json!({"message": {"token": "t1", "notification": {"title": "Hi", "body": "Body"},
                "data": {"n": "1", "ok": "true", "s": "x", "o": "{\"a\":[1]}"}}})
        );
        let overrides = json!({"data": {"k": 2}, "android": {"priority": "high"},
            "apns": {"payload": {"aps": {"badge": 1}}}, "fcmOptions": {"analytics_label": "l"}, "type": "data"});
        let body = message_body("t1", &m, &overrides);
        assert_eq!(
            body,
            json!({"message": {"token": "t1", "data": {"k": "2", "title": "Hi", "body": "Body"},
                "android": {"priority": "high"}, "apns": {"payload": {"aps": {"badge": 1}}},
                "fcm_options": {"analytics_label": "l"}}})
        );
    }

    #[test]
    fn rejected_tokens_are_told_apart_from_bad_requests() {
        let unregistered = json!({"error": {"code": 404, "message": "Requested entity was not found.",
            "status": "NOT_FOUND", "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
            "errorCode": "UNREGISTERED"}]}});
        assert!(token_rejected(404, &unregistered));
        let invalid = json!({"error": {"code": 400, "message": "The registration token is not a valid FCM registration token",
            "status": "INVALID_ARGUMENT"}});
        assert!(token_rejected(400, &invalid));
        let bad_payload = json!({"error": {"code": 400, "message": "Invalid value at 'message.data[0].value' (TYPE_STRING), 12",
            "status": "INVALID_ARGUMENT"}});
        assert!(!token_rejected(400, &bad_payload));
        assert!(!token_rejected(
            403,
            &json!({"error": {"status": "PERMISSION_DENIED"}})
        ));
    }
}
