//! Subscriber preferences: one row per (subscriber, level); see `domain::preference`.

use super::outbox::{record_events, Event, Receivers};
use super::row::{insert, table, Stored, Table};
use super::sql::{bind_args, Arg, Sql};
use super::{on_db, Cost, Store};
use crate::domain::preference::{ChannelChoices, SubscriberPreference};
use crate::domain::{EnvironmentId, SubscriberRef, Timestamp, WorkflowRef};
use crate::error::Result;

table! {
    SubscriberPreference => "subscriber_preferences" {
        environment_id: String,
        subscriber_ref: String,
        workflow_ref: String,
        enabled: Option<bool>,
        created_at: i64,
        updated_at: i64,
    }
    nested channels: ChannelChoices {
        in_app: Option<bool>,
        email: Option<bool>,
        sms: Option<bool>,
        chat: Option<bool>,
        push: Option<bool>,
    }
}

/// The global preference is stored under the empty workflow ref: a key column cannot be NULL.
impl Stored<String> for Option<WorkflowRef> {
    fn load(stored: String) -> std::result::Result<Self, String> {
        Ok((!stored.is_empty()).then(|| WorkflowRef::from(stored)))
    }
    fn arg(&self) -> std::result::Result<Arg, serde_json::Error> {
        Ok(Arg::Text(
            self.as_ref().map_or("", |w| w.as_str()).to_owned(),
        ))
    }
    fn null() -> Arg {
        Arg::OptText(None)
    }
}

/// Every level a preference row may set, merged by [`Store::save_preferences`].
const FLAGS: [&str; 6] = ["enabled", "in_app", "email", "sms", "chat", "push"];

impl Store {
    /// Every level of one subscriber's preferences (at most one row per workflow, and the global one).
    pub async fn preferences_of(
        &self,
        env: &EnvironmentId,
        subscriber: &SubscriberRef,
    ) -> Result<Vec<SubscriberPreference>> {
        let mut q = Sql::new("select ");
        q.push(SubscriberPreference::COLUMNS)
            .push(" from subscriber_preferences where environment_id = ")
            .bind(env.as_str())
            .push(" and subscriber_ref = ")
            .bind(subscriber.as_str());
        self.rows(Cost::Point, q).await
    }

    /// The global preferences of `subscribers` and their preferences for `workflows`, in one query: what the
    /// workers read for a whole batch of channel steps.
    pub async fn preferences_for(
        &self,
        env: &EnvironmentId,
        subscribers: &[SubscriberRef],
        workflows: &[WorkflowRef],
    ) -> Result<Vec<SubscriberPreference>> {
        if subscribers.is_empty() {
            return Ok(Vec::new());
        }
        let mut levels: Vec<&str> = vec![""];
        levels.extend(workflows.iter().map(WorkflowRef::as_str));
        let mut q = Sql::new("select ");
        q.push(SubscriberPreference::COLUMNS)
            .push(" from subscriber_preferences where environment_id = ")
            .bind(env.as_str());
        q.push_in("subscriber_ref", subscribers);
        q.push_in("workflow_ref", &levels);
        self.rows(Cost::Point, q).await
    }

    /// Saves `changes` in one transaction: each row's chosen flags (`Some`) replace the stored ones, the
    /// others keep what was stored (a first save creates the row). `event` makes the webhook event of each
    /// level as saved (`preference.updated`), recorded with it (`store::outbox`).
    pub async fn save_preferences(
        &self,
        changes: &[SubscriberPreference],
        event: &(dyn Fn(&SubscriberPreference) -> Event + Sync),
    ) -> Result<()> {
        let mut statements = Vec::with_capacity(changes.len());
        for p in changes {
            let mut q = insert(p)?;
            q.push(" on conflict (environment_id, subscriber_ref, workflow_ref) do update set updated_at = excluded.updated_at");
            for flag in FLAGS {
                q.push(&format!(
                    ", {flag} = coalesce(excluded.{flag}, subscriber_preferences.{flag})"
                ));
            }
            q.push(" returning ").push(SubscriberPreference::COLUMNS);
            statements.push(q);
        }
        let dialect = self.dialect();
        let envs: Vec<&str> = changes
            .first()
            .map(|p| p.environment_id.as_str())
            .into_iter()
            .collect();
        let sender = self.webhook_sender();
        let webhooks = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let mut saved = Vec::with_capacity(statements.len());
            for q in statements {
                saved.push(
                    bind_args!(sqlx::query_as::<_, SubscriberPreference>(&q.text), q.args)
                        .fetch_one(&mut *tx)
                        .await?,
                );
            }
            let webhooks = record_events!(tx, dialect, sender.as_ref(), &envs, Timestamp::now(), |_: &Receivers| saved.iter().map(event).collect());
            tx.commit().await.map(|()| webhooks)
        })?;
        webhooks.announce(self);
        Ok(())
    }

    /// Deletes every level of one subscriber's preferences (the subscriber was deleted).
    pub async fn delete_preferences_of(
        &self,
        env: &EnvironmentId,
        subscriber: &SubscriberRef,
    ) -> Result<()> {
        on_db!(self.w(), p => sqlx::query(
            "delete from subscriber_preferences where environment_id = $1 and subscriber_ref = $2")
            .bind(env.as_str()).bind(subscriber.as_str()).execute(p).await.map(|_| ()))?;
        Ok(())
    }
}
