//! `/v2/subscribers`: search, create, retrieve, patch, delete (spec §4.6, §4.7).

use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::pagination::{page_request, CursorPage};
use crate::api::wire::{IsoTime, Reply, WireName};
use crate::domain::subscriber::{ChannelCredentials, ChannelSettings, Subscriber};
use crate::domain::Tenant;
use crate::error::{Error, Validation};
use crate::service::subscribers::{self as service, SubscriberFields};
use crate::store::page::SortColumn;
use crate::store::subscribers::SubscriberSearch;

/// Subscriber (spec §2.4). Nullable fields are always present.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriberOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub avatar: Option<String>,
    pub locale: Option<String>,
    pub channels: Vec<ChannelSettingsOut>,
    /// Deprecated; always empty.
    pub topics: Vec<String>,
    pub is_online: Option<bool>,
    pub last_online_at: Option<IsoTime>,
    #[serde(rename = "__v")]
    pub version: i64,
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
    pub timezone: Option<String>,
    pub subscriber_id: String,
    #[serde(rename = "_organizationId")]
    pub organization_id: String,
    #[serde(rename = "_environmentId")]
    pub environment_id: String,
    pub deleted: bool,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

/// ChannelSettings.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelSettingsOut {
    pub provider_id: WireName,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub integration_identifier: Option<String>,
    pub credentials: ChannelCredentials,
    #[serde(rename = "_integrationId")]
    pub integration_id: String,
}

impl From<ChannelSettings> for ChannelSettingsOut {
    fn from(c: ChannelSettings) -> Self {
        Self {
            provider_id: WireName::from(c.provider_id),
            integration_identifier: c.integration_identifier,
            credentials: c.credentials,
            integration_id: c.integration_id,
        }
    }
}

impl From<Subscriber> for SubscriberOut {
    fn from(s: Subscriber) -> Self {
        Self {
            id: s.id,
            first_name: s.first_name,
            last_name: s.last_name,
            email: s.email,
            phone: s.phone,
            avatar: s.avatar,
            locale: s.locale,
            channels: s.channels.into_iter().map(Into::into).collect(),
            topics: Vec::new(),
            is_online: s.is_online,
            last_online_at: s.last_online_at.map(IsoTime),
            version: s.version,
            data: s.data,
            timezone: s.timezone,
            subscriber_id: s.subscriber_id,
            organization_id: s.organization_id,
            environment_id: s.environment_id,
            deleted: s.deleted,
            created_at: s.created_at.into(),
            updated_at: s.updated_at.into(),
        }
    }
}

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
pub(crate) fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Body of `POST /v2/subscribers` (`subscriberId` required) and `PATCH /v2/subscribers/{subscriberId}`
/// (`subscriberId` ignored): a missing field is unchanged, `null` clears it.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriberIn {
    /// Required on create: the id of the subscriber in your system.
    pub subscriber_id: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub first_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub last_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub email: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub phone: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub avatar: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub locale: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub timezone: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<Option<Value>>,
}

impl From<SubscriberIn> for SubscriberFields {
    fn from(p: SubscriberIn) -> Self {
        Self {
            first_name: p.first_name,
            last_name: p.last_name,
            email: p.email,
            phone: p.phone,
            avatar: p.avatar,
            locale: p.locale,
            timezone: p.timezone,
            data: p.data,
        }
    }
}

/// Body of `DELETE /v2/subscribers/{subscriberId}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriberDeletedOut {
    pub acknowledged: bool,
    pub status: &'static str,
}

/// Search subscribers: case-sensitive substrings of `email`, `phone`, `name`; exact `subscriberId`.
#[utoipa::path(get, path = "/v2/subscribers", tag = "Subscribers",
    params(
        ("email" = Option<String>, Query, description = "Substring of the email (case-sensitive)"),
        ("phone" = Option<String>, Query, description = "Substring of the phone number"),
        ("name" = Option<String>, Query, description = "Substring of firstName + \" \" + lastName"),
        ("subscriberId" = Option<String>, Query, description = "Exact subscriberId"),
        ("after" = Option<String>, Query, description = "Cursor: items after this _id"),
        ("before" = Option<String>, Query, description = "Cursor: items before this _id"),
        ("limit" = Option<i64>, Query, description = "1..100, default 10"),
        ("orderDirection" = Option<String>, Query, description = "ASC or DESC (default)"),
        ("orderBy" = Option<String>, Query, description = "_id (default), createdAt or updatedAt"),
        ("includeCursor" = Option<bool>, Query, description = "Include the cursor item"),
    ),
    responses((status = 200, body = CursorPage<SubscriberOut>)))]
pub async fn search_subscribers(
    axum::extract::State(state): axum::extract::State<crate::api::AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let page = page_request(
        &q,
        &mut v,
        &[
            ("_id", SortColumn::Id),
            ("createdAt", SortColumn::Int("created_at")),
            ("updatedAt", SortColumn::Int("updated_at")),
        ],
    )?;
    v.finish()?;
    let search = SubscriberSearch {
        email: q.string("email"),
        phone: q.string("phone"),
        name: q.string("name"),
        subscriber_id: q.string("subscriberId"),
    };
    let found = service::search(&state.store, &tenant, &search, &page).await?;
    Ok(Reply::page(CursorPage::from_page(found, SubscriberOut::from)).into_response())
}

/// Create a subscriber (an existing one is updated, or 409 with `failIfExists=true`).
#[utoipa::path(post, path = "/v2/subscribers", tag = "Subscribers", request_body = SubscriberIn,
    params(("failIfExists" = Option<bool>, Query, description = "409 instead of updating an existing subscriber")),
    responses((status = 201, body = SubscriberOut), (status = 409, description = "Exists and failIfExists=true"),
        (status = 422, description = "Invalid body")))]
pub async fn create_subscriber(
    axum::extract::State(state): axum::extract::State<crate::api::AppState>,
    tenant: Tenant,
    q: QueryMap,
    AppJson(body): AppJson<SubscriberIn>,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let fail_if_exists = q.bool(&mut v, "failIfExists").unwrap_or(false);
    v.finish()?;
    let Some(subscriber_id) = body.subscriber_id.clone() else {
        return Err(Error::invalid("subscriberId", "subscriberId is required", Value::Null).into());
    };
    let created = service::create(
        &state.store,
        &tenant,
        &subscriber_id,
        body.into(),
        fail_if_exists,
    )
    .await?;
    Ok(Reply::created(SubscriberOut::from(created.subscriber)).into_response())
}

/// Retrieve a subscriber by its subscriberId.
#[utoipa::path(get, path = "/v2/subscribers/{subscriberId}", tag = "Subscribers",
    params(("subscriberId" = String, Path)),
    responses((status = 200, body = SubscriberOut), (status = 404, description = "Unknown subscriber")))]
pub async fn get_subscriber(
    axum::extract::State(state): axum::extract::State<crate::api::AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
) -> ApiResult<Response> {
    let s = service::get(&state.store, &tenant, &subscriber_id).await?;
    Ok(Reply::ok(SubscriberOut::from(s)).into_response())
}

/// Update a subscriber's profile: absent fields are kept, `null` clears.
#[utoipa::path(patch, path = "/v2/subscribers/{subscriberId}", tag = "Subscribers", request_body = SubscriberIn,
    params(("subscriberId" = String, Path)),
    responses((status = 200, body = SubscriberOut), (status = 404, description = "Unknown subscriber"),
        (status = 422, description = "Invalid body")))]
pub async fn patch_subscriber(
    axum::extract::State(state): axum::extract::State<crate::api::AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
    AppJson(body): AppJson<SubscriberIn>,
) -> ApiResult<Response> {
    let s = service::patch(&state.store, &tenant, &subscriber_id, body.into()).await?;
    Ok(Reply::ok(SubscriberOut::from(s)).into_response())
}

/// Delete a subscriber (soft: it leaves lookups and search).
#[utoipa::path(delete, path = "/v2/subscribers/{subscriberId}", tag = "Subscribers",
    params(("subscriberId" = String, Path)),
    responses((status = 200, body = SubscriberDeletedOut), (status = 404, description = "Unknown subscriber")))]
pub async fn delete_subscriber(
    axum::extract::State(state): axum::extract::State<crate::api::AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
) -> ApiResult<Response> {
    service::delete(&state.store, &tenant, &subscriber_id).await?;
    Ok(Reply::ok(SubscriberDeletedOut {
        acknowledged: true,
        status: "deleted",
    })
    .into_response())
}
