//! Channel steps (email, SMS, chat, push): render the step, choose the integrations, resolve the destination,
//! call the provider, retry transient failures with backoff, fail over to the next integration, and record
//! every attempt.
//!
//! Retries are durable: a transient failure puts the job back in the queue (`JobOutcome::retry`) with its
//! delivery state — which integration, which attempt, which destinations already received the message —
//! so no worker sleeps on a backoff and a crash loses nothing.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::steps::{Chain, Runner};
use super::{detail, finished, lookup};
use crate::domain::context::context_set;
use crate::domain::endpoint::EndpointType;
use crate::domain::filters::{passes, StepFilter};
use crate::domain::integration::Integration;
use crate::domain::job::{status, ExecutionDetail, Job, Message, MessageDelivery, Notification};
use crate::domain::subscriber::Subscriber;
use crate::domain::{new_object_id, Channel, EnvironmentId, Timestamp};
use crate::error::Result;
use crate::providers::{
    self, Attachment, ChatMessage, ChatTarget, Credentials, Delivered, EmailMessage, Failure,
    Outbound, ProviderError, PushMessage, SendContext, SmsMessage,
};
use crate::render::email_blocks::email_body_template;
use crate::render::{html_to_text, sanitization_disabled, sanitize_html, text_of_clean_html};
use crate::store::engine::{JobOutcome, Requeue};

/// Retries of one integration after its first attempt, before failing over.
pub const MAX_RETRIES: u32 = 3;
/// The longest wait a provider's `Retry-After` may impose.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// The largest attachment fetched from a URL.
const MAX_ATTACHMENT_BYTES: usize = 10 * 1024 * 1024;

/// Where a channel job stands between attempts (stored as the job's `delivery`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct State {
    /// The candidate integrations' ids, in the order they are tried (fixed at the first attempt).
    integrations: Vec<String>,
    /// Index into `integrations` of the one being tried.
    index: usize,
    /// Attempts already made on it.
    attempt: u32,
    /// Destinations that already received the message (never sent to twice).
    done: Vec<String>,
    /// Failed attempts to fetch the attachments.
    #[serde(default)]
    fetches: u32,
}

/// One destination of a message.
struct Target {
    /// Stable key, for `State::done`.
    key: String,
    outbound: Outbound,
    /// What the message record shows as its destination.
    record: MessageDelivery,
}

/// Why a channel step ends without delivering.
struct Undelivered {
    error_id: &'static str,
    text: String,
}

impl Runner {
    /// Runs an email, SMS, chat or push step.
    pub(super) async fn channel(
        &self,
        job: &Job,
        n: &Notification,
        subscriber: Option<&Subscriber>,
        vars: &Value,
    ) -> Result<(JobOutcome, Chain)> {
        let env = EnvironmentId(job.environment_id.clone());
        let channel = job
            .step
            .step_type
            .delivery_channel()
            .unwrap_or(Channel::Push);
        let mut details = Vec::new();
        let stop = Chain::after_failure(job);
        let fail = |details: Vec<ExecutionDetail>,
                    why: Undelivered,
                    content: Option<Rendered>,
                    provider_id: Option<String>| {
            let mut details = details;
            let mut d = detail(
                job,
                "Failed",
                source_of(why.error_id),
                why.text.clone(),
                None,
            );
            d.is_retry = false;
            details.push(d);
            let mut outcome = finished(status::FAILED, details);
            // The job names the provider that last tried it, as its execution details do.
            outcome.provider_id = provider_id.clone();
            outcome.message = Some(self.message(
                job,
                n,
                channel,
                content.as_ref(),
                "error",
                provider_id.unwrap_or_else(|| job.provider_id.clone()),
                MessageDelivery {
                    error_id: Some(why.error_id.to_owned()),
                    error_text: Some(why.text),
                    ..Default::default()
                },
            ));
            outcome
        };
        let Some(subscriber) = subscriber else {
            let why = Undelivered {
                error_id: "subscriber_missing",
                text: format!("Subscriber {} no longer exists", job.subscriber_id),
            };
            return Ok((fail(details, why, None, None), stop));
        };

        // What to send.
        let content = match render(self, job, channel, vars) {
            Ok(c) => c,
            Err(text) => {
                let why = Undelivered {
                    error_id: "render_failed",
                    text,
                };
                return Ok((fail(details, why, None, None), stop));
            }
        };

        // Through which integrations, in which order.
        let mut state: State = job
            .delivery
            .clone()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let active: Vec<Integration> = self
            .store
            .list_integrations(&env, true)
            .await?
            .into_iter()
            .filter(|i| i.channel == Some(channel))
            .collect();
        let candidates = if state.integrations.is_empty() {
            match choose(job, channel, &active, subscriber) {
                Ok(c) => c,
                Err(why) => return Ok((fail(details, why, Some(content), None), stop)),
            }
        } else {
            // Later attempts keep the order fixed at the first one (an integration deleted or deactivated
            // since is skipped).
            state
                .integrations
                .iter()
                .map(|id| active.iter().find(|i| &i.id == id).cloned())
                .collect()
        };
        state.integrations = candidates
            .iter()
            .map(|c| c.as_ref().map_or_else(String::new, |i| i.id.clone()))
            .collect();

        let overrides = job.overrides.clone().unwrap_or(Value::Null);
        // Attachments are fetched once for all attempts of this run.
        let attachments = if channel == Channel::Email {
            let list = overrides.get("email").and_then(|e| e.get("attachments"));
            match self.attachments(list).await {
                Ok(a) => a,
                Err(e) => {
                    // An attachment server that is down is retried like a provider; a bad one fails the step.
                    if let Failure::Transient { retry_after } = e.failure {
                        if state.fetches < MAX_RETRIES {
                            let wait = self.backoff(state.fetches, retry_after);
                            let mut d = detail(
                                job,
                                "Failed",
                                "Payload",
                                format!(
                                    "{}; retry {} of {MAX_RETRIES} in {} ms",
                                    e.message,
                                    state.fetches + 1,
                                    wait.as_millis()
                                ),
                                None,
                            );
                            d.is_retry = state.fetches > 0;
                            state.fetches += 1;
                            let mut outcome = finished(status::QUEUED, vec![d]);
                            outcome.retry = Some(Requeue {
                                run_at: Timestamp::now().0 + wait.as_millis() as i64,
                                delivery: serde_json::to_value(&state)?,
                            });
                            return Ok((outcome, Chain::Stop));
                        }
                    }
                    let why = Undelivered {
                        error_id: "attachment_failed",
                        text: e.message,
                    };
                    return Ok((fail(details, why, Some(content), None), stop));
                }
            }
        } else {
            Vec::new()
        };
        let mut last_provider: Option<String> = None;
        let mut last: Option<Undelivered> = None;
        let mut delivered: Vec<(Delivered, MessageDelivery)> = Vec::new();
        let start = state.index;
        for (index, integration) in candidates.iter().enumerate().skip(start) {
            let Some(integration) = integration else {
                continue;
            };
            let provider_id = integration.provider_id.as_str().to_owned();
            last_provider = Some(provider_id.clone());
            let attempt = if index == start { state.attempt } else { 0 };
            let is_retry = attempt > 0 || index > 0;
            let mut note = |status: &str, source: &str, text: String, raw: Option<String>| {
                let mut d = detail(job, status, source, text, raw);
                d.provider_id = Some(provider_id.clone());
                d.is_retry = is_retry;
                details.push(d);
            };
            if index > start {
                note(
                    "Pending",
                    "Internal",
                    format!(
                        "Failing over to integration {} ({provider_id})",
                        integration.identifier
                    ),
                    None,
                );
            }
            let Some(provider) = providers::provider(&provider_id) else {
                let text = format!("provider {provider_id} is not supported by this server");
                note("Failed", "Credentials", text.clone(), None);
                last = Some(Undelivered {
                    error_id: "provider_not_supported",
                    text,
                });
                continue;
            };
            let credentials = match self.credentials(integration) {
                Ok(c) => c,
                Err(text) => {
                    note("Failed", "Credentials", text.clone(), None);
                    last = Some(Undelivered {
                        error_id: "credentials_invalid",
                        text,
                    });
                    continue;
                }
            };
            let targets = match self
                .targets(
                    job,
                    n,
                    integration,
                    &credentials,
                    subscriber,
                    (&content, &attachments),
                    &overrides,
                )
                .await?
            {
                Ok(t) => t,
                Err(why) => {
                    note("Failed", source_of(why.error_id), why.text.clone(), None);
                    last = Some(why);
                    continue;
                }
            };
            let provider_overrides = provider_overrides(&overrides, &provider_id);
            let mut secrets = credentials.secrets();
            secrets.extend(targets_secrets(&targets));
            let ctx = SendContext {
                http: &self.http,
                credentials: &credentials,
                overrides: &provider_overrides,
                integration_identifier: &integration.identifier,
                profile: self.profile,
            };
            let mut failed: Option<ProviderError> = None;
            for target in &targets {
                if state.done.contains(&target.key) {
                    continue;
                }
                match provider.send(&ctx, &target.outbound).await {
                    Ok(sent) => {
                        let raw = providers::redact(&sent.raw, &secrets);
                        note(
                            "Success",
                            "Credentials",
                            format!(
                                "Message sent by {provider_id}{}",
                                sent.id
                                    .as_deref()
                                    .map(|id| format!(" (id {id})"))
                                    .unwrap_or_default()
                            ),
                            Some(raw),
                        );
                        if !sent.invalid_tokens.is_empty() {
                            self.remove_tokens(
                                &env,
                                subscriber,
                                &provider_id,
                                &sent.invalid_tokens,
                            )
                            .await;
                            note(
                                "Warning",
                                "Credentials",
                                format!(
                                    "{provider_id} reported {} invalid device token(s); removed from the subscriber",
                                    sent.invalid_tokens.len()
                                ),
                                None,
                            );
                        }
                        state.done.push(target.key.clone());
                        let mut record = target.record.clone();
                        record.delivered_at = Some(Timestamp::now());
                        delivered.push((sent, record));
                    }
                    Err(e) => {
                        if !e.invalid_tokens.is_empty() {
                            self.remove_tokens(&env, subscriber, &provider_id, &e.invalid_tokens)
                                .await;
                        }
                        let raw = e.raw.as_deref().map(|r| providers::redact(r, &secrets));
                        let text = providers::redact(&e.message, &secrets);
                        if let Failure::Transient { retry_after } = e.failure {
                            if attempt < MAX_RETRIES {
                                let wait = self.backoff(attempt, retry_after);
                                note(
                                    "Failed",
                                    "Credentials",
                                    format!(
                                        "{text}; retry {} of {MAX_RETRIES} in {} ms",
                                        attempt + 1,
                                        wait.as_millis()
                                    ),
                                    raw,
                                );
                                state.index = index;
                                state.attempt = attempt + 1;
                                let mut outcome = finished(status::QUEUED, details);
                                outcome.provider_id = Some(provider_id.clone());
                                outcome.retry = Some(Requeue {
                                    run_at: Timestamp::now().0 + wait.as_millis() as i64,
                                    delivery: serde_json::to_value(&state)?,
                                });
                                return Ok((outcome, Chain::Stop));
                            }
                        }
                        let retries = if e.is_transient() {
                            format!(" (after {MAX_RETRIES} retries)")
                        } else {
                            String::new()
                        };
                        note("Failed", "Credentials", format!("{text}{retries}"), raw);
                        failed = Some(ProviderError { message: text, ..e });
                        break;
                    }
                }
            }
            match failed {
                None => {
                    let record = merge_records(delivered.iter().map(|(_, r)| r.clone()).collect());
                    let mut outcome = finished(status::COMPLETED, details);
                    outcome.provider_id = Some(provider_id.clone());
                    outcome.message = Some(self.message(
                        job,
                        n,
                        channel,
                        Some(&content),
                        "sent",
                        provider_id,
                        record,
                    ));
                    return Ok((outcome, Chain::Continue));
                }
                Some(e) => {
                    last = Some(Undelivered {
                        error_id: "provider_error",
                        text: e.message,
                    });
                }
            }
        }
        let why = last.unwrap_or(Undelivered {
            error_id: "no_integration",
            text: format!(
                "No active {} integration in this environment",
                channel.as_str()
            ),
        });
        let mut outcome = fail(Vec::new(), why, Some(content), last_provider);
        // The attempts' details come first, the final verdict last.
        details.append(&mut outcome.details);
        outcome.details = details;
        if let Some(m) = outcome.message.as_mut() {
            if let Some((_, r)) = delivered.last() {
                m.delivery.delivered_at = r.delivered_at;
            }
        }
        Ok((outcome, stop))
    }

    /// Exponential backoff with ±25 % jitter from the configured base, at least the provider's
    /// `Retry-After`.
    fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let base = self.retry_base.as_millis() as f64 * f64::from(1u32 << attempt.min(10));
        let jitter = (rand::random::<f64>() - 0.5) * 0.5 * base;
        let wait = Duration::from_millis((base + jitter).max(0.0) as u64);
        match retry_after {
            Some(r) => wait.max(r.min(MAX_RETRY_AFTER)),
            None => wait,
        }
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

    /// The destinations of this step through `integration`.
    #[allow(clippy::too_many_arguments)]
    async fn targets(
        &self,
        job: &Job,
        n: &Notification,
        integration: &Integration,
        credentials: &Credentials,
        subscriber: &Subscriber,
        (content, attachments): (&Rendered, &[Attachment]),
        overrides: &Value,
    ) -> Result<std::result::Result<Vec<Target>, Undelivered>> {
        let env = EnvironmentId(job.environment_id.clone());
        let channel = integration.channel.unwrap_or(Channel::Email);
        let channel_overrides = overrides
            .get(channel.as_str())
            .cloned()
            .unwrap_or(Value::Null);
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let context = context_set(&n.context_keys);
        match channel {
            Channel::Email => {
                let mut to: Vec<String> = subscriber.email.iter().cloned().collect();
                for extra in strings(channel_overrides.get("to")) {
                    if !to.contains(&extra) {
                        to.push(extra);
                    }
                }
                if to.is_empty() {
                    return Ok(Err(Undelivered {
                        error_id: "missing_email",
                        text: format!(
                            "Subscriber {} has no email address",
                            subscriber.subscriber_id
                        ),
                    }));
                }
                let msg = EmailMessage {
                    to: to.clone(),
                    from: text(&channel_overrides, "from").or_else(|| credentials.get("from")),
                    sender_name: text(&channel_overrides, "senderName")
                        .or_else(|| credentials.get("senderName")),
                    subject: content.subject.clone().unwrap_or_default(),
                    html: content.body.clone(),
                    text: text(&channel_overrides, "text").or_else(|| content.text.clone()),
                    reply_to: text(&channel_overrides, "replyTo"),
                    cc: strings(channel_overrides.get("cc")),
                    bcc: strings(channel_overrides.get("bcc")),
                    attachments: attachments.to_vec(),
                    headers: channel_overrides
                        .get("headers")
                        .and_then(Value::as_object)
                        .map(|h| {
                            h.iter()
                                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                                .collect()
                        })
                        .unwrap_or_default(),
                    payload: job.payload.clone(),
                };
                Ok(Ok(vec![Target {
                    key: format!("email:{}", to.join(",")),
                    outbound: Outbound::Email(msg),
                    record: MessageDelivery {
                        email: to.first().cloned(),
                        ..Default::default()
                    },
                }]))
            }
            Channel::Sms => {
                let mut phone = text(&channel_overrides, "to").or_else(|| subscriber.phone.clone());
                if phone.is_none() {
                    let endpoints = self
                        .store
                        .delivery_endpoints(&env, &subscriber.subscriber_id, None, &context)
                        .await?;
                    phone = endpoints
                        .iter()
                        .find(|e| e.endpoint_type == EndpointType::Phone)
                        .and_then(|e| text(&e.endpoint, "phoneNumber"));
                }
                let Some(phone) = phone else {
                    return Ok(Err(Undelivered {
                        error_id: "missing_phone",
                        text: format!(
                            "Subscriber {} has no phone number (neither `phone` nor a phone channel endpoint)",
                            subscriber.subscriber_id
                        ),
                    }));
                };
                Ok(Ok(vec![Target {
                    key: format!("sms:{phone}"),
                    outbound: Outbound::Sms(SmsMessage {
                        to: phone.clone(),
                        from: text(&channel_overrides, "from").or_else(|| credentials.get("from")),
                        content: content.body.clone(),
                        payload: job.payload.clone(),
                    }),
                    record: MessageDelivery {
                        phone: Some(phone),
                        ..Default::default()
                    },
                }]))
            }
            Channel::Chat => {
                let mut out = Vec::new();
                let endpoints = self
                    .store
                    .delivery_endpoints(
                        &env,
                        &subscriber.subscriber_id,
                        Some(&integration.identifier),
                        &context,
                    )
                    .await?;
                for e in endpoints {
                    if e.endpoint_type == EndpointType::Phone {
                        continue;
                    }
                    let (access_token, workspace) = match &e.connection_identifier {
                        Some(c) => match self.store.get_connection(&env, c).await? {
                            Some(conn) => (Some(conn.access_token), Some(conn.workspace)),
                            None => (None, None),
                        },
                        None => (None, None),
                    };
                    out.push(Target {
                        key: format!("endpoint:{}", e.identifier),
                        record: MessageDelivery {
                            direct_webhook_url: e
                                .endpoint
                                .get("url")
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                            ..Default::default()
                        },
                        outbound: Outbound::Chat(ChatMessage {
                            content: content.body.clone(),
                            target: ChatTarget::Endpoint {
                                endpoint_type: e.endpoint_type,
                                data: e.endpoint.clone(),
                                access_token,
                                workspace,
                            },
                            payload: job.payload.clone(),
                        }),
                    });
                }
                if out.is_empty() {
                    for c in settings_for(subscriber, integration) {
                        if let Some(url) = c.credentials.webhook_url.clone() {
                            out.push(Target {
                                key: format!("webhook:{url}"),
                                record: MessageDelivery {
                                    direct_webhook_url: Some(url.clone()),
                                    ..Default::default()
                                },
                                outbound: Outbound::Chat(ChatMessage {
                                    content: content.body.clone(),
                                    target: ChatTarget::Webhook {
                                        url,
                                        channel: c.credentials.channel.clone(),
                                    },
                                    payload: job.payload.clone(),
                                }),
                            });
                            break;
                        }
                    }
                }
                if out.is_empty() {
                    return Ok(Err(Undelivered {
                        error_id: "missing_chat_destination",
                        text: format!(
                            "Subscriber {} has no {} destination: no channel endpoint of integration {} for this \
                             context and no webhookUrl credential",
                            subscriber.subscriber_id,
                            integration.provider_id.as_str(),
                            integration.identifier
                        ),
                    }));
                }
                Ok(Ok(out))
            }
            _ => {
                let mut tokens: Vec<String> = Vec::new();
                for c in settings_for(subscriber, integration) {
                    for t in c.credentials.device_tokens.iter().flatten() {
                        if !tokens.contains(t) {
                            tokens.push(t.clone());
                        }
                    }
                }
                if tokens.is_empty() {
                    return Ok(Err(Undelivered {
                        error_id: "missing_device_tokens",
                        text: format!(
                            "Subscriber {} has no device tokens for {}",
                            subscriber.subscriber_id,
                            integration.provider_id.as_str()
                        ),
                    }));
                }
                let data = overrides
                    .get("data")
                    .or_else(|| channel_overrides.get("data"))
                    .cloned()
                    .unwrap_or_else(|| job.payload.clone());
                Ok(Ok(vec![Target {
                    key: format!("push:{}", integration.id),
                    record: MessageDelivery {
                        device_tokens: Some(tokens.clone()),
                        ..Default::default()
                    },
                    outbound: Outbound::Push(PushMessage {
                        tokens,
                        title: content.subject.clone().unwrap_or_default(),
                        content: content.body.clone(),
                        data,
                        payload: job.payload.clone(),
                    }),
                }]))
            }
        }
    }

    /// Attachments given by URL (`{name, url, mime?}`) are fetched; `{name, file (base64), mime?}` are decoded.
    async fn attachments(
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
                let resp = self.http.get(url).send().await.map_err(|e| {
                    ProviderError::transient(format!("Attachment {name}: fetching it failed: {e}"))
                })?;
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

    #[allow(clippy::too_many_arguments)]
    fn message(
        &self,
        job: &Job,
        n: &Notification,
        channel: Channel,
        content: Option<&Rendered>,
        status: &str,
        provider_id: String,
        delivery: MessageDelivery,
    ) -> Message {
        let now = Timestamp::now();
        Message {
            id: new_object_id(),
            organization_id: job.organization_id.clone(),
            environment_id: job.environment_id.clone(),
            notification_id: job.notification_id.clone(),
            subscriber_ref: job.subscriber_ref.clone(),
            subscriber_id: job.subscriber_id.clone(),
            workflow_ref: job.workflow_ref.clone(),
            workflow_identifier: n.workflow_identifier.clone(),
            job_id: job.id.clone(),
            transaction_id: job.transaction_id.clone(),
            channel: channel.as_str().to_owned(),
            subject: content.and_then(|c| c.subject.clone()),
            content: content.map(|c| c.body.clone()).unwrap_or_default(),
            avatar: None,
            cta: json!({"type": "redirect", "data": {}}),
            data: None,
            payload: job.payload.clone(),
            overrides: job.overrides.clone(),
            read: false,
            seen: false,
            last_read_date: None,
            last_seen_date: None,
            status: status.to_owned(),
            provider_id,
            context_keys: n.context_keys.clone(),
            deleted: false,
            delivery,
            created_at: now,
            updated_at: now,
        }
    }
}

/// A step's rendered content.
struct Rendered {
    subject: Option<String>,
    body: String,
    /// An email's plain-text alternative, derived from its HTML body.
    text: Option<String>,
}

/// Renders the step's `subject` and `body` controls (an email body given as a block document becomes HTML).
fn render(
    runner: &Runner,
    job: &Job,
    channel: Channel,
    vars: &Value,
) -> std::result::Result<Rendered, String> {
    let controls = &job.step.control_values;
    let get = |k: &str| controls.get(k).and_then(Value::as_str).unwrap_or_default();
    let body_template = if channel == Channel::Email {
        email_body_template(get("body"))
            .map_err(|e| e.message)?
            .into_owned()
    } else {
        get("body").to_owned()
    };
    let body = runner
        .renderer
        .render_str(&body_template, vars)
        .map_err(|e| format!("The {} body could not be rendered: {e}", channel.as_str()))?;
    let subject = match controls.get("subject").and_then(Value::as_str) {
        Some(s) => Some(
            runner
                .renderer
                .render_str(s, vars)
                .map_err(|e| format!("The subject could not be rendered: {e}"))?,
        ),
        None => None,
    };
    if channel == Channel::Email && subject.as_deref().unwrap_or("").trim().is_empty() {
        return Err("The email step has no subject: set the `subject` control".to_owned());
    }
    if body.trim().is_empty() {
        return Err(format!(
            "The {} step rendered an empty body: set the `body` control",
            channel.as_str()
        ));
    }
    // An email's HTML is sanitised unless the step says otherwise (the subject is a plain-text
    // header, not HTML); its text part comes from the HTML as sent.
    let (body, text) = if channel != Channel::Email {
        (body, None)
    } else if sanitization_disabled(controls) {
        let text = html_to_text(&body);
        (body, Some(text))
    } else {
        let clean = sanitize_html(&body).into_owned();
        let text = text_of_clean_html(&clean);
        (clean, Some(text))
    };
    Ok(Rendered {
        subject,
        body,
        text: text.filter(|t| !t.is_empty()),
    })
}

/// The integrations to try, in order: the one the overrides name (alone), else the environment's active
/// integrations of the channel whose `conditions` match — primary first, then by priority, newest first.
fn choose(
    job: &Job,
    channel: Channel,
    active: &[Integration],
    subscriber: &Subscriber,
) -> std::result::Result<Vec<Option<Integration>>, Undelivered> {
    let overrides = job.overrides.clone().unwrap_or(Value::Null);
    let named = overrides
        .get("steps")
        .and_then(|s| s.get(&job.step.step_id))
        .and_then(|s| s.get("integrationIdentifier"))
        .or_else(|| {
            overrides
                .get(channel.as_str())
                .and_then(|c| c.get("integrationIdentifier"))
        })
        .and_then(Value::as_str);
    if let Some(named) = named {
        return match active.iter().find(|i| i.identifier == named) {
            Some(i) => Ok(vec![Some(i.clone())]),
            None => Err(Undelivered {
                error_id: "integration_not_found",
                text: format!(
                    "The overrides name integration {named}, which is not an active {} integration of this environment",
                    channel.as_str()
                ),
            }),
        };
    }
    let subscriber_json = json!({
        "subscriberId": subscriber.subscriber_id,
        "email": subscriber.email,
        "phone": subscriber.phone,
        "firstName": subscriber.first_name,
        "lastName": subscriber.last_name,
        "locale": subscriber.locale,
        "data": subscriber.data,
    });
    let mut list: Vec<Integration> = active
        .iter()
        .filter(|i| {
            let conditions: Vec<StepFilter> = i
                .conditions
                .as_ref()
                .and_then(|c| serde_json::from_value(c.clone()).ok())
                .unwrap_or_default();
            passes(&conditions, &subscriber_json, &job.payload)
        })
        .cloned()
        .collect();
    list.sort_by(Integration::delivery_order);
    if list.is_empty() {
        let text = if active.is_empty() {
            format!(
                "No active {} integration in this environment",
                channel.as_str()
            )
        } else {
            format!(
                "No active {} integration's conditions match this trigger",
                channel.as_str()
            )
        };
        return Err(Undelivered {
            error_id: "no_integration",
            text,
        });
    }
    Ok(list.into_iter().map(Some).collect())
}

/// The subscriber's channel settings for this integration: those linked to it first, then any of its provider.
fn settings_for<'a>(
    s: &'a Subscriber,
    i: &Integration,
) -> Vec<&'a crate::domain::subscriber::ChannelSettings> {
    let mut out: Vec<_> = s
        .channels
        .iter()
        .filter(|c| c.provider_id == i.provider_id.as_str() && c.integration_id == i.id)
        .collect();
    out.extend(
        s.channels
            .iter()
            .filter(|c| c.provider_id == i.provider_id.as_str() && c.integration_id != i.id),
    );
    out
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

/// Strings from a string or an array of strings.
fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Access tokens of the targets' channel connections, redacted like credentials.
fn targets_secrets(targets: &[Target]) -> Vec<String> {
    targets
        .iter()
        .filter_map(|t| match &t.outbound {
            Outbound::Chat(ChatMessage {
                target:
                    ChatTarget::Endpoint {
                        access_token: Some(a),
                        ..
                    },
                ..
            }) => Some(a.clone()),
            _ => None,
        })
        .collect()
}

/// One record for several destinations (chat to several endpoints): the first of each field.
fn merge_records(records: Vec<MessageDelivery>) -> MessageDelivery {
    let mut out = MessageDelivery::default();
    for r in records {
        out.email = out.email.or(r.email);
        out.phone = out.phone.or(r.phone);
        out.direct_webhook_url = out.direct_webhook_url.or(r.direct_webhook_url);
        out.device_tokens = out.device_tokens.or(r.device_tokens);
        out.delivered_at = out.delivered_at.or(r.delivered_at);
    }
    out
}

/// The execution-detail source for an error id.
fn source_of(error_id: &str) -> &'static str {
    match error_id {
        "render_failed" | "attachment_failed" => "Payload",
        "subscriber_missing" => "Internal",
        _ => "Credentials",
    }
}
