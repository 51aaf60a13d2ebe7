//! Integrations of an environment. Credentials arrive and leave sealed; the service decrypts.

use serde_json::Value;
use sqlx::types::Json;

use super::row::{insert, table, update, Table};
use super::sql::{bind_args, Sql};
use super::{is_unique_violation, on_db, Cost, Store};
use crate::domain::channel::ProviderId;
use crate::domain::integration::Integration;
use crate::domain::{Channel, EnvironmentId, IntegrationId, Timestamp};
use crate::error::{Error, Result};

table! {
    Integration => "integrations" {
        id: String,
        organization_id: String,
        environment_id: String,
        name: String,
        identifier: String,
        provider_id: String,
        channel: Option<String>,
        kind: String,
        credentials_sealed as credentials: String,
        configurations: Option<Json<Value>>,
        conditions: Option<Json<Value>>,
        active: bool,
        primary as is_primary: bool,
        priority: i64,
        deleted: bool,
        deleted_at: Option<i64>,
        deleted_by: Option<String>,
        version: i64,
        created_at: i64,
        updated_at: i64,
    }
}

impl Store {
    /// Non-deleted integrations of the environment, oldest first; only active ones when `active_only`.
    pub async fn list_integrations(
        &self,
        env: &EnvironmentId,
        active_only: bool,
    ) -> Result<Vec<Integration>> {
        let mut q = Sql::new("select ");
        q.push(Integration::COLUMNS)
            .push(" from integrations where environment_id = ")
            .bind(env.as_str())
            .push(" and deleted = false");
        if active_only {
            q.push(" and active = true");
        }
        q.push(" order by created_at, id");
        // An environment has a handful of integrations: read by key.
        self.rows(Cost::Point, q).await
    }

    /// A non-deleted integration by `_id`.
    pub async fn get_integration(
        &self,
        env: &EnvironmentId,
        id: &IntegrationId,
    ) -> Result<Option<Integration>> {
        let sql = format!(
            "select {} from integrations where environment_id = $1 and id = $2 and deleted = false",
            Integration::COLUMNS
        );
        Ok(on_db!(self.w(), p => sqlx::query_as::<_, Integration>(&sql)
            .bind(env.as_str()).bind(id.as_str()).fetch_optional(p).await)?)
    }

    /// A non-deleted integration by `identifier`.
    pub async fn get_integration_by_identifier(
        &self,
        env: &EnvironmentId,
        identifier: &str,
    ) -> Result<Option<Integration>> {
        let mut q = Sql::new("select ");
        q.push(Integration::COLUMNS)
            .push(" from integrations where environment_id = ")
            .bind(env.as_str());
        q.push(" and identifier = ")
            .bind(identifier)
            .push(" and deleted = false");
        self.row(Cost::Point, q).await
    }

    /// The newest active integration for a provider (and identifier, when given).
    pub async fn find_active_integration(
        &self,
        env: &EnvironmentId,
        provider_id: &ProviderId,
        identifier: Option<&str>,
    ) -> Result<Option<Integration>> {
        let mut q = Sql::new("select ");
        q.push(Integration::COLUMNS)
            .push(" from integrations where environment_id = ")
            .bind(env.as_str());
        q.push(" and provider_id = ")
            .bind(provider_id.as_str())
            .push(" and deleted = false and active = true");
        if let Some(identifier) = identifier {
            q.push(" and identifier = ").bind(identifier);
        }
        q.push(" order by created_at desc, id desc limit 1");
        self.row(Cost::Point, q).await
    }

    /// Counts non-deleted integrations on a channel.
    pub async fn count_channel_integrations(
        &self,
        env: &EnvironmentId,
        channel: Channel,
    ) -> Result<i64> {
        Ok(on_db!(self.w(), p => sqlx::query_scalar::<_, i64>(
            "select count(*) from integrations where environment_id = $1 and channel = $2 and deleted = false")
            .bind(env.as_str()).bind(channel.as_str()).fetch_one(p).await)?)
    }

    /// Inserts a new integration; `Err(Duplicate)` when its identifier is taken in the environment.
    pub async fn insert_integration(&self, i: &Integration) -> Result<()> {
        let q = insert(i)?;
        match on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))
        {
            Ok(_) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes every mutable field if the stored version is still `expected_version`; `Err(Duplicate)` when
    /// the new identifier is taken in the environment.
    pub async fn update_integration(&self, i: &Integration, expected_version: i64) -> Result<bool> {
        // The provider, channel and kind an integration was created with stay.
        let mut q = update(
            i,
            &[
                "id",
                "organization_id",
                "environment_id",
                "provider_id",
                "channel",
                "kind",
                "created_at",
            ],
        )?;
        q.push(" where environment_id = ")
            .bind(i.environment_id.as_str());
        q.push(" and id = ").bind(i.id.as_str());
        q.push(" and version = ").bind(expected_version);
        match on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))
        {
            Ok(r) => Ok(r == 1),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// Makes `id` the only primary integration of its channel (and active), in one transaction.
    pub async fn set_primary_integration(
        &self,
        env: &EnvironmentId,
        id: &IntegrationId,
        channel: Channel,
    ) -> Result<()> {
        let now = Timestamp::now().0;
        on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            sqlx::query(
                "update integrations set is_primary = false, version = version + 1, updated_at = $1
                 where environment_id = $2 and channel = $3 and is_primary = true and id <> $4 and deleted = false")
                .bind(now).bind(env.as_str()).bind(channel.as_str()).bind(id.as_str()).execute(&mut *tx).await?;
            sqlx::query(
                "update integrations set is_primary = true, active = true, version = version + 1, updated_at = $1
                 where environment_id = $2 and id = $3 and deleted = false")
                .bind(now).bind(env.as_str()).bind(id.as_str()).execute(&mut *tx).await?;
            tx.commit().await
        })?;
        Ok(())
    }
}
