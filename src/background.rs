//! A runtime of its own for the work that feeds the database writer: the trigger group commit and the
//! engine's claim loops. A write transaction is a series of statements, each handed to the database
//! connection and back; on the request runtime the task holding the (single, on SQLite) writer waits behind
//! every queued HTTP task between two statements, so the writer sits idle while requests pile up behind it.
//! Here those tasks are polled as soon as their statement returns. Requests hand work over through channels
//! and await the answer; nothing else changes.
//!
//! `tidings serve` and `tidings worker` turn it on at start-up on SQLite ([`enable`]). PostgreSQL has a pool
//! of connections instead of one writer, and a connection's socket belongs to the runtime that opened it:
//! driven from the other runtime, every statement would wait for a cross-runtime wake-up. Until it is on —
//! on PostgreSQL, and in tests, which run many servers in one process, each on its own runtime — [`spawn`]
//! uses the current runtime, so a test's tasks end with it.
//!
//! Refreshes the request path starts but does not wait for (the search statistics) are spawned here too,
//! on the request runtime as before.

use std::future::Future;
use std::sync::OnceLock;

/// Threads of the background runtime: the engine also renders templates and calls providers here.
const THREADS: usize = 2;

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// Starts the background runtime; it lives as long as the process.
pub fn enable() -> std::io::Result<()> {
    if RUNTIME.get().is_none() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(THREADS)
            .thread_name("tidings-background")
            .enable_all()
            .build()?;
        // A concurrent call may have won: its runtime is kept, this one dropped.
        let _ = RUNTIME.set(runtime);
    }
    Ok(())
}

/// Spawns `future` on the background runtime when it is enabled, else on the current runtime.
pub fn spawn<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match RUNTIME.get() {
        Some(runtime) => runtime.spawn(future),
        None => tokio::spawn(future),
    }
}

/// Reads the store's trigram statistics in a task of its own when `search` reads the trigram indexes and
/// the statistics are missing or old (SQLite): the search goes on without waiting (with the statistics it
/// has, or GLOB), and the searches after it use the new ones.
pub fn refresh_search_stats(
    store: &crate::store::Store,
    search: &crate::store::subscriber_search::SubscriberSearch,
) {
    if search.uses_trigrams() && store.claim_stale_search_stats() {
        let store = store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.load_search_stats().await {
                tracing::warn!(error = ?e, "reading trigram statistics failed");
            }
        });
    }
}
