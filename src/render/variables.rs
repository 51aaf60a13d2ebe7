//! Which variables a Liquid template reads, and an example object that satisfies them.
//!
//! The `liquid` crate does not expose its syntax tree, so this is a small hand-written scanner
//! over `{{ … }}` and `{% … %}` tags. It skips string literals, filter names and keyword-argument
//! names, follows `{% for %}` / `{% tablerow %}` loop variables and `{% assign x = path %}`
//! aliases back to the global path they stand for, and ignores locals (`forloop`, `capture`,
//! `increment`, ranges). Everything inside `{% raw %}` and `{% comment %}` is skipped.
//!
//! The same scan also yields the private *fill plan* the renderer uses: the paths read from
//! loop items and assigned values, which Liquid copies into strict values (see [`FillPlan`]).

use serde_json::{Map, Value};

/// One variable path a template reads.
///
/// `{{ payload.user.name }}` gives `path = ["payload", "user", "name"]`.
/// `{% for item in payload.items %}{{ item.name }}{% endfor %}` gives
/// `path = ["payload", "items"]`, `is_array_loop = true` and one item field with
/// `path = ["name"]` (item fields are relative to one element of the array; they may be loops
/// themselves). An index (`payload.items[0].name`, `.first`, `.last`) counts as an array use too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarUse {
    /// Path segments from the root variable (`payload`, `subscriber`, `steps`, …), or, for item
    /// fields, from one element of the enclosing array.
    pub path: Vec<String>,
    /// The value at `path` is used as an array (looped over or indexed).
    pub is_array_loop: bool,
    /// For arrays: the paths read from each element, relative to the element.
    pub item_fields: Vec<VarUse>,
}

/// A segment of a path as the scanner resolves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    /// "an element of this array" (loop item, `[0]`, `.first`, `.last`).
    Each,
    /// From here on, Liquid holds a copy made by `{% assign %}` (strict lookups).
    Owned,
}

/// The variable paths `template` references, in order of first use.
///
/// Duplicates are merged, and a plain path that is a prefix of a longer one is dropped
/// (`payload.user` next to `payload.user.name` reports only the latter), as the preview's
/// example builder expects. Trailing `.size` is read as Liquid's size property, not a key.
pub fn variables_used(template: &str) -> Vec<VarUse> {
    let refs = scan(template);
    let plain: Vec<Vec<Seg>> = refs
        .into_iter()
        .map(|segs| segs.into_iter().filter(|s| *s != Seg::Owned).collect())
        .collect();
    build_uses(&plain)
}

/// An example value for the variables `uses` reads, e.g. `payload.user.name` and a loop over
/// `payload.items` reading `name` give
/// `{"payload": {"user": {"name": "name"}, "items": [{"name": "name"}]}}`.
///
/// Every leaf is its last path segment as a string; arrays get one element. Uses from several
/// templates may be concatenated and passed together: the results are deep-merged (objects win
/// over string leaves).
pub fn example_from_variables(uses: &[VarUse]) -> Value {
    let mut root = Value::Object(Map::new());
    for u in uses {
        merge_example(&mut root, single_example(u));
    }
    root
}

fn single_example(u: &VarUse) -> Value {
    let leaf_name = u.path.last().map_or("item", String::as_str);
    let mut value = if u.is_array_loop {
        Value::Array(vec![item_example(&u.item_fields, leaf_name)])
    } else {
        Value::String(leaf_name.to_owned())
    };
    for seg in u.path.iter().rev() {
        let mut map = Map::new();
        map.insert(seg.clone(), value);
        value = Value::Object(map);
    }
    value
}

/// The example for one array element reading `fields`.
fn item_example(fields: &[VarUse], name: &str) -> Value {
    if fields.is_empty() {
        return Value::String(name.to_owned());
    }
    // An element that is itself looped over (`{% for cell in row %}`) has an empty-path use.
    if let Some(whole) = fields.iter().find(|f| f.path.is_empty()) {
        if fields.iter().all(|f| f.path.is_empty()) {
            return single_example(whole);
        }
    }
    let named: Vec<VarUse> = fields
        .iter()
        .filter(|f| !f.path.is_empty())
        .cloned()
        .collect();
    example_from_variables(&named)
}

/// Deep-merges `new` into `existing`: objects merge key by key, arrays merge their first
/// elements, a structured value replaces a string leaf, and otherwise `existing` wins.
fn merge_example(existing: &mut Value, new: Value) {
    match (existing, new) {
        (Value::Object(old), Value::Object(new)) => {
            for (k, v) in new {
                match old.get_mut(&k) {
                    Some(slot) => merge_example(slot, v),
                    None => {
                        old.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(old), Value::Array(new)) => {
            if let Some(first_new) = new.into_iter().next() {
                match old.first_mut() {
                    Some(first_old) => merge_example(first_old, first_new),
                    None => old.push(first_new),
                }
            }
        }
        (slot @ Value::String(_), new @ (Value::Object(_) | Value::Array(_))) => *slot = new,
        _ => {}
    }
}

/// Groups resolved paths into the public tree.
fn build_uses(paths: &[Vec<Seg>]) -> Vec<VarUse> {
    // (prefix, is_array, sub-paths after the first Each), in order of first appearance.
    let mut groups: Vec<(Vec<String>, bool, Vec<Vec<Seg>>)> = Vec::new();
    for path in paths {
        let split = path.iter().position(|s| *s == Seg::Each);
        let prefix_end = split.unwrap_or(path.len());
        let prefix: Vec<String> = path[..prefix_end]
            .iter()
            .filter_map(|s| match s {
                Seg::Key(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        let idx = match groups.iter().position(|g| g.0 == prefix) {
            Some(i) => i,
            None => {
                groups.push((prefix, false, Vec::new()));
                groups.len() - 1
            }
        };
        if let Some(split) = split {
            groups[idx].1 = true;
            let rest = path[split + 1..].to_vec();
            if !rest.is_empty() && !groups[idx].2.contains(&rest) {
                groups[idx].2.push(rest);
            }
        }
    }
    let uses: Vec<VarUse> = groups
        .into_iter()
        .map(|(path, is_array_loop, subs)| VarUse {
            path,
            is_array_loop,
            item_fields: build_uses(&subs),
        })
        .collect();
    // Drop plain paths that are prefixes of longer ones.
    uses.iter()
        .filter(|u| {
            u.is_array_loop
                || !uses
                    .iter()
                    .any(|v| v.path.len() > u.path.len() && v.path.starts_with(&u.path))
        })
        .cloned()
        .collect()
}

/// The private fill plan: a trie of the paths read through Liquid's strict copies.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct FillPlan {
    keys: Vec<(String, FillPlan)>,
    each: Option<Box<FillPlan>>,
    /// Values from here on are copies (lookups are strict).
    owned: bool,
}

impl FillPlan {
    /// The plan for `template`, or `None` when nothing is read through a copy (no loops or
    /// assigned aliases), which is the common case.
    pub(crate) fn for_template(template: &str) -> Option<FillPlan> {
        let mut plan = FillPlan::default();
        let mut any = false;
        for segs in scan(template) {
            if segs.iter().any(|s| matches!(s, Seg::Each | Seg::Owned)) {
                plan.insert(&segs);
                any = true;
            }
        }
        any.then_some(plan)
    }

    fn insert(&mut self, segs: &[Seg]) {
        let Some((first, rest)) = segs.split_first() else {
            return;
        };
        match first {
            Seg::Owned => {
                self.owned = true;
                self.insert(rest);
            }
            Seg::Each => self.each.get_or_insert_with(Default::default).insert(rest),
            Seg::Key(k) => {
                let child = match self.keys.iter().position(|(name, _)| name == k) {
                    Some(i) => &mut self.keys[i].1,
                    None => {
                        self.keys.push((k.clone(), FillPlan::default()));
                        &mut self.keys.last_mut().expect("just pushed").1
                    }
                };
                child.insert(rest);
            }
        }
    }

    /// The plan of every path `template` reads (not only those read through copies).
    fn all_paths(template: &str) -> FillPlan {
        let mut plan = FillPlan::default();
        for segs in scan(template) {
            plan.insert(&segs);
        }
        plan
    }

    /// Replaces with `null` every text, number or boolean whose fields the plan reads (other than
    /// Liquid's `size`, `first` and `last`); true when anything changed.
    fn blank_scalar_parents(&self, value: &mut Value) -> bool {
        let mut changed = false;
        if let Value::Object(map) = value {
            for (k, child) in &self.keys {
                let Some(v) = map.get_mut(k) else { continue };
                let reads_fields = child
                    .keys
                    .iter()
                    .any(|(f, _)| !matches!(f.as_str(), "size" | "first" | "last"))
                    || child.each.is_some();
                if reads_fields && !v.is_object() && !v.is_array() && !v.is_null() {
                    *v = Value::Null;
                    changed = true;
                } else {
                    changed |= child.blank_scalar_parents(v);
                }
            }
        }
        if let (Some(each), Value::Array(items)) = (&self.each, value) {
            for item in items {
                if !each.keys.is_empty() && !item.is_object() && !item.is_array() && !item.is_null()
                {
                    *item = Value::Null;
                    changed = true;
                } else {
                    changed |= each.blank_scalar_parents(item);
                }
            }
        }
        changed
    }

    /// Whether a missing key with plan `child` gets a value: always inside a copy (Liquid would
    /// fail on the missing key), and for an assigned alias whose fields are read.
    fn creates(child: &FillPlan, inside: bool) -> bool {
        inside || (child.owned && !child.keys.is_empty())
    }

    /// Whether [`FillPlan::apply`] would change `value`.
    pub(crate) fn needs(&self, value: &Value, inside: bool) -> bool {
        let inside = inside || self.owned;
        for (k, child) in &self.keys {
            match value {
                Value::Object(map) => match map.get(k) {
                    Some(v) if child.needs(v, inside) => return true,
                    Some(_) => {}
                    None if Self::creates(child, inside) => return true,
                    None => {}
                },
                Value::Null if inside => return true,
                _ => {}
            }
        }
        if let (Some(each), Value::Array(items)) = (&self.each, value) {
            return items.iter().any(|item| each.needs(item, true));
        }
        false
    }

    /// Makes every path of the plan that is read through a strict copy exist: a missing leaf
    /// becomes `null` (renders as ""), a missing or null parent becomes an object.
    pub(crate) fn apply(&self, value: &mut Value, inside: bool) {
        let inside = inside || self.owned;
        if inside && value.is_null() && !self.keys.is_empty() {
            *value = Value::Object(Map::new());
        }
        if let Value::Object(map) = value {
            for (k, child) in &self.keys {
                match map.get_mut(k) {
                    Some(v) => child.apply(v, inside),
                    None if Self::creates(child, inside) => {
                        let mut v = Value::Null;
                        child.apply(&mut v, true);
                        map.insert(k.clone(), v);
                    }
                    None => {}
                }
            }
        }
        if let (Some(each), Value::Array(items)) = (&self.each, value) {
            for item in items {
                each.apply(item, true);
            }
        }
    }
}

/// A copy of `vars` in which every text, number or boolean whose fields `template` reads is
/// `null`, or `None` when there is none. Liquid fails on `{{ actor.firstName }}` when `actor` is
/// text; LiquidJS renders it empty, and so does Tidings: the renderer retries with this copy.
pub(crate) fn blank_scalar_parents(template: &str, vars: &Value) -> Option<Value> {
    let plan = FillPlan::all_paths(template);
    let mut copy = vars.clone();
    plan.blank_scalar_parents(&mut copy).then_some(copy)
}

/// What a local name stands for.
#[derive(Debug, Clone)]
enum Binding {
    Path(Vec<Seg>),
    Local,
}

struct Scanner {
    refs: Vec<Vec<Seg>>,
    /// Loop variables, innermost last: (name, binding, tag that closes the loop).
    loops: Vec<(String, Binding)>,
    assigns: Vec<(String, Binding)>,
}

const KEYWORDS: &[&str] = &[
    "and", "or", "not", "contains", "in", "nil", "null", "empty", "blank", "true", "false",
    "reversed", "else", "with", "as", "by",
];

/// All resolved paths `template` reads, in order, with duplicates.
pub(crate) fn scan(template: &str) -> Vec<Vec<Seg>> {
    let mut s = Scanner {
        refs: Vec::new(),
        loops: Vec::new(),
        assigns: Vec::new(),
    };
    let bytes = template.as_bytes();
    let mut pos = 0;
    while let Some(off) = template[pos..].find('{') {
        let start = pos + off;
        let kind = bytes.get(start + 1).copied();
        if kind != Some(b'{') && kind != Some(b'%') {
            pos = start + 1;
            continue;
        }
        let close = if kind == Some(b'{') { "}}" } else { "%}" };
        let Some(end) = find_close(template, start + 2, close) else {
            break;
        };
        let inner = trim_dashes(&template[start + 2..end]);
        pos = end + 2;
        if kind == Some(b'{') {
            s.expression(inner);
        } else {
            let name = first_word(inner);
            if name == "raw" || name == "comment" {
                pos = skip_block(template, pos, &format!("end{name}"));
            } else {
                s.tag(inner);
            }
        }
    }
    s.refs
}

/// The byte index of `close` at or after `from`, ignoring quoted strings.
fn find_close(text: &str, from: usize, close: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'"' | b'\'') => {
                i = text[i + 1..]
                    .find(q as char)
                    .map_or(bytes.len(), |j| i + 1 + j + 1);
            }
            _ if text[i..].starts_with(close) => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The position just after the `{% end… %}` tag closing a raw/comment block.
fn skip_block(text: &str, from: usize, end_name: &str) -> usize {
    let mut pos = from;
    while let Some(off) = text[pos..].find("{%") {
        let start = pos + off;
        let Some(end) = find_close(text, start + 2, "%}") else {
            return text.len();
        };
        pos = end + 2;
        if first_word(trim_dashes(&text[start + 2..end])) == end_name {
            return pos;
        }
    }
    text.len()
}

fn trim_dashes(inner: &str) -> &str {
    let inner = inner.strip_prefix('-').unwrap_or(inner);
    let inner = inner.strip_suffix('-').unwrap_or(inner);
    inner.trim()
}

fn first_word(inner: &str) -> &str {
    let inner = inner.trim_start();
    if inner.starts_with('#') {
        return "#";
    }
    inner
        .split(|c: char| c.is_whitespace())
        .next()
        .unwrap_or("")
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// Reads an identifier at `i` (with Liquid's optional trailing `?`); returns its end.
fn ident_end(bytes: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < bytes.len() && is_ident_char(bytes[j]) {
        j += 1;
    }
    if j < bytes.len() && bytes[j] == b'?' {
        j += 1;
    }
    j
}

/// The index of the `]` matching the `[` at `open`, skipping strings and nested brackets.
fn bracket_end(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'"' | b'\'') => {
                i = text[i + 1..]
                    .find(q as char)
                    .map_or(bytes.len(), |j| i + 1 + j);
            }
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

impl Scanner {
    fn tag(&mut self, inner: &str) {
        let name = first_word(inner);
        let rest = inner.trim_start()[name.len()..].trim();
        match name {
            "if" | "elsif" | "unless" | "case" | "when" | "echo" | "cycle" | "include"
            | "render" => self.expression(rest),
            "for" | "tablerow" => self.for_tag(rest),
            "endfor" | "endtablerow" => {
                self.loops.pop();
            }
            "assign" => {
                let (var, value) = rest.split_once('=').unwrap_or((rest, ""));
                let binding = self.alias_binding(value.trim());
                self.expression(value);
                self.bind_assign(var.trim(), binding);
            }
            "capture" | "increment" | "decrement" => {
                self.bind_assign(first_word(rest), Binding::Local);
            }
            "liquid" => {
                for line in rest.lines() {
                    let line = line.trim();
                    if !line.is_empty() && !line.starts_with('#') {
                        self.tag(line);
                    }
                }
            }
            _ => {}
        }
    }

    fn bind_assign(&mut self, name: &str, binding: Binding) {
        self.assigns.retain(|(n, _)| n != name);
        self.assigns.push((name.to_owned(), binding));
    }

    /// `{% assign x = payload.user %}` makes `x` an alias of that path (a copy, so `Owned`);
    /// anything with a filter or literal makes it a local.
    fn alias_binding(&self, value: &str) -> Binding {
        let bytes = value.as_bytes();
        if bytes.first().is_some_and(|c| is_ident_start(*c)) {
            let (segs, end) = self.read_path(value, 0, &mut Vec::new());
            if end == value.len() && !segs.is_empty() {
                if let Some(mut resolved) = self.resolve(segs) {
                    resolved.push(Seg::Owned);
                    return Binding::Path(resolved);
                }
            }
        }
        Binding::Local
    }

    fn for_tag(&mut self, rest: &str) {
        let var = first_word(rest).to_owned();
        let after_var = rest[var.len()..].trim_start();
        let Some(range) = after_var.strip_prefix("in") else {
            self.loops.push((var, Binding::Local));
            return;
        };
        let range = range.trim_start();
        let bytes = range.as_bytes();
        let binding = if bytes.first().is_some_and(|c| is_ident_start(*c)) {
            let mut nested = Vec::new();
            let (segs, end) = self.read_path(range, 0, &mut nested);
            self.refs.extend(nested);
            let binding = match self.resolve(segs) {
                Some(mut path) => {
                    path.push(Seg::Each);
                    self.refs.push(path.clone());
                    Binding::Path(path)
                }
                None => Binding::Local,
            };
            self.expression(&range[end..]);
            binding
        } else {
            // A range `(1..n)` or a literal: its bounds may read variables; items are locals.
            self.expression(range);
            Binding::Local
        };
        self.loops.push((var, binding));
    }

    /// Records every variable path in an expression (output, condition, filter arguments).
    fn expression(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut i = 0;
        let mut after_pipe = false;
        while i < bytes.len() {
            let c = bytes[i];
            if c.is_ascii_whitespace() {
                i += 1;
            } else if c == b'"' || c == b'\'' {
                i = text[i + 1..]
                    .find(c as char)
                    .map_or(bytes.len(), |j| i + 1 + j + 1);
            } else if c == b'|' {
                after_pipe = true;
                i += 1;
            } else if c.is_ascii_digit()
                || (c == b'-' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
            {
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
                    i += 1;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            } else if is_ident_start(c) {
                let mut nested = Vec::new();
                let (segs, end) = self.read_path(text, i, &mut nested);
                self.refs.extend(nested);
                let next = text[end..].trim_start().as_bytes().first().copied();
                let is_keyword = segs.len() == 1
                    && matches!(&segs[0], Seg::Key(k) if KEYWORDS.contains(&k.as_str()));
                if after_pipe {
                    // a filter name
                    after_pipe = false;
                } else if next == Some(b':') || is_keyword {
                    // a keyword-argument name (`limit: 3`, `ellipsis: "…"`) or a Liquid keyword
                } else if let Some(path) = self.resolve(segs) {
                    self.refs.push(path);
                }
                i = end.max(i + 1);
            } else {
                i += 1;
            }
        }
    }

    /// Reads `ident(.ident | [index])*` at `start`; returns the raw segments and the end.
    /// Variables inside dynamic indexes are pushed to `nested`.
    fn read_path(&self, text: &str, start: usize, nested: &mut Vec<Vec<Seg>>) -> (Vec<Seg>, usize) {
        let bytes = text.as_bytes();
        let mut i = ident_end(bytes, start);
        let mut segs = vec![Seg::Key(text[start..i].to_owned())];
        let mut dynamic = false;
        loop {
            if i + 1 < bytes.len() && bytes[i] == b'.' && is_ident_start(bytes[i + 1]) {
                let end = ident_end(bytes, i + 1);
                if !dynamic {
                    segs.push(Seg::Key(text[i + 1..end].to_owned()));
                }
                i = end;
            } else if i < bytes.len() && bytes[i] == b'[' {
                let Some(close) = bracket_end(text, i) else {
                    return (segs, bytes.len());
                };
                let index = text[i + 1..close].trim();
                let quoted = index.len() >= 2
                    && (index.starts_with('"') && index.ends_with('"')
                        || index.starts_with('\'') && index.ends_with('\''));
                if dynamic {
                } else if quoted {
                    segs.push(Seg::Key(index[1..index.len() - 1].to_owned()));
                } else if index.parse::<i64>().is_ok() {
                    segs.push(Seg::Each);
                } else {
                    let mut inner = Scanner {
                        refs: Vec::new(),
                        loops: self.loops.clone(),
                        assigns: self.assigns.clone(),
                    };
                    inner.expression(index);
                    nested.extend(inner.refs);
                    dynamic = true;
                }
                i = close + 1;
            } else {
                break;
            }
        }
        (segs, i)
    }

    /// Resolves the root through loop variables and aliases, and Liquid's array properties.
    /// `None` for locals.
    fn resolve(&self, segs: Vec<Seg>) -> Option<Vec<Seg>> {
        let mut segs = segs.into_iter();
        let Some(Seg::Key(root)) = segs.next() else {
            return None;
        };
        if root == "forloop" || root == "tablerowloop" {
            return None;
        }
        let binding = self
            .loops
            .iter()
            .rev()
            .chain(self.assigns.iter().rev())
            .find(|(name, _)| *name == root)
            .map(|(_, b)| b);
        let mut path = match binding {
            Some(Binding::Local) => return None,
            Some(Binding::Path(p)) => p.clone(),
            None => vec![Seg::Key(root)],
        };
        let rest: Vec<Seg> = segs.collect();
        let n = rest.len();
        for (i, seg) in rest.into_iter().enumerate() {
            match seg {
                Seg::Key(k) if (k == "first" || k == "last") && !path.is_empty() => {
                    path.push(Seg::Each)
                }
                Seg::Key(k) if k == "size" && i + 1 == n && path.len() >= 2 => {}
                other => path.push(other),
            }
        }
        Some(path)
    }
}
