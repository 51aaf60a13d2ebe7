//! The Inbox's sessions (`POST /v1/inbox/session`): a browser names an environment by its public identifier
//! and a subscriber, proves the subscriber with an HMAC of its id when the environment demands it, and gets
//! a signed session token ([`SessionToken`]) for that subscriber only. The subscriber is created when it does
//! not exist; its profile is updated only by a session whose HMAC is valid, so that a browser cannot rewrite
//! somebody else's profile.
//!
//! A session may name a context (`{"tenant": "acme"}`, Novu's multi-tenant Inbox): its token carries the
//! context's keys, and every Inbox read, change, count and socket event of the session is narrowed to the
//! messages whose context keys are exactly those (a session without a context sees the messages without
//! one). Where the environment demands an HMAC, the context needs one too (`contextHash`: the HMAC of its
//! canonical JSON), so that a browser cannot read another tenant's Inbox by naming its context.
//!
//! Whether the HMAC is needed is the environment's own setting (`inbox_hmac`), never inferred: on for the
//! environment named Production and for those created with it, changed only explicitly — the in-app
//! integration's `credentials.hmac` (`true` or `false`, Novu's wire) or `tidings environments hmac`; deleting
//! or deactivating the integration leaves it. Every session carries the environment's epoch; raising it
//! ([`end_sessions`]: turning the HMAC on, rotating the API key, or the operator's call) ends every session
//! of the environment, and deleting a subscriber ends its own: the REST routes refuse their tokens, and the
//! socket layer closes their sockets on the announcement.

use serde_json::Value;

use super::subscribers;
use crate::crypto::hmac_sha256_verify;
use crate::domain::context::{context_keys, ContextEntry};
use crate::domain::session::SessionToken;
use crate::domain::subscriber::ProfileInput;
use crate::domain::{Channel, EnvironmentId, SubscriberRef, Tenant, Timestamp};
use crate::error::{Error, Result};
use crate::store::inbox_events::InboxEvent;
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
    pub profile: ProfileInput,
    /// The session's context, parsed, and the JSON object it was sent as (what `contextHash` signs); `None`
    /// without one.
    pub context: Option<(Vec<ContextEntry>, Value)>,
    pub context_hash: Option<String>,
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
    /// The session's context keys (sorted; empty without a context).
    pub context_keys: Vec<String>,
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
/// all inactive is a 404; a missing or wrong HMAC where the environment needs one a 400.
pub async fn open(store: &Store, env: EnvironmentRow, req: SessionRequest) -> Result<Session> {
    let tenant = Tenant {
        organization_id: env.organization_id.clone(),
        environment_id: env.id.clone(),
    };
    check_in_app_active(store, &tenant).await?;
    let hmac_required = env.inbox_hmac;
    let hmac_valid = match &req.subscriber_hash {
        Some(hash) => hmac_matches(store, &tenant.environment_id, &req.subscriber_id, hash).await?,
        None => false,
    };
    if hmac_required && !hmac_valid {
        return Err(Error::bad_request("Please provide a valid HMAC hash"));
    }
    let (entries, context) = req.context.clone().unwrap_or_default();
    // An empty context sees what no context sees: only a context that narrows needs its hash.
    if hmac_required && !entries.is_empty() {
        let canonical = canonical_json(&context);
        let valid = match &req.context_hash {
            Some(hash) => hmac_matches(store, &tenant.environment_id, &canonical, hash).await?,
            None => false,
        };
        if !valid {
            return Err(Error::bad_request(
                "Please provide a valid context HMAC hash",
            ));
        }
    }
    let keys = context_keys(&entries);
    if !entries.is_empty() {
        // Novu records the contexts an Inbox names, as a trigger does; existing ones keep their data.
        store
            .ensure_contexts(&tenant.environment_id, &entries)
            .await?;
    }
    let existing = store
        .get_subscriber(&tenant.environment_id, req.subscriber_id.trim())
        .await?;
    let subscriber_ref = match existing {
        Some(s) if !hmac_valid || req.profile.changes_nothing() => s.id,
        _ => {
            subscribers::create(store, &tenant, &req.subscriber_id, req.profile, false)
                .await?
                .subscriber
                .id
        }
    };
    let unread = unread_counts(store, &tenant.environment_id, &subscriber_ref, &keys).await?;
    let token = SessionToken {
        epoch: env.session_epoch,
        ..SessionToken::starting_now(tenant, subscriber_ref, keys.clone())
    }
    .sign(store.cipher());
    Ok(Session {
        token,
        unread,
        application_identifier: env.identifier,
        development: !env.name.eq_ignore_ascii_case("production"),
        context_keys: keys,
    })
}

/// An environment without any in-app integration is served as Novu serves its default one (active); one
/// whose in-app integrations are all inactive has none (404).
async fn check_in_app_active(store: &Store, tenant: &Tenant) -> Result<()> {
    let in_app: Vec<_> = super::integrations::list(store, tenant, false)
        .await?
        .into_iter()
        .filter(|i| i.channel == Some(Channel::InApp))
        .collect();
    // Novu's in-app provider `novu`, spelled canonically.
    if in_app.is_empty()
        || in_app
            .iter()
            .any(|i| i.active && i.provider_id.as_str() == "svc")
    {
        return Ok(());
    }
    Err(Error::NotFound(
        "The active in-app integration could not be found".into(),
    ))
}

/// Sets whether the environment's sessions need the subscriber's HMAC (explicitly: the in-app integration's
/// `credentials.hmac`, or `tidings environments hmac`). Turning it on ends the sessions opened without one.
pub async fn set_hmac(store: &Store, env: &EnvironmentId, on: bool) -> Result<()> {
    if store.set_inbox_hmac(env, on).await? && on {
        end_sessions(store, env).await?;
    }
    Ok(())
}

/// Ends every session of the environment: raises its epoch, so that the REST routes refuse every token
/// opened before (401), and announces it, so that every process closes their sockets. Returns the new epoch.
pub async fn end_sessions(store: &Store, env: &EnvironmentId) -> Result<i64> {
    let epoch = store
        .bump_session_epoch(env)
        .await?
        .ok_or_else(|| Error::NotFound("Environment not found".into()))?;
    store
        .inbox_events()
        .publish(vec![InboxEvent::sessions_ended(env, epoch)]);
    Ok(epoch)
}

/// The canonical JSON of `v` (RFC 8785 style, as `@tufjs/canonical-json`, which Novu's `contextHash` signs):
/// object keys sorted by their UTF-16 code units, no whitespace, strings escaped as `JSON.stringify` does.
/// Numbers are written as serde writes them, which is JavaScript's form for integers and for most
/// fractions a context's data holds.
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(k.as_str()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// Whether `hash` is the hexadecimal HMAC-SHA256 of `value` (a subscriber's id, or a context's canonical
/// JSON) keyed with one of the environment's API keys (any of them, so that a key rotation does not lock
/// browsers out), compared in constant time.
async fn hmac_matches(store: &Store, env: &EnvironmentId, value: &str, hash: &str) -> Result<bool> {
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
        .any(|key| hmac_sha256_verify(key.as_bytes(), &[value.as_bytes()], &tag)))
}

/// The subscriber's unread in-app messages of the context `context_keys` that are not snoozed, each count
/// capped at [`INBOX_COUNT_CAP`].
pub async fn unread_counts(
    store: &Store,
    env: &EnvironmentId,
    subscriber: &SubscriberRef,
    context_keys: &[String],
) -> Result<UnreadCounts> {
    let f = MessageFilter {
        read: Some(false),
        snoozed: Some(false),
        ..MessageFilter::inbox_of(subscriber, context_keys)
    };
    let severity = store.count_by_severity(env, &f).await?;
    Ok(UnreadCounts {
        total: severity.iter().sum::<i64>().min(INBOX_COUNT_CAP),
        severity: severity.map(|n| n.min(INBOX_COUNT_CAP)),
    })
}

/// The tenant and subscriber of a bearer token: `None` when the token does not verify, has expired, names
/// a subscriber deleted since, or is of an epoch the environment's sessions have ended.
pub async fn authenticate(store: &Store, token: &str) -> Result<Option<InboxSubscriber>> {
    let Some(t) = SessionToken::verify(token, store.cipher(), Timestamp::now()) else {
        return Ok(None);
    };
    let subscriber = store
        .session_subscriber(&t.tenant.environment_id, &t.subscriber_ref)
        .await?;
    Ok(subscriber
        .filter(|(_, epoch)| t.epoch >= *epoch)
        .map(|(subscriber_id, _)| InboxSubscriber {
            tenant: t.tenant,
            subscriber_ref: t.subscriber_ref,
            subscriber_id,
            context_keys: Some(t.context_keys),
        }))
}

/// Who an Inbox request acts for.
#[derive(Debug, Clone)]
pub struct InboxSubscriber {
    pub tenant: Tenant,
    pub subscriber_ref: SubscriberRef,
    pub subscriber_id: String,
    /// The context keys it sees the messages of (sorted; empty: those without a context), exactly that
    /// context; `None` (the API key's view without `contextKeys`): every context. A session always has some.
    pub context_keys: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_and_drops_whitespace() {
        let v = json!({"tenant": {"id": "acme", "data": {"z": 1, "a": [true, null, "x\"y"]}}, "app": "jira"});
        assert_eq!(
            canonical_json(&v),
            r#"{"app":"jira","tenant":{"data":{"a":[true,null,"x\"y"],"z":1},"id":"acme"}}"#
        );
        // Keys compare by UTF-16 code units, as JavaScript sorts them: U+1F600 (D83D DE00) sorts before
        // U+FF21, unlike in code point order.
        let v = json!({"\u{1F600}": 1, "\u{FF21}": 2});
        assert_eq!(canonical_json(&v), "{\"\u{1F600}\":1,\"\u{FF21}\":2}");
    }
}
