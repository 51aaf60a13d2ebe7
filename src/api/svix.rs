//! `/api/v1/app/{app_id}/endpoint…`: the part of Svix's API that its official clients (`svix` on npm and PyPI)
//! call to manage webhook endpoints, so that `new Svix(apiKey, {serverUrl})` manages a Tidings environment's
//! endpoints (issue 39). The app is the API key's environment, named by its `applicationIdentifier` (or its id,
//! or Novu's `o-{organizationId}-e-{environmentId}`); the key comes as `Authorization: Bearer <key>`, as the
//! clients send it. Answers and errors have Svix's shapes: bare JSON bodies, `{code, detail}` errors and
//! `{detail: [{loc, msg, type}]}` for invalid input.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;
use super::extract::{parse_json, AppPath, QueryMap};
use super::wire::{json_response, no_content, IsoTime};
use super::AppState;
use crate::domain::webhook::{EndpointInput, WebhookEndpoint};
use crate::domain::Tenant;
use crate::error::{Error, Validation};
use crate::service::webhooks::{self as service, ChangeKind, Changed};
use crate::store::page::{Cursor, PageRequest, SortColumn};

/// An error in Svix's shape.
pub struct SvixError(pub Error);

impl From<Error> for SvixError {
    fn from(e: Error) -> Self {
        Self(e)
    }
}

/// Svix's error body (`HttpErrorOut`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SvixErrorOut {
    /// `not_found`, `conflict`, `bad_request`, `forbidden` or `authentication_failed`.
    pub code: String,
    pub detail: String,
}

/// Svix's body for invalid input (`HTTPValidationError`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SvixValidationOut {
    pub detail: Vec<SvixValidationItem>,
}

/// One invalid field (`ValidationError`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SvixValidationItem {
    /// Where: `["body", "<field>"]`.
    pub loc: Vec<String>,
    pub msg: String,
    #[serde(rename = "type")]
    pub kind: String,
}

impl IntoResponse for SvixError {
    fn into_response(self) -> Response {
        let (status, code, detail) = match self.0 {
            Error::Validation(v) => {
                let detail =
                    v.0.into_iter()
                        .flat_map(|e| {
                            let field = e.field;
                            e.messages.into_iter().map(move |msg| SvixValidationItem {
                                loc: vec!["body".into(), field.clone()],
                                msg,
                                kind: "value_error".into(),
                            })
                        })
                        .collect();
                return reply(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &SvixValidationOut { detail },
                )
                .unwrap_or_else(IntoResponse::into_response);
            }
            Error::BadRequest { message, .. } => (StatusCode::BAD_REQUEST, "bad_request", message),
            Error::Unauthorized(m) => (StatusCode::UNAUTHORIZED, "authentication_failed", m),
            Error::Forbidden(m) => (StatusCode::FORBIDDEN, "forbidden", m),
            Error::NotFound(m) => (StatusCode::NOT_FOUND, "not_found", m),
            Error::Conflict(m) => (StatusCode::CONFLICT, "conflict", m),
            e @ Error::Duplicate => (StatusCode::CONFLICT, "conflict", e.to_string()),
            e @ Error::Internal(_) => return ApiError(e).into_response(),
        };
        let body = SvixErrorOut {
            code: code.into(),
            detail,
        };
        reply(status, &body).unwrap_or_else(IntoResponse::into_response)
    }
}

/// An extractor of the API's (`AppPath`, `QueryMap`) whose refusal takes Svix's shape.
pub struct Svix<E>(pub E);

impl<S: Send + Sync, E: FromRequestParts<S, Rejection = ApiError>> FromRequestParts<S> for Svix<E> {
    type Rejection = SvixError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        E::from_request_parts(parts, state)
            .await
            .map(Svix)
            .map_err(|ApiError(e)| SvixError(e))
    }
}

pub(super) type SvixResult = Result<Response, SvixError>;

pub(super) fn reply<T: Serialize>(status: StatusCode, body: &T) -> SvixResult {
    let bytes = serde_json::to_vec(body).map_err(|e| SvixError(e.into()))?;
    Ok(json_response(status, bytes))
}

/// Checks that `app_id` names the key's environment ([`service::check_app`]).
pub(super) async fn check_app(
    state: &AppState,
    tenant: &Tenant,
    app_id: &str,
) -> Result<(), SvixError> {
    Ok(service::check_app(&state.store, tenant, app_id).await?)
}

/// An endpoint as Svix's clients read it (`EndpointOut`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointOut {
    /// `ep_…`.
    pub id: String,
    pub metadata: BTreeMap<String, String>,
    pub url: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle_rate: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    pub disabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<Vec<String>>,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

impl From<WebhookEndpoint> for EndpointOut {
    fn from(e: WebhookEndpoint) -> Self {
        Self {
            id: e.id,
            metadata: e.metadata,
            url: e.url,
            description: e.description,
            throttle_rate: e.throttle_rate,
            uid: e.uid,
            disabled: e.disabled,
            event_types: e.event_types,
            channels: e.channels,
            created_at: e.created_at.into(),
            updated_at: e.updated_at.into(),
        }
    }
}

/// A page of endpoints (`ListResponseEndpointOut`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointListOut {
    pub data: Vec<EndpointOut>,
    /// Pass as `iterator` for the next page.
    pub iterator: Option<String>,
    /// Pass as `iterator` for the previous page.
    pub prev_iterator: Option<String>,
    pub done: bool,
}

/// The endpoint's current signing secret (`EndpointSecretOut`).
#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointSecretOut {
    /// `whsec_` + base64.
    pub key: String,
}

/// Body of `POST …/secret/rotate` (`EndpointSecretRotateIn`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSecretRotateIn {
    /// The new secret; a new random one when absent.
    pub key: Option<String>,
    /// How long the old secret keeps signing beside the new one: 0 to 86400 seconds, 86400 when absent.
    pub grace_period_seconds: Option<i64>,
}

/// Most endpoints a page holds, and how many when not said.
const MAX_LIMIT: i64 = 250;
const DEFAULT_LIMIT: i64 = 50;

/// The page `limit`, `iterator` and `order` ask for. An iterator is an endpoint id; `-` before it asks for
/// the page before it (what `prevIterator` gives).
pub(super) fn page_of(q: &QueryMap) -> Result<PageRequest, Error> {
    let mut v = Validation::new();
    let limit = q
        .int(&mut v, "limit", 1, MAX_LIMIT)
        .unwrap_or(DEFAULT_LIMIT);
    let order = q.one_of(&mut v, "order", &["ascending", "descending"]);
    v.finish()?;
    let cursor = q.string("iterator").map(|it| match it.strip_prefix('-') {
        Some(before) => Cursor::Before(before.to_owned()),
        None => Cursor::After(it),
    });
    Ok(PageRequest {
        cursor,
        include_cursor: false,
        limit,
        sort: SortColumn::Id,
        descending: order.as_deref() != Some("ascending"),
    })
}

/// List an app's endpoints.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint", tag = "Webhooks", security(("SvixToken" = [])),
    params(("app_id" = String, Path, description = "The environment's applicationIdentifier"),
        ("limit" = Option<i64>, Query, description = "1..250, default 50"),
        ("iterator" = Option<String>, Query, description = "The `iterator` or `prevIterator` of a page"),
        ("order" = Option<String>, Query, description = "ascending or descending (default)")),
    responses((status = 200, body = EndpointListOut), (status = 404, body = SvixErrorOut, description = "Unknown app"),
        (status = 422, body = SvixValidationOut, description = "Invalid query")))]
pub async fn list_endpoints(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath(app_id)): Svix<AppPath<String>>,
    Svix(q): Svix<QueryMap>,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let page = page_of(&q)?;
    let found = service::list(&state.store, &tenant, &page).await?;
    let done = found.next.is_none();
    reply(
        StatusCode::OK,
        &EndpointListOut {
            iterator: found.next,
            prev_iterator: found.previous.map(|p| format!("-{p}")),
            done,
            data: found.data.into_iter().map(EndpointOut::from).collect(),
        },
    )
}

/// Create an endpoint.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint", tag = "Webhooks", security(("SvixToken" = [])), request_body = EndpointInput,
    params(("app_id" = String, Path, description = "The environment's applicationIdentifier")),
    responses((status = 201, body = EndpointOut), (status = 400, body = SvixErrorOut, description = "The environment has 100 endpoints"),
        (status = 404, body = SvixErrorOut, description = "Unknown app"), (status = 409, body = SvixErrorOut, description = "The uid is taken"),
        (status = 422, body = SvixValidationOut, description = "Invalid body")))]
pub async fn create_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath(app_id)): Svix<AppPath<String>>,
    body: Bytes,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let body: EndpointInput = parse_json(&body)?;
    let e = service::create(&state.store, &tenant, body).await?;
    reply(StatusCode::CREATED, &EndpointOut::from(e))
}

/// Retrieve an endpoint, by id or uid.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Webhooks", security(("SvixToken" = [])),
    params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid")),
    responses((status = 200, body = EndpointOut), (status = 404, body = SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 422, body = SvixValidationOut, description = "Invalid path")))]
pub async fn get_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let e = service::get(&state.store, &tenant, &endpoint).await?;
    reply(StatusCode::OK, &EndpointOut::from(e))
}

/// Replace an endpoint's fields (those left out take their defaults); an unknown one is created, with the
/// path's key as its uid (201).
#[utoipa::path(put, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Webhooks", security(("SvixToken" = [])),
    request_body = EndpointInput, params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid")),
    responses((status = 200, body = EndpointOut), (status = 201, body = EndpointOut),
        (status = 400, body = SvixErrorOut, description = "Creating it: the environment has 100 endpoints"),
        (status = 404, body = SvixErrorOut, description = "Unknown app or endpoint id"), (status = 409, body = SvixErrorOut, description = "The uid is taken"),
        (status = 422, body = SvixValidationOut, description = "Invalid body")))]
pub async fn replace_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
    body: Bytes,
) -> SvixResult {
    change(state, tenant, app_id, endpoint, body, ChangeKind::Replace).await
}

/// Change the fields given of an endpoint (`null` clears a nullable one).
#[utoipa::path(patch, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Webhooks", security(("SvixToken" = [])),
    request_body = EndpointInput, params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid")),
    responses((status = 200, body = EndpointOut), (status = 404, body = SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 409, body = SvixErrorOut, description = "The uid is taken"), (status = 422, body = SvixValidationOut, description = "Invalid body")))]
pub async fn patch_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
    body: Bytes,
) -> SvixResult {
    change(state, tenant, app_id, endpoint, body, ChangeKind::Patch).await
}

async fn change(
    state: AppState,
    tenant: Tenant,
    app_id: String,
    endpoint: String,
    body: Bytes,
    kind: ChangeKind,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let body: EndpointInput = parse_json(&body)?;
    match service::change(&state.store, &tenant, &endpoint, body, kind).await? {
        Changed::Updated(e) => reply(StatusCode::OK, &EndpointOut::from(e)),
        Changed::Created(e) => reply(StatusCode::CREATED, &EndpointOut::from(e)),
    }
}

/// Delete an endpoint.
#[utoipa::path(delete, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Webhooks", security(("SvixToken" = [])),
    params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid")),
    responses((status = 204, description = "Deleted"), (status = 404, body = SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 422, body = SvixValidationOut, description = "Invalid path")))]
pub async fn delete_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    service::delete(&state.store, &tenant, &endpoint).await?;
    Ok(no_content())
}

/// The endpoint's current signing secret.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret", tag = "Webhooks", security(("SvixToken" = [])),
    params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid")),
    responses((status = 200, body = EndpointSecretOut), (status = 404, body = SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 422, body = SvixValidationOut, description = "Invalid path")))]
pub async fn get_endpoint_secret(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let e = service::get(&state.store, &tenant, &endpoint).await?;
    reply(StatusCode::OK, &EndpointSecretOut { key: e.secrets.key })
}

/// Give the endpoint a new signing secret; the old one keeps signing beside it for the grace period. Answers
/// the new secret, as the Python client (2.x) reads it; the JavaScript client ignores the body.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret/rotate", tag = "Webhooks", security(("SvixToken" = [])),
    request_body = EndpointSecretRotateIn,
    params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid")),
    responses((status = 200, body = EndpointSecretOut), (status = 404, body = SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 422, body = SvixValidationOut, description = "Invalid body")))]
pub async fn rotate_endpoint_secret(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
    body: Bytes,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let body: EndpointSecretRotateIn = parse_json(&body)?;
    let key = service::rotate_secret(
        &state.store,
        &tenant,
        &endpoint,
        body.key,
        body.grace_period_seconds,
    )
    .await?;
    reply(StatusCode::OK, &EndpointSecretOut { key })
}
