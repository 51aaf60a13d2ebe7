//! `/api/v1/app/{app_id}/…` (continued from [`super::svix`]): what Svix's clients read of the messages and
//! attempts of outbound webhooks — an endpoint's attempts and messages, a message's attempts and the
//! endpoints it went to — and what they ask of them: `send-example` and `recover` (issue 39). Lists are
//! newest first, paged by `iterator` as the endpoint list is.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::extract::{parse_json, AppPath, QueryMap};
use super::svix::{check_app, page_of, reply, Svix, SvixResult};
use super::wire::IsoTime;
use super::AppState;
use crate::domain::webhook::WebhookEndpoint;
use crate::domain::{Tenant, Timestamp};
use crate::error::{Error, Validation};
use crate::service::webhook_messages as service;
use crate::store::page::{Page, PageRequest};
use crate::store::webhook_messages::{AttemptRow, MessageRow};

/// Svix's message status: 0 success, 1 pending, 2 failed, 3 sending; and its text.
fn status_of(stored: &str) -> (i64, &'static str) {
    match stored {
        "success" => (0, "success"),
        "pending" => (1, "pending"),
        "sending" => (3, "sending"),
        _ => (2, "fail"),
    }
}

/// The stored status a list's `status` filter (Svix's number) selects, and the page it asks for; 422 for
/// another value.
fn status_and_page(q: &QueryMap) -> Result<(Option<&'static str>, PageRequest), Error> {
    let mut v = Validation::new();
    let status = q.int(&mut v, "status", 0, 4).map(|n| match n {
        0 => "success",
        1 => "pending",
        3 => "sending",
        4 => "canceled",
        _ => "failed",
    });
    v.finish()?;
    Ok((status, page_of(q)?))
}

/// An attempt (`MessageAttemptOut`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageAttemptOut {
    /// `atmpt_…`.
    pub id: String,
    pub url: String,
    /// The start of the receiver's answer (or why there was none).
    pub response: String,
    /// 0 when there was no answer.
    pub response_status_code: i64,
    pub response_duration_ms: i64,
    /// 0 success, 2 failed.
    pub status: i64,
    pub status_text: String,
    /// 0 scheduled, 1 manual.
    pub trigger_type: i64,
    pub msg_id: String,
    pub endpoint_id: String,
    pub timestamp: IsoTime,
}

impl From<AttemptRow> for MessageAttemptOut {
    fn from(a: AttemptRow) -> Self {
        let (status, text) = status_of(&a.status);
        Self {
            id: a.id,
            url: a.url,
            response: a.response,
            response_status_code: a.response_status_code,
            response_duration_ms: a.response_duration_ms,
            status,
            status_text: text.into(),
            trigger_type: i64::from(a.trigger_type == "manual"),
            msg_id: a.msg_id,
            endpoint_id: a.endpoint_id,
            timestamp: Timestamp(a.created_at).into(),
        }
    }
}

/// A page (`ListResponse…`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SvixPage<T> {
    pub data: Vec<T>,
    pub iterator: Option<String>,
    pub prev_iterator: Option<String>,
    pub done: bool,
}

impl<T> SvixPage<T> {
    fn of<R>(page: Page<R>, f: impl FnMut(R) -> T) -> Self {
        Self {
            done: page.next.is_none(),
            iterator: page.next,
            prev_iterator: page.previous.map(|p| format!("-{p}")),
            data: page.data.into_iter().map(f).collect(),
        }
    }
}

/// A message to an endpoint (`EndpointMessageOut`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointMessageOut {
    /// `msg_…`: the `webhook-id` header.
    pub id: String,
    /// `evt_…`: the envelope's `id`.
    pub event_id: String,
    pub event_type: String,
    /// The envelope sent (with `with_content=true`; `{}` otherwise).
    #[schema(value_type = Object)]
    pub payload: Value,
    /// 0 success, 1 pending, 2 failed, 3 sending.
    pub status: i64,
    pub status_text: String,
    /// When it is tried again, while pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt: Option<IsoTime>,
    pub timestamp: IsoTime,
}

fn message_out(m: MessageRow, with_content: bool) -> EndpointMessageOut {
    let (status, text) = status_of(&m.status);
    EndpointMessageOut {
        event_id: m.id.replacen("msg_", "evt_", 1),
        id: m.id,
        event_type: m.event_type,
        payload: if with_content {
            serde_json::from_str(&m.body).unwrap_or_default()
        } else {
            Value::Object(Default::default())
        },
        status,
        status_text: text.into(),
        next_attempt: (m.status == "pending").then(|| Timestamp(m.next_at).into()),
        timestamp: Timestamp(m.created_at).into(),
    }
}

/// An endpoint a message went to, with the message's state there (`MessageEndpointOut`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageEndpointOut {
    /// `ep_…`.
    pub id: String,
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
    /// 0 success, 1 pending, 2 failed, 3 sending.
    pub status: i64,
    pub status_text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt: Option<IsoTime>,
}

impl MessageEndpointOut {
    fn new(e: WebhookEndpoint, m: &MessageRow) -> Self {
        let (status, text) = status_of(&m.status);
        Self {
            id: e.id,
            url: e.url,
            description: e.description,
            throttle_rate: e.throttle_rate,
            uid: e.uid,
            disabled: e.disabled,
            event_types: e.event_types,
            channels: e.channels,
            created_at: e.created_at.into(),
            updated_at: e.updated_at.into(),
            status,
            status_text: text.into(),
            next_attempt: (m.status == "pending").then(|| Timestamp(m.next_at).into()),
        }
    }
}

/// The message `send-example` recorded (Svix's `MessageOut`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SvixMessageOut)]
pub struct MessageOut {
    pub id: String,
    pub event_id: String,
    pub event_type: String,
    /// The event's `data`.
    #[schema(value_type = Object)]
    pub payload: Value,
    pub timestamp: IsoTime,
}

/// Body of `send-example` (`EventExampleIn`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventExampleIn {
    /// One of the event types Tidings sends.
    pub event_type: String,
    /// Accepted and ignored: there is one example per type.
    pub example_index: Option<i64>,
}

/// Body of `recover` (`RecoverIn`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct RecoverIn {
    /// ISO 8601: failed messages recorded from then on are sent again.
    pub since: String,
    /// ISO 8601: and before then (default: now).
    pub until: Option<String>,
}

/// What `recover` answers (`RecoverOut`): the work is done by the time it answers.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoverOut {
    /// `qtask_…`.
    pub id: String,
    /// `finished`.
    pub status: String,
    /// `endpoint.recover`.
    pub task: String,
    pub updated_at: IsoTime,
}

/// List the attempts to an endpoint.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/attempt/endpoint/{endpoint_id}", tag = "Webhooks", security(("SvixToken" = [])),
    params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid"),
        ("limit" = Option<i64>, Query, description = "1..250, default 50"), ("iterator" = Option<String>, Query),
        ("status" = Option<i64>, Query, description = "0 success, 2 failed")),
    responses((status = 200, body = SvixPage<MessageAttemptOut>), (status = 404, body = super::svix::SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 422, body = super::svix::SvixValidationOut, description = "Invalid query")))]
pub async fn attempts_of_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
    Svix(q): Svix<QueryMap>,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let (status, page) = status_and_page(&q)?;
    let page =
        service::attempts_of_endpoint(&state.store, &tenant, &endpoint, status, &page).await?;
    reply(StatusCode::OK, &SvixPage::of(page, MessageAttemptOut::from))
}

/// List the attempts of a message.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/attempt/msg/{msg_id}", tag = "Webhooks", security(("SvixToken" = [])),
    params(("app_id" = String, Path), ("msg_id" = String, Path, description = "msg_…"),
        ("limit" = Option<i64>, Query, description = "1..250, default 50"), ("iterator" = Option<String>, Query),
        ("status" = Option<i64>, Query, description = "0 success, 2 failed"),
        ("endpoint_id" = Option<String>, Query, description = "Only the attempts to this endpoint (id or uid)")),
    responses((status = 200, body = SvixPage<MessageAttemptOut>), (status = 404, body = super::svix::SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 422, body = super::svix::SvixValidationOut, description = "Invalid query")))]
pub async fn attempts_of_message(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, msg))): Svix<AppPath<(String, String)>>,
    Svix(q): Svix<QueryMap>,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let (status, page) = status_and_page(&q)?;
    let endpoint = q.string("endpoint_id");
    let page = service::attempts_of_message(
        &state.store,
        &tenant,
        &msg,
        endpoint.as_deref(),
        status,
        &page,
    )
    .await?;
    reply(StatusCode::OK, &SvixPage::of(page, MessageAttemptOut::from))
}

/// List the messages to an endpoint, with their state there.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/msg", tag = "Webhooks", security(("SvixToken" = [])),
    params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid"),
        ("limit" = Option<i64>, Query, description = "1..250, default 50"), ("iterator" = Option<String>, Query),
        ("status" = Option<i64>, Query, description = "0 success, 1 pending, 2 failed, 3 sending"),
        ("with_content" = Option<bool>, Query, description = "Include each message's envelope")),
    responses((status = 200, body = SvixPage<EndpointMessageOut>), (status = 404, body = super::svix::SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 422, body = super::svix::SvixValidationOut, description = "Invalid query")))]
pub async fn messages_of_endpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
    Svix(q): Svix<QueryMap>,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let (status, page) = status_and_page(&q)?;
    let mut v = Validation::new();
    let with_content = q.bool(&mut v, "with_content").unwrap_or(true);
    v.finish()?;
    let page =
        service::messages_of_endpoint(&state.store, &tenant, &endpoint, status, &page).await?;
    reply(
        StatusCode::OK,
        &SvixPage::of(page, |m| message_out(m, with_content)),
    )
}

/// List the endpoints a message went to, with its state at each.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/msg/{msg_id}/endpoint", tag = "Webhooks", security(("SvixToken" = [])),
    params(("app_id" = String, Path), ("msg_id" = String, Path, description = "msg_…")),
    responses((status = 200, body = SvixPage<MessageEndpointOut>), (status = 404, body = super::svix::SvixErrorOut, description = "Unknown app or message"),
        (status = 422, body = super::svix::SvixValidationOut, description = "Invalid path")))]
pub async fn destinations(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, msg))): Svix<AppPath<(String, String)>>,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    // One page: a message goes to at most one message per endpoint, and an environment has at most 100.
    let data = service::destinations(&state.store, &tenant, &msg)
        .await?
        .into_iter()
        .map(|(e, m)| MessageEndpointOut::new(e, &m))
        .collect();
    let page = SvixPage {
        data,
        iterator: None,
        prev_iterator: None,
        done: true,
    };
    reply(StatusCode::OK, &page)
}

/// Send an example event to one endpoint.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/send-example", tag = "Webhooks", security(("SvixToken" = [])),
    request_body = EventExampleIn, params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid")),
    responses((status = 202, body = MessageOut), (status = 404, body = super::svix::SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 422, body = super::svix::SvixValidationOut, description = "Unknown event type")))]
pub async fn send_example(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
    body: Bytes,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let body: EventExampleIn = parse_json(&body)?;
    let (id, event_id, payload, at) =
        service::send_example(&state.store, &tenant, &endpoint, &body.event_type).await?;
    let out = MessageOut {
        id,
        event_id,
        event_type: body.event_type,
        payload,
        timestamp: at.into(),
    };
    reply(StatusCode::ACCEPTED, &out)
}

/// Send again an endpoint's messages that failed for good since a time.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/recover", tag = "Webhooks", security(("SvixToken" = [])),
    request_body = RecoverIn, params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "Id or uid")),
    responses((status = 202, body = RecoverOut), (status = 404, body = super::svix::SvixErrorOut, description = "Unknown app or endpoint"),
        (status = 422, body = super::svix::SvixValidationOut, description = "Invalid times")))]
pub async fn recover(
    State(state): State<AppState>,
    tenant: Tenant,
    Svix(AppPath((app_id, endpoint))): Svix<AppPath<(String, String)>>,
    body: Bytes,
) -> SvixResult {
    check_app(&state, &tenant, &app_id).await?;
    let body: RecoverIn = parse_json(&body)?;
    let mut v = Validation::new();
    let since = Timestamp::parse(&body.since);
    if since.is_none() {
        v.add(
            "since",
            "since must be an ISO 8601 time",
            body.since.as_str(),
        );
    }
    let until = body.until.as_deref().map(|u| {
        let t = Timestamp::parse(u);
        if t.is_none() {
            v.add("until", "until must be an ISO 8601 time", u);
        }
        t
    });
    v.finish()?;
    let (since, until) = (since.unwrap_or_default().0, until.flatten().map(|t| t.0));
    service::recover(&state.store, &tenant, &endpoint, since, until).await?;
    let out = RecoverOut {
        id: format!("qtask_{}", crate::domain::new_object_id()),
        status: "finished".into(),
        task: "endpoint.recover".into(),
        updated_at: Timestamp::now().into(),
    };
    reply(StatusCode::ACCEPTED, &out)
}
