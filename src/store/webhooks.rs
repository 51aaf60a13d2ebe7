//! Outbound webhook endpoints (issue 39), read and written with their secrets sealed. An endpoint is named by
//! its id or by its `uid`, within its environment only.

use std::collections::BTreeMap;

use sqlx::types::Json;

use super::page::{env_scope, Keyed, Listing, Page, PageRequest};
use super::row::{insert_with, table, update_with, Table};
use super::sql::{bind_args, Sql};
use super::{is_unique_violation, on_db, Cost, Store};
use crate::domain::webhook::{EndpointSecrets, WebhookEndpoint};
use crate::domain::EnvironmentId;
use crate::error::{Error, Result};

table! {
    WebhookEndpoint => "webhook_endpoints" {
        id: String,
        organization_id: String,
        environment_id: String,
        uid: Option<String>,
        url: String,
        description: String,
        disabled: bool,
        event_types: Option<Json<Vec<String>>>,
        channels: Option<Json<Vec<String>>>,
        metadata: Json<BTreeMap<String, String>>,
        throttle_rate: Option<i64>,
        version: i64,
        created_at: i64,
        updated_at: i64,
    }
    sealed {
        secrets: Json<EndpointSecrets>,
    }
}

impl Keyed for WebhookEndpoint {
    fn key(&self) -> &str {
        &self.id
    }
}

/// The endpoint of `env` whose id or uid is `key`.
fn named(env: &EnvironmentId, key: &str) -> Sql {
    let mut q = env_scope(env);
    q.push(" and (id = ").bind(key);
    q.push(" or uid = ").bind(key).push(")");
    q
}

impl Store {
    /// Records a new endpoint; `Err(Duplicate)` when its uid is taken in the environment.
    pub async fn insert_webhook_endpoint(&self, e: &WebhookEndpoint) -> Result<()> {
        let q = insert_with(e, self.cipher())?;
        let res = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|_| ()));
        match res {
            Ok(()) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// The endpoint of `env` whose id or uid is `key`.
    pub async fn get_webhook_endpoint(
        &self,
        env: &EnvironmentId,
        key: &str,
    ) -> Result<Option<WebhookEndpoint>> {
        let mut q = Sql::new("select ");
        q.push(WebhookEndpoint::COLUMNS)
            .push(" from webhook_endpoints where ");
        q.append(&named(env, key));
        q.push(" order by id limit 1");
        self.row(Cost::Point, q).await
    }

    /// Replaces the stored endpoint with `e` if it is still at `expected_version`; false when another write
    /// came first (or it was deleted). `Err(Duplicate)` when its new uid is taken.
    pub async fn update_webhook_endpoint(
        &self,
        e: &WebhookEndpoint,
        expected_version: i64,
    ) -> Result<bool> {
        let mut q = update_with(
            e,
            &["id", "organization_id", "environment_id", "created_at"],
            self.cipher(),
        )?;
        // A change starts the endpoint's failure clock again (an endpoint re-enabled is not disabled at once).
        q.push(", failing_since = null where environment_id = ")
            .bind(e.environment_id.as_str());
        q.push(" and id = ").bind(e.id.as_str());
        q.push(" and version = ").bind(expected_version);
        let res = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()));
        match res {
            Ok(n) => Ok(n == 1),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the endpoint of `env` whose id or uid is `key`; false when there was none.
    pub async fn delete_webhook_endpoint(&self, env: &EnvironmentId, key: &str) -> Result<bool> {
        let mut q = Sql::new("delete from webhook_endpoints where ");
        q.append(&named(env, key));
        let n = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args)
            .execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n > 0)
    }

    /// How many endpoints the environment has.
    pub async fn count_webhook_endpoints(&self, env: &EnvironmentId) -> Result<i64> {
        let mut q = Sql::new("select count(*) from webhook_endpoints where ");
        q.append(&env_scope(env));
        Ok(self
            .row::<(i64,)>(Cost::Point, q)
            .await?
            .map_or(0, |(n,)| n))
    }

    /// A page of the environment's endpoints, by id (creation order).
    pub async fn list_webhook_endpoints(
        &self,
        env: &EnvironmentId,
        page: &PageRequest,
    ) -> Result<Page<WebhookEndpoint>> {
        let listing = Listing {
            columns: WebhookEndpoint::COLUMNS,
            from: "webhook_endpoints",
            filter: env_scope(env),
            cursor_scope: env_scope(env),
        };
        self.cursor_page::<WebhookEndpoint>(listing, page).await
    }
}

#[cfg(test)]
mod tests {
    use crate::store::plans::{migrated, plan};

    #[test]
    fn endpoint_lists_and_lookups_read_their_index() {
        let conn = migrated();
        let page = plan(
            &conn,
            "select id from webhook_endpoints where environment_id = ?1 order by id desc limit 51",
        );
        assert!(page.contains("INDEX webhook_endpoints_list"), "{page}");
        assert!(!page.contains("TEMP B-TREE"), "{page}");
    }
}
