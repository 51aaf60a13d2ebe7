//! Push providers.

mod expo;
mod fcm;
mod one_signal;
mod webhook;

use serde_json::{Map, Value};

use super::{http, Delivered, Provider, ProviderError};

/// Every supported push provider.
pub const ALL: &[&dyn Provider] = &[
    &webhook::PushWebhook,
    &fcm::Fcm,
    &expo::Expo,
    &one_signal::OneSignal,
];

/// The push provider registered under `id`.
pub fn lookup(id: &str) -> Option<&'static dyn Provider> {
    ALL.iter().copied().find(|p| p.id() == id)
}

/// What became of one push sent to several device tokens (one call per token, or per batch of tokens).
#[derive(Default)]
struct Tally {
    /// Tokens the provider accepted.
    sent: usize,
    /// The provider's id of the first accepted message.
    id: Option<String>,
    /// Tokens the provider reported invalid or unregistered.
    invalid: Vec<String>,
    /// Other failures, in order.
    failures: Vec<ProviderError>,
    /// The answers, for the execution detail.
    raw: Vec<Value>,
}

impl Tally {
    fn accepted(&mut self, id: Option<String>) {
        self.sent += 1;
        if self.id.is_none() {
            self.id = id;
        }
    }

    fn answer(&mut self, raw: &str) {
        self.raw
            .push(serde_json::from_str(raw).unwrap_or_else(|_| Value::from(raw)));
    }

    /// Delivered when at least one token was accepted (the invalid ones reported for removal); else the
    /// first failure; else (every token invalid) a permanent error.
    fn finish(self, provider: &str) -> Result<Delivered, ProviderError> {
        let raw = if self.raw.len() == 1 {
            self.raw[0].to_string()
        } else {
            Value::Array(self.raw).to_string()
        };
        let raw = http::truncate(&raw, 4 * http::RAW_LIMIT).to_owned();
        if self.sent > 0 {
            return Ok(Delivered {
                id: self.id,
                raw,
                invalid_tokens: self.invalid,
            });
        }
        if let Some(mut first) = self.failures.into_iter().next() {
            first.invalid_tokens = self.invalid;
            return Err(first);
        }
        let count = self.invalid.len();
        Err(ProviderError {
            invalid_tokens: self.invalid,
            raw: Some(raw),
            ..ProviderError::permanent(format!(
                "{provider} reported every device token ({count}) invalid or unregistered"
            ))
        })
    }
}

/// `{"status": …, "body": …}` of a failed call's answer, when there was one.
fn failed_answer(e: &ProviderError) -> Option<(u64, Value)> {
    let raw: Value = serde_json::from_str(e.raw.as_deref()?).ok()?;
    Some((raw.get("status")?.as_u64()?, raw.get("body")?.clone()))
}

/// Provider overrides merged over `base` (an object), except `skip`ped keys.
fn merge_overrides(base: &mut Map<String, Value>, overrides: &Value, skip: &[&str]) {
    if let Some(o) = overrides.as_object() {
        for (k, v) in o {
            if !skip.contains(&k.as_str()) {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Failure;
    use serde_json::json;

    #[test]
    fn a_tally_is_delivered_failed_or_all_invalid() {
        let mut t = Tally::default();
        t.invalid.push("a".into());
        t.accepted(Some("m1".into()));
        t.answer(r#"{"status":200,"body":{"name":"m1"}}"#);
        let d = t.finish("FCM").unwrap();
        assert_eq!(d.id.as_deref(), Some("m1"));
        assert_eq!(d.invalid_tokens, ["a"]);
        assert_eq!(
            serde_json::from_str::<Value>(&d.raw).unwrap(),
            json!({"status": 200, "body": {"name": "m1"}})
        );

        let mut t = Tally::default();
        t.invalid.push("a".into());
        t.failures.push(ProviderError::transient("busy"));
        assert!(t.finish("FCM").unwrap_err().is_transient());

        let mut t = Tally::default();
        t.invalid.extend(["a".to_owned(), "b".to_owned()]);
        let e = t.finish("Expo").unwrap_err();
        assert_eq!(e.failure, Failure::Permanent);
        assert!(
            e.message.contains("every device token (2)"),
            "{}",
            e.message
        );
    }

    #[test]
    fn overrides_merge_except_skipped_keys() {
        let mut base = json!({"to": "t", "title": "T"})
            .as_object()
            .unwrap()
            .clone();
        merge_overrides(
            &mut base,
            &json!({"to": "x", "sound": "default", "title": "U"}),
            &["to"],
        );
        assert_eq!(
            Value::Object(base),
            json!({"to": "t", "title": "U", "sound": "default"})
        );
    }
}
