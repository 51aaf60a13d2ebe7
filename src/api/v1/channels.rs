//! `/v1/channel-connections` (spec §4.4) and `/v1/channel-endpoints` (§4.2, §4.3).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::pagination::{page_request, CursorPage};
use crate::api::wire::{no_content, raw_reply, IsoTime, JsonObject, Reply, Shape, WireName};
use crate::api::AppState;
use crate::domain::channel::ProviderId;
use crate::domain::context::context_set;
use crate::domain::endpoint::{
    ChannelConnection, ChannelEndpoint, ConnectionMode, EndpointListing,
};
use crate::domain::{Channel, Tenant};
use crate::error::{Result, Validation};
use crate::service::channels::{self as service, NewConnection, NewEndpoint};
use crate::store::channels::{ChannelFilter, ChannelOrder};
use crate::store::page::{Page, PageRequest};

const ORDER_BY: &[(&str, ChannelOrder)] = &[
    ("createdAt", ChannelOrder::CreatedAt),
    ("updatedAt", ChannelOrder::UpdatedAt),
];

/// Reads the list filters shared by endpoints and connections, and the page parameters.
fn list_query(
    q: &QueryMap,
    connections: bool,
) -> Result<(ChannelFilter, PageRequest<ChannelOrder>)> {
    let mut v = Validation::new();
    let page = page_request(q, &mut v, ORDER_BY)?;
    let channel = q.string("channel").and_then(|c| {
        Channel::parse(&c).or_else(|| {
            v.add(
                "channel",
                "channel must be one of in_app, email, sms, chat, push",
                c,
            );
            None
        })
    });
    let provider_id = q
        .string("providerId")
        .and_then(|p| match ProviderId::parse(&p) {
            Some(id) => Some(id.as_str().to_owned()),
            None => {
                v.add(
                    "providerId",
                    "providerId must be one of the supported provider IDs",
                    p,
                );
                None
            }
        });
    let context_set = q.context_keys(&mut v).as_deref().map(context_set);
    let connection_mode = if connections {
        q.string("connectionMode").and_then(|m| {
            ConnectionMode::parse(&m).or_else(|| {
                v.add(
                    "connectionMode",
                    "connectionMode must be subscriber or shared",
                    m,
                );
                None
            })
        })
    } else {
        None
    };
    v.finish()?;
    let filter = ChannelFilter {
        subscriber_id: q.string("subscriberId"),
        context_set,
        channel,
        provider_id,
        integration_identifier: q.string("integrationIdentifier"),
        connection_identifier: if connections {
            None
        } else {
            q.string("connectionIdentifier")
        },
        connection_mode,
    };
    Ok((filter, page))
}

/// ChannelConnection (spec §2.3).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelConnectionOut {
    pub identifier: String,
    pub channel: Option<Channel>,
    pub provider_id: Option<WireName>,
    pub integration_identifier: Option<String>,
    pub subscriber_id: Option<String>,
    pub connection_mode: &'static str,
    pub context_keys: Vec<String>,
    #[schema(value_type = Object)]
    pub workspace: Value,
    #[schema(value_type = Object)]
    pub auth: Value,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

impl From<ChannelConnection> for ChannelConnectionOut {
    fn from(c: ChannelConnection) -> Self {
        Self {
            identifier: c.identifier,
            channel: Some(c.channel),
            provider_id: Some(WireName::from(&c.provider_id)),
            integration_identifier: Some(c.integration_identifier),
            subscriber_id: c.subscriber_id,
            connection_mode: c.mode.as_str(),
            context_keys: c.context_keys,
            workspace: c.workspace,
            auth: json!({ "accessToken": c.access_token }),
            created_at: c.created_at.into(),
            updated_at: c.updated_at.into(),
        }
    }
}

/// Body of `POST /v1/channel-connections`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelConnectionIn {
    /// Generated (`chconn_…`) when omitted.
    pub identifier: Option<String>,
    pub subscriber_id: Option<String>,
    /// Map of context type → id string or `{id, data?}`; at most 5 entries.
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    /// `subscriber` (default) or `shared`.
    pub connection_mode: Option<String>,
    pub integration_identifier: String,
    /// `{id, name?}`.
    #[schema(value_type = Object)]
    pub workspace: Value,
    /// `{accessToken}`; encrypted at rest.
    #[schema(value_type = Object)]
    pub auth: Value,
}

/// Body of `PATCH /v1/channel-connections/{identifier}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelConnectionPatch {
    #[schema(value_type = Option<Object>)]
    pub workspace: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub auth: Option<Value>,
}

/// Create a channel connection: one per resource (subscriber, or shared context set) and integration.
#[utoipa::path(post, path = "/v1/channel-connections", tag = "Channel connections", request_body = ChannelConnectionIn,
    responses((status = 201, body = ChannelConnectionOut), (status = 400, description = "Mode without its subscriber or context"),
        (status = 404, description = "Unknown integration or subscriber"), (status = 409, description = "Exists for this resource and integration, or identifier taken"),
        (status = 422, description = "Invalid body")))]
pub async fn create_channel_connection(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<ChannelConnectionIn>,
) -> ApiResult<Response> {
    let input = NewConnection {
        identifier: body.identifier,
        subscriber_id: body.subscriber_id,
        context: body.context,
        connection_mode: body.connection_mode,
        integration_identifier: body.integration_identifier,
        workspace: body.workspace,
        auth: body.auth,
    };
    let created = service::create_connection(&state.store, &tenant, input).await?;
    Ok(Reply::created(ChannelConnectionOut::from(created)).into_response())
}

/// List channel connections (cursor pages; filters combine with AND).
#[utoipa::path(get, path = "/v1/channel-connections", tag = "Channel connections",
    params(
        ("subscriberId" = Option<String>, Query), ("contextKeys" = Option<Vec<String>>, Query, description = "Exact set, type:id; repeat the key"),
        ("channel" = Option<String>, Query), ("providerId" = Option<String>, Query), ("integrationIdentifier" = Option<String>, Query),
        ("connectionMode" = Option<String>, Query), ("after" = Option<String>, Query), ("before" = Option<String>, Query),
        ("limit" = Option<i64>, Query, description = "1..100, default 10"), ("orderBy" = Option<String>, Query, description = "createdAt (default) or updatedAt"),
        ("orderDirection" = Option<String>, Query), ("includeCursor" = Option<bool>, Query),
    ),
    responses((status = 200, body = CursorPage<ChannelConnectionOut>)))]
pub async fn list_channel_connections(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let (filter, page) = list_query(&q, true)?;
    let found = service::list_connections(&state.store, &tenant, &filter, &page).await?;
    Ok(Reply::page(CursorPage::from_page(found, ChannelConnectionOut::from)).into_response())
}

/// Retrieve a channel connection.
#[utoipa::path(get, path = "/v1/channel-connections/{identifier}", tag = "Channel connections",
    params(("identifier" = String, Path)),
    responses((status = 200, body = ChannelConnectionOut), (status = 404, description = "Unknown connection")))]
pub async fn get_channel_connection(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(identifier): AppPath<String>,
) -> ApiResult<Response> {
    let c = service::get_connection(&state.store, &tenant, &identifier).await?;
    Ok(Reply::ok(ChannelConnectionOut::from(c)).into_response())
}

/// Rotate a connection's access token and/or rename its workspace.
#[utoipa::path(patch, path = "/v1/channel-connections/{identifier}", tag = "Channel connections", request_body = ChannelConnectionPatch,
    params(("identifier" = String, Path)),
    responses((status = 200, body = ChannelConnectionOut), (status = 404, description = "Unknown connection"), (status = 422, description = "Invalid body")))]
pub async fn patch_channel_connection(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(identifier): AppPath<String>,
    AppJson(body): AppJson<ChannelConnectionPatch>,
) -> ApiResult<Response> {
    let c = service::update_connection(
        &state.store,
        &tenant,
        &identifier,
        body.workspace,
        body.auth,
    )
    .await?;
    Ok(Reply::ok(ChannelConnectionOut::from(c)).into_response())
}

/// Delete a channel connection; endpoints that used it stay, with `connectionIdentifier` null.
#[utoipa::path(delete, path = "/v1/channel-connections/{identifier}", tag = "Channel connections",
    params(("identifier" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, description = "Unknown connection")))]
pub async fn delete_channel_connection(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(identifier): AppPath<String>,
) -> ApiResult<Response> {
    service::delete_connection(&state.store, &tenant, &identifier).await?;
    Ok(no_content())
}

/// ChannelEndpoint (spec §2.2).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelEndpointOut {
    pub identifier: String,
    pub channel: Option<Channel>,
    pub provider_id: Option<WireName>,
    pub integration_identifier: Option<String>,
    pub connection_identifier: Option<String>,
    pub subscriber_id: Option<String>,
    /// Raw JSON: a list page writes the stored text as it is.
    #[schema(value_type = Vec<String>)]
    pub context_keys: Box<RawValue>,
    #[serde(rename = "type")]
    pub endpoint_type: &'static str,
    #[schema(value_type = Object)]
    pub endpoint: Box<RawValue>,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
}

/// `value` as raw JSON text (serializing a JSON value cannot fail).
fn raw<T: Serialize>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("a JSON value serializes")
}

impl From<ChannelEndpoint> for ChannelEndpointOut {
    fn from(e: ChannelEndpoint) -> Self {
        Self {
            identifier: e.identifier,
            channel: Some(e.channel),
            provider_id: Some(WireName::from(&e.provider_id)),
            integration_identifier: Some(e.integration_identifier),
            connection_identifier: e.connection_identifier,
            subscriber_id: e.subscriber_id,
            context_keys: raw(&e.context_keys),
            endpoint_type: e.endpoint_type.as_str(),
            endpoint: raw(&e.endpoint),
            created_at: e.created_at.into(),
            updated_at: e.updated_at.into(),
        }
    }
}

/// A list page of endpoints as JSON: what serializing `CursorPage<ChannelEndpointOut>` gives (a test pins
/// the two together), written from the stored text of each row without parsing its JSON columns or
/// interning its names again.
fn endpoint_page_json(page: &Page<EndpointListing>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + 400 * page.data.len());
    let mut obj = JsonObject::open(&mut out);
    let data = obj.key("data");
    data.push(b'[');
    for (i, e) in page.data.iter().enumerate() {
        if i > 0 {
            data.push(b',');
        }
        let mut item = JsonObject::open(data);
        item.str("identifier", &e.identifier)
            .str("channel", &e.channel)
            .name("providerId", &e.provider_id)
            .str("integrationIdentifier", &e.integration_identifier)
            .opt_str("connectionIdentifier", e.connection_identifier.as_deref())
            .opt_str("subscriberId", e.subscriber_id.as_deref())
            .raw("contextKeys", &e.context_keys)
            .str("type", &e.endpoint_type)
            .raw("endpoint", &e.endpoint)
            .time("createdAt", e.created_at)
            .time("updatedAt", e.updated_at);
        item.close();
    }
    obj.out().push(b']');
    obj.opt_str("next", page.next.as_deref())
        .opt_str("previous", page.previous.as_deref())
        .int("totalCount", page.total_count)
        .bool("totalCountCapped", page.total_count_capped);
    obj.close();
    out
}

/// Body of `POST /v1/channel-endpoints`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelEndpointIn {
    /// Generated (`chendp_…`) when omitted.
    pub identifier: Option<String>,
    /// slack_channel, slack_user, webhook, phone, ms_teams_channel, ms_teams_user, telegram_chat.
    #[serde(rename = "type")]
    pub endpoint_type: String,
    #[schema(value_type = Object)]
    pub endpoint: Value,
    pub integration_identifier: String,
    pub subscriber_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    pub connection_identifier: Option<String>,
}

/// Body of `PATCH /v1/channel-endpoints/{identifier}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChannelEndpointPatch {
    /// Must match the existing endpoint's type exactly.
    #[schema(value_type = Object)]
    pub endpoint: Value,
}

/// Create a channel endpoint.
#[utoipa::path(post, path = "/v1/channel-endpoints", tag = "Channel endpoints", request_body = ChannelEndpointIn,
    responses((status = 201, body = ChannelEndpointOut), (status = 400, description = "Type unsuited to the integration, or no owner"),
        (status = 404, description = "Unknown integration, subscriber or connection"), (status = 409, description = "Identifier taken"),
        (status = 422, description = "Invalid body")))]
pub async fn create_channel_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    AppJson(body): AppJson<ChannelEndpointIn>,
) -> ApiResult<Response> {
    let input = NewEndpoint {
        identifier: body.identifier,
        endpoint_type: body.endpoint_type,
        endpoint: body.endpoint,
        integration_identifier: body.integration_identifier,
        subscriber_id: body.subscriber_id,
        context: body.context,
        connection_identifier: body.connection_identifier,
    };
    let created = service::create_endpoint(&state.store, &tenant, input).await?;
    Ok(Reply::created(ChannelEndpointOut::from(created)).into_response())
}

/// List channel endpoints (cursor pages; filters combine with AND).
#[utoipa::path(get, path = "/v1/channel-endpoints", tag = "Channel endpoints",
    params(
        ("subscriberId" = Option<String>, Query), ("contextKeys" = Option<Vec<String>>, Query, description = "Exact set, type:id; repeat the key"),
        ("channel" = Option<String>, Query), ("providerId" = Option<String>, Query), ("integrationIdentifier" = Option<String>, Query),
        ("connectionIdentifier" = Option<String>, Query), ("after" = Option<String>, Query), ("before" = Option<String>, Query),
        ("limit" = Option<i64>, Query, description = "1..100, default 10"), ("orderBy" = Option<String>, Query, description = "createdAt (default) or updatedAt"),
        ("orderDirection" = Option<String>, Query), ("includeCursor" = Option<bool>, Query),
    ),
    responses((status = 200, body = CursorPage<ChannelEndpointOut>)))]
pub async fn list_channel_endpoints(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let (filter, page) = list_query(&q, false)?;
    let found = service::list_endpoints(&state.store, &tenant, &filter, &page).await?;
    Ok(raw_reply(
        StatusCode::OK,
        Shape::Page,
        endpoint_page_json(&found),
    ))
}

/// Retrieve a channel endpoint.
#[utoipa::path(get, path = "/v1/channel-endpoints/{identifier}", tag = "Channel endpoints",
    params(("identifier" = String, Path)),
    responses((status = 200, body = ChannelEndpointOut), (status = 404, description = "Unknown endpoint")))]
pub async fn get_channel_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(identifier): AppPath<String>,
) -> ApiResult<Response> {
    let e = service::get_endpoint(&state.store, &tenant, &identifier).await?;
    Ok(Reply::ok(ChannelEndpointOut::from(e)).into_response())
}

/// Replace an endpoint's data (same type).
#[utoipa::path(patch, path = "/v1/channel-endpoints/{identifier}", tag = "Channel endpoints", request_body = ChannelEndpointPatch,
    params(("identifier" = String, Path)),
    responses((status = 200, body = ChannelEndpointOut), (status = 400, description = "Does not match the endpoint's type"),
        (status = 404, description = "Unknown endpoint"), (status = 422, description = "No endpoint object")))]
pub async fn patch_channel_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(identifier): AppPath<String>,
    AppJson(body): AppJson<ChannelEndpointPatch>,
) -> ApiResult<Response> {
    let e = service::update_endpoint(&state.store, &tenant, &identifier, body.endpoint).await?;
    Ok(Reply::ok(ChannelEndpointOut::from(e)).into_response())
}

/// Delete a channel endpoint.
#[utoipa::path(delete, path = "/v1/channel-endpoints/{identifier}", tag = "Channel endpoints",
    params(("identifier" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, description = "Unknown endpoint")))]
pub async fn delete_channel_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(identifier): AppPath<String>,
) -> ApiResult<Response> {
    service::delete_endpoint(&state.store, &tenant, &identifier).await?;
    Ok(no_content())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::wire::with_profile;
    use crate::config::WireProfile;
    use crate::domain::Timestamp;

    fn listing(n: i64, connection: Option<&str>, subscriber: Option<&str>) -> EndpointListing {
        EndpointListing {
            id: format!("id{n}"),
            identifier: format!("chendp_\"{n}\""),
            endpoint_type: "slack_channel".into(),
            endpoint: r#"{"channelId":"C\u00e9 1"}"#.into(),
            integration_identifier: "slack-main".into(),
            provider_id: if n == 1 {
                "svc-slack".into()
            } else {
                "slack".into()
            },
            channel: "chat".into(),
            connection_identifier: connection.map(Into::into),
            subscriber_id: subscriber.map(Into::into),
            context_keys: r#"["tenant:t1","team:é"]"#.into(),
            created_at: Timestamp(1_795_600_000_000 + n),
            updated_at: Timestamp(1_795_600_000_500 + n),
        }
    }

    /// The same item through the schema type and serde.
    fn out(e: &EndpointListing) -> ChannelEndpointOut {
        let raw = |t: &str| RawValue::from_string(t.to_owned()).unwrap();
        ChannelEndpointOut {
            identifier: e.identifier.clone(),
            channel: Some(Channel::parse(&e.channel).unwrap()),
            provider_id: Some(WireName::from(&ProviderId::from_stored(&e.provider_id))),
            integration_identifier: Some(e.integration_identifier.clone()),
            connection_identifier: e.connection_identifier.clone(),
            subscriber_id: e.subscriber_id.clone(),
            context_keys: raw(&e.context_keys),
            endpoint_type: crate::domain::endpoint::EndpointType::parse(&e.endpoint_type)
                .unwrap()
                .as_str(),
            endpoint: raw(&e.endpoint),
            created_at: IsoTime(e.created_at),
            updated_at: IsoTime(e.updated_at),
        }
    }

    #[test]
    fn endpoint_pages_are_what_the_schema_types_serialize_to() {
        let pages = [
            Page {
                data: vec![
                    listing(1, Some("chconn_1"), None),
                    listing(2, None, Some("ada")),
                ],
                next: Some("id2".into()),
                previous: None,
                total_count: 50_000,
                total_count_capped: true,
            },
            Page::empty(),
        ];
        for profile in [WireProfile::Spec, WireProfile::Novu] {
            for page in &pages {
                let (got, want) = with_profile(profile, || {
                    let expected = CursorPage {
                        data: page.data.iter().map(out).collect::<Vec<_>>(),
                        next: page.next.clone(),
                        previous: page.previous.clone(),
                        total_count: page.total_count,
                        total_count_capped: page.total_count_capped,
                    };
                    (
                        endpoint_page_json(page),
                        serde_json::to_vec(&expected).unwrap(),
                    )
                });
                assert_eq!(
                    String::from_utf8(got).unwrap(),
                    String::from_utf8(want).unwrap(),
                    "{profile:?}"
                );
            }
        }
        let novu = with_profile(WireProfile::Novu, || endpoint_page_json(&pages[0]));
        assert!(String::from_utf8(novu)
            .unwrap()
            .contains(r#""providerId":"novu-slack""#));
    }
}
