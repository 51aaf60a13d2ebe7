//! `POST /v1/events/trigger` (and bulk) and `DELETE /v1/events/trigger/{transactionId}`: a trigger records
//! one notification per recipient and the jobs of all its steps (the first queued, the others pending until
//! the chain reaches them), in one transaction.

use serde_json::{json, Map, Value};

use crate::domain::context::{context_keys, parse_context, ContextEntry};
use crate::domain::integration::Integration;
use crate::domain::job::{DetailStatus, Notification};
use crate::domain::payload_schema;
use crate::domain::subscriber::TokenMode;
use crate::domain::workflow::{StepType, Workflow};
use crate::domain::{NotificationId, Tenant, Timestamp};
use crate::engine::{detail, jobs_for_trigger, provider_for, TriggerWriter};
use crate::error::{Error, Result, Validation};
use crate::service::subscribers::{self, ChannelInput, SubscriberFields};
use crate::store::triggers::TriggerRecord;
use crate::store::Store;

/// A trigger request after JSON parsing.
#[derive(Debug, Clone, Default)]
pub struct TriggerInput {
    pub name: String,
    pub to: Value,
    pub payload: Option<Value>,
    pub overrides: Option<Value>,
    pub transaction_id: Option<String>,
    pub actor: Option<Value>,
    pub context: Option<Value>,
}

/// `{acknowledged, status, transactionId, error?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerResult {
    pub status: &'static str,
    pub transaction_id: String,
    pub error: Vec<String>,
}

fn text_field(map: &Map<String, Value>, key: &str) -> Option<Option<String>> {
    map.get(key).map(|v| v.as_str().map(str::to_owned))
}

/// One recipient: a subscriberId, or a subscriber object to upsert. The object's `channels` (already read
/// by [`prepare`]) are stored as `PATCH /v1/subscribers/{id}/credentials` stores them: device tokens are
/// added to the ones the subscriber has, and each provider needs an active integration; a 400 there names
/// `field` (`to.channels`, `to[1].channels`) in its `errors`.
async fn resolve_recipient(
    store: &Store,
    tenant: &Tenant,
    to: &Value,
    channels: &[ChannelInput],
    field: &str,
) -> Result<crate::domain::subscriber::Subscriber> {
    match to {
        Value::String(id) => match store.get_subscriber(&tenant.environment_id, id).await? {
            Some(s) => Ok(s),
            None => Ok(
                subscribers::create(store, tenant, id, SubscriberFields::default(), false)
                    .await?
                    .subscriber,
            ),
        },
        Value::Object(map) => {
            let id = map
                .get("subscriberId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let fields = SubscriberFields {
                first_name: text_field(map, "firstName"),
                last_name: text_field(map, "lastName"),
                email: text_field(map, "email"),
                phone: text_field(map, "phone"),
                avatar: text_field(map, "avatar"),
                locale: text_field(map, "locale"),
                timezone: text_field(map, "timezone"),
                data: map
                    .get("data")
                    .map(|d| Some(d.clone()).filter(|d| !d.is_null())),
            };
            let mut subscriber = subscribers::create(store, tenant, &id, fields, false)
                .await?
                .subscriber;
            for c in channels {
                subscriber = subscribers::update_credentials(
                    store,
                    tenant,
                    &id,
                    &c.provider_id,
                    c.integration_identifier.as_deref(),
                    c.credentials.clone(),
                    TokenMode::Append,
                )
                .await
                .map_err(|e| match e {
                    Error::BadRequest { message, mut extra } => {
                        extra.insert(
                            "errors".into(),
                            json!([{"field": field, "message": message, "value": c.provider_id}]),
                        );
                        Error::BadRequest { message, extra }
                    }
                    other => other,
                })?;
            }
            Ok(subscriber)
        }
        other => Err(Error::invalid(
            "to",
            "each recipient is a subscriberId or a subscriber object",
            other.clone(),
        )),
    }
}

/// A validated trigger: either ready to record, or already answered (inactive workflow, no steps).
enum Prepared {
    Ready(TriggerRecord),
    Answered(TriggerResult),
}

fn already_used(transaction_id: &str) -> TriggerResult {
    TriggerResult {
        status: "error",
        transaction_id: transaction_id.to_owned(),
        error: vec![format!(
            "transactionId {transaction_id} was already used; the trigger did not run again"
        )],
    }
}

/// Triggers one event: the notifications and first jobs are recorded in one transaction (by `triggers`).
pub async fn trigger(
    store: &Store,
    triggers: &TriggerWriter,
    tenant: &Tenant,
    input: TriggerInput,
) -> Result<TriggerResult> {
    Ok(trigger_many(store, triggers, tenant, vec![input])
        .await?
        .remove(0))
}

/// Triggers several events (bulk): each is validated and recorded on its own (each trigger atomically, the
/// request not: the writer may spread its triggers over several group commits).
pub async fn trigger_many(
    store: &Store,
    triggers: &TriggerWriter,
    tenant: &Tenant,
    inputs: Vec<TriggerInput>,
) -> Result<Vec<TriggerResult>> {
    // Answers in input order: `None` where the event waits for the insert below.
    let mut answers: Vec<Option<TriggerResult>> = Vec::with_capacity(inputs.len());
    let mut records = Vec::new();
    for input in inputs {
        match prepare(store, tenant, input)
            .await
            .map_err(with_error_type)?
        {
            Prepared::Ready(r) => {
                answers.push(None);
                records.push(r);
            }
            Prepared::Answered(a) => answers.push(Some(a)),
        }
    }
    let transaction_ids: Vec<String> = records.iter().map(|r| r.transaction_id.clone()).collect();
    let fresh = triggers.insert_triggers(records).await?;
    let mut recorded = transaction_ids.into_iter().zip(fresh);
    Ok(answers
        .into_iter()
        .map(|a| match a {
            Some(answer) => answer,
            None => match recorded.next() {
                Some((transaction_id, true)) => TriggerResult {
                    status: "processed",
                    transaction_id,
                    error: Vec::new(),
                },
                Some((transaction_id, false)) => already_used(&transaction_id),
                None => already_used(""),
            },
        })
        .collect())
}

/// A 400 of the trigger routes carries `type` and `errors` (`BAD_REQUEST` and the fields it knows, unless
/// it is a payload validation error): both SDKs read every 400 there as Novu's
/// `PayloadValidationExceptionDto`, which requires them.
fn with_error_type(e: Error) -> Error {
    match e {
        Error::BadRequest { message, mut extra } => {
            extra.entry("type").or_insert_with(|| "BAD_REQUEST".into());
            extra.entry("errors").or_insert_with(|| json!([]));
            Error::BadRequest { message, extra }
        }
        other => other,
    }
}

/// A trigger's input, checked: its recipients, the channels given with each, its context.
struct Checked {
    recipients: Vec<Value>,
    channels: Vec<Vec<ChannelInput>>,
    contexts: Vec<ContextEntry>,
}

/// Checks a trigger's input; every problem is one entry of the 422.
fn check(input: &TriggerInput) -> Result<Checked> {
    let mut v = Validation::new();
    if input.name.trim().is_empty() {
        v.add(
            "name",
            "name (the workflow identifier) is required",
            input.name.as_str(),
        );
    }
    let recipients: Vec<Value> = match &input.to {
        Value::Array(items) if !items.is_empty() => items.clone(),
        Value::Array(_) | Value::Null => {
            v.add(
                "to",
                "to must name at least one recipient",
                input.to.clone(),
            );
            Vec::new()
        }
        one => vec![one.clone()],
    };
    super::over_cap(&mut v, "to", recipients.len(), super::limits::RECIPIENTS);
    let mut recipient_channels: Vec<Vec<ChannelInput>> = Vec::with_capacity(recipients.len());
    for (i, r) in recipients.iter().enumerate() {
        let ok = r.as_str().is_some_and(|s| !s.is_empty())
            || r.get("subscriberId")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty());
        if !ok {
            v.add("to", "each recipient is a subscriberId or an object with a subscriberId (topics are not supported)", r.clone());
        }
        let channels = match r.get("channels") {
            None | Some(Value::Null) => Vec::new(),
            Some(c) => subscribers::parse_channels(&mut v, &channels_field(input, i), c),
        };
        recipient_channels.push(channels);
    }
    for (key, value) in [("payload", &input.payload), ("overrides", &input.overrides)] {
        if let Some(x) = value.as_ref().filter(|x| !x.is_null() && !x.is_object()) {
            v.add(key, format!("{key} must be an object"), x.clone());
        }
    }
    if let Some(t) = &input.transaction_id {
        if t.is_empty() || t.len() > 255 {
            v.add(
                "transactionId",
                "transactionId must be 1 to 255 characters",
                t.as_str(),
            );
        }
    }
    let contexts = match &input.context {
        Some(c) if !c.is_null() => parse_context(&mut v, "context", c),
        _ => Vec::new(),
    };
    v.finish()?;
    Ok(Checked {
        recipients,
        channels: recipient_channels,
        contexts,
    })
}

/// Where a recipient's `channels` are in the request, for error messages.
fn channels_field(input: &TriggerInput, i: usize) -> String {
    if input.to.is_array() {
        format!("to[{i}].channels")
    } else {
        "to.channels".to_owned()
    }
}

/// The trigger's payload: an object, with the workflow's payload-schema defaults applied and validated when
/// the workflow asks for it.
fn payload_for(workflow: &Workflow, input: &TriggerInput) -> Result<Value> {
    let mut payload = input
        .payload
        .clone()
        .filter(|p| p.is_object())
        .unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(schema) = workflow
        .payload_schema
        .as_ref()
        .filter(|s| workflow.validate_payload && s.is_object())
    {
        payload_schema::apply_defaults(schema, &mut payload);
        payload_schema::validate(schema, &payload).map_err(|errors| Error::BadRequest {
            message: payload_schema::summary(&errors),
            extra: payload_schema::error_extra(&errors, schema),
        })?;
    }
    Ok(payload)
}

async fn prepare(store: &Store, tenant: &Tenant, input: TriggerInput) -> Result<Prepared> {
    let Checked {
        recipients,
        channels: recipient_channels,
        contexts,
    } = check(&input)?;

    // Generated ids are UUIDv7: time-ordered, so the transaction-id indexes grow at their end instead of
    // taking a write on a random page per trigger.
    let transaction_id = input
        .transaction_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let result = |status, error: Vec<String>| TriggerResult {
        status,
        transaction_id: transaction_id.clone(),
        error,
    };
    let workflow = store
        .get_workflow_cached(&tenant.environment_id, &input.name)
        .await?
        .ok_or_else(|| Error::NotFound(format!("Workflow not found: {}", input.name)))?;
    if !workflow.active {
        return Ok(Prepared::Answered(result(
            "trigger_not_active",
            vec![format!("Workflow {} is not active", workflow.workflow_id)],
        )));
    }
    if workflow.steps.is_empty() {
        return Ok(Prepared::Answered(result(
            "no_workflow_steps_defined",
            vec![format!("Workflow {} has no steps", workflow.workflow_id)],
        )));
    }
    store
        .ensure_contexts(&tenant.environment_id, &contexts)
        .await?;
    let keys = context_keys(&contexts);
    let payload = payload_for(&workflow, &input)?;
    let channels: Vec<String> = workflow
        .steps
        .iter()
        .map(|s| s.step_type.as_str().to_owned())
        .collect();
    let providers = step_providers(store, tenant, &workflow.steps).await?;
    let provider = |t: StepType| {
        providers
            .iter()
            .find(|(s, _)| *s == t)
            .map_or_else(|| provider_for(t).to_owned(), |(_, p)| p.clone())
    };
    let now = Timestamp::now();
    let mut batch = Vec::with_capacity(recipients.len());
    for (i, (r, given)) in recipients.iter().zip(&recipient_channels).enumerate() {
        // A bulk request prepares up to 10,000 recipients in this task, and SQLite point reads answer
        // without yielding: the task gives the thread up now and then so that other requests run meanwhile.
        tokio::task::consume_budget().await;
        let s = resolve_recipient(store, tenant, r, given, &channels_field(&input, i)).await?;
        let n = Notification {
            id: NotificationId::new(),
            organization_id: tenant.organization_id.0.clone(),
            environment_id: tenant.environment_id.0.clone(),
            subscriber_ref: s.id.clone(),
            subscriber_id: s.subscriber_id.clone(),
            workflow_ref: workflow.id.clone(),
            workflow_identifier: workflow.workflow_id.clone(),
            transaction_id: transaction_id.clone(),
            channels: channels.clone(),
            payload: payload.clone(),
            overrides: input.overrides.clone().filter(|o| o.is_object()),
            // As Novu stores it: a subscriberId given as a string becomes `{subscriberId}`.
            to: Some(match r {
                Value::String(id) => json!({ "subscriberId": id }),
                other => other.clone(),
            }),
            actor: input.actor.clone(),
            tags: workflow.tags.clone(),
            severity: workflow.severity.as_str().to_owned(),
            critical: workflow.critical,
            context_keys: keys.clone(),
            digested_notification_id: None,
            created_at: now,
            updated_at: now,
        };
        let jobs = jobs_for_trigger(store, &n, &workflow.steps, &provider, now).await?;
        let queued = detail(
            &jobs[0],
            DetailStatus::Pending,
            "Internal",
            "Step queued",
            None,
        );
        batch.push((n, jobs, vec![queued]));
    }
    Ok(Prepared::Ready(TriggerRecord {
        environment_id: tenant.environment_id.clone(),
        transaction_id,
        batch,
    }))
}

/// The provider each delivery step type of `steps` shows before its delivery: the provider of the
/// environment's active integration for the channel that comes first (primary, then priority, then the
/// newest), as delivery orders them. Channel steps without one (and all other steps) show the channel's
/// default (`provider_for`). Read only when an email, SMS, chat or push step comes after the first step
/// (a job that waits, pending, for the chain): a first step runs at once and its delivery names the
/// provider that handled it, so a one-step workflow's trigger reads nothing more than it did.
async fn step_providers(
    store: &Store,
    tenant: &Tenant,
    steps: &[crate::domain::workflow::Step],
) -> Result<Vec<(StepType, String)>> {
    if !steps
        .iter()
        .skip(1)
        .any(|s| s.step_type.delivery_channel().is_some())
    {
        return Ok(Vec::new());
    }
    let active = store
        .list_integrations(&tenant.environment_id, true)
        .await?;
    let mut out = Vec::new();
    for t in [
        StepType::Email,
        StepType::Sms,
        StepType::Chat,
        StepType::Push,
    ] {
        let first = active
            .iter()
            .filter(|i| i.channel == t.delivery_channel())
            .min_by(|a, b| Integration::delivery_order(a, b));
        if let Some(i) = first {
            out.push((t, i.provider_id.as_str().to_owned()));
        }
    }
    Ok(out)
}

/// Cancels the pending (delayed, digesting, queued) jobs of a transaction. True when any was canceled.
pub async fn cancel(store: &Store, tenant: &Tenant, transaction_id: &str) -> Result<bool> {
    Ok(store
        .cancel_transaction(&tenant.environment_id, transaction_id)
        .await?
        > 0)
}
