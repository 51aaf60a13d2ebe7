//! What PostgreSQL writes differently: a JSON column the server copies into a response as stored (the
//! activity's jobs — step controls, payload, overrides, digest — and a channel endpoint's `endpoint` in a list;
//! `docs/decisions.md`, "Endpoint list rows keep their JSON as text") comes back from a `jsonb` column as
//! PostgreSQL prints it: a space after `:` and `,`, keys ordered by length. The same JSON, other bytes.
//!
//! So `<profile>.txt` holds the SQLite replay, and `<profile>.postgres.txt` only the exchanges PostgreSQL
//! writes differently, each whole; PostgreSQL's replay must equal the first with the second's exchanges put
//! in. A recorded PostgreSQL exchange must be the same JSON as SQLite's (same request, status and headers):
//! any other difference fails the recording.

use serde_json::Value;

use super::diff::blocks;

/// The first line of an exchange: `=== <n>. <method> <path>`.
fn title(block: &str) -> &str {
    block.lines().next().unwrap_or_default()
}

/// `base` with each exchange of `overlay` put in place of the one with the same title.
pub fn apply(base: &str, overlay: &str) -> String {
    let replacements = blocks(overlay);
    blocks(base)
        .into_iter()
        .map(|b| {
            replacements
                .iter()
                .find(|r| title(r) == title(b))
                .copied()
                .unwrap_or(b)
        })
        .collect()
}

/// The exchanges of `postgres` that differ from `sqlite`'s, as an overlay. Err when one differs by more
/// than the printing of the same JSON.
pub fn differences(sqlite: &str, postgres: &str) -> Result<String, String> {
    let (s, p) = (blocks(sqlite), blocks(postgres));
    if s.len() != p.len() {
        return Err(format!(
            "SQLite made {} exchanges, PostgreSQL {}",
            s.len(),
            p.len()
        ));
    }
    let mut overlay = String::new();
    for (a, b) in s.into_iter().zip(p) {
        if a == b {
            continue;
        }
        let (head_a, body_a) = split(a);
        let (head_b, body_b) = split(b);
        let same_json = serde_json::from_str::<Value>(body_a)
            .ok()
            .zip(serde_json::from_str::<Value>(body_b).ok())
            .is_some_and(|(x, y)| x == y);
        if head_a != head_b || !same_json {
            return Err(format!(
                "SQLite and PostgreSQL answer differently, not only in JSON printing:\n{}",
                super::diff::first_differences(a, b, 1)
            ));
        }
        overlay.push_str(b);
    }
    Ok(overlay)
}

/// An exchange's lines up to the response's headers, and its body.
fn split(block: &str) -> (&str, &str) {
    let mut at = 0;
    let mut in_response = false;
    for line in block.split_inclusive('\n') {
        let head = line.starts_with("=== ")
            || line.starts_with("> ")
            || line.starts_with("--- ")
            || (in_response && line.starts_with("< "));
        if !head {
            break;
        }
        in_response |= line.starts_with("--- ");
        at += line.len();
    }
    (&block[..at], block[at..].trim_end())
}
