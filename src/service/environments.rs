//! Environments and their API keys: `tidings environments create`, `list` and `rotate-key`, and start-up
//! bootstrap.

use serde::Serialize;

use crate::crypto::{new_api_key, sha256_hex};
use crate::domain::Tenant;
use crate::error::{Error, Result};
use crate::store::tenants::EnvironmentRow;
use crate::store::Store;

/// What `tidings environments create` prints.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CreatedEnvironment {
    pub organization_id: String,
    pub environment_id: String,
    pub name: String,
    /// The public identifier the Inbox names the environment by.
    pub application_identifier: String,
    pub api_key: String,
}

/// The fewest characters an API key given by the operator (`TIDINGS_API_KEY`) may have. Generated keys have
/// 32 (128 random bits in hex).
pub const MIN_API_KEY_CHARS: usize = 32;

/// Refuses an operator's key shorter than [`MIN_API_KEY_CHARS`]: a short key can be guessed.
pub fn check_operator_key(key: &str) -> Result<()> {
    let n = key.chars().count();
    if n < MIN_API_KEY_CHARS {
        return Err(Error::bad_request(format!(
            "TIDINGS_API_KEY must be at least {MIN_API_KEY_CHARS} characters long, it has {n}: \
             use a random one, e.g. `openssl rand -hex 16`"
        )));
    }
    Ok(())
}

/// Creates an environment in the default organization with a new API key (or `key`, when given: at least
/// [`MIN_API_KEY_CHARS`] characters).
pub async fn create(store: &Store, name: &str, key: Option<&str>) -> Result<CreatedEnvironment> {
    if let Some(key) = key {
        check_operator_key(key)?;
    }
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::bad_request("environment name must not be empty"));
    }
    let org = store.default_organization().await?;
    if store.get_environment_by_name(&org, name).await?.is_some() {
        return Err(Error::Conflict(format!(
            "Environment \"{name}\" already exists"
        )));
    }
    let env = store.insert_environment(&org, name).await?;
    let api_key = key.map(str::to_owned).unwrap_or_else(new_api_key);
    let tenant = Tenant {
        organization_id: org,
        environment_id: crate::domain::EnvironmentId(env.id),
    };
    store.insert_api_key(&tenant, &api_key).await?;
    Ok(CreatedEnvironment {
        organization_id: tenant.organization_id.0,
        environment_id: tenant.environment_id.0,
        name: env.name,
        application_identifier: env.identifier,
        api_key,
    })
}

/// What `tidings environments list` prints for each environment (never a key).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentSummary {
    pub organization_id: String,
    pub environment_id: String,
    pub name: String,
    pub application_identifier: String,
}

/// Every environment, oldest first.
pub async fn list(store: &Store) -> Result<Vec<EnvironmentSummary>> {
    Ok(store
        .list_environments(None)
        .await?
        .into_iter()
        .map(|e| EnvironmentSummary {
            organization_id: e.organization_id,
            environment_id: e.id,
            name: e.name,
            application_identifier: e.identifier,
        })
        .collect())
}

/// The environments of the caller's organization, oldest first (what an API key may see of them: no key).
pub async fn of_organization(store: &Store, tenant: &Tenant) -> Result<Vec<EnvironmentRow>> {
    store.list_environments(Some(&tenant.organization_id)).await
}

/// Issues a new API key for the default organization's environment `name`; every key it had stops working
/// (at once in the database; a server that cached the old key refuses it within `api::auth::KEY_CACHE_TTL`).
pub async fn rotate_key(store: &Store, name: &str) -> Result<CreatedEnvironment> {
    let name = name.trim();
    let org = store.default_organization().await?;
    let env = store
        .get_environment_by_name(&org, name)
        .await?
        .ok_or_else(|| Error::NotFound(format!("Environment \"{name}\" not found")))?;
    let tenant = Tenant {
        organization_id: crate::domain::OrganizationId(env.organization_id),
        environment_id: crate::domain::EnvironmentId(env.id),
    };
    let api_key = new_api_key();
    store.replace_api_keys(&tenant, &api_key).await?;
    Ok(CreatedEnvironment {
        organization_id: tenant.organization_id.0,
        environment_id: tenant.environment_id.0,
        name: env.name,
        application_identifier: env.identifier,
        api_key,
    })
}

/// Start-up: with `TIDINGS_API_KEY` (refused when shorter than [`MIN_API_KEY_CHARS`]), makes sure a "Development" environment holds exactly that key;
/// without it, an empty database gets "Development" and "Production". Returns what was created.
pub async fn bootstrap(store: &Store, api_key: Option<&str>) -> Result<Vec<CreatedEnvironment>> {
    // Instances starting together on one empty PostgreSQL database take turns: each would otherwise find no
    // environment and create its own.
    store
        .exclusively(BOOTSTRAP_LOCK, bootstrap_now(store, api_key))
        .await
}

/// The advisory lock of [`bootstrap`] (an arbitrary constant, "tidings" in ASCII).
const BOOTSTRAP_LOCK: i64 = 0x0074_6964_696e_6773;

async fn bootstrap_now(store: &Store, api_key: Option<&str>) -> Result<Vec<CreatedEnvironment>> {
    match api_key {
        Some(key) => {
            check_operator_key(key)?;
            if store
                .find_tenant_by_key_hash(&sha256_hex(key.as_bytes()))
                .await?
                .is_some()
            {
                return Ok(Vec::new());
            }
            let org = store.default_organization().await?;
            match store.get_environment_by_name(&org, "Development").await? {
                Some(env) => {
                    let tenant = Tenant {
                        organization_id: crate::domain::OrganizationId(env.organization_id),
                        environment_id: crate::domain::EnvironmentId(env.id.clone()),
                    };
                    store.insert_api_key(&tenant, key).await?;
                    Ok(vec![CreatedEnvironment {
                        organization_id: tenant.organization_id.0,
                        environment_id: env.id,
                        name: env.name,
                        application_identifier: env.identifier,
                        api_key: key.to_owned(),
                    }])
                }
                None => Ok(vec![create(store, "Development", Some(key)).await?]),
            }
        }
        None if store.count_environments().await? == 0 => Ok(vec![
            create(store, "Development", None).await?,
            create(store, "Production", None).await?,
        ]),
        None => Ok(Vec::new()),
    }
}
