//! Trigram statistics for SQLite's substring search. Each searchable column has its own FTS5 trigram index
//! (`subscribers_<column>_search`, without positions). `GLOB '*term*'` reads the doclist of every trigram of
//! the term, and common trigrams (`use`, `ser`, `@ex`, …) have an entry for nearly every row. Knowing each
//! trigram's document frequency, a search instead matches only the rarest few trigrams of the term and
//! rechecks the candidates with `instr`, reading a few short doclists.
//!
//! The statistics only steer performance: rows containing the term contain every one of its trigrams, and
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

/// At most this many trigrams are matched: each further one only lengthens the doclists read.
const MAX_TRIGRAMS: usize = 4;

/// What rechecking one candidate row costs (a table lookup and `instr`), in doclist entries read: a
/// further trigram is matched only when the rechecks it is expected to save outweigh reading its doclist.
const RECHECK_COST: f64 = 50.0;

/// An FTS5 query (for the column's own index) matching rows that contain the rarest trigrams of `term`.
///
/// The rarest trigram always; then, greedily, the one that saves the most (rechecks avoided minus its
/// doclist), while any saves anything. Candidates left are estimated as `rows × Π share`, where a trigram's
/// share is `frequency / rows` raised to the number of characters it adds to those already matched, over
/// three: overlapping trigrams (`123`, `234`) share characters and narrow the match far less than two
/// apart (`123`, `456`).
pub fn rare_trigram_query(column: &str, term: &str, stats: &Frequencies) -> String {
    // (frequency, position, trigram), each trigram once, at its first position.
    let mut grams: Vec<(i64, usize, String)> = Vec::new();
    for (at, gram) in trigrams(term).into_iter().enumerate() {
        if grams.iter().all(|(_, _, g)| *g != gram) {
            let n = stats
                .grams
                .get(&(column.to_owned(), gram.clone()))
                .copied()
                .unwrap_or(0);
            grams.push((n, at, gram));
        }
    }
    grams.sort();
    let rows = stats.rows.max(1) as f64;
    let Some(first) = grams.first() else {
        return String::new();
    };
    let mut picked: Vec<usize> = vec![0];
    let mut candidates = first.0 as f64;
    while picked.len() < MAX_TRIGRAMS {
        let best = grams
            .iter()
            .enumerate()
            .filter(|(i, _)| !picked.contains(i))
            .map(|(i, (n, at, _))| {
                let new_chars = picked
                    .iter()
                    .map(|&p| grams[p].1.abs_diff(*at).min(3))
                    .min()
                    .unwrap_or(3);
                let share = (*n as f64 / rows).min(1.0).powf(new_chars as f64 / 3.0);
                let left = candidates * share;
                (i, left, (candidates - left) * RECHECK_COST - *n as f64)
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
    picked
        .iter()
        .map(|&i| format!("\"{}\"", grams[i].2.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" AND ")
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
}
