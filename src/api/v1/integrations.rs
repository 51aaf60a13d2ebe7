//! `/v1/integrations` (spec §4.8): list, list active, create, update, delete, set primary.
//! Credentials are never returned to API-key callers.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath};
use crate::api::wire::{IsoTime, Reply, WireName};
use crate::api::AppState;
use crate::domain::integration::Integration;
use crate::domain::{
    Channel, EnvironmentId, IntegrationId, IntegrationKind, OrganizationId, Tenant,
};
use crate::service::integrations::{self as service, IntegrationUpdate, NewIntegration};

/// Integration (spec §2.5), without `credentials`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationOut {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(rename = "_environmentId")]
    #[schema(value_type = String)]
    pub environment_id: EnvironmentId,
    #[serde(rename = "_organizationId")]
    #[schema(value_type = String)]
    pub organization_id: OrganizationId,
    pub name: String,
    pub identifier: String,
    pub provider_id: WireName,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
    pub kind: IntegrationKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub configurations: Option<Value>,
    pub active: bool,
    pub deleted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<IsoTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_by: Option<String>,
    pub primary: bool,
    pub priority: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub conditions: Option<Value>,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
    #[serde(rename = "__v")]
    pub version: i64,
}

impl From<Integration> for IntegrationOut {
    fn from(i: Integration) -> Self {
        Self {
            id: i.id.into(),
            environment_id: i.environment_id,
            organization_id: i.organization_id,
            name: i.name,
            identifier: i.identifier,
            provider_id: WireName::from(&i.provider_id),
            channel: i.channel,
            kind: i.kind,
            configurations: i.configurations,
            active: i.active,
            deleted: i.deleted,
            deleted_at: i.deleted_at.map(IsoTime),
            deleted_by: i.deleted_by,
            primary: i.primary,
            priority: i.priority,
            conditions: i.conditions,
            created_at: i.created_at.into(),
            updated_at: i.updated_at.into(),
            version: i.version,
        }
    }
}

fn list_out(list: Vec<Integration>) -> Vec<IntegrationOut> {
    list.into_iter().map(Into::into).collect()
}

/// Body of `POST /v1/integrations`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationIn {
    /// A provider id of the spec's set, matching `channel`.
    pub provider_id: String,
    /// Required for delivery integrations; absent for agent ones.
    pub channel: Option<String>,
    /// `delivery` (default) or `agent`.
    pub kind: Option<String>,
    pub name: Option<String>,
    /// Generated from the name when omitted.
    pub identifier: Option<String>,
    /// CredentialsDto; encrypted at rest, never returned.
    #[schema(value_type = Option<Object>)]
    pub credentials: Option<Value>,
    /// Default false.
    pub active: Option<bool>,
    /// Credentials are not checked against the provider: `true` is refused with a 422 (`false` and null
    /// are accepted).
    pub check: Option<bool>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub conditions: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub configurations: Option<Value>,
}

/// `check: true` asks for a verification with the provider that Tidings does not make: refused, not
/// dropped.
fn refuse_check(check: Option<bool>) -> crate::error::Result<()> {
    let mut v = crate::error::Validation::new();
    if check == Some(true) {
        v.add(
            "check",
            "check is not supported by this server: credentials are not verified with the provider",
            true,
        );
    }
    v.finish()
}

/// Body of `PUT /v1/integrations/{integrationId}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationPut {
    pub name: Option<String>,
    pub identifier: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub credentials: Option<Value>,
    pub active: Option<bool>,
    /// As on create: `true` is refused with a 422.
    pub check: Option<bool>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub conditions: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub configurations: Option<Value>,
}

/// The environment's integrations (not deleted), oldest first.
#[utoipa::path(get, path = "/v1/integrations", tag = "Integrations",
    responses((status = 200, body = Vec<IntegrationOut>)))]
pub async fn list_integrations(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Response> {
    Ok(Reply::ok(list_out(service::list(&state.store, &tenant, false).await?)).into_response())
}

/// The environment's active integrations.
#[utoipa::path(get, path = "/v1/integrations/active", tag = "Integrations",
    responses((status = 200, body = Vec<IntegrationOut>)))]
pub async fn list_active_integrations(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Response> {
    Ok(Reply::ok(list_out(service::list(&state.store, &tenant, true).await?)).into_response())
}

/// Create an integration.
#[utoipa::path(post, path = "/v1/integrations", tag = "Integrations", request_body = IntegrationIn,
    responses((status = 201, body = IntegrationOut), (status = 400, description = "A second in-app integration"),
        (status = 409, description = "Identifier taken"), (status = 422, description = "Invalid body")))]
pub async fn create_integration(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<IntegrationIn>,
) -> ApiResult<Response> {
    refuse_check(body.check)?;
    let input = NewIntegration {
        provider_id: body.provider_id,
        channel: body.channel,
        kind: body.kind,
        name: body.name,
        identifier: body.identifier,
        credentials: body.credentials,
        active: body.active,
        conditions: body.conditions,
        configurations: body.configurations,
    };
    let created = service::create(&state.store, &tenant, input).await?;
    Ok(Reply::created(IntegrationOut::from(created)).into_response())
}

/// Update an integration; given fields replace stored ones.
#[utoipa::path(put, path = "/v1/integrations/{integrationId}", tag = "Integrations", request_body = IntegrationPut,
    params(("integrationId" = String, Path)),
    responses((status = 200, body = IntegrationOut), (status = 404, description = "Unknown integration"),
        (status = 409, description = "Identifier taken"), (status = 422, description = "Invalid body")))]
pub async fn update_integration(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<IntegrationId>,
    AppJson(body): AppJson<IntegrationPut>,
) -> ApiResult<Response> {
    refuse_check(body.check)?;
    let input = IntegrationUpdate {
        name: body.name,
        identifier: body.identifier,
        credentials: body.credentials,
        active: body.active,
        conditions: body.conditions,
        configurations: body.configurations,
    };
    let updated = service::update(&state.store, &tenant, &id, input).await?;
    Ok(Reply::ok(IntegrationOut::from(updated)).into_response())
}

/// Delete an integration (soft); answers the remaining integrations.
#[utoipa::path(delete, path = "/v1/integrations/{integrationId}", tag = "Integrations",
    params(("integrationId" = String, Path)),
    responses((status = 200, body = Vec<IntegrationOut>), (status = 404, description = "Unknown integration")))]
pub async fn delete_integration(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<IntegrationId>,
) -> ApiResult<Response> {
    service::delete(&state.store, &tenant, &id).await?;
    Ok(Reply::ok(list_out(service::list(&state.store, &tenant, false).await?)).into_response())
}

/// Make an integration the primary (and active) one of its channel.
#[utoipa::path(post, path = "/v1/integrations/{integrationId}/set-primary", tag = "Integrations",
    params(("integrationId" = String, Path)),
    responses((status = 200, body = IntegrationOut), (status = 400, description = "Channel without primaries"),
        (status = 404, description = "Unknown integration")))]
pub async fn set_primary_integration(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<IntegrationId>,
) -> ApiResult<Response> {
    let updated = service::set_primary(&state.store, &tenant, &id).await?;
    Ok(Reply::ok(IntegrationOut::from(updated)).into_response())
}
