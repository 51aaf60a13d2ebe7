//! Step conditions as Novu's v2 workflows and both official SDKs express them: `controlValues.skip`,
//! a [JSON Logic](https://jsonlogic.com) expression over the template variables (`payload`,
//! `subscriber`, `context`, `actor`, `env`, `steps`, `workflow`). As in Novu (whose dashboard calls
//! it "step conditions"), the step **runs when the expression is true** and is skipped when it is
//! false; a missing, null or `{}` `skip` means no condition.
//!
//! [`check`] finds what makes an expression unusable (saved as a step issue); [`step_runs`]
//! evaluates it. The operators are those of json-logic-js that conditions use, with Novu's
//! overrides and additions:
//!
//! | operators | meaning |
//! |---|---|
//! | `var`, `missing` | a variable by dotted path (`payload.user.plan`, `items.0`), with an optional default; the missing paths |
//! | `and`, `or`, `!`, `!!`, `if` (`?:`) | logic with JavaScript truthiness (an empty array is false) |
//! | `==`, `=`, `!=`, `<`, `>`, `<=` (2 or 3 operands), `>=` | booleans (`true`, `"true"`) if both are, else numbers if both convert, else dates if both parse, else strict equality (ordering: false) |
//! | `===`, `!==` | strict equality |
//! | `in` | an element of an array, or a substring of a string |
//! | `startsWith`, `endsWith`, `contains`, `doesNotContain`, `doesNotBeginWith`, `doesNotEndWith` | two strings (anything else: false) |
//! | `containsAny`, `doesNotContainAny`, `notIn` | arrays |
//! | `null`, `notNull` | the value is (not) null |
//! | `between`, `notBetween` | a number within / outside `[min, max]`, inclusive |
//! | `moreThanXAgo`, `lessThanXAgo`, `withinLast`, `notWithinLast`, `exactlyXAgo` | a date against `{amount, unit}` before now |
//! | `cat` | concatenated text |
//!
//! Any other operator is an issue when the workflow is saved, as is a variable outside the
//! namespaces above, an operation with the wrong number of operands or a relative-date operand
//! that is not `{amount > 0, unit}`.

use chrono::{DateTime, Months, NaiveDate, NaiveDateTime, TimeDelta, Utc};
use serde_json::{Map, Value};

/// Where a variable may point: the template variables' namespaces.
pub const NAMESPACES: [&str; 7] = [
    "payload",
    "subscriber",
    "context",
    "actor",
    "env",
    "steps",
    "workflow",
];

/// Units of the relative-date operators.
const RELATIVE_UNITS: [&str; 6] = ["minutes", "hours", "days", "weeks", "months", "years"];

/// Operators taking exactly two operands.
const BINARY: &[&str] = &[
    "==",
    "=",
    "!=",
    "===",
    "!==",
    "<",
    ">",
    ">=",
    "in",
    "startsWith",
    "endsWith",
    "contains",
    "doesNotContain",
    "doesNotBeginWith",
    "doesNotEndWith",
    "containsAny",
    "doesNotContainAny",
    "notIn",
    "between",
    "notBetween",
];

/// Relative-date operators (two operands, the second `{amount, unit}`).
const RELATIVE: [&str; 5] = [
    "moreThanXAgo",
    "lessThanXAgo",
    "withinLast",
    "notWithinLast",
    "exactlyXAgo",
];

/// One problem of a `skip` expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipIssue {
    /// Where in the expression: operators and operand indexes, dotted (`and.1.==`); empty for the
    /// expression itself.
    pub path: String,
    pub message: String,
    /// A required operand or variable name is missing (else the structure or a name is wrong).
    pub missing_value: bool,
}

/// Whether `skip` holds a condition: not absent, null or `{}`.
pub fn is_set(skip: Option<&Value>) -> bool {
    match skip {
        None | Some(Value::Null) => false,
        Some(Value::Object(m)) => !m.is_empty(),
        Some(_) => true,
    }
}

/// The problems that keep `skip` from being evaluated; empty when it can run (or is not set).
pub fn check(skip: &Value) -> Vec<SkipIssue> {
    let mut issues = Vec::new();
    if !is_set(Some(skip)) {
        return issues;
    }
    if !skip.is_object() {
        issues.push(SkipIssue {
            path: String::new(),
            message: "skip must be a JSON Logic object such as {\"==\": [{\"var\": \"payload.plan\"}, \"pro\"]}".into(),
            missing_value: false,
        });
        return issues;
    }
    if skip.as_object().is_some_and(|m| m.len() > 1) {
        issues.push(SkipIssue {
            path: String::new(),
            message: "Invalid node structure: an operation is an object with exactly one operator"
                .into(),
            missing_value: false,
        });
        return issues;
    }
    check_node(skip, "", &mut issues);
    issues
}

fn issue(issues: &mut Vec<SkipIssue>, path: &str, message: String, missing_value: bool) {
    issues.push(SkipIssue {
        path: path.to_owned(),
        message,
        missing_value,
    });
}

fn join(path: &str, part: &str) -> String {
    if path.is_empty() {
        part.to_owned()
    } else {
        format!("{path}.{part}")
    }
}

fn check_node(node: &Value, path: &str, issues: &mut Vec<SkipIssue>) {
    match node {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_node(item, &join(path, &i.to_string()), issues);
            }
        }
        Value::Object(map) => {
            let mut entries = map.iter();
            let (Some((op, args)), None) = (entries.next(), entries.next()) else {
                // Not an operation: a literal object operand (such as `{amount, unit}`).
                return;
            };
            let at = join(path, op);
            if op == "var" {
                check_var(args, &at, issues);
                return;
            }
            let operands = as_operands(args);
            let arity_ok = match op.as_str() {
                "and" | "or" | "missing" | "cat" => true,
                "if" | "?:" => !operands.is_empty(),
                "!" | "!!" | "null" | "notNull" => operands.len() == 1,
                "<=" => matches!(operands.len(), 2 | 3),
                o if BINARY.contains(&o) || RELATIVE.contains(&o) => operands.len() == 2,
                other => {
                    issue(issues, &at, format!("Unknown operator \"{other}\""), false);
                    return;
                }
            };
            if !arity_ok {
                issue(
                    issues,
                    &at,
                    format!(
                        "Invalid operation structure for operator \"{op}\": {} operand(s)",
                        operands.len()
                    ),
                    false,
                );
            }
            if RELATIVE.contains(&op.as_str()) {
                if let Some(rule) = operands.get(1).filter(|r| !is_operation(r)) {
                    if relative(rule).is_none() {
                        issue(
                            issues,
                            &at,
                            format!(
                                "\"{op}\" needs {{amount, unit}} with amount > 0 and unit one of {}",
                                RELATIVE_UNITS.join(", ")
                            ),
                            true,
                        );
                    }
                }
            }
            for (i, operand) in operands.iter().enumerate() {
                check_node(operand, &join(&at, &i.to_string()), issues);
            }
        }
        _ => {}
    }
}

fn check_var(args: &Value, path: &str, issues: &mut Vec<SkipIssue>) {
    let name = match args {
        Value::Array(items) => items.first().cloned().unwrap_or(Value::Null),
        other => other.clone(),
    };
    let name = match name {
        Value::String(s) => s,
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => {
            issue(
                issues,
                path,
                format!("A variable name must be a string, not {other}"),
                false,
            );
            return;
        }
    };
    if name.is_empty() {
        issue(issues, path, "Field variable is required".into(), true);
        return;
    }
    let root = name.split('.').next().unwrap_or_default();
    if !NAMESPACES.contains(&root) {
        issue(
            issues,
            path,
            format!(
                "Unknown variable \"{name}\": a variable starts with one of {}",
                NAMESPACES.join(", ")
            ),
            false,
        );
    }
}

fn is_operation(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.len() == 1)
}

fn as_operands(args: &Value) -> Vec<&Value> {
    match args {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    }
}

/// Whether a step with this `skip` runs for `data` (the template variables) at `now`: true when
/// `skip` is not set or evaluates truthy. `Err` names what cannot be evaluated.
pub fn step_runs(skip: Option<&Value>, data: &Value, now: DateTime<Utc>) -> Result<bool, String> {
    let Some(skip) = skip.filter(|s| is_set(Some(s))) else {
        return Ok(true);
    };
    if let Some(first) = check(skip).into_iter().next() {
        let at = if first.path.is_empty() {
            String::new()
        } else {
            format!(" (at {})", first.path)
        };
        return Err(format!("{}{at}", first.message));
    }
    let mut data = data.clone();
    // Novu reads an unknown presence as offline.
    if let Some(sub) = data.get_mut("subscriber").and_then(Value::as_object_mut) {
        sub.entry("isOnline").or_insert(Value::Bool(false));
    }
    let eval = Eval { data: &data, now };
    Ok(truthy(&eval.node(skip)?))
}

struct Eval<'a> {
    data: &'a Value,
    now: DateTime<Utc>,
}

impl Eval<'_> {
    fn node(&self, node: &Value) -> Result<Value, String> {
        match node {
            Value::Array(items) => Ok(Value::Array(
                items
                    .iter()
                    .map(|i| self.node(i))
                    .collect::<Result<_, _>>()?,
            )),
            Value::Object(map) if map.len() == 1 => {
                let (op, args) = map.iter().next().expect("one entry");
                self.operation(op, as_operands(args))
            }
            other => Ok(other.clone()),
        }
    }

    fn operation(&self, op: &str, args: Vec<&Value>) -> Result<Value, String> {
        // The lazy ones first: their operands are evaluated only as far as needed.
        if let Some(value) = self.lazy(op, &args)? {
            return Ok(value);
        }
        let v: Vec<Value> = args
            .iter()
            .map(|a| self.node(a))
            .collect::<Result<_, _>>()?;
        let a = v.first().unwrap_or(&Value::Null);
        let b = v.get(1).unwrap_or(&Value::Null);
        let text_op = |f: fn(&str, &str) -> bool| match (a, b) {
            (Value::String(x), Value::String(y)) => f(x, y),
            _ => false,
        };
        let out = match op {
            "var" => return Ok(self.var(a, v.get(1))),
            "missing" => {
                let names = match a {
                    Value::Array(items) => items.clone(),
                    _ => v.clone(),
                };
                let missing: Vec<Value> = names
                    .into_iter()
                    .filter(|n| {
                        let found = self.var(n, None);
                        found.is_null() || found == Value::String(String::new())
                    })
                    .collect();
                return Ok(Value::Array(missing));
            }
            "!" => !truthy(a),
            "!!" => truthy(a),
            "==" | "=" => loose_eq(a, b),
            "!=" => !loose_eq(a, b),
            "===" => strict_eq(a, b),
            "!==" => !strict_eq(a, b),
            "<" => order(a, b).is_some_and(|(x, y)| x < y),
            ">" => order(a, b).is_some_and(|(x, y)| x > y),
            ">=" => order(a, b).is_some_and(|(x, y)| x >= y),
            "<=" => match v.get(2) {
                Some(c) => match (order(a, b), order(b, c)) {
                    (Some((x, y)), Some((_, z))) => x <= y && y <= z,
                    _ => false,
                },
                None => order(a, b).is_some_and(|(x, y)| x <= y),
            },
            "in" => match b {
                Value::Array(items) => items.iter().any(|i| strict_eq(a, i)),
                Value::String(s) if !s.is_empty() => s.contains(&js_string(a)),
                _ => false,
            },
            "cat" => return Ok(Value::String(v.iter().map(js_string).collect())),
            "startsWith" => text_op(|x, y| x.starts_with(y)),
            "endsWith" => text_op(|x, y| x.ends_with(y)),
            "contains" => text_op(|x, y| x.contains(y)),
            "doesNotContain" => text_op(|x, y| !x.contains(y)),
            "doesNotBeginWith" => text_op(|x, y| !x.starts_with(y)),
            "doesNotEndWith" => text_op(|x, y| !x.ends_with(y)),
            "containsAny" | "doesNotContainAny" => match (a, b) {
                (Value::Array(items), Value::Array(list)) => {
                    let any = items.iter().any(|i| list.iter().any(|l| strict_eq(i, l)));
                    any == (op == "containsAny")
                }
                _ => false,
            },
            "null" => a.is_null(),
            "notNull" => !a.is_null(),
            "notIn" => match b {
                Value::Array(list) => !list.iter().any(|l| strict_eq(a, l)),
                _ => false,
            },
            "between" | "notBetween" => match (a.as_f64(), range(b)) {
                (Some(x), Some((lo, hi))) => {
                    let within = lo <= x && x <= hi;
                    within == (op == "between")
                }
                _ => false,
            },
            o if RELATIVE.contains(&o) => self.relative_date(o, a, b),
            other => return Err(format!("Unknown operator \"{other}\"")),
        };
        Ok(Value::Bool(out))
    }

    /// The lazy operators (`and`, `or`, `if`): their operands are evaluated only as far as needed. `None`
    /// for the others.
    fn lazy(&self, op: &str, args: &[&Value]) -> Result<Option<Value>, String> {
        match op {
            "and" => {
                let mut last = Value::Null;
                for a in args {
                    last = self.node(a)?;
                    if !truthy(&last) {
                        break;
                    }
                }
                Ok(Some(last))
            }
            "or" => {
                let mut last = Value::Null;
                for a in args {
                    last = self.node(a)?;
                    if truthy(&last) {
                        break;
                    }
                }
                Ok(Some(last))
            }
            "if" | "?:" => {
                let mut i = 0;
                while i + 1 < args.len() {
                    if truthy(&self.node(args[i])?) {
                        return self.node(args[i + 1]).map(Some);
                    }
                    i += 2;
                }
                match args.get(i) {
                    Some(otherwise) if i + 1 == args.len() => self.node(otherwise).map(Some),
                    _ => Ok(Some(Value::Null)),
                }
            }
            _ => Ok(None),
        }
    }

    /// json-logic-js `var`: the value at a dotted path (`""` or null: all the data), else `default`.
    fn var(&self, name: &Value, default: Option<&Value>) -> Value {
        let not_found = || default.cloned().unwrap_or(Value::Null);
        let path = match name {
            Value::Null => return self.data.clone(),
            Value::String(s) if s.is_empty() => return self.data.clone(),
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return not_found(),
        };
        let mut cur = self.data;
        for seg in path.split('.') {
            let next = match cur {
                Value::Object(m) => m.get(seg),
                Value::Array(items) => seg.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            match next {
                Some(v) if !v.is_null() => cur = v,
                _ => return not_found(),
            }
        }
        cur.clone()
    }

    fn relative_date(&self, op: &str, input: &Value, rule: &Value) -> bool {
        let Some((amount, unit)) = relative(rule) else {
            return false;
        };
        let Some(at) = js_date(input) else {
            return false;
        };
        let Some(target) = subtract(self.now, amount, unit) else {
            return false;
        };
        let target = target.timestamp_millis() as f64;
        let now = self.now.timestamp_millis() as f64;
        match op {
            "moreThanXAgo" | "notWithinLast" => at < target,
            "lessThanXAgo" => at >= target,
            "withinLast" => at >= target && at <= now,
            _ => (at - target).abs() <= tolerance_ms(unit),
        }
    }
}

/// `{amount > 0, unit}` of a relative-date operator.
fn relative(rule: &Value) -> Option<(f64, &str)> {
    let amount = rule.get("amount")?.as_f64().filter(|a| *a > 0.0)?;
    let unit = rule
        .get("unit")?
        .as_str()
        .filter(|u| RELATIVE_UNITS.contains(u))?;
    Some((amount, unit))
}

/// `now` minus `amount` `unit`s (months and years by the calendar).
fn subtract(now: DateTime<Utc>, amount: f64, unit: &str) -> Option<DateTime<Utc>> {
    let ms = |per: f64| TimeDelta::try_milliseconds((amount * per) as i64);
    match unit {
        "minutes" => now.checked_sub_signed(ms(60_000.0)?),
        "hours" => now.checked_sub_signed(ms(3_600_000.0)?),
        "days" => now.checked_sub_signed(ms(86_400_000.0)?),
        "weeks" => now.checked_sub_signed(ms(604_800_000.0)?),
        "months" => now.checked_sub_months(Months::new(amount as u32)),
        _ => now.checked_sub_months(Months::new((amount as u32).checked_mul(12)?)),
    }
}

/// How close `exactlyXAgo` must be.
fn tolerance_ms(unit: &str) -> f64 {
    match unit {
        "minutes" => 60_000.0,
        "hours" => 3_600_000.0,
        "years" => 7.0 * 86_400_000.0,
        _ => 86_400_000.0,
    }
}

/// `[min, max]`, both numbers.
fn range(v: &Value) -> Option<(f64, f64)> {
    match v.as_array()?.as_slice() {
        [lo, hi] => Some((lo.as_f64()?, hi.as_f64()?)),
        _ => None,
    }
}

/// JavaScript truthiness as json-logic-js reads it (an empty array is false).
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(_) => true,
    }
}

/// JavaScript `===` (arrays and objects are never equal: they are compared by identity).
fn strict_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(_), _) | (Value::Object(_), _) => false,
        _ => a == b,
    }
}

/// Novu's `==`: booleans if both read as booleans, else numbers if both convert, else dates if
/// both parse, else strict equality.
fn loose_eq(a: &Value, b: &Value) -> bool {
    match comparable(a, b) {
        Some((x, y)) => x == y,
        None => strict_eq(a, b),
    }
}

/// Novu's `<` family: the two values as comparable numbers (booleans as 0/1, dates as
/// milliseconds), or `None` (the comparison is false).
fn order(a: &Value, b: &Value) -> Option<(f64, f64)> {
    comparable(a, b)
}

fn comparable(a: &Value, b: &Value) -> Option<(f64, f64)> {
    if let (Some(x), Some(y)) = (js_boolean(a), js_boolean(b)) {
        return Some((f64::from(u8::from(x)), f64::from(u8::from(y))));
    }
    if let (Some(x), Some(y)) = (js_number(a), js_number(b)) {
        return Some((x, y));
    }
    if let (Value::String(x), Value::String(y)) = (a, b) {
        if let (Some(x), Some(y)) = (date_ms(x), date_ms(y)) {
            return Some((x, y));
        }
    }
    None
}

fn js_boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s == "true" => Some(true),
        Value::String(s) if s == "false" => Some(false),
        _ => None,
    }
}

/// JavaScript `Number(v)`; `None` for NaN.
fn js_number(v: &Value) -> Option<f64> {
    match v {
        Value::Null => Some(0.0),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let t = s.trim();
            if t.is_empty() {
                return Some(0.0);
            }
            let plain = t
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'));
            if plain {
                t.parse::<f64>().ok()
            } else {
                match t {
                    "Infinity" | "+Infinity" => Some(f64::INFINITY),
                    "-Infinity" => Some(f64::NEG_INFINITY),
                    _ => None,
                }
            }
        }
        Value::Array(items) => match items.as_slice() {
            [] => Some(0.0),
            [one] if !one.is_array() && !one.is_object() => {
                js_number(&Value::String(js_string(one)))
            }
            _ => None,
        },
        Value::Object(_) => None,
    }
}

/// JavaScript `String(v)` for the values a condition meets.
fn js_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                if i.is_null() {
                    String::new()
                } else {
                    js_string(i)
                }
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
        other => other.to_string(),
    }
}

/// JavaScript `new Date(v)` in milliseconds (null is the epoch, a number is milliseconds).
fn js_date(v: &Value) -> Option<f64> {
    match v {
        Value::Null => Some(0.0),
        Value::Number(n) => n.as_f64(),
        Value::String(s) => date_ms(s),
        _ => None,
    }
}

/// Milliseconds of an ISO 8601 date or date-time (UTC when no offset is given).
fn date_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
        return Some(dt.timestamp_millis() as f64);
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(s, format) {
            return Some(dt.and_utc().timestamp_millis() as f64);
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|dt| dt.and_utc().timestamp_millis() as f64)
}

/// The values of the variables `skip` reads, for an execution detail: `{"payload.plan": "free"}`.
pub fn read_variables(skip: &Value, data: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    collect_vars(skip, &mut |name| {
        let eval = Eval {
            data,
            now: Utc::now(),
        };
        out.insert(name.to_owned(), eval.var(&Value::String(name.into()), None));
    });
    out
}

fn collect_vars(node: &Value, f: &mut impl FnMut(&str)) {
    match node {
        Value::Array(items) => items.iter().for_each(|i| collect_vars(i, f)),
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("var", Value::String(name)) => f(name),
                    ("var", Value::Array(items)) => {
                        if let Some(Value::String(name)) = items.first() {
                            f(name);
                        }
                    }
                    _ => collect_vars(v, f),
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data() -> Value {
        json!({
            "payload": {
                "plan": "free", "amount": 150, "price": "19.90", "flag": "true",
                "tags": ["beta", "eu"], "createdAt": "2026-11-20T08:00:00.000Z",
                "empty": "", "zero": 0, "items": [{"sku": "A1"}]
            },
            "subscriber": {"subscriberId": "s1", "firstName": "Ada", "email": "ada@example.com",
                           "data": {"vip": true, "age": 36}},
            "context": {"tenant": {"id": "acme", "data": {"region": "eu"}}},
            "actor": null,
            "env": {"name": "Development", "type": "dev"},
            "steps": {},
            "workflow": {"workflowId": "w"}
        })
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-22T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn runs(skip: Value) -> bool {
        assert!(check(&skip).is_empty(), "{skip}: {:?}", check(&skip));
        step_runs(Some(&skip), &data(), now()).expect("evaluates")
    }

    #[test]
    fn no_condition_runs() {
        for s in [json!(null), json!({})] {
            assert!(!is_set(Some(&s)));
            assert!(check(&s).is_empty());
            assert!(step_runs(Some(&s), &data(), now()).unwrap());
        }
        assert!(step_runs(None, &data(), now()).unwrap());
    }

    #[test]
    fn the_dashboard_shapes_evaluate_as_novu_does() {
        let plan = |op: &str, v: Value| json!({"and": [{op: [{"var": "payload.plan"}, v]}]});
        assert!(runs(plan("==", json!("free"))));
        assert!(!runs(plan("==", json!("pro"))));
        assert!(runs(plan("!=", json!("pro"))));
        assert!(runs(plan("=", json!("free"))));
        assert!(runs(json!({"or": [
            {"==": [{"var": "payload.plan"}, "pro"]},
            {">": [{"var": "payload.amount"}, 100]}
        ]})));
        assert!(runs(json!({"!": {"==": [{"var": "payload.plan"}, "pro"]}})));
        // Numbers from text, booleans from text, dates.
        assert!(runs(json!({"==": [{"var": "payload.amount"}, "150"]})));
        assert!(runs(json!({">": [{"var": "payload.price"}, 9.5]})));
        assert!(!runs(json!({"<": [{"var": "payload.price"}, "9"]})));
        assert!(runs(json!({"==": [{"var": "payload.flag"}, true]})));
        assert!(runs(
            json!({"==": [{"var": "subscriber.data.vip"}, "true"]})
        ));
        assert!(runs(
            json!({">": [{"var": "payload.createdAt"}, "2026-11-01"]})
        ));
        assert!(runs(json!({"<=": [100, {"var": "payload.amount"}, 200]})));
        assert!(!runs(json!({"<=": [151, {"var": "payload.amount"}, 200]})));
        assert!(
            !runs(json!({"<": [{"var": "payload.plan"}, "z"]})),
            "text does not order"
        );
    }

    #[test]
    fn null_checks_and_missing_values() {
        assert!(runs(json!({"==": [{"var": "payload.nope"}, null]})));
        assert!(!runs(json!({"!=": [{"var": "payload.nope"}, null]})));
        assert!(runs(json!({"!=": [{"var": "payload.plan"}, null]})));
        assert!(runs(json!({"null": [{"var": "payload.nope"}]})));
        assert!(runs(json!({"notNull": [{"var": "payload.plan"}]})));
        assert!(!runs(json!({"==": [{"var": "payload.nope"}, "free"]})));
        assert!(runs(
            json!({"==": [{"var": ["payload.nope", "dflt"]}, "dflt"]})
        ));
        assert!(runs(
            json!({"in": ["payload.nope", {"missing": ["payload.nope", "payload.plan"]}]})
        ));
        assert!(!runs(json!({"var": "payload.empty"})));
        assert!(runs(json!({"!": [{"var": "payload.zero"}]})));
    }

    #[test]
    fn text_list_and_range_operators() {
        assert!(runs(
            json!({"startsWith": [{"var": "subscriber.email"}, "ada@"]})
        ));
        assert!(runs(
            json!({"endsWith": [{"var": "subscriber.email"}, ".com"]})
        ));
        assert!(runs(
            json!({"contains": [{"var": "subscriber.email"}, "example"]})
        ));
        assert!(!runs(
            json!({"doesNotContain": [{"var": "subscriber.email"}, "example"]})
        ));
        assert!(runs(
            json!({"doesNotBeginWith": [{"var": "subscriber.email"}, "bob"]})
        ));
        assert!(runs(
            json!({"doesNotEndWith": [{"var": "subscriber.email"}, ".org"]})
        ));
        assert!(
            !runs(json!({"startsWith": [{"var": "payload.amount"}, "1"]})),
            "not a string"
        );
        assert!(runs(
            json!({"in": [{"var": "payload.plan"}, ["free", "trial"]]})
        ));
        assert!(runs(json!({"in": ["exam", {"var": "subscriber.email"}]})));
        assert!(!runs(
            json!({"in": [{"var": "payload.plan"}, {"var": "payload.nope"}]})
        ));
        assert!(runs(json!({"notIn": [{"var": "payload.plan"}, ["pro"]]})));
        assert!(runs(
            json!({"containsAny": [{"var": "payload.tags"}, ["eu", "us"]]})
        ));
        assert!(!runs(
            json!({"doesNotContainAny": [{"var": "payload.tags"}, ["eu"]]})
        ));
        assert!(runs(
            json!({"between": [{"var": "payload.amount"}, [100, 200]]})
        ));
        assert!(runs(
            json!({"notBetween": [{"var": "payload.amount"}, [1, 10]]})
        ));
        assert!(
            !runs(json!({"between": [{"var": "payload.price"}, [1, 100]]})),
            "text is no number"
        );
        assert!(runs(json!({"==": [{"cat": ["a", 1, null]}, "a1null"]})));
        assert!(runs(json!({"==": [{"var": "context.tenant.id"}, "acme"]})));
        assert!(runs(json!({"==": [{"var": "payload.items.0.sku"}, "A1"]})));
        assert!(runs(json!({"if": [{"var": "payload.nope"}, false, true]})));
        assert!(runs(json!({"===": [{"var": "payload.amount"}, 150]})));
        assert!(runs(json!({"!==": [{"var": "payload.amount"}, "150"]})));
    }

    #[test]
    fn relative_dates() {
        let d = |op: &str, amount: i64, unit: &str| json!({op: [{"var": "payload.createdAt"}, {"amount": amount, "unit": unit}]});
        // createdAt is two days before `now`.
        assert!(runs(d("moreThanXAgo", 1, "days")));
        assert!(!runs(d("moreThanXAgo", 3, "days")));
        assert!(runs(d("lessThanXAgo", 3, "days")));
        assert!(runs(d("withinLast", 1, "weeks")));
        assert!(runs(d("notWithinLast", 24, "hours")));
        assert!(runs(d("exactlyXAgo", 2, "days")));
        assert!(!runs(d("exactlyXAgo", 4, "days")));
        assert!(runs(d("withinLast", 1, "months")));
        assert!(!runs(d("moreThanXAgo", 1, "years")));
    }

    #[test]
    fn subscriber_presence_defaults_to_offline() {
        assert!(runs(json!({"==": [{"var": "subscriber.isOnline"}, false]})));
    }

    #[test]
    fn malformed_expressions_are_issues() {
        let paths = |skip: Value| -> Vec<(String, bool)> {
            check(&skip)
                .into_iter()
                .map(|i| (i.path, i.missing_value))
                .collect()
        };
        assert_eq!(paths(json!("plan == free")), [(String::new(), false)]);
        assert_eq!(paths(json!([1])), [(String::new(), false)]);
        assert_eq!(
            paths(json!({"and": [{"===": [{"var": "payload.plan"}]}, {"regex": ["a", "b"]}]})),
            [
                ("and.0.===".to_owned(), false),
                ("and.1.regex".to_owned(), false)
            ]
        );
        assert_eq!(
            paths(json!({"==": [{"var": "plan"}, "free"]})),
            [("==.0.var".to_owned(), false)]
        );
        assert_eq!(
            paths(json!({"==": [{"var": ""}, "free"]})),
            [("==.0.var".to_owned(), true)]
        );
        assert_eq!(
            paths(json!({"withinLast": [{"var": "payload.at"}, {"amount": 0, "unit": "days"}]})),
            [("withinLast".to_owned(), true)]
        );
        assert_eq!(paths(json!({"==": 1, "!=": 2})), [(String::new(), false)]);
        let err = step_runs(Some(&json!({"regex": ["a"]})), &data(), now()).unwrap_err();
        assert!(err.contains("Unknown operator \"regex\""), "{err}");
    }

    #[test]
    fn read_variables_names_what_the_condition_saw() {
        let skip = json!({"and": [{"==": [{"var": "payload.plan"}, "pro"]}, {"var": ["payload.nope", 1]}]});
        let seen = read_variables(&skip, &data());
        assert_eq!(
            Value::Object(seen),
            json!({"payload.plan": "free", "payload.nope": null})
        );
    }
}
