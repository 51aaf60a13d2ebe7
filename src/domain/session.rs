//! The Inbox's session token: what `POST /v1/inbox/session` hands a browser and every other Inbox route
//! takes as `Authorization: Bearer <token>`. It names an environment (and its organization), a subscriber
//! (`_id`), when it expires and the environment's session epoch it was opened in, signed with the
//! environment's session key so that it can be neither forged nor altered, nor used in another environment.
//! The client treats it as opaque.
//!
//! Layout: [`sign_fields`] of `environment_id`, `organization_id`, `subscriber_ref`, the expiry (Unix ms,
//! decimal), the session's context keys (the JSON array of its sorted `type:id` keys, `[]` without a
//! context) and the epoch (decimal), keyed with the environment's [`Cipher::signing_key`] for [`PURPOSE`]
//! (derived from the server's encryption key). Sessions end before they expire when the environment's epoch
//! is raised past theirs (`service::inbox_session::end_sessions`), which the signature alone cannot tell: the
//! epoch is compared where the subscriber is read. A token of the first five fields only (signed before
//! sessions had epochs) is of epoch 0; one of the first four only (before contexts) has no context either.

use super::{EnvironmentId, OrganizationId, SubscriberRef, Tenant, Timestamp};
use crate::crypto::{sign_fields, verify_fields, Cipher};

/// The signing key's purpose label (its version changes if the layout ever does).
pub const PURPOSE: &str = "tidings inbox session v1";

/// How long a session lasts, as Novu's (15 days): `@novu/js` never renews a token, so a page left open
/// keeps working for that long.
pub const LIFETIME_MS: i64 = 15 * 24 * 3600 * 1000;

/// The longest token read; longer ones are refused before any decoding (ours are about 150 characters
/// without a context, and at most about 1,600 with five context keys of the longest types and ids).
pub const MAX_TOKEN: usize = 2048;

/// Whose session it is, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionToken {
    pub tenant: Tenant,
    pub subscriber_ref: SubscriberRef,
    pub expires_at: Timestamp,
    /// The session's context: sorted, de-duplicated `type:id` keys (none without a context).
    pub context_keys: Vec<String>,
    /// The environment's session epoch when the session opened.
    pub epoch: i64,
}

impl SessionToken {
    /// A session of `subscriber_ref` in `tenant`, with the context `context_keys` (sorted), that starts now
    /// (in epoch 0; set [`SessionToken::epoch`] to the environment's).
    pub fn starting_now(
        tenant: Tenant,
        subscriber_ref: SubscriberRef,
        context_keys: Vec<String>,
    ) -> Self {
        Self {
            tenant,
            subscriber_ref,
            expires_at: Timestamp(Timestamp::now().0 + LIFETIME_MS),
            context_keys,
            epoch: 0,
        }
    }

    /// The signed token.
    pub fn sign(&self, cipher: &Cipher) -> String {
        sign_fields(
            &key(cipher, &self.tenant.environment_id),
            &[
                self.tenant.environment_id.as_str(),
                self.tenant.organization_id.as_str(),
                self.subscriber_ref.as_str(),
                &self.expires_at.0.to_string(),
                // JSON escapes newlines: the field holds none.
                &serde_json::to_string(&self.context_keys).expect("strings serialize"),
                &self.epoch.to_string(),
            ],
        )
    }

    /// The token's contents when it verifies (see [`verify_fields`]) and has not expired at `now`.
    pub fn verify(token: &str, cipher: &Cipher, now: Timestamp) -> Option<Self> {
        let key_of = |env: &str| key(cipher, &EnvironmentId(env.to_owned()));
        let [env, org, subscriber, expires, context, epoch] =
            match verify_fields::<6>(token, MAX_TOKEN, key_of) {
                Some(fields) => fields,
                None => match verify_fields::<5>(token, MAX_TOKEN, key_of) {
                    Some([env, org, subscriber, expires, context]) => {
                        [env, org, subscriber, expires, context, "0".to_owned()]
                    }
                    None => {
                        let [env, org, subscriber, expires] =
                            verify_fields::<4>(token, MAX_TOKEN, key_of)?;
                        [
                            env,
                            org,
                            subscriber,
                            expires,
                            "[]".to_owned(),
                            "0".to_owned(),
                        ]
                    }
                },
            };
        let context_keys: Vec<String> = serde_json::from_str(&context).ok()?;
        let epoch: i64 = epoch.parse().ok()?;
        let expires_at = Timestamp(expires.parse().ok()?);
        (expires_at.0 > now.0).then(|| Self {
            tenant: Tenant {
                organization_id: OrganizationId(org),
                environment_id: EnvironmentId(env),
            },
            subscriber_ref: SubscriberRef::from(subscriber),
            expires_at,
            context_keys,
            epoch,
        })
    }
}

/// The environment's session key.
fn key(cipher: &Cipher, env: &EnvironmentId) -> [u8; 32] {
    cipher.signing_key(PURPOSE, env.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(env: &str) -> SessionToken {
        SessionToken::starting_now(
            Tenant {
                organization_id: OrganizationId("65a1b2c3d4e5f60718293a40".into()),
                environment_id: EnvironmentId(env.to_owned()),
            },
            SubscriberRef::from("65a1b2c3d4e5f60718293a4b".to_owned()),
            vec![],
        )
    }

    #[test]
    fn a_token_verifies_until_it_expires() {
        let c = Cipher::from_bytes(&[1; 32]);
        let t = session("65a1b2c3d4e5f60718293a4d");
        let signed = t.sign(&c);
        assert!(signed.len() < 200, "{signed}");
        assert_eq!(
            SessionToken::verify(&signed, &c, Timestamp::now()),
            Some(t.clone())
        );
        assert_eq!(SessionToken::verify(&signed, &c, t.expires_at), None);
    }

    #[test]
    fn the_context_is_signed_and_a_token_without_one_has_none() {
        let c = Cipher::from_bytes(&[1; 32]);
        let mut t = session("env-c");
        t.context_keys = vec!["app:jira".into(), "tenant:acme".into()];
        let now = Timestamp::now();
        let signed = t.sign(&c);
        assert_eq!(SessionToken::verify(&signed, &c, now), Some(t.clone()));
        // A token signed before sessions had contexts: the same four fields, no context.
        let old = sign_fields(
            &key(&c, &EnvironmentId("env-c".into())),
            &[
                "env-c",
                t.tenant.organization_id.as_str(),
                t.subscriber_ref.as_str(),
                &t.expires_at.0.to_string(),
            ],
        );
        let read = SessionToken::verify(&old, &c, now).expect("an old token verifies");
        assert!(read.context_keys.is_empty());
        assert_eq!(read.epoch, 0);
        // The context cannot be changed: another context in the same fields does not verify.
        let (payload, tag) = signed.split_once('.').unwrap();
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        let other = text.replace("tenant:acme", "tenant:evil");
        let forged = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(other));
        assert_eq!(SessionToken::verify(&forged, &c, now), None);
        // The longest context (five keys of 100-character types and ids) fits in a token.
        t.context_keys = (0..5)
            .map(|i| format!("{}:{}", "t".repeat(99) + &i.to_string(), "i".repeat(100)))
            .collect();
        let long = t.sign(&c);
        assert!(long.len() <= MAX_TOKEN, "{}", long.len());
        assert_eq!(SessionToken::verify(&long, &c, now), Some(t));
    }

    #[test]
    fn the_epoch_is_signed_and_a_token_without_one_is_of_epoch_0() {
        let c = Cipher::from_bytes(&[1; 32]);
        let mut t = session("env-e");
        t.epoch = 7;
        let now = Timestamp::now();
        let signed = t.sign(&c);
        assert_eq!(SessionToken::verify(&signed, &c, now), Some(t.clone()));
        // Signed before sessions had epochs: five fields.
        let old = sign_fields(
            &key(&c, &EnvironmentId("env-e".into())),
            &[
                "env-e",
                t.tenant.organization_id.as_str(),
                t.subscriber_ref.as_str(),
                &t.expires_at.0.to_string(),
                "[]",
            ],
        );
        assert_eq!(
            SessionToken::verify(&old, &c, now).map(|t| t.epoch),
            Some(0)
        );
        // The epoch cannot be raised.
        let (payload, tag) = signed.split_once('.').unwrap();
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        let forged = format!(
            "{}.{tag}",
            URL_SAFE_NO_PAD.encode(text.replace("\n7", "\n8"))
        );
        assert_eq!(SessionToken::verify(&forged, &c, now), None);
    }

    #[test]
    fn another_key_environment_or_purpose_does_not_verify() {
        let c = Cipher::from_bytes(&[1; 32]);
        let t = session("env-b");
        let now = Timestamp::now();
        assert_eq!(
            SessionToken::verify(&t.sign(&Cipher::from_bytes(&[2; 32])), &c, now),
            None
        );
        // Signed with environment A's key while naming environment B.
        let forged = sign_fields(
            &key(&c, &EnvironmentId("env-a".into())),
            &["env-b", "org", "sub", &t.expires_at.0.to_string()],
        );
        assert_eq!(SessionToken::verify(&forged, &c, now), None);
        // An unsubscribe token's key (another purpose) over the same fields.
        let other = sign_fields(
            &c.signing_key(super::super::unsubscribe::PURPOSE, "env-b"),
            &["env-b", "org", "sub", &t.expires_at.0.to_string()],
        );
        assert_eq!(SessionToken::verify(&other, &c, now), None);
        // Well signed, but the expiry is not a number.
        let bad = sign_fields(
            &key(&c, &EnvironmentId("env-b".into())),
            &["env-b", "org", "sub", "soon"],
        );
        assert_eq!(SessionToken::verify(&bad, &c, now), None);
    }
}
