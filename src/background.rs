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
//!
//! The Inbox's loops live here too ([`spawn_inbox_loops`]): the sweep that ends the snoozes that are over,
//! and the presence loop (heartbeats of the subscribers this process holds sockets of, stale ones recorded
//! offline). Both stop when the one shutdown token is cancelled; what they read and write is in
//! `service::inbox_socket`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::domain::SubscriberRef;
use crate::service::inbox_socket;
use crate::store::Store;

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

/// How often the snoozes that are over are ended.
const SNOOZE_SWEEP: Duration = Duration::from_secs(5);
/// How often a process refreshes the heartbeat of the subscribers whose sockets it holds.
pub const HEARTBEAT: Duration = Duration::from_secs(20);
/// A subscriber online whose heartbeat is older than this (ms) is recorded offline: four heartbeats and a
/// half missed, which a live process (even one whose database is slow for a while) does not miss.
pub const PRESENCE_STALE_MS: i64 = 90_000;
/// How often the subscribers left online by a stopped process are looked for (an indexed range read).
const PRESENCE_SWEEP: Duration = Duration::from_secs(5);

/// What the presence loop asks of this process's Inbox sockets (`api::socket` answers).
pub trait HeldSockets: Send + Sync + 'static {
    /// The subscribers (environment, record) this process holds sockets of, sorted, each once.
    fn held(&self) -> Vec<(String, SubscriberRef)>;
    /// Closes the sockets whose session is of an epoch older than their environment's in `epochs`
    /// (environment id → epoch).
    fn close_older_sessions(&self, epochs: &HashMap<String, i64>);
}

/// Starts the Inbox's loops; they end when `stop` is cancelled (the process is stopping). Every process with
/// sockets sweeps; each ended snooze is announced once (by the store).
pub fn spawn_inbox_loops(store: Store, sockets: impl HeldSockets, stop: CancellationToken) {
    let sweep = {
        let store = store.clone();
        async move {
            let mut every = tokio::time::interval(SNOOZE_SWEEP);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                inbox_socket::end_snoozes(&store).await;
            }
        }
    };
    tokio::spawn(stop.clone().run_until_cancelled_owned(sweep));
    tokio::spawn(stop.run_until_cancelled_owned(presence(store, sockets)));
}

/// Every [`PRESENCE_SWEEP`]: records offline the subscribers whose heartbeat is stale, and every
/// [`HEARTBEAT`] refreshes the heartbeat of the subscribers this process holds sockets of (closing those
/// whose session epoch has ended: a raise whose announcement this process did not hear).
async fn presence(store: Store, sockets: impl HeldSockets) {
    let mut every = tokio::time::interval(PRESENCE_SWEEP);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_beat = tokio::time::Instant::now();
    loop {
        every.tick().await;
        if last_beat.elapsed() >= HEARTBEAT {
            last_beat = tokio::time::Instant::now();
            let held = sockets.held();
            if !held.is_empty() {
                let epochs = inbox_socket::heartbeat(&store, &held).await;
                sockets.close_older_sessions(&epochs);
            }
        }
        inbox_socket::expire_presence(&store, PRESENCE_STALE_MS).await;
    }
}
