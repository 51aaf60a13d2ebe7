//! Topics and topic subscriptions.

use super::page::{env_scope, Keyed, Listing, Page, PageRequest, SortColumn};
use super::row::{insert, table, Table};
use super::sql::{bind_args, like_escape, Sql};
use super::{is_unique_violation, on_db, Cost, Dialect, Store};
use crate::domain::topic::{Topic, TopicSubscription};
use crate::domain::{EnvironmentId, SubscriberRef, TopicId};
use crate::error::{Error, Result};

table! {
    Topic => "topics" {
        id: String,
        organization_id: String,
        environment_id: String,
        key: String,
        name: Option<String>,
        allow_self_subscription: bool,
        created_at: i64,
        updated_at: i64,
    }
}

table! {
    TopicSubscription => "topic_subscriptions" {
        id: String,
        organization_id: String,
        environment_id: String,
        topic_id: String,
        topic_key: String,
        subscriber_ref: String,
        subscriber_id: String,
        identifier: String,
        created_at: i64,
        updated_at: i64,
    }
}

impl Keyed for Topic {
    fn key(&self) -> &str {
        self.id.as_str()
    }
}

impl Keyed for TopicSubscription {
    fn key(&self) -> &str {
        self.id.as_str()
    }
}

/// What a topic or subscription list is ordered by (`id` breaks ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicOrder {
    Id,
    CreatedAt,
    UpdatedAt,
}

impl From<TopicOrder> for SortColumn {
    fn from(o: TopicOrder) -> Self {
        match o {
            TopicOrder::Id => SortColumn::Id,
            TopicOrder::CreatedAt => SortColumn::Int("created_at"),
            TopicOrder::UpdatedAt => SortColumn::Int("updated_at"),
        }
    }
}

/// Filters of `GET /v2/topics`, combined with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicFilter {
    /// The exact key.
    pub key: Option<String>,
    /// A case-insensitive substring of the name.
    pub name: Option<String>,
}

/// Filters of a subscription list: one topic's, or one subscriber's, and optionally one subscriberId.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscriptionScope {
    Topic {
        topic: TopicId,
        subscriber_id: Option<String>,
    },
    Subscriber {
        subscriber: SubscriberRef,
        topic_key: Option<String>,
    },
}

impl Store {
    /// Inserts a topic; `Err(Duplicate)` when its key is taken in the environment.
    pub async fn insert_topic(&self, t: &Topic) -> Result<()> {
        let q = insert(t)?;
        let res = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|_| ()));
        match res {
            Ok(()) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// A topic by key.
    pub async fn get_topic(&self, env: &EnvironmentId, key: &str) -> Result<Option<Topic>> {
        let mut q = Sql::new("select ");
        q.push(Topic::COLUMNS)
            .push(" from topics where environment_id = ")
            .bind(env.as_str())
            .push(" and key = ")
            .bind(key);
        self.row(Cost::Point, q).await
    }

    /// Topics by `_id`. One query.
    pub async fn topics_by_ids(&self, env: &EnvironmentId, ids: &[TopicId]) -> Result<Vec<Topic>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new("select ");
        q.push(Topic::COLUMNS)
            .push(" from topics where environment_id = ")
            .bind(env.as_str());
        q.push_in("id", ids);
        self.rows(Cost::Point, q).await
    }

    /// Sets a topic's name and its self-subscription flag; false when the topic is gone.
    pub async fn update_topic(&self, t: &Topic) -> Result<bool> {
        let n = on_db!(self.w(), p => sqlx::query(
            "update topics set name = $1, allow_self_subscription = $2, updated_at = $3 \
             where environment_id = $4 and id = $5")
            .bind(t.name.as_deref()).bind(t.allow_self_subscription).bind(t.updated_at.0)
            .bind(&t.environment_id).bind(t.id.as_str())
            .execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Deletes a topic and its subscriptions in one transaction; false when there was no such topic.
    pub async fn delete_topic(&self, env: &EnvironmentId, id: &TopicId) -> Result<bool> {
        let n = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            sqlx::query("delete from topic_subscriptions where environment_id = $1 and topic_id = $2")
                .bind(env.as_str()).bind(id.as_str()).execute(&mut *tx).await?;
            let n = sqlx::query("delete from topics where environment_id = $1 and id = $2")
                .bind(env.as_str()).bind(id.as_str()).execute(&mut *tx).await?.rows_affected();
            tx.commit().await.map(|()| n)
        })?;
        Ok(n == 1)
    }

    /// A page of the environment's topics.
    pub async fn list_topics(
        &self,
        env: &EnvironmentId,
        filter: &TopicFilter,
        page: &PageRequest<TopicOrder>,
    ) -> Result<Page<Topic>> {
        let mut where_ = env_scope(env);
        if let Some(key) = &filter.key {
            where_.push(" and key = ").bind(key.as_str());
        }
        if let Some(name) = &filter.name {
            let pattern = format!("%{}%", like_escape(&name.to_lowercase()));
            where_
                .push(" and lower(name) like ")
                .bind(pattern)
                .push(" escape '\\'");
        }
        let listing = Listing {
            columns: Topic::COLUMNS,
            from: "topics",
            filter: where_,
            cursor_scope: env_scope(env),
        };
        self.cursor_page(listing, &page.by_column()).await
    }

    /// A page of the environment's topics by offset (`GET /v1/topics`), oldest first, and how many match.
    pub async fn list_topics_by_offset(
        &self,
        env: &EnvironmentId,
        key: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Topic>, i64)> {
        let mut filter = Sql::new(" from topics where environment_id = ");
        filter.bind(env.as_str());
        if let Some(key) = key {
            filter.push(" and key = ").bind(key);
        }
        let mut count = Sql::new("select count(*)");
        count.append(&filter);
        let total = self
            .row::<(i64,)>(Cost::Scan, count)
            .await?
            .map_or(0, |(n,)| n);
        let mut q = Sql::new("select ");
        q.push(Topic::COLUMNS).append(&filter);
        q.push(" order by id limit ")
            .bind(limit)
            .push(" offset ")
            .bind(offset);
        Ok((self.rows(Cost::Scan, q).await?, total))
    }

    /// Inserts the subscriptions that do not exist yet, in one transaction; returns, in the order given, each
    /// subscription as stored (the existing one when the subscriber was already subscribed; none when the
    /// subscriber was deleted meanwhile). `Err(Duplicate)` when an identifier is taken by another subscriber
    /// of the topic.
    pub async fn subscribe(&self, subs: &[TopicSubscription]) -> Result<Vec<TopicSubscription>> {
        let Some(first) = subs.first() else {
            return Ok(Vec::new());
        };
        let statements = subs
            .iter()
            .map(|s| insert_while_subscribed(self.dialect(), s))
            .collect::<serde_json::Result<Vec<_>>>()?;
        // In an async block: a failed statement ends the block (not this function), so its error is matched.
        let res = on_db!(self.w(), p => async {
            let mut tx = p.begin().await?;
            for q in statements {
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            tx.commit().await
        }.await);
        match res {
            Ok(()) => {}
            Err(e) if is_unique_violation(&e) => return Err(Error::Duplicate),
            Err(e) => return Err(e.into()),
        }
        let ids: Vec<&str> = subs.iter().map(|s| s.subscriber_id.as_str()).collect();
        let mut stored = self
            .subscriptions_of(&first.environment_id, &first.topic_id, &ids)
            .await?;
        let order = |s: &TopicSubscription| ids.iter().position(|i| *i == s.subscriber_id);
        stored.sort_by_key(order);
        Ok(stored)
    }

    /// The subscriptions of `subscriber_ids` to one topic (at most one each). One query.
    pub async fn subscriptions_of(
        &self,
        env: &EnvironmentId,
        topic: &TopicId,
        subscriber_ids: &[&str],
    ) -> Result<Vec<TopicSubscription>> {
        if subscriber_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new("select ");
        q.push(TopicSubscription::COLUMNS)
            .push(" from topic_subscriptions where environment_id = ")
            .bind(env.as_str())
            .push(" and topic_id = ")
            .bind(topic.as_str());
        q.push_in("subscriber_id", subscriber_ids);
        self.rows(Cost::Point, q).await
    }

    /// One subscription of a topic by its identifier.
    pub async fn get_subscription(
        &self,
        env: &EnvironmentId,
        topic: &TopicId,
        identifier: &str,
    ) -> Result<Option<TopicSubscription>> {
        let mut q = Sql::new("select ");
        q.push(TopicSubscription::COLUMNS)
            .push(" from topic_subscriptions where environment_id = ")
            .bind(env.as_str())
            .push(" and topic_id = ")
            .bind(topic.as_str())
            .push(" and identifier = ")
            .bind(identifier);
        self.row(Cost::Point, q).await
    }

    /// Deletes the subscriptions of `subscriber_ids` to one topic; returns the ones it deleted.
    pub async fn unsubscribe(
        &self,
        env: &EnvironmentId,
        topic: &TopicId,
        subscriber_ids: &[&str],
    ) -> Result<Vec<TopicSubscription>> {
        let found = self.subscriptions_of(env, topic, subscriber_ids).await?;
        if found.is_empty() {
            return Ok(found);
        }
        let mut q = Sql::new("delete from topic_subscriptions where environment_id = ");
        q.bind(env.as_str())
            .push(" and topic_id = ")
            .bind(topic.as_str());
        let ids: Vec<&str> = found.iter().map(|s| s.id.as_str()).collect();
        q.push_in("id", &ids);
        on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|_| ()))?;
        Ok(found)
    }

    /// Deletes every subscription of one subscriber (the subscriber was deleted).
    pub async fn delete_subscriptions_of(
        &self,
        env: &EnvironmentId,
        subscriber: &SubscriberRef,
    ) -> Result<()> {
        on_db!(self.w(), p => sqlx::query(
            "delete from topic_subscriptions where environment_id = $1 and subscriber_ref = $2")
            .bind(env.as_str()).bind(subscriber.as_str()).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// A page of subscriptions: one topic's or one subscriber's.
    pub async fn list_subscriptions(
        &self,
        env: &EnvironmentId,
        scope_of: &SubscriptionScope,
        page: &PageRequest<TopicOrder>,
    ) -> Result<Page<TopicSubscription>> {
        let mut where_ = env_scope(env);
        match scope_of {
            SubscriptionScope::Topic {
                topic,
                subscriber_id,
            } => {
                where_.push(" and topic_id = ").bind(topic.as_str());
                if let Some(s) = subscriber_id {
                    where_.push(" and subscriber_id = ").bind(s.as_str());
                }
            }
            SubscriptionScope::Subscriber {
                subscriber,
                topic_key,
            } => {
                where_
                    .push(" and subscriber_ref = ")
                    .bind(subscriber.as_str());
                if let Some(k) = topic_key {
                    where_.push(" and topic_key = ").bind(k.as_str());
                }
            }
        }
        let listing = Listing {
            columns: TopicSubscription::COLUMNS,
            from: "topic_subscriptions",
            filter: where_,
            cursor_scope: env_scope(env),
        };
        self.cursor_page(listing, &page.by_column()).await
    }
}

/// The insert of a subscription, made only while its subscriber exists: a subscriber deleted after the
/// request read it (its subscriptions are deleted once it is marked deleted) gets none. On PostgreSQL the
/// subscriber's row is share-locked until the insert commits, so a delete that marks it waits for the
/// subscription and then removes it, or goes first and the insert finds it deleted; on SQLite transactions
/// do not overlap. An existing subscription of the subscriber to the topic is kept.
fn insert_while_subscribed(dialect: Dialect, s: &TopicSubscription) -> serde_json::Result<Sql> {
    let mut q = Sql::new("insert into topic_subscriptions (");
    q.push(&TopicSubscription::WRITTEN.join(", "))
        .push(") select ");
    for (i, arg) in s.args()?.into_iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        q.bind(arg);
    }
    q.push(" where exists (select 1 from subscribers where id = ")
        .bind(s.subscriber_ref.as_str())
        .push(" and deleted = false");
    if dialect == Dialect::Postgres {
        q.push(" for share");
    }
    q.push(") on conflict (topic_id, subscriber_id) do nothing");
    Ok(q)
}
