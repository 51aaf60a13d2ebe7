//! `/v2/subscribers`: search, create, retrieve, patch, delete (spec §4.6, §4.7).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath, QueryMap};
use crate::api::pagination::{page_request, CursorPage};
use crate::api::wire::{self, raw_reply, IsoTime, Reply, Shape, WireName};
use crate::domain::subscriber::{
    ChannelCredentials, ChannelSettings, ProfileInput, Subscriber, SubscriberProfile,
};
use crate::domain::{EnvironmentId, OrganizationId, Tenant};
use crate::error::{Error, Validation};
use crate::service::subscribers as service;
use crate::store::subscriber_search::{SubscriberOrder, SubscriberSearch};

/// Subscriber (spec §2.4). Nullable fields are always present.
#[derive(Debug, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriberOut {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(flatten)]
    #[schema(inline)]
    pub profile: SubscriberProfile,
    pub channels: Vec<ChannelSettingsOut>,
    /// Deprecated; always empty.
    pub topics: Vec<String>,
    pub is_online: Option<bool>,
    pub last_online_at: Option<IsoTime>,
    #[serde(rename = "__v")]
    pub version: i64,
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

/// The profile fields Novu's wire writes after `__v` rather than after `_id`.
const PROFILE_AFTER_VERSION: [&str; 2] = ["data", "timezone"];

/// In Novu's order, which puts `data` and `timezone` after `__v` (the schema is derived from the
/// declaration above; a unit test checks that both name the same fields).
impl Serialize for SubscriberOut {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let late = |k: &str| PROFILE_AFTER_VERSION.contains(&k);
        let mut m = serializer.serialize_map(None)?;
        m.serialize_entry("_id", &self.id)?;
        self.profile.serialize_fields(&mut m, |k| !late(k))?;
        m.serialize_entry("channels", &self.channels)?;
        m.serialize_entry("topics", &self.topics)?;
        m.serialize_entry("isOnline", &self.is_online)?;
        m.serialize_entry("lastOnlineAt", &self.last_online_at)?;
        m.serialize_entry("__v", &self.version)?;
        self.profile.serialize_fields(&mut m, late)?;
        m.serialize_entry("subscriberId", &self.subscriber_id)?;
        m.serialize_entry("_organizationId", &self.organization_id)?;
        m.serialize_entry("_environmentId", &self.environment_id)?;
        m.serialize_entry("deleted", &self.deleted)?;
        m.serialize_entry("createdAt", &self.created_at)?;
        m.serialize_entry("updatedAt", &self.updated_at)?;
        m.end()
    }
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
            profile: s.profile,
            channels: s.channels.into_iter().map(Into::into).collect(),
            topics: Vec::new(),
            is_online: s.is_online,
            last_online_at: s.last_online_at.map(IsoTime),
            version: s.version,
            subscriber_id: s.subscriber_id,
            organization_id: s.organization_id,
            environment_id: s.environment_id,
            deleted: s.deleted,
            created_at: s.created_at.into(),
            updated_at: s.updated_at.into(),
        }
    }
}

/// Body of `POST /v2/subscribers` (`subscriberId` required) and `PATCH /v2/subscribers/{subscriberId}`
/// (`subscriberId` ignored): a missing field is unchanged, `null` clears it.
pub type SubscriberIn = ProfileInput;

pub(crate) use crate::domain::subscriber::present;

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
    let created =
        service::create(&state.store, &tenant, &subscriber_id, body, fail_if_exists).await?;
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
            serde_json::to_writer(&mut out, &SubscriberOut::from(s)).map(|()| out)
        })
    })
    .await?
    .map_err(|e| Error::Internal(anyhow::anyhow!("a subscriber's JSON: {e}")))?;
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
    let s = service::patch(&state.store, &tenant, &subscriber_id, body).await?;
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
    use serde::Deserialize;
    use serde_json::{json, Map};

    use super::*;
    use crate::api::wire::with_profile;
    use crate::config::WireProfile;
    use crate::domain::Timestamp;

    /// A profile with every field set: `data` an object, the others text.
    fn full_profile() -> SubscriberProfile {
        let fields: Map<String, Value> = SubscriberProfile::FIELDS
            .iter()
            .map(|f| {
                let value = match *f {
                    "data" => json!({"plan": "pro", "n": 3}),
                    f => json!(format!("{f} of Ada")),
                };
                ((*f).to_owned(), value)
            })
            .collect();
        serde_json::from_value(Value::Object(fields)).unwrap()
    }

    fn subscriber(profile: SubscriberProfile) -> Subscriber {
        Subscriber {
            id: "6b06cf4f733d86000000004d".into(),
            organization_id: "org1".into(),
            environment_id: "env1".into(),
            subscriber_id: "ada".into(),
            profile,
            channels: Vec::new(),
            is_online: Some(true),
            last_online_at: Some(Timestamp(1_795_600_000_123)),
            deleted: false,
            version: 7,
            created_at: Timestamp(1_795_600_000_000),
            updated_at: Timestamp(1_795_600_001_999),
        }
    }

    /// Every consumer of the profile follows its type: a profile with every field set reaches each of them
    /// whole, so a field added to the type cannot be forgotten by one of them.
    #[test]
    fn every_consumer_of_the_profile_sees_every_field() {
        let profile = full_profile();
        let want = serde_json::to_value(&profile).unwrap();
        let want = want.as_object().unwrap();
        assert_eq!(want.len(), SubscriberProfile::FIELDS.len());
        assert!(want.values().all(|v| !v.is_null()), "{want:?}");
        let s = subscriber(profile.clone());
        let has_all = |what: &str, got: &Value| {
            for (k, v) in want {
                assert_eq!(got.get(k), Some(v), "{what}: {k}");
            }
        };

        for wire in [WireProfile::Spec, WireProfile::Novu] {
            let out = with_profile(wire, || {
                serde_json::to_value(SubscriberOut::from(s.clone()))
            });
            has_all("API output", &out.unwrap());
        }
        // The API's body, a trigger's `to` and the Inbox session's `subscriber` are all a `ProfileInput`.
        let mut given = want.clone();
        given.insert("subscriberId".into(), json!("ada"));
        given.insert("channels".into(), json!([]));
        let given = Value::Object(given);
        let input = ProfileInput::deserialize(&given).unwrap();
        assert_eq!(input.profile(), profile, "API input, a trigger's `to`");
        let input: ProfileInput =
            crate::api::extract::parse_json(given.to_string().as_bytes()).unwrap();
        assert_eq!(input.profile(), profile, "API input as a body");
        let mut v = Validation::new();
        let session = crate::api::inbox::profile_of(&mut v, &given);
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(session.profile(), profile, "Inbox session");
        let mut cleared = subscriber(profile.clone());
        session.apply(&mut cleared.profile);
        assert_eq!(
            cleared, s,
            "a session's fields written over the stored ones"
        );

        has_all(
            "template variables and step conditions",
            &crate::render::inputs::subscriber_values(&s),
        );
        has_all("integration conditions", &s.values());

        let example = crate::service::preview::example_subscriber();
        let schema = crate::service::preview::subscriber_schema();
        let out_schema =
            serde_json::to_value(<SubscriberOut as utoipa::PartialSchema>::schema()).unwrap();
        let in_schema =
            serde_json::to_value(<SubscriberIn as utoipa::PartialSchema>::schema()).unwrap();
        for k in want.keys() {
            assert!(example.get(k).is_some(), "preview example: {k}");
            assert!(schema["properties"].get(k).is_some(), "preview schema: {k}");
            assert!(
                in_schema["properties"].get(k).is_some(),
                "OpenAPI input: {k}"
            );
            let listed = out_schema["allOf"]
                .as_array()
                .is_some_and(|parts| parts.iter().any(|p| p["properties"].get(k).is_some()));
            assert!(listed, "OpenAPI output: {k}");
        }
    }

    /// The hand-ordered serialisation of [`SubscriberOut`] writes exactly the fields its schema names.
    #[test]
    fn a_subscriber_is_written_with_the_fields_of_its_schema() {
        let out = serde_json::to_value(SubscriberOut::from(subscriber(full_profile()))).unwrap();
        let mut written: Vec<&String> = out.as_object().unwrap().keys().collect();
        let schema =
            serde_json::to_value(<SubscriberOut as utoipa::PartialSchema>::schema()).unwrap();
        let mut named: Vec<&String> = schema["allOf"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["properties"].as_object().unwrap().keys())
            .collect();
        written.sort();
        named.sort();
        assert_eq!(written, named);
        // Novu's order (the corpus pins it whole): the profile after `_id`, but `data` and `timezone` after `__v`.
        let text = serde_json::to_string(&SubscriberOut::from(subscriber(
            SubscriberProfile::default(),
        )))
        .unwrap();
        let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap();
        assert_eq!(at("_id"), 1, "{text}");
        assert!(at("firstName") < at("channels"), "{text}");
        assert!(
            at("__v") < at("data") && at("data") < at("timezone"),
            "{text}"
        );
        assert!(at("timezone") < at("subscriberId"), "{text}");
    }
}
