//! `/v1/subscribers`: bulk create (`POST /v1/subscribers/bulk`) and the online flag
//! (`PATCH /v1/subscribers/{subscriberId}/online-status`).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{parse_value, AppJson, AppPath};
use crate::api::v2::subscribers::{SubscriberIn, SubscriberOut};
use crate::api::wire::Reply;
use crate::api::AppState;
use crate::domain::Tenant;
use crate::service::subscribers::{self as service, BulkFailure};

/// Body of `POST /v1/subscribers/bulk`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct BulkSubscribersIn {
    /// At most 500 subscribers, each as `POST /v2/subscribers` takes one (`subscriberId` required). An item
    /// that is not valid is reported in `failed`; the others are written.
    #[schema(value_type = Vec<SubscriberIn>)]
    pub subscribers: Vec<Value>,
}

/// A subscriberId created or updated.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkSubscriberOut {
    pub subscriber_id: String,
}

/// An item that was not written, and why.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkFailedOut {
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriber_id: Option<String>,
}

/// Answer of `POST /v1/subscribers/bulk`: each list in the order of the items.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkSubscribersOut {
    pub updated: Vec<BulkSubscriberOut>,
    pub created: Vec<BulkSubscriberOut>,
    pub failed: Vec<BulkFailedOut>,
}

/// Body of `PATCH /v1/subscribers/{subscriberId}/online-status`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OnlineStatusIn {
    pub is_online: bool,
}

fn ids(ids: Vec<String>) -> Vec<BulkSubscriberOut> {
    ids.into_iter()
        .map(|subscriber_id| BulkSubscriberOut { subscriber_id })
        .collect()
}

/// Create or update up to 500 subscribers at once: an existing subscriberId is updated with the fields
/// given; an invalid item is listed in `failed` and does not stop the others.
#[utoipa::path(post, path = "/v1/subscribers/bulk", tag = "Subscribers", request_body = BulkSubscribersIn,
    responses((status = 201, body = BulkSubscribersOut), (status = 400, description = "More than 500 subscribers"),
        (status = 422, description = "Invalid body")))]
pub async fn create_bulk(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<BulkSubscribersIn>,
) -> ApiResult<Response> {
    let items = body.subscribers.into_iter().map(parse_value).collect();
    let out = service::create_bulk(&state.store, &tenant, items).await?;
    Ok(Reply::created(BulkSubscribersOut {
        updated: ids(out.updated),
        created: ids(out.created),
        failed: out
            .failed
            .into_iter()
            .map(
                |BulkFailure {
                     subscriber_id,
                     message,
                 }| BulkFailedOut {
                    message,
                    subscriber_id,
                },
            )
            .collect(),
    })
    .into_response())
}

/// Set whether a subscriber is online; going offline records `lastOnlineAt`.
#[utoipa::path(patch, path = "/v1/subscribers/{subscriberId}/online-status", tag = "Subscribers",
    request_body = OnlineStatusIn, params(("subscriberId" = String, Path)),
    responses((status = 200, body = SubscriberOut), (status = 404, description = "Unknown subscriber"),
        (status = 422, description = "Invalid body")))]
pub async fn update_online_status(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    AppJson(body): AppJson<OnlineStatusIn>,
) -> ApiResult<Response> {
    let s = service::set_online(&state.store, &tenant, &subscriber_id, body.is_online).await?;
    Ok(Reply::ok(SubscriberOut::from(s)).into_response())
}
