//! The one-click unsubscribe token of an email (RFC 8058 links): it names an environment, a subscriber
//! (`_id`) and a workflow (`_id`), signed with the environment's unsubscribe key so that it can be neither
//! forged nor altered. It never expires: links in mails already sent keep working.
//!
//! Layout: [`sign_fields`] of `environment_id`, `subscriber_ref` and `workflow_ref`, keyed with the
//! environment's [`Cipher::signing_key`] for [`PURPOSE`] (derived from the server's encryption key, not from
//! an API key: rotating a key must not break links already sent, and one environment's key signs no other's
//! tokens).

use super::{EnvironmentId, SubscriberRef, WorkflowRef};
use crate::crypto::{sign_fields, verify_fields, Cipher};

/// The signing key's purpose label (its version changes if the layout ever does).
pub const PURPOSE: &str = "tidings unsubscribe v1";

/// The longest token read; longer ones are refused before any decoding (ours are about 150 characters).
pub const MAX_TOKEN: usize = 512;

/// Who unsubscribes from what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsubscribeToken {
    pub environment_id: EnvironmentId,
    pub subscriber_ref: SubscriberRef,
    pub workflow_ref: WorkflowRef,
}

impl UnsubscribeToken {
    /// The signed token, with the environment's key derived from `cipher`.
    pub fn sign(&self, cipher: &Cipher) -> String {
        self.sign_with(&key(cipher, &self.environment_id))
    }

    fn sign_with(&self, key: &[u8; 32]) -> String {
        sign_fields(
            key,
            &[
                self.environment_id.as_str(),
                self.subscriber_ref.as_str(),
                self.workflow_ref.as_str(),
            ],
        )
    }

    /// The token's contents when its signature is the one its environment's key makes (compared in
    /// constant time); `None` for anything else: too long, malformed, altered, or signed with another key.
    pub fn verify(token: &str, cipher: &Cipher) -> Option<Self> {
        let [env, subscriber, workflow] = verify_fields(token, MAX_TOKEN, |env| {
            key(cipher, &EnvironmentId(env.to_owned()))
        })?;
        Some(Self {
            environment_id: EnvironmentId(env),
            subscriber_ref: SubscriberRef::from(subscriber),
            workflow_ref: WorkflowRef::from(workflow),
        })
    }
}

/// The environment's unsubscribe key.
fn key(cipher: &Cipher, env: &EnvironmentId) -> [u8; 32] {
    cipher.signing_key(PURPOSE, env.as_str())
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use base64::Engine;

    use super::*;
    use crate::crypto::hmac_sha256;

    fn token(env: &str) -> UnsubscribeToken {
        UnsubscribeToken {
            environment_id: EnvironmentId(env.to_owned()),
            subscriber_ref: SubscriberRef::from("65a1b2c3d4e5f60718293a4b".to_owned()),
            workflow_ref: WorkflowRef::from("65a1b2c3d4e5f60718293a4c".to_owned()),
        }
    }

    fn cipher(byte: u8) -> Cipher {
        Cipher::from_bytes(&[byte; 32])
    }

    #[test]
    fn a_signed_token_verifies_to_what_it_names() {
        let t = token("65a1b2c3d4e5f60718293a4d");
        let signed = t.sign(&cipher(1));
        assert!(signed.len() < 200, "{signed}");
        assert!(signed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)));
        assert_eq!(UnsubscribeToken::verify(&signed, &cipher(1)), Some(t));
    }

    #[test]
    fn another_key_or_another_environments_key_does_not_verify() {
        let t = token("env-b");
        // Signed with another server's key.
        assert_eq!(
            UnsubscribeToken::verify(&t.sign(&cipher(2)), &cipher(1)),
            None
        );
        // Signed with environment A's key while naming environment B.
        let forged = t.sign_with(&key(&cipher(1), &EnvironmentId("env-a".into())));
        assert_eq!(UnsubscribeToken::verify(&forged, &cipher(1)), None);
    }

    #[test]
    fn an_altered_token_does_not_verify() {
        let c = cipher(1);
        let signed = token("env-a").sign(&c);
        let (payload, tag) = signed.split_once('.').unwrap();
        // Another subscriber in the payload, the original signature.
        let other = UnsubscribeToken {
            subscriber_ref: SubscriberRef::from("65a1b2c3d4e5f60718293a4e".to_owned()),
            ..token("env-a")
        };
        let other_payload = other.sign(&c).split_once('.').unwrap().0.to_owned();
        assert_eq!(
            UnsubscribeToken::verify(&format!("{other_payload}.{tag}"), &c),
            None
        );
        // Each character of the token changed in turn.
        for i in 0..signed.len() {
            let mut bytes = signed.clone().into_bytes();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(bytes).unwrap();
            assert_eq!(UnsubscribeToken::verify(&altered, &c), None, "{altered}");
        }
        // Cut, extended, empty parts, too long, not base64.
        for bad in [
            &signed[..signed.len() - 1],
            &format!("{signed}A"),
            &format!("{payload}."),
            &format!(".{tag}"),
            payload,
            "",
            "not a token",
            &format!("{signed}.{tag}"),
            &"A".repeat(MAX_TOKEN + 1),
        ] {
            assert_eq!(UnsubscribeToken::verify(bad, &c), None, "{bad}");
        }
        // A payload of two or four fields, validly signed, is refused too.
        let k = key(&c, &EnvironmentId("env-a".into()));
        for payload in ["env-a\nsub", "env-a\nsub\nwf\nmore", "env-a\n\nwf"] {
            let tag = hmac_sha256(&k, &[payload.as_bytes()]);
            let t = format!("{}.{}", B64.encode(payload), B64.encode(tag));
            assert_eq!(UnsubscribeToken::verify(&t, &c), None, "{payload:?}");
        }
    }
}
