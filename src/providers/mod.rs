//! Delivery providers: one small module per provider, each calling the provider's real API (HTTP through
//! `reqwest`, SMTP through `lettre`) with the integration's decrypted credentials.
//!
//! The engine (`engine::deliver`) decides *what* to send and *where* (rendered content, destination,
//! integration, retries and failover); a provider only turns one [`Outbound`] message into one API call and
//! classifies the answer: delivered, a transient failure worth retrying, or a permanent one.
//!
//! Every HTTP provider honours a `baseUrl` credential in place of its public API address, so tests (and
//! regional or self-hosted deployments) can point it elsewhere.

pub mod chat;
pub mod email;
pub mod http;
pub mod push;
pub mod sms;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::config::WireProfile;
use crate::domain::endpoint::EndpointType;
use crate::domain::Channel;

/// A delivery provider: turns one message into one call of the provider's API.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider id as stored (`sendgrid`, `twilio`, `slack`, …).
    fn id(&self) -> &'static str;
    /// The channel it delivers on.
    fn channel(&self) -> Channel;
    /// Sends `msg`; `Ok` once the provider accepted it.
    async fn send(&self, ctx: &SendContext<'_>, msg: &Outbound)
        -> Result<Delivered, ProviderError>;
}

/// The provider registered under `id`, or `None` when this server does not support it.
pub fn provider(id: &str) -> Option<&'static dyn Provider> {
    email::lookup(id)
        .or_else(|| sms::lookup(id))
        .or_else(|| chat::lookup(id))
        .or_else(|| push::lookup(id))
}

/// Every supported provider id, for the README and the startup log.
pub fn supported() -> Vec<&'static str> {
    [email::ALL, sms::ALL, chat::ALL, push::ALL]
        .into_iter()
        .flatten()
        .map(|p| p.id())
        .collect()
}

/// What a provider call has at hand besides the message.
pub struct SendContext<'a> {
    pub http: &'a reqwest::Client,
    pub credentials: &'a Credentials,
    /// Provider-specific trigger overrides (`overrides.providers.<id>`, e.g. FCM `data`, `android`, `apns`);
    /// an empty object when none were given.
    pub overrides: &'a Value,
    /// The integration's identifier, for providers that report it.
    pub integration_identifier: &'a str,
    /// The wire profile: webhook providers spell their signature header `x-svc-signature` or
    /// `x-novu-signature` with it.
    pub profile: WireProfile,
}

impl SendContext<'_> {
    /// The signature header of the webhook providers (`email-webhook`, `chat-webhook`, `push-webhook`).
    pub fn signature_header(&self) -> &'static str {
        match self.profile {
            WireProfile::Spec => "x-svc-signature",
            WireProfile::Novu => "x-novu-signature",
        }
    }
}

/// One message to deliver, by channel.
#[derive(Debug, Clone)]
pub enum Outbound {
    Email(EmailMessage),
    Sms(SmsMessage),
    Chat(ChatMessage),
    Push(PushMessage),
}

#[derive(Debug, Clone, Default)]
pub struct EmailMessage {
    pub to: Vec<String>,
    /// Sender address: the trigger's `overrides.email.from`, else the `from` credential.
    pub from: Option<String>,
    /// Sender display name: `overrides.email.senderName`, else the `senderName` credential.
    pub sender_name: Option<String>,
    pub subject: String,
    pub html: String,
    /// A plain-text alternative, when the step has one.
    pub text: Option<String>,
    pub reply_to: Option<String>,
    pub cc: Vec<String>,
    pub bcc: Vec<String>,
    pub attachments: Vec<Attachment>,
    /// Extra headers from `overrides.email.headers`.
    pub headers: Vec<(String, String)>,
    /// The trigger payload, for webhook providers that forward it.
    pub payload: Value,
}

#[derive(Debug, Clone)]
pub struct Attachment {
    pub name: String,
    pub mime: String,
    pub content: Vec<u8>,
}

#[derive(Debug, Clone, Default)]
pub struct SmsMessage {
    /// E.164 phone number.
    pub to: String,
    /// `overrides.sms.from`, else the `from` credential.
    pub from: Option<String>,
    pub content: String,
    pub payload: Value,
}

#[derive(Debug, Clone)]
pub struct ChatMessage {
    pub content: String,
    pub target: ChatTarget,
    pub payload: Value,
}

/// Where a chat message goes.
#[derive(Debug, Clone)]
pub enum ChatTarget {
    /// The subscriber's `webhookUrl` credential (incoming webhook of Slack, Discord, Teams, Mattermost, …),
    /// with the optional `channel` credential.
    Webhook {
        url: String,
        channel: Option<String>,
    },
    /// A channel endpoint (spec §2.2); `access_token` comes from its channel connection, when it has one.
    Endpoint {
        endpoint_type: EndpointType,
        /// The endpoint data: `{channelId}`, `{userId}`, `{url}`, `{teamId, channelId}`, `{chatId}`, …
        data: Value,
        access_token: Option<String>,
        /// The connection's workspace `{id, name?}` (e.g. the Teams tenant), when it has one.
        workspace: Option<Value>,
    },
}

#[derive(Debug, Clone, Default)]
pub struct PushMessage {
    pub tokens: Vec<String>,
    pub title: String,
    pub content: String,
    /// Custom data sent with the notification (the trigger payload unless the overrides give `data`).
    pub data: Value,
    pub payload: Value,
}

/// A provider accepted the message.
#[derive(Debug, Clone, Default)]
pub struct Delivered {
    /// The provider's id for the message, when it returns one.
    pub id: Option<String>,
    /// The provider's answer (status and body), as recorded in the execution detail's `raw`.
    pub raw: String,
    /// Push tokens the provider reported as invalid or unregistered: removed from the subscriber.
    pub invalid_tokens: Vec<String>,
}

/// Whether a failed call may succeed when tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// A 5xx, 408, 429, timeout or network error: retry with backoff (at least `retry_after` when the
    /// provider said so).
    Transient { retry_after: Option<Duration> },
    /// A 4xx or a configuration problem: trying again cannot help.
    Permanent,
}

/// A provider call that did not deliver.
#[derive(Debug, Clone)]
pub struct ProviderError {
    pub failure: Failure,
    /// What went wrong, for the execution detail and the message's `errorText`.
    pub message: String,
    /// The provider's answer, when there was one.
    pub raw: Option<String>,
    /// Push tokens the provider reported invalid (e.g. when every token was): removed from the subscriber
    /// even though nothing was delivered.
    pub invalid_tokens: Vec<String>,
}

impl ProviderError {
    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            failure: Failure::Permanent,
            message: message.into(),
            raw: None,
            invalid_tokens: Vec::new(),
        }
    }

    pub fn transient(message: impl Into<String>) -> Self {
        Self {
            failure: Failure::Transient { retry_after: None },
            message: message.into(),
            raw: None,
            invalid_tokens: Vec::new(),
        }
    }

    /// The error a provider returns when handed a message of another channel (an engine bug).
    pub fn wrong_channel(provider: &str) -> Self {
        Self::permanent(format!(
            "provider {provider} was handed a message of another channel"
        ))
    }

    pub fn is_transient(&self) -> bool {
        matches!(self.failure, Failure::Transient { .. })
    }
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Applies the trigger's `overrides.providers.<id>` to a request body, as Novu does: its fields are merged
/// over the body (objects deeply, anything else replaced), then `_passthrough.body`. Keys are sent as
/// given (no case conversion).
pub fn with_overrides(mut body: Value, overrides: &Value) -> Value {
    let Some(map) = overrides.as_object() else {
        return body;
    };
    let mut known = map.clone();
    let passthrough = known.remove("_passthrough");
    merge_json(&mut body, &Value::Object(known));
    if let Some(extra) = passthrough
        .as_ref()
        .and_then(|p| p.get("body"))
        .filter(|b| b.is_object())
    {
        merge_json(&mut body, extra);
    }
    body
}

pub fn merge_json(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        merge_json(existing, v)
                    }
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// An integration's decrypted credentials (spec CredentialsDto).
#[derive(Debug, Clone, Default)]
pub struct Credentials(pub Map<String, Value>);

/// Credential fields that are not secret (kept in `raw`; every other string value is redacted).
const PUBLIC_FIELDS: &[&str] = &[
    "from",
    "senderName",
    "host",
    "port",
    "secure",
    "region",
    "baseUrl",
    "domain",
    "projectName",
    "applicationId",
    "requireTls",
    "ignoreTls",
    "idPath",
    "datePath",
    "apiKeyRequestHeader",
    "secretKeyRequestHeader",
    "title",
    "imageUrl",
    "state",
    "externalLink",
    "channelId",
    "senderId",
    "fromAddressOverride",
    "useFromAddressOverride",
    "authenticateByToken",
    "hmac",
];

impl Credentials {
    pub fn new(map: Map<String, Value>) -> Self {
        Self(map)
    }

    /// A credential as text (numbers and booleans written out); `None` when absent, null or empty.
    pub fn get(&self, key: &str) -> Option<String> {
        match self.0.get(key)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// A credential the provider cannot work without: a permanent error naming it when missing.
    pub fn require(&self, key: &str) -> Result<String, ProviderError> {
        self.get(key).ok_or_else(|| {
            ProviderError::permanent(format!(
                "The integration's credentials have no `{key}`: set it on the integration"
            ))
        })
    }

    /// A boolean credential (`true`, `"true"`); false when absent.
    pub fn flag(&self, key: &str) -> bool {
        match self.0.get(key) {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => false,
        }
    }

    /// The `baseUrl` credential (without a trailing slash), else `default`.
    pub fn base_url(&self, default: &str) -> String {
        self.get("baseUrl")
            .unwrap_or_else(|| default.to_owned())
            .trim_end_matches('/')
            .to_owned()
    }

    /// Every secret value among the credentials, to redact from recorded answers.
    pub fn secrets(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &self.0 {
            if PUBLIC_FIELDS.contains(&k.as_str()) {
                continue;
            }
            collect_strings(v, &mut out);
        }
        out
    }
}

fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            // Very short values (a port, a flag) would redact innocent text.
            if s.len() >= 6 {
                out.push(s.clone());
            }
            // A JSON document (an FCM service account) holds its secrets inside.
            if s.trim_start().starts_with('{') {
                if let Ok(inner) = serde_json::from_str::<Value>(s) {
                    collect_strings(&inner, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

/// What a redacted secret becomes.
const REDACTED: &str = "[redacted]";

/// Replaces every secret in `text` with `[redacted]`, in each form a provider may echo it in: as is,
/// JSON-escaped, percent- and form-encoded, and base64; then every token of `text` that carries a secret
/// inside it or is one by its place (see [`redact_tokens`]): the base64 `user:password` of a Basic header, a
/// segment of a JWT, any `Bearer` or `Basic` credential.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let forms = secret_forms(secrets);
    let mut out = text.to_owned();
    for form in &forms {
        if out.contains(form.as_str()) {
            out = out.replace(form.as_str(), REDACTED);
        }
    }
    redact_tokens(&out, &forms)
}

/// Every form of each secret [`redact`] looks for, longest first (so a secret containing another is
/// replaced whole).
fn secret_forms(secrets: &[String]) -> Vec<String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use base64::Engine;
    let mut forms: Vec<String> = Vec::new();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        let json = serde_json::to_string(s).unwrap_or_default();
        let json = json.trim_matches('"');
        let form: String = form_urlencoded::byte_serialize(s.as_bytes()).collect();
        let percent = form.replace('+', "%20");
        let bytes = s.as_bytes();
        let candidates = [
            s.clone(),
            json.to_owned(),
            // JSON writers that escape slashes.
            json.replace('/', "\\/"),
            lower_hex_escapes(&form),
            lower_hex_escapes(&percent),
            form,
            percent,
            STANDARD.encode(bytes),
            STANDARD_NO_PAD.encode(bytes),
            URL_SAFE.encode(bytes),
            URL_SAFE_NO_PAD.encode(bytes),
        ];
        for c in candidates {
            if !c.is_empty() && !forms.contains(&c) {
                forms.push(c);
            }
        }
    }
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms
}

/// `%2F` → `%2f`: the same encoding written by a library with lowercase hex.
fn lower_hex_escapes(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut rest = encoded;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let escape = rest.get(i..i + 3).unwrap_or(&rest[i..]);
        out.push_str(&escape.to_ascii_lowercase());
        rest = &rest[i + escape.len()..];
    }
    out.push_str(rest);
    out
}

/// Bytes of a token: base64 (both alphabets), and the `.` and `~` of JWTs and RFC 6750 bearer tokens.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'_' | b'-' | b'.' | b'~')
}

/// The authorization scheme word just before `start` (`Bearer`, `Basic`, lowercased), if any.
fn scheme_before(text: &str, start: usize) -> Option<String> {
    let before = text[..start].strip_suffix(' ')?.trim_end_matches(' ');
    let word_start = before
        .rfind(|c: char| !c.is_ascii_alphabetic())
        .map_or(0, |i| i + 1);
    let word = before[word_start..].to_ascii_lowercase();
    matches!(word.as_str(), "bearer" | "basic").then_some(word)
}

/// Base64 text decoded leniently (either alphabet, padding optional); `None` when it is not base64.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::{alphabet, Engine};
    const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);
    if text.contains(['-', '_']) {
        URL_SAFE.decode(text).ok()
    } else {
        STANDARD.decode(text).ok()
    }
}

/// Replaces each token of `text` (a run of [`is_token_byte`], with its `=` padding) that is a credential:
/// the value of a `Bearer` scheme, the base64 `user:password` of a `Basic` one, or a token with a base64 part
/// (itself, or a dot-separated segment of a JWT) whose decoded text holds one of `forms`.
fn redact_tokens(text: &str, forms: &[String]) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied) = (0, 0);
    while i < bytes.len() {
        if !is_token_byte(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_token_byte(bytes[i]) {
            i += 1;
        }
        let padded = (i + 2).min(bytes.len());
        while i < padded && bytes[i] == b'=' {
            i += 1;
        }
        let token = &text[start..i];
        let decoded = |part: &str| {
            decode_base64(part.trim_end_matches('='))
                .map(|d| String::from_utf8_lossy(&d).into_owned())
        };
        let credential = match scheme_before(text, start).as_deref() {
            Some("bearer") => token.len() >= 8,
            Some(_) => decoded(token).is_some_and(|d| d.contains(':')),
            None => false,
        } || token
            .split(['.', '~'])
            .filter(|part| part.len() >= 8)
            .filter_map(decoded)
            .any(|d| forms.iter().any(|f| d.contains(f.as_str())));
        if credential {
            out.push_str(&text[copied..start]);
            out.push_str(REDACTED);
            copied = i;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn credentials_read_text_numbers_and_flags() {
        let c = Credentials::new(
            json!({"apiKey": " k1 ", "port": 587, "secure": true, "requireTls": "TRUE", "from": ""})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(c.get("apiKey").as_deref(), Some("k1"));
        assert_eq!(c.get("port").as_deref(), Some("587"));
        assert_eq!(c.get("from"), None);
        assert!(c.flag("secure") && c.flag("requireTls") && !c.flag("ignoreTls"));
        assert!(c.require("token").unwrap_err().message.contains("`token`"));
        assert_eq!(
            c.base_url("https://api.example.com/"),
            "https://api.example.com"
        );
    }

    #[test]
    fn secrets_are_redacted_but_public_fields_are_kept() {
        let c = Credentials::new(
            json!({
                "apiKey": "SG.secret-key-123",
                "from": "news@example.com",
                "serviceAccount": "{\"private_key\": \"-----BEGIN KEY-----\\nabc\\n\", \"client_email\": \"svc@p.iam\"}"
            })
            .as_object()
            .unwrap()
            .clone(),
        );
        let secrets = c.secrets();
        let text = r#"{"auth":"Bearer SG.secret-key-123","from":"news@example.com","k":"-----BEGIN KEY-----\nabc\n"}"#;
        let out = redact(text, &secrets);
        assert!(!out.contains("SG.secret-key-123"), "{out}");
        assert!(!out.contains("BEGIN KEY"), "{out}");
        assert!(out.contains("news@example.com"));
        assert!(out.contains("Bearer [redacted]"));
    }

    /// A secret echoed in any encoding is redacted: inside a Basic header's base64 `user:password`, as
    /// base64 alone, percent-, form- and JSON-encoded, and inside a JWT segment; any Bearer value too.
    #[test]
    fn every_encoding_of_a_secret_is_redacted() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        use base64::Engine;
        let secret = "s3cr3t/t0ken+with=chars & more".to_owned();
        let basic = STANDARD.encode(format!("AC0123:{secret}"));
        let jwt = format!(
            "eyJhbGciOiJIUzI1NiJ9.{}.c2lnbmF0dXJl",
            URL_SAFE_NO_PAD.encode(format!("{{\"k\":\"{secret}\"}}"))
        );
        let form: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        let text = format!(
            "{{\"auth\":\"Basic {basic}\",\"alone\":\"{}\",\"url\":\"https://x/?t={}\",\
             \"lower\":\"{}\",\"form\":\"t={form}\",\"json\":{},\"jwt\":\"{jwt}\",\
             \"other\":\"Authorization: Bearer abc.DEF-ghi_jkl~\",\"keep\":\"Basic auth failed for user 42\"}}",
            STANDARD.encode(&secret),
            form.replace('+', "%20"),
            lower_hex_escapes(&form),
            serde_json::to_string(&secret).unwrap(),
        );
        let out = redact(&text, std::slice::from_ref(&secret));
        for leaked in [
            basic.as_str(),
            "s3cr3t",
            &jwt,
            "abc.DEF",
            &STANDARD.encode(&secret)[..12],
        ] {
            assert!(!out.contains(leaked), "{leaked} in {out}");
        }
        assert_eq!(out.matches(REDACTED).count(), 8, "{out}");
        assert!(out.contains("Basic auth failed for user 42"), "{out}");
    }

    #[test]
    fn every_registered_provider_is_found_by_its_id_on_its_channel() {
        for id in supported() {
            let p = provider(id).expect(id);
            assert_eq!(p.id(), id);
            // A known ProviderId of the spec's set, delivering on the channel its integrations use.
            let known = crate::domain::channel::ProviderId::parse(id).expect(id);
            assert_eq!(known.channel(), Some(p.channel()), "{id}");
        }
        assert!(provider("no-such-provider").is_none());
    }
}
