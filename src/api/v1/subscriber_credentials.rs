//! `/v1/subscribers/{subscriberId}/credentials`: replace (spec §4.5), append, and remove a provider's
//! channel credentials.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath};
use crate::api::v2::subscribers::SubscriberOut;
use crate::api::wire::{no_content, Reply};
use crate::api::AppState;
use crate::domain::subscriber::{ChannelCredentials, TokenMode};
use crate::domain::Tenant;
use crate::service::subscribers as service;

/// Body of `PUT`/`PATCH …/credentials`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsIn {
    /// One of the 21 chat and push providers (SubscriberProviderId).
    pub provider_id: String,
    pub integration_identifier: Option<String>,
    pub credentials: ChannelCredentials,
}

async fn update(
    state: AppState,
    tenant: Tenant,
    subscriber_id: String,
    body: CredentialsIn,
    mode: TokenMode,
) -> ApiResult<Response> {
    let s = service::update_credentials(
        &state.store,
        &tenant,
        &subscriber_id,
        &body.provider_id,
        body.integration_identifier.as_deref(),
        body.credentials,
        mode,
    )
    .await?;
    Ok(Reply::ok(SubscriberOut::from(s)).into_response())
}

/// Set a provider's credentials; `deviceTokens` replaces the stored list (`[]` clears it).
#[utoipa::path(put, path = "/v1/subscribers/{subscriberId}/credentials", tag = "Subscribers", request_body = CredentialsIn,
    params(("subscriberId" = String, Path)),
    responses((status = 200, body = SubscriberOut), (status = 400, description = "No active integration, or over 100 device tokens"),
        (status = 404, description = "Unknown subscriber"), (status = 422, description = "Invalid body")))]
pub async fn put_credentials(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    AppJson(body): AppJson<CredentialsIn>,
) -> ApiResult<Response> {
    update(state, tenant, subscriber_id, body, TokenMode::Replace).await
}

/// Add to a provider's credentials; `deviceTokens` are appended to the stored list.
#[utoipa::path(patch, path = "/v1/subscribers/{subscriberId}/credentials", tag = "Subscribers", request_body = CredentialsIn,
    params(("subscriberId" = String, Path)),
    responses((status = 200, body = SubscriberOut), (status = 400, description = "No active integration, or over 100 device tokens"),
        (status = 404, description = "Unknown subscriber"), (status = 422, description = "Invalid body")))]
pub async fn patch_credentials(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    AppJson(body): AppJson<CredentialsIn>,
) -> ApiResult<Response> {
    update(state, tenant, subscriber_id, body, TokenMode::Append).await
}

/// Remove every credential the subscriber holds for a provider.
#[utoipa::path(delete, path = "/v1/subscribers/{subscriberId}/credentials/{providerId}", tag = "Subscribers",
    params(("subscriberId" = String, Path), ("providerId" = String, Path)),
    responses((status = 204, description = "Removed"), (status = 404, description = "Unknown subscriber or no such credentials")))]
pub async fn delete_credentials(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((subscriber_id, provider_id)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    service::delete_credentials(&state.store, &tenant, &subscriber_id, &provider_id).await?;
    Ok(no_content())
}
