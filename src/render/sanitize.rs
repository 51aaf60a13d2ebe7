//! Output sanitisation of rendered HTML (email bodies, in-app content) and the plain-text
//! alternative of an email.
//!
//! - [`sanitize_html`] removes what can run or load code — `<script>`, `<iframe>`, `<object>`,
//!   event-handler attributes (`onerror=…`), `javascript:` and other unlisted URL schemes,
//!   `<meta http-equiv="refresh">`, comments — and keeps what emails are made of: the document
//!   skeleton (doctype, `<html>`, `<head>` with `<meta>`, `<title>`, `<style>`, `<link>`,
//!   `<body>`), tables with their presentational attributes, inline styles, classes, images and
//!   links. It is built on `ammonia` with one policy built once per process.
//! - [`html_to_text`] derives a readable `text/plain` version of an HTML email.
//!
//! Upstream (Novu) runs `sanitize-html` over every string an email or in-app step outputs, unless
//! the step's `disableOutputSanitization` control is true; Tidings does the same, except that an
//! email subject is a plain-text header and is not treated as HTML (see `docs/decisions.md`).

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::OnceLock;

/// Tags allowed besides ammonia's defaults: the document skeleton and what email HTML uses.
const EXTRA_TAGS: &[&str] = &[
    "html", "head", "body", "meta", "title", "style", "link", "font", "section", "main", "address",
    "picture", "source", "center",
];

/// Attributes allowed on every tag (besides ammonia's `lang` and `title`).
const GENERIC_ATTRIBUTES: &[&str] = &[
    "style",
    "class",
    "id",
    "dir",
    "role",
    "align",
    "valign",
    "width",
    "height",
    "bgcolor",
    "border",
    "cellpadding",
    "cellspacing",
    "color",
    "face",
    "size",
    "nowrap",
    "colspan",
    "rowspan",
    "hspace",
    "vspace",
    "frame",
    "rules",
    "name",
    "xmlns",
];

/// Attributes allowed on some tags only (added to ammonia's defaults).
const TAG_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("a", &["href", "hreflang", "target", "rel"]),
    ("img", &["src", "srcset", "alt", "loading", "border"]),
    ("source", &["src", "srcset", "media", "type"]),
    ("link", &["href", "rel", "type", "media"]),
    ("meta", &["charset", "name", "content"]),
    ("style", &["type", "media"]),
];

/// `<meta http-equiv>` values that only describe the document (`refresh` redirects, so it goes).
const META_HTTP_EQUIV: &[&str] = &["content-type", "x-ua-compatible", "content-language"];

/// URL schemes links and images may use (relative URLs pass too). `cid:` names an inline attachment.
const URL_SCHEMES: &[&str] = &["http", "https", "mailto", "tel", "cid"];

/// The process-wide policy, built on first use.
fn policy() -> &'static ammonia::Builder<'static> {
    static POLICY: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    POLICY.get_or_init(|| {
        let mut b = ammonia::Builder::default();
        b.add_tags(EXTRA_TAGS)
            // `style` is allowed, so only `script` loses its content (ammonia's default is both).
            .clean_content_tags(HashSet::from(["script"]))
            .add_generic_attributes(GENERIC_ATTRIBUTES)
            .add_generic_attribute_prefixes(&["data-", "aria-"])
            .url_schemes(URL_SCHEMES.iter().copied().collect())
            // Links stay as written (ammonia would add `rel="noopener noreferrer"`).
            .link_rel(None)
            .strip_comments(true)
            .add_tag_attribute_values("meta", "http-equiv", META_HTTP_EQUIV);
        for (tag, attrs) in TAG_ATTRIBUTES {
            b.add_tag_attributes(*tag, attrs.iter().copied());
        }
        b
    })
}

/// `html` without anything that could run or load code (see the module docs).
///
/// HTML that holds nothing the policy would remove is returned as it is: text without `<`, and
/// markup that [`Allowed::admits`] accepts. That check is a strict allow-list over the policy's
/// own sets; anything it does not recognise goes through ammonia.
pub fn sanitize_html(html: &str) -> Cow<'_, str> {
    if !html.contains('<') || allowed().admits(html) {
        return Cow::Borrowed(html);
    }
    Cow::Owned(match Document::split(html) {
        Some(doc) => doc.sanitize(),
        None => clean(html),
    })
}

/// Whether a step's controls turn output sanitisation off (`disableOutputSanitization: true`).
pub fn sanitization_disabled(controls: &serde_json::Map<String, serde_json::Value>) -> bool {
    controls
        .get("disableOutputSanitization")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

/// Sanitises a rendered in-app step in place, as upstream does with every string of it: text
/// through [`sanitize_html`], and URL fields (`avatar`, any `url`) emptied when their scheme is
/// not one links may use (`javascript:` and the like).
pub fn sanitize_in_app(rendered: &mut serde_json::Value) {
    sanitize_strings(rendered, None);
}

fn sanitize_strings(value: &mut serde_json::Value, key: Option<&str>) {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            if matches!(key, Some("avatar" | "url")) && !is_safe_url(s) {
                s.clear();
            } else if let Cow::Owned(clean) = sanitize_html(s) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| sanitize_strings(v, None)),
        Value::Object(map) => map
            .iter_mut()
            .for_each(|(k, v)| sanitize_strings(v, Some(k.as_str()))),
        _ => {}
    }
}

/// A relative URL, or one whose scheme is among [`URL_SCHEMES`].
fn is_safe_url(url: &str) -> bool {
    let t = url.trim();
    match t.find(':') {
        // A colon after the first `/`, `?` or `#` is not a scheme separator.
        Some(colon) if !t[..colon].contains(['/', '?', '#']) => {
            let scheme = t[..colon].to_ascii_lowercase();
            URL_SCHEMES.contains(&scheme.as_str())
        }
        _ => true,
    }
}

/// The policy's sets, for the quick check that markup needs no cleaning.
struct Allowed {
    tags: HashSet<&'static str>,
    generic: HashSet<&'static str>,
    prefixes: Vec<&'static str>,
    by_tag: std::collections::HashMap<&'static str, HashSet<&'static str>>,
    values: std::collections::HashMap<
        &'static str,
        std::collections::HashMap<&'static str, HashSet<&'static str>>,
    >,
}

fn allowed() -> &'static Allowed {
    static ALLOWED: OnceLock<Allowed> = OnceLock::new();
    ALLOWED.get_or_init(|| {
        let p = policy();
        Allowed {
            tags: p.clone_tags(),
            generic: p.clone_generic_attributes(),
            prefixes: p
                .clone_generic_attribute_prefixes()
                .map(|s| s.into_iter().collect())
                .unwrap_or_default(),
            by_tag: p.clone_tag_attributes(),
            values: p.clone_tag_attribute_values(),
        }
    })
}

impl Allowed {
    /// True when ammonia would remove nothing from `html`: a doctype at the start, then only text,
    /// allowed start tags with allowed attributes (quoted or plain values; `href`/`src` relative or
    /// with an allowed scheme, written without character references or control characters), end
    /// tags, and `<style>`/`<title>` text. Comments, `<!…>`/`<?…>` anywhere else, a `<` that starts
    /// no tag, and anything unexpected answer false (and the caller cleans the HTML).
    fn admits(&self, html: &str) -> bool {
        let b = html.as_bytes();
        let mut i = 0;
        let rest = html.trim_start();
        if starts_with_ci(rest, "<!doctype") {
            let start = html.len() - rest.len();
            match rest.find('>') {
                Some(end) if !rest[1..end].contains('<') => i = start + end + 1,
                _ => return false,
            }
        }
        while let Some(off) = html[i..].find('<') {
            let at = i + off;
            let closing = b.get(at + 1) == Some(&b'/');
            let name_start = at + 1 + usize::from(closing);
            let mut j = name_start;
            while j < b.len() && b[j].is_ascii_alphanumeric() {
                j += 1;
            }
            if j == name_start || !b[name_start].is_ascii_alphabetic() {
                return false;
            }
            let name = lowercase(&html[name_start..j]);
            if !self.tags.contains(&*name) {
                return false;
            }
            if closing {
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b.get(j) != Some(&b'>') {
                    return false;
                }
                i = j + 1;
                continue;
            }
            let Some(end) = self.attributes(html, &name, j) else {
                return false;
            };
            i = end;
            if name == "style" || name == "title" {
                // Raw text up to the end tag (checked by the loop).
                match find_ci_from(html, i, &format!("</{name}")) {
                    Some(close) => i = close,
                    None => return false,
                }
            }
        }
        true
    }

    /// Checks the attributes of the start tag `name` from `i`; the index after its `>`.
    fn attributes(&self, html: &str, name: &str, mut i: usize) -> Option<usize> {
        let b = html.as_bytes();
        loop {
            let before = i;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            match b.get(i)? {
                b'>' => return Some(i + 1),
                b'/' if b.get(i + 1) == Some(&b'>') => return Some(i + 2),
                _ if i == before => return None,
                _ => {}
            }
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'-' | b'_' | b':'))
            {
                i += 1;
            }
            if i == start {
                return None;
            }
            let attr = lowercase(&html[start..i]);
            let mut value = "";
            if b.get(i) == Some(&b'=') {
                i += 1;
                match *b.get(i)? {
                    q @ (b'"' | b'\'') => {
                        let end = html[i + 1..].find(q as char)? + i + 1;
                        value = &html[i + 1..end];
                        i = end + 1;
                    }
                    _ => {
                        let s = i;
                        while i < b.len()
                            && !b[i].is_ascii_whitespace()
                            && !matches!(b[i], b'"' | b'\'' | b'<' | b'>' | b'=' | b'`')
                        {
                            i += 1;
                        }
                        if i == s {
                            return None;
                        }
                        value = &html[s..i];
                    }
                }
            }
            if value.contains('<') || !self.attribute(name, &attr, value) {
                return None;
            }
        }
    }

    fn attribute(&self, tag: &str, attr: &str, value: &str) -> bool {
        let listed = self.generic.contains(attr)
            || self.prefixes.iter().any(|p| attr.starts_with(p))
            || self.by_tag.get(tag).is_some_and(|a| a.contains(attr));
        let by_value = || {
            self.values
                .get(tag)
                .and_then(|a| a.get(attr))
                .is_some_and(|vs| vs.iter().any(|v| v.eq_ignore_ascii_case(value)))
        };
        if !listed && !by_value() {
            return false;
        }
        // The attributes ammonia checks as URLs. Up to the first `/`, `?` or `#` (where a
        // scheme ends), a character reference, a space or a control character could hide one.
        if matches!(attr, "href" | "src" | "xlink:href") {
            let head = value
                .find(['/', '?', '#'])
                .map_or(value, |end| &value[..end]);
            return !head.contains('&')
                && !head.chars().any(|c| c.is_control() || c.is_whitespace())
                && is_safe_url(value);
        }
        true
    }
}

fn clean(fragment: &str) -> String {
    policy().clean(fragment).to_string()
}

/// One piece of a whole HTML document, split so that ammonia cleans the parts it can (it cleans
/// fragments: it would drop the doctype and the `<html>`, `<head>` and `<body>` tags).
enum Piece<'a> {
    /// Skeleton text written by [`Document::split`] itself (tag names, the doctype).
    Kept(&'a str),
    /// Source text between skeleton tags: kept when it is whitespace, else cleaned.
    Gap(&'a str),
    /// The attribute text of a skeleton tag, filtered by the policy.
    Attrs(&'a str),
    /// The content of `<head>` or `<body>`, cleaned.
    Content(&'a str),
}

struct Document<'a> {
    pieces: Vec<Piece<'a>>,
}

impl<'a> Document<'a> {
    /// The pieces of `text` when it is a document with a `<body>`; `None` for a fragment.
    fn split(text: &'a str) -> Option<Self> {
        let trimmed = text.trim_start();
        let mut pieces = vec![Piece::Gap(&text[..text.len() - trimmed.len()])];
        let mut rest = trimmed;
        if starts_with_ci(rest, "<!doctype") {
            let end = rest.find('>')?;
            if rest[1..end].contains('<') {
                return None;
            }
            pieces.push(Piece::Kept(&rest[..=end]));
            rest = &rest[end + 1..];
        }
        let body_at = find_tag(rest, "body")?;
        let (body_attrs, body_start) = tag_attrs(rest, body_at, "body")?;
        let body_end = rfind_ci(rest, "</body").filter(|e| *e >= body_start)?;
        let prologue = &rest[..body_at];
        let mut pos = 0;
        let html = find_tag(prologue, "html");
        if let Some(at) = html {
            let (attrs, end) = tag_attrs(prologue, at, "html")?;
            pieces.extend([
                Piece::Gap(&prologue[pos..at]),
                Piece::Kept("<html"),
                Piece::Attrs(attrs),
                Piece::Kept(">"),
            ]);
            pos = end;
        }
        if let Some(at) = find_tag(&prologue[pos..], "head").map(|a| a + pos) {
            let (_, start) = tag_attrs(prologue, at, "head")?;
            let end = rfind_ci(prologue, "</head").filter(|e| *e >= start)?;
            pieces.extend([
                Piece::Gap(&prologue[pos..at]),
                Piece::Kept("<head>"),
                Piece::Content(&prologue[start..end]),
                Piece::Kept("</head>"),
            ]);
            pos = close_end(prologue, end)?;
        }
        pieces.extend([
            Piece::Gap(&prologue[pos..]),
            Piece::Kept("<body"),
            Piece::Attrs(body_attrs),
            Piece::Kept(">"),
            Piece::Content(&rest[body_start..body_end]),
            Piece::Kept("</body>"),
        ]);
        let mut pos = close_end(rest, body_end)?;
        if html.is_some() {
            if let Some(at) = rfind_ci(rest, "</html").filter(|e| *e >= pos) {
                pieces.extend([Piece::Gap(&rest[pos..at]), Piece::Kept("</html>")]);
                pos = close_end(rest, at)?;
            }
        }
        pieces.push(Piece::Gap(&rest[pos..]));
        Some(Self { pieces })
    }

    fn sanitize(&self) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Kept(s) => out.push_str(s),
                Piece::Gap(s) if s.trim().is_empty() => out.push_str(s),
                Piece::Gap(s) | Piece::Content(s) => out.push_str(&clean(s)),
                Piece::Attrs(s) => out.push_str(&clean_attrs(s)),
            }
        }
        out
    }
}

/// The index just after the `>` of the end tag starting at `at`.
fn close_end(text: &str, at: usize) -> Option<usize> {
    text[at..].find('>').map(|gt| at + gt + 1)
}

/// The allowed attributes of a skeleton tag (as ` name="value"…`), checked by the same policy
/// through a stand-in `<div>`.
fn clean_attrs(attrs: &str) -> String {
    if attrs.trim().is_empty() {
        return String::new();
    }
    let cleaned = clean(&format!("<div{attrs}></div>"));
    cleaned
        .strip_prefix("<div")
        .and_then(|s| s.strip_suffix("></div>"))
        .map(str::to_owned)
        .unwrap_or_default()
}

/// `s` in ASCII lower case, borrowed when it already is (tag and attribute names mostly are: no allocation
/// per name in the quick check).
fn lowercase(s: &str) -> Cow<'_, str> {
    if s.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(s.to_ascii_lowercase())
    } else {
        Cow::Borrowed(s)
    }
}

fn starts_with_ci(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len()
        && text.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// The byte index of the first `<name` start tag (followed by whitespace, `/` or `>`).
fn find_tag(text: &str, name: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(off) = text[from..].find('<') {
        let at = from + off;
        let after = at + 1 + name.len();
        if starts_with_ci(&text[at + 1..], name)
            && bytes
                .get(after)
                .is_some_and(|c| c.is_ascii_whitespace() || *c == b'>' || *c == b'/')
        {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The byte index of the last case-insensitive occurrence of `needle`.
fn rfind_ci(text: &str, needle: &str) -> Option<usize> {
    let n = needle.len();
    let bytes = text.as_bytes();
    (0..=bytes.len().checked_sub(n)?)
        .rev()
        .find(|&i| bytes[i..i + n].eq_ignore_ascii_case(needle.as_bytes()))
}

/// The attribute text of the tag `<name …>` starting at `at`, and the index just after its `>`
/// (quoted values may hold `>`).
fn tag_attrs<'a>(text: &'a str, at: usize, name: &str) -> Option<(&'a str, usize)> {
    let start = at + 1 + name.len();
    let bytes = text.as_bytes();
    let mut i = start;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (None, q @ (b'"' | b'\'')) => quote = Some(q),
            (Some(q), c) if c == q => quote = None,
            (None, b'>') => {
                let attrs = text[start..i].trim_end_matches('/');
                return Some((attrs, i + 1));
            }
            _ => {}
        }
        i += 1;
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The plain-text alternative

/// Elements whose content is not text a reader sees.
const SKIPPED: &[&str] = &["head", "style", "script", "title", "template"];
/// Elements set off by an empty line.
const PARAGRAPHS: &[&str] = &[
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "ul",
    "ol",
    "blockquote",
    "pre",
    "hr",
];
/// Elements that start and end on their own line.
const BLOCKS: &[&str] = &[
    "address", "article", "aside", "center", "div", "dl", "dt", "dd", "fieldset", "figure",
    "footer", "form", "header", "li", "main", "nav", "section", "tbody", "thead", "tfoot", "tr",
];

/// A plain-text rendering of an HTML email: the visible text with whitespace collapsed, one line
/// per block (paragraph, heading, table row, list item), table cells separated by a space, list
/// items prefixed with `- `, a link's target after its text (`View order (https://…)`) when it
/// differs, and no `<head>`, styles, scripts or images. The input is cleaned by [`sanitize_html`] first,
/// so the scan below only meets well-formed, serialised HTML.
pub fn html_to_text(html: &str) -> String {
    text_of_clean_html(&sanitize_html(html))
}

/// [`html_to_text`] of HTML that [`sanitize_html`] already cleaned.
pub fn text_of_clean_html(s: &str) -> String {
    let mut w = TextWriter::default();
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut links: Vec<Option<String>> = Vec::new();
    while i < bytes.len() {
        if bytes[i] != b'<' {
            let end = s[i..].find('<').map_or(s.len(), |o| i + o);
            w.text(&decode_entities(&s[i..end]));
            i = end;
            continue;
        }
        let Some((tag, end)) = read_tag(s, i) else {
            w.text(&s[i..]);
            break;
        };
        i = end;
        let name = tag.name.to_ascii_lowercase();
        if !tag.closing && SKIPPED.contains(&name.as_str()) {
            // Skip to the matching end tag (serialised raw text and head content hold no `</name`).
            let close = format!("</{name}");
            i = find_ci_from(s, i, &close).map_or(s.len(), |at| {
                s[at..].find('>').map_or(s.len(), |gt| at + gt + 1)
            });
            continue;
        }
        match name.as_str() {
            "br" => w.newline(),
            "td" | "th" if !tag.closing => w.space(),
            "li" if !tag.closing => {
                w.block(false);
                w.raw("- ");
            }
            "a" if !tag.closing => {
                links.push(tag.attr("href"));
                w.mark_link();
            }
            "a" => {
                if let Some(Some(href)) = links.pop() {
                    w.link_end(&href);
                }
            }
            n if PARAGRAPHS.contains(&n) => w.block(true),
            n if BLOCKS.contains(&n) => w.block(false),
            _ => {}
        }
    }
    w.finish()
}

/// The first `needle` at or after `from`, case-insensitive.
fn find_ci_from(text: &str, from: usize, needle: &str) -> Option<usize> {
    let n = needle.len();
    let bytes = text.as_bytes();
    (from..=bytes.len().checked_sub(n)?)
        .find(|&i| bytes[i..i + n].eq_ignore_ascii_case(needle.as_bytes()))
}

struct Tag<'a> {
    name: &'a str,
    closing: bool,
    attrs: &'a str,
}

impl Tag<'_> {
    /// The decoded value of attribute `name` (serialised HTML quotes every value with `"`).
    fn attr(&self, name: &str) -> Option<String> {
        let mut rest = self.attrs;
        while let Some(eq) = rest.find("=\"") {
            let key = rest[..eq].trim();
            let value_start = eq + 2;
            let value_end = rest[value_start..].find('"')? + value_start;
            if key.eq_ignore_ascii_case(name) {
                return Some(decode_entities(&rest[value_start..value_end]));
            }
            rest = &rest[value_end + 1..];
        }
        None
    }
}

/// The tag starting at `at` (`<name …>` or `</name>`) and the index after it.
fn read_tag(s: &str, at: usize) -> Option<(Tag<'_>, usize)> {
    let bytes = s.as_bytes();
    let closing = bytes.get(at + 1) == Some(&b'/');
    let name_start = at + 1 + usize::from(closing);
    let mut name_end = name_start;
    while name_end < bytes.len()
        && (bytes[name_end].is_ascii_alphanumeric() || bytes[name_end] == b'-')
    {
        name_end += 1;
    }
    let mut i = name_end;
    let mut in_quote = false;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => in_quote = !in_quote,
            b'>' if !in_quote => {
                return Some((
                    Tag {
                        name: &s[name_start..name_end],
                        closing,
                        attrs: &s[name_end..i],
                    },
                    i + 1,
                ))
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Decodes the entities serialised HTML uses (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&nbsp;`, and
/// numeric ones); anything else is kept as written.
fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest[..rest.len().min(12)].find(';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some('\u{a0}'),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Builds the text: collapses whitespace, and turns block boundaries into line breaks (at most
/// one empty line in a row).
#[derive(Default)]
struct TextWriter {
    out: String,
    /// A space is owed before the next word.
    pending_space: bool,
    /// Line breaks owed before the next word (1 = new line, 2 = empty line).
    pending_breaks: u8,
    /// Where the text of each open link starts in `out`.
    link_starts: Vec<usize>,
}

impl TextWriter {
    fn text(&mut self, text: &str) {
        for (i, word) in text
            .split(|c: char| c.is_whitespace() && c != '\u{a0}')
            .enumerate()
        {
            if i > 0 {
                self.pending_space = true;
            }
            if !word.is_empty() {
                self.raw(&word.replace('\u{a0}', " "));
            }
        }
    }

    fn raw(&mut self, s: &str) {
        if !self.out.is_empty() {
            if self.pending_breaks > 0 {
                let n = if self.pending_breaks > 1 {
                    "\n\n"
                } else {
                    "\n"
                };
                self.out.push_str(n);
            } else if self.pending_space && !self.out.ends_with(' ') && !self.out.ends_with('\n') {
                self.out.push(' ');
            }
        }
        self.pending_breaks = 0;
        self.pending_space = false;
        self.out.push_str(s);
    }

    fn space(&mut self) {
        self.pending_space = true;
    }

    /// `<br>`: a line break (two in a row make an empty line).
    fn newline(&mut self) {
        self.pending_breaks = (self.pending_breaks + 1).min(2);
        self.pending_space = false;
    }

    /// A block boundary: a new line, or an empty line (`paragraph`) after paragraphs and tables.
    fn block(&mut self, paragraph: bool) {
        self.pending_breaks = self.pending_breaks.max(if paragraph { 2 } else { 1 });
        self.pending_space = false;
    }

    fn mark_link(&mut self) {
        self.link_starts.push(self.out.len());
    }

    fn link_end(&mut self, href: &str) {
        let start = self.link_starts.pop().unwrap_or(self.out.len());
        let label = self.out[start..].trim();
        let href_shown = href.strip_prefix("mailto:").unwrap_or(href);
        if !href.is_empty() && label != href && label != href_shown && !href.starts_with('#') {
            self.pending_space = true;
            self.raw(&format!("({href_shown})"));
        }
    }

    fn finish(self) -> String {
        let lines: Vec<&str> = self.out.lines().map(str::trim_end).collect();
        let mut out = String::with_capacity(self.out.len());
        let mut blank = 0;
        for line in lines {
            let line = line.trim_start();
            if line.is_empty() {
                blank += 1;
                if blank > 1 || out.is_empty() {
                    continue;
                }
            } else {
                blank = 0;
            }
            out.push_str(line);
            out.push('\n');
        }
        out.trim_end().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Tags the policy allows.
    const TAGS: &[&str] = &[
        "p", "div", "span", "a", "img", "br", "b", "em", "table", "tbody", "tr", "td", "font",
        "center", "section", "picture", "source", "meta", "link", "style", "title",
    ];
    /// Tags it removes (with or without their content), and the document skeleton, which ammonia drops
    /// from a fragment.
    const OTHER_TAGS: &[&str] = &[
        "html", "head", "body", "script", "iframe", "object", "form", "input", "button", "svg",
        "math", "base", "noscript", "template", "textarea", "x-y", "foo",
    ];
    /// Attributes allowed on every tag.
    const GENERIC: &[&str] = &[
        "style",
        "class",
        "id",
        "title",
        "lang",
        "align",
        "width",
        "data-x",
        "aria-label",
        "name",
        "xmlns",
    ];
    /// Attributes ammonia checks as URLs.
    const URL_ATTRIBUTES: &[&str] = &["href", "src", "srcset", "xlink:href"];
    /// Attributes allowed on some tags only, or with some values only.
    const TAG_ATTRIBUTES: &[&str] = &[
        "target",
        "rel",
        "alt",
        "charset",
        "content",
        "type",
        "media",
        "http-equiv",
    ];
    /// Attributes the policy removes.
    const OTHER_ATTRIBUTES: &[&str] = &[
        "onclick",
        "onerror",
        "formaction",
        "action",
        "background",
        "data",
        "x",
    ];
    /// Plain attribute values.
    const VALUES: &[&str] = &[
        "",
        "x",
        "a b",
        "color: red",
        "a&amp;b",
        "refresh",
        "content-type",
        "Content-Type",
        "0; url=https://example.com",
        "<b>",
        "x\"y",
    ];
    /// URLs of every kind: allowed schemes, relative ones, and schemes hidden by case, spaces, control
    /// characters or character references.
    const URLS: &[&str] = &[
        "https://example.com/a?b=1#c",
        "HTTPS://example.com",
        "https://example.com/?a=1&amp;b=2",
        "/relative/path",
        "page.html",
        "#top",
        "//example.com/x",
        "mailto:ann@example.com",
        "tel:+1",
        "cid:logo",
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        " javascript:alert(1)",
        "java\tscript:alert(1)",
        "java&#x09;script:alert(1)",
        "&#106;avascript:alert(1)",
        "javascript&colon;alert(1)",
        "data:text/html,x",
        "vbscript:x",
        "ftp://example.com",
        "x y:z",
    ];
    /// Text between tags, including character references.
    const TEXTS: &[&str] = &[
        "hello",
        " ",
        "\n",
        "a &amp; b",
        "1 &lt; 2",
        "x > y",
        "café",
        "&nbsp;",
        "&",
        "\"q\"",
    ];
    /// Pieces that are neither text nor a start or end tag.
    const OTHERS: &[&str] = &[
        "<!-- note -->",
        "<!x>",
        "<?x?>",
        "<",
        "< p>",
        "<!DOCTYPE html>",
        "</>",
        "<p",
        "<a href=\"x\"",
    ];

    /// One of `names`, in lower or upper case.
    fn name(names: &'static [&'static str]) -> impl Strategy<Value = String> {
        (prop::sample::select(names), any::<bool>()).prop_map(|(n, upper)| {
            if upper {
                n.to_uppercase()
            } else {
                n.to_owned()
            }
        })
    }

    /// `name` with `value`, double- or single-quoted, unquoted, or without it.
    fn with_value(
        name: impl Strategy<Value = String>,
        values: &'static [&'static str],
    ) -> impl Strategy<Value = String> {
        (name, prop::sample::select(values), 0..4u8).prop_map(|(n, v, quote)| match quote {
            0 => format!(" {n}=\"{v}\""),
            1 => format!(" {n}='{v}'"),
            2 => format!(" {n}={v}"),
            _ => format!(" {n}"),
        })
    }

    fn attribute() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => with_value(name(GENERIC), VALUES),
            1 => with_value(name(URL_ATTRIBUTES), URLS),
            1 => with_value(name(TAG_ATTRIBUTES), VALUES),
            1 => with_value(name(OTHER_ATTRIBUTES), VALUES),
        ]
    }

    fn start_tag(tags: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
        (
            tags,
            prop::collection::vec(attribute(), 0..3),
            any::<bool>(),
        )
            .prop_map(|(tag, attrs, selfclosing)| {
                format!(
                    "<{tag}{}{}>",
                    attrs.concat(),
                    if selfclosing { " /" } else { "" }
                )
            })
    }

    fn piece() -> impl Strategy<Value = String> {
        let tag = || prop_oneof![10 => name(TAGS), 1 => name(OTHER_TAGS)];
        prop_oneof![
            4 => prop::sample::select(TEXTS).prop_map(str::to_owned),
            5 => start_tag(tag()),
            // Links and images: the URL checks.
            3 => (prop::sample::select(&["a", "img", "source", "link"][..]), with_value(name(URL_ATTRIBUTES), URLS))
                .prop_map(|(tag, url)| format!("<{tag}{url}>")),
            4 => tag().prop_map(|tag| format!("</{tag}>")),
            1 => prop::sample::select(OTHERS).prop_map(str::to_owned),
        ]
    }

    /// Every tag and attribute the generator writes allowed, every URL scheme it writes too, no content
    /// or comment removed: what ammonia makes of markup when it removes nothing (it parses and
    /// serialises it again).
    fn keep_everything() -> ammonia::Builder<'static> {
        let mut b = ammonia::Builder::default();
        b.add_tags(TAGS)
            .add_tags(OTHER_TAGS)
            .clean_content_tags(HashSet::new())
            .add_generic_attributes(GENERIC)
            .add_generic_attributes(URL_ATTRIBUTES)
            .add_generic_attributes(TAG_ATTRIBUTES)
            .add_generic_attributes(OTHER_ATTRIBUTES)
            .url_schemes(
                [
                    "http",
                    "https",
                    "mailto",
                    "tel",
                    "cid",
                    "javascript",
                    "data",
                    "vbscript",
                    "ftp",
                ]
                .into_iter()
                .collect(),
            )
            .link_rel(None)
            .strip_comments(false);
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The fast path of [`sanitize_html`]: markup that [`Allowed::admits`] accepts is markup the policy
        /// removes nothing from. Ammonia writes what it parsed anew (quotes, case, nesting), so its
        /// cleaning is compared with its parse and serialisation alone.
        #[test]
        fn what_admits_accepts_ammonia_leaves_unchanged(
            pieces in prop::collection::vec(piece(), 1..8)
        ) {
            let html = pieces.concat();
            if allowed().admits(&html) {
                let unchanged = keep_everything().clean(&html).to_string();
                prop_assert_eq!(clean(&html), unchanged, "admitted: {}", html);
            }
        }
    }
}
