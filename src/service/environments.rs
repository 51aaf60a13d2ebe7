//! Environments and their API keys: `tidings environments create`, `list`, `rotate-key`, `hmac` and
//! `end-sessions`, and start-up bootstrap.

use serde::Serialize;

use crate::crypto::{new_api_key, sha256_hex};
use crate::domain::{EnvironmentId, OrganizationId, Tenant};
use crate::error::{Error, Result};
use crate::service::inbox_session;
use crate::store::tenants::EnvironmentRow;
use crate::store::Store;

/// What `tidings environments create` prints.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CreatedEnvironment {
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
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
/// [`MIN_API_KEY_CHARS`] characters). Its Inbox sessions need the subscriber's HMAC when it is named
/// Production (see [`create_with_hmac`]).
pub async fn create(store: &Store, name: &str, key: Option<&str>) -> Result<CreatedEnvironment> {
    create_with_hmac(store, name, key, false).await
}

/// Whether an environment of this name requires the Inbox's HMAC from its creation whatever it is told:
/// Production (any case).
fn requires_hmac(name: &str) -> bool {
    name.trim().eq_ignore_ascii_case("production")
}

/// [`create`], and the environment's Inbox sessions need the subscriber's HMAC when `hmac` (`--hmac`) or
/// when it is named Production.
pub async fn create_with_hmac(
    store: &Store,
    name: &str,
    key: Option<&str>,
    hmac: bool,
) -> Result<CreatedEnvironment> {
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
    let env = store
        .insert_environment(&org, name, hmac || requires_hmac(name))
        .await?;
    let api_key = key.map(str::to_owned).unwrap_or_else(new_api_key);
    let tenant = Tenant {
        organization_id: org,
        environment_id: env.id,
    };
    store.insert_api_key(&tenant, &api_key).await?;
    Ok(CreatedEnvironment {
        organization_id: tenant.organization_id,
        environment_id: tenant.environment_id,
        name: env.name,
        application_identifier: env.identifier,
        api_key,
    })
}

/// What `tidings environments list` prints for each environment (never a key).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentSummary {
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
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

/// The default organization's environment `name`.
async fn by_name(store: &Store, name: &str) -> Result<EnvironmentRow> {
    let name = name.trim();
    let org = store.default_organization().await?;
    store
        .get_environment_by_name(&org, name)
        .await?
        .ok_or_else(|| Error::NotFound(format!("Environment \"{name}\" not found")))
}

/// Issues a new API key for the default organization's environment `name`; every key it had stops working
/// (at once in the database; a server that cached the old key refuses it within `api::auth::KEY_CACHE_TTL`),
/// and so does every Inbox session of the environment.
pub async fn rotate_key(store: &Store, name: &str) -> Result<CreatedEnvironment> {
    let env = by_name(store, name).await?;
    let tenant = Tenant {
        organization_id: env.organization_id,
        environment_id: env.id,
    };
    let api_key = new_api_key();
    store.replace_api_keys(&tenant, &api_key).await?;
    inbox_session::end_sessions(store, &tenant.environment_id).await?;
    Ok(CreatedEnvironment {
        organization_id: tenant.organization_id,
        environment_id: tenant.environment_id,
        name: env.name,
        application_identifier: env.identifier,
        api_key,
    })
}

/// What `tidings environments hmac` and `end-sessions` print.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InboxSessionRules {
    pub environment_id: EnvironmentId,
    pub name: String,
    /// Whether a session needs the subscriber's HMAC (`subscriberHash`).
    pub hmac: bool,
    /// The sessions' epoch: sessions opened before it was reached are ended.
    pub session_epoch: i64,
}

/// `tidings environments hmac NAME on|off`: whether the Inbox sessions of the default organization's
/// environment `name` need the subscriber's HMAC (turning it on ends the sessions open).
pub async fn set_hmac(store: &Store, name: &str, on: bool) -> Result<InboxSessionRules> {
    let env = by_name(store, name).await?;
    inbox_session::set_hmac(store, &env.id, on).await?;
    session_rules(store, name).await
}

/// `tidings environments end-sessions NAME`: ends every Inbox session of the default organization's
/// environment `name`.
pub async fn end_sessions(store: &Store, name: &str) -> Result<InboxSessionRules> {
    let env = by_name(store, name).await?;
    inbox_session::end_sessions(store, &env.id).await?;
    session_rules(store, name).await
}

async fn session_rules(store: &Store, name: &str) -> Result<InboxSessionRules> {
    let env = by_name(store, name).await?;
    Ok(InboxSessionRules {
        environment_id: env.id,
        name: env.name,
        hmac: env.inbox_hmac,
        session_epoch: env.session_epoch,
    })
}

/// The start-up banner's line naming the environments whose Inbox sessions need no HMAC (any browser may
/// open the Inbox of any subscriber there by naming it); `None` when there is none.
pub async fn without_hmac_banner(store: &Store) -> Result<Option<String>> {
    let names: Vec<String> = store
        .list_environments(None)
        .await?
        .into_iter()
        .filter(|e| !e.inbox_hmac)
        .map(|e| format!("\"{}\"", e.name))
        .collect();
    Ok((!names.is_empty()).then(|| {
        format!(
            "Inbox sessions need no subscriberHash (HMAC off) in: {}. Any browser can open any subscriber's \
             Inbox there; require it with `tidings environments hmac NAME on`.",
            names.join(", ")
        )
    }))
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
                        organization_id: env.organization_id,
                        environment_id: env.id.clone(),
                    };
                    store.insert_api_key(&tenant, key).await?;
                    Ok(vec![CreatedEnvironment {
                        organization_id: tenant.organization_id,
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
