//! The report of a corpus mismatch: which exchanges differ, and a line diff of the first ones (long lines,
//! such as `/openapi.json`, cut around their first difference).

use std::fmt::Write as _;

/// Widest slice of a long line that is printed.
const WINDOW: usize = 240;

/// The exchanges of a corpus text: blocks starting with `=== `.
pub fn blocks(text: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = text.match_indices("\n=== ").map(|(i, _)| i + 1).collect();
    if text.starts_with("=== ") {
        starts.insert(0, 0);
    }
    starts
        .iter()
        .enumerate()
        .map(|(k, &s)| &text[s..starts.get(k + 1).copied().unwrap_or(text.len())])
        .collect()
}

/// A summary of the differing exchanges and a diff of the first `max` of them.
pub fn first_differences(expected: &str, actual: &str, max: usize) -> String {
    let (e, a) = (blocks(expected), blocks(actual));
    let mut out = String::new();
    let mut differing = Vec::new();
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i).copied(), a.get(i).copied());
        if x == y {
            continue;
        }
        if differing.len() < max {
            let title = y.or(x).and_then(|b| b.lines().next()).unwrap_or_default();
            let _ = writeln!(out, "\n@@ {title}");
            out.push_str(&line_diff(x.unwrap_or_default(), y.unwrap_or_default()));
        }
        differing.push(i + 1);
    }
    let listed: Vec<String> = differing.iter().take(40).map(ToString::to_string).collect();
    format!(
        "{} exchange(s) recorded, {} replayed; {} differ: {}{}\n(- recorded, + replayed){out}",
        e.len(),
        a.len(),
        differing.len(),
        listed.join(", "),
        if differing.len() > listed.len() {
            ", …"
        } else {
            ""
        },
    )
}

/// Unchanged lines shown around each change.
const CONTEXT: usize = 3;

/// A unified-style diff of two blocks by lines (longest common subsequence), with [`CONTEXT`] lines
/// around each change.
fn line_diff(x: &str, y: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (x.lines().collect(), y.lines().collect());
    // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // The edit script: ' ' kept, '-' removed, '+' added.
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            ops.push(('+', b[j]));
            j += 1;
        } else {
            ops.push(('-', a[i]));
            i += 1;
        }
    }
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k].0 != ' ').collect();
    let near = |k: usize| changed.iter().any(|&c| c.abs_diff(k) <= CONTEXT);
    let mut out = String::new();
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let mut skipped = false;
    for (k, &(op, line)) in ops.iter().enumerate() {
        match op {
            '-' => removed.push(line),
            '+' => added.push(line),
            _ => {
                flush(&mut out, &mut removed, &mut added);
                if near(k) {
                    if skipped {
                        out.push_str("  …\n");
                        skipped = false;
                    }
                    let _ = writeln!(out, "  {}", cut(line, 0));
                } else {
                    skipped = true;
                }
            }
        }
    }
    flush(&mut out, &mut removed, &mut added);
    if skipped {
        out.push_str("  …\n");
    }
    out
}

/// Writes a run of removed and added lines, each pair cut around its first difference.
fn flush<'a>(out: &mut String, removed: &mut Vec<&'a str>, added: &mut Vec<&'a str>) {
    let focus = |k: usize| match (removed.get(k), added.get(k)) {
        (Some(r), Some(a)) => r.bytes().zip(a.bytes()).take_while(|(x, y)| x == y).count(),
        _ => 0,
    };
    for (k, line) in removed.iter().enumerate() {
        let _ = writeln!(out, "- {}", cut(line, focus(k)));
    }
    for (k, line) in added.iter().enumerate() {
        let _ = writeln!(out, "+ {}", cut(line, focus(k)));
    }
    removed.clear();
    added.clear();
}

/// `line`, or the part of it around byte `focus` when it is long.
fn cut(line: &str, focus: usize) -> String {
    if line.len() <= WINDOW {
        return line.to_owned();
    }
    let mut start = focus.saturating_sub(WINDOW / 3).min(line.len());
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + WINDOW).min(line.len());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    let before = if start > 0 { "…" } else { "" };
    let after = if end < line.len() { "…" } else { "" };
    format!(
        "{before}{}{after} [{} bytes, from byte {start}]",
        &line[start..end],
        line.len()
    )
}
