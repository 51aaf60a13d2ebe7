//! `POST /v1/events/trigger` (and bulk) and `DELETE /v1/events/trigger/{transactionId}`: a trigger records
//! one notification per recipient and the jobs of all its steps (the first queued, the others pending until
//! the chain reaches them), in one transaction.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::domain::context::{context_keys, parse_context, ContextEntry};
use crate::domain::fanout::{Fanout, Position, Reached, Source, Template};
use crate::domain::integration::Integration;
use crate::domain::payload_schema;
use crate::domain::subscriber::{recipient_as_kept, ProfileInput, TokenMode};
use crate::domain::workflow::{StepType, Workflow};
use crate::domain::{Tenant, Timestamp};
use crate::engine::{first_rows, TriggerWriter};
use crate::error::{Error, Result, Validation};
use crate::service::subscribers::{self, ChannelInput};
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
    /// A broadcast (`POST /v1/events/trigger/broadcast`): every subscriber of the environment, no `to`.
    pub everyone: bool,
}

/// `{acknowledged, status, transactionId, error?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerResult {
    pub status: &'static str,
    pub transaction_id: String,
    pub error: Vec<String>,
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
                subscribers::create(store, tenant, id, ProfileInput::default(), false)
                    .await?
                    .subscriber,
            ),
        },
        Value::Object(_) => {
            // Read from the parsed `to` in place: each given string is copied once, as a hand parser would.
            let mut fields = ProfileInput::deserialize(to).map_err(|e| {
                Error::invalid("to", format!("a recipient's profile: {e}"), to.clone())
            })?;
            let id = fields.subscriber_id.take().unwrap_or_default();
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
/// A refused event is the request's error (404, 400, 422; 500 when the database refuses it).
pub async fn trigger(
    store: &Store,
    triggers: &TriggerWriter,
    tenant: &Tenant,
    input: TriggerInput,
) -> Result<TriggerResult> {
    let record = match prepare(store, tenant, input)
        .await
        .map_err(with_error_type)?
    {
        Prepared::Ready(r) => r,
        Prepared::Answered(a) => return Ok(a),
    };
    let transaction_id = record.transaction_id.clone();
    let fresh = triggers.insert_triggers(vec![record]).await?;
    Ok(recorded(transaction_id, fresh.first() == Some(&true)))
}

fn recorded(transaction_id: String, fresh: bool) -> TriggerResult {
    if fresh {
        TriggerResult {
            status: "processed",
            transaction_id,
            error: Vec::new(),
        }
    } else {
        already_used(&transaction_id)
    }
}

/// A bulk event that was refused (unknown workflow, invalid, its payload rejected): `status: "error"`
/// with the reason, as Novu answers it (its `transactionId` is the caller's, when one was given).
fn refused_event(transaction_id: Option<String>, e: &Error) -> TriggerResult {
    TriggerResult {
        status: "error",
        transaction_id: transaction_id.unwrap_or_default(),
        error: vec![e.to_string()],
    }
}

/// The reason given for an event the database refused: its details go to the log under the `errorId`
/// the reason names, never to the caller.
fn internal_reason(e: &dyn std::fmt::Debug) -> String {
    let error_id = uuid::Uuid::new_v4().to_string();
    tracing::error!(error_id = %error_id, error = ?e, "a bulk trigger's event was not recorded");
    format!("The event could not be recorded and nothing of it was kept; errorId {error_id}")
}

/// Triggers several events (bulk), each on its own, as Novu does: an event that is refused (unknown
/// workflow, invalid input, the database refusing it) is answered `status: "error"` with its reason, and
/// the others are recorded and answered `processed` (each trigger atomically, the request not: the writer
/// may spread its triggers over several group commits). Only a failure to reach the database at all is
/// the request's error.
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
        let given = input.transaction_id.clone();
        match prepare(store, tenant, input).await {
            Ok(Prepared::Ready(r)) => {
                answers.push(None);
                records.push(r);
            }
            Ok(Prepared::Answered(a)) => answers.push(Some(a)),
            Err(e @ Error::Internal(_)) => return Err(e),
            Err(e) => answers.push(Some(refused_event(given, &e))),
        }
    }
    let transaction_ids: Vec<String> = records.iter().map(|r| r.transaction_id.clone()).collect();
    let outcomes = triggers.insert_triggers_each(records).await?;
    let mut outcomes = transaction_ids.into_iter().zip(outcomes);
    Ok(answers
        .into_iter()
        .map(|a| match a {
            Some(answer) => answer,
            None => match outcomes.next() {
                Some((transaction_id, Ok(fresh))) => recorded(transaction_id, fresh),
                Some((transaction_id, Err(message))) => TriggerResult {
                    status: "error",
                    transaction_id,
                    error: vec![internal_reason(&message)],
                },
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

/// A topic named in a trigger's `to`, and the subscriberIds its fan-out passes over.
#[derive(Debug, Clone, PartialEq)]
struct TopicTarget {
    key: String,
    exclude: Vec<String>,
}

/// A trigger's input, checked: its subscribers (each with its place in `to`) and the channels given with
/// each, its topics, its context.
struct Checked {
    recipients: Vec<(usize, Value)>,
    channels: Vec<Vec<ChannelInput>>,
    topics: Vec<TopicTarget>,
    contexts: Vec<ContextEntry>,
}

/// `{type: "Topic", topicKey, exclude?}` of a trigger's `to`, checked; `None` when `r` is not a topic.
fn topic_target(v: &mut Validation, r: &Value) -> Option<TopicTarget> {
    let kind = r.get("type").and_then(Value::as_str)?;
    if !kind.eq_ignore_ascii_case("topic") {
        return None;
    }
    let key = r
        .get("topicKey")
        .and_then(Value::as_str)
        .unwrap_or_default();
    crate::domain::topic::validate_key(v, "to.topicKey", key);
    let exclude = match r.get("exclude") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ids)) => {
            super::over_cap(v, "to.exclude", ids.len(), super::limits::EXCLUDED);
            ids.iter()
                .filter_map(|id| match id.as_str() {
                    Some(id) if !id.is_empty() => Some(id.to_owned()),
                    _ => {
                        v.add("to.exclude", "exclude holds subscriberIds", id.clone());
                        None
                    }
                })
                .collect()
        }
        Some(other) => {
            v.add(
                "to.exclude",
                "exclude must be an array of subscriberIds",
                other.clone(),
            );
            Vec::new()
        }
    };
    Some(TopicTarget {
        key: key.to_owned(),
        exclude,
    })
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
    let entries: Vec<Value> = match &input.to {
        Value::Null if input.everyone => Vec::new(),
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
    super::over_cap(&mut v, "to", entries.len(), super::limits::RECIPIENTS);
    let mut recipients = Vec::with_capacity(entries.len());
    let mut recipient_channels: Vec<Vec<ChannelInput>> = Vec::with_capacity(entries.len());
    let mut topics = Vec::new();
    for (i, r) in entries.into_iter().enumerate() {
        if let Some(topic) = topic_target(&mut v, &r) {
            topics.push(topic);
            continue;
        }
        let ok = r.as_str().is_some_and(|s| !s.is_empty())
            || r.get("subscriberId")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty());
        if !ok {
            v.add(
                "to",
                "each recipient is a subscriberId, an object with a subscriberId, or {type: \"Topic\", topicKey}",
                r.clone(),
            );
        }
        let channels = match r.get("channels") {
            None | Some(Value::Null) => Vec::new(),
            Some(c) => subscribers::parse_channels(&mut v, &channels_field(input, i), c),
        };
        recipient_channels.push(channels);
        recipients.push((i, r));
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
        topics,
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
        topics,
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
    let now = Timestamp::now();
    let template = template_for(store, tenant, &workflow, &input, &contexts).await?;
    let mut batch = Vec::with_capacity(recipients.len());
    for ((i, r), given) in recipients.iter().zip(&recipient_channels) {
        // A bulk request prepares up to 10,000 recipients in this task, and SQLite point reads answer
        // without yielding: the task gives the thread up now and then so that other requests run meanwhile.
        tokio::task::consume_budget().await;
        let s = resolve_recipient(store, tenant, r, given, &channels_field(&input, *i)).await?;
        let to = Reached {
            subscriber_ref: s.id,
            subscriber_id: s.subscriber_id,
            subscription: None,
        };
        let mut n = template.notification(
            &tenant.organization_id,
            &tenant.environment_id,
            &transaction_id,
            &to,
            now,
        );
        // As Novu stores it (a subscriberId given as a string becomes `{subscriberId}`), without the
        // channels' credentials: they are stored sealed with the subscriber.
        if r.is_object() {
            n.to = Some(recipient_as_kept(r.clone()));
        }
        batch.push(first_rows(n, &template, now));
    }
    let fanout = fanout_for(
        store,
        tenant,
        &input,
        &topics,
        &transaction_id,
        template,
        now,
    )
    .await?;
    Ok(Prepared::Ready(TriggerRecord {
        environment_id: tenant.environment_id.clone(),
        transaction_id,
        batch,
        fanout,
        advance: None,
        ran: Vec::new(),
        ran_by: None,
    }))
}

/// What every notification of a trigger of `workflow` shares (one per recipient is made from it).
async fn template_for(
    store: &Store,
    tenant: &Tenant,
    workflow: &Workflow,
    input: &TriggerInput,
    contexts: &[ContextEntry],
) -> Result<Template> {
    Ok(Template {
        workflow_ref: workflow.id.clone(),
        workflow_identifier: workflow.workflow_id.clone(),
        providers: step_providers(store, tenant, &workflow.steps).await?,
        steps: workflow.steps.clone(),
        channels: workflow
            .steps
            .iter()
            .map(|s| s.step_type.as_str().to_owned())
            .collect(),
        payload: payload_for(workflow, input)?,
        overrides: input.overrides.clone().filter(|o| o.is_object()),
        actor: input.actor.clone(),
        tags: workflow.tags.clone(),
        severity: workflow.severity.as_str().to_owned(),
        critical: workflow.critical,
        context_keys: context_keys(contexts),
    })
}

/// The fan-out of a trigger to topics (in the order `to` names them; unknown topics reach no one) or of a
/// broadcast; `None` when there is nothing to expand.
async fn fanout_for(
    store: &Store,
    tenant: &Tenant,
    input: &TriggerInput,
    topics: &[TopicTarget],
    transaction_id: &str,
    template: Template,
    now: Timestamp,
) -> Result<Option<Box<Fanout>>> {
    let mut sources = Vec::new();
    if input.everyone {
        sources.push(Source::Everyone);
    }
    for t in topics {
        let Some(topic) = store.get_topic(&tenant.environment_id, &t.key).await? else {
            continue;
        };
        let known = sources
            .iter()
            .any(|s| matches!(s, Source::Topic { topic_id, .. } if *topic_id == topic.id));
        if !known {
            sources.push(Source::Topic {
                topic_id: topic.id,
                topic_key: topic.key,
                exclude: t.exclude.clone(),
            });
        }
    }
    if sources.is_empty() {
        return Ok(None);
    }
    // The actor is not notified of its own action through a topic or a broadcast.
    let skip = input
        .actor
        .as_ref()
        .and_then(crate::render::inputs::actor_reference)
        .map(|id| vec![id.to_owned()])
        .unwrap_or_default();
    Ok(Some(Box::new(Fanout {
        id: crate::domain::new_object_id(),
        organization_id: tenant.organization_id.clone(),
        environment_id: tenant.environment_id.clone(),
        transaction_id: transaction_id.to_owned(),
        template,
        sources,
        skip,
        position: Position {
            source_index: 0,
            cursor: String::new(),
        },
        recipients: 0,
        status: crate::domain::fanout::FanoutStatus::Running,
        created_at: now,
        updated_at: now,
    })))
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

/// Cancels the pending (delayed, digesting, queued) jobs of a transaction, and its fan-out: no recipient
/// is reached after this. True when anything was canceled.
pub async fn cancel(store: &Store, tenant: &Tenant, transaction_id: &str) -> Result<bool> {
    // The fan-out first, so that no batch adds queued jobs behind the jobs' cancel.
    let fanouts = store
        .cancel_fanouts(&tenant.environment_id, transaction_id)
        .await?;
    let jobs = store
        .cancel_transaction(&tenant.environment_id, transaction_id)
        .await?;
    Ok(fanouts + jobs > 0)
}
