//! The steps that neither deliver nor write an in-app message: `http_request` (a signed call to the step's
//! URL) and `throttle` (a count of recent runs, under its key's lock).

use serde_json::{json, Value};

use super::steps::{request_body, template_controls, Chain, Runner};
use super::{detail, finished};
use crate::config::WireProfile;
use crate::domain::job::{DetailStatus, Job, JobStatus};
use crate::domain::workflow::duration_ms;
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::Result;
use crate::store::jobs::JobOutcome;

/// How much of a response body an execution detail keeps.
const RAW_LIMIT: usize = 4096;

impl Runner {
    /// Calls the step's URL with the rendered headers and body, signed with `svc-signature`.
    pub(super) async fn http_request(
        &self,
        job: &Job,
        env: &EnvironmentId,
        vars: &Value,
    ) -> Result<(JobOutcome, Chain)> {
        let fail = |text: String, raw: Option<String>| {
            let d = detail(job, DetailStatus::Failed, "Webhook", text, raw);
            Ok((
                finished(JobStatus::Failed, vec![d]),
                Chain::after_failure(job),
            ))
        };
        let controls = template_controls(&job.step.control_values);
        let rendered = match self.renderer.render_value(&controls, vars) {
            Ok(v) => v,
            Err(e) => return fail(format!("The request could not be rendered: {e}"), None),
        };
        let method = rendered
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("POST")
            .to_ascii_uppercase();
        let Some(url) = rendered
            .get("url")
            .and_then(Value::as_str)
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        else {
            return fail("The step has no absolute http(s) url".to_owned(), None);
        };
        let body = request_body(&method, rendered.get("body"));
        let body_json = serde_json::to_string(&body)?;
        let Some(key) = self.store.first_api_key(env).await? else {
            return fail(
                "The environment has no API key to sign the request with".to_owned(),
                None,
            );
        };
        let signature = crate::crypto::svc_signature(&key, Timestamp::now().0, &body_json);
        let header = match self.profile {
            WireProfile::Spec => "svc-signature",
            WireProfile::Novu => "novu-signature",
        };
        let parsed =
            reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let mut req = self
            .http
            .request(parsed.clone(), url)
            .header(header, signature);
        let headers = request_headers(rendered.get("headers"));
        let echoed = authorization_values(&headers);
        for (name, value) in headers {
            req = req.header(name, value);
        }
        if !matches!(
            parsed,
            reqwest::Method::GET
                | reqwest::Method::HEAD
                | reqwest::Method::DELETE
                | reqwest::Method::OPTIONS
        ) {
            req = req
                .header("content-type", "application/json")
                .body(body_json);
        }
        match req.send().await {
            Err(e) => {
                let why = crate::outbound::refusal(&e).unwrap_or_else(|| e.to_string());
                fail(format!("{method} {url} failed: {why}"), None)
            }
            Ok(resp) => Ok(answered(job, &method, url, resp, &echoed).await),
        }
    }

    pub(super) async fn throttle(&self, job: &Job) -> Result<(JobOutcome, Chain)> {
        let c = &job.step.control_values;
        let amount = c.get("amount").and_then(Value::as_f64).unwrap_or(1.0);
        let unit = c.get("unit").and_then(Value::as_str).unwrap_or("minutes");
        let threshold = c.get("threshold").and_then(Value::as_i64).unwrap_or(1);
        let window = duration_ms(amount, unit).unwrap_or(60_000);
        // Per subscriber (its record, as digests), workflow and step; decided under the key's lock.
        let key = format!(
            "{}|{}|{}|{}",
            job.environment_id, job.subscriber_ref, job.workflow_ref, job.step.step_id
        );
        let (passed, recent) = self
            .store
            .pass_throttle(&key, &job.id, Timestamp::now().0 - window, threshold)
            .await?;
        if !passed {
            let d = detail(
                job,
                DetailStatus::Warning,
                "Internal",
                format!(
                    "Throttled: {recent} runs in the window reached the threshold of {threshold}"
                ),
                None,
            );
            Ok((finished(JobStatus::Skipped, vec![d]), Chain::Stop))
        } else {
            let d = detail(
                job,
                DetailStatus::Success,
                "Internal",
                format!("Within the throttle limit ({recent} of {threshold})"),
                None,
            );
            Ok((finished(JobStatus::Completed, vec![d]), Chain::Continue))
        }
    }
}

/// The outcome of an `http_request` step that got an answer: completed on a 2xx, else failed (the chain
/// stops or goes on as the step says), with the status and the body in the detail.
async fn answered(
    job: &Job,
    method: &str,
    url: &str,
    resp: reqwest::Response,
    echoed: &[String],
) -> (JobOutcome, Chain) {
    let stop_or_go = Chain::after_failure(job);
    let code = resp.status();
    let text = resp.text().await.unwrap_or_default();
    // A service that echoes the request (httpbin's /anything, a debug endpoint) must not
    // put the step's credentials into the execution details.
    let text = crate::providers::redact(&text, echoed);
    let text = crate::providers::http::truncate(&text, RAW_LIMIT).to_owned();
    let raw = Some(json!({"status": code.as_u16(), "body": text}).to_string());
    if code.is_success() {
        let d = detail(
            job,
            DetailStatus::Success,
            "Webhook",
            format!("{method} {url} answered {code}"),
            raw,
        );
        (finished(JobStatus::Completed, vec![d]), Chain::Continue)
    } else {
        let d = detail(
            job,
            DetailStatus::Failed,
            "Webhook",
            format!("{method} {url} answered {code}"),
            raw,
        );
        (finished(JobStatus::Failed, vec![d]), stop_or_go)
    }
}

/// The secrets among a step's headers: each `Authorization` value, whole and without its scheme.
fn authorization_values(headers: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (_, value) in headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("authorization"))
    {
        out.push(value.clone());
        if let Some((_, credential)) = value.split_once(' ') {
            out.push(credential.trim().to_owned());
        }
    }
    // Too short to tell from ordinary text (a generic `Bearer …` is redacted whatever its length).
    out.retain(|v| v.len() >= 6);
    out
}

/// Header pairs from `{name: value}` or `[{key, value}]`.
fn request_headers(headers: Option<&Value>) -> Vec<(String, String)> {
    let text = |v: &Value| {
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string())
    };
    match headers {
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
        Some(Value::Array(pairs)) => pairs
            .iter()
            .filter_map(|p| Some((p.get("key")?.as_str()?.to_owned(), text(p.get("value")?))))
            .collect(),
        _ => Vec::new(),
    }
}
