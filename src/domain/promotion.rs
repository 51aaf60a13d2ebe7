//! Promotion: what copying one environment's workflows into another would change (the diff) and the writes
//! that make the target match (the plan). Workflows are matched by their trigger identifier (`workflowId`)
//! and steps by `stepId`, so the target keeps its `_id`s when a promotion runs again. Pure: the service
//! reads both environments and the store applies the writes in one transaction.
//!
//! A workflow carries nothing environment-specific: integrations are chosen at delivery in the environment
//! that delivers (its primary or active integration of the channel), never named by a workflow, so every
//! field is copied as it is except the ids, the environment and the creation time.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::workflow::{Step, StepType, Workflow};
use super::{new_object_id, EnvironmentId, OrganizationId, Timestamp, WorkflowRef};

/// What happens to a workflow or a step (Novu's `DiffActionEnum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffAction {
    Added,
    Modified,
    Deleted,
    /// A step whose content is unchanged but whose position changed.
    Moved,
}

impl DiffAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Modified => "modified",
            Self::Deleted => "deleted",
            Self::Moved => "moved",
        }
    }
}

/// One side of a change: the workflow's identifier (or the step's `stepId`), its name and when it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    pub id: String,
    pub name: String,
    pub updated_at: Option<Timestamp>,
}

impl Side {
    fn of_workflow(w: &Workflow) -> Self {
        Self {
            id: w.workflow_id.clone(),
            name: w.name.clone(),
            updated_at: Some(w.updated_at),
        }
    }

    fn of_step(s: &Step) -> Self {
        Self {
            id: s.step_id.clone(),
            name: s.name.clone(),
            updated_at: None,
        }
    }
}

/// One change of a workflow's fields (`step_type` is `None`) or of one of its steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub action: DiffAction,
    pub step_type: Option<StepType>,
    pub source: Option<Side>,
    pub target: Option<Side>,
    pub previous_index: Option<usize>,
    pub new_index: Option<usize>,
    /// The compared fields before (the target's) and after (the source's); `None` for a move.
    pub diffs: Option<(Value, Value)>,
}

/// Everything that changes in one workflow: the workflow-level change first, then its steps' changes.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowDiff {
    pub action: DiffAction,
    pub source: Option<Side>,
    pub target: Option<Side>,
    pub changes: Vec<Change>,
}

/// A write that makes the target match the source; the store applies a plan's writes in one transaction
/// and refuses the whole plan when a target workflow changed since it was read (`expected_version`).
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Create(Workflow),
    Update {
        workflow: Workflow,
        expected_version: i64,
    },
    Delete {
        id: WorkflowRef,
        workflow_id: String,
        name: String,
        expected_version: i64,
    },
}

impl Write {
    /// The target workflow's `_id`, identifier and name.
    pub fn target(&self) -> (&WorkflowRef, &str, &str) {
        match self {
            Self::Create(w)
            | Self::Update {
                workflow: w,
                expected_version: _,
            } => (&w.id, &w.workflow_id, &w.name),
            Self::Delete {
                id,
                workflow_id,
                name,
                expected_version: _,
            } => (id, workflow_id, name),
        }
    }
}

/// Why a source workflow is left out of a promotion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Source and target already match.
    Unchanged,
    /// A step has issues (status ERROR): a broken workflow is not shipped, as Novu does.
    HasIssues,
}

/// A source workflow the plan leaves alone, with the target's `_id` when the target has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub id: String,
    pub name: String,
    pub reason: SkipReason,
}

/// Which workflows a promotion covers.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Only these source workflows (by `_id` or identifier); `None`: all of them.
    pub only: Option<Vec<String>>,
    /// Whether target workflows the source does not have are deleted (a whole-environment publish).
    pub deletes: bool,
}

/// The diff and the writes of a promotion.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub diffs: Vec<WorkflowDiff>,
    pub writes: Vec<Write>,
    pub skipped: Vec<Skipped>,
}

/// The fields a promotion compares and copies, as Novu names them.
fn workflow_fields(w: &Workflow) -> Value {
    json!({
        "name": w.name,
        "description": w.description,
        "tags": w.tags,
        "active": w.active,
        "critical": w.critical,
        "severity": w.severity,
        "preferences": w.preferences,
        "payloadSchema": w.payload_schema,
        "validatePayload": w.validate_payload,
    })
}

fn step_fields(s: &Step) -> Value {
    json!({
        "stepId": s.step_id,
        "name": s.name,
        "type": s.step_type,
        "controlValues": s.control_values,
        "filters": s.filters,
        "shouldStopOnFail": s.should_stop_on_fail,
    })
}

fn step_added(s: &Step, index: usize) -> Change {
    Change {
        action: DiffAction::Added,
        step_type: Some(s.step_type),
        source: Some(Side::of_step(s)),
        target: None,
        previous_index: None,
        new_index: Some(index),
        diffs: Some((json!({}), step_fields(s))),
    }
}

fn step_deleted(s: &Step, index: usize) -> Change {
    Change {
        action: DiffAction::Deleted,
        step_type: Some(s.step_type),
        source: None,
        target: Some(Side::of_step(s)),
        previous_index: Some(index),
        new_index: None,
        diffs: Some((step_fields(s), json!({}))),
    }
}

/// The step changes that turn `target`'s steps into `source`'s (matched by `stepId`).
fn step_changes(source: &[Step], target: &[Step]) -> Vec<Change> {
    let mut changes = Vec::new();
    for (new_index, s) in source.iter().enumerate() {
        let Some((previous_index, t)) = target
            .iter()
            .enumerate()
            .find(|(_, t)| t.step_id == s.step_id)
        else {
            changes.push(step_added(s, new_index));
            continue;
        };
        let (before, after) = (step_fields(t), step_fields(s));
        let action = if before != after {
            DiffAction::Modified
        } else if previous_index != new_index {
            DiffAction::Moved
        } else {
            continue;
        };
        changes.push(Change {
            action,
            step_type: Some(s.step_type),
            source: Some(Side::of_step(s)),
            target: Some(Side::of_step(t)),
            previous_index: Some(previous_index),
            new_index: Some(new_index),
            diffs: (action == DiffAction::Modified).then_some((before, after)),
        });
    }
    for (index, t) in target.iter().enumerate() {
        if !source.iter().any(|s| s.step_id == t.step_id) {
            changes.push(step_deleted(t, index));
        }
    }
    changes
}

/// `source`'s definition under the target's ids: the target workflow's `_id` and creation time (a new
/// `_id` when the target has none), and each step's `_id` where the target has a step of that `stepId`.
fn copy_into(
    source: &Workflow,
    target: Option<&Workflow>,
    into: &(OrganizationId, EnvironmentId),
    now: Timestamp,
) -> Workflow {
    let steps = source
        .steps
        .iter()
        .map(|s| Step {
            id: target
                .and_then(|t| t.steps.iter().find(|x| x.step_id == s.step_id))
                .map_or_else(new_object_id, |x| x.id.clone()),
            ..s.clone()
        })
        .collect();
    Workflow {
        id: target.map_or_else(WorkflowRef::new, |t| t.id.clone()),
        organization_id: into.0.clone(),
        environment_id: into.1.clone(),
        steps,
        version: target.map_or(0, |t| t.version + 1),
        created_at: target.map_or(now, |t| t.created_at),
        updated_at: target.map_or(now, |t| now.max(Timestamp(t.updated_at.0 + 1))),
        ..source.clone()
    }
}

fn in_scope(w: &Workflow, scope: &Scope) -> bool {
    scope.only.as_ref().is_none_or(|only| {
        only.iter()
            .any(|x| x == w.id.as_str() || x == &w.workflow_id)
    })
}

/// The diff and the writes that make `target` (the workflows of the environment `into`) match `source`.
/// Both lists are sorted by identifier, so concurrent promotions write in the same order.
pub fn plan(
    source: &[Workflow],
    target: &[Workflow],
    into: &(OrganizationId, EnvironmentId),
    scope: &Scope,
    now: Timestamp,
) -> Plan {
    let by_identifier: HashMap<&str, &Workflow> =
        target.iter().map(|w| (w.workflow_id.as_str(), w)).collect();
    let mut sorted: Vec<&Workflow> = source.iter().filter(|w| in_scope(w, scope)).collect();
    sorted.sort_by(|a, b| a.workflow_id.cmp(&b.workflow_id));
    let mut plan = Plan::default();
    for s in sorted {
        let t = by_identifier.get(s.workflow_id.as_str()).copied();
        let skip = |reason| Skipped {
            id: t.map_or_else(|| s.id.as_str().to_owned(), |t| t.id.as_str().to_owned()),
            name: s.name.clone(),
            reason,
        };
        if s.has_issues() {
            plan.skipped.push(skip(SkipReason::HasIssues));
            continue;
        }
        let Some(t) = t else {
            plan.diffs.push(WorkflowDiff {
                action: DiffAction::Added,
                source: Some(Side::of_workflow(s)),
                target: None,
                changes: std::iter::once(Change {
                    action: DiffAction::Added,
                    step_type: None,
                    source: Some(Side::of_workflow(s)),
                    target: None,
                    previous_index: None,
                    new_index: None,
                    diffs: Some((json!({}), workflow_fields(s))),
                })
                .chain(step_changes(&s.steps, &[]))
                .collect(),
            });
            plan.writes
                .push(Write::Create(copy_into(s, None, into, now)));
            continue;
        };
        let (before, after) = (workflow_fields(t), workflow_fields(s));
        let mut changes = Vec::new();
        if before != after {
            changes.push(Change {
                action: DiffAction::Modified,
                step_type: None,
                source: Some(Side::of_workflow(s)),
                target: Some(Side::of_workflow(t)),
                previous_index: None,
                new_index: None,
                diffs: Some((before, after)),
            });
        }
        changes.extend(step_changes(&s.steps, &t.steps));
        if changes.is_empty() {
            plan.skipped.push(skip(SkipReason::Unchanged));
            continue;
        }
        plan.diffs.push(WorkflowDiff {
            action: DiffAction::Modified,
            source: Some(Side::of_workflow(s)),
            target: Some(Side::of_workflow(t)),
            changes,
        });
        plan.writes.push(Write::Update {
            workflow: copy_into(s, Some(t), into, now),
            expected_version: t.version,
        });
    }
    if scope.deletes {
        plan_deletes(&mut plan, source, target);
    }
    plan
}

/// Deletes the target workflows whose identifier the source does not have.
fn plan_deletes(plan: &mut Plan, source: &[Workflow], target: &[Workflow]) {
    let mut gone: Vec<&Workflow> = target
        .iter()
        .filter(|t| !source.iter().any(|s| s.workflow_id == t.workflow_id))
        .collect();
    gone.sort_by(|a, b| a.workflow_id.cmp(&b.workflow_id));
    for t in gone {
        plan.diffs.push(WorkflowDiff {
            action: DiffAction::Deleted,
            source: None,
            target: Some(Side::of_workflow(t)),
            changes: std::iter::once(Change {
                action: DiffAction::Deleted,
                step_type: None,
                source: None,
                target: Some(Side::of_workflow(t)),
                previous_index: None,
                new_index: None,
                diffs: Some((workflow_fields(t), json!({}))),
            })
            .chain(step_changes(&[], &t.steps))
            .collect(),
        });
        plan.writes.push(Write::Delete {
            id: t.id.clone(),
            workflow_id: t.workflow_id.clone(),
            name: t.name.clone(),
            expected_version: t.version,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::workflow::{Severity, StepIssues};
    use serde_json::Map;

    fn step(step_id: &str, body: &str) -> Step {
        let mut controls = Map::new();
        controls.insert("body".into(), json!(body));
        Step {
            id: new_object_id(),
            step_id: step_id.into(),
            name: step_id.into(),
            step_type: StepType::InApp,
            control_values: controls,
            filters: Vec::new(),
            should_stop_on_fail: false,
            issues: StepIssues::default(),
        }
    }

    fn workflow(env: &EnvironmentId, identifier: &str, steps: Vec<Step>) -> Workflow {
        Workflow {
            id: WorkflowRef::new(),
            organization_id: OrganizationId::from("org"),
            environment_id: env.clone(),
            workflow_id: identifier.into(),
            name: identifier.into(),
            description: None,
            tags: vec![],
            active: true,
            critical: false,
            severity: Severity::None,
            preferences: None,
            payload_schema: None,
            validate_payload: false,
            steps,
            version: 3,
            created_at: Timestamp(1),
            updated_at: Timestamp(2),
        }
    }

    #[test]
    fn a_second_plan_keeps_the_target_ids_and_finds_nothing_to_do() {
        let (dev, prod) = (EnvironmentId::from("dev"), EnvironmentId::from("prod"));
        let into = (OrganizationId::from("org"), prod.clone());
        let all = Scope {
            only: None,
            deletes: true,
        };
        let source = vec![workflow(&dev, "b", vec![step("s1", "x"), step("s2", "y")])];
        let first = plan(&source, &[], &into, &all, Timestamp(10));
        let Write::Create(created) = &first.writes[0] else {
            panic!("{first:?}")
        };
        assert_eq!(created.environment_id, prod);
        assert_ne!(created.id, source[0].id);
        assert_eq!(
            first.diffs[0].changes.len(),
            3,
            "the workflow and its two steps"
        );
        let again = plan(
            &source,
            std::slice::from_ref(created),
            &into,
            &all,
            Timestamp(11),
        );
        assert!(again.writes.is_empty(), "{again:?}");
        assert_eq!(again.skipped[0].reason, SkipReason::Unchanged);
        assert_eq!(again.skipped[0].id, created.id.as_str());

        // A changed body and a step moved: one update, keeping `_id`s.
        let changed = vec![workflow(&dev, "b", vec![step("s2", "y"), step("s1", "z")])];
        let third = plan(
            &changed,
            std::slice::from_ref(created),
            &into,
            &all,
            Timestamp(12),
        );
        let Write::Update {
            workflow,
            expected_version,
        } = &third.writes[0]
        else {
            panic!("{third:?}")
        };
        assert_eq!(*expected_version, created.version);
        assert_eq!(workflow.id, created.id);
        assert_eq!(workflow.steps[1].id, created.steps[0].id);
        let actions: Vec<DiffAction> = third.diffs[0].changes.iter().map(|c| c.action).collect();
        assert_eq!(actions, [DiffAction::Moved, DiffAction::Modified]);

        // Gone from the source: deleted in the target, unless the scope names workflows.
        let fourth = plan(
            &[],
            std::slice::from_ref(created),
            &into,
            &all,
            Timestamp(13),
        );
        assert!(matches!(fourth.writes[0], Write::Delete { .. }));
        let named = Scope {
            only: Some(vec!["other".into()]),
            deletes: false,
        };
        assert!(plan(
            &[],
            std::slice::from_ref(created),
            &into,
            &named,
            Timestamp(13)
        )
        .writes
        .is_empty());
    }
}
