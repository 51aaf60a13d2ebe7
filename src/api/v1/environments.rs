//! `/v1/environments`: the environments of the caller's organization with their public identifiers (the
//! Inbox's `applicationIdentifier`). Their API keys are never shown. `POST /v1/environments/me/end-sessions`
//! (a Tidings extension) ends every Inbox session of the caller's environment.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::wire::Reply;
use crate::api::AppState;
use crate::domain::{EnvironmentId, OrganizationId, Tenant};
use crate::error::Error;
use crate::service::environments as service;
use crate::store::tenants::EnvironmentRow;

/// An environment, in Novu's shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvironmentOut {
    #[serde(rename = "_id")]
    #[schema(value_type = String)]
    pub id: EnvironmentId,
    pub name: String,
    #[serde(rename = "_organizationId")]
    #[schema(value_type = String)]
    pub organization_id: OrganizationId,
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
        .find(|e| e.id == tenant.environment_id)
        .ok_or_else(|| Error::NotFound("Environment not found".into()))?;
    Ok(Reply::ok(EnvironmentOut::from(env)).into_response())
}

/// The caller's environment after its Inbox sessions were ended.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndedSessionsOut {
    #[schema(value_type = String)]
    pub environment_id: EnvironmentId,
    /// The environment's session epoch now: every token opened before it is refused.
    pub session_epoch: i64,
}

/// Ends every Inbox session of the caller's environment (a Tidings extension): each session token opened
/// before is refused (401) and each socket of the environment is closed, on every instance. Browsers must
/// open new sessions (`POST /v1/inbox/session`).
#[utoipa::path(post, path = "/v1/environments/me/end-sessions", tag = "Environments",
    responses((status = 201, body = EndedSessionsOut)))]
pub async fn end_sessions(State(state): State<AppState>, tenant: Tenant) -> ApiResult<Response> {
    let epoch =
        crate::service::inbox_session::end_sessions(&state.store, &tenant.environment_id).await?;
    Ok(Reply::created(EndedSessionsOut {
        environment_id: tenant.environment_id,
        session_epoch: epoch,
    })
    .into_response())
}
