//! One-click unsubscribe (RFC 8058): what a signed link (`domain::unsubscribe`) names, checked, and the
//! preference it sets — email off for the link's workflow, or for every workflow — through the same
//! `preferences::change` as the API, so the change shows in the subscriber's preferences (source
//! `subscriber`) and later triggers skip their email steps for it.

use std::sync::Arc;

use super::preferences::{self, Change};
use crate::domain::preference::ChannelChoices;
use crate::domain::unsubscribe::UnsubscribeToken;
use crate::domain::workflow::Workflow;
use crate::domain::Tenant;
use crate::error::{Error, Result};
use crate::store::Store;

/// What an unsubscribe turns off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Email of the link's workflow (the one-click default).
    Workflow,
    /// Email of every workflow (the subscriber's global preference).
    AllEmail,
}

impl Scope {
    /// The `scope` form field: absent or `workflow`, or `all`.
    pub fn parse(field: Option<&str>) -> Option<Self> {
        match field {
            None | Some("workflow") => Some(Self::Workflow),
            Some("all") => Some(Self::AllEmail),
            Some(_) => None,
        }
    }
}

/// What a valid link names: its tenant, subscriber and workflow, all still there.
#[derive(Debug, Clone)]
pub struct Target {
    pub tenant: Tenant,
    pub subscriber_id: String,
    pub workflow: Arc<Workflow>,
}

/// The target of `token`, checked without changing anything: a token that does not verify is a 400 (no
/// read is made for it); an environment, subscriber or workflow that no longer exists a 404; a workflow
/// whose preferences subscribers cannot change (critical, read-only defaults) a 400.
pub async fn target(store: &Store, token: &str) -> Result<Target> {
    let t = UnsubscribeToken::verify(token, store.cipher()).ok_or_else(invalid_link)?;
    let gone = |what: &str| Error::NotFound(format!("The {what} of this link no longer exists"));
    let tenant = store
        .environment_tenant(&t.environment_id)
        .await?
        .ok_or_else(|| gone("environment"))?;
    let subscriber_id = store
        .subscriber_id_of(&tenant.environment_id, &t.subscriber_ref)
        .await?
        .ok_or_else(|| gone("subscriber"))?;
    let workflow = store
        .get_workflow(&tenant.environment_id, t.workflow_ref.as_str())
        .await?
        .filter(|w| w.id == t.workflow_ref)
        .ok_or_else(|| gone("notification"))?;
    let workflow = preferences::changeable(Arc::new(workflow))?;
    Ok(Target {
        tenant,
        subscriber_id,
        workflow,
    })
}

/// The refusal of a link whose token does not verify.
pub fn invalid_link() -> Error {
    Error::bad_request("This unsubscribe link is not valid: it may have been cut or changed.")
}

/// Turns email off for the subscriber `token` names, in its workflow or everywhere (`scope`). Idempotent:
/// the same link used again sets what is already set. Nothing changes when [`target`] refuses the token.
pub async fn unsubscribe(store: &Store, token: &str, scope: Scope) -> Result<Target> {
    let target = target(store, token).await?;
    let workflow = match scope {
        Scope::Workflow => Some(target.workflow.id.as_str()),
        Scope::AllEmail => None,
    };
    let change = Change {
        enabled: None,
        channels: ChannelChoices {
            email: Some(false),
            ..Default::default()
        },
    };
    preferences::change(
        store,
        &target.tenant,
        &target.subscriber_id,
        workflow,
        change,
    )
    .await?;
    Ok(target)
}
