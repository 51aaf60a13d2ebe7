//! `/v2/subscribers`: search, create, retrieve, patch, delete (spec §4.6, §4.7).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::pagination::{page_request, CursorPage};
use crate::api::wire::{self, raw_reply, IsoTime, JsonObject, Reply, Shape, WireName};
use crate::domain::subscriber::{ChannelCredentials, ChannelSettings, Subscriber, SubscriberView};
use crate::domain::{EnvironmentId, OrganizationId, Tenant};
use crate::error::{Error, Validation};
use crate::service::subscribers::{self as service, SubscriberFields};
use crate::store::subscriber_search::{SubscriberOrder, SubscriberSearch};

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
    #[schema(value_type = String)]
    pub organization_id: OrganizationId,
    #[serde(rename = "_environmentId")]
    #[schema(value_type = String)]
    pub environment_id: EnvironmentId,
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
            integration_id: c.integration_id.into(),
        }
    }
}

impl From<Subscriber> for SubscriberOut {
    fn from(s: Subscriber) -> Self {
        Self {
            id: s.id.into(),
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

/// Writes a subscriber exactly as [`SubscriberOut`] serializes (a unit test pins the two byte for byte),
/// from a borrowed row: the by-id read skips the owned subscriber and serde's per-field work. `channels`
/// and `data` are decoded only when they hold something.
pub(crate) fn write_subscriber(
    out: &mut Vec<u8>,
    s: &SubscriberView<'_>,
) -> crate::error::Result<()> {
    let unreadable = |what: &str, e: serde_json::Error| {
        Error::Internal(anyhow::anyhow!("stored subscriber {what}: {e}"))
    };
    let mut o = JsonObject::open(out);
    o.str("_id", s.id)
        .opt_str("firstName", s.first_name)
        .opt_str("lastName", s.last_name)
        .opt_str("email", s.email)
        .opt_str("phone", s.phone)
        .opt_str("avatar", s.avatar)
        .opt_str("locale", s.locale);
    if s.channels == "[]" {
        o.raw("channels", "[]");
    } else {
        let channels: Vec<ChannelSettings> =
            serde_json::from_str(s.channels).map_err(|e| unreadable("channels", e))?;
        let channels: Vec<ChannelSettingsOut> = channels.into_iter().map(Into::into).collect();
        serde_json::to_writer(o.key("channels"), &channels)
            .map_err(|e| unreadable("channels", e))?;
    }
    o.raw("topics", "[]")
        .opt_bool("isOnline", s.is_online)
        .opt_time("lastOnlineAt", s.last_online_at)
        .int("__v", s.version);
    match s.data {
        None | Some("null") => o.raw("data", "null"),
        Some(text) => {
            let data: Value = serde_json::from_str(text).map_err(|e| unreadable("data", e))?;
            serde_json::to_writer(o.key("data"), &data).map_err(|e| unreadable("data", e))?;
            &mut o
        }
    };
    o.opt_str("timezone", s.timezone)
        .str("subscriberId", s.subscriber_id)
        .str("_organizationId", s.organization_id)
        .str("_environmentId", s.environment_id)
        .bool("deleted", s.deleted)
        .time("createdAt", s.created_at)
        .time("updatedAt", s.updated_at);
    o.close();
    Ok(())
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
            ("_id", SubscriberOrder::Id),
            ("createdAt", SubscriberOrder::CreatedAt),
            ("updatedAt", SubscriberOrder::UpdatedAt),
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
    // The writer may run in another request's task (a batched read): it takes this request's wire profile along.
    let context = wire::current();
    let body = service::visit(&state.store, &tenant, &subscriber_id, move |s| {
        wire::within(context, || {
            let mut out = Vec::with_capacity(640);
            write_subscriber(&mut out, &s).map(|()| out)
        })
    })
    .await??;
    Ok(raw_reply(StatusCode::OK, Shape::Single, body))
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

/// Delete a subscriber: its profile, credentials, preferences, subscriptions and endpoints go at once, its
/// messages in the background; activity keeps its notifications without a subscriber.
#[utoipa::path(delete, path = "/v2/subscribers/{subscriberId}", tag = "Subscribers",
    params(("subscriberId" = String, Path)),
    responses((status = 200, body = SubscriberDeletedOut), (status = 404, description = "Unknown subscriber")))]
pub async fn delete_subscriber(
    axum::extract::State(state): axum::extract::State<crate::api::AppState>,
    tenant: Tenant,
    AppPath(subscriber_id): AppPath<String>,
) -> ApiResult<Response> {
    service::delete(&state.store, &tenant, &subscriber_id).await?;
    // This process's erasure loop starts on the subscriber's messages at once.
    state.wakeup.notify();
    Ok(Reply::ok(SubscriberDeletedOut {
        acknowledged: true,
        status: "deleted",
    })
    .into_response())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::wire::with_profile;
    use crate::config::WireProfile;
    use crate::domain::Timestamp;

    fn subscriber(full: bool) -> Subscriber {
        Subscriber {
            id: "6b06cf4f733d86000000004d".into(),
            organization_id: "org\"1".into(),
            environment_id: "env1".into(),
            subscriber_id: "user\\77 \u{1}é".into(),
            first_name: Some("Ada".into()),
            last_name: full.then(|| "Lovelace \"the first\"".into()),
            email: Some("ada@example.com".into()),
            phone: full.then(|| "+15550000077".into()),
            avatar: full.then(|| "https://example.com/a.png".into()),
            locale: full.then(|| "en-GB".into()),
            timezone: full.then(|| "Europe/London".into()),
            data: full.then(|| json!({"z": [1, 2.5, null], "a": {"nested": "x\ny"}, "n": -3})),
            channels: if full {
                vec![ChannelSettings {
                    provider_id: "svc-email".into(),
                    integration_identifier: Some("primary".into()),
                    credentials: ChannelCredentials {
                        device_tokens: Some(vec!["t1".into(), "t2".into()]),
                        webhook_url: Some("https://hooks.example.com/x".into()),
                        ..ChannelCredentials::default()
                    },
                    integration_id: "6b06cf4f733d860000000001".into(),
                }]
            } else {
                Vec::new()
            },
            is_online: full.then_some(true),
            last_online_at: full.then_some(Timestamp(1_795_600_000_123)),
            deleted: false,
            version: if full { 7 } else { 0 },
            created_at: Timestamp(1_795_600_000_000),
            updated_at: Timestamp(1_795_600_001_999),
        }
    }

    /// A view of `s` whose JSON columns hold `data` and `channels`.
    fn view_of<'a>(
        s: &'a Subscriber,
        data: Option<&'a str>,
        channels: &'a str,
    ) -> SubscriberView<'a> {
        SubscriberView {
            id: s.id.as_str(),
            organization_id: s.organization_id.as_str(),
            environment_id: s.environment_id.as_str(),
            subscriber_id: &s.subscriber_id,
            first_name: s.first_name.as_deref(),
            last_name: s.last_name.as_deref(),
            email: s.email.as_deref(),
            phone: s.phone.as_deref(),
            avatar: s.avatar.as_deref(),
            locale: s.locale.as_deref(),
            timezone: s.timezone.as_deref(),
            data,
            channels,
            is_online: s.is_online,
            last_online_at: s.last_online_at,
            deleted: s.deleted,
            version: s.version,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }

    fn written(s: &Subscriber, data: Option<&str>, channels: &str) -> String {
        let mut out = Vec::new();
        write_subscriber(&mut out, &view_of(s, data, channels)).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_written_subscriber_is_what_the_schema_type_serializes_to() {
        for profile in [WireProfile::Spec, WireProfile::Novu] {
            for full in [true, false] {
                let s = subscriber(full);
                let data = s.data.as_ref().map(|d| d.to_string());
                let channels = serde_json::to_string(&s.channels).unwrap();
                let (got, want) = with_profile(profile, || {
                    let got = written(&s, data.as_deref(), &channels);
                    let want = serde_json::to_string(&SubscriberOut::from(s.clone())).unwrap();
                    (got, want)
                });
                assert_eq!(got, want, "{profile:?}, all fields set: {full}");
            }
        }
        // The comparison covers the profile's spelling of the channel's provider.
        let s = subscriber(true);
        let channels = serde_json::to_string(&s.channels).unwrap();
        let novu = with_profile(WireProfile::Novu, || written(&s, None, &channels));
        assert!(novu.contains(r#""providerId":"novu-email""#), "{novu}");
    }

    /// PostgreSQL hands `jsonb` back in its own layout (spaces, its key order): the output is still
    /// serde's, and a stored JSON `null` is `null`.
    #[test]
    fn stored_json_in_another_layout_is_written_as_serde_writes_it() {
        let s = subscriber(true);
        let got = written(
            &s,
            Some(r#"{"n": -3, "z": [1, 2.5, null], "a": {"nested": "x\ny"}}"#),
            "[]",
        );
        let mut want = s.clone();
        want.channels.clear();
        let want = serde_json::to_string(&SubscriberOut::from(want)).unwrap();
        assert_eq!(got, want);
        let got: Value = serde_json::from_str(&written(&s, Some("null"), "[]")).unwrap();
        assert_eq!(got["data"], Value::Null);
    }

    #[test]
    fn unreadable_stored_json_is_an_error() {
        let s = subscriber(false);
        let mut out = Vec::new();
        assert!(write_subscriber(&mut out, &view_of(&s, Some("{"), "[]")).is_err());
        assert!(write_subscriber(&mut out, &view_of(&s, None, "[{\"x\":1}]")).is_err());
    }
}
