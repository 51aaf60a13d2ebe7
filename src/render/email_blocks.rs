//! Email bodies written in the block editor: a JSON document (TipTap / Maily shape,
//! `{"type": "doc", "content": [...]}`) turned into email-safe HTML.
//!
//! The document is compiled to a Liquid template — HTML with table layout and inline styles, where
//! variable nodes become `{{ path | escape }}`, repeat blocks `{% for %}` and show-if conditions
//! `{% if %}` — which the one [`Renderer`](super::Renderer) then renders like any HTML body. So
//! the same filters, error messages and variable scanner apply to both editors.
//!
//! Supported nodes: `paragraph`, `heading` (levels 1–6), `text` with marks (`bold`, `italic`,
//! `underline`, `strike`, `code`, `link`, `textStyle` colour), `hardBreak`, `variable`, `button`,
//! `image` / `logo`, `horizontalRule` / `divider`, `spacer`, `bulletList` / `orderedList` /
//! `listItem`, `blockquote`, `section`, `columns` / `column`, `repeat` / `for`, `footer`,
//! `htmlCodeBlock` and `inlineImage`. Any node may carry `attrs.showIfKey`. Unknown node types render
//! their children.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value;

/// A block document that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockError {
    pub message: String,
    pub hint: String,
}

/// Deepest nesting accepted (documents are user input).
const MAX_DEPTH: usize = 64;

const FONT: &str =
    "font-family:-apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,Arial,sans-serif";

/// Whether `body` is a block-editor document: a JSON object whose `type` is `doc` and whose
/// `content` is an array. As in Novu, `editorType` does not decide it: the Python SDK sends
/// `editorType: "block"` on every email step, and a body that is not such a document (HTML or plain
/// Liquid) is rendered as HTML whatever the editor type says.
pub fn is_block_document(body: &str) -> bool {
    let t = body.trim_start();
    t.starts_with('{')
        && serde_json::from_str::<Value>(t).is_ok_and(|v| {
            v.get("type").and_then(Value::as_str) == Some("doc")
                && v.get("content").is_some_and(Value::is_array)
        })
}

/// The Liquid template for an email body: a block document compiled to HTML (see the module
/// docs), or the body itself when it is HTML / text.
pub fn email_body_template(body: &str) -> Result<Cow<'_, str>, BlockError> {
    if !is_block_document(body) {
        return Ok(Cow::Borrowed(body));
    }
    let doc: Value = serde_json::from_str(body).map_err(|e| BlockError {
        message: format!("The email body is not a valid block-editor document: {e}"),
        hint: "Send the block editor's JSON document as the body (`{\"type\": \"doc\", \"content\": [...]}`), \
               or an HTML body."
            .to_owned(),
    })?;
    to_liquid(&doc).map(Cow::Owned)
}

/// Compiles a block document to an email-safe HTML Liquid template.
pub fn to_liquid(doc: &Value) -> Result<String, BlockError> {
    if doc.get("type").and_then(Value::as_str) != Some("doc") {
        return Err(BlockError {
            message: "The email body is JSON but not a block-editor document: its `type` is not `doc`"
                .to_owned(),
            hint: "A block document looks like {\"type\": \"doc\", \"content\": [{\"type\": \"paragraph\", …}]}."
                .to_owned(),
        });
    }
    let mut c = Compiler {
        out: String::with_capacity(1024),
        loops: Vec::new(),
    };
    c.out.push_str(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\"></head>\
         <body style=\"margin:0;padding:0;background-color:#ffffff\">\
         <table role=\"presentation\" width=\"100%\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\">\
         <tr><td align=\"center\">\
         <table role=\"presentation\" width=\"600\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" \
         style=\"max-width:600px;width:100%\"><tr><td style=\"padding:24px;",
    );
    c.out.push_str(FONT);
    c.out
        .push_str(";font-size:15px;line-height:1.6;color:#1f2937\">");
    c.children(doc, 0)?;
    c.out
        .push_str("</td></tr></table></td></tr></table></body></html>");
    Ok(c.out)
}

struct Compiler {
    out: String,
    /// Enclosing repeat blocks: (iterated path, loop variable name).
    loops: Vec<(String, String)>,
}

fn attr<'a>(node: &'a Value, key: &str) -> Option<&'a Value> {
    node.get("attrs")
        .and_then(|a| a.get(key))
        .filter(|v| !v.is_null())
}

fn attr_str<'a>(node: &'a Value, key: &str) -> Option<&'a str> {
    attr(node, key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn attr_bool(node: &Value, key: &str) -> bool {
    attr(node, key).and_then(Value::as_bool).unwrap_or(false)
}

/// A CSS length: numbers are pixels, `auto` / `100%`-style strings pass when harmless.
fn css_len(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Number(n) => n.as_f64().map(|f| format!("{}px", f.round() as i64)),
        Value::String(s) => {
            let s = s.trim();
            if let Ok(n) = s.parse::<f64>() {
                Some(format!("{}px", n.round() as i64))
            } else if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '%' || c == '.')
            {
                Some(s.to_owned())
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A colour usable inside a style attribute (`#rgb`, `#rrggbb`, names, `rgb(…)`).
fn css_color(s: Option<&str>) -> Option<&str> {
    let s = s?.trim();
    let ok = !s.is_empty()
        && s.len() <= 40
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '#' | '(' | ')' | ',' | '.' | ' ' | '%')
        });
    ok.then_some(s)
}

fn align(s: Option<&str>) -> &'static str {
    match s {
        Some("center") => "center",
        Some("right") => "right",
        Some("justify") => "justify",
        _ => "left",
    }
}

/// Escapes text for HTML, keeping Liquid markup (`{{ … }}`, `{% … %}`) as written so it renders.
fn escape_keep_liquid(text: &str, out: &mut String) {
    let mut rest = text;
    while let Some(start) = rest.find(['{']) {
        let (before, from) = rest.split_at(start);
        escape(before, out);
        let close = if from.starts_with("{{") {
            Some("}}")
        } else if from.starts_with("{%") {
            Some("%}")
        } else {
            None
        };
        match close.and_then(|c| from[2..].find(c).map(|i| i + 4)) {
            Some(end) => {
                out.push_str(&from[..end]);
                rest = &from[end..];
            }
            None => {
                out.push('{');
                rest = &from[1..];
            }
        }
    }
    escape(rest, out);
}

pub(crate) fn escape(text: &str, out: &mut String) {
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// A Liquid string literal for `s` (Liquid strings have no escapes: pick the quote not used).
fn liquid_string(s: &str) -> String {
    if !s.contains('"') {
        format!("\"{s}\"")
    } else if !s.contains('\'') {
        format!("'{s}'")
    } else {
        format!("\"{}\"", s.replace('"', "'"))
    }
}

/// Whether `id` is a plain variable path (`payload.items[0].name`, `steps.digest-step.events`).
fn is_path(id: &str) -> bool {
    let mut chars = id.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '[' | ']'))
        && !id.contains("..")
        && !id.ends_with('.')
}

impl Compiler {
    /// A variable id as a Liquid path: inside a repeat block, `payload.items.name` (or
    /// `payload.items[0].name`) reads the current item.
    fn resolve(&self, id: &str) -> Result<String, BlockError> {
        let id = id.trim();
        let id = id
            .strip_prefix("{{")
            .and_then(|s| s.strip_suffix("}}"))
            .map_or(id, str::trim);
        if !is_path(id) {
            return Err(BlockError {
                message: format!(
                    "The block document uses the variable `{id}`, which is not a variable path"
                ),
                hint:
                    "Variables are dotted paths such as payload.orderId, subscriber.firstName or \
                       steps.digest-step.events: pick one from the variable list."
                        .to_owned(),
            });
        }
        for (each, var) in self.loops.iter().rev() {
            for prefix in [format!("{each}."), format!("{each}[0].")] {
                if let Some(rest) = id.strip_prefix(&prefix) {
                    return Ok(format!("{var}.{rest}"));
                }
            }
            if id == each {
                return Ok(var.clone());
            }
        }
        Ok(id.to_owned())
    }

    /// `{{ path | default: "fallback" | escape }}`.
    fn variable_output(&mut self, id: &str, fallback: Option<&str>) -> Result<(), BlockError> {
        let path = self.resolve(id)?;
        self.out.push_str("{{ ");
        self.out.push_str(&path);
        if let Some(f) = fallback.filter(|f| !f.is_empty()) {
            self.out.push_str(" | default: ");
            self.out.push_str(&liquid_string(f));
        }
        self.out.push_str(" | escape }}");
        Ok(())
    }

    /// An attribute value that may be given as a variable (`is<Name>Variable`), else as text
    /// possibly holding Liquid; escaped for use inside an attribute.
    fn attr_text(&self, node: &Value, key: &str, var_flag: &str) -> Result<String, BlockError> {
        let mut out = String::new();
        let Some(value) = attr_str(node, key) else {
            return Ok(out);
        };
        if attr_bool(node, var_flag) {
            let path = self.resolve(value)?;
            let _ = write!(out, "{{{{ {path} | escape }}}}");
        } else {
            escape_keep_liquid(value, &mut out);
        }
        Ok(out)
    }

    fn children(&mut self, node: &Value, depth: usize) -> Result<(), BlockError> {
        if let Some(items) = node.get("content").and_then(Value::as_array) {
            for child in items {
                self.node(child, depth + 1)?;
            }
        }
        Ok(())
    }

    fn node(&mut self, node: &Value, depth: usize) -> Result<(), BlockError> {
        if depth > MAX_DEPTH {
            return Err(BlockError {
                message: format!("The block document is nested more than {MAX_DEPTH} levels deep"),
                hint: "Flatten the email's layout: fewer sections inside sections.".to_owned(),
            });
        }
        let show_if = attr_str(node, "showIfKey").map(str::to_owned);
        if let Some(key) = &show_if {
            let path = self.resolve(key)?;
            let _ = write!(self.out, "{{% if {path} %}}");
        }
        self.node_body(node, depth)?;
        if show_if.is_some() {
            self.out.push_str("{% endif %}");
        }
        Ok(())
    }

    fn node_body(&mut self, node: &Value, depth: usize) -> Result<(), BlockError> {
        let kind = node.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "paragraph" => {
                let a = align(attr_str(node, "textAlign"));
                let _ = write!(self.out, "<p style=\"margin:0 0 16px 0;text-align:{a}\">");
                self.children(node, depth)?;
                self.out.push_str("</p>");
            }
            "heading" => {
                let level = attr(node, "level")
                    .and_then(Value::as_u64)
                    .unwrap_or(1)
                    .clamp(1, 6);
                let size = [32, 24, 20, 18, 16, 14][level as usize - 1];
                let a = align(attr_str(node, "textAlign"));
                let _ = write!(
                    self.out,
                    "<h{level} style=\"margin:0 0 12px 0;font-size:{size}px;line-height:1.3;font-weight:700;text-align:{a}\">"
                );
                self.children(node, depth)?;
                let _ = write!(self.out, "</h{level}>");
            }
            "text" => self.text(node)?,
            "hardBreak" => self.out.push_str("<br>"),
            "variable" => {
                let id = attr_str(node, "id").unwrap_or("");
                let fallback = attr_str(node, "fallback");
                self.variable_output(id, fallback)?;
            }
            "button" => self.button(node)?,
            "image" | "logo" | "inlineImage" => self.image(node, kind)?,
            "horizontalRule" | "divider" => self.out.push_str(
                "<table role=\"presentation\" width=\"100%\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\">\
                 <tr><td style=\"padding:16px 0\"><hr style=\"border:none;border-top:1px solid #e5e7eb;margin:0\"></td></tr></table>",
            ),
            "spacer" => self.spacer(node),
            "bulletList" | "orderedList" => {
                let tag = if kind == "bulletList" { "ul" } else { "ol" };
                let _ = write!(self.out, "<{tag} style=\"margin:0 0 16px 0;padding-left:24px\">");
                self.children(node, depth)?;
                let _ = write!(self.out, "</{tag}>");
            }
            "listItem" => {
                self.out.push_str("<li style=\"margin:0 0 4px 0\">");
                self.children(node, depth)?;
                self.out.push_str("</li>");
            }
            "blockquote" => {
                self.out.push_str(
                    "<blockquote style=\"margin:0 0 16px 0;padding:0 0 0 12px;border-left:3px solid #d1d5db;color:#4b5563\">",
                );
                self.children(node, depth)?;
                self.out.push_str("</blockquote>");
            }
            "repeat" | "for" => self.repeat(node, depth)?,
            "section" => self.section(node, depth)?,
            "columns" => {
                self.out.push_str(
                    "<table role=\"presentation\" width=\"100%\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\"><tr>",
                );
                self.children(node, depth)?;
                self.out.push_str("</tr></table>");
            }
            "column" => {
                let width = css_len(attr(node, "width"))
                    .map(|w| format!(" width=\"{}\"", w.trim_end_matches("px")))
                    .unwrap_or_default();
                let _ = write!(self.out, "<td valign=\"top\"{width} style=\"padding:0 8px\">");
                self.children(node, depth)?;
                self.out.push_str("</td>");
            }
            "footer" => {
                self.out.push_str("<p style=\"margin:0 0 16px 0;font-size:12px;color:#6b7280\">");
                self.children(node, depth)?;
                self.out.push_str("</p>");
            }
            "htmlCodeBlock" => {
                // Raw HTML the author wrote on purpose.
                if let Some(code) = attr_str(node, "content").or_else(|| {
                    node.get("content")
                        .and_then(Value::as_array)
                        .and_then(|c| c.first())
                        .and_then(|t| t.get("text"))
                        .and_then(Value::as_str)
                }) {
                    self.out.push_str(code);
                }
            }
            _ => self.children(node, depth)?,
        }
        Ok(())
    }

    /// A spacer: an empty row of the named (`sm` … `xl`) or given height.
    fn spacer(&mut self, node: &Value) {
        let height = match attr(node, "height") {
            Some(Value::String(s)) if s == "sm" => 8,
            Some(Value::String(s)) if s == "md" => 16,
            Some(Value::String(s)) if s == "lg" => 32,
            Some(Value::String(s)) if s == "xl" => 64,
            Some(v) => css_len(Some(v))
                .and_then(|l| l.trim_end_matches("px").parse::<i64>().ok())
                .unwrap_or(16)
                .clamp(0, 400),
            None => 16,
        };
        let _ = write!(
            self.out,
            "<table role=\"presentation\" width=\"100%\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\">\
             <tr><td style=\"height:{height}px;line-height:{height}px;font-size:1px\">&nbsp;</td></tr></table>"
        );
    }

    /// A loop over the array at `each`: its children once per item, as `item`, `item1` … when nested.
    fn repeat(&mut self, node: &Value, depth: usize) -> Result<(), BlockError> {
        let each = attr_str(node, "each").unwrap_or("");
        let path = self.resolve(each)?;
        let var = format!(
            "item{}",
            if self.loops.is_empty() {
                String::new()
            } else {
                self.loops.len().to_string()
            }
        );
        let _ = write!(self.out, "{{% for {var} in {path} %}}");
        self.loops.push((each.trim().to_owned(), var));
        let result = self.children(node, depth);
        self.loops.pop();
        result?;
        self.out.push_str("{% endfor %}");
        Ok(())
    }

    /// A section: a full-width table cell with its background, radius and alignment.
    fn section(&mut self, node: &Value, depth: usize) -> Result<(), BlockError> {
        let bg = css_color(attr_str(node, "backgroundColor"))
            .map(|c| format!("background-color:{c};"))
            .unwrap_or_default();
        let radius = css_len(attr(node, "borderRadius"))
            .map(|r| format!("border-radius:{r};"))
            .unwrap_or_default();
        let a = align(attr_str(node, "align"));
        let _ = write!(
            self.out,
            "<table role=\"presentation\" width=\"100%\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"margin:0 0 16px 0\">\
             <tr><td align=\"{a}\" style=\"padding:16px;{bg}{radius}\">"
        );
        self.children(node, depth)?;
        self.out.push_str("</td></tr></table>");
        Ok(())
    }

    fn text(&mut self, node: &Value) -> Result<(), BlockError> {
        let text = node.get("text").and_then(Value::as_str).unwrap_or("");
        let marks: &[Value] = node
            .get("marks")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let mut closers: Vec<&'static str> = Vec::new();
        for mark in marks {
            match mark.get("type").and_then(Value::as_str).unwrap_or("") {
                "bold" => {
                    self.out.push_str("<strong>");
                    closers.push("</strong>");
                }
                "italic" => {
                    self.out.push_str("<em>");
                    closers.push("</em>");
                }
                "underline" => {
                    self.out.push_str("<u>");
                    closers.push("</u>");
                }
                "strike" => {
                    self.out.push_str("<s>");
                    closers.push("</s>");
                }
                "code" => {
                    self.out.push_str(
                        "<code style=\"font-family:monospace;background-color:#f3f4f6;padding:1px 4px;border-radius:3px\">",
                    );
                    closers.push("</code>");
                }
                "link" => {
                    let href = self.attr_text(mark, "href", "isUrlVariable")?;
                    let _ = write!(self.out, "<a href=\"{href}");
                    self.out.push_str(
                        "\" target=\"_blank\" style=\"color:#2563eb;text-decoration:underline\">",
                    );
                    closers.push("</a>");
                }
                "textStyle" => {
                    if let Some(c) = css_color(attr_str(mark, "color")) {
                        let _ = write!(self.out, "<span style=\"color:{c}\">");
                        closers.push("</span>");
                    }
                }
                _ => {}
            }
        }
        escape_keep_liquid(text, &mut self.out);
        for c in closers.iter().rev() {
            self.out.push_str(c);
        }
        Ok(())
    }

    fn button(&mut self, node: &Value) -> Result<(), BlockError> {
        let a = align(attr_str(node, "alignment"));
        let bg = css_color(attr_str(node, "buttonColor")).unwrap_or("#000000");
        let fg = css_color(attr_str(node, "textColor")).unwrap_or("#ffffff");
        let radius = match attr_str(node, "borderRadius") {
            Some("sharp") => "0px",
            Some("round") => "9999px",
            _ => "6px",
        };
        let outline = attr_str(node, "variant") == Some("outline");
        let (cell_bg, link_fg, border) = if outline {
            ("transparent", bg, format!("border:2px solid {bg};"))
        } else {
            (bg, fg, String::new())
        };
        let href = self.attr_text(node, "url", "isUrlVariable")?;
        let _ = write!(
            self.out,
            "<table role=\"presentation\" width=\"100%\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"margin:0 0 16px 0\">\
             <tr><td align=\"{a}\"><table role=\"presentation\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\">\
             <tr><td style=\"border-radius:{radius};background-color:{cell_bg};{border}\">\
             <a href=\"{href}"
        );
        let _ = write!(
            self.out,
            "\" target=\"_blank\" style=\"display:inline-block;padding:12px 24px;{FONT};font-size:15px;font-weight:600;\
             color:{link_fg};text-decoration:none;border-radius:{radius}\">"
        );
        if attr_bool(node, "isTextVariable") {
            let text = attr_str(node, "text").unwrap_or("");
            self.variable_output(text, None)?;
        } else {
            escape_keep_liquid(attr_str(node, "text").unwrap_or(""), &mut self.out);
        }
        self.out
            .push_str("</a></td></tr></table></td></tr></table>");
        Ok(())
    }

    fn image(&mut self, node: &Value, kind: &str) -> Result<(), BlockError> {
        let width = css_len(attr(node, "width")).unwrap_or_else(|| {
            if kind == "logo" {
                "48px".to_owned()
            } else {
                "100%".to_owned()
            }
        });
        let height = css_len(attr(node, "height"))
            .map(|h| format!("height:{h};"))
            .unwrap_or_default();
        let src = self.attr_text(node, "src", "isSrcVariable")?;
        let mut alt = String::new();
        escape_keep_liquid(attr_str(node, "alt").unwrap_or(""), &mut alt);
        let mut inner = format!(
            "<img src=\"{src}\" alt=\"{alt}\" style=\"display:block;border:0;outline:none;max-width:100%;width:{width};{height}\">"
        );
        if attr_str(node, "externalLink").is_some() {
            let link = self.attr_text(node, "externalLink", "isExternalLinkVariable")?;
            inner = format!("<a href=\"{link}\" target=\"_blank\">{inner}</a>");
        }
        if kind == "inlineImage" {
            self.out.push_str(&inner);
            return Ok(());
        }
        let a = align(attr_str(node, "alignment"));
        let _ = write!(
            self.out,
            "<table role=\"presentation\" width=\"100%\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"margin:0 0 16px 0\">\
             <tr><td align=\"{a}\">{inner}</td></tr></table>"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::render::{variables_used, Renderer};

    fn doc() -> Value {
        json!({"type": "doc", "content": [
            {"type": "heading", "attrs": {"level": 2}, "content": [
                {"type": "text", "text": "Hi "},
                {"type": "variable", "attrs": {"id": "subscriber.firstName", "fallback": "there"}}]},
            {"type": "paragraph", "content": [
                {"type": "text", "text": "Bold & <b>", "marks": [{"type": "bold"}]},
                {"type": "text", "text": " docs", "marks": [{"type": "link", "attrs": {"href": "https://example.com/d?a=1&b=2"}}]}]},
            {"type": "repeat", "attrs": {"each": "payload.items"}, "content": [
                {"type": "paragraph", "content": [{"type": "variable", "attrs": {"id": "payload.items.name"}}]}]},
            {"type": "paragraph", "attrs": {"showIfKey": "payload.vip"}, "content": [{"type": "text", "text": "VIP"}]},
            {"type": "button", "attrs": {"text": "Open", "url": "https://example.com/o/{{ payload.id }}", "buttonColor": "#ff0000"}},
            {"type": "image", "attrs": {"src": "https://example.com/i.png", "alt": "logo", "width": 200}},
            {"type": "horizontalRule"},
            {"type": "spacer", "attrs": {"height": "lg"}}
        ]})
    }

    #[test]
    fn compiles_and_renders() {
        let template = to_liquid(&doc()).unwrap();
        let vars = json!({"subscriber": {"firstName": "<Ada>"}, "payload": {"items": [{"name": "Lamp"}, {"name": "Desk"}], "vip": false, "id": 7}});
        let html = Renderer::new().render_str(&template, &vars).unwrap();
        assert!(html.contains("<h2 "), "{html}");
        assert!(html.contains("Hi &lt;Ada&gt;</h2>"), "{html}");
        assert!(html.contains("<strong>Bold &amp; &lt;b&gt;</strong>"));
        assert!(html.contains("href=\"https://example.com/d?a=1&amp;b=2\""));
        assert!(html.contains(">Lamp</p>") && html.contains(">Desk</p>"));
        assert!(!html.contains("VIP"));
        assert!(html.contains("href=\"https://example.com/o/7\""));
        assert!(html.contains("background-color:#ff0000"));
        assert!(html.contains("<img src=\"https://example.com/i.png\" alt=\"logo\""));
        assert!(html.contains("<hr "));
        assert!(html.contains("height:32px"));
        let fallback = Renderer::new().render_str(&template, &json!({})).unwrap();
        assert!(fallback.contains("Hi there</h2>"));
    }

    #[test]
    fn variables_of_a_document() {
        let template = to_liquid(&doc()).unwrap();
        let uses = variables_used(&template);
        let paths: Vec<String> = uses.iter().map(|u| u.path.join(".")).collect();
        assert!(paths.contains(&"subscriber.firstName".to_owned()));
        let items = uses
            .iter()
            .find(|u| u.path == ["payload", "items"])
            .unwrap();
        assert!(items.is_array_loop);
        assert_eq!(items.item_fields[0].path, ["name"]);
    }

    #[test]
    fn rejects_bad_documents() {
        // Not a block document, whatever the editor type: rendered as HTML / Liquid.
        assert_eq!(email_body_template("{not json").unwrap(), "{not json");
        assert_eq!(
            email_body_template("{\"type\": \"doc\"}").unwrap(),
            "{\"type\": \"doc\"}"
        );
        assert!(to_liquid(&json!({"type": "paragraph"})).is_err());
        let bad = json!({"type": "doc", "content": [{"type": "variable", "attrs": {"id": "payload.a }} {{ x"}}]});
        assert!(to_liquid(&bad).is_err());
        assert_eq!(email_body_template("<p>hi</p>").unwrap(), "<p>hi</p>");
    }
}
