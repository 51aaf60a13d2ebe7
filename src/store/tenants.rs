//! Organizations, environments and API keys.

use super::row::sql_row;
use super::sql::Sql;
use super::{is_unique_violation, on_db, Cost, Store};
use crate::crypto::sha256_hex;
use crate::domain::{EnvironmentId, OrganizationId, Tenant, Timestamp};
use crate::error::{Error, Result};

sql_row! {
    #[derive(Debug, Clone)]
    pub struct EnvironmentRow {
        pub id: EnvironmentId,
        pub organization_id: OrganizationId,
        pub name: String,
        /// The public identifier (the Inbox's `applicationIdentifier`).
        pub identifier: String,
        pub created_at: i64,
        /// Whether an Inbox session needs the subscriber's HMAC (`subscriberHash`).
        pub inbox_hmac: bool,
        /// Signed into every session token; a token of an older epoch is refused.
        pub session_epoch: i64,
        /// What Novu's dashboard shows it in (`#rrggbb`), when it was given one.
        pub color: Option<String>,
    }
}

/// The select list of [`EnvironmentRow`] (an environment from before `inbox_hmac` reads as off until start-up
/// decides it).
const ENVIRONMENT_COLUMNS: &str = "id, organization_id, name, identifier, created_at, \
    coalesce(inbox_hmac, false) as inbox_hmac, session_epoch, color";

/// What [`Store::update_environment`] sets; `None` leaves a field as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvironmentUpdate<'a> {
    pub name: Option<&'a str>,
    pub identifier: Option<&'a str>,
    pub color: Option<&'a str>,
}

impl Store {
    /// The oldest organization, created as "Default" when there is none.
    pub async fn default_organization(&self) -> Result<OrganizationId> {
        let existing: Option<OrganizationId> = on_db!(self.w(), p => sqlx::query_scalar(
            "select id from organizations order by created_at, id limit 1").fetch_optional(p).await)?;
        if let Some(id) = existing {
            return Ok(id);
        }
        let id = OrganizationId::new();
        on_db!(self.w(), p => sqlx::query("insert into organizations (id, name, created_at) values ($1, $2, $3)")
            .bind(id.as_str()).bind("Default").bind(Timestamp::now().0).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(id)
    }

    pub async fn count_environments(&self) -> Result<i64> {
        let q = Sql::new("select count(*) from environments");
        Ok(self.row::<(i64,)>(Cost::Scan, q).await?.map_or(0, |(n,)| n))
    }

    pub async fn get_environment_by_name(
        &self,
        org: &OrganizationId,
        name: &str,
    ) -> Result<Option<EnvironmentRow>> {
        let sql = format!(
            "select {ENVIRONMENT_COLUMNS} from environments where organization_id = $1 and name = $2"
        );
        Ok(
            on_db!(self.w(), p => sqlx::query_as::<_, EnvironmentRow>(&sql)
            .bind(org.as_str()).bind(name).fetch_optional(p).await)?,
        )
    }

    /// The environment's name (`None` when there is no such environment).
    pub async fn environment_name(&self, env: &EnvironmentId) -> Result<Option<String>> {
        let mut q = Sql::new("select name from environments where id = ");
        q.bind(env.as_str());
        Ok(self.row::<(String,)>(Cost::Point, q).await?.map(|(n,)| n))
    }

    /// The tenant (organization and environment) of an environment; `None` when there is no such environment.
    pub async fn environment_tenant(&self, env: &EnvironmentId) -> Result<Option<Tenant>> {
        let mut q = Sql::new("select organization_id from environments where id = ");
        q.bind(env.as_str());
        Ok(self
            .row::<(OrganizationId,)>(Cost::Point, q)
            .await?
            .map(|(org,)| Tenant {
                organization_id: org,
                environment_id: env.clone(),
            }))
    }

    /// Creates an environment with a new public identifier; its Inbox sessions need the HMAC when
    /// `inbox_hmac`. [`Error::Duplicate`] when the organization has one of this name already.
    pub async fn insert_environment(
        &self,
        org: &OrganizationId,
        name: &str,
        inbox_hmac: bool,
        color: Option<&str>,
    ) -> Result<EnvironmentRow> {
        let row = EnvironmentRow {
            id: EnvironmentId::new(),
            organization_id: org.clone(),
            name: name.to_owned(),
            identifier: crate::crypto::new_environment_identifier(),
            created_at: Timestamp::now().0,
            inbox_hmac,
            session_epoch: 0,
            color: color.map(str::to_owned),
        };
        let inserted = on_db!(self.w(), p => sqlx::query(
            "insert into environments (id, organization_id, name, identifier, created_at, updated_at, \
             inbox_hmac, session_epoch, color) values ($1, $2, $3, $4, $5, $5, $6, 0, $7)")
            .bind(row.id.as_str()).bind(row.organization_id.as_str()).bind(&row.name).bind(&row.identifier)
            .bind(row.created_at).bind(inbox_hmac).bind(color).execute(p).await.map(|r| r.rows_affected()));
        match inserted {
            Ok(_) => Ok(row),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// The organization's environment `env` (`None` when the organization has no such environment).
    pub async fn environment_of(
        &self,
        org: &OrganizationId,
        env: &EnvironmentId,
    ) -> Result<Option<EnvironmentRow>> {
        let mut q = Sql::new(&format!(
            "select {ENVIRONMENT_COLUMNS} from environments where id = "
        ));
        q.bind(env.as_str())
            .push(" and organization_id = ")
            .bind(org.as_str());
        self.row(Cost::Point, q).await
    }

    /// Sets what is given of the organization's environment `env`'s name, public identifier and color;
    /// answers it as it is now (`None`: no such environment). [`Error::Duplicate`] when the organization
    /// has an environment of this name, or any environment this identifier, already.
    pub async fn update_environment(
        &self,
        org: &OrganizationId,
        env: &EnvironmentId,
        change: &EnvironmentUpdate<'_>,
    ) -> Result<Option<EnvironmentRow>> {
        let sql = format!(
            "update environments set name = coalesce($3, name), identifier = coalesce($4, identifier), \
             color = coalesce($5, color), updated_at = $6 where id = $1 and organization_id = $2 \
             returning {ENVIRONMENT_COLUMNS}"
        );
        let updated = on_db!(self.w(), p => sqlx::query_as::<_, EnvironmentRow>(&sql)
            .bind(env.as_str()).bind(org.as_str()).bind(change.name).bind(change.identifier)
            .bind(change.color).bind(Timestamp::now().0).fetch_optional(p).await);
        match updated {
            Ok(row) => Ok(row),
            Err(e) if is_unique_violation(&e) => Err(Error::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// Sets whether the environment's Inbox sessions need the HMAC; `true` when that changed it.
    pub async fn set_inbox_hmac(&self, env: &EnvironmentId, on: bool) -> Result<bool> {
        let n = on_db!(self.w(), p => sqlx::query(
            "update environments set inbox_hmac = $2, updated_at = $3 \
             where id = $1 and (inbox_hmac is null or inbox_hmac <> $2)")
            .bind(env.as_str()).bind(on).bind(Timestamp::now().0)
            .execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n > 0)
    }

    /// Raises the environment's session epoch by one and returns the new one (`None`: no such environment).
    pub async fn bump_session_epoch(&self, env: &EnvironmentId) -> Result<Option<i64>> {
        Ok(on_db!(self.w(), p => sqlx::query_scalar::<_, i64>(
            "update environments set session_epoch = session_epoch + 1, updated_at = $2 where id = $1 \
             returning session_epoch")
            .bind(env.as_str()).bind(Timestamp::now().0).fetch_optional(p).await)?)
    }

    /// The session epochs of `envs` (those that exist).
    pub async fn session_epochs(
        &self,
        envs: &[EnvironmentId],
    ) -> Result<Vec<(EnvironmentId, i64)>> {
        if envs.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new("select id, session_epoch from environments where id in (");
        for (i, env) in envs.iter().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            q.bind(env.as_str());
        }
        q.push(")");
        self.rows(Cost::Point, q).await
    }

    /// Environments from before `inbox_hmac` keep the rule they had: the HMAC is needed where the active
    /// in-app integration (Novu's provider) has `credentials.hmac: true`. Run at every migration; decides
    /// each such environment once. Returns how many were decided.
    pub(super) async fn decide_older_inbox_hmac(&self) -> Result<usize> {
        let undecided: Vec<(EnvironmentId,)> = on_db!(self.w(), p => sqlx::query_as(
            "select id from environments where inbox_hmac is null").fetch_all(p).await)?;
        for (env,) in &undecided {
            let mut on = false;
            for i in self.list_integrations(env, true).await? {
                if i.channel == Some(crate::domain::Channel::InApp)
                    && i.provider_id.as_str() == "svc"
                {
                    let credentials = self
                        .cipher()
                        .decrypt_string(&i.credentials_sealed)
                        .map_err(anyhow::Error::from)?;
                    let credentials: serde_json::Value =
                        serde_json::from_str(&credentials).unwrap_or_default();
                    on = credentials.get("hmac") == Some(&serde_json::Value::Bool(true));
                }
            }
            self.set_inbox_hmac(env, on).await?;
        }
        Ok(undecided.len())
    }

    /// The environment whose public identifier is `identifier`.
    pub async fn environment_by_identifier(
        &self,
        identifier: &str,
    ) -> Result<Option<EnvironmentRow>> {
        let mut q = Sql::new(&format!(
            "select {ENVIRONMENT_COLUMNS} from environments where identifier = "
        ));
        q.bind(identifier);
        self.row(Cost::Point, q).await
    }

    /// Every environment, oldest first; with `org`, that organization's.
    pub async fn list_environments(
        &self,
        org: Option<&OrganizationId>,
    ) -> Result<Vec<EnvironmentRow>> {
        let mut q = Sql::new(&format!("select {ENVIRONMENT_COLUMNS} from environments"));
        if let Some(org) = org {
            q.push(" where organization_id = ").bind(org.as_str());
        }
        q.push(" order by created_at, id");
        self.rows(Cost::Scan, q).await
    }

    /// Replaces every API key of the tenant's environment with `key`, in one transaction: no moment has
    /// both keys, or none.
    pub async fn replace_api_keys(&self, tenant: &Tenant, key: &str) -> Result<()> {
        const DELETE: &str = "delete from api_keys where environment_id = $1";
        const INSERT: &str = "insert into api_keys \
            (id, environment_id, organization_id, key_hash, key_encrypted, created_at) values ($1, $2, $3, $4, $5, $6)";
        let hash = sha256_hex(key.as_bytes());
        let sealed = self.cipher().encrypt(key.as_bytes());
        let id = crate::domain::new_object_id();
        let now = Timestamp::now().0;
        on_db!(self.w(), p => async {
            let mut tx = p.begin().await?;
            sqlx::query(DELETE).bind(tenant.environment_id.as_str()).execute(&mut *tx).await?;
            sqlx::query(INSERT)
                .bind(&id).bind(tenant.environment_id.as_str()).bind(tenant.organization_id.as_str())
                .bind(&hash).bind(&sealed).bind(now)
                .execute(&mut *tx).await?;
            tx.commit().await
        }.await)?;
        Ok(())
    }

    /// Stores an API key as its SHA-256 (for lookup) and an encrypted copy (for signing).
    pub async fn insert_api_key(&self, tenant: &Tenant, key: &str) -> Result<()> {
        let hash = sha256_hex(key.as_bytes());
        let sealed = self.cipher().encrypt(key.as_bytes());
        on_db!(self.w(), p => sqlx::query(
            "insert into api_keys (id, environment_id, organization_id, key_hash, key_encrypted, created_at)
             values ($1, $2, $3, $4, $5, $6) on conflict (key_hash) do nothing")
            .bind(crate::domain::new_object_id()).bind(tenant.environment_id.as_str())
            .bind(tenant.organization_id.as_str()).bind(hash).bind(sealed).bind(Timestamp::now().0)
            .execute(p).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// The tenant an API key belongs to.
    pub async fn find_tenant_by_key_hash(&self, key_hash: &str) -> Result<Option<Tenant>> {
        let mut q =
            Sql::new("select organization_id, environment_id from api_keys where key_hash = ");
        q.bind(key_hash);
        let row: Option<(OrganizationId, EnvironmentId)> = self.row(Cost::Point, q).await?;
        Ok(row.map(|(organization_id, environment_id)| Tenant {
            organization_id,
            environment_id,
        }))
    }

    /// Every API key of the environment, decrypted, oldest first.
    pub async fn api_keys(&self, env: &EnvironmentId) -> Result<Vec<String>> {
        let mut q = Sql::new("select key_encrypted from api_keys where environment_id = ");
        q.bind(env.as_str()).push(" order by created_at, id");
        let sealed: Vec<(String,)> = self.rows(Cost::Scan, q).await?;
        sealed
            .into_iter()
            .map(|(s,)| {
                self.cipher()
                    .decrypt_string(&s)
                    .map_err(|e| anyhow::Error::from(e).into())
            })
            .collect()
    }

    /// The environment's first API key, decrypted (used to sign `svc-signature`).
    pub async fn first_api_key(&self, env: &EnvironmentId) -> Result<Option<String>> {
        let mut q = Sql::new("select key_encrypted from api_keys where environment_id = ");
        q.bind(env.as_str())
            .push(" order by created_at, id limit 1");
        match self.row::<(String,)>(Cost::Point, q).await?.map(|(s,)| s) {
            Some(s) => Ok(Some(
                self.cipher()
                    .decrypt_string(&s)
                    .map_err(anyhow::Error::from)?,
            )),
            None => Ok(None),
        }
    }
}
