//! Integration operations. Credentials are validated against CredentialsDto, sealed with the store's
//! cipher, and never handed back to API-key callers.

use serde_json::{Map, Value};

use super::OPTIMISTIC_RETRIES;
use crate::domain::channel::ProviderId;
use crate::domain::integration::{check_provider_channel, generated_identifier, Integration};
use crate::domain::{Channel, IntegrationId, IntegrationKind, Tenant, Timestamp};
use crate::error::{Error, Result, Validation};
use crate::store::Store;

const STRING_CREDENTIALS: &[&str] = &[
    "apiKey",
    "user",
    "secretKey",
    "domain",
    "password",
    "host",
    "port",
    "region",
    "accountSid",
    "messageProfileId",
    "token",
    "from",
    "senderName",
    "projectName",
    "applicationId",
    "clientId",
    "baseUrl",
    "webhookUrl",
    "redirectUrl",
    "serviceAccount",
    "ipPoolName",
    "apiKeyRequestHeader",
    "secretKeyRequestHeader",
    "idPath",
    "datePath",
    "apiToken",
    "authenticationTokenKey",
    "instanceId",
    "alertUid",
    "title",
    "imageUrl",
    "state",
    "externalLink",
    "channelId",
    "phoneNumberIdentification",
    "accessKey",
    "appSid",
    "senderId",
    "tenantId",
    "AppIOBaseUrl",
    "signingSecret",
    "outboundIntegrationId",
    "fromAddressOverride",
    "emailSlugPrefix",
    "externalEnvironmentId",
    "externalVaultId",
    "externalWorkspaceId",
];
const BOOL_CREDENTIALS: &[&str] = &[
    "secure",
    "requireTls",
    "ignoreTls",
    "hmac",
    "authenticateByToken",
    "useFromAddressOverride",
];
const OBJECT_CREDENTIALS: &[&str] = &["tlsOptions"];

/// Body of `POST /v1/integrations`.
#[derive(Debug, Clone, Default)]
pub struct NewIntegration {
    pub provider_id: String,
    pub channel: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub identifier: Option<String>,
    pub credentials: Option<Value>,
    pub active: Option<bool>,
    pub conditions: Option<Value>,
    pub configurations: Option<Value>,
}

/// Body of `PUT /v1/integrations/{id}`: given fields replace stored ones.
#[derive(Debug, Clone, Default)]
pub struct IntegrationUpdate {
    pub name: Option<String>,
    pub identifier: Option<String>,
    pub credentials: Option<Value>,
    pub active: Option<bool>,
    pub conditions: Option<Value>,
    pub configurations: Option<Value>,
}

/// Checks each credential against CredentialsDto's type for it. `port` may also be given as a JSON integer,
/// as users send it: it is stored as a string, like every string credential.
fn validate_credentials(v: &mut Validation, credentials: &mut Value) {
    let Some(map) = credentials.as_object_mut() else {
        v.add(
            "credentials",
            "credentials must be an object",
            credentials.clone(),
        );
        return;
    };
    for (key, value) in map.iter_mut() {
        let field = format!("credentials.{key}");
        let expected = if STRING_CREDENTIALS.contains(&key.as_str()) {
            if key == "port" && (value.is_u64() || value.is_i64()) {
                *value = Value::String(value.to_string());
            }
            (!value.is_string() && !value.is_null()).then(|| {
                if key == "port" {
                    format!("{field} must be a string or an integer")
                } else {
                    format!("{field} must be a string")
                }
            })
        } else if BOOL_CREDENTIALS.contains(&key.as_str()) {
            (!value.is_boolean() && !value.is_null()).then(|| format!("{field} must be a boolean"))
        } else if OBJECT_CREDENTIALS.contains(&key.as_str()) {
            (!value.is_object() && !value.is_null()).then(|| format!("{field} must be an object"))
        } else {
            Some(format!("{field} is not a known credential field"))
        };
        if let Some(message) = expected {
            v.add(&field, message, value.clone());
        }
    }
}

fn validate_conditions(v: &mut Validation, conditions: &Value) {
    match conditions.as_array() {
        Some(items) if super::over_cap(v, "conditions", items.len(), super::limits::FILTERS) => {}
        Some(items) if items.iter().all(Value::is_object) => {}
        _ => v.add(
            "conditions",
            "conditions must be an array of step filters",
            conditions.clone(),
        ),
    }
}

fn validate_configurations(v: &mut Validation, configurations: &Value) {
    let Some(map) = configurations.as_object() else {
        v.add(
            "configurations",
            "configurations must be an object",
            configurations.clone(),
        );
        return;
    };
    if map
        .get("inboundWebhookEnabled")
        .is_some_and(|x| !x.is_boolean())
    {
        v.add(
            "configurations.inboundWebhookEnabled",
            "must be a boolean",
            map["inboundWebhookEnabled"].clone(),
        );
    }
    if map
        .get("inboundWebhookSigningKey")
        .is_some_and(|x| !x.is_string())
    {
        v.add(
            "configurations.inboundWebhookSigningKey",
            "must be a string",
            map["inboundWebhookSigningKey"].clone(),
        );
    }
}

fn validate_identifier(v: &mut Validation, identifier: &str) {
    if identifier.trim().is_empty() || identifier.len() > 255 {
        v.add(
            "identifier",
            "identifier must be 1 to 255 characters",
            identifier,
        );
    }
}

fn seal(store: &Store, credentials: Option<&Value>) -> Result<String> {
    let plain = serde_json::to_vec(credentials.unwrap_or(&Value::Object(Map::new())))?;
    Ok(store.cipher().encrypt(&plain))
}

pub async fn list(store: &Store, tenant: &Tenant, active_only: bool) -> Result<Vec<Integration>> {
    store
        .list_integrations(&tenant.environment_id, active_only)
        .await
}

pub async fn create(
    store: &Store,
    tenant: &Tenant,
    mut input: NewIntegration,
) -> Result<Integration> {
    let (provider, channel, kind) = validated(&mut input)?;

    if channel == Some(Channel::InApp)
        && store
            .count_channel_integrations(&tenant.environment_id, Channel::InApp)
            .await?
            > 0
    {
        return Err(Error::bad_request(
            "An environment can have only one in-app integration",
        ));
    }
    let name = input
        .name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| provider.as_str().to_owned());
    let identifier = input
        .identifier
        .unwrap_or_else(|| generated_identifier(&name));
    let active = input.active.unwrap_or(false);
    // The first active integration of a channel becomes its primary.
    let primary = match channel {
        Some(c) if active && c != Channel::InApp => !store
            .list_integrations(&tenant.environment_id, true)
            .await?
            .iter()
            .any(|i| i.channel == Some(c) && i.primary),
        _ => false,
    };
    let now = Timestamp::now();
    let integration = Integration {
        id: IntegrationId::new(),
        organization_id: tenant.organization_id.clone(),
        environment_id: tenant.environment_id.clone(),
        name,
        identifier,
        provider_id: provider,
        channel,
        kind,
        credentials_sealed: seal(store, input.credentials.as_ref())?,
        configurations: input.configurations,
        conditions: input.conditions,
        active,
        primary,
        priority: 0,
        deleted: false,
        deleted_at: None,
        deleted_by: None,
        version: 0,
        created_at: now,
        updated_at: now,
    };
    store
        .insert_integration(&integration)
        .await
        .map_err(|e| identifier_taken(e, &integration.identifier))?;
    apply_inbox_hmac(store, tenant, &integration, input.credentials.as_ref()).await?;
    Ok(integration)
}

/// Checks a new integration's fields (every problem in one answer): its provider, channel and kind.
fn validated(input: &mut NewIntegration) -> Result<(ProviderId, Option<Channel>, IntegrationKind)> {
    let mut v = Validation::new();
    let provider = ProviderId::parse(&input.provider_id);
    if provider.is_none() {
        v.add(
            "providerId",
            "providerId must be one of the supported provider IDs",
            input.provider_id.clone(),
        );
    }
    let channel = match input.channel.as_deref() {
        None => None,
        Some(c) => match Channel::parse(c) {
            Some(c) => Some(c),
            None => {
                v.add(
                    "channel",
                    "channel must be one of in_app, email, sms, chat, push",
                    c,
                );
                None
            }
        },
    };
    let kind = match input.kind.as_deref() {
        None => {
            if provider.as_ref().is_some_and(|p| p.channel().is_none()) && input.channel.is_none() {
                IntegrationKind::Agent
            } else {
                IntegrationKind::Delivery
            }
        }
        Some(k) => IntegrationKind::parse(k).unwrap_or_else(|| {
            v.add("kind", "kind must be delivery or agent", k);
            IntegrationKind::Delivery
        }),
    };
    if let (Some(p), true) = (&provider, input.channel.is_none() || channel.is_some()) {
        if let Some(problem) = check_provider_channel(p, channel, kind) {
            v.add(
                "channel",
                problem,
                input.channel.clone().map_or(Value::Null, Value::from),
            );
        }
    }
    if let Some(c) = &mut input.credentials {
        validate_credentials(&mut v, c);
    }
    if let Some(c) = &input.conditions {
        validate_conditions(&mut v, c);
    }
    if let Some(c) = &input.configurations {
        validate_configurations(&mut v, c);
    }
    if let Some(i) = &input.identifier {
        validate_identifier(&mut v, i);
    }
    v.finish()?;
    Ok((provider.expect("validated above"), channel, kind))
}

/// The in-app integration's `credentials.hmac`, when given as `true` or `false`, is how Novu's wire turns the
/// Inbox's HMAC on or off: it sets the environment's rule (`service::inbox_session::set_hmac`). Leaving it
/// out, or deleting or deactivating the integration, changes nothing.
async fn apply_inbox_hmac(
    store: &Store,
    tenant: &Tenant,
    integration: &Integration,
    credentials: Option<&Value>,
) -> Result<()> {
    let hmac = credentials
        .and_then(|c| c.get("hmac"))
        .and_then(Value::as_bool);
    match hmac {
        Some(on) if integration.channel == Some(Channel::InApp) => {
            super::inbox_session::set_hmac(store, &tenant.environment_id, on).await
        }
        _ => Ok(()),
    }
}

/// A write refused because another integration of the environment has `identifier`, as the API answers it.
fn identifier_taken(e: Error, identifier: &str) -> Error {
    match e {
        Error::Duplicate => Error::Conflict(format!(
            "Integration with identifier \"{identifier}\" already exists"
        )),
        e => e,
    }
}

fn not_found(id: &IntegrationId) -> Error {
    Error::NotFound(format!("Integration with id {id} not found"))
}

pub async fn update(
    store: &Store,
    tenant: &Tenant,
    id: &IntegrationId,
    mut input: IntegrationUpdate,
) -> Result<Integration> {
    let mut v = Validation::new();
    if let Some(c) = &mut input.credentials {
        validate_credentials(&mut v, c);
    }
    if let Some(c) = &input.conditions {
        validate_conditions(&mut v, c);
    }
    if let Some(c) = &input.configurations {
        validate_configurations(&mut v, c);
    }
    if let Some(i) = &input.identifier {
        validate_identifier(&mut v, i);
    }
    v.finish()?;
    let sealed = match &input.credentials {
        Some(c) => Some(seal(store, Some(c))?),
        None => None,
    };
    let updated = modify(store, tenant, id, |i| {
        if let Some(name) = input.name.clone().filter(|n| !n.trim().is_empty()) {
            i.name = name;
        }
        if let Some(identifier) = input.identifier.clone() {
            i.identifier = identifier;
        }
        if let Some(s) = sealed.clone() {
            i.credentials_sealed = s;
        }
        if let Some(active) = input.active {
            i.active = active;
            if !active {
                i.primary = false;
            }
        }
        if let Some(c) = input.conditions.clone() {
            i.conditions = Some(c);
        }
        if let Some(c) = input.configurations.clone() {
            i.configurations = Some(c);
        }
        Ok(())
    })
    .await?;
    apply_inbox_hmac(store, tenant, &updated, input.credentials.as_ref()).await?;
    Ok(updated)
}

/// Soft delete: `deleted`, `deletedAt`; the integration leaves every list.
pub async fn delete(store: &Store, tenant: &Tenant, id: &IntegrationId) -> Result<Integration> {
    modify(store, tenant, id, |i| {
        i.deleted = true;
        i.deleted_at = Some(Timestamp::now());
        i.active = false;
        i.primary = false;
        Ok(())
    })
    .await
}

/// Makes the integration the primary (and active) one of its channel; the previous primary loses the flag.
pub async fn set_primary(
    store: &Store,
    tenant: &Tenant,
    id: &IntegrationId,
) -> Result<Integration> {
    let integration = store
        .get_integration(&tenant.environment_id, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    let channel = match integration.channel {
        Some(c) if c != Channel::InApp => c,
        _ => {
            return Err(Error::bad_request(format!(
                "Integration {id} has no delivery channel that supports a primary integration"
            )))
        }
    };
    store
        .set_primary_integration(&tenant.environment_id, id, channel)
        .await?;
    store
        .get_integration(&tenant.environment_id, id)
        .await?
        .ok_or_else(|| not_found(id))
}

async fn modify(
    store: &Store,
    tenant: &Tenant,
    id: &IntegrationId,
    mut change: impl FnMut(&mut Integration) -> Result<()>,
) -> Result<Integration> {
    for _ in 0..OPTIMISTIC_RETRIES {
        let mut i = store
            .get_integration(&tenant.environment_id, id)
            .await?
            .ok_or_else(|| not_found(id))?;
        let expected = i.version;
        change(&mut i)?;
        i.version = expected + 1;
        i.updated_at = Timestamp::now();
        if store
            .update_integration(&i, expected)
            .await
            .map_err(|e| identifier_taken(e, &i.identifier))?
        {
            return Ok(i);
        }
    }
    Err(Error::Conflict(format!(
        "Integration {id} is being changed concurrently; retry the request"
    )))
}
