//! The choose phase: which integrations a run tries, in which order.

use serde_json::Value;

use super::{Resolved, State, Undelivered};
use crate::domain::filters::{passes, StepFilter};
use crate::domain::integration::Integration;
use crate::domain::job::Job;
use crate::domain::subscriber::Subscriber;
use crate::domain::Channel;
use crate::engine::steps::Runner;
use crate::error::Result;

impl Runner {
    /// The environment's active integrations of the step's channel.
    pub(super) async fn active_integrations(&self, r: &Resolved<'_>) -> Result<Vec<Integration>> {
        Ok(self
            .store
            .list_integrations(&r.env, true)
            .await?
            .into_iter()
            .filter(|i| i.channel == Some(r.step.channel))
            .collect())
    }
}

/// The integrations a run tries, in order: chosen at the first attempt (`choose`); later attempts keep the
/// order fixed then, an integration deleted or deactivated since being skipped (`None`).
pub(super) fn candidates(
    r: &Resolved<'_>,
    state: &State,
    active: &[Integration],
) -> std::result::Result<Vec<Option<Integration>>, Undelivered> {
    if state.integrations.is_empty() {
        return choose(r.step.job, r.step.channel, active, r.subscriber);
    }
    Ok(state
        .integrations
        .iter()
        .map(|id| active.iter().find(|i| i.id.as_str() == id).cloned())
        .collect())
}

/// The candidates' ids, as the state stores them (an empty id for one skipped).
pub(super) fn ids(candidates: &[Option<Integration>]) -> Vec<String> {
    candidates
        .iter()
        .map(|c| {
            c.as_ref()
                .map_or_else(String::new, |i| i.id.as_str().to_owned())
        })
        .collect()
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
    let subscriber_json = subscriber.values();
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixtures::{integration, notification, step_job, subscriber};
    use super::super::{resolve, ChannelJob};
    use super::*;

    /// The ids `candidates` picks for an email job with these overrides, resuming from `state`.
    fn picked(
        overrides: Option<Value>,
        state: &State,
        active: &[Integration],
    ) -> std::result::Result<Vec<String>, Undelivered> {
        let job = step_job("email", json!({}), overrides);
        let n = notification();
        let s = subscriber();
        let r = resolve(ChannelJob::new(&job, &n), Some(&s)).ok().unwrap();
        candidates(&r, state, active).map(|c| ids(&c))
    }

    fn active() -> Vec<Integration> {
        let mut old_primary = integration("i1", "sendgrid", 100);
        old_primary.primary = true;
        let mut high = integration("i2", "mailgun", 200);
        high.priority = 5;
        let newer = integration("i3", "postmark", 300);
        let mut unmatched = integration("i4", "ses", 400);
        unmatched.conditions = Some(json!([{"children": [
            {"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"}]}]));
        vec![newer, unmatched, high, old_primary]
    }

    #[test]
    fn the_first_attempt_orders_matching_integrations_primary_priority_newest() {
        let fresh = State::default();
        assert_eq!(picked(None, &fresh, &active()).unwrap(), ["i1", "i2", "i3"]);
    }

    #[test]
    fn an_integration_named_by_the_overrides_is_tried_alone() {
        let fresh = State::default();
        let by_channel = json!({"email": {"integrationIdentifier": "i3-identifier"}});
        assert_eq!(picked(Some(by_channel), &fresh, &active()).unwrap(), ["i3"]);
        // The step's own override wins over the channel's.
        let by_step = json!({"email": {"integrationIdentifier": "i3-identifier"},
            "steps": {"step-1": {"integrationIdentifier": "i4-identifier"}}});
        assert_eq!(picked(Some(by_step), &fresh, &active()).unwrap(), ["i4"]);
        let missing = json!({"email": {"integrationIdentifier": "gone"}});
        let why = picked(Some(missing), &fresh, &active()).unwrap_err();
        assert_eq!(why.error_id, "integration_not_found");
        assert_eq!(
            why.text,
            "The overrides name integration gone, which is not an active email integration of this environment"
        );
    }

    #[test]
    fn no_candidate_says_whether_none_is_active_or_none_matches() {
        let fresh = State::default();
        let why = picked(None, &fresh, &[]).unwrap_err();
        assert_eq!(
            why,
            Undelivered {
                error_id: "no_integration",
                text: "No active email integration in this environment".into()
            }
        );
        let only_unmatched = vec![active().remove(1)];
        let why = picked(None, &fresh, &only_unmatched).unwrap_err();
        assert_eq!(
            why.text,
            "No active email integration's conditions match this trigger"
        );
    }

    #[test]
    fn later_attempts_keep_the_first_order_and_skip_integrations_gone_since() {
        let resumed = State {
            integrations: vec!["i3".into(), "gone".into(), "i1".into()],
            ..Default::default()
        };
        assert_eq!(picked(None, &resumed, &active()).unwrap(), ["i3", "", "i1"]);
    }
}
