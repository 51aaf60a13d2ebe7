//! Trigram statistics for SQLite's substring search. Each searchable column has its own FTS5 trigram index
//! (`subscribers_<column>_search`, without positions). `GLOB '*term*'` reads the doclist of every trigram of
//! the term, and common trigrams (`use`, `ser`, `@ex`, …) have an entry for nearly every row. Knowing each
//! trigram's document frequency, a search instead matches only the rarest few trigrams of the term and
//! rechecks the candidates with `instr`, reading a few short doclists.
//!
//! Even the rarest trigrams of a long term can be common (`123` is in thousands of emails), so each column
//! also has an index of its 5-grams (`subscribers_<column>_grams`): a term of five or more characters
//! matches its rarest 5-grams there, estimated from the trigram statistics.
//!
//! The statistics only steer performance: rows containing the term contain every one of its grams, and
//! the recheck is exact, so stale statistics never change results.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How old the statistics may get before a search triggers a refresh in the background.
const MAX_AGE: Duration = Duration::from_secs(600);

/// Per column: how many rows the index holds, and how many of them contain each trigram.
#[derive(Debug, Clone, Default)]
pub struct Frequencies {
    /// Rows of the indexed table (the search's universe).
    pub rows: i64,
    /// (column, trigram) → number of rows whose column contains the trigram.
    pub grams: HashMap<(String, String), i64>,
}
#[derive(Default)]
pub struct TrigramStats {
    /// (column, trigram) → number of rows containing it, and when it was read.
    table: RwLock<Option<(Instant, Arc<Frequencies>)>>,
    refreshing: AtomicBool,
}

impl std::fmt::Debug for TrigramStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TrigramStats(..)")
    }
}

impl TrigramStats {
    /// The current statistics, if any, and whether they should be refreshed.
    pub fn snapshot(&self) -> (Option<Arc<Frequencies>>, bool) {
        let guard = self.table.read().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some((at, table)) => (Some(table.clone()), at.elapsed() > MAX_AGE),
            None => (None, true),
        }
    }

    /// Claims the refresh; false when another task is already refreshing.
    pub fn begin_refresh(&self) -> bool {
        !self.refreshing.swap(true, Ordering::AcqRel)
    }

    pub fn finish_refresh(&self, table: Option<Frequencies>) {
        if let Some(table) = table {
            *self.table.write().unwrap_or_else(|p| p.into_inner()) =
                Some((Instant::now(), Arc::new(table)));
        }
        self.refreshing.store(false, Ordering::Release);
    }
}

/// The trigrams of `term` (windows of three characters), as FTS5's trigram tokenizer cuts them.
pub fn trigrams(term: &str) -> Vec<String> {
    let chars: Vec<char> = term.chars().collect();
    chars.windows(3).map(|w| w.iter().collect()).collect()
}

/// At most this many grams are matched: each further one only lengthens the doclists read.
const MAX_GRAMS: usize = 4;

/// What rechecking one candidate row costs (a table lookup and `instr`), in doclist entries read: a
/// further trigram is matched only when the rechecks it is expected to save outweigh reading its doclist.
const RECHECK_COST: f64 = 50.0;

/// An FTS5 query (for the column's trigram index) matching rows that contain the rarest trigrams of `term`.
///
/// The rarest trigram always; then, greedily, the one that saves the most (see [`pick_rare`]).
pub fn rare_trigram_query(column: &str, term: &str, stats: &Frequencies) -> String {
    // (frequency, position, trigram), each trigram once, at its first position.
    let mut grams: Vec<(f64, usize, String)> = Vec::new();
    for (at, gram) in trigrams(term).into_iter().enumerate() {
        if grams.iter().all(|(_, _, g)| *g != gram) {
            grams.push((frequency(stats, column, &gram) as f64, at, gram));
        }
    }
    pick_rare(grams, 3, stats.rows)
        .into_iter()
        .map(|g| format!("\"{}\"", g.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// Length of the grams in the `subscribers_<column>_grams` indexes (migration 0009).
pub const GRAM: usize = 5;

/// An FTS5 query for the column's 5-gram index matching rows that contain the rarest 5-grams of `term` (of
/// at least [`GRAM`] characters), each written as the index stores it: the hex of its UTF-8 bytes.
///
/// The index has no statistics of its own (reading a 5-gram's document count means reading its doclist),
/// so a 5-gram's frequency is estimated from its three trigrams as if they were independent: the first
/// one's share, times the share of each further one raised to 1/3 (each adds one character).
pub fn rare_gram_query(column: &str, term: &str, stats: &Frequencies) -> String {
    let chars: Vec<char> = term.chars().collect();
    let rows = stats.rows.max(1) as f64;
    let share = |gram: &[char]| {
        let g: String = gram.iter().collect();
        (frequency(stats, column, &g) as f64 / rows).min(1.0)
    };
    let mut grams: Vec<(f64, usize, String)> = Vec::new();
    for (at, w) in chars.windows(GRAM).enumerate() {
        let gram: String = w.iter().collect();
        if grams.iter().any(|(_, _, g)| *g == gram) {
            continue;
        }
        let mut estimate = rows * share(&w[0..3]);
        for t in w[1..].windows(3) {
            estimate *= share(t).powf(1.0 / 3.0);
        }
        grams.push((estimate, at, gram));
    }
    pick_rare(grams, GRAM, stats.rows)
        .into_iter()
        .map(|g| {
            let hex: String = g.bytes().map(|b| format!("{b:02x}")).collect();
            format!("\"{hex}\"")
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

fn frequency(stats: &Frequencies, column: &str, gram: &str) -> i64 {
    stats
        .grams
        .get(&(column.to_owned(), gram.to_owned()))
        .copied()
        .unwrap_or(0)
}

/// Chooses which of a term's n-grams (estimated frequency, position, gram) to match: the rarest always;
/// then, greedily, the one that saves the most (rechecks avoided minus its doclist), while any saves
/// anything, up to [`MAX_GRAMS`]. Candidates left are estimated as `rows × Π share`, where a gram's share
/// is `frequency / rows` raised to the number of characters it adds to those already matched, over `n`:
/// overlapping grams (`123`, `234`) share characters and narrow the match far less than grams apart.
fn pick_rare(mut grams: Vec<(f64, usize, String)>, n: usize, rows: i64) -> Vec<String> {
    grams.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let rows = rows.max(1) as f64;
    let Some(first) = grams.first() else {
        return Vec::new();
    };
    let mut picked: Vec<usize> = vec![0];
    let mut candidates = first.0;
    while picked.len() < MAX_GRAMS {
        let best = grams
            .iter()
            .enumerate()
            .filter(|(i, _)| !picked.contains(i))
            .map(|(i, (freq, at, _))| {
                let new_chars = picked
                    .iter()
                    .map(|&p| grams[p].1.abs_diff(*at).min(n))
                    .min()
                    .unwrap_or(n);
                let share = (*freq / rows).min(1.0).powf(new_chars as f64 / n as f64);
                let left = candidates * share;
                (i, left, (candidates - left) * RECHECK_COST - *freq)
            })
            .max_by(|a, b| a.2.total_cmp(&b.2));
        match best {
            Some((i, left, gain)) if gain > 0.0 => {
                picked.push(i);
                candidates = left;
            }
            _ => break,
        }
    }
    picked.into_iter().map(|i| grams[i].2.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_rarest_trigrams() {
        assert_eq!(trigrams("user1@"), ["use", "ser", "er1", "r1@"]);
        assert_eq!(trigrams("ab"), Vec::<String>::new());
        assert_eq!(trigrams("é\"ab"), ["é\"a", "\"ab"]);
        let mut stats = Frequencies {
            rows: 1_000_000,
            grams: HashMap::new(),
        };
        for (g, n) in [
            ("use", 1_000_000),
            ("ser", 1_000_000),
            ("er1", 111_112),
            ("r1@", 3),
            ("1@b", 7),
            ("@bc", 700),
            ("123", 4000),
            ("234", 4000),
            ("345", 4000),
            ("456", 4000),
            ("56@", 10_000),
            ("r12", 11_111),
        ] {
            stats.grams.insert(("email".to_owned(), g.to_owned()), n);
        }
        // A rare trigram leaves ~3 candidates; reading 7 more entries saves their rechecks, 700 would not.
        assert_eq!(
            rare_trigram_query("email", "user1@bc", &stats),
            "\"r1@\" AND \"1@b\""
        );
        // The benchmark's term: `456` (three characters away) cuts 4,000 candidates to ~16; `234` and `345`,
        // as rare but overlapping `123`, would cut fewer.
        assert_eq!(
            rare_trigram_query("email", "user123456@", &stats),
            "\"123\" AND \"456\""
        );
        // Only overlapping ones: `345` (two new characters) first, then `234` (one) barely pays.
        assert_eq!(
            rare_trigram_query("email", "r12345", &stats),
            "\"123\" AND \"345\" AND \"234\""
        );
        // Unknown trigrams count as absent (no row has them): one is enough.
        assert_eq!(rare_trigram_query("email", "a\"bc", &stats), "\"a\"\"b\"");
        // Without statistics every trigram looks absent: the first one alone.
        let empty = Frequencies::default();
        assert_eq!(rare_trigram_query("email", "abcd", &empty), "\"abc\"");
    }

    #[test]
    fn picks_the_rarest_five_grams() {
        let mut stats = Frequencies {
            rows: 1_000_000,
            grams: HashMap::new(),
        };
        for (g, n) in [
            ("use", 1_000_000),
            ("ser", 1_000_000),
            ("er1", 111_112),
            ("r12", 11_111),
            ("123", 4000),
            ("234", 4000),
            ("345", 4000),
            ("456", 4000),
            ("56@", 10_000),
        ] {
            stats.grams.insert(("email".to_owned(), g.to_owned()), n);
        }
        // `12345` (estimated at ~100 rows from its trigrams) first, then `3456@` (two characters further),
        // then `23456`: each estimated doclist is far shorter than the rechecks it saves. `user1` never.
        assert_eq!(
            rare_gram_query("email", "user123456@", &stats),
            ["12345", "3456@", "23456"]
                .map(|g| format!("\"{}\"", hex(g)))
                .join(" AND ")
        );
        // Non-ASCII grams are written as the hex of their UTF-8 bytes; unknown trigrams make a gram absent.
        assert_eq!(
            rare_gram_query("email", "Zoë Å", &stats),
            "\"5a6fc3ab20c385\""
        );
        // Shorter than a gram: nothing to match.
        assert_eq!(rare_gram_query("email", "1234", &stats), "");
    }

    fn hex(s: &str) -> String {
        s.bytes().map(|b| format!("{b:02x}")).collect()
    }
}
