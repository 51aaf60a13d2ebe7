//! `/v1/environments`: the environments of the caller's organization with their public identifiers (the
//! Inbox's `applicationIdentifier`). Their API keys are never shown.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::wire::Reply;
use crate::api::AppState;
use crate::domain::Tenant;
use crate::error::Error;
use crate::service::environments as service;
use crate::store::tenants::EnvironmentRow;

/// An environment, in Novu's shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvironmentOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub name: String,
    #[serde(rename = "_organizationId")]
    pub organization_id: String,
    /// Public: what `@novu/js` and the Inbox take as `applicationIdentifier`.
    pub identifier: String,
}

impl From<EnvironmentRow> for EnvironmentOut {
    fn from(e: EnvironmentRow) -> Self {
        Self {
            id: e.id,
            name: e.name,
            organization_id: e.organization_id,
            identifier: e.identifier,
        }
    }
}

/// The environments of the caller's organization, oldest first.
#[utoipa::path(get, path = "/v1/environments", tag = "Environments",
    responses((status = 200, body = Vec<EnvironmentOut>)))]
pub async fn list_environments(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Response> {
    let rows = service::of_organization(&state.store, &tenant).await?;
    let out: Vec<EnvironmentOut> = rows.into_iter().map(Into::into).collect();
    Ok(Reply::ok(out).into_response())
}

/// The caller's environment (the one its API key belongs to).
#[utoipa::path(get, path = "/v1/environments/me", tag = "Environments",
    responses((status = 200, body = EnvironmentOut)))]
pub async fn current_environment(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Response> {
    let env = service::of_organization(&state.store, &tenant)
        .await?
        .into_iter()
        .find(|e| e.id == tenant.environment_id.0)
        .ok_or_else(|| Error::NotFound("Environment not found".into()))?;
    Ok(Reply::ok(EnvironmentOut::from(env)).into_response())
}
