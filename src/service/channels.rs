//! Channel connections (spec §4.4) and channel endpoints (§4.2, §4.3).

use serde_json::Value;

use crate::domain::context::{context_keys, parse_context, ContextEntry};
use crate::domain::endpoint::{
    validate_endpoint, ChannelConnection, ChannelEndpoint, ConnectionMode, EndpointListing,
    EndpointType,
};
use crate::domain::id::new_identifier;
use crate::domain::integration::Integration;
use crate::domain::{new_object_id, Channel, Tenant, Timestamp};
use crate::error::{Error, Result, Validation};
use crate::store::channels::{ChannelFilter, ChannelOrder, Inserted};
use crate::store::page::{Page, PageRequest};
use crate::store::Store;

/// Body of `POST /v1/channel-connections`, after JSON parsing.
#[derive(Debug, Clone, Default)]
pub struct NewConnection {
    pub identifier: Option<String>,
    pub subscriber_id: Option<String>,
    pub context: Option<Value>,
    pub connection_mode: Option<String>,
    pub integration_identifier: String,
    pub workspace: Value,
    pub auth: Value,
}

fn check_identifier(v: &mut Validation, identifier: Option<&str>) {
    if let Some(i) = identifier {
        if i.trim().is_empty() || i.len() > 100 {
            v.add("identifier", "identifier must be 1 to 100 characters", i);
        }
    }
}

/// `{id: string, name?: string}`.
fn check_workspace(v: &mut Validation, workspace: &Value) {
    let ok = workspace.as_object().is_some_and(|w| {
        w.get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| !id.is_empty())
            && w.get("name").is_none_or(|n| n.is_string() || n.is_null())
    });
    if !ok {
        v.add(
            "workspace",
            "workspace must be {id: string, name?: string}",
            workspace.clone(),
        );
    }
}

/// `{accessToken: string}`; returns the token.
fn check_auth(v: &mut Validation, auth: &Value) -> String {
    match auth.get("accessToken").and_then(Value::as_str) {
        Some(t) if !t.is_empty() => t.to_owned(),
        _ => {
            v.add(
                "auth.accessToken",
                "auth.accessToken must be a non-empty string",
                Value::Null,
            );
            String::new()
        }
    }
}

async fn integration_by_identifier(
    store: &Store,
    tenant: &Tenant,
    identifier: &str,
) -> Result<Integration> {
    store
        .get_integration_by_identifier(&tenant.environment_id, identifier)
        .await?
        .ok_or_else(|| Error::NotFound(format!("Integration not found: {identifier}")))
}

async fn require_subscriber(store: &Store, tenant: &Tenant, subscriber_id: &str) -> Result<()> {
    match store
        .get_subscriber(&tenant.environment_id, subscriber_id)
        .await?
    {
        Some(_) => Ok(()),
        None => Err(Error::NotFound(format!(
            "Subscriber not found: {subscriber_id}"
        ))),
    }
}

fn describe_resource(subscriber_id: Option<&str>, keys: &[String]) -> String {
    let who = match subscriber_id {
        Some(s) => format!("subscriberId \"{s}\""),
        None => "no subscriberId".to_owned(),
    };
    let ctx = if keys.is_empty() {
        "no context".to_owned()
    } else {
        format!("context [{}]", keys.join(", "))
    };
    format!("{who} and {ctx}")
}

pub async fn create_connection(
    store: &Store,
    tenant: &Tenant,
    input: NewConnection,
) -> Result<ChannelConnection> {
    let mut v = Validation::new();
    check_identifier(&mut v, input.identifier.as_deref());
    if input.integration_identifier.trim().is_empty() {
        v.add(
            "integrationIdentifier",
            "integrationIdentifier must not be empty",
            "",
        );
    }
    check_workspace(&mut v, &input.workspace);
    let token = check_auth(&mut v, &input.auth);
    let mode = match input.connection_mode.as_deref() {
        None => ConnectionMode::Subscriber,
        Some(m) => ConnectionMode::parse(m).unwrap_or_else(|| {
            v.add(
                "connectionMode",
                "connectionMode must be subscriber or shared",
                m,
            );
            ConnectionMode::Subscriber
        }),
    };
    let contexts: Vec<ContextEntry> = match &input.context {
        Some(c) if !c.is_null() => parse_context(&mut v, "context", c),
        _ => Vec::new(),
    };
    v.finish()?;

    let keys = context_keys(&contexts);
    let subscriber_id = input.subscriber_id.filter(|s| !s.is_empty());
    match (mode, &subscriber_id, keys.is_empty()) {
        (ConnectionMode::Shared, _, true) => {
            return Err(Error::bad_request(
                "context is required when connectionMode is \"shared\"",
            ))
        }
        (ConnectionMode::Subscriber, None, true) => {
            return Err(Error::bad_request(
                "Either subscriberId or context must be provided",
            ))
        }
        (ConnectionMode::Subscriber, None, false) => {
            return Err(Error::bad_request(
                "subscriberId is required when connectionMode is \"subscriber\"",
            ))
        }
        _ => {}
    }
    let integration =
        integration_by_identifier(store, tenant, &input.integration_identifier).await?;
    if integration.channel != Some(Channel::Chat) {
        return Err(Error::bad_request(format!(
            "Channel connections link chat integrations; {} is not a chat integration",
            integration.identifier
        )));
    }
    // A shared connection belongs to its context only: the subscriber is neither checked nor stored.
    let subscriber_id = match mode {
        ConnectionMode::Shared => None,
        ConnectionMode::Subscriber => subscriber_id,
    };
    if let Some(s) = &subscriber_id {
        require_subscriber(store, tenant, s).await?;
    }
    store
        .ensure_contexts(&tenant.environment_id, &contexts)
        .await?;

    let now = Timestamp::now();
    let connection = ChannelConnection {
        id: new_object_id(),
        organization_id: tenant.organization_id.clone(),
        environment_id: tenant.environment_id.clone(),
        identifier: input
            .identifier
            .unwrap_or_else(|| new_identifier("chconn_")),
        integration_identifier: integration.identifier.clone(),
        provider_id: integration.provider_id.clone(),
        channel: Channel::Chat,
        mode,
        subscriber_id,
        context_keys: keys,
        workspace: input.workspace,
        access_token: token,
        created_at: now,
        updated_at: now,
    };
    match store.insert_connection(&connection).await? {
        Inserted::Yes => Ok(connection),
        Inserted::Duplicate => Err(duplicate(store, tenant, &connection).await?),
    }
}

/// The error of a connection refused as a duplicate: the existing connection of its resource, or its
/// identifier taken.
async fn duplicate(
    store: &Store,
    tenant: &Tenant,
    connection: &ChannelConnection,
) -> Result<Error> {
    // Which unique index refused it: the one-per-resource slot or the identifier.
    let existing = store
        .find_connection_for_resource(
            &tenant.environment_id,
            &connection.integration_identifier,
            connection.subscriber_id.as_deref(),
            &connection.context_keys,
        )
        .await?;
    let Some(e) = existing else {
        return Ok(Error::Conflict(format!(
            "Channel connection with identifier \"{}\" already exists in environment \"{}\"",
            connection.identifier, tenant.environment_id
        )));
    };
    Ok(Error::Conflict(format!(
        "A channel connection already exists for integration \"{}\" with {}. Connection ID: {}",
        connection.integration_identifier,
        describe_resource(
            connection.subscriber_id.as_deref(),
            &connection.context_keys
        ),
        e.identifier
    )))
}

fn connection_not_found(identifier: &str) -> Error {
    Error::NotFound(format!("Channel connection not found: {identifier}"))
}

pub async fn get_connection(
    store: &Store,
    tenant: &Tenant,
    identifier: &str,
) -> Result<ChannelConnection> {
    store
        .get_connection(&tenant.environment_id, identifier)
        .await?
        .ok_or_else(|| connection_not_found(identifier))
}

pub async fn list_connections(
    store: &Store,
    tenant: &Tenant,
    filter: &ChannelFilter,
    page: &PageRequest<ChannelOrder>,
) -> Result<Page<ChannelConnection>> {
    store
        .list_connections(&tenant.environment_id, filter, page)
        .await
}

/// Rotates `auth` and/or renames `workspace`.
pub async fn update_connection(
    store: &Store,
    tenant: &Tenant,
    identifier: &str,
    workspace: Option<Value>,
    auth: Option<Value>,
) -> Result<ChannelConnection> {
    let mut v = Validation::new();
    if workspace.is_none() && auth.is_none() {
        v.add("body", "give workspace and/or auth", Value::Null);
    }
    if let Some(w) = &workspace {
        check_workspace(&mut v, w);
    }
    let token = auth.as_ref().map(|a| check_auth(&mut v, a));
    v.finish()?;
    let mut c = get_connection(store, tenant, identifier).await?;
    if let Some(w) = workspace {
        c.workspace = w;
    }
    if let Some(t) = token {
        c.access_token = t;
    }
    c.updated_at = Timestamp::now().max(Timestamp(c.updated_at.0 + 1));
    if !store.update_connection(&c).await? {
        return Err(connection_not_found(identifier));
    }
    Ok(c)
}

/// Deletes the connection; endpoints that used it stay, detached (`connectionIdentifier` becomes null).
pub async fn delete_connection(store: &Store, tenant: &Tenant, identifier: &str) -> Result<()> {
    if store
        .delete_connection(&tenant.environment_id, identifier)
        .await?
    {
        Ok(())
    } else {
        Err(connection_not_found(identifier))
    }
}

/// Body of `POST /v1/channel-endpoints`, after JSON parsing.
#[derive(Debug, Clone, Default)]
pub struct NewEndpoint {
    pub identifier: Option<String>,
    pub endpoint_type: String,
    pub endpoint: Value,
    pub integration_identifier: String,
    pub subscriber_id: Option<String>,
    pub context: Option<Value>,
    pub connection_identifier: Option<String>,
}

pub async fn create_endpoint(
    store: &Store,
    tenant: &Tenant,
    input: NewEndpoint,
) -> Result<ChannelEndpoint> {
    let mut v = Validation::new();
    check_identifier(&mut v, input.identifier.as_deref());
    let endpoint_type = EndpointType::parse(&input.endpoint_type);
    match endpoint_type {
        None => v.add(
            "type",
            "type must be one of slack_channel, slack_user, webhook, phone, ms_teams_channel, ms_teams_user, telegram_chat",
            input.endpoint_type.as_str(),
        ),
        Some(t) => {
            if let Err(problem) = validate_endpoint(t, &input.endpoint) {
                v.add("endpoint", problem, input.endpoint.clone());
            }
        }
    }
    let contexts = match &input.context {
        Some(c) if !c.is_null() => parse_context(&mut v, "context", c),
        _ => Vec::new(),
    };
    v.finish()?;
    let endpoint_type = endpoint_type.expect("validated above");
    let subscriber_id = input.subscriber_id.filter(|s| !s.is_empty());
    if subscriber_id.is_none() && contexts.is_empty() {
        return Err(Error::bad_request(
            "Either subscriberId or context must be provided",
        ));
    }
    let integration =
        integration_by_identifier(store, tenant, &input.integration_identifier).await?;
    if !endpoint_type.suits(&integration.provider_id) {
        return Err(Error::bad_request(format!(
            "An endpoint of type \"{}\" cannot be delivered through integration \"{}\" (provider {})",
            endpoint_type.as_str(),
            integration.identifier,
            integration.provider_id.as_str()
        )));
    }
    let channel = integration.channel.ok_or_else(|| {
        Error::bad_request(format!(
            "Integration \"{}\" has no channel",
            integration.identifier
        ))
    })?;
    if let Some(s) = &subscriber_id {
        require_subscriber(store, tenant, s).await?;
    }
    if let Some(c) = &input.connection_identifier {
        let connection = get_connection(store, tenant, c).await?;
        if connection.integration_identifier != integration.identifier {
            return Err(Error::bad_request(format!(
                "Channel connection \"{c}\" belongs to integration \"{}\", not \"{}\"",
                connection.integration_identifier, integration.identifier
            )));
        }
    }
    store
        .ensure_contexts(&tenant.environment_id, &contexts)
        .await?;
    let now = Timestamp::now();
    let endpoint = ChannelEndpoint {
        id: new_object_id(),
        organization_id: tenant.organization_id.clone(),
        environment_id: tenant.environment_id.clone(),
        identifier: input
            .identifier
            .unwrap_or_else(|| new_identifier("chendp_")),
        endpoint_type,
        endpoint: input.endpoint,
        integration_identifier: integration.identifier.clone(),
        provider_id: integration.provider_id.clone(),
        channel,
        connection_identifier: input.connection_identifier,
        subscriber_id,
        context_keys: context_keys(&contexts),
        created_at: now,
        updated_at: now,
    };
    match store.insert_endpoint(&endpoint).await? {
        Inserted::Yes => Ok(endpoint),
        Inserted::Duplicate => Err(Error::Conflict(format!(
            "Channel endpoint with identifier \"{}\" already exists in environment \"{}\"",
            endpoint.identifier, tenant.environment_id
        ))),
    }
}

fn endpoint_not_found(tenant: &Tenant, identifier: &str) -> Error {
    Error::NotFound(format!(
        "Channel endpoint with identifier \"{identifier}\" not found in environment \"{}\"",
        tenant.environment_id
    ))
}

pub async fn get_endpoint(
    store: &Store,
    tenant: &Tenant,
    identifier: &str,
) -> Result<ChannelEndpoint> {
    store
        .get_endpoint(&tenant.environment_id, identifier)
        .await?
        .ok_or_else(|| endpoint_not_found(tenant, identifier))
}

/// Replaces the endpoint data, which must match the endpoint's existing type exactly.
pub async fn update_endpoint(
    store: &Store,
    tenant: &Tenant,
    identifier: &str,
    endpoint: Value,
) -> Result<ChannelEndpoint> {
    // The body's shape is checked before the endpoint is looked up (design.md §3: a 422), its content
    // against the endpoint's type after (a 400, as upstream).
    if !endpoint.is_object() {
        return Err(Error::invalid(
            "endpoint",
            "endpoint must be an object",
            endpoint,
        ));
    }
    let mut e = get_endpoint(store, tenant, identifier).await?;
    if let Err(problem) = validate_endpoint(e.endpoint_type, &endpoint) {
        return Err(Error::bad_request(format!(
            "Endpoint must match the required format for type \"{}\": {problem}",
            e.endpoint_type.as_str()
        )));
    }
    e.endpoint = endpoint;
    e.updated_at = Timestamp::now().max(Timestamp(e.updated_at.0 + 1));
    if !store.update_endpoint_data(&e).await? {
        return Err(endpoint_not_found(tenant, identifier));
    }
    Ok(e)
}

pub async fn delete_endpoint(store: &Store, tenant: &Tenant, identifier: &str) -> Result<()> {
    if store
        .delete_endpoint(&tenant.environment_id, identifier)
        .await?
    {
        Ok(())
    } else {
        Err(endpoint_not_found(tenant, identifier))
    }
}

pub async fn list_endpoints(
    store: &Store,
    tenant: &Tenant,
    filter: &ChannelFilter,
    page: &PageRequest<ChannelOrder>,
) -> Result<Page<EndpointListing>> {
    store
        .list_endpoints(&tenant.environment_id, filter, page)
        .await
}
