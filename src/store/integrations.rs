//! Integrations of an environment. Credentials arrive and leave sealed; the service decrypts.

use serde_json::Value;
use sqlx::types::Json;

use super::row::sql_row;
use super::sql::{bind_args, Sql};
use super::{is_unique_violation, on_db, Store};
use crate::domain::channel::ProviderId;
use crate::domain::integration::Integration;
use crate::domain::{Channel, EnvironmentId, IntegrationId, IntegrationKind, Timestamp};
use crate::error::{Error, Result};

const COLUMNS: &str = "id, organization_id, environment_id, name, identifier, provider_id, channel, kind, credentials, \
    configurations, conditions, active, is_primary, priority, deleted, deleted_at, deleted_by, version, created_at, \
    updated_at";

sql_row! {
    struct IntegrationRow {
        id: String,
        organization_id: String,
        environment_id: String,
        name: String,
        identifier: String,
        provider_id: String,
        channel: Option<String>,
        kind: String,
        credentials: String,
        configurations: Option<Json<Value>>,
        conditions: Option<Json<Value>>,
        active: bool,
        is_primary: bool,
        priority: i64,
        deleted: bool,
        deleted_at: Option<i64>,
        deleted_by: Option<String>,
        version: i64,
        created_at: i64,
        updated_at: i64,
    }
}

impl From<IntegrationRow> for Integration {
    fn from(r: IntegrationRow) -> Self {
        Integration {
            id: r.id.into(),
            organization_id: r.organization_id,
            environment_id: r.environment_id,
            name: r.name,
            identifier: r.identifier,
            provider_id: ProviderId::from_stored(&r.provider_id),
            channel: r.channel.as_deref().and_then(Channel::parse),
            kind: IntegrationKind::parse(&r.kind).unwrap_or(IntegrationKind::Delivery),
            credentials_sealed: r.credentials,
            configurations: r.configurations.map(|j| j.0),
            conditions: r.conditions.map(|j| j.0),
            active: r.active,
            primary: r.is_primary,
            priority: r.priority,
            deleted: r.deleted,
            deleted_at: r.deleted_at.map(Timestamp),
            deleted_by: r.deleted_by,
            version: r.version,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
    }
}

impl Store {
    /// Non-deleted integrations of the environment, oldest first; only active ones when `active_only`.
    pub async fn list_integrations(
        &self,
        env: &EnvironmentId,
        active_only: bool,
    ) -> Result<Vec<Integration>> {
        let sql = format!(
            "select {COLUMNS} from integrations where environment_id = $1 and deleted = false {} \
             order by created_at, id",
            if active_only { "and active = true" } else { "" }
        );
        let rows: Vec<IntegrationRow> = on_db!(self.r(), p => sqlx::query_as::<_, IntegrationRow>(&sql).bind(env.as_str()).fetch_all(p).await)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// A non-deleted integration by `_id`.
    pub async fn get_integration(
        &self,
        env: &EnvironmentId,
        id: &IntegrationId,
    ) -> Result<Option<Integration>> {
        let sql = format!("select {COLUMNS} from integrations where environment_id = $1 and id = $2 and deleted = false");
        let row: Option<IntegrationRow> = on_db!(self.w(), p => sqlx::query_as::<_, IntegrationRow>(&sql)
            .bind(env.as_str()).bind(id.as_str()).fetch_optional(p).await)?;
        Ok(row.map(Into::into))
    }

    /// A non-deleted integration by `identifier`.
    pub async fn get_integration_by_identifier(
        &self,
        env: &EnvironmentId,
        identifier: &str,
    ) -> Result<Option<Integration>> {
        let sql = format!(
            "select {COLUMNS} from integrations where environment_id = $1 and identifier = $2 and deleted = false"
        );
        let row: Option<IntegrationRow> = on_db!(self.r(), p => sqlx::query_as::<_, IntegrationRow>(&sql)
            .bind(env.as_str()).bind(identifier).fetch_optional(p).await)?;
        Ok(row.map(Into::into))
    }

    /// The newest active integration for a provider (and identifier, when given).
    pub async fn find_active_integration(
        &self,
        env: &EnvironmentId,
        provider_id: &ProviderId,
        identifier: Option<&str>,
    ) -> Result<Option<Integration>> {
        let mut q = Sql::new("select ");
        q.push(COLUMNS)
            .push(" from integrations where environment_id = ")
            .bind(env.as_str());
        q.push(" and provider_id = ")
            .bind(provider_id.as_str())
            .push(" and deleted = false and active = true");
        if let Some(identifier) = identifier {
            q.push(" and identifier = ").bind(identifier);
        }
        q.push(" order by created_at desc, id desc limit 1");
        let row: Option<IntegrationRow> = on_db!(self.r(), p => bind_args!(sqlx::query_as::<_, IntegrationRow>(&q.text), q.args.clone()).fetch_optional(p).await)?;
        Ok(row.map(Into::into))
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
        let q = Sql::new(
            "insert into integrations (id, organization_id, environment_id, name, identifier, provider_id, channel, \
             kind, credentials, configurations, conditions, active, is_primary, priority, deleted, deleted_at, \
             deleted_by, version, created_at, updated_at) \
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)",
        );
        let args = vec![
            i.id.as_str().into(),
            i.organization_id.clone().into(),
            i.environment_id.clone().into(),
            i.name.clone().into(),
            i.identifier.clone().into(),
            i.provider_id.as_str().into(),
            i.channel.map(|c| c.as_str().to_owned()).into(),
            i.kind.as_str().into(),
            i.credentials_sealed.clone().into(),
            i.configurations.clone().into(),
            i.conditions.clone().into(),
            i.active.into(),
            i.primary.into(),
            i.priority.into(),
            i.deleted.into(),
            i.deleted_at.map(|t| t.0).into(),
            i.deleted_by.clone().into(),
            i.version.into(),
            i.created_at.0.into(),
            i.updated_at.0.into(),
        ];
        match on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), args).execute(p).await.map(|r| r.rows_affected()))
        {
            Ok(_) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes every mutable field if the stored version is still `expected_version`; `Err(Duplicate)` when
    /// the new identifier is taken in the environment.
    pub async fn update_integration(&self, i: &Integration, expected_version: i64) -> Result<bool> {
        let q = Sql::new(
            "update integrations set name = $1, identifier = $2, credentials = $3, configurations = $4, \
             conditions = $5, active = $6, is_primary = $7, priority = $8, deleted = $9, deleted_at = $10, \
             deleted_by = $11, version = $12, updated_at = $13 \
             where environment_id = $14 and id = $15 and version = $16",
        );
        let args = vec![
            i.name.clone().into(),
            i.identifier.clone().into(),
            i.credentials_sealed.clone().into(),
            i.configurations.clone().into(),
            i.conditions.clone().into(),
            i.active.into(),
            i.primary.into(),
            i.priority.into(),
            i.deleted.into(),
            i.deleted_at.map(|t| t.0).into(),
            i.deleted_by.clone().into(),
            i.version.into(),
            i.updated_at.0.into(),
            i.environment_id.clone().into(),
            i.id.as_str().into(),
            expected_version.into(),
        ];
        match on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), args).execute(p).await.map(|r| r.rows_affected()))
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
