//! The send phase: the candidate integrations in turn, each one [`Attempt`] — its provider, credentials and
//! destinations, then the message to each destination not yet served — and what that attempt means for
//! the run: delivered, retried with backoff, or failed over to the next integration.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::retry::{retry, Backoff};
use super::targets::Target;
use super::{source_of, Ending, Outgoing, Resolved, Run, State, Undelivered, MAX_RETRIES};
use crate::domain::integration::Integration;
use crate::domain::job::{DetailStatus, ExecutionDetail, Job, MessageDelivery};
use crate::domain::subscriber::Subscriber;
use crate::domain::{EnvironmentId, Timestamp};
use crate::engine::steps::Runner;
use crate::engine::{detail, lookup};
use crate::error::Result;
use crate::providers::{
    self, ChatMessage, ChatTarget, Credentials, Delivered, Outbound, Provider, ProviderError,
    SendContext,
};

/// One integration's turn in a run.
struct Turn<'a> {
    job: &'a Job,
    integration: &'a Integration,
    /// Its index among the candidates.
    index: usize,
    /// Attempts already made on it.
    attempt: u32,
    /// It follows another integration of this run (a failover), rather than being where the run resumed.
    failing_over: bool,
}

impl Turn<'_> {
    fn provider_id(&self) -> &str {
        self.integration.provider_id.as_str()
    }

    /// A detail row of this turn: it names the integration's provider, and is a retry unless it is the
    /// first attempt on the first candidate.
    fn detail(
        &self,
        status: DetailStatus,
        source: &str,
        text: String,
        raw: Option<String>,
    ) -> ExecutionDetail {
        let mut d = detail(self.job, status, source, text, raw);
        d.provider_id = Some(self.provider_id().to_owned());
        d.is_retry = self.attempt > 0 || self.index > 0;
        d
    }
}

/// The turns of a run, in order: the candidates from the one the state stands at (with its attempts so
/// far), each later one a failover with no attempt yet; an integration gone since the first attempt is
/// skipped.
fn turns<'a>(job: &'a Job, candidates: &'a [Option<Integration>], state: &State) -> Vec<Turn<'a>> {
    let start = state.index;
    candidates
        .iter()
        .enumerate()
        .skip(start)
        .filter_map(|(index, integration)| {
            Some(Turn {
                job,
                integration: integration.as_ref()?,
                index,
                attempt: if index == start { state.attempt } else { 0 },
                failing_over: index > start,
            })
        })
        .collect()
}

/// What one integration's attempt came to.
#[derive(Debug)]
enum Attempt {
    /// Every destination has the message.
    Delivered,
    /// A transient failure, tried again on this integration after `wait`.
    Retry { wait: Duration },
    /// This integration cannot deliver (unsupported provider, bad credentials, no destination, a permanent
    /// failure, or its retries are spent): the next one is tried.
    FailOver(Undelivered),
}

/// What a run has done so far, over all its integrations.
struct Progress {
    details: Vec<ExecutionDetail>,
    /// The delivery records of the destinations served in this run.
    delivered: Vec<MessageDelivery>,
    state: State,
}

impl Progress {
    /// What an attempt means for the run: its ending, or `Err` (why this integration did not deliver) to
    /// try the next one.
    fn after(&self, turn: &Turn<'_>, attempt: Attempt) -> std::result::Result<Ending, Undelivered> {
        let provider_id = turn.provider_id().to_owned();
        match attempt {
            Attempt::Delivered => Ok(Ending::Sent {
                provider_id,
                record: merge_records(&self.delivered),
            }),
            Attempt::Retry { wait } => Ok(Ending::Retry {
                provider_id: Some(provider_id),
                wait,
                state: State {
                    index: turn.index,
                    attempt: turn.attempt + 1,
                    ..self.state.clone()
                },
            }),
            Attempt::FailOver(why) => Err(why),
        }
    }

    /// The ending when no integration delivered: why the last one tried did not (none tried: no
    /// integration), and when destinations served before the run gave up received the message.
    fn gave_up(
        &self,
        last: Option<Undelivered>,
        provider_id: Option<String>,
        channel: &str,
    ) -> Ending {
        let why = last.unwrap_or(Undelivered {
            error_id: "no_integration",
            text: format!("No active {channel} integration in this environment"),
        });
        Ending::Failed {
            why,
            provider_id,
            delivered_at: self.delivered.last().and_then(|r| r.delivered_at),
        }
    }
}

/// What an integration needs to send: its provider, credentials, the destinations, and the secrets its
/// answers are redacted of.
struct Ready {
    provider: &'static dyn Provider,
    credentials: Credentials,
    targets: Vec<Target>,
    secrets: Vec<String>,
}

impl Runner {
    /// The send phase: each candidate in turn until one delivers or must be retried, else the run fails
    /// with why the last one did not deliver.
    pub(super) async fn send(
        &self,
        r: &Resolved<'_>,
        candidates: &[Option<Integration>],
        state: State,
        out: Outgoing,
    ) -> Result<Run> {
        let turns = turns(r.step.job, candidates, &state);
        let mut progress = Progress {
            details: Vec::new(),
            delivered: Vec::new(),
            state,
        };
        let mut last = None;
        let mut last_provider = None;
        for turn in &turns {
            last_provider = Some(turn.provider_id().to_owned());
            let attempt = self.attempt(r, turn, &out, &mut progress).await?;
            match progress.after(turn, attempt) {
                Ok(ending) => {
                    return Ok(Run {
                        details: progress.details,
                        rendered: Some(out.rendered),
                        ending,
                    })
                }
                Err(why) => last = Some(why),
            }
        }
        let ending = progress.gave_up(last, last_provider, r.step.channel.as_str());
        Ok(Run {
            details: progress.details,
            rendered: Some(out.rendered),
            ending,
        })
    }

    /// One integration's attempt.
    async fn attempt(
        &self,
        r: &Resolved<'_>,
        turn: &Turn<'_>,
        out: &Outgoing,
        progress: &mut Progress,
    ) -> Result<Attempt> {
        if turn.failing_over {
            let text = format!(
                "Failing over to integration {} ({})",
                turn.integration.identifier,
                turn.provider_id()
            );
            progress
                .details
                .push(turn.detail(DetailStatus::Pending, "Internal", text, None));
        }
        match self.prepare(r, turn.integration, out).await? {
            Ok(ready) => self.send_each(r, turn, &ready, progress).await,
            Err(why) => {
                let d = turn.detail(
                    DetailStatus::Failed,
                    source_of(why.error_id),
                    why.text.clone(),
                    None,
                );
                progress.details.push(d);
                Ok(Attempt::FailOver(why))
            }
        }
    }

    /// The integration's provider, credentials and destinations (`Err`: why it cannot deliver).
    async fn prepare(
        &self,
        r: &Resolved<'_>,
        integration: &Integration,
        out: &Outgoing,
    ) -> Result<std::result::Result<Ready, Undelivered>> {
        let provider_id = integration.provider_id.as_str();
        let Some(provider) = providers::provider(provider_id) else {
            return Ok(Err(Undelivered {
                error_id: "provider_not_supported",
                text: format!("provider {provider_id} is not supported by this server"),
            }));
        };
        let credentials = match self.credentials(integration) {
            Ok(c) => c,
            Err(text) => {
                return Ok(Err(Undelivered {
                    error_id: "credentials_invalid",
                    text,
                }))
            }
        };
        let targets = match self.targets(r, integration, &credentials, out).await? {
            Ok(t) => t,
            Err(why) => return Ok(Err(why)),
        };
        let mut secrets = credentials.secrets();
        secrets.extend(targets_secrets(&targets));
        Ok(Ok(Ready {
            provider,
            credentials,
            targets,
            secrets,
        }))
    }

    /// The message to each destination not yet served (`State::done`), until one fails.
    async fn send_each(
        &self,
        r: &Resolved<'_>,
        turn: &Turn<'_>,
        ready: &Ready,
        progress: &mut Progress,
    ) -> Result<Attempt> {
        let provider_id = turn.provider_id();
        let provider_overrides = provider_overrides(&r.overrides, provider_id);
        let ctx = SendContext {
            http: &self.http,
            credentials: &ready.credentials,
            overrides: &provider_overrides,
            integration_identifier: &turn.integration.identifier,
            profile: self.profile,
        };
        for target in &ready.targets {
            if progress.state.done.contains(&target.key) {
                continue;
            }
            let sent = match ready.provider.send(&ctx, &target.outbound).await {
                Ok(sent) => sent,
                Err(e) => {
                    if !e.invalid_tokens.is_empty() {
                        self.remove_tokens(&r.env, r.subscriber, provider_id, &e.invalid_tokens)
                            .await;
                    }
                    let (attempt, d) = provider_failed(turn, e, &ready.secrets, self.backoff());
                    progress.details.push(d);
                    return Ok(attempt);
                }
            };
            let raw = providers::redact(&sent.raw, &ready.secrets);
            let d = turn.detail(
                DetailStatus::Success,
                "Credentials",
                sent_text(provider_id, &sent),
                Some(raw),
            );
            progress.details.push(d);
            if !sent.invalid_tokens.is_empty() {
                self.remove_tokens(&r.env, r.subscriber, provider_id, &sent.invalid_tokens)
                    .await;
                let text = format!(
                    "{provider_id} reported {} invalid device token(s); removed from the subscriber",
                    sent.invalid_tokens.len()
                );
                progress.details.push(turn.detail(
                    DetailStatus::Warning,
                    "Credentials",
                    text,
                    None,
                ));
            }
            progress.state.done.push(target.key.clone());
            let mut record = target.record.clone();
            record.delivered_at = Some(Timestamp::now());
            progress.delivered.push(record);
        }
        Ok(Attempt::Delivered)
    }

    fn credentials(&self, i: &Integration) -> std::result::Result<Credentials, String> {
        let text = self
            .store
            .cipher()
            .decrypt_string(&i.credentials_sealed)
            .map_err(|_| {
                format!(
                    "The credentials of integration {} could not be decrypted (was the encryption key changed?)",
                    i.identifier
                )
            })?;
        let map = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        Ok(Credentials::new(map))
    }

    /// Drops tokens a provider reported invalid from the subscriber's credentials of that provider.
    async fn remove_tokens(
        &self,
        env: &EnvironmentId,
        subscriber: &Subscriber,
        provider_id: &str,
        invalid: &[String],
    ) {
        for _ in 0..3 {
            let Ok(Some(mut s)) = self
                .store
                .get_subscriber(env, &subscriber.subscriber_id)
                .await
            else {
                return;
            };
            let mut changed = false;
            for c in s
                .channels
                .iter_mut()
                .filter(|c| c.provider_id == provider_id)
            {
                if let Some(tokens) = c.credentials.device_tokens.as_mut() {
                    let before = tokens.len();
                    tokens.retain(|t| !invalid.contains(t));
                    changed |= tokens.len() != before;
                }
            }
            if !changed {
                return;
            }
            let expected = s.version;
            s.version += 1;
            s.updated_at = Timestamp::now();
            match self.store.update_subscriber(&s, expected).await {
                Ok(true) => return,
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(error = ?e, "removing invalid device tokens failed");
                    return;
                }
            }
        }
    }
}

/// The success detail's text.
fn sent_text(provider_id: &str, sent: &Delivered) -> String {
    format!(
        "Message sent by {provider_id}{}",
        sent.id
            .as_deref()
            .map(|id| format!(" (id {id})"))
            .unwrap_or_default()
    )
}

/// What a provider's failure means for this integration — a transient one is retried (after backoff) until
/// `MAX_RETRIES`, anything else fails over — with the detail that says so (its text and raw answer
/// redacted).
fn provider_failed(
    turn: &Turn<'_>,
    e: ProviderError,
    secrets: &[String],
    backoff: Backoff,
) -> (Attempt, ExecutionDetail) {
    let raw = e.raw.as_deref().map(|r| providers::redact(r, secrets));
    let text = providers::redact(&e.message, secrets);
    if let Some(retry) = retry(turn.attempt, e.failure, &text, backoff) {
        let d = turn.detail(DetailStatus::Failed, "Credentials", retry.text, raw);
        return (Attempt::Retry { wait: retry.wait }, d);
    }
    let retries = if e.is_transient() {
        format!(" (after {MAX_RETRIES} retries)")
    } else {
        String::new()
    };
    let d = turn.detail(
        DetailStatus::Failed,
        "Credentials",
        format!("{text}{retries}"),
        raw,
    );
    let why = Undelivered {
        error_id: "provider_error",
        text,
    };
    (Attempt::FailOver(why), d)
}

/// `overrides.providers.<id>`, else `overrides.<id>` (older SDKs), else `{}`.
fn provider_overrides(overrides: &Value, provider_id: &str) -> Value {
    overrides
        .get("providers")
        .and_then(|p| p.get(provider_id))
        .or_else(|| lookup(overrides, provider_id).filter(|v| v.is_object()))
        .cloned()
        .unwrap_or_else(|| json!({}))
}

/// What the targets hold that is stored sealed, redacted like credentials: their channel connections' access
/// tokens, and the destinations that are secrets themselves — a webhook URL (a subscriber's, or a webhook
/// endpoint's), device tokens — as their message records them.
fn targets_secrets(targets: &[Target]) -> Vec<String> {
    let mut out = Vec::new();
    for t in targets {
        if let Outbound::Chat(ChatMessage {
            target:
                ChatTarget::Endpoint {
                    access_token: Some(a),
                    ..
                },
            ..
        }) = &t.outbound
        {
            out.push(a.clone());
        }
        out.extend(t.record.direct_webhook_url.iter().cloned());
        out.extend(t.record.device_tokens.iter().flatten().cloned());
    }
    out
}

/// One record for several destinations (chat to several endpoints): the first of each field.
fn merge_records(records: &[MessageDelivery]) -> MessageDelivery {
    let mut out = MessageDelivery::default();
    for r in records.iter().cloned() {
        out.email = out.email.or(r.email);
        out.phone = out.phone.or(r.phone);
        out.direct_webhook_url = out.direct_webhook_url.or(r.direct_webhook_url);
        out.device_tokens = out.device_tokens.or(r.device_tokens);
        out.delivered_at = out.delivered_at.or(r.delivered_at);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{integration, step_job};
    use super::super::fixtures::{ms, NO_JITTER};
    use super::*;
    use crate::providers::Failure;

    /// (index, attempt, failing over, is a retry) of each turn.
    fn plan(candidates: &[Option<Integration>], state: &State) -> Vec<(usize, u32, bool, bool)> {
        let job = step_job("email", json!({}), None);
        turns(&job, candidates, state)
            .iter()
            .map(|t| {
                let d = t.detail(DetailStatus::Pending, "Internal", String::new(), None);
                (t.index, t.attempt, t.failing_over, d.is_retry)
            })
            .collect()
    }

    #[test]
    fn turns_resume_where_the_state_stands_and_skip_integrations_gone() {
        let a = Some(integration("a", "sendgrid", 1));
        let c = Some(integration("c", "mailgun", 2));
        let candidates = [a, None, c];
        assert_eq!(
            plan(&candidates, &State::default()),
            [(0, 0, false, false), (2, 0, true, true)]
        );
        let retrying = State {
            attempt: 2,
            ..Default::default()
        };
        assert_eq!(
            plan(&candidates, &retrying),
            [(0, 2, false, true), (2, 0, true, true)]
        );
        let on_the_third = State {
            index: 2,
            attempt: 1,
            ..Default::default()
        };
        assert_eq!(plan(&candidates, &on_the_third), [(2, 1, false, true)]);
        // Resuming on one deleted since: the next is a failover, with no attempt yet.
        let on_the_gone = State {
            index: 1,
            attempt: 3,
            ..Default::default()
        };
        assert_eq!(plan(&candidates, &on_the_gone), [(2, 0, true, true)]);
    }

    fn turn<'a>(
        job: &'a Job,
        integration: &'a Integration,
        index: usize,
        attempt: u32,
    ) -> Turn<'a> {
        Turn {
            job,
            integration,
            index,
            attempt,
            failing_over: false,
        }
    }

    #[test]
    fn a_transient_provider_failure_is_retried_redacted() {
        let job = step_job("email", json!({}), None);
        let i = integration("a", "sendgrid", 1);
        let e = ProviderError {
            failure: Failure::Transient {
                retry_after: Some(ms(2_000)),
            },
            message: "key SECRET refused".into(),
            raw: Some("{\"key\":\"SECRET\"}".into()),
            invalid_tokens: vec![],
        };
        let secrets = ["SECRET".to_owned()];
        let (attempt, d) = provider_failed(&turn(&job, &i, 0, 0), e.clone(), &secrets, NO_JITTER);
        assert!(matches!(attempt, Attempt::Retry { wait } if wait == ms(2_000)));
        assert_eq!(
            (d.status.as_str(), d.source.as_str(), d.detail.as_str()),
            (
                "Failed",
                "Credentials",
                "key [redacted] refused; retry 1 of 3 in 2000 ms"
            )
        );
        assert_eq!(d.raw.as_deref(), Some("{\"key\":\"[redacted]\"}"));
        assert_eq!(
            (d.provider_id.as_deref(), d.is_retry),
            (Some("sendgrid"), false)
        );

        // Its retries spent, the run fails over.
        let (attempt, d) = provider_failed(&turn(&job, &i, 0, 3), e, &secrets, NO_JITTER);
        assert_eq!(d.detail, "key [redacted] refused (after 3 retries)");
        assert!(d.is_retry);
        let Attempt::FailOver(why) = attempt else {
            panic!("not a failover: {attempt:?}");
        };
        assert_eq!(
            why,
            Undelivered {
                error_id: "provider_error",
                text: "key [redacted] refused".into()
            }
        );
    }

    #[test]
    fn a_permanent_provider_failure_fails_over_at_once() {
        let job = step_job("email", json!({}), None);
        let i = integration("b", "mailgun", 1);
        let e = ProviderError::permanent("400 bad sender");
        let (attempt, d) = provider_failed(&turn(&job, &i, 1, 0), e, &[], NO_JITTER);
        assert!(matches!(&attempt, Attempt::FailOver(why) if why.text == "400 bad sender"));
        assert_eq!((d.detail.as_str(), d.is_retry), ("400 bad sender", true));
    }

    fn progress(delivered: Vec<MessageDelivery>) -> Progress {
        Progress {
            details: vec![],
            delivered,
            state: State {
                integrations: vec!["a".into(), "b".into()],
                done: vec!["endpoint:e1".into()],
                ..Default::default()
            },
        }
    }

    #[test]
    fn an_attempt_ends_the_run_or_fails_over() {
        let job = step_job("chat", json!({}), None);
        let i = integration("b", "slack", 1);
        let t = turn(&job, &i, 1, 2);
        let served = MessageDelivery {
            direct_webhook_url: Some("https://hook/1".into()),
            delivered_at: Some(Timestamp(5)),
            ..Default::default()
        };
        let p = progress(vec![served.clone()]);
        let Ok(Ending::Sent {
            provider_id,
            record,
        }) = p.after(&t, Attempt::Delivered)
        else {
            panic!("not sent");
        };
        assert_eq!((provider_id.as_str(), record), ("slack", served));

        let Ok(Ending::Retry {
            provider_id,
            wait,
            state,
        }) = p.after(&t, Attempt::Retry { wait: ms(300) })
        else {
            panic!("not a retry");
        };
        assert_eq!((provider_id.as_deref(), wait), (Some("slack"), ms(300)));
        assert_eq!((state.index, state.attempt), (1, 3));
        assert_eq!(state.done, ["endpoint:e1"]);
        assert_eq!(state.integrations, ["a", "b"]);

        let why = Undelivered {
            error_id: "missing_chat_destination",
            text: "none".into(),
        };
        assert_eq!(
            p.after(&t, Attempt::FailOver(why.clone())).unwrap_err(),
            why
        );
    }

    #[test]
    fn a_run_that_gives_up_says_why_the_last_integration_did_not_deliver() {
        let Ending::Failed {
            why,
            provider_id,
            delivered_at,
        } = progress(vec![]).gave_up(None, None, "sms")
        else {
            panic!("not a failure");
        };
        assert_eq!(why.error_id, "no_integration");
        assert_eq!(why.text, "No active sms integration in this environment");
        assert_eq!((provider_id, delivered_at), (None, None));

        let first = MessageDelivery {
            delivered_at: Some(Timestamp(1)),
            ..Default::default()
        };
        let second = MessageDelivery {
            delivered_at: Some(Timestamp(2)),
            ..Default::default()
        };
        let last = Undelivered {
            error_id: "provider_error",
            text: "down".into(),
        };
        let ending =
            progress(vec![first, second]).gave_up(Some(last.clone()), Some("slack".into()), "chat");
        let Ending::Failed {
            why,
            provider_id,
            delivered_at,
        } = ending
        else {
            panic!("not a failure");
        };
        assert_eq!(why, last);
        assert_eq!(provider_id.as_deref(), Some("slack"));
        assert_eq!(delivered_at, Some(Timestamp(2)));
    }

    #[test]
    fn provider_overrides_prefer_providers_then_the_older_spelling() {
        let o = json!({"providers": {"fcm": {"a": 1}}, "fcm": {"b": 2}, "apns": {"c": 3},
            "sendgrid": "not an object"});
        assert_eq!(provider_overrides(&o, "fcm"), json!({"a": 1}));
        assert_eq!(provider_overrides(&o, "apns"), json!({"c": 3}));
        assert_eq!(provider_overrides(&o, "sendgrid"), json!({}));
        assert_eq!(provider_overrides(&Value::Null, "fcm"), json!({}));
    }

    #[test]
    fn records_of_several_destinations_merge_first_of_each_field() {
        let a = MessageDelivery {
            direct_webhook_url: Some("https://a".into()),
            delivered_at: Some(Timestamp(1)),
            ..Default::default()
        };
        let b = MessageDelivery {
            direct_webhook_url: Some("https://b".into()),
            phone: Some("+1".into()),
            delivered_at: Some(Timestamp(2)),
            ..Default::default()
        };
        let merged = merge_records(&[a, b]);
        assert_eq!(merged.direct_webhook_url.as_deref(), Some("https://a"));
        assert_eq!(merged.phone.as_deref(), Some("+1"));
        assert_eq!(merged.delivered_at, Some(Timestamp(1)));
        assert_eq!(merge_records(&[]), MessageDelivery::default());
    }
}
