//! Channel connections and channel endpoints (the contexts they name are in `store::contexts`).

use serde_json::value::RawValue;
use serde_json::Value;
use sqlx::types::Json;

use super::page::{env_scope, Keyed, Listing, Page, PageRequest, SortColumn};
use super::row::{insert, insert_with, sql_row, table, Sealable, Table};
use super::sql::{bind_args, Arg, Sql};
use super::{is_unique_violation, on_db, Cost, Dialect, Store};
use crate::domain::context::context_set;
use crate::domain::endpoint::{
    ChannelConnection, ChannelEndpoint, ConnectionMode, EndpointListing, EndpointType,
};
use crate::domain::{Channel, EnvironmentId, Tenant, Timestamp};
use crate::error::Result;

/// Whether an insert went in or hit a unique index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    Yes,
    Duplicate,
}

/// What the endpoint and connection lists are ordered by (`id` breaks ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelOrder {
    CreatedAt,
    UpdatedAt,
}

impl From<ChannelOrder> for SortColumn {
    fn from(o: ChannelOrder) -> Self {
        match o {
            ChannelOrder::CreatedAt => SortColumn::Int("created_at"),
            ChannelOrder::UpdatedAt => SortColumn::Int("updated_at"),
        }
    }
}

/// Filters shared by the endpoint and connection lists, combined with AND.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelFilter {
    pub subscriber_id: Option<String>,
    /// Exact set of context keys, in stored form (see [`context_set`]).
    pub context_set: Option<String>,
    pub channel: Option<Channel>,
    pub provider_id: Option<String>,
    pub integration_identifier: Option<String>,
    /// Endpoints only.
    pub connection_identifier: Option<String>,
    /// Connections only.
    pub connection_mode: Option<ConnectionMode>,
}

impl ChannelFilter {
    fn to_sql(&self, env: &EnvironmentId, endpoints: bool) -> Sql {
        let mut f = Sql::new("environment_id = ");
        f.bind(env.as_str());
        if let Some(v) = &self.subscriber_id {
            f.push(" and subscriber_id = ").bind(v);
        }
        if let Some(v) = &self.context_set {
            f.push(" and context_set = ").bind(v);
        }
        if let Some(v) = self.channel {
            f.push(" and channel = ").bind(v.as_str());
        }
        if let Some(v) = &self.provider_id {
            f.push(" and provider_id = ").bind(v);
        }
        if let Some(v) = &self.integration_identifier {
            f.push(" and integration_identifier = ").bind(v);
        }
        if endpoints {
            if let Some(v) = &self.connection_identifier {
                f.push(" and connection_identifier = ").bind(v);
            }
        } else if let Some(v) = self.connection_mode {
            f.push(" and connection_mode = ").bind(v.as_str());
        }
        f
    }
}

table! {
    ChannelConnection => "channel_connections" {
        id: String,
        organization_id: String,
        environment_id: String,
        identifier: String,
        integration_identifier: String,
        provider_id: String,
        channel: String,
        mode as connection_mode: String,
        subscriber_id: Option<String>,
        context_keys: Json<Vec<String>>,
        workspace: Json<Value>,
        created_at: i64,
        updated_at: i64,
    }
    sealed {
        access_token as auth_sealed: String,
    }
    written {
        // The one-per-resource unique index reads these.
        subscriber_key: String = |c: &ChannelConnection| c.subscriber_id.clone().unwrap_or_default(),
        context_set: String = |c: &ChannelConnection| context_set(&c.context_keys),
    }
}

impl Keyed for ChannelConnection {
    fn key(&self) -> &str {
        &self.id
    }
}

impl Store {
    pub async fn insert_connection(&self, c: &ChannelConnection) -> Result<Inserted> {
        let q = insert_with(c, self.cipher())?;
        let res = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|_| ()));
        match res {
            Ok(()) => Ok(Inserted::Yes),
            Err(e) if is_unique_violation(&e) => Ok(Inserted::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// The connection holding the one-per-resource slot for this integration, subscriber and context set.
    pub async fn find_connection_for_resource(
        &self,
        env: &EnvironmentId,
        integration_identifier: &str,
        subscriber_id: Option<&str>,
        context_keys: &[String],
    ) -> Result<Option<ChannelConnection>> {
        let mut q = Sql::new(&format!(
            "select {} from channel_connections where environment_id = ",
            ChannelConnection::COLUMNS
        ));
        q.bind(env.as_str())
            .push(" and integration_identifier = ")
            .bind(integration_identifier);
        q.push(" and subscriber_key = ")
            .bind(subscriber_id.unwrap_or(""))
            .push(" and context_set = ")
            .bind(context_set(context_keys));
        Ok(self.rows_for_update(q).await?.into_iter().next())
    }

    pub async fn get_connection(
        &self,
        env: &EnvironmentId,
        identifier: &str,
    ) -> Result<Option<ChannelConnection>> {
        let mut q = Sql::new(&format!(
            "select {} from channel_connections where environment_id = ",
            ChannelConnection::COLUMNS
        ));
        q.bind(env.as_str())
            .push(" and identifier = ")
            .bind(identifier);
        self.row(Cost::Point, q).await
    }

    pub async fn list_connections(
        &self,
        env: &EnvironmentId,
        filter: &ChannelFilter,
        page: &PageRequest<ChannelOrder>,
    ) -> Result<Page<ChannelConnection>> {
        let listing = Listing {
            columns: ChannelConnection::COLUMNS,
            from: "channel_connections",
            filter: filter.to_sql(env, false),
            cursor_scope: env_scope(env),
        };
        self.cursor_page::<ChannelConnection>(listing, &page.by_column())
            .await
    }

    /// Replaces workspace and token; false when the connection does not exist.
    pub async fn update_connection(&self, c: &ChannelConnection) -> Result<bool> {
        let mut q = Sql::new("update channel_connections set workspace = ");
        q.bind(c.workspace.clone())
            .push(", auth_sealed = ")
            .bind(String::seal(
                Arg::Text(c.access_token.clone()),
                self.cipher(),
            ))
            .push(", updated_at = ")
            .bind(c.updated_at.0);
        q.push(" where environment_id = ")
            .bind(c.environment_id.as_str())
            .push(" and identifier = ")
            .bind(c.identifier.as_str());
        let n = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args)
            .execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Deletes a connection and detaches the endpoints that used it, in one transaction.
    pub async fn delete_connection(&self, env: &EnvironmentId, identifier: &str) -> Result<bool> {
        let now = Timestamp::now().0;
        let deleted = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            let n = sqlx::query("delete from channel_connections where environment_id = $1 and identifier = $2")
                .bind(env.as_str()).bind(identifier).execute(&mut *tx).await?.rows_affected();
            if n == 1 {
                sqlx::query(
                    "update channel_endpoints set connection_identifier = null, updated_at = $1
                     where environment_id = $2 and connection_identifier = $3")
                    .bind(now).bind(env.as_str()).bind(identifier).execute(&mut *tx).await?;
            }
            tx.commit().await.map(|_| n == 1)
        })?;
        Ok(deleted)
    }
}

table! {
    ChannelEndpoint => "channel_endpoints" {
        id: String,
        organization_id: String,
        environment_id: String,
        identifier: String,
        endpoint_type: String,
        endpoint: Json<Value>,
        integration_identifier: String,
        provider_id: String,
        channel: String,
        connection_identifier: Option<String>,
        subscriber_id: Option<String>,
        context_keys: Json<Vec<String>>,
        created_at: i64,
        updated_at: i64,
    }
    written {
        context_set: String = |e: &ChannelEndpoint| context_set(&e.context_keys),
    }
}

sql_row! {
    /// A row of a list page (see [`EndpointListing`]): the JSON columns as their text.
    pub(crate) struct EndpointListRow {
        id: String,
        identifier: String,
        endpoint_type: String,
        endpoint: Json<Box<RawValue>>,
        integration_identifier: String,
        provider_id: String,
        channel: String,
        connection_identifier: Option<String>,
        subscriber_id: Option<String>,
        context_keys: Json<Box<RawValue>>,
        created_at: i64,
        updated_at: i64,
    }
}

impl Keyed for EndpointListRow {
    fn key(&self) -> &str {
        &self.id
    }
}

impl From<EndpointListRow> for EndpointListing {
    fn from(r: EndpointListRow) -> Self {
        EndpointListing {
            id: r.id,
            identifier: r.identifier,
            endpoint_type: r.endpoint_type,
            endpoint: r.endpoint.0.get().to_owned(),
            integration_identifier: r.integration_identifier,
            provider_id: r.provider_id,
            channel: r.channel,
            connection_identifier: r.connection_identifier,
            subscriber_id: r.subscriber_id,
            context_keys: r.context_keys.0.get().to_owned(),
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
    }
}

impl Store {
    /// The endpoint data as stored: sealed when its type is a secret ([`EndpointType::is_secret`]).
    pub(super) fn seal_endpoint_data(&self, t: EndpointType, endpoint: &Value) -> Value {
        if t.is_secret() {
            Value::String(self.cipher().encrypt(endpoint.to_string().as_bytes()))
        } else {
            endpoint.clone()
        }
    }

    /// The endpoint data of a stored value, opened when sealed: sealed data is stored as a JSON string (the
    /// sealed text of the endpoint object), clear data as the object itself.
    fn open_endpoint_data(&self, stored: Value) -> Result<Value> {
        match stored.as_str() {
            Some(sealed) => Ok(serde_json::from_str(&self.open_endpoint_text(sealed)?)
                .map_err(anyhow::Error::from)?),
            None => Ok(stored),
        }
    }

    /// The JSON text of sealed endpoint data.
    fn open_endpoint_text(&self, sealed: &str) -> Result<String> {
        Ok(self
            .cipher()
            .decrypt_string(sealed)
            .map_err(|e| anyhow::anyhow!("a channel endpoint's data: {e}"))?)
    }

    /// An endpoint read from its row, its data opened.
    fn open_endpoint(&self, mut e: ChannelEndpoint) -> Result<ChannelEndpoint> {
        e.endpoint = self.open_endpoint_data(std::mem::take(&mut e.endpoint))?;
        Ok(e)
    }

    pub async fn insert_endpoint(&self, e: &ChannelEndpoint) -> Result<Inserted> {
        let stored = ChannelEndpoint {
            endpoint: self.seal_endpoint_data(e.endpoint_type, &e.endpoint),
            ..e.clone()
        };
        let q = insert(&stored)?;
        let res = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|_| ()));
        match res {
            Ok(()) => Ok(Inserted::Yes),
            Err(err) if is_unique_violation(&err) => Ok(Inserted::Duplicate),
            Err(err) => Err(err.into()),
        }
    }

    pub async fn get_endpoint(
        &self,
        env: &EnvironmentId,
        identifier: &str,
    ) -> Result<Option<ChannelEndpoint>> {
        let mut q = Sql::new(&format!(
            "select {} from channel_endpoints where environment_id = ",
            ChannelEndpoint::COLUMNS
        ));
        q.bind(env.as_str())
            .push(" and identifier = ")
            .bind(identifier);
        let row: Option<ChannelEndpoint> = self.row(Cost::Point, q).await?;
        row.map(|e| self.open_endpoint(e)).transpose()
    }

    /// Replaces the endpoint data; false when the endpoint does not exist.
    pub async fn update_endpoint_data(&self, e: &ChannelEndpoint) -> Result<bool> {
        let stored = self.seal_endpoint_data(e.endpoint_type, &e.endpoint);
        let n = on_db!(self.w(), p => sqlx::query(
            "update channel_endpoints set endpoint = $1, updated_at = $2 where environment_id = $3 and identifier = $4")
            .bind(Json(&stored)).bind(e.updated_at.0).bind(&e.environment_id).bind(&e.identifier)
            .execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    pub async fn delete_endpoint(&self, env: &EnvironmentId, identifier: &str) -> Result<bool> {
        let n = on_db!(self.w(), p => sqlx::query("delete from channel_endpoints where environment_id = $1 and identifier = $2")
            .bind(env.as_str()).bind(identifier).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    pub async fn list_endpoints(
        &self,
        env: &EnvironmentId,
        filter: &ChannelFilter,
        page: &PageRequest<ChannelOrder>,
    ) -> Result<Page<EndpointListing>> {
        let listing = Listing {
            columns: EndpointListRow::COLUMNS,
            from: "channel_endpoints",
            filter: filter.to_sql(env, true),
            cursor_scope: env_scope(env),
        };
        self.cursor_page::<EndpointListRow>(listing, &page.by_column())
            .await?
            .try_map(|r| {
                let mut e = EndpointListing::from(r);
                // The stored text of sealed data is a JSON string; of clear data, an object.
                if e.endpoint.starts_with('"') {
                    let sealed: String =
                        serde_json::from_str(&e.endpoint).map_err(anyhow::Error::from)?;
                    e.endpoint = self.open_endpoint_text(&sealed)?;
                }
                Ok(e)
            })
    }

    /// The endpoints a chat or SMS delivery through `integration_identifier` goes to: the subscriber's, for
    /// exactly the trigger's context set (empty when the trigger had no context), oldest first.
    pub async fn delivery_endpoints(
        &self,
        env: &EnvironmentId,
        subscriber_id: &str,
        integration_identifier: Option<&str>,
        context_set: &str,
    ) -> Result<Vec<ChannelEndpoint>> {
        let mut q = Sql::new(&format!(
            "select {} from channel_endpoints where environment_id = ",
            ChannelEndpoint::COLUMNS
        ));
        q.bind(env.as_str())
            .push(" and subscriber_id = ")
            .bind(subscriber_id);
        q.push(" and context_set = ").bind(context_set);
        if let Some(i) = integration_identifier {
            q.push(" and integration_identifier = ").bind(i);
        }
        q.push(" order by created_at, id limit 50");
        let rows: Vec<ChannelEndpoint> = self.rows(Cost::Point, q).await?;
        rows.into_iter().map(|e| self.open_endpoint(e)).collect()
    }

    /// Bulk-inserts `count` synthetic `slack_channel` endpoints for tests and the benchmark: endpoint `n`
    /// belongs to subscriber `<prefix><n % subscribers>` and context `tenant:t<n % contexts>`.
    pub async fn seed_channel_endpoints(
        &self,
        tenant: &Tenant,
        integration_identifier: &str,
        prefix: &str,
        count: i64,
        subscribers: i64,
        contexts: i64,
    ) -> Result<u64> {
        let now = Timestamp::now().0;
        let salt = super::seed::id_head(now);
        let sql = match self.dialect() {
            Dialect::Sqlite => {
                "with recursive n(i) as (select 1 union all select i + 1 from n where i < $1)
                 insert into channel_endpoints (id, organization_id, environment_id, identifier, endpoint_type, endpoint,
                   integration_identifier, provider_id, channel, connection_identifier, subscriber_id, context_keys,
                   context_set, created_at, updated_at)
                 select $2 || printf('%010x', i), $3, $4, 'chendp_' || $5 || i, 'slack_channel',
                   '{\"channelId\":\"C' || i || '\"}', $6, 'slack', 'chat', null, $5 || (i % $7),
                   '[\"tenant:t' || (i % $8) || '\"]', 'tenant:t' || (i % $8), $9 - $1 + i, $9 - $1 + i from n"
            }
            Dialect::Postgres => {
                "insert into channel_endpoints (id, organization_id, environment_id, identifier, endpoint_type, endpoint,
                   integration_identifier, provider_id, channel, connection_identifier, subscriber_id, context_keys,
                   context_set, created_at, updated_at)
                 select $2 || lpad(to_hex(i), 10, '0'), $3, $4, 'chendp_' || $5 || i, 'slack_channel',
                   jsonb_build_object('channelId', 'C' || i), $6, 'slack', 'chat', null, $5 || (i % $7),
                   jsonb_build_array('tenant:t' || (i % $8)), 'tenant:t' || (i % $8), $9 - $1 + i, $9 - $1 + i
                 from generate_series(1, $1::bigint) as i"
            }
        };
        let n = on_db!(self.w(), p => sqlx::query(sql).bind(count).bind(&salt)
            .bind(tenant.organization_id.as_str()).bind(tenant.environment_id.as_str()).bind(prefix)
            .bind(integration_identifier).bind(subscribers.max(1)).bind(contexts.max(1)).bind(now)
            .execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::super::plans::{migrated, plan};
    use super::*;

    /// The endpoints of a subscriber or of a context set (the list's first page, and a delivery's
    /// destinations) are read from a covering index alone: no table page per row.
    #[test]
    fn endpoint_lists_by_subscriber_and_context_read_only_their_index() {
        let conn = migrated();
        let env = EnvironmentId("6b05edefbd5e51c18e7ee068".to_owned());
        let first_page = |filter: ChannelFilter| {
            format!(
                "select {} from channel_endpoints where {} order by created_at desc, id desc limit 101",
                EndpointListRow::COLUMNS,
                filter.to_sql(&env, true).text
            )
        };
        let by_context = first_page(ChannelFilter {
            context_set: Some("tenant:t1".into()),
            ..Default::default()
        });
        assert_eq!(
            plan(&conn, &by_context),
            "SEARCH channel_endpoints USING COVERING INDEX channel_endpoints_context (environment_id=? AND context_set=?)"
        );
        let by_subscriber = first_page(ChannelFilter {
            subscriber_id: Some("s1".into()),
            ..Default::default()
        });
        assert_eq!(
            plan(&conn, &by_subscriber),
            "SEARCH channel_endpoints USING COVERING INDEX channel_endpoints_subscriber (environment_id=? AND subscriber_id=?)"
        );
        let delivery = format!(
            "select {} from channel_endpoints where environment_id = $1 and subscriber_id = $2 \
             and context_set = $3 and integration_identifier = $4 order by created_at, id limit 50",
            ChannelEndpoint::COLUMNS
        );
        assert!(
            plan(&conn, &delivery).contains("USING COVERING INDEX"),
            "{}",
            plan(&conn, &delivery)
        );
    }
}
