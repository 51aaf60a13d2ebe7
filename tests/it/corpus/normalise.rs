//! The volatile values of a recorded exchange, replaced by stable placeholders on the raw text (so key order,
//! spacing and escaping stay exactly as the server wrote them). The whole set, matched left to right at
//! token boundaries (the character before and after is not `[0-9A-Za-z_]`):
//!
//! | value                                    | shape                                            | placeholder        |
//! |------------------------------------------|--------------------------------------------------|--------------------|
//! | API key of the app                       | the literal key                                  | `<api-key>`        |
//! | the app environment's public identifier  | the literal identifier                           | `<app-identifier>` |
//! | UUID (transaction ids, mail Message-IDs) | 8-4-4-4-12 hex                                   | `<uuid:N>`         |
//! | timestamp                                | `YYYY-MM-DDTHH:MM:SS[.f][Z\|±HH:MM]`              | `<time>`           |
//! | ObjectId (every `_id`)                   | 24 lowercase hex                                 | `<id:N>`           |
//! | generated channel identifier             | `chconn_` / `chendp_` + 12 `[0-9a-z]`            | `chconn_<gen:N>`   |
//! | port of a local listener                 | digits after `127.0.0.1:` or in `"port":"…"`     | `<port:N>`         |
//! | retry delay (±25 % jitter)               | digits in `in … ms`                              | `in <delay> ms`    |
//! | epoch milliseconds                       | 13 digits starting with 1                        | `<ms>`             |
//!
//! `N` numbers each distinct value of its kind by first appearance in the scenario, so the corpus still
//! shows which ids are the same and which differ. Timestamps are not numbered: two events in the same
//! millisecond or not is timing, not behaviour.

use std::collections::HashMap;

#[derive(Default)]
pub struct Normaliser {
    /// Literal secrets and their placeholders.
    literals: Vec<(String, &'static str)>,
    /// Distinct values seen per kind, numbered from 1.
    seen: HashMap<&'static str, HashMap<String, usize>>,
}

impl Normaliser {
    /// Replaces every occurrence of `value` with `placeholder` (before any pattern).
    pub fn literal(&mut self, value: &str, placeholder: &'static str) {
        self.literals.push((value.to_owned(), placeholder));
    }

    /// `text` with every volatile value replaced.
    pub fn apply(&mut self, text: &str) -> String {
        let mut text = text.to_owned();
        for (value, placeholder) in &self.literals {
            text = text.replace(value.as_str(), placeholder);
        }
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        let mut copied = 0;
        while i < b.len() {
            let at_boundary = i == 0 || !is_word(b[i - 1]);
            let found = if at_boundary { token(b, i) } else { None };
            match found {
                Some((len, kind)) => {
                    out.push_str(&text[copied..i]);
                    let value = &text[i..i + len];
                    out.push_str(&self.placeholder(kind, value));
                    i += len;
                    copied = i;
                }
                None => i += 1,
            }
        }
        out.push_str(&text[copied..]);
        out
    }

    fn placeholder(&mut self, kind: Kind, value: &str) -> String {
        let number = |seen: &mut HashMap<&'static str, HashMap<String, usize>>, name, v: &str| {
            let of_kind = seen.entry(name).or_default();
            let next = of_kind.len() + 1;
            *of_kind.entry(v.to_owned()).or_insert(next)
        };
        match kind {
            Kind::Uuid => format!("<uuid:{}>", number(&mut self.seen, "uuid", value)),
            Kind::Time => "<time>".to_owned(),
            Kind::ObjectId => format!("<id:{}>", number(&mut self.seen, "id", value)),
            Kind::Generated(prefix) => {
                let n = number(&mut self.seen, "gen", value);
                format!("{prefix}<gen:{n}>")
            }
            Kind::Port(prefix) => {
                let n = number(&mut self.seen, "port", &value[prefix.len()..]);
                format!("{prefix}<port:{n}>")
            }
            Kind::EpochMs => "<ms>".to_owned(),
            Kind::Delay(prefix) => format!("{prefix}<delay>"),
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Uuid,
    Time,
    ObjectId,
    Generated(&'static str),
    Port(&'static str),
    EpochMs,
    Delay(&'static str),
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Digits known by what precedes and follows them: `(prefix, suffix, kind)`; the prefix is kept.
const PREFIXED: [(&str, &str, Kind); 3] = [
    ("127.0.0.1:", "", Kind::Port("127.0.0.1:")),
    ("\"port\":\"", "\"", Kind::Port("\"port\":\"")),
    ("in ", " ms", Kind::Delay("in ")),
];

/// The volatile token starting at `b[i]` (at a boundary): its length and kind.
fn token(b: &[u8], i: usize) -> Option<(usize, Kind)> {
    let rest = &b[i..];
    let ends = |len: usize| rest.len() == len || !is_word(rest[len]);
    if let Some(len) = uuid(rest).filter(|&l| ends(l)) {
        return Some((len, Kind::Uuid));
    }
    if let Some(len) = timestamp(rest).filter(|&l| ends(l)) {
        return Some((len, Kind::Time));
    }
    if run(rest, |c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) == 24 && ends(24) {
        return Some((24, Kind::ObjectId));
    }
    for prefix in ["chconn_", "chendp_"] {
        let tail = rest.strip_prefix(prefix.as_bytes()).unwrap_or_default();
        let len = prefix.len() + 12;
        if run(tail, |c| c.is_ascii_digit() || c.is_ascii_lowercase()) == 12 && ends(len) {
            return Some((len, Kind::Generated(prefix)));
        }
    }
    for (prefix, suffix, kind) in PREFIXED {
        let Some(tail) = rest.strip_prefix(prefix.as_bytes()) else {
            continue;
        };
        let digits = run(tail, |c| c.is_ascii_digit());
        let len = prefix.len() + digits;
        if digits > 0 && ends(len) && rest[len..].starts_with(suffix.as_bytes()) {
            return Some((len, kind));
        }
    }
    if rest.first() == Some(&b'1') && run(rest, |c| c.is_ascii_digit()) == 13 && ends(13) {
        return Some((13, Kind::EpochMs));
    }
    None
}

/// How many leading bytes of `b` satisfy `f`.
fn run(b: &[u8], f: impl Fn(u8) -> bool) -> usize {
    b.iter().take_while(|&&c| f(c)).count()
}

/// Matches `b` against `shape`: `h` a hex digit, `d` a decimal digit, anything else itself.
fn shaped(b: &[u8], shape: &str) -> bool {
    b.len() >= shape.len()
        && shape.bytes().zip(b).all(|(s, &c)| match s {
            b'h' => c.is_ascii_hexdigit(),
            b'd' => c.is_ascii_digit(),
            _ => c == s,
        })
}

fn uuid(b: &[u8]) -> Option<usize> {
    let shape = "hhhhhhhh-hhhh-hhhh-hhhh-hhhhhhhhhhhh";
    shaped(b, shape).then_some(shape.len())
}

fn timestamp(b: &[u8]) -> Option<usize> {
    let shape = "dddd-dd-ddTdd:dd:dd";
    if !shaped(b, shape) {
        return None;
    }
    let mut len = shape.len();
    if b.get(len) == Some(&b'.') {
        let digits = run(&b[len + 1..], |c| c.is_ascii_digit());
        if digits > 0 {
            len += 1 + digits;
        }
    }
    if b.get(len) == Some(&b'Z') {
        len += 1;
    } else if matches!(b.get(len), Some(b'+' | b'-')) && shaped(&b[len + 1..], "dd:dd") {
        len += 6;
    }
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::Normaliser;

    #[test]
    fn placeholders_are_numbered_by_first_appearance() {
        let mut n = Normaliser::default();
        n.literal("sk_secret", "<api-key>");
        let text =
            r#"{"_id":"65a1b2c3d4e5f60718293a4b","t":"2026-01-02T03:04:05.678Z","k":"sk_secret","#
                .to_owned()
                + r#""u":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","o":"65a1b2c3d4e5f60718293a4c","a":"65a1b2c3d4e5f60718293a4b","#
                + r#""c":"chconn_0a1b2c3d4e5f","p":"http://127.0.0.1:40123/x","q":{"port":"40123"},"#
                + r#""ms":1767322800000,"n":12345678901234,"d":"retry 1 of 3 in 104 ms"}"#;
        assert_eq!(
            n.apply(&text),
            r#"{"_id":"<id:1>","t":"<time>","k":"<api-key>","u":"<uuid:1>","o":"<id:2>","a":"<id:1>","#.to_owned()
                + r#""c":"chconn_<gen:1>","p":"http://127.0.0.1:<port:1>/x","q":{"port":"<port:1>"},"#
                + r#""ms":<ms>,"n":12345678901234,"d":"retry 1 of 3 in <delay> ms"}"#
        );
        // Numbering goes on across calls; tokens inside longer words are left alone.
        assert_eq!(
            n.apply("65a1b2c3d4e5f60718293a4c x65a1b2c3d4e5f60718293a4c chconn_nope 2026-01-02T03:04:05+01:00"),
            "<id:2> x65a1b2c3d4e5f60718293a4c chconn_nope <time>"
        );
    }
}
