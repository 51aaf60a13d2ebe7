//! Environments and their API keys: `tidings environments create`, `list`, `rotate-key`, `hmac` and
//! `end-sessions`, and start-up bootstrap.

use serde::Serialize;

use crate::crypto::{new_api_key, sha256_hex};
use crate::domain::{EnvironmentId, OrganizationId, Tenant};
use crate::error::{Error, Result, Validation};
use crate::service::inbox_session;
use crate::store::environment_erasures::EnvironmentDeletion;
use crate::store::tenants::{EnvironmentRow, EnvironmentUpdate};
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
    create_in(store, &org, name, key, hmac || requires_hmac(name), None).await
}

/// Creates the environment `name` (trimmed, not empty) in `org` with the API key `key` (a new one when
/// `None`); 409 when the organization has one of this name already (a concurrent create of the same name
/// loses at the database's unique index).
async fn create_in(
    store: &Store,
    org: &OrganizationId,
    name: &str,
    key: Option<&str>,
    hmac: bool,
    color: Option<&str>,
) -> Result<CreatedEnvironment> {
    let exists = || Error::Conflict(format!("Environment \"{name}\" already exists"));
    if store.get_environment_by_name(org, name).await?.is_some() {
        return Err(exists());
    }
    let env = match store.insert_environment(org, name, hmac, color).await {
        Err(Error::Duplicate) => return Err(exists()),
        other => other?,
    };
    let api_key = key.map(str::to_owned).unwrap_or_else(new_api_key);
    let tenant = Tenant {
        organization_id: org.clone(),
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

/// The most characters of an environment's name.
pub const NAME_CHARS: usize = 100;
/// The most characters of an environment's public identifier (the Inbox's `applicationIdentifier`).
pub const IDENTIFIER_CHARS: usize = 64;

/// The environments every organization is started with, as Novu names them: the API creates none of these
/// names, renames none of them and deletes none of them (Novu's rule).
const PROTECTED: [&str; 2] = ["Development", "Production"];

fn protected(name: &str) -> bool {
    PROTECTED
        .iter()
        .any(|p| p.eq_ignore_ascii_case(name.trim()))
}

/// What `POST /v1/environments` and `PUT /v1/environments/{environmentId}` ask for; `None` leaves a field
/// as it is. `refused` names what was sent that Tidings does not have (a parent environment, an inbound
/// parse domain, a framework bridge), each refused with a 422 rather than dropped.
#[derive(Debug, Clone, Default)]
pub struct EnvironmentInput {
    pub name: Option<String>,
    pub identifier: Option<String>,
    pub color: Option<String>,
    pub refused: Vec<(&'static str, serde_json::Value)>,
}

impl EnvironmentInput {
    /// The 422 of every field that does not fit, all at once.
    fn validate(&self) -> Result<()> {
        let mut v = Validation::new();
        if let Some(name) = &self.name {
            let n = name.trim().chars().count();
            if n == 0 || n > NAME_CHARS {
                v.add(
                    "name",
                    format!("name must hold 1 to {NAME_CHARS} characters"),
                    name.as_str(),
                );
            } else if protected(name) {
                v.add(
                    "name",
                    "Environment name cannot be Development or Production",
                    name.as_str(),
                );
            }
        }
        if let Some(id) = &self.identifier {
            let fits = (1..=IDENTIFIER_CHARS).contains(&id.len())
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !fits {
                v.add(
                    "identifier",
                    format!(
                        "identifier must hold 1 to {IDENTIFIER_CHARS} letters, digits, '-' or '_'"
                    ),
                    id.as_str(),
                );
            }
        }
        if let Some(color) = &self.color {
            let hex = color.strip_prefix('#').unwrap_or("");
            if !matches!(hex.len(), 3 | 6) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                v.add(
                    "color",
                    "color must be a hex color: #rgb or #rrggbb",
                    color.as_str(),
                );
            }
        }
        for (field, value) in &self.refused {
            v.add(
                field,
                format!("{field} is not supported by Tidings"),
                value.clone(),
            );
        }
        v.finish()
    }
}

/// `POST /v1/environments`: creates an environment in the caller's organization, with a new API key and
/// public identifier as `tidings environments create` does. Any API key of the organization may; the
/// answer is the only place the new key is ever shown.
pub async fn create_for(
    store: &Store,
    tenant: &Tenant,
    input: &EnvironmentInput,
) -> Result<(EnvironmentRow, String)> {
    input.validate()?;
    let Some(name) = input.name.as_deref().map(str::trim) else {
        return Err(Error::invalid(
            "name",
            "name is required",
            serde_json::Value::Null,
        ));
    };
    let org = &tenant.organization_id;
    let created = create_in(store, org, name, None, false, input.color.as_deref()).await?;
    let env = store
        .environment_of(org, &created.environment_id)
        .await?
        .ok_or_else(|| {
            Error::NotFound(format!("Environment {} not found", created.environment_id))
        })?;
    Ok((env, created.api_key))
}

/// The organization's environment `id`, which an API key may change only when it is its own: 404 when the
/// organization has no such environment, 403 when it is another one (Novu's rule: an API key is scoped to
/// one environment).
async fn own_environment(
    store: &Store,
    tenant: &Tenant,
    id: &EnvironmentId,
    doing: &str,
) -> Result<EnvironmentRow> {
    let env = store
        .environment_of(&tenant.organization_id, id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("Environment {id} not found")))?;
    if env.id != tenant.environment_id {
        return Err(Error::Forbidden(format!(
            "API key authentication is scoped to a single environment and cannot {doing} a different \
             environment. Use the API key of environment {id}."
        )));
    }
    Ok(env)
}

/// `PUT /v1/environments/{environmentId}`: renames the caller's own environment, changes its public
/// identifier or its color. Development and Production keep their names; names are unique in the
/// organization and identifiers everywhere (409).
pub async fn update(
    store: &Store,
    tenant: &Tenant,
    id: &EnvironmentId,
    input: &EnvironmentInput,
) -> Result<EnvironmentRow> {
    input.validate()?;
    let env = own_environment(store, tenant, id, "update").await?;
    let name = input
        .name
        .as_deref()
        .map(str::trim)
        .filter(|n| *n != env.name);
    if name.is_some() && protected(&env.name) {
        return Err(Error::invalid(
            "name",
            "Cannot update the name of Development or Production environments",
            env.name.as_str(),
        ));
    }
    let change = EnvironmentUpdate {
        name,
        identifier: input.identifier.as_deref(),
        color: input.color.as_deref(),
    };
    match store
        .update_environment(&tenant.organization_id, id, &change)
        .await
    {
        Err(Error::Duplicate) => Err(Error::Conflict(match name {
            Some(n)
                if store
                    .get_environment_by_name(&tenant.organization_id, n)
                    .await?
                    .is_some() =>
            {
                format!("Environment \"{n}\" already exists")
            }
            _ => "Environment identifier already exists".to_owned(),
        })),
        Ok(None) => Err(Error::NotFound(format!("Environment {id} not found"))),
        Ok(Some(env)) => Ok(env),
        Err(e) => Err(e),
    }
}

/// `DELETE /v1/environments/{environmentId}`: deletes the caller's own environment. Its keys, Inbox
/// identifier and sessions are refused at once; workers erase its data in bounded batches
/// (`engine::erasure`). Development and Production cannot be deleted, nor an organization's last
/// environment (400).
pub async fn delete(store: &Store, tenant: &Tenant, id: &EnvironmentId) -> Result<()> {
    let env = own_environment(store, tenant, id, "delete").await?;
    if protected(&env.name) {
        return Err(Error::bad_request(format!(
            "The {} environment is protected and cannot be deleted. Only custom environments can be deleted.",
            env.name
        )));
    }
    match store
        .delete_environment(&tenant.organization_id, id)
        .await?
    {
        EnvironmentDeletion::Deleted => Ok(()),
        EnvironmentDeletion::NotFound => {
            Err(Error::NotFound(format!("Environment {id} not found")))
        }
        EnvironmentDeletion::Last => Err(Error::bad_request(
            "The last environment of an organization cannot be deleted",
        )),
    }
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
