//! Topics and their subscriptions: create (upsert), read, rename, delete, subscribe and unsubscribe.

use std::collections::{HashMap, HashSet};

use crate::domain::subscriber::Subscriber;
use crate::domain::topic::{
    default_identifier, validate_identifier, validate_key, validate_name, Topic, TopicSubscription,
    MAX_SUBSCRIPTIONS_PER_REQUEST,
};
use crate::domain::{SubscriptionId, Tenant, Timestamp, TopicId};
use crate::error::{Error, Result, Validation};
use crate::store::page::{Page, PageRequest};
use crate::store::topics::{SubscriptionScope, TopicFilter, TopicOrder};
use crate::store::Store;

/// Code of a per-subscriber failure: no such subscriber in the environment.
pub const SUBSCRIBER_NOT_FOUND: &str = "SUBSCRIBER_NOT_FOUND";
/// Code of a per-subscriber failure of an unsubscribe: the subscriber is not subscribed.
pub const SUBSCRIPTION_NOT_FOUND: &str = "SUBSCRIPTION_NOT_FOUND";

fn topic_not_found(key: &str) -> Error {
    Error::NotFound(format!("Topic \"{key}\" was not found"))
}

/// Outcome of an upsert: the topic and whether it is new.
pub struct Upserted {
    pub topic: Topic,
    pub created: bool,
    /// The topic existed and `fail_if_exists` was given: nothing changed, the answer is a 409.
    pub refused: bool,
}

/// What a create or an update sets on a topic; a field left `None` is unchanged (on a create: unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicChange {
    /// `Some(None)` clears the name.
    pub name: Option<Option<String>>,
    /// Whether a subscriber may subscribe itself to the topic through the Inbox.
    pub allow_self_subscription: Option<bool>,
}

impl TopicChange {
    /// Sets the name when one is given.
    pub fn named(name: Option<String>) -> Self {
        Self {
            name: name.map(Some),
            ..Self::default()
        }
    }

    fn validate(&self) -> Result<()> {
        let mut v = Validation::new();
        if let Some(Some(n)) = &self.name {
            validate_name(&mut v, "name", n);
        }
        v.finish()
    }

    /// The topic with this change applied, or `None` when it changes nothing.
    fn apply(&self, topic: &Topic) -> Option<Topic> {
        let mut changed = topic.clone();
        if let Some(name) = &self.name {
            changed.name.clone_from(name);
        }
        if let Some(allow) = self.allow_self_subscription {
            changed.allow_self_subscription = allow;
        }
        (changed != *topic).then_some(changed)
    }
}

/// Creates the topic `key` with `change`, or, when it exists, applies `change` to it (with `fail_if_exists`,
/// leaves it alone and says so).
pub async fn upsert(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    change: TopicChange,
    fail_if_exists: bool,
) -> Result<Upserted> {
    let mut v = Validation::new();
    validate_key(&mut v, "key", key);
    v.finish()?;
    change.validate()?;
    for _ in 0..2 {
        if let Some(topic) = store.get_topic(&tenant.environment_id, key).await? {
            if fail_if_exists {
                return Ok(Upserted {
                    topic,
                    created: false,
                    refused: true,
                });
            }
            let topic = match change.apply(&topic) {
                Some(changed) => store_change(store, changed).await?,
                None => topic,
            };
            return Ok(Upserted {
                topic,
                created: false,
                refused: false,
            });
        }
        let now = Timestamp::now();
        let topic = Topic {
            id: TopicId::new(),
            organization_id: tenant.organization_id.clone(),
            environment_id: tenant.environment_id.clone(),
            key: key.to_owned(),
            name: change.name.clone().flatten(),
            allow_self_subscription: change.allow_self_subscription.unwrap_or(false),
            created_at: now,
            updated_at: now,
        };
        match store.insert_topic(&topic).await {
            Ok(()) => {
                return Ok(Upserted {
                    topic,
                    created: true,
                    refused: false,
                })
            }
            // A concurrent create won: read its topic on the next turn.
            Err(Error::Duplicate) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Conflict(format!(
        "Topic \"{key}\" is being changed concurrently; retry the request"
    )))
}

pub async fn get(store: &Store, tenant: &Tenant, key: &str) -> Result<Topic> {
    store
        .get_topic(&tenant.environment_id, key)
        .await?
        .ok_or_else(|| topic_not_found(key))
}

pub async fn list(
    store: &Store,
    tenant: &Tenant,
    filter: &TopicFilter,
    page: &PageRequest<TopicOrder>,
) -> Result<Page<Topic>> {
    store
        .list_topics(&tenant.environment_id, filter, page)
        .await
}

/// A page of topics by offset (the v1 list), and how many match.
pub async fn list_by_offset(
    store: &Store,
    tenant: &Tenant,
    key: Option<&str>,
    page: i64,
    page_size: i64,
) -> Result<(Vec<Topic>, i64)> {
    store
        .list_topics_by_offset(&tenant.environment_id, key, page_size, page * page_size)
        .await
}

/// Applies `change` to the topic `key` (its name, its self-subscription flag).
pub async fn update(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    change: TopicChange,
) -> Result<Topic> {
    change.validate()?;
    let topic = get(store, tenant, key).await?;
    match change.apply(&topic) {
        Some(changed) => store_change(store, changed).await,
        None => Ok(topic),
    }
}

async fn store_change(store: &Store, mut topic: Topic) -> Result<Topic> {
    topic.updated_at = Timestamp::now().max(Timestamp(topic.updated_at.0 + 1));
    if !store.update_topic(&topic).await? {
        return Err(topic_not_found(&topic.key));
    }
    Ok(topic)
}

/// Deletes a topic and every subscription to it.
pub async fn delete(store: &Store, tenant: &Tenant, key: &str) -> Result<()> {
    let topic = get(store, tenant, key).await?;
    if !store
        .delete_topic(&tenant.environment_id, &topic.id)
        .await?
    {
        return Err(topic_not_found(key));
    }
    Ok(())
}

/// One entry of a subscribe or unsubscribe request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionRequest {
    /// Required to subscribe; to unsubscribe, this or `identifier`.
    pub subscriber_id: Option<String>,
    pub identifier: Option<String>,
}

/// A subscription with the subscriber it belongs to (`None` if the subscriber is gone).
pub struct SubscriptionView {
    pub subscription: TopicSubscription,
    pub topic: Topic,
    pub subscriber: Option<Subscriber>,
}

/// One subscriber a subscribe or unsubscribe could not handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionFailure {
    pub subscriber_id: String,
    pub code: &'static str,
    pub message: String,
}

/// What a subscribe or unsubscribe did, per subscriber.
pub struct SubscriptionOutcome {
    pub done: Vec<SubscriptionView>,
    pub failed: Vec<SubscriptionFailure>,
    /// How many distinct subscribers the request named.
    pub total: usize,
}

impl SubscriptionOutcome {
    /// Nothing succeeded: the request is refused (400) with this outcome in the body.
    pub fn all_failed(&self) -> bool {
        self.done.is_empty()
    }
}

fn check_entries(v: &mut Validation, field: &str, entries: &[SubscriptionRequest]) {
    if entries.is_empty() {
        v.add(
            field,
            format!("{field} must name at least one subscriber"),
            0,
        );
    } else if entries.len() > MAX_SUBSCRIPTIONS_PER_REQUEST {
        v.add(
            field,
            format!("{field} may name at most {MAX_SUBSCRIPTIONS_PER_REQUEST} subscribers"),
            entries.len(),
        );
    }
    for (i, e) in entries.iter().enumerate() {
        if let Some(s) = &e.subscriber_id {
            if s.trim().is_empty() || s.chars().count() > 255 {
                let at = format!("{field}[{i}].subscriberId");
                v.add(
                    &at,
                    format!("{at} must hold 1 to 255 characters"),
                    s.as_str(),
                );
            }
        }
        if let Some(identifier) = &e.identifier {
            validate_identifier(v, &format!("{field}[{i}].identifier"), identifier);
        }
    }
}

/// The topic a subscribe adds to.
enum Target<'a> {
    /// The topic `key`, created (named `name`) when missing.
    Key { key: &'a str, name: Option<String> },
    /// This topic, which exists: nothing is created.
    Existing(Topic),
}

/// Subscribes subscribers to the topic `key`, creating the topic (named `topic_name`) if needed. A
/// subscriber already subscribed keeps its subscription. Unknown subscribers fail alone; when all fail,
/// nothing is written (not even the topic) and the outcome has nothing done: the answer is a 400.
pub async fn subscribe(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    field: &str,
    entries: Vec<SubscriptionRequest>,
    topic_name: Option<String>,
) -> Result<SubscriptionOutcome> {
    let mut v = Validation::new();
    validate_key(&mut v, "topicKey", key);
    if let Some(n) = &topic_name {
        validate_name(&mut v, "name", n);
    }
    let target = Target::Key {
        key,
        name: topic_name,
    };
    subscribe_to(store, tenant, target, field, entries, v).await
}

/// Subscribes subscribers to `topic`, which exists (never creating one), as [`subscribe`] does.
pub async fn subscribe_existing(
    store: &Store,
    tenant: &Tenant,
    topic: Topic,
    field: &str,
    entries: Vec<SubscriptionRequest>,
) -> Result<SubscriptionOutcome> {
    let target = Target::Existing(topic);
    subscribe_to(store, tenant, target, field, entries, Validation::new()).await
}

async fn subscribe_to(
    store: &Store,
    tenant: &Tenant,
    target: Target<'_>,
    field: &str,
    entries: Vec<SubscriptionRequest>,
    mut v: Validation,
) -> Result<SubscriptionOutcome> {
    check_entries(&mut v, field, &entries);
    for (i, e) in entries.iter().enumerate() {
        if e.subscriber_id.is_none() {
            let at = format!("{field}[{i}].subscriberId");
            v.add(&at, format!("{at} is required"), serde_json::Value::Null);
        }
    }
    v.finish()?;

    let wanted = one_per_subscriber(entries);
    let ids: Vec<String> = wanted.iter().map(|(id, _)| id.clone()).collect();
    let found = store
        .subscribers_by_ids(&tenant.environment_id, &ids)
        .await?;
    let mut by_id: HashMap<String, Subscriber> = found
        .into_iter()
        .map(|s| (s.subscriber_id.clone(), s))
        .collect();
    let not_found = |id: &str| SubscriptionFailure {
        subscriber_id: id.to_owned(),
        code: SUBSCRIBER_NOT_FOUND,
        message: format!("Subscriber \"{id}\" was not found"),
    };
    let mut failed: Vec<SubscriptionFailure> = ids
        .iter()
        .filter(|id| !by_id.contains_key(*id))
        .map(|id| not_found(id))
        .collect();
    if failed.len() == ids.len() {
        return Ok(SubscriptionOutcome {
            done: Vec::new(),
            failed,
            total: ids.len(),
        });
    }

    let topic = match target {
        Target::Key { key, name } => upsert_for_subscribe(store, tenant, key, name).await?,
        Target::Existing(topic) => topic,
    };
    let rows = subscription_rows(tenant, &topic, &wanted, &by_id);
    let stored = match store.subscribe(&rows).await {
        Err(Error::Duplicate) => {
            return Err(Error::Conflict(
                "A subscription identifier is already used by another subscriber of this topic"
                    .into(),
            ))
        }
        other => other?,
    };
    // A subscriber deleted since it was read got no subscription (see `Store::subscribe`).
    let kept: HashSet<&str> = stored.iter().map(|s| s.subscriber_id.as_str()).collect();
    failed.extend(
        rows.iter()
            .filter(|r| !kept.contains(r.subscriber_id.as_str()))
            .map(|r| not_found(&r.subscriber_id)),
    );
    let done = stored
        .into_iter()
        .map(|subscription| SubscriptionView {
            subscriber: by_id.remove(&subscription.subscriber_id),
            subscription,
            topic: topic.clone(),
        })
        .collect();
    Ok(SubscriptionOutcome {
        done,
        failed,
        total: ids.len(),
    })
}

/// One entry per subscriber: the first one names its identifier.
fn one_per_subscriber(entries: Vec<SubscriptionRequest>) -> Vec<(String, Option<String>)> {
    let mut wanted: Vec<(String, Option<String>)> = Vec::with_capacity(entries.len());
    for e in entries {
        let id = e.subscriber_id.unwrap_or_default().trim().to_owned();
        if !wanted.iter().any(|(w, _)| *w == id) {
            wanted.push((id, e.identifier));
        }
    }
    wanted
}

/// The subscriptions to `topic` of the `wanted` subscribers that exist (`by_id`).
fn subscription_rows(
    tenant: &Tenant,
    topic: &Topic,
    wanted: &[(String, Option<String>)],
    by_id: &HashMap<String, Subscriber>,
) -> Vec<TopicSubscription> {
    let now = Timestamp::now();
    wanted
        .iter()
        .filter_map(|(id, identifier)| {
            let s = by_id.get(id)?;
            Some(TopicSubscription {
                id: SubscriptionId::new(),
                organization_id: tenant.organization_id.clone(),
                environment_id: tenant.environment_id.clone(),
                topic_id: topic.id.clone(),
                topic_key: topic.key.clone(),
                subscriber_ref: s.id.clone(),
                subscriber_id: s.subscriber_id.clone(),
                identifier: identifier
                    .clone()
                    .unwrap_or_else(|| default_identifier(&topic.key, id)),
                created_at: now,
                updated_at: now,
            })
        })
        .collect()
}

/// The topic a subscribe adds to: the existing one (its name kept), or a new one.
async fn upsert_for_subscribe(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    name: Option<String>,
) -> Result<Topic> {
    if let Some(topic) = store.get_topic(&tenant.environment_id, key).await? {
        return Ok(topic);
    }
    Ok(upsert(store, tenant, key, TopicChange::named(name), false)
        .await?
        .topic)
}

/// Unsubscribes subscribers (named by subscriberId or by their subscription's identifier) from the topic
/// `key`. A subscriber that is unknown or not subscribed fails alone (all failed: the answer is a 400).
pub async fn unsubscribe(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    field: &str,
    entries: Vec<SubscriptionRequest>,
) -> Result<SubscriptionOutcome> {
    let mut v = Validation::new();
    check_entries(&mut v, field, &entries);
    for (i, e) in entries.iter().enumerate() {
        if e.subscriber_id.is_none() && e.identifier.is_none() {
            let at = format!("{field}[{i}]");
            v.add(
                &at,
                format!("{at} must name a subscriberId or an identifier"),
                serde_json::Value::Null,
            );
        }
    }
    v.finish()?;
    let topic = get(store, tenant, key).await?;

    let env = &tenant.environment_id;
    let mut ids: Vec<String> = Vec::with_capacity(entries.len());
    let mut failed = Vec::new();
    for e in entries {
        let id = match (e.subscriber_id, e.identifier) {
            (Some(id), _) => id.trim().to_owned(),
            (None, Some(identifier)) => {
                match store.get_subscription(env, &topic.id, &identifier).await? {
                    Some(s) => s.subscriber_id,
                    None => {
                        failed.push(SubscriptionFailure {
                            subscriber_id: identifier.clone(),
                            code: SUBSCRIPTION_NOT_FOUND,
                            message: format!("No subscription \"{identifier}\" to topic \"{key}\""),
                        });
                        continue;
                    }
                }
            }
            (None, None) => continue,
        };
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let removed = store.unsubscribe(env, &topic.id, &refs).await?;
    let missing: Vec<String> = ids
        .iter()
        .filter(|id| !removed.iter().any(|r| r.subscriber_id == **id))
        .cloned()
        .collect();
    let known: Vec<String> = store
        .subscribers_by_ids(env, &missing)
        .await?
        .into_iter()
        .map(|s| s.subscriber_id)
        .collect();
    for id in missing {
        failed.push(if known.contains(&id) {
            SubscriptionFailure {
                message: format!("Subscriber \"{id}\" is not subscribed to topic \"{key}\""),
                subscriber_id: id,
                code: SUBSCRIPTION_NOT_FOUND,
            }
        } else {
            SubscriptionFailure {
                message: format!("Subscriber \"{id}\" was not found"),
                subscriber_id: id,
                code: SUBSCRIBER_NOT_FOUND,
            }
        });
    }
    let removed_ids: Vec<String> = removed.iter().map(|r| r.subscriber_id.clone()).collect();
    let mut by_id: HashMap<String, Subscriber> = store
        .subscribers_by_ids(env, &removed_ids)
        .await?
        .into_iter()
        .map(|s| (s.subscriber_id.clone(), s))
        .collect();
    let total = removed.len() + failed.len();
    let done: Vec<SubscriptionView> = removed
        .into_iter()
        .map(|subscription| SubscriptionView {
            subscriber: by_id.remove(&subscription.subscriber_id),
            subscription,
            topic: topic.clone(),
        })
        .collect();
    Ok(SubscriptionOutcome {
        done,
        failed,
        total,
    })
}

/// One subscription of the topic `key` by its identifier.
pub async fn get_subscription(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    identifier: &str,
) -> Result<SubscriptionView> {
    let topic = get(store, tenant, key).await?;
    let subscription = store
        .get_subscription(&tenant.environment_id, &topic.id, identifier)
        .await?
        .ok_or_else(|| {
            Error::NotFound(format!(
                "Subscription \"{identifier}\" to topic \"{key}\" was not found"
            ))
        })?;
    let subscriber = store
        .subscribers_by_ids(
            &tenant.environment_id,
            std::slice::from_ref(&subscription.subscriber_id),
        )
        .await?
        .pop();
    Ok(SubscriptionView {
        subscription,
        topic,
        subscriber,
    })
}

/// The subscription of the subscriber `subscriber_id` to the topic `key`.
pub async fn subscription_of(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    subscriber_id: &str,
) -> Result<TopicSubscription> {
    let topic = get(store, tenant, key).await?;
    store
        .subscriptions_of(&tenant.environment_id, &topic.id, &[subscriber_id])
        .await?
        .pop()
        .ok_or_else(|| {
            Error::NotFound(format!(
                "Subscriber \"{subscriber_id}\" is not subscribed to topic \"{key}\""
            ))
        })
}

/// A page of one topic's subscriptions, optionally of one subscriberId.
pub async fn list_topic_subscriptions(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    subscriber_id: Option<String>,
    page: &PageRequest<TopicOrder>,
) -> Result<Page<SubscriptionView>> {
    let topic = get(store, tenant, key).await?;
    let scope = SubscriptionScope::Topic {
        topic: topic.id.clone(),
        subscriber_id,
    };
    let found = store
        .list_subscriptions(&tenant.environment_id, &scope, page)
        .await?;
    let topics = HashMap::from([(topic.id.clone(), topic)]);
    with_subscribers(store, tenant, found, topics).await
}

/// A page of one subscriber's subscriptions, optionally to the topic `topic_key`.
pub async fn list_subscriber_subscriptions(
    store: &Store,
    tenant: &Tenant,
    subscriber_id: &str,
    topic_key: Option<String>,
    page: &PageRequest<TopicOrder>,
) -> Result<Page<SubscriptionView>> {
    let subscriber = crate::service::subscribers::get(store, tenant, subscriber_id).await?;
    let scope = SubscriptionScope::Subscriber {
        subscriber: subscriber.id.clone(),
        topic_key,
    };
    let found = store
        .list_subscriptions(&tenant.environment_id, &scope, page)
        .await?;
    let mut topic_ids: Vec<TopicId> = found.data.iter().map(|s| s.topic_id.clone()).collect();
    topic_ids.dedup();
    let topics = store
        .topics_by_ids(&tenant.environment_id, &topic_ids)
        .await?
        .into_iter()
        .map(|t| (t.id.clone(), t))
        .collect();
    with_subscribers(store, tenant, found, topics).await
}

/// Joins a page of subscriptions with their topics and subscribers (one query for the subscribers).
async fn with_subscribers(
    store: &Store,
    tenant: &Tenant,
    page: Page<TopicSubscription>,
    topics: HashMap<TopicId, Topic>,
) -> Result<Page<SubscriptionView>> {
    let ids: Vec<String> = page.data.iter().map(|s| s.subscriber_id.clone()).collect();
    let by_id: HashMap<String, Subscriber> = store
        .subscribers_by_ids(&tenant.environment_id, &ids)
        .await?
        .into_iter()
        .map(|s| (s.subscriber_id.clone(), s))
        .collect();
    page.try_map(|subscription| {
        let topic = topics.get(&subscription.topic_id).cloned().ok_or_else(|| {
            Error::Internal(anyhow::anyhow!(
                "subscription {} names a missing topic",
                subscription.id
            ))
        })?;
        Ok(SubscriptionView {
            subscriber: by_id.get(&subscription.subscriber_id).cloned(),
            subscription,
            topic,
        })
    })
}
