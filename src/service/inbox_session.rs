//! The Inbox's sessions (`POST /v1/inbox/session`): a browser names an environment by its public identifier
//! and a subscriber, proves the subscriber with an HMAC of its id when the environment demands it, and gets
//! a signed session token ([`SessionToken`]) for that subscriber only. The subscriber is created when it does
//! not exist; its profile is updated only by a session whose HMAC is valid, so that a browser cannot rewrite
//! somebody else's profile.

use serde_json::Value;

use super::subscribers::{self, SubscriberFields};
use crate::crypto::hmac_sha256_verify;
use crate::domain::session::SessionToken;
use crate::domain::{Channel, EnvironmentId, OrganizationId, SubscriberRef, Tenant, Timestamp};
use crate::error::{Error, Result};
use crate::store::messages::MessageFilter;
use crate::store::tenants::EnvironmentRow;
use crate::store::Store;

/// The Inbox counts no further (Novu's cap; the bell shows "99+").
pub const INBOX_COUNT_CAP: i64 = 100;

/// What a browser sends to open a session.
#[derive(Debug, Clone, Default)]
pub struct SessionRequest {
    pub subscriber_id: String,
    pub subscriber_hash: Option<String>,
    /// The profile the browser sends; written only with a valid HMAC, or when the subscriber is new.
    pub profile: SubscriberFields,
}

/// Unread messages that are not snoozed: all, and by severity (high, medium, low, none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnreadCounts {
    pub total: i64,
    pub severity: [i64; 4],
}

/// An open session.
#[derive(Debug, Clone)]
pub struct Session {
    pub token: String,
    pub unread: UnreadCounts,
    pub application_identifier: String,
    /// Novu's development mode (the UI's banner): any environment not named "Production".
    pub development: bool,
}

/// The environment whose public identifier is `identifier`; an unknown one is a 400.
pub async fn environment(store: &Store, identifier: &str) -> Result<EnvironmentRow> {
    let invalid = || Error::bad_request("Please provide a valid application identifier");
    if identifier.is_empty() || identifier.len() > 64 {
        return Err(invalid());
    }
    store
        .environment_by_identifier(identifier)
        .await?
        .ok_or_else(invalid)
}

/// Opens a session in `env` (see the module's documentation). An environment whose in-app integrations are
/// all inactive is a 404; a missing or wrong HMAC where the active in-app integration asks for one
/// (`credentials.hmac`) a 400.
pub async fn open(store: &Store, env: EnvironmentRow, req: SessionRequest) -> Result<Session> {
    let tenant = Tenant {
        organization_id: OrganizationId(env.organization_id.clone()),
        environment_id: EnvironmentId(env.id.clone()),
    };
    let hmac_required = hmac_required(store, &tenant).await?;
    let hmac_valid = match &req.subscriber_hash {
        Some(hash) => hmac_matches(store, &tenant.environment_id, &req.subscriber_id, hash).await?,
        None => false,
    };
    if hmac_required && !hmac_valid {
        return Err(Error::bad_request("Please provide a valid HMAC hash"));
    }
    let existing = store
        .get_subscriber(&tenant.environment_id, req.subscriber_id.trim())
        .await?;
    let subscriber_ref = match existing {
        Some(s) if !hmac_valid || req.profile == SubscriberFields::default() => s.id,
        _ => {
            subscribers::create(store, &tenant, &req.subscriber_id, req.profile, false)
                .await?
                .subscriber
                .id
        }
    };
    let unread = unread_counts(store, &tenant.environment_id, &subscriber_ref).await?;
    let token = SessionToken::starting_now(tenant, subscriber_ref).sign(store.cipher());
    Ok(Session {
        token,
        unread,
        application_identifier: env.identifier,
        development: !env.name.eq_ignore_ascii_case("production"),
    })
}

/// Whether the environment's in-app integration asks for an HMAC. An environment without any in-app
/// integration is served as Novu serves its default one (active, no HMAC); one whose in-app integrations
/// are all inactive has none (404).
async fn hmac_required(store: &Store, tenant: &Tenant) -> Result<bool> {
    let in_app: Vec<_> = super::integrations::list(store, tenant, false)
        .await?
        .into_iter()
        .filter(|i| i.channel == Some(Channel::InApp))
        .collect();
    if in_app.is_empty() {
        return Ok(false);
    }
    let active = in_app
        .iter()
        // Novu's in-app provider `novu`, spelled canonically.
        .find(|i| i.active && i.provider_id.as_str() == "svc")
        .ok_or_else(|| {
            Error::NotFound("The active in-app integration could not be found".into())
        })?;
    let credentials = store
        .cipher()
        .decrypt_string(&active.credentials_sealed)
        .map_err(anyhow::Error::from)?;
    let credentials: Value = serde_json::from_str(&credentials).unwrap_or(Value::Null);
    Ok(credentials.get("hmac") == Some(&Value::Bool(true)))
}

/// Whether `hash` is the hexadecimal HMAC-SHA256 of `subscriber_id` keyed with one of the environment's API
/// keys (any of them, so that a key rotation does not lock browsers out), compared in constant time.
async fn hmac_matches(
    store: &Store,
    env: &EnvironmentId,
    subscriber_id: &str,
    hash: &str,
) -> Result<bool> {
    let Ok(tag) = hex::decode(hash.trim()) else {
        return Ok(false);
    };
    if tag.len() != 32 {
        return Ok(false);
    }
    Ok(store
        .api_keys(env)
        .await?
        .iter()
        .any(|key| hmac_sha256_verify(key.as_bytes(), &[subscriber_id.as_bytes()], &tag)))
}

/// The subscriber's unread in-app messages that are not snoozed, each count capped at [`INBOX_COUNT_CAP`].
pub async fn unread_counts(
    store: &Store,
    env: &EnvironmentId,
    subscriber: &SubscriberRef,
) -> Result<UnreadCounts> {
    let f = MessageFilter {
        read: Some(false),
        snoozed: Some(false),
        ..MessageFilter::in_app_of(subscriber)
    };
    let severity = store.count_by_severity(env, &f).await?;
    Ok(UnreadCounts {
        total: severity.iter().sum::<i64>().min(INBOX_COUNT_CAP),
        severity: severity.map(|n| n.min(INBOX_COUNT_CAP)),
    })
}

/// The tenant and subscriber of a bearer token: `None` when the token does not verify, has expired, or names
/// a subscriber deleted since.
pub async fn authenticate(store: &Store, token: &str) -> Result<Option<InboxSubscriber>> {
    let Some(t) = SessionToken::verify(token, store.cipher(), Timestamp::now()) else {
        return Ok(None);
    };
    let subscriber_id = store
        .subscriber_id_of(&t.tenant.environment_id, &t.subscriber_ref)
        .await?;
    Ok(subscriber_id.map(|subscriber_id| InboxSubscriber {
        tenant: t.tenant,
        subscriber_ref: t.subscriber_ref,
        subscriber_id,
    }))
}

/// Who an Inbox request acts for.
#[derive(Debug, Clone)]
pub struct InboxSubscriber {
    pub tenant: Tenant,
    pub subscriber_ref: SubscriberRef,
    pub subscriber_id: String,
}
