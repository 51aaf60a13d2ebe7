//! The messages and attempts of outbound webhooks (issue 39) as Svix's clients read them, and the two things
//! a caller may ask of them: an example sent to an endpoint, and the failed messages of an endpoint sent
//! again (`recover`). An endpoint is named by its id or uid, within the caller's environment.

use crate::domain::webhook::example_data;
use crate::domain::{Tenant, Timestamp};
use crate::error::{Error, Result, Validation};
use crate::store::outbox::Event;
use crate::store::page::{Page, PageRequest};
use crate::store::webhook_messages::{AttemptRow, AttemptsOf, MessageRow};
use crate::store::Store;

use super::webhooks::get;

/// The attempts to the endpoint `key`, newest first (`status`: `success` or `failed` only).
pub async fn attempts_of_endpoint(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    status: Option<&str>,
    page: &PageRequest,
) -> Result<Page<AttemptRow>> {
    let e = get(store, tenant, key).await?;
    store
        .list_webhook_attempts(
            &tenant.environment_id,
            AttemptsOf::Endpoint(&e.id),
            status,
            page,
        )
        .await
}

/// The attempts of message `msg`, to the endpoint `endpoint` (id or uid) or to all, newest first.
pub async fn attempts_of_message(
    store: &Store,
    tenant: &Tenant,
    msg: &str,
    endpoint: Option<&str>,
    status: Option<&str>,
    page: &PageRequest,
) -> Result<Page<AttemptRow>> {
    let endpoint = match endpoint {
        Some(key) => Some(get(store, tenant, key).await?.id),
        None => None,
    };
    store
        .list_webhook_attempts(
            &tenant.environment_id,
            AttemptsOf::Message(msg, endpoint.as_deref()),
            status,
            page,
        )
        .await
}

/// The messages to the endpoint `key`, newest first.
pub async fn messages_of_endpoint(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    status: Option<&str>,
    page: &PageRequest,
) -> Result<Page<MessageRow>> {
    let e = get(store, tenant, key).await?;
    store
        .list_webhook_messages(&tenant.environment_id, &e.id, status, page)
        .await
}

/// The endpoints message `msg` went to, each with its message's state; 404 when it went to none.
pub async fn destinations(
    store: &Store,
    tenant: &Tenant,
    msg: &str,
) -> Result<Vec<(crate::domain::webhook::WebhookEndpoint, MessageRow)>> {
    let rows = store
        .webhook_message_destinations(&tenant.environment_id, msg)
        .await?;
    if rows.is_empty() {
        return Err(Error::NotFound("Message not found".into()));
    }
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        // An endpoint deleted since is left out.
        if let Some(e) = store
            .get_webhook_endpoint(&tenant.environment_id, &row.endpoint_id)
            .await?
        {
            out.push((e, row));
        }
    }
    Ok(out)
}

/// Sends an example event of type `kind` to the endpoint `key` (only to it); answers the message's id, the
/// event's id, the envelope and when it was recorded.
pub async fn send_example(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    kind: &str,
) -> Result<(String, String, serde_json::Value, Timestamp)> {
    let Some((kind, data)) = example_data(kind) else {
        let mut v = Validation::new();
        v.add("eventType", format!("unknown event type '{kind}'"), kind);
        return Err(Error::Validation(v));
    };
    let e = get(store, tenant, key).await?;
    let identifier = store
        .environment_of(&tenant.organization_id, &tenant.environment_id)
        .await?
        .map(|row| row.identifier)
        .unwrap_or_default();
    let event = Event {
        environment_id: tenant.environment_id.clone(),
        organization_id: tenant.organization_id.clone(),
        kind,
        data: data.clone(),
    };
    let (id, event_id, at) = store
        .insert_webhook_example(&e, &identifier, &event)
        .await?;
    Ok((id, event_id, data, at))
}

/// Sends again the messages to the endpoint `key` that failed for good, recorded from `since` (and before
/// `until`), Unix ms; answers how many.
pub async fn recover(
    store: &Store,
    tenant: &Tenant,
    key: &str,
    since: i64,
    until: Option<i64>,
) -> Result<u64> {
    let e = get(store, tenant, key).await?;
    store
        .recover_webhook_messages(&tenant.environment_id, &e.id, since, until)
        .await
}
