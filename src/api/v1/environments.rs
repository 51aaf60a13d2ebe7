//! `/v1/environments`: the environments of the caller's organization with their public identifiers (the
//! Inbox's `applicationIdentifier`); creating one (any key of the organization), changing or deleting the
//! key's own one. API keys are never shown, but for the new environment's in the answer that created it.
//! `POST /v1/environments/me/end-sessions` (a Tidings extension) ends every Inbox session of the caller's
//! environment.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath};
use crate::api::v2::subscribers::SubscriberDeletedOut;
use crate::api::wire::Reply;
use crate::api::AppState;
use crate::domain::{EnvironmentId, OrganizationId, Tenant};
use crate::error::Error;
use crate::service::environments::{self as service, EnvironmentInput};
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
    /// `#rrggbb`, when it was given one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// Only in the answer of `POST /v1/environments`: the new environment's API key, shown this once.
    #[serde(rename = "apiKeys", skip_serializing_if = "Option::is_none")]
    pub api_keys: Option<Vec<ApiKeyOut>>,
}

/// An API key, in Novu's shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyOut {
    pub key: String,
    /// Tidings has no users: the environment whose API key created it.
    #[serde(rename = "_userId")]
    pub user_id: String,
}

impl From<EnvironmentRow> for EnvironmentOut {
    fn from(e: EnvironmentRow) -> Self {
        Self {
            id: e.id,
            name: e.name,
            organization_id: e.organization_id,
            identifier: e.identifier,
            color: e.color,
            api_keys: None,
        }
    }
}

/// Body of `POST /v1/environments`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentIn {
    /// 1 to 100 characters, unique in the organization; not Development or Production.
    pub name: String,
    /// `#rgb` or `#rrggbb`.
    pub color: Option<String>,
    /// Refused (422): Tidings' environments have no parent.
    #[schema(value_type = Option<String>)]
    pub parent_id: Option<Value>,
}

/// Body of `PUT /v1/environments/{environmentId}`: an absent field is unchanged.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentPut {
    pub name: Option<String>,
    /// The public identifier (the Inbox's `applicationIdentifier`): 1 to 64 letters, digits, `-` or `_`,
    /// unique. Inbox clients holding the old one can no longer open sessions.
    pub identifier: Option<String>,
    pub color: Option<String>,
    /// Refused (422): Tidings' environments have no parent.
    #[schema(value_type = Option<String>)]
    pub parent_id: Option<Value>,
    /// Refused (422) with a domain: Tidings has no inbound parse.
    #[schema(value_type = Option<Object>)]
    pub dns: Option<Value>,
    /// Refused (422) with a URL: Tidings runs no framework bridge.
    #[schema(value_type = Option<Object>)]
    pub bridge: Option<Value>,
}

/// What of `value` asks for something: not `null`, not `""`, not an object of only such values.
fn asks(value: &Option<Value>) -> bool {
    fn asks_for(v: &Value) -> bool {
        match v {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Object(m) => m.values().any(asks_for),
            _ => true,
        }
    }
    value.as_ref().is_some_and(asks_for)
}

/// The fields Tidings cannot honour that `fields` ask for.
fn refused(fields: [(&'static str, Option<Value>); 3]) -> Vec<(&'static str, Value)> {
    fields
        .into_iter()
        .filter(|(_, v)| asks(v))
        .map(|(f, v)| (f, v.unwrap_or_default()))
        .collect()
}

/// Creates an environment in the caller's organization with a new API key and public identifier; the
/// answer shows the key, this once.
#[utoipa::path(post, path = "/v1/environments", tag = "Environments", request_body = EnvironmentIn,
    responses((status = 201, body = EnvironmentOut), (status = 409, description = "Name taken"),
        (status = 422, description = "Invalid body")))]
pub async fn create_environment(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<EnvironmentIn>,
) -> ApiResult<Response> {
    let input = EnvironmentInput {
        name: Some(body.name),
        identifier: None,
        color: body.color,
        refused: refused([
            ("parentId", body.parent_id),
            ("dns", None),
            ("bridge", None),
        ]),
    };
    let (env, key) = service::create_for(&state.store, &tenant, &input).await?;
    let mut out = EnvironmentOut::from(env);
    out.api_keys = Some(vec![ApiKeyOut {
        key,
        user_id: tenant.environment_id.to_string(),
    }]);
    Ok(Reply::created(out).into_response())
}

/// Changes the caller's own environment: its name (not Development's or Production's), public identifier
/// or color.
#[utoipa::path(put, path = "/v1/environments/{environmentId}", tag = "Environments", request_body = EnvironmentPut,
    params(("environmentId" = String, Path, description = "The environment's _id")),
    responses((status = 200, body = EnvironmentOut), (status = 403, description = "Another environment than the key's"),
        (status = 404, description = "No such environment in the organization"),
        (status = 409, description = "Name or identifier taken"), (status = 422, description = "Invalid body")))]
pub async fn update_environment(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<String>,
    AppJson(body): AppJson<EnvironmentPut>,
) -> ApiResult<Response> {
    let input = EnvironmentInput {
        name: body.name,
        identifier: body.identifier,
        color: body.color,
        refused: refused([
            ("parentId", body.parent_id),
            ("dns", body.dns),
            ("bridge", body.bridge),
        ]),
    };
    let env = service::update(&state.store, &tenant, &EnvironmentId::from(id), &input).await?;
    Ok(Reply::ok(EnvironmentOut::from(env)).into_response())
}

/// Deletes the caller's own environment: its API keys, Inbox identifier and sessions are refused at once,
/// and its data is erased in the background. Development, Production and an organization's last
/// environment cannot be deleted.
#[utoipa::path(delete, path = "/v1/environments/{environmentId}", tag = "Environments",
    params(("environmentId" = String, Path, description = "The environment's _id")),
    responses((status = 200, body = SubscriberDeletedOut), (status = 400, description = "Protected or last environment"),
        (status = 403, description = "Another environment than the key's"),
        (status = 404, description = "No such environment in the organization")))]
pub async fn delete_environment(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<String>,
) -> ApiResult<Response> {
    let id = EnvironmentId::from(id);
    service::delete(&state.store, &tenant, &id).await?;
    // This process refuses the keys from the next request on (every process also hears it from the store:
    // `auth::forget_deleted_environments`), and its erasure loop starts on the environment's rows at once.
    state.keys.forget_environment(&id);
    state.wakeup.notify();
    Ok(Reply::ok(SubscriberDeletedOut {
        acknowledged: true,
        status: "deleted",
    })
    .into_response())
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
