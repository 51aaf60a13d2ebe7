//! The shape of the house, read from src/ (issue 37, item 6): no import cycle between top-level modules,
//! nothing imports from a layer above its own, no source file over 800 non-test lines, no function over 100
//! lines, no `too_many_arguments` allowance.
//!
//! "Imports" are `crate::…` paths anywhere in code and in doc comments (an intra-doc link is a dependency
//! too), not in string literals or plain comments. Non-test code is a file without its `#[cfg(test)]` modules
//! (and without files that are such modules). A function's length runs from the line of `fn` to the line of
//! its closing brace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first. A module may import from its own layer (the cycle check keeps peers apart) and
/// from any layer below; never from above. Every top-level module of src/ must be listed here.
const LAYERS: &[&[&str]] = &[
    // Leaves: the crate's error, cryptography, the outbound HTTP guard, and the settings.
    &["error", "crypto", "outbound", "config"],
    // Plain types and pure rules.
    &["domain"],
    // Used by the engine and the services; no I/O of their own beyond providers' calls.
    &["render", "providers"],
    // The only SQL.
    &["store"],
    // Recorded by the engine and the API (never by the store), and the background runtime; both read the
    // store.
    &["metrics", "background"],
    &["engine"],
    &["service"],
    // The HTTP server below the routes: connections, limits, upgrades.
    &["server"],
    &["api"],
    // Wiring.
    &["app"],
];

/// Imports allowed to run up the layers for now, each with the issue that removes it (a stale entry fails).
const UPWARD_EXCEPTIONS: &[(&str, &str)] = &[];

/// Files allowed over 800 non-test lines for now, each with the issue that splits it (a stale entry fails).
const LONG_FILE_EXCEPTIONS: &[&str] = &[];

/// Functions allowed over 100 lines for now, as `file:name`, each with the issue that shortens it.
const LONG_FN_EXCEPTIONS: &[&str] = &[];

/// Files allowed a `too_many_arguments` allowance for now, each with the issue that removes it.
const TOO_MANY_ARGUMENTS_EXCEPTIONS: &[&str] = &[];

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 100;

struct Source {
    /// Path under src/, with `/`.
    path: String,
    /// The text with comments and literals blanked (newlines kept), test modules removed.
    code: String,
    /// The doc comment lines of the non-test part, as written.
    docs: Vec<String>,
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let edges = module_edges(&sources());
    let edges: BTreeSet<(String, String)> = edges
        .into_iter()
        .filter(|(from, to)| !UPWARD_EXCEPTIONS.contains(&(from.as_str(), to.as_str())))
        .collect();
    let cycles = cycles(&edges);
    assert!(
        cycles.is_empty(),
        "import cycles between top-level modules: {cycles:?}"
    );
}

#[test]
fn nothing_imports_from_a_layer_above() {
    let sources = sources();
    let rank = |m: &str| LAYERS.iter().position(|layer| layer.contains(&m));
    let mut unknown = BTreeSet::new();
    for s in &sources {
        let m = top_module(&s.path);
        if m != "lib" && m != "main" && rank(m).is_none() {
            unknown.insert(m.to_owned());
        }
    }
    assert!(
        unknown.is_empty(),
        "top-level modules missing from LAYERS in tests/it/structure.rs: {unknown:?}"
    );
    let mut upward = Vec::new();
    for (from, to, file) in module_references(&sources) {
        let (Some(a), Some(b)) = (rank(&from), rank(&to)) else {
            continue;
        };
        if a < b && !UPWARD_EXCEPTIONS.contains(&(from.as_str(), to.as_str())) {
            upward.push(format!("{file} imports crate::{to}"));
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run up the layers: {upward:#?}"
    );
    // The exceptions are still needed: a stale one hides nothing but should go.
    let edges = module_edges(&sources);
    for (from, to) in UPWARD_EXCEPTIONS {
        assert!(
            edges.contains(&((*from).to_owned(), (*to).to_owned())),
            "{from} no longer imports {to}: remove the exception"
        );
    }
}

#[test]
fn no_source_file_over_800_non_test_lines() {
    let mut long = Vec::new();
    for s in sources() {
        let excepted = LONG_FILE_EXCEPTIONS.contains(&s.path.as_str());
        let lines = s.code.lines().count();
        if lines > MAX_FILE_LINES && !excepted {
            long.push(format!("{} has {lines} non-test lines", s.path));
        }
        assert!(
            lines > MAX_FILE_LINES || !excepted,
            "{} has {lines} non-test lines now: remove its exception",
            s.path
        );
    }
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines: {long:#?}"
    );
    for path in LONG_FILE_EXCEPTIONS {
        let exists = src_dir().join(path).exists();
        assert!(exists, "{path} is gone: remove its exception");
    }
}

#[test]
fn no_function_over_100_lines() {
    let mut long = Vec::new();
    let mut excepted = BTreeSet::new();
    for s in sources() {
        for (name, lines) in functions(&s.code) {
            let key = format!("{}:{name}", s.path);
            if lines <= MAX_FN_LINES {
                continue;
            }
            match LONG_FN_EXCEPTIONS.iter().find(|e| **e == key) {
                Some(e) => {
                    excepted.insert(*e);
                }
                None => long.push(format!("{key} has {lines} lines")),
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines: {long:#?}"
    );
    let stale: Vec<_> = LONG_FN_EXCEPTIONS
        .iter()
        .filter(|e| !excepted.contains(*e))
        .collect();
    assert!(
        stale.is_empty(),
        "no longer over {MAX_FN_LINES} lines: remove the exceptions {stale:?}"
    );
}

#[test]
fn no_too_many_arguments_allowance() {
    let mut allowed: Vec<String> = sources()
        .into_iter()
        .filter(|s| s.code.contains("too_many_arguments"))
        .map(|s| s.path)
        .collect();
    let stale: Vec<_> = TOO_MANY_ARGUMENTS_EXCEPTIONS
        .iter()
        .filter(|e| !allowed.iter().any(|p| p == *e))
        .collect();
    allowed.retain(|p| !TOO_MANY_ARGUMENTS_EXCEPTIONS.contains(&p.as_str()));
    assert!(
        allowed.is_empty(),
        "`too_many_arguments` allowed in {allowed:?}: pass a parameter struct"
    );
    assert!(
        stale.is_empty(),
        "no `too_many_arguments` left in {stale:?}: remove the exceptions"
    );
}

/// utoipa names a schema by its type's name alone: two `ToSchema` types of one name share one entry of
/// `/openapi.json`, and one of them is described wrongly (the promotion's change counts once replaced the
/// Inbox's counts). A type that must keep its name renames its schema with `#[schema(as = …)]`.
#[test]
fn no_two_openapi_schemas_share_a_name() {
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for s in sources() {
        for name in schema_names(&s.code) {
            seen.entry(name).or_default().push(s.path.clone());
        }
    }
    let shared: Vec<_> = seen.into_iter().filter(|(_, at)| at.len() > 1).collect();
    assert!(
        shared.is_empty(),
        "ToSchema types sharing a schema name: {shared:?}"
    );
}

/// The names of the `ToSchema` types a source declares (the first `struct`/`enum` after the derive), except
/// those renamed with `#[schema(as = …)]`.
fn schema_names(code: &str) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !(line.contains("derive(") && line.contains("ToSchema")) {
            continue;
        }
        for next in lines.iter().skip(i + 1).take(12) {
            if next.contains("schema(as") {
                break;
            }
            let decl = next
                .trim_start()
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if let Some(rest) = decl
                .strip_prefix("struct ")
                .or_else(|| decl.strip_prefix("enum "))
            {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.push(name);
                break;
            }
        }
    }
    out
}

/// The checker's own scanners, on made-up sources: each rule can fail.
#[test]
fn the_scanners_see_what_they_must() {
    let text = "use crate::store::Store;\n\
                /// Reads [`Job`](crate::engine::Job).\n\
                // not crate::api\n\
                fn f() {\n    let s = \"crate::service {\";\n    let c = '{';\n    g::<'_>(c)\n}\n\
                #[cfg(test)]\nmod tests {\n    use crate::app;\n    fn t() {}\n}\n";
    let s = source("domain/x.rs", text);
    assert_eq!(s.code.lines().count(), 8, "the test module is not counted");
    assert_eq!(functions(&s.code), vec![("f".to_owned(), 5)]);
    let refs: Vec<String> = module_references(&[s]).map(|(_, to, _)| to).collect();
    assert_eq!(refs, ["engine", "store"]);
    let group = source(
        "api/y.rs",
        "use crate::{store::Store, domain::{Job, Message}};\n",
    );
    let refs: Vec<String> = module_references(&[group]).map(|(_, to, _)| to).collect();
    assert_eq!(refs, ["domain", "store"]);
    let edges: BTreeSet<(String, String)> = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
    assert_eq!(cycles(&edges), vec![vec!["a", "b", "c"]]);
    let schemas = "#[derive(Serialize, ToSchema)]\n#[serde(rename_all = \"camelCase\")]\npub struct AOut {}\n\
                   #[derive(ToSchema)]\n#[schema(as = v1::AOut)]\npub struct AOut {}\n#[derive(Debug)]\nstruct B;\n";
    assert_eq!(schema_names(schemas), ["AOut"]);
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn sources() -> Vec<Source> {
    let root = src_dir();
    let mut files = Vec::new();
    collect(&root, &mut files);
    let mut test_files = BTreeSet::new();
    let mut read = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&file).unwrap();
        for module in test_module_files(&text) {
            let dir = match rel.rsplit_once('/') {
                Some((dir, "mod.rs")) => format!("{dir}/"),
                Some((dir, name)) => format!("{dir}/{}/", name.trim_end_matches(".rs")),
                None if rel == "lib.rs" || rel == "main.rs" => String::new(),
                None => format!("{}/", rel.trim_end_matches(".rs")),
            };
            test_files.insert(format!("{dir}{module}.rs"));
            test_files.insert(format!("{dir}{module}/mod.rs"));
        }
        read.push((rel, text));
    }
    read.into_iter()
        .filter(|(rel, _)| !test_files.contains(rel))
        .map(|(rel, text)| source(&rel, &text))
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn source(path: &str, text: &str) -> Source {
    let blanked = blank(text);
    let kept = without_test_modules(&blanked);
    let code: String = blanked
        .lines()
        .zip(&kept)
        .filter(|(_, keep)| **keep)
        .map(|(line, _)| format!("{line}\n"))
        .collect();
    let docs = text
        .lines()
        .zip(&kept)
        .filter(|(line, keep)| {
            let t = line.trim_start();
            **keep && (t.starts_with("///") || t.starts_with("//!"))
        })
        .map(|(line, _)| line.to_owned())
        .collect();
    Source {
        path: path.to_owned(),
        code,
        docs,
    }
}

/// Names of `#[cfg(test)] mod name;` declarations: whole files of tests.
fn test_module_files(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "#[cfg(test)]")
        .filter_map(|w| {
            let decl = w[1].strip_suffix(';')?;
            let name = decl.rsplit_once("mod ")?.1;
            Some(name.trim().to_owned())
        })
        .collect()
}

/// For each line: false inside a `#[cfg(test)]` module (from the attribute to its closing brace).
fn without_test_modules(blanked: &str) -> Vec<bool> {
    let lines: Vec<&str> = blanked.lines().collect();
    let mut keep = vec![true; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        let opens_module = lines.get(i + 1).is_some_and(|next| {
            let next = next.trim_start();
            next.starts_with("mod ") || next.starts_with("pub mod ") || next.starts_with("pub(")
        });
        if lines[i].trim() == "#[cfg(test)]" && opens_module && lines[i + 1].contains('{') {
            let end = block_end(&lines, i + 1, 0).unwrap_or(lines.len() - 1);
            keep[i..=end].iter_mut().for_each(|k| *k = false);
            i = end;
        }
        i += 1;
    }
    keep
}

/// The line holding the brace that closes the first block opened at or after `lines[start][from..]`; `None`
/// when a `;` comes first (a declaration without a body).
fn block_end(lines: &[&str], start: usize, from: usize) -> Option<usize> {
    let (mut depth, mut nested) = (0usize, 0usize);
    for (n, line) in lines.iter().enumerate().skip(start) {
        let line = if n == start { &line[from..] } else { line };
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(n);
                    }
                }
                // Parentheses and brackets of a signature (`[u8; N]`).
                '(' | '[' if depth == 0 => nested += 1,
                ')' | ']' if depth == 0 => nested = nested.saturating_sub(1),
                ';' if depth == 0 && nested == 0 => return None,
                _ => {}
            }
        }
    }
    None
}

/// Every `fn name` with a body, and its length in lines.
fn functions(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let mut rest = *line;
        let mut offset = 0;
        while let Some(at) = find_word(rest, "fn") {
            let after = &rest[at + 2..];
            let name: String = after
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let from = offset + at + 2;
            if !name.is_empty() && after.starts_with(char::is_whitespace) {
                if let Some(end) = block_end(&lines, n, from) {
                    out.push((name, end - n + 1));
                }
            }
            offset = from;
            rest = &line[offset..];
        }
    }
    out
}

/// The byte offset of `word` in `text` standing alone (not part of an identifier).
fn find_word(text: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(at) = text[from..].find(word).map(|i| i + from) {
        let before = text[..at].chars().next_back().is_none_or(|c| !ident(c));
        let after = text[at + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !ident(c));
        if before && after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

fn top_module(path: &str) -> &str {
    let first = path.split('/').next().unwrap();
    first.strip_suffix(".rs").unwrap_or(first)
}

/// (from module, to module, file) for every `crate::to` in a file of `from`, in code and doc comments.
fn module_references(sources: &[Source]) -> impl Iterator<Item = (String, String, String)> + '_ {
    sources.iter().flat_map(|s| {
        let from = top_module(&s.path).to_owned();
        let mut targets = BTreeSet::new();
        for text in std::iter::once(s.code.as_str()).chain(s.docs.iter().map(String::as_str)) {
            targets.extend(crate_paths(text));
        }
        // `crate::Error` and `crate::Result` are the error module's, re-exported by lib.rs.
        if targets.remove("Error") | targets.remove("Result") {
            targets.insert("error".to_owned());
        }
        targets
            .into_iter()
            .filter(move |to| *to != from && from != "lib" && from != "main")
            .map(move |to| (top_module(&s.path).to_owned(), to, s.path.clone()))
    })
}

fn module_edges(sources: &[Source]) -> BTreeSet<(String, String)> {
    module_references(sources)
        .map(|(from, to, _)| (from, to))
        .collect()
}

/// The top-level modules named by `crate::name` and `crate::{name…, name…}` in `text`.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = find_word(rest, "crate") {
        rest = &rest[at + "crate".len()..];
        let Some(path) = rest.strip_prefix("::") else {
            continue;
        };
        if let Some(group) = path.strip_prefix('{') {
            // Top-level items of the group: split at commas outside nested braces.
            let (mut depth, mut start) = (0usize, 0);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.insert(ident(&group[start..i]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(&group[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(path));
        }
    }
    out.remove("");
    out
}

/// Every cycle of the graph, each as its strongly connected set of modules (sorted), found by Tarjan's
/// algorithm; a module alone is a cycle only if it imports itself (never: self-edges are dropped).
fn cycles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        graph.entry(a).or_default().push(b);
        graph.entry(b).or_default();
    }
    struct Tarjan<'a> {
        graph: &'a BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in &self.graph[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}

/// Blanks comments (keeping doc comments' text out of the code too), string and char literals; keeps every
/// newline, so line numbers and counts hold.
fn blank(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank_span = |out: &mut String, span: &str| {
        out.extend(span.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
    };
    let ident_before = |i: usize| i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    while i < b.len() {
        let rest = &text[i..];
        let end = if rest.starts_with("//") {
            i + rest.find('\n').unwrap_or(rest.len())
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            let mut j = i;
            loop {
                if text[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if text[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break j;
                    }
                } else if j >= b.len() {
                    break j;
                } else {
                    j += text[j..].chars().next().unwrap().len_utf8();
                }
            }
        } else if let Some(raw) = raw_string_len(rest).filter(|_| !ident_before(i)) {
            i + raw
        } else if (rest.starts_with('"') || rest.starts_with("b\"")) && !ident_before(i) {
            let mut j = i + rest.find('"').unwrap() + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len())
        } else if rest.starts_with('\'') {
            char_literal_len(rest).map_or(i + 1, |n| i + n)
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
            continue;
        };
        if rest.starts_with('\'') && end == i + 1 {
            // A lifetime's quote.
            out.push('\'');
        } else {
            blank_span(&mut out, &text[i..end]);
        }
        i = end;
    }
    out
}

/// The length of a raw string literal (`r"…"`, `r#"…"#`, `br"…"`) starting `s`.
fn raw_string_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix("br").or_else(|| s.strip_prefix('r'))?;
    let hashes = body.len() - body.trim_start_matches('#').len();
    let open = s.len() - body.len() + hashes;
    if !s[open..].starts_with('"') {
        return None;
    }
    let close = format!("\"{}", "#".repeat(hashes));
    let end = s[open + 1..].find(&close)? + open + 1 + close.len();
    Some(end)
}

/// The length of a char literal (`'x'`, `'\n'`, `'\u{7f}'`) starting `s`; `None` for a lifetime.
fn char_literal_len(s: &str) -> Option<usize> {
    let mut chars = s.char_indices().skip(1);
    let (_, c) = chars.next()?;
    if c == '\\' {
        // The escaped character, then anything up to the closing quote (`'\u{7f}'`).
        let close = s.get(3..)?.find('\'')?;
        return Some(close + 4);
    }
    let (at, next) = chars.next()?;
    (next == '\'').then_some(at + 1)
}
