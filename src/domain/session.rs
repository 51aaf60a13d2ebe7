//! The Inbox's session token: what `POST /v1/inbox/session` hands a browser and every other Inbox route
//! takes as `Authorization: Bearer <token>`. It names an environment (and its organization), a subscriber
//! (`_id`) and when it expires, signed with the environment's session key so that it can be neither forged
//! nor altered, nor used in another environment. The client treats it as opaque.
//!
//! Layout: [`sign_fields`] of `environment_id`, `organization_id`, `subscriber_ref` and the expiry (Unix ms,
//! decimal), keyed with the environment's [`Cipher::signing_key`] for [`PURPOSE`]: derived from the server's
//! encryption key, so rotating an API key does not end the sessions open in browsers.

use super::{EnvironmentId, OrganizationId, SubscriberRef, Tenant, Timestamp};
use crate::crypto::{sign_fields, verify_fields, Cipher};

/// The signing key's purpose label (its version changes if the layout ever does).
pub const PURPOSE: &str = "tidings inbox session v1";

/// How long a session lasts, as Novu's (15 days): `@novu/js` never renews a token, so a page left open
/// keeps working for that long.
pub const LIFETIME_MS: i64 = 15 * 24 * 3600 * 1000;

/// The longest token read; longer ones are refused before any decoding (ours are about 150 characters).
pub const MAX_TOKEN: usize = 512;

/// Whose session it is, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionToken {
    pub tenant: Tenant,
    pub subscriber_ref: SubscriberRef,
    pub expires_at: Timestamp,
}

impl SessionToken {
    /// A session of `subscriber_ref` in `tenant` that starts now.
    pub fn starting_now(tenant: Tenant, subscriber_ref: SubscriberRef) -> Self {
        Self {
            tenant,
            subscriber_ref,
            expires_at: Timestamp(Timestamp::now().0 + LIFETIME_MS),
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
            ],
        )
    }

    /// The token's contents when it verifies (see [`verify_fields`]) and has not expired at `now`.
    pub fn verify(token: &str, cipher: &Cipher, now: Timestamp) -> Option<Self> {
        let [env, org, subscriber, expires] = verify_fields(token, MAX_TOKEN, |env| {
            key(cipher, &EnvironmentId(env.to_owned()))
        })?;
        let expires_at = Timestamp(expires.parse().ok()?);
        (expires_at.0 > now.0).then(|| Self {
            tenant: Tenant {
                organization_id: OrganizationId(org),
                environment_id: EnvironmentId(env),
            },
            subscriber_ref: SubscriberRef::from(subscriber),
            expires_at,
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
