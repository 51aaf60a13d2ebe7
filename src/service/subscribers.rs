//! Subscriber operations: create/upsert, retrieve, patch, soft delete, search, and channel credentials.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{pause_after_lost_write, OPTIMISTIC_RETRIES};
use crate::domain::channel::ProviderId;
use crate::domain::subscriber::{
    upsert_channel, validate_profile, ChannelCredentials, ProfileInput, Subscriber, TokenMode,
    TooManyTokens, MAX_DEVICE_TOKENS,
};
use crate::domain::{SubscriberRef, Tenant, Timestamp};
use crate::error::{Error, Result, Validation};
use crate::store::page::{Page, PageRequest};
use crate::store::subscriber_search::{SubscriberOrder, SubscriberSearch};
use crate::store::Store;

/// Checks the profile fields `fields` sets (borrowed: a trigger's recipients pass here); adds a message per
/// bad field.
fn validate(fields: &ProfileInput, v: &mut Validation) {
    fn set<T>(f: &Option<Option<T>>) -> Option<&T> {
        f.as_ref().and_then(Option::as_ref)
    }
    validate_profile(
        v,
        set(&fields.email).map(String::as_str),
        set(&fields.timezone).map(String::as_str),
        set(&fields.data),
        set(&fields.avatar).map(String::as_str),
    );
}

fn not_found(subscriber_id: &str) -> Error {
    Error::NotFound(format!("Subscriber: {subscriber_id} was not found"))
}

/// Validates a subscriberId from a body: trimmed, 1..=255 characters.
fn clean_subscriber_id(v: &mut Validation, raw: &str) -> String {
    let id = raw.trim();
    if id.is_empty() {
        v.add("subscriberId", "subscriberId must not be empty", raw);
    } else if id.chars().count() > 255 {
        v.add(
            "subscriberId",
            "subscriberId must be at most 255 characters",
            raw,
        );
    }
    id.to_owned()
}

/// Outcome of a create: the subscriber and whether it is new.
pub struct Created {
    pub subscriber: Subscriber,
    pub created: bool,
}

/// Creates a subscriber; an existing one is updated with the given fields unless `fail_if_exists` (→ 409).
pub async fn create(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    fields: ProfileInput,
    fail_if_exists: bool,
) -> Result<Created> {
    let mut v = Validation::new();
    let subscriber_id = clean_subscriber_id(&mut v, subscriber_id);
    validate(&fields, &mut v);
    v.finish()?;

    if let Some(found) = store
        .get_subscriber_for_update(&tenant.environment_id, &subscriber_id)
        .await?
    {
        if fail_if_exists {
            return Err(Error::Conflict(format!(
                "Subscriber with id \"{subscriber_id}\" already exists"
            )));
        }
        let subscriber =
            upsert_existing(store, tenant, Some(found), &subscriber_id, &fields).await?;
        return Ok(Created {
            subscriber,
            created: false,
        });
    }

    let s = new_subscriber(tenant, &subscriber_id, &fields, Timestamp::now());
    match store.insert_subscriber(&s).await {
        Ok(()) => Ok(Created {
            subscriber: s,
            created: true,
        }),
        // Lost a race with a concurrent create of the same id.
        Err(Error::Duplicate) if !fail_if_exists => {
            let subscriber = upsert_existing(store, tenant, None, &subscriber_id, &fields).await?;
            Ok(Created {
                subscriber,
                created: false,
            })
        }
        Err(Error::Duplicate) => Err(Error::Conflict(format!(
            "Subscriber with id \"{}\" already exists",
            s.subscriber_id
        ))),
        Err(e) => Err(e),
    }
}

/// A subscriber not stored yet, of version 0, with the profile `fields` give.
fn new_subscriber(
    tenant: &Tenant,
    subscriber_id: &str,
    fields: &ProfileInput,
    now: Timestamp,
) -> Subscriber {
    Subscriber {
        id: SubscriberRef::new(),
        organization_id: tenant.organization_id.clone(),
        environment_id: tenant.environment_id.clone(),
        subscriber_id: subscriber_id.to_owned(),
        profile: fields.profile(),
        channels: Vec::new(),
        is_online: None,
        last_online_at: None,
        deleted: false,
        version: 0,
        created_at: now,
        updated_at: now,
    }
}

pub async fn get(store: &Store, tenant: &Tenant, subscriber_id: &str) -> Result<Subscriber> {
    store
        .get_subscriber(&tenant.environment_id, subscriber_id)
        .await?
        .ok_or_else(|| not_found(subscriber_id))
}

/// The subscriber handed to `visit` (the by-id read writes its response in it); on SQLite `visit` may run
/// in another request's task (see `store::batched`).
pub async fn visit<T: Send + 'static>(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    visit: impl FnOnce(Subscriber) -> T + Send + 'static,
) -> Result<T> {
    store
        .visit_subscriber(&tenant.environment_id, subscriber_id, visit)
        .await?
        .ok_or_else(|| not_found(subscriber_id))
}

pub async fn patch(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    fields: ProfileInput,
) -> Result<Subscriber> {
    let mut v = Validation::new();
    validate(&fields, &mut v);
    v.finish()?;
    modify(store, tenant, subscriber_id, |s| {
        fields.clone().apply(&mut s.profile);
        Ok(())
    })
    .await
}

/// Deletes the subscriber and erases what is personal to it (issue 35). At once, in one transaction: its
/// record (profile and channel credentials), preferences, topic subscriptions, channel endpoints and
/// connections, and a pending erasure; workers then strip its notifications of their recipient and delete its
/// messages in bounded batches (`engine::erasure`). A subscriber created later under the same subscriberId is
/// another record and starts afresh. Its Inbox sessions end: their tokens name the record, and their sockets
/// are closed on every process.
pub async fn delete(store: &Store, tenant: &Tenant, subscriber_id: &str) -> Result<Subscriber> {
    let s = store
        .get_subscriber_for_update(&tenant.environment_id, subscriber_id)
        .await?
        .ok_or_else(|| not_found(subscriber_id))?;
    // The store announces it: the subscriber's sockets are closed on every process.
    if !store.delete_subscriber(&s).await? {
        return Err(not_found(subscriber_id));
    }
    Ok(s)
}

pub async fn search(
    store: &Store,
    tenant: &Tenant,
    search: &SubscriberSearch,
    page: &PageRequest<SubscriberOrder>,
) -> Result<Page<Subscriber>> {
    crate::background::refresh_search_stats(store, search);
    store
        .search_subscribers(&tenant.environment_id, search, page)
        .await
}

/// A chat or push provider, the only ones a subscriber has credentials for.
fn subscriber_provider(provider_id: &str) -> Option<ProviderId> {
    ProviderId::parse(provider_id).filter(ProviderId::is_subscriber_provider)
}

fn provider_problem(provider_id: &str) -> String {
    format!("providerId must be a valid chat or push provider ID: \"{provider_id}\" is not one")
}

/// ChannelCredentials' string fields (other keys are dropped, as on the credentials routes).
const STRING_CHANNEL_CREDENTIALS: &[&str] = &[
    "webhookUrl",
    "channel",
    "alertUid",
    "title",
    "imageUrl",
    "state",
    "externalUrl",
];

/// One entry of a subscriber's `channels` as a trigger's `to` gives it: what the credentials routes take.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelInput {
    pub provider_id: String,
    pub integration_identifier: Option<String>,
    pub credentials: ChannelCredentials,
}

/// Reads `channels` (`[{providerId, integrationIdentifier?, credentials}]`) with the credentials routes'
/// rules, adding every problem to `v` under `field` (`to.channels[0].providerId`, …).
pub fn parse_channels(v: &mut Validation, field: &str, raw: &Value) -> Vec<ChannelInput> {
    let Some(items) = raw.as_array() else {
        v.add(field, format!("{field} must be an array"), raw.clone());
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let Some(map) = item.as_object() else {
            v.add(&at, format!("{at} must be an object"), item.clone());
            continue;
        };
        let provider_field = format!("{at}.providerId");
        let provider_id = match map.get("providerId") {
            Some(Value::String(p)) if subscriber_provider(p).is_some() => Some(p.clone()),
            Some(Value::String(p)) => {
                v.add(
                    &provider_field,
                    provider_problem(p).replacen("providerId", &provider_field, 1),
                    p.as_str(),
                );
                None
            }
            other => {
                v.add(
                    &provider_field,
                    format!("{provider_field} must be a chat or push provider ID"),
                    other.cloned().unwrap_or(Value::Null),
                );
                None
            }
        };
        let identifier_field = format!("{at}.integrationIdentifier");
        let integration_identifier = match map.get("integrationIdentifier") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                v.add(
                    &identifier_field,
                    format!("{identifier_field} must be a string"),
                    other.clone(),
                );
                None
            }
        };
        let credentials_field = format!("{at}.credentials");
        let credentials = match map.get("credentials") {
            Some(c @ Value::Object(fields)) => {
                let before = v.0.len();
                for (key, value) in fields {
                    let at = format!("{credentials_field}.{key}");
                    if key == "deviceTokens" {
                        let tokens = value.as_array().map(|t| t.iter().all(Value::is_string));
                        if !value.is_null() && tokens != Some(true) {
                            let message = format!("{at} must be an array of strings");
                            v.add(&at, message, value.clone());
                        }
                    } else if STRING_CHANNEL_CREDENTIALS.contains(&key.as_str())
                        && !value.is_string()
                        && !value.is_null()
                    {
                        v.add(&at, format!("{at} must be a string"), value.clone());
                    }
                }
                match ChannelCredentials::deserialize(c) {
                    _ if v.0.len() > before => None,
                    Ok(c) => Some(c),
                    Err(e) => {
                        let message = format!("{credentials_field}: {e}");
                        v.add(&credentials_field, message, c.clone());
                        None
                    }
                }
            }
            other => {
                v.add(
                    &credentials_field,
                    format!("{credentials_field} must be an object"),
                    other.cloned().unwrap_or(Value::Null),
                );
                None
            }
        };
        if let (Some(provider_id), Some(credentials)) = (provider_id, credentials) {
            out.push(ChannelInput {
                provider_id,
                integration_identifier,
                credentials,
            });
        }
    }
    out
}

/// `PUT` (replace tokens) and `PATCH` (append tokens) of `/v1/subscribers/{id}/credentials`.
pub async fn update_credentials(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    provider_id: &str,
    integration_identifier: Option<&str>,
    credentials: ChannelCredentials,
    mode: TokenMode,
) -> Result<Subscriber> {
    let provider = subscriber_provider(provider_id)
        .ok_or_else(|| Error::invalid("providerId", provider_problem(provider_id), provider_id))?;
    if store
        .get_subscriber_for_update(&tenant.environment_id, subscriber_id)
        .await?
        .is_none()
    {
        return Err(not_found(subscriber_id));
    }
    let integration = store
        .find_active_integration(&tenant.environment_id, &provider, integration_identifier)
        .await?
        .ok_or_else(|| {
            let which = match integration_identifier {
                Some(i) => format!("{} integration with identifier \"{i}\"", provider.as_str()),
                None => format!("{} integration", provider.as_str()),
            };
            Error::bad_request(format!(
                "Subscribers environment ({}) do not have active {which}.",
                tenant.environment_id
            ))
        })?;
    modify(store, tenant, subscriber_id, |s| {
        upsert_channel(
            &mut s.channels,
            provider.as_str(),
            &integration.id,
            Some(integration.identifier.as_str()),
            credentials.clone(),
            mode,
        )
        .map_err(|TooManyTokens(n)| {
            let mut extra = Map::new();
            extra.insert("currentCount".into(), n.into());
            extra.insert("limit".into(), MAX_DEVICE_TOKENS.into());
            Error::BadRequest {
                message: format!(
                    "Device tokens limit exceeded. Maximum allowed tokens per subscriber channel is \
                     {MAX_DEVICE_TOKENS}, but got {n} tokens."
                ),
                extra,
            }
        })
    })
    .await
}

/// Removes every channel entry of `provider_id` from the subscriber.
pub async fn delete_credentials(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    provider_id: &str,
) -> Result<Subscriber> {
    let provider = subscriber_provider(provider_id)
        .ok_or_else(|| Error::invalid("providerId", provider_problem(provider_id), provider_id))?;
    modify(store, tenant, subscriber_id, |s| {
        let before = s.channels.len();
        s.channels.retain(|c| c.provider_id != provider.as_str());
        if s.channels.len() == before {
            return Err(Error::NotFound(format!(
                "Subscriber {subscriber_id} has no credentials for provider {}",
                provider.as_str()
            )));
        }
        Ok(())
    })
    .await
}

/// The upsert of a subscriber that exists (`found`, when just read): `fields` applied, or — when they change
/// nothing — the subscriber as it is, unwritten: parallel triggers to a subscriber id seen for the first time
/// each upsert it, and must not fight over its version.
async fn upsert_existing(
    store: &Store,
    tenant: &Tenant,
    found: Option<Subscriber>,
    subscriber_id: &str,
    fields: &ProfileInput,
) -> Result<Subscriber> {
    let found = match found {
        Some(s) => Some(s),
        None => {
            store
                .get_subscriber_for_update(&tenant.environment_id, subscriber_id)
                .await?
        }
    };
    if let Some(s) = found {
        let mut changed = s.clone();
        fields.clone().apply(&mut changed.profile);
        if changed == s {
            return Ok(s);
        }
    }
    modify(store, tenant, subscriber_id, |s| {
        fields.clone().apply(&mut s.profile);
        Ok(())
    })
    .await
}

/// Attempts of a subscriber's read-modify-write. Parallel triggers and upserts may all change a subscriber
/// seen for the first time, and each must get through (a client rarely retries a 409): an attempt that lost
/// waits a random pause first ([`pause_after_lost_write`]), so 30 concurrent writers all succeed; at most
/// about half a second of pauses in all.
const WRITE_ATTEMPTS: usize = 3 * OPTIMISTIC_RETRIES;

/// Read-modify-write with optimistic concurrency: re-reads and retries when another writer won.
/// Every successful change bumps `__v` and `updatedAt`.
async fn modify(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    mut change: impl FnMut(&mut Subscriber) -> Result<()>,
) -> Result<Subscriber> {
    for attempt in 0..WRITE_ATTEMPTS {
        if attempt > 0 {
            pause_after_lost_write(attempt).await;
        }
        let mut s = store
            .get_subscriber_for_update(&tenant.environment_id, subscriber_id)
            .await?
            .ok_or_else(|| not_found(subscriber_id))?;
        let expected = s.version;
        change(&mut s)?;
        s.version = expected + 1;
        s.updated_at = Timestamp::now().max(Timestamp(s.updated_at.0 + 1));
        if store.update_subscriber(&s, expected).await? {
            return Ok(s);
        }
    }
    Err(Error::Conflict(format!(
        "Subscriber {subscriber_id} is being changed concurrently; retry the request"
    )))
}

/// The most subscribers one bulk create takes.
pub const BULK_MAX: usize = 500;

/// A subscriber of a bulk create that was not written, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkFailure {
    /// The item's subscriberId, when it has one.
    pub subscriber_id: Option<String>,
    pub message: String,
}

/// What a bulk create did, each list in the order of the items.
#[derive(Debug, Default)]
pub struct BulkOutcome {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub failed: Vec<BulkFailure>,
}

/// What happened to one subscriberId of a bulk create.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Written {
    Created,
    Updated,
    Lost,
}

/// Creates or updates the subscribers `items` give (each parsed, or why it could not be), as
/// [`create`] does one: the same rules per item, an existing subscriberId updated with the fields given.
/// An item that breaks a rule is reported in `failed` and the others are written. A subscriberId given
/// twice is written once with the later fields over the earlier ones, and reported as Novu does: created
/// (or updated) the first time, updated the next. One read and one multi-row upsert per round; a round
/// writes every subscriber no concurrent request changed meanwhile, and the others are read again.
pub async fn create_bulk(
    store: &Store,
    tenant: &Tenant,
    items: Vec<Result<ProfileInput, Validation>>,
) -> Result<BulkOutcome> {
    if items.len() > BULK_MAX {
        return Err(Error::bad_request(format!(
            "subscribers must contain no more than {BULK_MAX} elements, got {}",
            items.len()
        )));
    }
    let mut out = BulkOutcome::default();
    // In the items' order: the subscriberId of each accepted item, and whether it repeats an earlier one.
    let mut order: Vec<(String, bool)> = Vec::with_capacity(items.len());
    let mut merged: Vec<(String, ProfileInput)> = Vec::with_capacity(items.len());
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for item in items {
        let (id, fields) = match bulk_item(item) {
            Ok(item) => item,
            Err(failure) => {
                out.failed.push(failure);
                continue;
            }
        };
        match at.get(&id) {
            Some(&i) => {
                let earlier = std::mem::take(&mut merged[i].1);
                merged[i].1 = earlier.then(fields);
                order.push((id, true));
            }
            None => {
                at.insert(id.clone(), merged.len());
                merged.push((id.clone(), fields));
                order.push((id, false));
            }
        }
    }
    let written = write_bulk(store, tenant, &merged).await?;
    for (id, again) in order {
        match written.get(&id) {
            Some(Written::Created) if !again => out.created.push(id),
            Some(Written::Created | Written::Updated) => out.updated.push(id),
            _ => out.failed.push(BulkFailure {
                message: format!(
                    "Subscriber {id} is being changed concurrently; retry the request"
                ),
                subscriber_id: Some(id),
            }),
        }
    }
    Ok(out)
}

/// One item of a bulk create checked as [`create`] checks its body: its subscriberId and fields.
fn bulk_item(
    item: Result<ProfileInput, Validation>,
) -> std::result::Result<(String, ProfileInput), BulkFailure> {
    let failure = |subscriber_id: Option<&String>, v: Validation| BulkFailure {
        subscriber_id: subscriber_id.cloned(),
        message: v
            .0
            .iter()
            .flat_map(|e| e.messages.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("; "),
    };
    let fields = item.map_err(|v| failure(None, v))?;
    let mut v = Validation::new();
    let Some(raw) = fields.subscriber_id.as_ref() else {
        v.add("subscriberId", "subscriberId is required", Value::Null);
        return Err(failure(None, v));
    };
    let id = clean_subscriber_id(&mut v, raw);
    validate(&fields, &mut v);
    if v.is_empty() {
        Ok((id, fields))
    } else {
        Err(failure(Some(raw), v))
    }
}

/// Writes `merged` (distinct subscriberIds and their fields) in rounds of one read and one upsert, until
/// each is written or [`WRITE_ATTEMPTS`] rounds have gone by. A subscriber the fields would not change is
/// left unwritten (updated, as far as the caller is concerned).
async fn write_bulk(
    store: &Store,
    tenant: &Tenant,
    merged: &[(String, ProfileInput)],
) -> Result<std::collections::HashMap<String, Written>> {
    let mut written: std::collections::HashMap<String, Written> = merged
        .iter()
        .map(|(id, _)| (id.clone(), Written::Lost))
        .collect();
    let mut pending: Vec<&(String, ProfileInput)> = merged.iter().collect();
    for attempt in 0..WRITE_ATTEMPTS {
        if pending.is_empty() {
            break;
        }
        if attempt > 0 {
            pause_after_lost_write(attempt).await;
        }
        let ids: Vec<String> = pending.iter().map(|(id, _)| id.clone()).collect();
        let stored: std::collections::HashMap<String, Subscriber> = store
            .subscribers_by_ids(&tenant.environment_id, &ids)
            .await?
            .into_iter()
            .map(|s| (s.subscriber_id.clone(), s))
            .collect();
        let now = Timestamp::now();
        let mut rows = Vec::with_capacity(pending.len());
        for (id, fields) in &pending {
            let Some(found) = stored.get(id) else {
                rows.push(new_subscriber(tenant, id, fields, now));
                continue;
            };
            let mut s = found.clone();
            fields.clone().apply(&mut s.profile);
            if s == *found {
                written.insert(id.clone(), Written::Updated);
                continue;
            }
            s.version = found.version + 1;
            s.updated_at = now.max(Timestamp(found.updated_at.0 + 1));
            rows.push(s);
        }
        for (id, version) in store.upsert_subscribers(&rows).await? {
            let how = if version == 0 {
                Written::Created
            } else {
                Written::Updated
            };
            written.insert(id, how);
        }
        pending.retain(|(id, _)| written.get(id) == Some(&Written::Lost));
    }
    Ok(written)
}

/// Sets whether the subscriber is online, as Novu's `online-status` does: going offline records when
/// (`lastOnlineAt`). The flag stands until it is set again or the subscriber's Inbox sockets change it.
pub async fn set_online(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    online: bool,
) -> Result<Subscriber> {
    if !store
        .set_online_flag(&tenant.environment_id, subscriber_id, online)
        .await?
    {
        return Err(not_found(subscriber_id));
    }
    store
        .get_subscriber_for_update(&tenant.environment_id, subscriber_id)
        .await?
        .ok_or_else(|| not_found(subscriber_id))
}
