//! `/v2/contexts`: the contexts (`type:id` and its data) that triggers, channel connections and endpoints and
//! Inbox sessions name; created, listed, read, their data replaced and deleted.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::pagination::{page_request, CursorPage};
use crate::api::wire::{no_content, IsoTime, Reply};
use crate::api::AppState;
use crate::domain::context::Context;
use crate::domain::Tenant;
use crate::error::Validation;
use crate::service::contexts as service;
use crate::store::contexts::{ContextFilter, ContextOrder};

/// A context.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextOut {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    /// `{}` when it has none (a trigger named it without data).
    #[schema(value_type = Object)]
    pub data: Value,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

impl From<Context> for ContextOut {
    fn from(c: Context) -> Self {
        Self {
            kind: c.entry.kind,
            id: c.entry.id,
            data: c
                .entry
                .data
                .filter(Value::is_object)
                .unwrap_or_else(|| Value::Object(Map::new())),
            created_at: c.created_at.into(),
            updated_at: c.updated_at.into(),
        }
    }
}

/// Body of `POST /v2/contexts`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ContextIn {
    /// 1 to 100 characters, no `:`.
    #[serde(rename = "type")]
    pub kind: String,
    /// 1 to 100 characters, no `:`.
    pub id: String,
    /// An object of at most 64 KiB serialized (`{}` when absent).
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
}

/// Body of `PATCH /v2/contexts/{type}/{id}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ContextDataIn {
    /// Replaces the data: an object of at most 64 KiB serialized.
    #[schema(value_type = Object)]
    pub data: Value,
}

const ORDER_BY: &[(&str, ContextOrder)] = &[
    ("createdAt", ContextOrder::CreatedAt),
    ("updatedAt", ContextOrder::UpdatedAt),
];

/// List contexts.
#[utoipa::path(get, path = "/v2/contexts", tag = "Contexts",
    params(
        ("type" = Option<String>, Query, description = "Exact type"),
        ("id" = Option<String>, Query, description = "Exact id"),
        ("search" = Option<String>, Query, description = "Substring of `type:id` (case-insensitive), up to 201 characters"),
        ("after" = Option<String>, Query, description = "Cursor: items after this one"),
        ("before" = Option<String>, Query, description = "Cursor: items before this one"),
        ("limit" = Option<i64>, Query, description = "1..100, default 10"),
        ("orderDirection" = Option<String>, Query, description = "ASC or DESC (default)"),
        ("orderBy" = Option<String>, Query, description = "createdAt (default) or updatedAt"),
        ("includeCursor" = Option<bool>, Query, description = "Include the cursor item"),
    ),
    responses((status = 200, body = CursorPage<ContextOut>), (status = 422, description = "Invalid query")))]
pub async fn list_contexts(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let page = page_request(&q, &mut v, ORDER_BY)?;
    v.finish()?;
    let filter = ContextFilter {
        kind: q.string("type"),
        id: q.string("id"),
        search: q.string("search"),
    };
    let found = service::list(&state.store, &tenant, &filter, &page).await?;
    Ok(Reply::page(CursorPage::from_page(found, ContextOut::from)).into_response())
}

/// Create a context (409 when `type:id` exists).
#[utoipa::path(post, path = "/v2/contexts", tag = "Contexts", request_body = ContextIn,
    responses((status = 201, body = ContextOut), (status = 409, description = "The context exists"),
        (status = 422, description = "Invalid body")))]
pub async fn create_context(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<ContextIn>,
) -> ApiResult<Response> {
    let context = service::create(&state.store, &tenant, &body.kind, &body.id, body.data).await?;
    Ok(Reply::created(ContextOut::from(context)).into_response())
}

/// Retrieve a context.
#[utoipa::path(get, path = "/v2/contexts/{type}/{id}", tag = "Contexts",
    params(("type" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = ContextOut), (status = 404, description = "Unknown context")))]
pub async fn get_context(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((kind, id)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    let context = service::get(&state.store, &tenant, &kind, &id).await?;
    Ok(Reply::ok(ContextOut::from(context)).into_response())
}

/// Replace a context's data.
#[utoipa::path(patch, path = "/v2/contexts/{type}/{id}", tag = "Contexts", request_body = ContextDataIn,
    params(("type" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = ContextOut), (status = 404, description = "Unknown context"),
        (status = 422, description = "Invalid body")))]
pub async fn update_context(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((kind, id)): AppPath<(String, String)>,
    AppJson(body): AppJson<ContextDataIn>,
) -> ApiResult<Response> {
    let context = service::update(&state.store, &tenant, &kind, &id, body.data).await?;
    Ok(Reply::ok(ContextOut::from(context)).into_response())
}

/// Delete a context. Channel connections and endpoints that name it keep its key.
#[utoipa::path(delete, path = "/v2/contexts/{type}/{id}", tag = "Contexts",
    params(("type" = String, Path), ("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, description = "Unknown context")))]
pub async fn delete_context(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((kind, id)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    service::delete(&state.store, &tenant, &kind, &id).await?;
    Ok(no_content())
}
