//! Process wiring: open the store, bootstrap environments, serve HTTP, shut down gracefully.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use tokio_util::sync::CancellationToken;

use crate::api::{self, AppState};
use crate::config::Config;
use crate::crypto::Cipher;
use crate::service::environments;
use crate::store::{Dialect, Store, StoreOptions};

/// Resolves the encryption key: `TIDINGS_ENCRYPTION_KEY`, else (SQLite only) `secret.key` beside the
/// database file, generated on first start with mode 0600.
pub fn resolve_cipher(cfg: &Config) -> anyhow::Result<Cipher> {
    if let Some(k) = &cfg.encryption_key {
        return Cipher::from_base64(k).context("TIDINGS_ENCRYPTION_KEY");
    }
    match Store::dialect_of(&cfg.database_url)? {
        Dialect::Postgres => {
            bail!("TIDINGS_ENCRYPTION_KEY (32 bytes, base64) is required with PostgreSQL")
        }
        Dialect::Sqlite => {
            let path = secret_key_path(&cfg.database_url);
            if path.exists() {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                return Cipher::from_base64(&text)
                    .with_context(|| format!("{} is not a valid key", path.display()));
            }
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                crate::store::sqlite::create_private_dir(dir)?;
            }
            let key = Cipher::generate_base64();
            write_private(&path, &key).with_context(|| format!("writing {}", path.display()))?;
            tracing::info!(path = %path.display(), "generated a new encryption key");
            Ok(Cipher::from_base64(&key)?)
        }
    }
}

/// `secret.key` in the folder of the SQLite file (`tidings-data/` by default).
fn secret_key_path(database_url: &str) -> PathBuf {
    let file = database_url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let file = file.split('?').next().unwrap_or(file);
    Path::new(file)
        .parent()
        .unwrap_or(Path::new("."))
        .join("secret.key")
}

#[cfg(unix)]
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(contents.as_bytes())
}

#[cfg(not(unix))]
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    std::fs::write(path, contents)
}

pub async fn open_store(cfg: &Config) -> anyhow::Result<Store> {
    let cipher = resolve_cipher(cfg)?;
    let mut opts = StoreOptions::new(&*cfg.database_url);
    opts.max_connections = (cfg.workers as u32).clamp(4, 32);
    let store = Store::open(&opts, cipher)
        .await
        .with_context(|| format!("opening {}", crate::config::redact_url(&cfg.database_url)))?;
    Ok(store)
}

/// `tidings serve`.
pub async fn serve(cfg: Config) -> anyhow::Result<()> {
    let store = open_store(&cfg).await?;
    if store.dialect() == crate::store::Dialect::Sqlite {
        crate::background::enable().context("starting the background runtime")?;
    }
    store.migrate().await.context("applying migrations")?;
    if let Err(e) = store.checkpoint().await {
        // Only speed depends on it (another process may hold the log): go on.
        tracing::warn!(error = ?e, "checkpointing the database at start-up failed");
    }
    for created in environments::bootstrap(&store, cfg.api_key.as_deref()).await? {
        // Printed once so the operator can copy the key; never logged.
        println!(
            "Created environment \"{}\" ({}), applicationIdentifier: {}, API key: {}",
            created.name, created.environment_id, created.application_identifier, created.api_key
        );
    }
    if let Some(line) = environments::without_hmac_banner(&store).await? {
        println!("{line}");
    }
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("binding {}", cfg.listen))?;
    let mut server_options = cfg.server;
    let mut sockets = cfg.sockets;
    (server_options.max_connections, sockets.max) =
        descriptor_caps(server_options.max_connections, sockets.max);
    let shutdown = CancellationToken::new();
    let background = spawn_maintenance(store.clone(), shutdown.clone());
    let options = api::ApiOptions {
        rate_limits: cfg.rate_limits,
        metrics_token: cfg.metrics_token.as_deref().map(str::to_owned),
        limits: cfg.requests,
        inbox_origins: cfg.inbox_origins.0.clone(),
        trusted_proxies: cfg.trusted_proxies.clone(),
        sockets,
        // One shutdown signal: the Inbox's loops stop with the workers and the maintenance.
        shutdown: shutdown.clone(),
    };
    let state = AppState::with_options(store.clone(), cfg.compat, options);
    let workers = crate::engine::spawn_workers(
        store.clone(),
        crate::engine::WorkerOptions::from_config(&cfg),
        state.wakeup.clone(),
        shutdown.clone(),
    );
    let draining = state.draining.clone();
    let app = api::router(state.clone());
    tracing::info!(listen = %listener.local_addr()?, profile = ?cfg.compat, "tidings is serving");
    println!("{}", cfg.compat.banner(listener.local_addr()?));
    let signalled = std::sync::Arc::new(std::sync::OnceLock::new());
    let token = shutdown.clone();
    let at = signalled.clone();
    let signal = async move {
        shutdown_signal().await;
        at.get_or_init(std::time::Instant::now);
        // Workers finish the jobs they are running and release the rest while connections drain.
        token.cancel();
    };
    crate::server::serve(listener, app, server_options, draining, signal).await;
    if let Some(io) = state.sockets.get() {
        api::socket::close(io, &store).await;
    }
    let since = signalled.get().map_or(Duration::ZERO, |t| t.elapsed());
    let left = server_options.shutdown_timeout.saturating_sub(since);
    stop(store, background, workers, left).await;
    Ok(())
}

/// Waits up to `left` for the workers (they were told to stop), then closes the store.
async fn stop(
    store: Store,
    background: tokio::task::JoinHandle<()>,
    workers: tokio::task::JoinHandle<()>,
    left: Duration,
) {
    let _ = background.await;
    if tokio::time::timeout(left, workers).await.is_err() {
        tracing::warn!("workers still running at the shutdown deadline; their leases will expire");
    }
    store.close().await;
    tracing::info!("stopped");
}

/// The connection cap and the socket cap, within the descriptors the process may open: the soft limit is
/// first raised to the hard one (as Go's runtime does), and a quarter of it, at least 64, is kept for the
/// database, the providers and the log. Sockets get at most half of the rest, connections the others.
#[cfg(unix)]
fn descriptor_caps(connections: usize, sockets: usize) -> (usize, usize) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        let _ = setrlimit(Resource::Nofile, limit);
        limit = getrlimit(Resource::Nofile);
    }
    let Some(open) = limit.current else {
        return (connections, sockets);
    };
    let reserve = (open / 4).max(64);
    let room = open.saturating_sub(reserve).max(2) as usize;
    let capped = sockets.min(room / 2);
    let caps = (connections.min(room - capped), capped);
    if caps != (connections, sockets) {
        tracing::warn!(
            wanted_connections = connections,
            wanted_sockets = sockets,
            connections = caps.0,
            sockets = caps.1,
            descriptors = open,
            "TIDINGS_MAX_CONNECTIONS and TIDINGS_MAX_SOCKETS lowered to what the descriptor limit allows"
        );
    }
    caps
}

#[cfg(not(unix))]
fn descriptor_caps(connections: usize, sockets: usize) -> (usize, usize) {
    (connections, sockets)
}

/// `tidings worker`: runs background work without the HTTP API.
pub async fn worker(cfg: Config) -> anyhow::Result<()> {
    let store = open_store(&cfg).await?;
    if store.dialect() == crate::store::Dialect::Sqlite {
        crate::background::enable().context("starting the background runtime")?;
    }
    store.migrate().await.context("applying migrations")?;
    if let Err(e) = store.checkpoint().await {
        // Only speed depends on it (another process may hold the log): go on.
        tracing::warn!(error = ?e, "checkpointing the database at start-up failed");
    }
    let shutdown = CancellationToken::new();
    let background = spawn_maintenance(store.clone(), shutdown.clone());
    // Before the workers: the recorder must be in place when their first job finishes.
    let metrics = match cfg.metrics_listen {
        Some(addr) => Some(serve_worker_metrics(addr, &store, &cfg, shutdown.clone()).await?),
        None => None,
    };
    let workers = crate::engine::spawn_workers(
        store.clone(),
        crate::engine::WorkerOptions::from_config(&cfg),
        crate::engine::Wakeup::default(),
        shutdown.clone(),
    );
    tracing::info!(workers = cfg.workers, "tidings worker started");
    shutdown_signal().await;
    shutdown.cancel();
    if let Some(metrics) = metrics {
        let _ = metrics.await;
    }
    stop(store, background, workers, cfg.server.shutdown_timeout).await;
    Ok(())
}

/// Serves a worker's `/metrics` on `addr` (`--metrics-listen`) until `shutdown`, with the API's token rule.
async fn serve_worker_metrics(
    addr: std::net::SocketAddr,
    store: &Store,
    cfg: &Config,
    shutdown: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (--metrics-listen)"))?;
    tracing::info!(listen = %listener.local_addr()?, "worker metrics at /metrics");
    let app = api::metrics::worker_routes(store.clone(), cfg.metrics_token.as_deref());
    let options = crate::server::ServerOptions {
        // Scrapers, not the public: a few connections are plenty.
        max_connections: 64,
        ..cfg.server
    };
    Ok(tokio::spawn(crate::server::serve(
        listener,
        app,
        options,
        std::sync::Arc::default(),
        shutdown.cancelled_owned(),
    )))
}

/// Periodic housekeeping: expired idempotency records.
fn spawn_maintenance(store: Store, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match store.purge_expired_idempotency().await {
                Ok(n) if n > 0 => {
                    tracing::debug!(purged = n, "expired idempotency records removed")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = ?e, "purging idempotency records failed"),
            }
            let before = crate::domain::Timestamp(
                crate::domain::Timestamp::now().0 - crate::store::webhook_messages::RETENTION_MS,
            );
            match store.purge_webhook_history(before).await {
                Ok(n) if n > 0 => {
                    tracing::debug!(purged = n, "webhook messages past retention removed")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = ?e, "purging old webhook messages failed"),
            }
            if shutdown
                .run_until_cancelled(tokio::time::sleep(Duration::from_secs(600)))
                .await
                .is_none()
            {
                break;
            }
        }
    })
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown requested");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_key_lives_beside_the_database() {
        assert_eq!(
            secret_key_path("sqlite://tidings-data/tidings.db"),
            PathBuf::from("tidings-data/secret.key")
        );
        assert_eq!(
            secret_key_path("sqlite:/var/lib/t/x.db?mode=rwc"),
            PathBuf::from("/var/lib/t/secret.key")
        );
        assert_eq!(
            secret_key_path("sqlite://x.db"),
            PathBuf::from("secret.key")
        );
    }
}
