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

/// (column, trigram) → number of rows whose column contains the trigram.
pub type Frequencies = HashMap<(String, String), i64>;

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

/// How many of a term's trigrams a search matches: enough to leave few candidates.
const TRIGRAMS_MATCHED: usize = 4;

/// An FTS5 query (for the column's own index) matching rows that contain the rarest trigrams of `term`.
pub fn rare_trigram_query(column: &str, term: &str, stats: &Frequencies) -> String {
    let mut grams = trigrams(term);
    grams.sort();
    grams.dedup();
    grams.sort_by_key(|g| {
        stats
            .get(&(column.to_owned(), g.clone()))
            .copied()
            .unwrap_or(0)
    });
    let quoted = |g: &String| format!("\"{}\"", g.replace('"', "\"\""));
    let picked: Vec<String> = grams.iter().take(TRIGRAMS_MATCHED).map(quoted).collect();
    picked.join(" AND ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_rarest_trigrams() {
        assert_eq!(trigrams("user1@"), ["use", "ser", "er1", "r1@"]);
        assert_eq!(trigrams("ab"), Vec::<String>::new());
        assert_eq!(trigrams("é\"ab"), ["é\"a", "\"ab"]);
        let mut stats = HashMap::new();
        for (g, n) in [
            ("use", 1000),
            ("ser", 900),
            ("er1", 50),
            ("r1@", 3),
            ("1@b", 7),
            ("@bc", 700),
        ] {
            stats.insert(("email".to_owned(), g.to_owned()), n);
        }
        assert_eq!(
            rare_trigram_query("email", "user1@bc", &stats),
            "\"r1@\" AND \"1@b\" AND \"er1\" AND \"@bc\""
        );
        assert_eq!(
            rare_trigram_query("email", "a\"bc", &stats),
            "\"\"\"bc\" AND \"a\"\"b\""
        );
    }
}
