//! `POST /v2/workflows/{workflowId}/step/{stepId}/preview`: what a step would send, rendered over an
//! example payload (spec §2.8, §4.10). Unknown workflow or step → 404 (design.md §7).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::extract::{AppJson, AppPath};
use crate::api::wire::{profile, Reply};
use crate::api::AppState;
use crate::config::WireProfile;
use crate::domain::Tenant;
use crate::service::preview::{self as service, Preview, PreviewInput};

/// Body of a step preview.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreviewIn {
    /// Replace the step's stored control values for this preview only (nothing is saved).
    #[schema(value_type = Option<Object>)]
    pub control_values: Option<Value>,
    /// `{subscriber?, payload?, steps?, context?, env?}`: values merged over the generated example.
    #[schema(value_type = Option<Object>)]
    pub preview_payload: Option<Value>,
}

/// A step preview. `svcSignature` is spelled `novuSignature` under the `novu` wire profile.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct PreviewOut {
    /// `{type, preview, error?}`: the rendered fields for the step's type, and `{title, message,
    /// hint}` when a template or control is wrong.
    #[schema(value_type = Object)]
    pub result: Value,
    /// The variables the preview was rendered with: payload, subscriber, context, steps, env.
    #[schema(value_type = Object)]
    pub preview_payload_example: Value,
    /// JSON Schema of the variables available to the step.
    #[schema(value_type = Option<Object>)]
    pub schema: Option<Value>,
    /// The `svc-signature` header value an `http_request` step sends: `t=<ms>,v1=<hex>`.
    pub svc_signature: Option<String>,
}

impl From<Preview> for PreviewOut {
    fn from(p: Preview) -> Self {
        Self {
            result: p.result,
            preview_payload_example: p.preview_payload_example,
            schema: p.schema,
            svc_signature: p.signature,
        }
    }
}

/// The signature's key follows the wire profile (read while serializing, as for `WireName`).
impl Serialize for PreviewOut {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("result", &self.result)?;
        m.serialize_entry("previewPayloadExample", &self.preview_payload_example)?;
        m.serialize_entry("schema", &self.schema)?;
        if let Some(sig) = &self.svc_signature {
            let key = match profile() {
                WireProfile::Spec => "svcSignature",
                WireProfile::Novu => "novuSignature",
            };
            m.serialize_entry(key, sig)?;
        }
        m.end()
    }
}

/// Generate a step preview.
#[utoipa::path(post, path = "/v2/workflows/{workflowId}/step/{stepId}/preview", tag = "Workflows",
    request_body = PreviewIn,
    params(("workflowId" = String, Path, description = "`_id` or trigger identifier"),
        ("stepId" = String, Path, description = "the step's `_id` or `stepId`")),
    responses((status = 201, body = PreviewOut), (status = 404, description = "Unknown workflow or step"),
        (status = 422, description = "Invalid body")))]
pub async fn preview_step(
    State(state): State<AppState>,
    tenant: Tenant,
    AppPath((workflow_id, step_id)): AppPath<(String, String)>,
    AppJson(body): AppJson<PreviewIn>,
) -> ApiResult<Response> {
    let input = PreviewInput {
        control_values: body.control_values,
        preview_payload: body.preview_payload,
    };
    let p = service::preview(&state.store, &tenant, &workflow_id, &step_id, input).await?;
    Ok(Reply::created(PreviewOut::from(p)).into_response())
}
