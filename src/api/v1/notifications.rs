//! `GET /v1/notifications` and `GET /v1/notifications/{notificationId}` (spec §4.11, §4.12): triggered-event
//! records with their jobs and execution details.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppPath, QueryMap};
use crate::api::v1::activity_json::ActivityJson;
use crate::api::wire::{raw_reply, IsoTime, Shape, WireName};
use crate::api::AppState;
use crate::domain::context::context_set;
use crate::domain::{
    EnvironmentId, NotificationId, OrganizationId, Tenant, Timestamp, WorkflowRef,
};
use crate::error::{Error, Validation};
use crate::service::activity::{self as service, ActivityQuery};
use crate::store::notifications::NotificationFilter;

/// ExecutionDetail. The `…Out` types of this module describe the schema (OpenAPI); the responses are written by
/// [`ActivityJson`], which a test pins to these types byte for byte.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionDetailOut {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(rename = "_jobId")]
    pub job_id: String,
    pub created_at: IsoTime,
    pub status: String,
    pub detail: String,
    pub is_retry: bool,
    pub is_test: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<WireName>,
    pub raw: Option<String>,
    pub source: String,
}

/// Job.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobOut {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(rename = "type")]
    pub job_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub digest: Option<Box<RawValue>>,
    pub execution_details: Vec<ExecutionDetailOut>,
    pub step: JobStepOut,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub overrides: Option<Box<RawValue>>,
    #[schema(value_type = Object)]
    pub payload: Box<RawValue>,
    pub provider_id: WireName,
    pub status: String,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
    pub run_at: IsoTime,
    pub schedule_extensions_count: i64,
}

/// The workflow step a job runs.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStepOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub step_id: String,
    pub name: String,
    pub active: bool,
    #[schema(value_type = Vec<Object>)]
    pub filters: Box<RawValue>,
    #[serde(rename = "_templateId")]
    pub template_id: String,
    #[serde(rename = "_parentId")]
    pub parent_id: Option<String>,
    pub should_stop_on_fail: bool,
    #[schema(value_type = Object)]
    pub control_variables: Box<RawValue>,
}

/// The recipient of an activity record. A deleted subscriber's records have none (the member is left out,
/// as the spec marks it optional and @novu/api's schema refuses `null`): its profile was erased.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivitySubscriberOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub subscriber_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
}

/// The workflow of an activity record.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActivityTemplateOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub name: String,
    pub origin: WireName,
    pub triggers: Vec<ActivityTriggerOut>,
}

/// `{type: "event", identifier, variables: []}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActivityTriggerOut {
    #[serde(rename = "type")]
    pub trigger_type: String,
    pub identifier: String,
    #[schema(value_type = Vec<Object>)]
    pub variables: Vec<Value>,
}

/// Activity notification (spec §2.7).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivityOut {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(rename = "_environmentId")]
    #[schema(value_type = String)]
    pub environment_id: EnvironmentId,
    #[serde(rename = "_organizationId")]
    #[schema(value_type = String)]
    pub organization_id: OrganizationId,
    #[serde(rename = "_subscriberId")]
    pub subscriber_ref: String,
    #[serde(rename = "_templateId")]
    pub template_id: String,
    #[serde(
        rename = "_digestedNotificationId",
        skip_serializing_if = "Option::is_none"
    )]
    pub digested_notification_id: Option<String>,
    pub transaction_id: String,
    pub created_at: IsoTime,
    pub updated_at: IsoTime,
    #[schema(value_type = Vec<String>)]
    pub channels: Box<RawValue>,
    /// Left out for a deleted subscriber (its profile is erased).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub subscriber: Option<ActivitySubscriberOut>,
    pub template: ActivityTemplateOut,
    pub jobs: Vec<JobOut>,
    #[schema(value_type = Object)]
    pub payload: Box<RawValue>,
    /// The recipient as given (a subscriberId given as a string shows as `{"subscriberId": …}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub to: Option<Box<RawValue>>,
    #[schema(value_type = Vec<String>)]
    pub tags: Box<RawValue>,
    #[schema(value_type = Vec<Object>)]
    pub topics: Vec<Value>,
    pub severity: String,
    pub critical: bool,
    #[schema(value_type = Vec<String>)]
    pub context_keys: Box<RawValue>,
}

/// `{hasMore, data, pageSize, page}`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivityPage {
    pub has_more: bool,
    pub data: Vec<ActivityOut>,
    pub page_size: i64,
    pub page: i64,
}

fn parse_date(q: &QueryMap, key: &str) -> Result<Option<i64>, Error> {
    match q.string(key) {
        None => Ok(None),
        Some(raw) => Timestamp::parse(&raw).map(|t| Some(t.0)).ok_or_else(|| {
            Error::bad_request(format!(
                "Invalid date format for parameter '{key}': {raw}. Please provide a valid ISO 8601 date string."
            ))
        }),
    }
}

/// List triggered events, newest first (page-based).
#[utoipa::path(get, path = "/v1/notifications", tag = "Notifications",
    params(
        ("channels" = Option<Vec<String>>, Query), ("templates" = Option<Vec<String>>, Query, description = "Workflow _ids"),
        ("emails" = Option<Vec<String>>, Query), ("search" = Option<String>, Query, description = "Deprecated"),
        ("subscriberIds" = Option<Vec<String>>, Query), ("severity" = Option<Vec<String>>, Query),
        ("page" = Option<i64>, Query, description = "≥ 0, default 0"), ("limit" = Option<i64>, Query, description = "1..50, default 10"),
        ("transactionId" = Option<String>, Query), ("topicKey" = Option<String>, Query), ("subscriptionId" = Option<String>, Query),
        ("contextKeys" = Option<Vec<String>>, Query, description = "Exact set, type:id"),
        ("after" = Option<String>, Query, description = "ISO 8601"), ("before" = Option<String>, Query, description = "ISO 8601"),
    ),
    responses((status = 200, body = ActivityPage), (status = 400, description = "Bad date or range"), (status = 422, description = "Bad page, limit or severity")))]
pub async fn list_notifications(
    State(state): State<AppState>,
    tenant: Tenant,
    q: QueryMap,
) -> ApiResult<Response> {
    let mut v = Validation::new();
    let page = q.int(&mut v, "page", 0, 1_000_000).unwrap_or(0);
    let limit = q.int(&mut v, "limit", 1, 50).unwrap_or(10);
    let severity = q.list(&mut v, "severity");
    for s in &severity {
        if !matches!(s.as_str(), "high" | "medium" | "low" | "none") {
            v.add(
                "severity",
                "severity must be high, medium, low or none",
                s.as_str(),
            );
        }
    }
    let channels = q.list(&mut v, "channels");
    let context = q.context_keys(&mut v).as_deref().map(context_set);
    let templates = q.list(&mut v, "templates");
    let emails = q.list(&mut v, "emails");
    let subscriber_ids = q.list(&mut v, "subscriberIds");
    v.finish()?;
    let after = parse_date(&q, "after")?;
    let before = parse_date(&q, "before")?;
    if let (Some(a), Some(b)) = (after, before) {
        if a > b {
            return Err(Error::bad_request(
                "Invalid date range: start date (after) must be earlier than end date (before)",
            )
            .into());
        }
    }
    let query = ActivityQuery {
        filter: NotificationFilter {
            channels,
            workflow_refs: templates.into_iter().map(WorkflowRef::from).collect(),
            subscriber_ids: None,
            subscriber_refs: Vec::new(),
            severity,
            transaction_id: q.string("transactionId"),
            topic_key: q.string("topicKey"),
            subscription_identifier: q.string("subscriptionId"),
            context_set: context,
            after,
            before,
        },
        emails,
        subscriber_ids,
        search: q.string("search"),
        page,
        limit,
    };
    let mut sink = ActivityJson::new(&tenant);
    let (has_more, page) = service::list(&state.store, &tenant, query, &mut sink).await?;
    Ok(raw_reply(
        StatusCode::OK,
        Shape::Page,
        sink.page(has_more, limit, page)?,
    ))
}

/// Retrieve one triggered event with its jobs and execution details.
#[utoipa::path(get, path = "/v1/notifications/{notificationId}", tag = "Notifications",
    params(("notificationId" = String, Path)),
    responses((status = 200, body = ActivityOut), (status = 404, description = "Unknown notification"), (status = 422, description = "Not a database id")))]
pub async fn get_notification(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath(id): AppPath<NotificationId>,
) -> ApiResult<Response> {
    let mut sink = ActivityJson::new(&tenant);
    service::get(&state.store, &tenant, &id, &mut sink).await?;
    Ok(raw_reply(StatusCode::OK, Shape::Single, sink.one()?))
}
