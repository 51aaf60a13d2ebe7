//! Attachments of an email: fetched (or decoded) once for all attempts of a run, and what a failed fetch
//! means for the run.

use serde_json::Value;

use super::render::Rendered;
use super::retry::{retry, Backoff};
use super::{Ending, Run, State, Undelivered};
use crate::domain::job::{DetailStatus, Job};
use crate::engine::detail;
use crate::engine::steps::Runner;
use crate::providers::{self, Attachment, ProviderError};

/// The largest attachment fetched from a URL.
const MAX_ATTACHMENT_BYTES: usize = 10 * 1024 * 1024;

impl Runner {
    /// Attachments given by URL (`{name, url, mime?}`) are fetched; `{name, file (base64), mime?}` are decoded.
    pub(super) async fn attachments(
        &self,
        list: Option<&Value>,
    ) -> std::result::Result<Vec<Attachment>, ProviderError> {
        use base64::Engine as _;
        let mut out = Vec::new();
        for a in list.and_then(Value::as_array).into_iter().flatten() {
            let name = a
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("attachment")
                .to_owned();
            let mut mime = a.get("mime").and_then(Value::as_str).map(str::to_owned);
            let content = if let Some(url) = a.get("url").and_then(Value::as_str) {
                let resp =
                    self.http.get(url).send().await.map_err(
                        |e| match crate::outbound::refusal(&e) {
                            Some(why) => {
                                ProviderError::permanent(format!("Attachment {name}: {why}"))
                            }
                            None => ProviderError::transient(format!(
                                "Attachment {name}: fetching it failed: {e}"
                            )),
                        },
                    )?;
                if !resp.status().is_success() {
                    let retry_after = providers::http::retry_after(resp.headers());
                    return Err(ProviderError {
                        failure: providers::http::classify(resp.status(), retry_after),
                        message: format!("Attachment {name}: {url} answered {}", resp.status()),
                        raw: None,
                        invalid_tokens: Vec::new(),
                    });
                }
                if resp
                    .content_length()
                    .is_some_and(|n| n > MAX_ATTACHMENT_BYTES as u64)
                {
                    return Err(ProviderError::permanent(format!(
                        "Attachment {name} is larger than 10 MB"
                    )));
                }
                if mime.is_none() {
                    mime = resp
                        .headers()
                        .get(reqwest::header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                }
                let bytes = resp.bytes().await.map_err(|e| {
                    ProviderError::transient(format!("Attachment {name}: reading it failed: {e}"))
                })?;
                if bytes.len() > MAX_ATTACHMENT_BYTES {
                    return Err(ProviderError::permanent(format!(
                        "Attachment {name} is larger than 10 MB"
                    )));
                }
                bytes.to_vec()
            } else if let Some(file) = a.get("file").and_then(Value::as_str) {
                base64::engine::general_purpose::STANDARD
                    .decode(file)
                    .map_err(|_| {
                        ProviderError::permanent(format!("Attachment {name}: `file` is not base64"))
                    })?
            } else {
                return Err(ProviderError::permanent(format!(
                    "Attachment {name} has neither `url` nor `file`"
                )));
            };
            out.push(Attachment {
                name,
                mime: mime.unwrap_or_else(|| "application/octet-stream".to_owned()),
                content,
            });
        }
        Ok(out)
    }
}

/// A failed fetch of the attachments: an attachment server that is down is retried like a provider (its own
/// count, `State::fetches`); a bad attachment fails the step.
pub(super) fn fetch_failed(
    job: &Job,
    mut state: State,
    e: ProviderError,
    backoff: Backoff,
    rendered: Rendered,
) -> Run {
    let Some(retry) = retry(state.fetches, e.failure, &e.message, backoff) else {
        let why = Undelivered {
            error_id: "attachment_failed",
            text: e.message,
        };
        return Run::failed(why, Some(rendered));
    };
    let mut d = detail(job, DetailStatus::Failed, "Payload", retry.text, None);
    d.is_retry = state.fetches > 0;
    state.fetches += 1;
    Run {
        details: vec![d],
        rendered: Some(rendered),
        ending: Ending::Retry {
            provider_id: None,
            wait: retry.wait,
            state,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::super::fixtures::step_job;
    use super::*;

    fn rendered() -> Rendered {
        Rendered {
            subject: Some("s".into()),
            body: "b".into(),
            text: None,
        }
    }

    const NO_JITTER: Backoff = Backoff {
        base: Duration::from_millis(100),
        draw: 0.0,
    };

    #[test]
    fn an_attachment_server_that_is_down_is_retried_with_backoff() {
        let job = step_job("email", json!({}), None);
        let state = State {
            integrations: vec!["i1".into()],
            fetches: 1,
            ..Default::default()
        };
        let down = ProviderError::transient("Attachment a.pdf: fetching it failed: refused");
        let run = fetch_failed(&job, state, down, NO_JITTER, rendered());
        let Ending::Retry {
            provider_id,
            wait,
            state,
        } = run.ending
        else {
            panic!("not a retry: {:?}", run.ending);
        };
        assert_eq!(provider_id, None);
        assert_eq!(wait, Duration::from_millis(200));
        assert_eq!((state.fetches, state.integrations.len()), (2, 1));
        assert_eq!(run.details.len(), 1);
        let d = &run.details[0];
        assert_eq!(
            (
                d.status.as_str(),
                d.source.as_str(),
                d.detail.as_str(),
                d.is_retry
            ),
            (
                "Failed",
                "Payload",
                "Attachment a.pdf: fetching it failed: refused; retry 2 of 3 in 200 ms",
                true
            )
        );
    }

    #[test]
    fn a_bad_attachment_or_the_last_retry_fails_the_step() {
        let job = step_job("email", json!({}), None);
        let bad = ProviderError::permanent("Attachment a.pdf has neither `url` nor `file`");
        let run = fetch_failed(&job, State::default(), bad, NO_JITTER, rendered());
        assert!(run.details.is_empty());
        let Ending::Failed { why, .. } = run.ending else {
            panic!("not a failure: {:?}", run.ending);
        };
        assert_eq!(why.error_id, "attachment_failed");
        assert_eq!(why.text, "Attachment a.pdf has neither `url` nor `file`");

        let exhausted = State {
            fetches: 3,
            ..Default::default()
        };
        let down = ProviderError::transient("down");
        let run = fetch_failed(&job, exhausted, down, NO_JITTER, rendered());
        assert!(matches!(run.ending, Ending::Failed { .. }));
    }
}
