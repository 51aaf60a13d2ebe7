//! Outbound webhook endpoints (issue 39): created, read, listed, changed, deleted and given new secrets, with
//! the rules Svix applies to what its clients send. An endpoint is named by its id or its `uid`; another
//! environment's endpoints do not exist for the caller.

use std::collections::BTreeMap;

use crate::domain::webhook::{
    known_types, new_secret, parse_secret, EndpointInput, WebhookEndpoint, ROTATION_GRACE_MS,
};
use crate::domain::{Tenant, Timestamp};
use crate::error::{Error, Result, Validation};
use crate::store::page::{Page, PageRequest};
use crate::store::Store;

/// Most endpoints an environment may have: each event is matched against all of them.
pub const MAX_ENDPOINTS: i64 = 100;
const MAX_URL: usize = 2048;
const MAX_DESCRIPTION: usize = 1024;
const MAX_UID: usize = 256;
const MAX_CHANNELS: usize = 10;
const MAX_CHANNEL: usize = 128;
const MAX_METADATA_KEYS: usize = 50;
const MAX_METADATA_KEY: usize = 128;
const MAX_METADATA_VALUE: usize = 1024;
/// The longest grace a rotation may give the old secret: 24 hours, in seconds.
pub const MAX_GRACE_SECONDS: i64 = 86_400;

fn not_found() -> Error {
    Error::NotFound("Entity not found".into())
}

fn uid_taken(uid: &str) -> Error {
    Error::Conflict(format!("An endpoint with uid '{uid}' already exists"))
}

fn changed_concurrently() -> Error {
    Error::Conflict("The endpoint was changed concurrently; retry the request".into())
}

/// The secret a caller gave in `field` (checked, as stored), or a new random one when none; a bad one is
/// reported in `v`.
fn given_or_new_secret(given: Option<&str>, field: &str, v: &mut Validation) -> String {
    match given.map(parse_secret) {
        None => new_secret(),
        Some(Ok(secret)) => secret,
        Some(Err(why)) => {
            v.add(field, why, "");
            String::new()
        }
    }
}

/// Writes `e`, a change of `stored`, as its next version (later than the last change, even within a
/// millisecond); false when another write came first.
async fn write_over(
    store: &Store,
    stored: &WebhookEndpoint,
    e: &mut WebhookEndpoint,
) -> Result<bool> {
    e.version = stored.version + 1;
    e.updated_at = Timestamp::now().max(Timestamp(stored.updated_at.0 + 1));
    store.update_webhook_endpoint(e, stored.version).await
}

/// Checks every field `input` sets, as Svix's API does.
fn validate(input: &EndpointInput, v: &mut Validation) {
    validate_names(input, v);
    validate_filters(input, v);
    validate_extras(input, v);
}

/// The URL, description and uid.
fn validate_names(input: &EndpointInput, v: &mut Validation) {
    if let Some(url) = &input.url {
        match url::Url::parse(url) {
            _ if url.len() > MAX_URL => v.add(
                "url",
                format!("url must be at most {MAX_URL} characters"),
                "",
            ),
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => v.add(
                "url",
                "url must be an absolute http or https URL",
                url.as_str(),
            ),
        }
    }
    if let Some(d) = &input.description {
        if d.chars().count() > MAX_DESCRIPTION {
            v.add(
                "description",
                format!("description must be at most {MAX_DESCRIPTION} characters"),
                "",
            );
        }
    }
    if let Some(Some(uid)) = &input.uid {
        let shape = uid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if uid.is_empty() || uid.len() > MAX_UID || !shape {
            v.add(
                "uid",
                format!("uid must be 1 to {MAX_UID} characters of a-z, A-Z, 0-9, '-', '_' and '.'"),
                uid.as_str(),
            );
        } else if uid.starts_with("ep_") {
            v.add(
                "uid",
                "uid must not start with ep_, which endpoint ids use",
                uid.as_str(),
            );
        }
    }
}

/// The event types and channels.
fn validate_filters(input: &EndpointInput, v: &mut Validation) {
    if let Some(Some(types)) = &input.event_types {
        if types.is_empty() {
            v.add(
                "eventTypes",
                "eventTypes must name at least one event type, or be null for all",
                "",
            );
        }
        for t in types {
            if !known_types().any(|k| k == t) {
                v.add(
                    "eventTypes",
                    format!(
                        "unknown event type '{t}'; known: {}",
                        known_types().collect::<Vec<_>>().join(", ")
                    ),
                    t.as_str(),
                );
            }
        }
    }
    if let Some(Some(channels)) = &input.channels {
        let bad = channels.iter().any(|c| {
            c.is_empty()
                || c.len() > MAX_CHANNEL
                || !c
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
        });
        if channels.is_empty() || channels.len() > MAX_CHANNELS || bad {
            v.add(
                "channels",
                format!(
                    "channels must be 1 to {MAX_CHANNELS} names of 1 to {MAX_CHANNEL} characters of a-z, A-Z, 0-9, '-', '_', '.' and ':'"
                ),
                "",
            );
        }
    }
}

/// The metadata and the throttle rate.
fn validate_extras(input: &EndpointInput, v: &mut Validation) {
    if let Some(metadata) = &input.metadata {
        let bad = metadata.iter().any(|(k, val)| {
            k.is_empty() || k.len() > MAX_METADATA_KEY || val.len() > MAX_METADATA_VALUE
        });
        if metadata.len() > MAX_METADATA_KEYS || bad {
            v.add(
                "metadata",
                format!(
                    "metadata must hold at most {MAX_METADATA_KEYS} keys of 1 to {MAX_METADATA_KEY} bytes, with values of at most {MAX_METADATA_VALUE} bytes"
                ),
                "",
            );
        }
    }
    if let Some(Some(rate)) = input.throttle_rate {
        if !(1..=u16::MAX as i64).contains(&rate) {
            v.add(
                "throttleRate",
                "throttleRate must be 1 to 65535 messages per second",
                rate,
            );
        }
    }
}

/// Deduplicates event types and channels, keeping the first of each.
fn deduped(items: Option<Vec<String>>) -> Option<Vec<String>> {
    items.map(|mut items| {
        let mut seen = std::collections::HashSet::new();
        items.retain(|i| seen.insert(i.clone()));
        items
    })
}

/// `input`'s fields over `e`'s; with `reset`, a field `input` leaves out goes back to its default.
fn apply(e: &mut WebhookEndpoint, input: EndpointInput, reset: bool) {
    macro_rules! set {
        ($field:ident, $default:expr) => {
            match input.$field {
                Some(value) => e.$field = value,
                None if reset => e.$field = $default,
                None => {}
            }
        };
    }
    set!(url, e.url.clone());
    set!(description, String::new());
    // The uid names the endpoint: a replace that leaves it out keeps it.
    set!(uid, e.uid.clone());
    set!(disabled, false);
    set!(event_types, None);
    set!(channels, None);
    set!(metadata, BTreeMap::new());
    set!(throttle_rate, None);
    e.event_types = deduped(e.event_types.take());
    e.channels = deduped(e.channels.take());
}

/// Checks that `app_id`, the Svix app a request names, is the caller's environment: its public identifier,
/// its id, or Novu's Svix uid `o-{organizationId}-e-{environmentId}`. Any other app is not found.
pub async fn check_app(store: &Store, tenant: &Tenant, app_id: &str) -> Result<()> {
    let env = tenant.environment_id.as_str();
    let org = tenant.organization_id.as_str();
    if app_id == env || app_id == format!("o-{org}-e-{env}") {
        return Ok(());
    }
    match store
        .environment_of(&tenant.organization_id, &tenant.environment_id)
        .await?
    {
        Some(row) if row.identifier == app_id => Ok(()),
        _ => Err(Error::NotFound("Application not found".into())),
    }
}

/// Creates an endpoint of the caller's environment; its secret is new unless `input` gives one.
pub async fn create(
    store: &Store,
    tenant: &Tenant,
    input: EndpointInput,
) -> Result<WebhookEndpoint> {
    let mut v = Validation::new();
    if input.url.is_none() {
        v.add("url", "url is required", serde_json::Value::Null);
    }
    validate(&input, &mut v);
    let secret = given_or_new_secret(input.secret.as_deref(), "secret", &mut v);
    v.finish()?;
    if store
        .count_webhook_endpoints(&tenant.environment_id)
        .await?
        >= MAX_ENDPOINTS
    {
        return Err(Error::bad_request(format!(
            "An environment may have at most {MAX_ENDPOINTS} endpoints"
        )));
    }
    let mut e = WebhookEndpoint::new(
        tenant.organization_id.clone(),
        tenant.environment_id.clone(),
        secret,
        Timestamp::now(),
    );
    apply(&mut e, input, true);
    match store.insert_webhook_endpoint(&e).await {
        Ok(()) => Ok(e),
        Err(Error::Duplicate) => Err(uid_taken(e.uid.as_deref().unwrap_or_default())),
        Err(other) => Err(other),
    }
}

/// The endpoint whose id or uid is `key`.
pub async fn get(store: &Store, tenant: &Tenant, key: &str) -> Result<WebhookEndpoint> {
    store
        .get_webhook_endpoint(&tenant.environment_id, key)
        .await?
        .ok_or_else(not_found)
}

/// A page of the caller's endpoints.
pub async fn list(
    store: &Store,
    tenant: &Tenant,
    page: &PageRequest,
) -> Result<Page<WebhookEndpoint>> {
    store
        .list_webhook_endpoints(&tenant.environment_id, page)
        .await
}

/// How [`change`] treats a missing endpoint and the fields a change leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Only the fields given change (`PATCH`).
    Patch,
    /// Every field is replaced, those left out by their defaults; a missing endpoint is created, with the
    /// path's key as its uid (`PUT`).
    Replace,
}

/// What [`change`] did.
#[derive(Debug)]
pub enum Changed {
    Updated(WebhookEndpoint),
    Created(WebhookEndpoint),
}

/// Changes the endpoint whose id or uid is `key` by `input`.
pub async fn change(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    input: EndpointInput,
    kind: ChangeKind,
) -> Result<Changed> {
    let mut v = Validation::new();
    if kind == ChangeKind::Replace && input.url.is_none() {
        v.add("url", "url is required", serde_json::Value::Null);
    }
    if input.secret.is_some() {
        v.add(
            "secret",
            "secret is set at creation or by rotation only",
            "",
        );
    }
    validate(&input, &mut v);
    v.finish()?;
    for _ in 0..super::OPTIMISTIC_RETRIES {
        let Some(stored) = store
            .get_webhook_endpoint(&tenant.environment_id, key)
            .await?
        else {
            // An unknown id is not found; an unknown uid is created by a replace.
            if kind == ChangeKind::Patch || key.starts_with("ep_") {
                return Err(not_found());
            }
            let mut input = input.clone();
            if input.uid.is_none() {
                input.uid = Some(Some(key.to_owned()));
            }
            return match create(store, tenant, input).await {
                Ok(e) => Ok(Changed::Created(e)),
                // Created meanwhile under that uid: replace it in the next round.
                Err(Error::Conflict(_)) => continue,
                Err(e) => Err(e),
            };
        };
        let mut e = stored.clone();
        apply(&mut e, input.clone(), kind == ChangeKind::Replace);
        if e == stored {
            return Ok(Changed::Updated(e));
        }
        match write_over(store, &stored, &mut e).await {
            Ok(true) => return Ok(Changed::Updated(e)),
            Ok(false) => continue,
            Err(Error::Duplicate) => return Err(uid_taken(e.uid.as_deref().unwrap_or_default())),
            Err(other) => return Err(other),
        }
    }
    Err(changed_concurrently())
}

/// Deletes the endpoint whose id or uid is `key`.
pub async fn delete(store: &Store, tenant: &Tenant, key: &str) -> Result<()> {
    if !store
        .delete_webhook_endpoint(&tenant.environment_id, key)
        .await?
    {
        return Err(not_found());
    }
    Ok(())
}

/// Makes `key` (or a new random secret) the endpoint's signing secret, and answers it; the old one keeps
/// signing for `grace_seconds` (24 hours when not given, at most that).
pub async fn rotate_secret(
    store: &Store,
    tenant: &Tenant,
    endpoint: &str,
    key: Option<String>,
    grace_seconds: Option<i64>,
) -> Result<String> {
    let mut v = Validation::new();
    let secret = given_or_new_secret(key.as_deref(), "key", &mut v);
    let grace_ms = match grace_seconds {
        None => ROTATION_GRACE_MS,
        Some(s) if (0..=MAX_GRACE_SECONDS).contains(&s) => s * 1000,
        Some(s) => {
            v.add(
                "gracePeriodSeconds",
                format!("gracePeriodSeconds must be 0 to {MAX_GRACE_SECONDS}"),
                s,
            );
            0
        }
    };
    v.finish()?;
    for _ in 0..super::OPTIMISTIC_RETRIES {
        let stored = get(store, tenant, endpoint).await?;
        let mut e = stored.clone();
        e.secrets.rotate(secret.clone(), Timestamp::now(), grace_ms);
        if write_over(store, &stored, &mut e).await? {
            return Ok(secret);
        }
    }
    Err(changed_concurrently())
}
