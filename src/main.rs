//! The `tidings` binary: parses the command line and hands over to `tidings::app`.

use tidings::config::{Cli, Command, Config, EnvironmentsCommand, LogFormat};
use tidings::{app, service};

/// Every request allocates many small, short-lived values (rows, strings, JSON); mimalloc's per-thread
/// free lists serve them without glibc's arena locking and consolidation. Built without transparent huge
/// pages (`no_thp`): with them, every 2 MB of its arena that a thread touched counted whole in the RSS
/// (65 against 42 MB idle, 171 against 111 MB at peak; docs/decisions.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Logs to stderr, filtered by `RUST_LOG` (default `info,sqlx=warn`), as JSON with `--log json`.
/// Lines are queued to a thread of their own (`tracing-appender`), which writes them through a buffer and
/// flushes whenever its queue is empty, so a busy server, which logs every request, makes no `write(2)` per
/// request; the returned guard writes what is left when `main` ends. No line is dropped: past 128k queued
/// lines (stderr stalled) logging waits, as a direct write to stderr would.
/// Colours only when both stdout and stderr are terminals and `NO_COLOR` is unset: a log redirected to a file
/// or a collector stays plain text.
fn init_tracing(format: LogFormat) -> tracing_appender::non_blocking::WorkerGuard {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let colour = std::io::stdout().is_terminal()
        && std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .thread_name("tidings-log")
        .lossy(false)
        .finish(std::io::BufWriter::new(std::io::stderr()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(writer);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
    guard
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse_env();
    let logs = init_tracing(cli.config.log);
    let result = run(cli.config(), cli.command).await;
    drop(logs);
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cfg: Config, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve => app::serve(cfg).await,
        Command::Worker { .. } => app::worker(cfg).await,
        Command::Migrate => {
            let store = app::open_store(&cfg).await?;
            store.migrate().await?;
            store.close().await;
            eprintln!("migrations applied");
            Ok(())
        }
        Command::Environments { command } => environments(&cfg, command).await,
        seeding => seed(&cfg, seeding).await,
    }
}

/// Runs an `environments` command on the migrated store and prints its answer, one JSON line per item.
async fn environments(cfg: &Config, command: EnvironmentsCommand) -> anyhow::Result<()> {
    use tidings::service::environments as envs;
    fn lines<T: serde::Serialize>(items: &[T]) -> anyhow::Result<Vec<String>> {
        Ok(items
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?)
    }
    let store = app::open_store(cfg).await?;
    store.migrate().await?;
    let answer = match command {
        EnvironmentsCommand::Create { name, hmac } => {
            envs::create_with_hmac(&store, &name, None, hmac)
                .await
                .map(|created| lines(&[created]))
        }
        EnvironmentsCommand::List => envs::list(&store).await.map(|listed| lines(&listed)),
        EnvironmentsCommand::RotateKey { name } => envs::rotate_key(&store, &name)
            .await
            .map(|rotated| lines(&[rotated])),
        EnvironmentsCommand::Hmac { name, state } => envs::set_hmac(&store, &name, state == "on")
            .await
            .map(|rules| lines(&[rules])),
        EnvironmentsCommand::EndSessions { name } => envs::end_sessions(&store, &name)
            .await
            .map(|rules| lines(&[rules])),
    };
    store.close().await;
    for line in answer.map_err(|e| anyhow::anyhow!("{e}"))?? {
        println!("{line}");
    }
    Ok(())
}

/// The hidden seed helpers of the benchmark and the tests: bulk rows in the environment of `--api-key`.
async fn seed(cfg: &Config, command: Command) -> anyhow::Result<()> {
    let (store, tenant) = seed_target(cfg).await?;
    let (said, tables): (String, &[&str]) = match command {
        Command::SeedSubscribers { count, prefix } => {
            let n = store.seed_subscribers(&tenant, &prefix, count).await?;
            (format!("inserted {n} subscribers"), &["subscribers"])
        }
        Command::SeedTopic { key, count, prefix } => {
            let topic = service::topics::upsert(&store, &tenant, &key, Default::default(), false)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let n = store
                .seed_topic(&tenant, &topic.topic, &prefix, count)
                .await?;
            (
                format!("subscribed {n} subscribers to {key}"),
                &["topics", "topic_subscriptions"],
            )
        }
        Command::SeedChannelEndpoints {
            count,
            subscribers,
            contexts,
            prefix,
            integration_identifier,
        } => {
            let n = store
                .seed_channel_endpoints(
                    &tenant,
                    &integration_identifier,
                    &prefix,
                    count,
                    subscribers,
                    contexts,
                )
                .await?;
            (
                format!("inserted {n} channel endpoints"),
                &["channel_endpoints"],
            )
        }
        Command::SeedNotifications {
            count,
            subscribers,
            prefix,
        } => {
            let workflow = bench_workflow(&store, &tenant).await?;
            let n = store
                .seed_notifications(&tenant, &workflow, &prefix, count, subscribers)
                .await?;
            (
                format!("inserted {n} notifications"),
                &["notifications", "jobs", "execution_details"],
            )
        }
        other => unreachable!("not a seed command: {other:?}"),
    };
    store.after_bulk_load(tables).await?;
    store.close().await;
    eprintln!("{said}");
    Ok(())
}

/// The one-step in-app workflow the seeded notifications belong to, created the first time.
async fn bench_workflow(
    store: &tidings::store::Store,
    tenant: &tidings::domain::Tenant,
) -> anyhow::Result<tidings::domain::workflow::Workflow> {
    if let Some(w) = store
        .get_workflow(&tenant.environment_id, "bench-notice")
        .await?
    {
        return Ok(w);
    }
    let step = service::workflows::StepInput {
        step_type: "in_app".into(),
        name: Some("Inbox".into()),
        control_values: Some(serde_json::json!({"body": "Hello {{ subscriber.firstName }}"})),
        ..Default::default()
    };
    let input = service::workflows::WorkflowInput {
        name: "Bench notice".into(),
        workflow_id: Some("bench-notice".into()),
        steps: vec![step],
        ..Default::default()
    };
    service::workflows::create(
        store,
        tenant,
        input,
        tidings::api::v2::workflows::workflow_view,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Opens and migrates the store and resolves the environment of `--api-key`, for the seed helpers.
async fn seed_target(
    cfg: &Config,
) -> anyhow::Result<(tidings::store::Store, tidings::domain::Tenant)> {
    let api_key = cfg
        .api_key
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("the seed helpers need --api-key (TIDINGS_API_KEY)"))?;
    let store = app::open_store(cfg).await?;
    store.migrate().await?;
    let tenant = store
        .find_tenant_by_key_hash(&tidings::crypto::sha256_hex(api_key.as_bytes()))
        .await?
        .ok_or_else(|| anyhow::anyhow!("unknown API key"))?;
    Ok((store, tenant))
}
