//! Template errors made readable: [`RenderError`] turns a `liquid::Error` into a kind, a message
//! naming the line and the offending text, and a hint saying what to change. The preview shows
//! them as `{title, message, hint}`; the delivery engine records the message.

use std::fmt;

/// What went wrong, for choosing a title and for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderErrorKind {
    /// The template is not valid Liquid (unclosed `{{`, unknown or unbalanced tag, bad filter
    /// arguments).
    Syntax,
    /// A filter the renderer does not know (`{{ name | upper }}`).
    UnknownFilter,
    /// Anything at render time: a filter given input it cannot use, indexing into a string, ….
    Other,
}

/// A template that failed to parse or render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError {
    /// The category.
    pub kind: RenderErrorKind,
    /// A one-paragraph description for a user, with the line and offending text when known.
    pub message: String,
    /// 1-based line in the template, when known.
    pub line: Option<usize>,
    details: Box<Details>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Details {
    snippet: Option<String>,
    name: Option<String>,
    field: Option<String>,
    hint: String,
}

impl RenderError {
    fn new(
        kind: RenderErrorKind,
        message: String,
        line: Option<usize>,
        snippet: Option<String>,
        name: Option<String>,
        hint: String,
    ) -> Self {
        Self {
            kind,
            message,
            line,
            details: Box::new(Details {
                snippet,
                name,
                field: None,
                hint,
            }),
        }
    }

    /// Actionable advice: what to change in the template.
    pub fn hint(&self) -> &str {
        &self.details.hint
    }

    /// A short title for the kind (`Template syntax error`, `Unknown filter`, `Template error`).
    pub fn title(&self) -> &'static str {
        match self.kind {
            RenderErrorKind::Syntax => "Template syntax error",
            RenderErrorKind::UnknownFilter => "Unknown filter",
            RenderErrorKind::Other => "Template error",
        }
    }

    /// The offending text (the template line, or the tag / filter at fault), when known.
    pub fn snippet(&self) -> Option<&str> {
        self.details.snippet.as_deref()
    }

    /// The unknown filter or tag, or the filter that failed, when there is one.
    pub fn name(&self) -> Option<&str> {
        self.details.name.as_deref()
    }

    /// Where in a rendered JSON value the failing string sits (`render_value`), e.g.
    /// `primaryAction.label`; `None` for a plain string.
    pub fn field(&self) -> Option<&str> {
        self.details.field.as_deref()
    }

    /// The same error, located at `field` of a JSON value (prefixes the message).
    pub(crate) fn in_field(mut self, field: String) -> Self {
        if !field.is_empty() && self.details.field.is_none() {
            self.message = format!("In `{field}`: {}", self.message);
            self.details.field = Some(field);
        }
        self
    }

    /// Interprets a liquid error for `template`. `filters` are the names the parser knows.
    pub(crate) fn from_liquid(err: &liquid::Error, template: &str, filters: &[String]) -> Self {
        let parsed = Parsed::new(&err.to_string());
        if let Some(filter) = parsed.context("requested filter") {
            return unknown_filter(filter, template, filters);
        }
        if let Some((line, column)) = parsed.location {
            return syntax_at(&parsed, template, line, column);
        }
        if parsed.headline.starts_with("Invalid number of arguments")
            || parsed.traces.iter().any(|t| t == "Filter parsing error")
        {
            return filter_arguments(&parsed, template);
        }
        runtime_error(&parsed, template)
    }
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RenderError {}

/// Filters users coming from other template languages reach for, and the Liquid spelling.
const ALIASES: &[(&str, &str)] = &[
    ("upper", "upcase"),
    ("uppercase", "upcase"),
    ("toupper", "upcase"),
    ("lower", "downcase"),
    ("lowercase", "downcase"),
    ("tolower", "downcase"),
    ("capitalise", "capitalize"),
    ("title", "capitalize"),
    ("titlecase", "capitalize"),
    ("length", "size"),
    ("len", "size"),
    ("count", "size"),
    ("trim", "strip"),
    ("ltrim", "lstrip"),
    ("rstrip_html", "strip_html"),
    ("format_date", "date"),
    ("dateformat", "date"),
    ("urlencode", "url_encode"),
    ("urldecode", "url_decode"),
    ("escape_html", "escape"),
    ("to_json", "json"),
    ("tojson", "json"),
    ("stringify", "json"),
];

/// A few filters to show when nothing closer is found.
const COMMON_FILTERS: &[&str] = &[
    "upcase",
    "downcase",
    "capitalize",
    "default",
    "date",
    "size",
    "join",
    "split",
    "replace",
    "truncate",
    "append",
    "prepend",
    "json",
];

/// A liquid error's `Display` text taken apart.
struct Parsed {
    /// First line without the `liquid: ` prefix (for pest errors: `--> L:C`).
    headline: String,
    /// Pest's explanation (`expected Literal`, `Unknown tag.`), when a location was given.
    pest_message: Option<String>,
    location: Option<(usize, usize)>,
    /// `key=value` pairs from every `with:` section, in order.
    context: Vec<(String, String)>,
    /// The `from:` lines (the tag or filter being processed), innermost first.
    traces: Vec<String>,
}

impl Parsed {
    fn new(text: &str) -> Self {
        let mut lines = text.lines();
        let first = lines.next().unwrap_or("");
        let headline = first
            .strip_prefix("liquid:")
            .unwrap_or(first)
            .trim()
            .to_owned();
        let location = headline.strip_prefix("-->").and_then(|loc| {
            let (line, column) = loc.trim().split_once(':')?;
            Some((line.trim().parse().ok()?, column.trim().parse().ok()?))
        });
        let mut pest_message = None;
        let mut context = Vec::new();
        let mut traces = Vec::new();
        for line in lines {
            let trimmed = line.trim();
            if let Some(msg) = trimmed.strip_prefix("= ") {
                pest_message.get_or_insert_with(|| msg.trim().to_owned());
            } else if let Some(from) = line.strip_prefix("from: ") {
                traces.push(from.trim().to_owned());
            } else if line.starts_with("    ") {
                if let Some((k, v)) = trimmed.split_once('=') {
                    context.push((k.trim().to_owned(), v.trim().to_owned()));
                }
            }
        }
        Self {
            headline,
            pest_message,
            location,
            context,
            traces,
        }
    }

    fn context(&self, key: &str) -> Option<&str> {
        self.context
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The 1-based line holding byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Line `n` (1-based) of `text`, trimmed and shortened for display.
fn line_text(text: &str, n: usize) -> Option<String> {
    let line = text.lines().nth(n.checked_sub(1)?)?.trim();
    Some(shorten(line))
}

fn shorten(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        s.to_owned()
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

/// Where `| name` is applied in `template`: (byte offset of the name, the whole output tag).
fn find_filter_use(template: &str, name: &str) -> Option<(usize, String)> {
    let bytes = template.as_bytes();
    let mut from = 0;
    while let Some(off) = template[from..].find('|') {
        let pipe = from + off;
        let start =
            pipe + 1 + (template[pipe + 1..].len() - template[pipe + 1..].trim_start().len());
        let end = start + name.len();
        let boundary = bytes
            .get(end)
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'));
        if template[start..].starts_with(name) && boundary {
            let tag_start = template[..pipe]
                .rfind('{')
                .map_or(pipe, |i| i.saturating_sub(1));
            let tag_end = template[end..]
                .find('}')
                .map_or(template.len(), |i| (end + i + 2).min(template.len()));
            return Some((start, shorten(template[tag_start..tag_end].trim())));
        }
        from = pipe + 1;
    }
    None
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The known filter closest to `name`, if any is plausibly meant.
fn suggest_filter<'a>(name: &str, filters: &'a [String]) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    if let Some(f) = filters.iter().find(|f| **f == lower) {
        return Some(f);
    }
    if let Some((_, target)) = ALIASES.iter().find(|(alias, _)| *alias == lower) {
        if let Some(f) = filters.iter().find(|f| f == target) {
            return Some(f);
        }
    }
    filters
        .iter()
        .map(|f| (levenshtein(&lower, f), f))
        .filter(|(d, f)| *d <= 2 && *d < f.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, f)| f.as_str())
}

fn unknown_filter(name: &str, template: &str, filters: &[String]) -> RenderError {
    let found = find_filter_use(template, name);
    let line = found.as_ref().map(|(off, _)| line_of(template, *off));
    let snippet = found.map(|(_, tag)| tag);
    let mut message = format!("Unknown filter `{name}`");
    if let Some(line) = line {
        message.push_str(&format!(" at line {line}"));
    }
    if let Some(snippet) = &snippet {
        message.push_str(&format!(": `{snippet}`"));
    }
    let common: Vec<&str> = COMMON_FILTERS
        .iter()
        .copied()
        .filter(|c| filters.iter().any(|f| f == c))
        .collect();
    let hint = match suggest_filter(name, filters) {
        Some(s) => format!(
            "Unknown filter `{name}`: did you mean `{s}`? Use one of the standard Liquid filters \
             such as {}.",
            common.join(", ")
        ),
        None => format!(
            "Unknown filter `{name}`: use one of the standard Liquid filters such as {}.",
            common.join(", ")
        ),
    };
    RenderError::new(
        RenderErrorKind::UnknownFilter,
        message,
        line,
        snippet,
        Some(name.to_owned()),
        hint,
    )
}

/// The last `{% name … %}` opening tag in `template`: its byte offset.
fn last_open_tag(template: &str, name: &str) -> Option<usize> {
    let mut found = None;
    let mut from = 0;
    while let Some(off) = template[from..].find("{%") {
        let start = from + off;
        let inner = template[start + 2..].trim_start_matches('-').trim_start();
        let word_end = inner
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(inner.len());
        if &inner[..word_end] == name {
            found = Some(start);
        }
        from = start + 2;
    }
    found
}

fn syntax_at(parsed: &Parsed, template: &str, line: usize, column: usize) -> RenderError {
    let pest = parsed
        .pest_message
        .as_deref()
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_owned();
    let requested = parsed.context("requested").map(str::to_owned);
    let mut line = line;
    let mut snippet = line_text(template, line);
    let hint;
    let mut name = None;
    let message;
    if let Some(end_tag) = pest
        .strip_prefix("Unclosed block. ")
        .and_then(|rest| rest.strip_suffix(" tag expected"))
    {
        // Liquid points at the end of the template; the opening tag is what matters.
        let block = end_tag
            .trim_start_matches("{%")
            .trim_end_matches("%}")
            .trim()
            .trim_start_matches("end")
            .to_owned();
        if let Some(off) = last_open_tag(template, &block) {
            line = line_of(template, off);
            snippet = line_text(template, line);
        }
        message = format!(
            "The `{{% {block} %}}` block at line {line} is never closed{}",
            snippet
                .as_deref()
                .map(|s| format!(": `{s}`"))
                .unwrap_or_default()
        );
        hint = format!("Add `{end_tag}` after the content of the `{{% {block} %}}` block.");
        name = Some(block);
    } else if let Some(tag) = requested.filter(|_| pest.starts_with("Unknown tag")) {
        let written = format!("{{% {tag} %}}");
        message = format!(
            "Unknown tag `{written}` at line {line}{}",
            snippet
                .as_deref()
                .filter(|s| *s != written)
                .map(|s| format!(": `{s}`"))
                .unwrap_or_default()
        );
        hint = if let Some(opening) = tag.strip_prefix("end") {
            format!(
                "`{{% {tag} %}}` has no matching `{{% {opening} %}}`: remove it or add the opening \
                 tag before it."
            )
        } else {
            format!(
                "`{tag}` is not a Liquid tag. Use one of if, unless, case, for, assign, capture, \
                 raw, comment — or write `{{{{ {tag} }}}}` to output a variable."
            )
        };
        name = Some(tag);
    } else {
        message = format!(
            "Liquid syntax error at line {line}, column {column}: {}{}",
            if pest.is_empty() {
                "invalid syntax"
            } else {
                &pest
            },
            snippet
                .as_deref()
                .map(|s| format!(" near `{s}`"))
                .unwrap_or_default()
        );
        hint = syntax_hint(template, line);
    }
    RenderError::new(
        RenderErrorKind::Syntax,
        message,
        Some(line),
        snippet,
        name,
        hint,
    )
}

/// Advice for a generic syntax error at `line`, pointing at unbalanced delimiters if any.
fn syntax_hint(template: &str, line: usize) -> String {
    let text = template.lines().nth(line.saturating_sub(1)).unwrap_or("");
    let (open_out, close_out) = (text.matches("{{").count(), text.matches("}}").count());
    let (open_tag, close_tag) = (text.matches("{%").count(), text.matches("%}").count());
    if open_out != close_out {
        format!("Check the Liquid syntax near line {line}: every {{{{ must be closed by }}}}.")
    } else if open_tag != close_tag {
        format!("Check the Liquid syntax near line {line}: every {{% must be closed by %}}.")
    } else {
        format!(
            "Check the Liquid syntax near line {line}: output looks like {{{{ payload.name }}}}, \
             tags like {{% if payload.show %}}…{{% endif %}}, and text in quotes must be closed."
        )
    }
}

fn filter_arguments(parsed: &Parsed, template: &str) -> RenderError {
    let filter = parsed
        .context("filter")
        .map(|f| f.split_whitespace().next().unwrap_or(f).to_owned());
    let cause = parsed.context("cause").unwrap_or("");
    let found = filter.as_deref().and_then(|f| find_filter_use(template, f));
    let line = found.as_ref().map(|(off, _)| line_of(template, *off));
    let snippet = found.map(|(_, tag)| tag);
    let fname = filter.as_deref().unwrap_or("filter");
    let mut message = format!("Wrong arguments for the `{fname}` filter");
    if let Some(line) = line {
        message.push_str(&format!(" at line {line}"));
    }
    if !cause.is_empty() {
        message.push_str(&format!(": {}", parsed.headline.to_lowercase()));
        message.push_str(&format!(" ({cause})"));
    }
    if let Some(s) = &snippet {
        message.push_str(&format!(" in `{s}`"));
    }
    let hint = format!(
        "Check the arguments of `{fname}`: they follow a colon and are separated by commas, \
         e.g. {{{{ payload.name | append: \"!\" }}}} or {{{{ payload.text | truncate: 20 }}}}."
    );
    RenderError::new(
        RenderErrorKind::Syntax,
        message,
        line,
        snippet,
        filter.clone(),
        hint,
    )
}

fn runtime_error(parsed: &Parsed, template: &str) -> RenderError {
    let cause = parsed.context("cause");
    let filter = parsed
        .traces
        .iter()
        .any(|t| t == "Filter error")
        .then(|| parsed.context("filter"))
        .flatten()
        .map(|f| f.split_whitespace().next().unwrap_or(f).to_owned());
    let (mut line, mut snippet) = (None, None);
    let mut message;
    let hint;
    if let Some(f) = &filter {
        if let Some((off, tag)) = find_filter_use(template, f) {
            line = Some(line_of(template, off));
            snippet = Some(tag);
        }
        message = format!("The `{f}` filter failed");
        if let Some(line) = line {
            message.push_str(&format!(" at line {line}"));
        }
        message.push_str(&format!(": {}", parsed.headline.to_lowercase()));
        if let Some(arg) = parsed.context("argument") {
            message.push_str(&format!(" `{arg}`"));
        }
        if let Some(cause) = cause {
            message.push_str(&format!(" ({cause})"));
        }
        if let Some(input) = parsed.context("input") {
            message.push_str(&format!(", input {}", shorten(input)));
        }
        hint = format!(
            "Check what `{f}` receives{}: {}.",
            snippet
                .as_deref()
                .map(|s| format!(" in `{s}`"))
                .unwrap_or_default(),
            cause.unwrap_or("its input or arguments have the wrong type")
        );
    } else if let (Some(var), Some(index)) = (
        parsed.context("variable"),
        parsed.context("requested index"),
    ) {
        let path = format!("{var}.{index}");
        let off = template.find(&path).or_else(|| template.find(var));
        if let Some(off) = off {
            line = Some(line_of(template, off));
            snippet = line.and_then(|l| line_text(template, l));
        }
        message = format!("`{path}` cannot be read: `{var}` has no field `{index}`");
        if let Some(line) = line {
            message.push_str(&format!(" (line {line})"));
        }
        hint = format!(
            "`{var}` is not an object with `{index}` (it is probably text or a number): check the \
             variable path, or the data sent with the trigger."
        );
    } else {
        message = parsed.headline.clone();
        if let Some(cause) = cause {
            message.push_str(&format!(": {cause}"));
        }
        if let Some(trace) = parsed.traces.first() {
            message.push_str(&format!(" (in `{}`)", shorten(trace)));
            snippet = Some(shorten(trace));
        }
        hint = "Check the variables and filters used in the template.".to_owned();
    }
    RenderError::new(RenderErrorKind::Other, message, line, snippet, filter, hint)
}
