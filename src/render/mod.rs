//! Liquid template rendering, shared by the delivery engine and the step preview.
//!
//! - [`Renderer`] parses each template once, caches it by source text, and renders it against a
//!   JSON variables object (`{payload, subscriber, steps, context, env, actor, …}`). Lookups
//!   are lenient like LiquidJS: a missing variable, however deep (`{{ payload.a.b.c }}`),
//!   renders as an empty string, is falsy, and takes `default`.
//! - [`RenderError`] carries a kind, a message naming the line and offending text, and a
//!   [`RenderError::hint`] for the preview's `{title, message, hint}`.
//! - [`variables_used`] / [`example_from_variables`] list the variables a template reads and
//!   build an example payload from them.
//!
//! Filters are Liquid's standard library (`liquid::ParserBuilder::with_stdlib()`), with `date`
//! also reading ISO 8601 timestamps and LiquidJS's `json` added (see `filters`). No I/O here.

pub mod email_blocks;
mod error;
mod filters;
pub mod inputs;
mod sanitize;
mod variables;
mod view;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use liquid::reflection::ParserReflection;
use serde_json::Value;

pub use error::{RenderError, RenderErrorKind};
pub use sanitize::{
    html_to_text, sanitization_disabled, sanitize_html, sanitize_in_app, text_of_clean_html,
};
pub use variables::{example_from_variables, variables_used, VarUse};

use variables::FillPlan;
use view::Globals;

/// Most templates kept parsed at once; the cache is emptied when it would grow past this.
const CACHE_ENTRIES: usize = 1000;
/// Most template source bytes kept parsed at once (large HTML emails), same policy.
const CACHE_BYTES: usize = 8 * 1024 * 1024;

/// A parsed template and what it needs before rendering.
struct Compiled {
    template: liquid::Template,
    /// Paths read through Liquid's strict copies (loop items, assigned aliases).
    fill: Option<FillPlan>,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<String, Result<Arc<Compiled>, RenderError>>,
    bytes: usize,
}

/// Renders Liquid templates; cheap to share (`Send + Sync`), see [`Renderer::shared`].
pub struct Renderer {
    parser: liquid::Parser,
    /// Names of every filter the parser knows, sorted (for error hints).
    filter_names: Vec<String>,
    cache: Mutex<Cache>,
}

impl fmt::Debug for Renderer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cached = self.lock_cache().entries.len();
        f.debug_struct("Renderer")
            .field("cached_templates", &cached)
            .finish()
    }
}

impl Default for Renderer {
    fn default() -> Self {
        Self::new()
    }
}

impl Renderer {
    /// A renderer with an empty cache. Prefer [`Renderer::shared`] so every caller shares one
    /// cache.
    pub fn new() -> Self {
        let parser = liquid::ParserBuilder::with_stdlib()
            .filter(filters::Date)
            .filter(filters::Json)
            .build()
            .expect("building a parser without partials cannot fail");
        let mut filter_names: Vec<String> = parser.filters().map(|f| f.name().to_owned()).collect();
        filter_names.sort_unstable();
        Self {
            parser,
            filter_names,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The process-wide renderer.
    pub fn shared() -> &'static Renderer {
        static SHARED: OnceLock<Renderer> = OnceLock::new();
        SHARED.get_or_init(Renderer::new)
    }

    /// Renders `template` with `vars` (an object; anything else counts as `{}`).
    /// Text without `{{` or `{%` is returned as is, without parsing.
    pub fn render_str(&self, template: &str, vars: &Value) -> Result<String, RenderError> {
        if !has_markup(template) {
            return Ok(template.to_owned());
        }
        let globals = Globals::new(vars);
        self.render_with(template, vars, &globals)
    }

    /// Renders every string inside `value` (objects and arrays recursively); numbers, booleans
    /// and null are kept. Object keys are not rendered. On failure the error's `field` names the
    /// string's place, e.g. `buttons[0].content`.
    pub fn render_value(&self, value: &Value, vars: &Value) -> Result<Value, RenderError> {
        let globals = Globals::new(vars);
        let mut path = String::new();
        self.render_value_at(value, vars, &globals, &mut path)
    }

    /// Parses `template` (using the cache) without rendering: `Ok` when it is valid Liquid with
    /// known filters.
    pub fn check(&self, template: &str) -> Result<(), RenderError> {
        if has_markup(template) {
            self.compile(template)?;
        }
        Ok(())
    }

    /// The names of every filter templates may use, sorted.
    pub fn filter_names(&self) -> &[String] {
        &self.filter_names
    }

    fn render_value_at(
        &self,
        value: &Value,
        vars: &Value,
        globals: &Globals<'_>,
        path: &mut String,
    ) -> Result<Value, RenderError> {
        Ok(match value {
            Value::String(s) if has_markup(s) => Value::String(
                self.render_with(s, vars, globals)
                    .map_err(|e| e.in_field(path.clone()))?,
            ),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    out.push(self.render_value_at(item, vars, globals, path)?);
                    path.truncate(len);
                }
                Value::Array(out)
            }
            Value::Object(map) => {
                let mut out = serde_json::Map::with_capacity(map.len());
                for (k, v) in map {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                    out.insert(k.clone(), self.render_value_at(v, vars, globals, path)?);
                    path.truncate(len);
                }
                Value::Object(out)
            }
            other => other.clone(),
        })
    }

    /// Renders with `globals` (a view of `vars`), or with a filled copy of `vars` when the
    /// template reads loop items / assigned values that lack a field.
    fn render_with(
        &self,
        template: &str,
        vars: &Value,
        globals: &Globals<'_>,
    ) -> Result<String, RenderError> {
        let compiled = self.compile(template)?;
        let render = |vars: &Value, globals: &Globals<'_>| match &compiled.fill {
            Some(plan) if plan.needs(vars, false) => {
                let mut filled = vars.clone();
                plan.apply(&mut filled, false);
                compiled.template.render(&Globals::new(&filled))
            }
            _ => compiled.template.render(globals),
        };
        match render(vars, globals) {
            Ok(out) => Ok(out),
            // A field of text or of a number (`actor.firstName` with `actor: "u2"`) renders empty,
            // as in LiquidJS: render again with such values read as missing.
            Err(e) => match variables::blank_scalar_parents(template, vars) {
                Some(blanked) => render(&blanked, &Globals::new(&blanked)),
                None => Err(e),
            }
            .map_err(|e| RenderError::from_liquid(&e, template, &self.filter_names)),
        }
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The parsed template (or its parse error), from the cache or parsed now.
    fn compile(&self, template: &str) -> Result<Arc<Compiled>, RenderError> {
        if let Some(hit) = self.lock_cache().entries.get(template) {
            return hit.clone();
        }
        let result = match self.parser.parse(template) {
            Ok(parsed) => Ok(Arc::new(Compiled {
                template: parsed,
                fill: FillPlan::for_template(template),
            })),
            Err(e) => Err(RenderError::from_liquid(&e, template, &self.filter_names)),
        };
        let mut cache = self.lock_cache();
        if cache.entries.len() >= CACHE_ENTRIES || cache.bytes + template.len() > CACHE_BYTES {
            cache.entries.clear();
            cache.bytes = 0;
        }
        if template.len() <= CACHE_BYTES
            && cache
                .entries
                .insert(template.to_owned(), result.clone())
                .is_none()
        {
            cache.bytes += template.len();
        }
        result
    }
}

/// Whether `text` contains Liquid markup at all.
fn has_markup(text: &str) -> bool {
    text.contains("{{") || text.contains("{%")
}

#[cfg(test)]
mod tests;
