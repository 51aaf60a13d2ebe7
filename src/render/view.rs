//! Lenient, zero-copy Liquid views over `serde_json::Value`.
//!
//! Liquid (the `liquid` crate) errors on an unknown variable or index. Templates written for
//! LiquidJS expect the opposite: a missing variable renders as an empty string, however deep the
//! path (`{{ payload.missing.deep }}`). These views make every lookup of an absent key or index
//! return [`MISSING`], a nil value that renders as `""`, is falsy, takes `default`, and answers
//! any further lookup with itself.
//!
//! The views borrow the JSON and build child views lazily, only along the paths a template
//! actually reads, so rendering a short subject against a large payload costs no conversion.

use std::cell::OnceCell;
use std::fmt;

use liquid::model::{
    ArrayView, DisplayCow, KStringCow, Object, ScalarCow, State, Value as LiquidValue,
};
use liquid::{ObjectView, ValueView};
use serde_json::Value as Json;

/// The value of anything absent: renders `""`, is nil, and any lookup into it yields itself.
pub(crate) static MISSING: Missing = Missing;

/// See [`MISSING`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Missing;

impl ValueView for Missing {
    fn as_debug(&self) -> &dyn fmt::Debug {
        self
    }
    fn render(&self) -> DisplayCow<'_> {
        DisplayCow::Borrowed(&"")
    }
    fn source(&self) -> DisplayCow<'_> {
        DisplayCow::Borrowed(&"nil")
    }
    fn type_name(&self) -> &'static str {
        "nil"
    }
    fn query_state(&self, state: State) -> bool {
        match state {
            State::Truthy => false,
            State::DefaultValue | State::Empty | State::Blank => true,
        }
    }
    fn to_kstr(&self) -> KStringCow<'_> {
        KStringCow::from_static("")
    }
    fn to_value(&self) -> LiquidValue {
        LiquidValue::Nil
    }
    /// Seen as an (empty) object so that the core's path walker keeps descending into it.
    fn as_object(&self) -> Option<&dyn ObjectView> {
        Some(self)
    }
    fn is_nil(&self) -> bool {
        true
    }
}

impl ObjectView for Missing {
    fn as_value(&self) -> &dyn ValueView {
        self
    }
    fn size(&self) -> i64 {
        0
    }
    fn keys<'k>(&'k self) -> Box<dyn Iterator<Item = KStringCow<'k>> + 'k> {
        Box::new(std::iter::empty())
    }
    fn values<'k>(&'k self) -> Box<dyn Iterator<Item = &'k dyn ValueView> + 'k> {
        Box::new(std::iter::empty())
    }
    fn iter<'k>(&'k self) -> Box<dyn Iterator<Item = (KStringCow<'k>, &'k dyn ValueView)> + 'k> {
        Box::new(std::iter::empty())
    }
    fn contains_key(&self, _index: &str) -> bool {
        false
    }
    fn get<'s>(&'s self, _index: &str) -> Option<&'s dyn ValueView> {
        Some(&MISSING)
    }
}

/// Converts JSON to an owned Liquid value (used when Liquid needs a copy, e.g. `assign`).
pub(crate) fn json_to_liquid(json: &Json) -> LiquidValue {
    match json {
        Json::Null => LiquidValue::Nil,
        Json::Bool(b) => LiquidValue::scalar(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => LiquidValue::scalar(i),
            None => LiquidValue::scalar(n.as_f64().unwrap_or(0.0)),
        },
        Json::String(s) => LiquidValue::scalar(s.clone()),
        Json::Array(items) => LiquidValue::Array(items.iter().map(json_to_liquid).collect()),
        Json::Object(map) => {
            let mut obj = Object::new();
            for (k, v) in map {
                obj.insert(k.clone().into(), json_to_liquid(v));
            }
            LiquidValue::Object(obj)
        }
    }
}

/// A lazily expanded view of one JSON value.
pub(crate) struct JsonView<'a> {
    json: &'a Json,
    kids: OnceCell<Kids<'a>>,
}

enum Kids<'a> {
    None,
    Array(Vec<JsonView<'a>>),
    Object(Vec<(&'a str, JsonView<'a>)>),
}

impl fmt::Debug for JsonView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.json, f)
    }
}

impl<'a> JsonView<'a> {
    pub(crate) fn new(json: &'a Json) -> Self {
        Self {
            json,
            kids: OnceCell::new(),
        }
    }

    fn kids(&self) -> &Kids<'a> {
        self.kids.get_or_init(|| match self.json {
            Json::Array(items) => Kids::Array(items.iter().map(JsonView::new).collect()),
            Json::Object(map) => Kids::Object(
                map.iter()
                    .map(|(k, v)| (k.as_str(), JsonView::new(v)))
                    .collect(),
            ),
            _ => Kids::None,
        })
    }

    fn array_kids(&self) -> &[JsonView<'a>] {
        match self.kids() {
            Kids::Array(items) => items,
            _ => &[],
        }
    }

    fn object_kids(&self) -> &[(&'a str, JsonView<'a>)] {
        match self.kids() {
            Kids::Object(entries) => entries,
            _ => &[],
        }
    }

    fn scalar(&self) -> Option<ScalarCow<'_>> {
        match self.json {
            Json::Bool(b) => Some(ScalarCow::new(*b)),
            Json::Number(n) => Some(match n.as_i64() {
                Some(i) => ScalarCow::new(i),
                None => ScalarCow::new(n.as_f64().unwrap_or(0.0)),
            }),
            Json::String(s) => Some(ScalarCow::new(s.as_str())),
            _ => None,
        }
    }

    fn owned_display(&self, source: bool) -> DisplayCow<'_> {
        let value = self.to_value();
        let text = if source {
            value.source().to_string()
        } else {
            value.render().to_string()
        };
        DisplayCow::Owned(Box::new(text))
    }
}

impl ValueView for JsonView<'_> {
    fn as_debug(&self) -> &dyn fmt::Debug {
        self
    }
    fn render(&self) -> DisplayCow<'_> {
        match self.json {
            Json::Null => DisplayCow::Borrowed(&""),
            Json::String(s) => DisplayCow::Borrowed(s),
            Json::Bool(b) => DisplayCow::Borrowed(b),
            Json::Number(_) => self.owned_display(false),
            Json::Array(_) | Json::Object(_) => self.owned_display(false),
        }
    }
    fn source(&self) -> DisplayCow<'_> {
        self.owned_display(true)
    }
    fn type_name(&self) -> &'static str {
        match self.json {
            Json::Null => "nil",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
            _ => "scalar",
        }
    }
    fn query_state(&self, state: State) -> bool {
        match self.json {
            Json::Null => MISSING.query_state(state),
            Json::Array(items) => match state {
                State::Truthy => true,
                State::DefaultValue | State::Empty | State::Blank => items.is_empty(),
            },
            Json::Object(map) => match state {
                State::Truthy => true,
                State::DefaultValue | State::Empty | State::Blank => map.is_empty(),
            },
            _ => self.scalar().is_some_and(|s| s.query_state(state)),
        }
    }
    fn to_kstr(&self) -> KStringCow<'_> {
        match self.json {
            Json::Null => KStringCow::from_static(""),
            Json::String(s) => KStringCow::from_ref(s),
            Json::Bool(_) | Json::Number(_) => match self.scalar() {
                Some(s) => KStringCow::from_string(s.to_kstr().to_string()),
                None => KStringCow::from_static(""),
            },
            Json::Array(_) | Json::Object(_) => KStringCow::from_string(self.render().to_string()),
        }
    }
    fn to_value(&self) -> LiquidValue {
        json_to_liquid(self.json)
    }
    fn as_scalar(&self) -> Option<ScalarCow<'_>> {
        self.scalar()
    }
    fn as_array(&self) -> Option<&dyn ArrayView> {
        match self.json {
            Json::Array(_) => Some(self),
            _ => None,
        }
    }
    fn as_object(&self) -> Option<&dyn ObjectView> {
        match self.json {
            Json::Object(_) | Json::Null => Some(self),
            _ => None,
        }
    }
    fn is_nil(&self) -> bool {
        self.json.is_null()
    }
}

impl ArrayView for JsonView<'_> {
    fn as_value(&self) -> &dyn ValueView {
        self
    }
    fn size(&self) -> i64 {
        self.array_kids().len() as i64
    }
    fn values<'k>(&'k self) -> Box<dyn Iterator<Item = &'k dyn ValueView> + 'k> {
        Box::new(self.array_kids().iter().map(|v| v as &dyn ValueView))
    }
    fn contains_key(&self, index: i64) -> bool {
        resolve_index(self.array_kids().len(), index).is_some()
    }
    fn get(&self, index: i64) -> Option<&dyn ValueView> {
        let items = self.array_kids();
        Some(match resolve_index(items.len(), index) {
            Some(i) => &items[i],
            None => &MISSING,
        })
    }
}

/// Liquid array indexing: negative indexes count from the end.
fn resolve_index(len: usize, index: i64) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let index = if index < 0 { len + index } else { index };
    if (0..len).contains(&index) {
        usize::try_from(index).ok()
    } else {
        None
    }
}

impl ObjectView for JsonView<'_> {
    fn as_value(&self) -> &dyn ValueView {
        self
    }
    fn size(&self) -> i64 {
        self.object_kids().len() as i64
    }
    fn keys<'k>(&'k self) -> Box<dyn Iterator<Item = KStringCow<'k>> + 'k> {
        Box::new(
            self.object_kids()
                .iter()
                .map(|(k, _)| KStringCow::from_ref(k)),
        )
    }
    fn values<'k>(&'k self) -> Box<dyn Iterator<Item = &'k dyn ValueView> + 'k> {
        Box::new(self.object_kids().iter().map(|(_, v)| v as &dyn ValueView))
    }
    fn iter<'k>(&'k self) -> Box<dyn Iterator<Item = (KStringCow<'k>, &'k dyn ValueView)> + 'k> {
        Box::new(
            self.object_kids()
                .iter()
                .map(|(k, v)| (KStringCow::from_ref(k), v as &dyn ValueView)),
        )
    }
    fn contains_key(&self, index: &str) -> bool {
        self.object_kids().iter().any(|(k, _)| *k == index)
    }
    fn get<'s>(&'s self, index: &str) -> Option<&'s dyn ValueView> {
        Some(
            self.object_kids()
                .iter()
                .find(|(k, _)| *k == index)
                .map_or(&MISSING as &dyn ValueView, |(_, v)| v as &dyn ValueView),
        )
    }
}

/// The globals of one render: every top-level name exists (absent ones are [`MISSING`]).
#[derive(Debug)]
pub(crate) struct Globals<'a> {
    root: JsonView<'a>,
}

impl<'a> Globals<'a> {
    /// `vars` should be an object; anything else renders as if it were `{}`.
    pub(crate) fn new(vars: &'a Json) -> Self {
        static EMPTY: Json = Json::Null;
        let json = if vars.is_object() { vars } else { &EMPTY };
        Self {
            root: JsonView::new(json),
        }
    }
}

impl ValueView for Globals<'_> {
    fn as_debug(&self) -> &dyn fmt::Debug {
        self
    }
    fn render(&self) -> DisplayCow<'_> {
        self.root.render()
    }
    fn source(&self) -> DisplayCow<'_> {
        self.root.source()
    }
    fn type_name(&self) -> &'static str {
        "object"
    }
    fn query_state(&self, state: State) -> bool {
        self.root.query_state(state)
    }
    fn to_kstr(&self) -> KStringCow<'_> {
        self.root.to_kstr()
    }
    fn to_value(&self) -> LiquidValue {
        self.root.to_value()
    }
    fn as_object(&self) -> Option<&dyn ObjectView> {
        Some(self)
    }
}

impl ObjectView for Globals<'_> {
    fn as_value(&self) -> &dyn ValueView {
        self
    }
    fn size(&self) -> i64 {
        ObjectView::size(&self.root)
    }
    fn keys<'k>(&'k self) -> Box<dyn Iterator<Item = KStringCow<'k>> + 'k> {
        ObjectView::keys(&self.root)
    }
    fn values<'k>(&'k self) -> Box<dyn Iterator<Item = &'k dyn ValueView> + 'k> {
        ObjectView::values(&self.root)
    }
    fn iter<'k>(&'k self) -> Box<dyn Iterator<Item = (KStringCow<'k>, &'k dyn ValueView)> + 'k> {
        ObjectView::iter(&self.root)
    }
    /// Every name "exists" so that Liquid's runtime resolves unknown names here (as nil)
    /// instead of failing with "Unknown variable".
    fn contains_key(&self, _index: &str) -> bool {
        true
    }
    fn get<'s>(&'s self, index: &str) -> Option<&'s dyn ValueView> {
        ObjectView::get(&self.root, index)
    }
}
