//! What every HTTP provider shares: sending a request and classifying the answer.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{RequestBuilder, StatusCode};
use serde_json::{json, Value};

use super::{Delivered, Failure, ProviderError, SendContext};

/// How much of an answer's body is kept in `raw`.
pub const RAW_LIMIT: usize = 4096;

/// A provider's answer to a request that succeeded at the HTTP level (2xx).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    /// The body parsed as JSON, or `Value::String` of the text when it is not JSON.
    pub body: Value,
    /// `{"status": …, "body": …}`, truncated, for the execution detail.
    pub raw: String,
}

impl Answer {
    /// A response header as text (trimmed; `None` when absent or empty).
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    }

    /// A [`Delivered`] whose provider message id is read from `id_path` (a dotted path) of the body.
    pub fn delivered(self, id_path: &str) -> Delivered {
        let id = lookup(&self.body, id_path).and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
        Delivered {
            id,
            raw: self.raw,
            invalid_tokens: Vec::new(),
        }
    }
}

/// Sends `req` and classifies the answer: 2xx → `Ok`; 408, 429 (with `Retry-After`), 5xx, timeouts and
/// network errors → a transient error; any other status → a permanent one. `what` names the call in
/// messages ("SendGrid mail/send").
pub async fn send(req: RequestBuilder, what: &str) -> Result<Answer, ProviderError> {
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            if let Some(why) = crate::outbound::refusal(&e) {
                return Err(ProviderError::permanent(format!("{what}: {why}")));
            }
            let kind = if e.is_timeout() {
                "timed out"
            } else if e.is_connect() {
                "could not connect"
            } else {
                "failed"
            };
            return Err(ProviderError::transient(format!(
                "{what} {kind}: {}",
                without_url(&e)
            )));
        }
    };
    let status = resp.status();
    let headers = resp.headers().clone();
    let retry_after = retry_after(&headers);
    let text = match resp.text().await {
        Ok(t) => t,
        Err(e) => {
            return Err(ProviderError::transient(format!(
                "{what}: reading the answer failed: {}",
                without_url(&e)
            )))
        }
    };
    let body = serde_json::from_str::<Value>(&text).unwrap_or_else(|_| Value::String(text.clone()));
    let raw = raw_text(status.as_u16(), &text);
    if status.is_success() {
        return Ok(Answer {
            status: status.as_u16(),
            headers,
            body,
            raw,
        });
    }
    let failure = classify(status, retry_after);
    Err(ProviderError {
        invalid_tokens: Vec::new(),
        failure,
        message: format!(
            "{what} answered {}{}",
            status,
            error_summary(&body)
                .map(|s| format!(": {s}"))
                .unwrap_or_default()
        ),
        raw: Some(raw),
    })
}

/// POSTs `body` as JSON to a webhook URL, signed when the integration has a `secretKey` credential: the
/// header [`SendContext::signature_header`] carries the hex HMAC-SHA256 of the exact body text.
pub async fn post_webhook(
    ctx: &SendContext<'_>,
    url: &str,
    body: &Value,
    what: &str,
) -> Result<Answer, ProviderError> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ProviderError::permanent(format!(
            "{what}: the webhook URL is not an absolute http(s) URL"
        )));
    }
    let text = body.to_string();
    let mut req = ctx
        .http
        .post(url)
        .header("content-type", "application/json");
    if let Some(secret) = ctx.credentials.get("secretKey") {
        let signature = crate::crypto::hmac_sha256_hex(&secret, &[text.as_bytes()]);
        req = req.header(ctx.signature_header(), signature);
    }
    send(req.body(text), what).await
}

/// Whether a non-2xx status is worth retrying.
pub fn classify(status: StatusCode, retry_after: Option<Duration>) -> Failure {
    if status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || status.is_server_error()
    {
        Failure::Transient { retry_after }
    } else {
        Failure::Permanent
    }
}

/// `Retry-After` as seconds or as an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let ms = at.timestamp_millis() - chrono::Utc::now().timestamp_millis();
    Some(Duration::from_millis(ms.max(0) as u64))
}

/// `{"status": …, "body": …}` with the body as JSON when it is JSON, truncated to [`RAW_LIMIT`].
pub fn raw_text(status: u16, text: &str) -> String {
    let body = match serde_json::from_str::<Value>(text) {
        Ok(v) if text.len() <= RAW_LIMIT => v,
        _ => Value::String(truncate(text, RAW_LIMIT).to_owned()),
    };
    json!({"status": status, "body": body}).to_string()
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// A one-line error message from a provider's error body, when it has a usual field for it (`message`,
/// `Message` (Postmark), `error_description`, `error`, `detail`, `description`, or the first of `errors`).
pub fn error_summary(body: &Value) -> Option<String> {
    let pick = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) if !s.is_empty() => Some(truncate(s, 300).to_owned()),
            _ => None,
        }
    };
    match body {
        Value::String(s) => pick(&Value::String(s.trim().to_owned())),
        Value::Object(m) => [
            "message",
            "Message",
            "error_description",
            "error",
            "detail",
            "description",
        ]
        .iter()
        .find_map(|k| {
            m.get(*k)
                .and_then(|v| pick(v).or_else(|| v.get("message").and_then(pick)))
        })
        .or_else(|| {
            m.get("errors")
                .and_then(|e| e.get(0))
                .and_then(|e| e.get("message").and_then(pick).or_else(|| pick(e)))
        }),
        _ => None,
    }
}

/// A reqwest error without the URL (which may carry a token, e.g. Telegram's `bot<token>` path).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text
}

/// `base` followed by `segments`, each percent-encoded as one path segment (an id with `/`, `?` or `#`
/// cannot change the path).
pub fn api_url(base: &str, segments: &[&str]) -> Result<String, ProviderError> {
    let mut url = url::Url::parse(base)
        .map_err(|_| ProviderError::permanent("The `baseUrl` credential is not an absolute URL"))?;
    url.path_segments_mut()
        .map_err(|_| ProviderError::permanent("The `baseUrl` credential is not an http(s) URL"))?
        .pop_if_empty()
        .extend(segments);
    Ok(url.to_string())
}

/// A dotted path into a JSON value (`messages.0.id`).
pub fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|p| !p.is_empty())
        .try_fold(v, |cur, part| match cur {
            Value::Object(m) => m.get(part),
            Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn api_urls_encode_each_segment() {
        assert_eq!(
            api_url(
                "http://127.0.0.1:9/",
                &["v1.0", "teams", "a/b?c", "19:x@thread.tacv2"]
            )
            .unwrap(),
            "http://127.0.0.1:9/v1.0/teams/a%2Fb%3Fc/19:x@thread.tacv2"
        );
        assert_eq!(
            api_url(
                "https://api.example.com/prefix",
                &["bot1:AA-b_c", "sendMessage"]
            )
            .unwrap(),
            "https://api.example.com/prefix/bot1:AA-b_c/sendMessage"
        );
        assert!(api_url("not a url", &["x"]).is_err());
    }

    #[test]
    fn statuses_are_classified() {
        assert_eq!(
            classify(StatusCode::BAD_GATEWAY, None),
            Failure::Transient { retry_after: None }
        );
        assert_eq!(
            classify(StatusCode::TOO_MANY_REQUESTS, Some(Duration::from_secs(2))),
            Failure::Transient {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        assert_eq!(classify(StatusCode::BAD_REQUEST, None), Failure::Permanent);
        assert_eq!(classify(StatusCode::UNAUTHORIZED, None), Failure::Permanent);
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        let sent = chrono::Utc::now();
        let later = (sent + chrono::Duration::seconds(30)).to_rfc2822();
        h.insert(RETRY_AFTER, HeaderValue::from_str(&later).unwrap());
        let d = retry_after(&h).unwrap();
        // The date has whole seconds (up to 1 s less), and the wait counts from the reading.
        let since = (chrono::Utc::now() - sent).to_std().unwrap();
        assert!(
            d <= Duration::from_secs(30)
                && d + since + Duration::from_secs(1) >= Duration::from_secs(30),
            "{d:?} ({since:?} after the date was written)"
        );
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn raw_keeps_json_and_truncates_text() {
        let raw: Value = serde_json::from_str(&raw_text(202, r#"{"id":"m1"}"#)).unwrap();
        assert_eq!(raw, json!({"status": 202, "body": {"id": "m1"}}));
        let long = "é".repeat(RAW_LIMIT);
        let raw: Value = serde_json::from_str(&raw_text(500, &long)).unwrap();
        assert!(raw["body"].as_str().unwrap().len() <= RAW_LIMIT);
    }

    #[test]
    fn error_summaries_come_from_usual_fields() {
        assert_eq!(
            error_summary(&json!({"errors": [{"message": "bad from"}]})).as_deref(),
            Some("bad from")
        );
        assert_eq!(
            error_summary(&json!({"error": {"message": "quota"}})).as_deref(),
            Some("quota")
        );
        assert_eq!(error_summary(&json!({"ok": false})), None);
    }
}
