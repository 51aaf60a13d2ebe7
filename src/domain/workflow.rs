//! Workflows (a trigger identifier and ordered steps), the validation of their steps' control values and
//! preferences, and the `issues` a saved step carries when its controls cannot run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Channel, EnvironmentId, OrganizationId, Timestamp, WorkflowRef};
use crate::error::Validation;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepType {
    InApp,
    Email,
    Sms,
    Chat,
    Push,
    Delay,
    Digest,
    Throttle,
    Custom,
    HttpRequest,
}

impl StepType {
    pub const ALL: [StepType; 10] = [
        Self::InApp,
        Self::Email,
        Self::Sms,
        Self::Chat,
        Self::Push,
        Self::Delay,
        Self::Digest,
        Self::Throttle,
        Self::Custom,
        Self::HttpRequest,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::InApp => "in_app",
            Self::Email => "email",
            Self::Sms => "sms",
            Self::Chat => "chat",
            Self::Push => "push",
            Self::Delay => "delay",
            Self::Digest => "digest",
            Self::Throttle => "throttle",
            Self::Custom => "custom",
            Self::HttpRequest => "http_request",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The channel a provider delivers this step on: email, SMS, chat and push steps; `None` for the
    /// others (in-app messages are stored, not sent through an integration).
    pub fn delivery_channel(self) -> Option<Channel> {
        match self {
            Self::Email => Some(Channel::Email),
            Self::Sms => Some(Channel::Sms),
            Self::Chat => Some(Channel::Chat),
            Self::Push => Some(Channel::Push),
            _ => None,
        }
    }

    /// The channel of a step that reaches the subscriber (in-app included), which preferences turn on and
    /// off; `None` for delay, digest, throttle, custom and http_request steps.
    pub fn channel(self) -> Option<Channel> {
        match self {
            Self::InApp => Some(Channel::InApp),
            other => other.delivery_channel(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    High,
    Medium,
    Low,
    None,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::High => "high",
            Self::Medium => "medium",
            Self::Low => "low",
            Self::None => "none",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::High, Self::Medium, Self::Low, Self::None]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// One step of a workflow, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    #[serde(rename = "_id")]
    pub id: String,
    pub step_id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub step_type: StepType,
    #[serde(default)]
    pub control_values: Map<String, Value>,
    /// StepFilter objects (spec §2.5), evaluated by `domain::filters`.
    #[serde(default)]
    pub filters: Vec<Value>,
    #[serde(default)]
    pub should_stop_on_fail: bool,
    /// What keeps the step from running, found when the workflow was saved (empty: none).
    #[serde(default, skip_serializing_if = "StepIssues::is_empty")]
    pub issues: StepIssues,
}

impl Step {
    /// The look-back window of a backoff digest, in ms: `lookBackWindow {amount, unit}` or `backoffAmount` /
    /// `backoffUnit`, else the digest's own window. `None` for other digests.
    pub fn digest_look_back(&self) -> Option<i64> {
        let c = &self.control_values;
        let is_backoff = c.get("type").and_then(Value::as_str) == Some("backoff")
            || c.get("backoff").and_then(Value::as_bool) == Some(true)
            || c.get("lookBackWindow").is_some_and(Value::is_object);
        if !is_backoff {
            return None;
        }
        let window = |amount: Option<&Value>, unit: Option<&Value>| {
            duration_ms(amount?.as_f64()?, unit?.as_str()?)
        };
        let look_back = c.get("lookBackWindow");
        window(
            look_back.and_then(|l| l.get("amount")),
            look_back.and_then(|l| l.get("unit")),
        )
        .or_else(|| window(c.get("backoffAmount"), c.get("backoffUnit")))
        .or_else(|| window(c.get("amount"), c.get("unit")))
    }
}

/// Novu's `ContentIssueEnum`: the kind of a problem in a step's control values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IssueType {
    /// A template that does not parse (unclosed `{{`, unknown tag or filter, bad filter arguments).
    IllegalVariableInControlValue,
    /// A value the step needs is unusable (e.g. an email body that claims to be a block document and
    /// is not one).
    MissingValue,
}

/// One problem in a step's control values (Novu's `StepContentIssueDto`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentIssue {
    pub issue_type: IssueType,
    /// The offending text (e.g. `{{ payload.name `), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variable_name: Option<String>,
    pub message: String,
}

/// A step's issues (Novu's `StepIssuesDto`): by control key, dotted for nested controls
/// (`primaryAction.label`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StepIssues {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub controls: BTreeMap<String, Vec<ContentIssue>>,
}

impl StepIssues {
    pub fn is_empty(&self) -> bool {
        self.controls.is_empty()
    }

    /// One line naming every issue, for an execution detail: `body: … ; subject: …`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .controls
            .iter()
            .flat_map(|(key, issues)| issues.iter().map(move |i| format!("{key}: {}", i.message)))
            .collect();
        parts.join("; ")
    }
}

/// A workflow's status as Novu reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkflowStatus {
    /// Active, and every step can run.
    Active,
    /// Not active: triggers are refused.
    Inactive,
    /// Active, but a step has issues (it fails when a notification reaches it).
    Error,
}

impl WorkflowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "ACTIVE",
            Self::Inactive => "INACTIVE",
            Self::Error => "ERROR",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Active, Self::Inactive, Self::Error]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

impl TryFrom<String> for Severity {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s).ok_or_else(|| format!("unknown severity {s:?}"))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    pub id: WorkflowRef,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    /// The trigger identifier.
    pub workflow_id: String,
    pub name: String,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub active: bool,
    pub critical: bool,
    pub severity: Severity,
    /// `{user, workflow}` exactly as last sent (see [`validate_preferences`]): the defaults the engine applies
    /// (`domain::preference`).
    pub preferences: Option<Value>,
    pub payload_schema: Option<Value>,
    pub validate_payload: bool,
    pub steps: Vec<Step>,
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Workflow {
    /// A step by `_id` or `stepId`.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id || s.step_id == id)
    }

    /// Whether any step has issues.
    pub fn has_issues(&self) -> bool {
        self.steps.iter().any(|s| !s.issues.is_empty())
    }

    /// Inactive, else ERROR when a step has issues, else ACTIVE (as Novu computes it).
    pub fn status(&self) -> WorkflowStatus {
        if !self.active {
            WorkflowStatus::Inactive
        } else if self.has_issues() {
            WorkflowStatus::Error
        } else {
            WorkflowStatus::Active
        }
    }
}

/// Checks a workflow's `preferences`: `{user, workflow}`, each null or `{all: {enabled?, readOnly?},
/// channels: {<channel>: {enabled?}}}` (Novu's `PreferencesRequestDto`), nothing else. Both `all` and
/// `channels` are required, as the SDKs' response models require them.
pub fn validate_preferences(v: &mut Validation, field: &str, prefs: &Value) {
    let Some(obj) = prefs.as_object() else {
        v.add(
            field,
            "preferences must be an object {user, workflow}",
            prefs.clone(),
        );
        return;
    };
    for (key, level) in obj {
        let at = format!("{field}.{key}");
        if key != "user" && key != "workflow" {
            v.add(
                &at,
                "preferences take only `user` and `workflow`",
                level.clone(),
            );
            continue;
        }
        if level.is_null() {
            continue;
        }
        let Some(level_obj) = level.as_object() else {
            v.add(
                &at,
                format!("{key} must be null or an object {{all, channels}}"),
                level.clone(),
            );
            continue;
        };
        for required in ["all", "channels"] {
            if !level_obj.contains_key(required) {
                v.add(
                    &format!("{at}.{required}"),
                    format!("{key}.{required} is required"),
                    Value::Null,
                );
            }
        }
        for (k, x) in level_obj {
            let at = format!("{at}.{k}");
            match k.as_str() {
                "all" => check_flags(v, &at, x, &["enabled", "readOnly"]),
                "channels" => match x.as_object() {
                    None => v.add(
                        &at,
                        "channels must be an object keyed by channel",
                        x.clone(),
                    ),
                    Some(channels) => {
                        for (c, pref) in channels {
                            let at = format!("{at}.{c}");
                            if Channel::parse(c).is_none() {
                                v.add(&at, Channel::EXPECTED, pref.clone());
                            } else {
                                check_flags(v, &at, pref, &["enabled"]);
                            }
                        }
                    }
                },
                _ => v.add(
                    &at,
                    format!("{key} takes only `all` and `channels`"),
                    x.clone(),
                ),
            }
        }
    }
}

/// `value` is an object whose keys are among `flags`, each a boolean.
fn check_flags(v: &mut Validation, field: &str, value: &Value, flags: &[&str]) {
    let Some(obj) = value.as_object() else {
        v.add(
            field,
            format!("must be an object {{{}}} of booleans", flags.join(", ")),
            value.clone(),
        );
        return;
    };
    for (k, x) in obj {
        if !flags.contains(&k.as_str()) {
            v.add(
                &format!("{field}.{k}"),
                format!("only {} may be set here", flags.join(", ")),
                x.clone(),
            );
        } else if !x.is_boolean() {
            v.add(
                &format!("{field}.{k}"),
                format!("{k} must be a boolean"),
                x.clone(),
            );
        }
    }
}

/// `Hello World!` → `hello-world`: identifiers derived from names.
pub fn slugify(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_owned()
}

/// Identifiers (workflowId, stepId): 1–100 of `[A-Za-z0-9_.-]`.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

pub const TIME_UNITS: &[&str] = &["seconds", "minutes", "hours", "days", "weeks", "months"];

/// Milliseconds in `amount` `unit`s (months count as 30 days).
pub fn duration_ms(amount: f64, unit: &str) -> Option<i64> {
    let unit_ms: f64 = match unit {
        "seconds" => 1_000.0,
        "minutes" => 60_000.0,
        "hours" => 3_600_000.0,
        "days" => 86_400_000.0,
        "weeks" => 604_800_000.0,
        "months" => 2_592_000_000.0,
        _ => return None,
    };
    let ms = amount * unit_ms;
    (ms.is_finite() && ms >= 0.0).then_some(ms as i64)
}

fn check_string(v: &mut Validation, field: &str, controls: &Map<String, Value>, key: &str) {
    if let Some(x) = controls.get(key) {
        if !x.is_string() && !x.is_null() {
            v.add(
                &format!("{field}.{key}"),
                format!("{key} must be a string"),
                x.clone(),
            );
        }
    }
}

/// `timed` of a timed digest: `atTime` `HH:MM`, `weekDays` names, `monthDays` 1–31.
fn check_timed(v: &mut Validation, field: &str, controls: &Map<String, Value>) {
    let Some(timed) = controls.get("timed").filter(|t| !t.is_null()) else {
        return;
    };
    let Some(t) = timed.as_object() else {
        v.add(
            &format!("{field}.timed"),
            "timed must be an object",
            timed.clone(),
        );
        return;
    };
    if let Some(a) = t.get("atTime") {
        let ok = a
            .as_str()
            .is_some_and(|s| chrono::NaiveTime::parse_from_str(s, "%H:%M").is_ok());
        if !ok {
            v.add(
                &format!("{field}.timed.atTime"),
                "atTime must be a time of day as HH:MM (24-hour clock, UTC)",
                a.clone(),
            );
        }
    }
    const DAYS: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    if let Some(w) = t.get("weekDays") {
        let ok = w.as_array().is_some_and(|a| {
            a.iter().all(|d| {
                d.as_str()
                    .is_some_and(|d| DAYS.contains(&d.to_ascii_lowercase().as_str()))
            })
        });
        if !ok {
            v.add(
                &format!("{field}.timed.weekDays"),
                "weekDays must be an array of monday … sunday",
                w.clone(),
            );
        }
    }
    if let Some(m) = t.get("monthDays") {
        let ok = m.as_array().is_some_and(|a| {
            a.iter().all(|d| {
                d.as_u64()
                    .or_else(|| d.as_str().and_then(|s| s.trim().parse().ok()))
                    .is_some_and(|n| (1..=31).contains(&n))
            })
        });
        if !ok {
            v.add(
                &format!("{field}.timed.monthDays"),
                "monthDays must be an array of days of the month, 1 to 31",
                m.clone(),
            );
        }
    }
}

fn check_amount_unit(v: &mut Validation, field: &str, controls: &Map<String, Value>) {
    if let Some(a) = controls.get("amount") {
        if !a.as_f64().is_some_and(|n| n >= 0.0) {
            v.add(
                &format!("{field}.amount"),
                "amount must be a non-negative number",
                a.clone(),
            );
        }
    }
    if let Some(u) = controls.get("unit") {
        if !u.as_str().is_some_and(|u| TIME_UNITS.contains(&u)) {
            v.add(
                &format!("{field}.unit"),
                format!("unit must be one of {}", TIME_UNITS.join(", ")),
                u.clone(),
            );
        }
    }
}

fn check_action(v: &mut Validation, field: &str, controls: &Map<String, Value>, key: &str) {
    let Some(action) = controls.get(key).filter(|a| !a.is_null()) else {
        return;
    };
    let Some(obj) = action.as_object() else {
        v.add(
            &format!("{field}.{key}"),
            format!("{key} must be an object {{label, redirect}}"),
            action.clone(),
        );
        return;
    };
    check_string(v, &format!("{field}.{key}"), obj, "label");
    if let Some(r) = obj.get("redirect").filter(|r| !r.is_null()) {
        if !r.get("url").is_some_and(Value::is_string) {
            v.add(
                &format!("{field}.{key}.redirect"),
                "redirect needs a url string",
                r.clone(),
            );
        }
    }
}

/// Checks the control values of a step of type `t`; `field` prefixes error paths (e.g. `steps[0].controlValues`).
pub fn validate_controls(
    v: &mut Validation,
    field: &str,
    t: StepType,
    controls: &Map<String, Value>,
) {
    match t {
        StepType::Email => {
            for k in ["subject", "body", "editorType"] {
                check_string(v, field, controls, k);
            }
        }
        StepType::InApp => check_in_app(v, field, controls),
        StepType::Sms | StepType::Chat => check_string(v, field, controls, "body"),
        StepType::Push => {
            check_string(v, field, controls, "subject");
            check_string(v, field, controls, "body");
        }
        StepType::Delay => {
            check_amount_unit(v, field, controls);
            match controls.get("type").and_then(Value::as_str) {
                None | Some("regular") => {}
                Some("scheduled") => {
                    if !controls.get("delayPath").is_some_and(Value::is_string) {
                        v.add(
                            &format!("{field}.delayPath"),
                            "a scheduled delay needs delayPath",
                            Value::Null,
                        );
                    }
                }
                Some(other) => v.add(
                    &format!("{field}.type"),
                    "delay type must be regular or scheduled",
                    other,
                ),
            }
        }
        StepType::Digest => {
            check_amount_unit(v, field, controls);
            check_string(v, field, controls, "digestKey");
            if let Some(t) = controls.get("type").and_then(Value::as_str) {
                if !matches!(t, "regular" | "backoff" | "timed") {
                    v.add(
                        &format!("{field}.type"),
                        "digest type must be regular, backoff or timed",
                        t,
                    );
                }
            }
            check_timed(v, field, controls);
            if let Some(c) = controls.get("cron").filter(|c| !c.is_null()) {
                v.add(
                    &format!("{field}.cron"),
                    "cron schedules are not supported: use type timed with timed.atTime, timed.weekDays and timed.monthDays",
                    c.clone(),
                );
            }
        }
        StepType::Throttle => {
            check_amount_unit(v, field, controls);
            if let Some(t) = controls.get("threshold") {
                if t.as_u64().is_none_or(|n| n < 1) {
                    v.add(
                        &format!("{field}.threshold"),
                        "threshold must be a positive integer",
                        t.clone(),
                    );
                }
            }
        }
        StepType::HttpRequest => check_http_request(v, field, controls),
        StepType::Custom => {}
    }
}

/// The in-app step's controls: texts, actions, `redirect.url` and `data`.
fn check_in_app(v: &mut Validation, field: &str, controls: &Map<String, Value>) {
    for k in ["subject", "body", "avatar"] {
        check_string(v, field, controls, k);
    }
    check_action(v, field, controls, "primaryAction");
    check_action(v, field, controls, "secondaryAction");
    if let Some(r) = controls.get("redirect").filter(|r| !r.is_null()) {
        if !r.get("url").is_some_and(Value::is_string) {
            v.add(
                &format!("{field}.redirect"),
                "redirect needs a url string",
                r.clone(),
            );
        }
    }
    if let Some(d) = controls.get("data").filter(|d| !d.is_null()) {
        if !d.is_object() {
            v.add(
                &format!("{field}.data"),
                "data must be an object",
                d.clone(),
            );
        }
    }
}

/// The `http_request` step's controls: `url`, `method`, and `headers` and `body` as objects.
fn check_http_request(v: &mut Validation, field: &str, controls: &Map<String, Value>) {
    check_string(v, field, controls, "url");
    if let Some(m) = controls.get("method") {
        if !m
            .as_str()
            .is_some_and(|m| matches!(m, "GET" | "POST" | "PUT" | "PATCH" | "DELETE"))
        {
            v.add(
                &format!("{field}.method"),
                "method must be GET, POST, PUT, PATCH or DELETE",
                m.clone(),
            );
        }
    }
    for k in ["headers", "body"] {
        if let Some(x) = controls.get(k).filter(|x| !x.is_null()) {
            if !x.is_object() && !x.is_array() && !x.is_string() {
                v.add(
                    &format!("{field}.{k}"),
                    format!("{k} must be an object"),
                    x.clone(),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slugs_and_identifiers() {
        assert_eq!(slugify("Welcome Email!"), "welcome-email");
        assert_eq!(slugify("  In-App  "), "in-app");
        assert!(is_identifier("welcome_email.v2"));
        assert!(!is_identifier("has space"));
        assert!(!is_identifier(""));
    }

    #[test]
    fn durations() {
        assert_eq!(duration_ms(5.0, "minutes"), Some(300_000));
        assert_eq!(duration_ms(1.5, "seconds"), Some(1_500));
        assert_eq!(duration_ms(1.0, "fortnights"), None);
    }

    #[test]
    fn controls_are_checked_per_type() {
        let mut v = Validation::new();
        let c = json!({"amount": -1, "unit": "years"});
        validate_controls(&mut v, "c", StepType::Delay, c.as_object().unwrap());
        assert_eq!(v.0.len(), 2);
        let mut v = Validation::new();
        let c = json!({"type": "scheduled"});
        validate_controls(&mut v, "c", StepType::Delay, c.as_object().unwrap());
        assert_eq!(v.0[0].field, "c.delayPath");
        let mut v = Validation::new();
        let c = json!({"subject": 1, "body": "ok"});
        validate_controls(&mut v, "c", StepType::Email, c.as_object().unwrap());
        assert_eq!(v.0[0].field, "c.subject");
        let mut v = Validation::new();
        let c = json!({"method": "FETCH", "url": "https://x"});
        validate_controls(&mut v, "c", StepType::HttpRequest, c.as_object().unwrap());
        assert_eq!(v.0[0].field, "c.method");
        let mut v = Validation::new();
        let c = json!({"body": "hi", "primaryAction": {"label": "Go", "redirect": {"url": "https://x"}}, "data": {"a": 1}});
        validate_controls(&mut v, "c", StepType::InApp, c.as_object().unwrap());
        assert!(v.is_empty());
    }

    #[test]
    fn preferences_take_novus_shape_only() {
        let ok = json!({
            "user": {"all": {"enabled": false, "readOnly": true}, "channels": {"email": {"enabled": false}}},
            "workflow": null
        });
        let mut v = Validation::new();
        validate_preferences(&mut v, "p", &ok);
        assert!(v.is_empty(), "{v}");
        let mut v = Validation::new();
        validate_preferences(
            &mut v,
            "p",
            &json!({"user": {"all": {}, "channels": {"fax": {}}, "x": 1}}),
        );
        let fields: Vec<&str> = v.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["p.user.channels.fax", "p.user.x"]);
        let mut v = Validation::new();
        validate_preferences(&mut v, "p", &json!({"workflow": {"channels": {}}}));
        assert_eq!(v.0[0].field, "p.workflow.all");
    }

    #[test]
    fn status_follows_active_then_issues() {
        let step = Step {
            id: "s".into(),
            step_id: "s".into(),
            name: "s".into(),
            step_type: StepType::InApp,
            control_values: Map::new(),
            filters: Vec::new(),
            should_stop_on_fail: false,
            issues: StepIssues::default(),
        };
        let mut w = Workflow {
            id: "w".into(),
            organization_id: "o".into(),
            environment_id: "e".into(),
            workflow_id: "w".into(),
            name: "w".into(),
            description: None,
            tags: Vec::new(),
            active: true,
            critical: false,
            severity: Severity::None,
            preferences: None,
            payload_schema: None,
            validate_payload: false,
            steps: vec![step],
            version: 0,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        };
        assert_eq!(w.status(), WorkflowStatus::Active);
        w.steps[0].issues.controls.insert(
            "body".into(),
            vec![ContentIssue {
                issue_type: IssueType::IllegalVariableInControlValue,
                variable_name: None,
                message: "bad".into(),
            }],
        );
        assert_eq!(w.status(), WorkflowStatus::Error);
        assert_eq!(w.steps[0].issues.summary(), "body: bad");
        // Stored steps without issues keep their JSON as before.
        w.steps[0].issues = StepIssues::default();
        assert!(!serde_json::to_string(&w.steps[0])
            .unwrap()
            .contains("issues"));
        w.active = false;
        assert_eq!(w.status(), WorkflowStatus::Inactive);
    }
}
