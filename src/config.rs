//! Command line and configuration (design.md §2): flag, else environment variable, else default.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

/// How bodies and `svc` identifiers are written on the wire (design.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum WireProfile {
    /// The spec literally: no envelope, identifiers spelled `svc…`.
    #[default]
    Spec,
    /// Drop-in for the official Novu SDKs: `{"data": …}` envelope, identifiers spelled `novu…`.
    Novu,
}

impl WireProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spec => "spec",
            Self::Novu => "novu",
        }
    }

    /// The start-up banner: the active profile, and when to choose `novu`.
    pub fn banner(self, listen: SocketAddr) -> String {
        format!(
            "Serving the API on http://{listen} with the wire profile \"{}\" (--compat / TIDINGS_COMPAT).\n\
             Choose \"novu\" when Novu's SDKs (novu-py, @novu/api) call this server: they expect identifiers \
             spelled novu… and bodies inside {{\"data\": …}}; \"spec\" follows the specification literally.",
            self.as_str()
        )
    }
}

pub const DEFAULT_DATABASE_URL: &str = "sqlite://tidings-data/tidings.db";

#[derive(Debug, Parser)]
#[command(
    name = "tidings",
    version,
    about = "Notification-delivery backend speaking the Novu-style HTTP API"
)]
pub struct Cli {
    /// Address the HTTP API listens on.
    #[arg(
        long,
        env = "TIDINGS_LISTEN",
        default_value = "127.0.0.1:3000",
        global = true
    )]
    pub listen: SocketAddr,

    /// `sqlite://path/to/file.db` or `postgres://user@host/db`.
    #[arg(long = "database-url", env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL, global = true, hide_env_values = true)]
    pub database_url: String,

    /// Wire profile: `spec` (default) or `novu` (drop-in for the Novu SDKs).
    #[arg(long, env = "TIDINGS_COMPAT", value_enum, default_value_t = WireProfile::Spec, global = true)]
    pub compat: WireProfile,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Migrate, then serve the API and run workers in-process.
    Serve,
    /// Run workers only (scale-out).
    Worker {
        /// Serve this process's Prometheus metrics at `/metrics` on this address (the same
        /// `TIDINGS_METRICS_TOKEN` rule as `serve`); unset: no metrics.
        #[arg(long = "metrics-listen", env = "TIDINGS_METRICS_LISTEN")]
        metrics_listen: Option<SocketAddr>,
    },
    /// Apply migrations and exit.
    Migrate,
    /// Manage environments.
    Environments {
        #[command(subcommand)]
        command: EnvironmentsCommand,
    },
    /// Benchmark and test helper: bulk-insert synthetic subscribers into the key's environment.
    #[command(hide = true)]
    SeedSubscribers {
        #[arg(long)]
        api_key: String,
        #[arg(long)]
        count: i64,
        #[arg(long, default_value = "bench")]
        prefix: String,
    },
    /// Benchmark and test helper: the topic `key` (created if needed) with the first `count` subscribers whose
    /// subscriberId starts with `prefix` (in `_id` order) subscribed.
    #[command(hide = true)]
    SeedTopic {
        #[arg(long)]
        api_key: String,
        #[arg(long)]
        key: String,
        #[arg(long)]
        count: i64,
        #[arg(long, default_value = "bench")]
        prefix: String,
    },
    /// Benchmark and test helper: bulk-insert synthetic `slack_channel` endpoints into the key's environment.
    /// Endpoint n belongs to subscriber `<prefix><n % subscribers>` and context `tenant:t<n % contexts>`.
    #[command(hide = true)]
    SeedChannelEndpoints {
        #[arg(long)]
        api_key: String,
        #[arg(long)]
        count: i64,
        #[arg(long, default_value_t = 100_000)]
        subscribers: i64,
        #[arg(long, default_value_t = 10_000)]
        contexts: i64,
        #[arg(long, default_value = "bench")]
        prefix: String,
        #[arg(long, default_value = "slack-bench")]
        integration_identifier: String,
    },
    /// Benchmark and test helper: bulk-insert finished notifications (each with one completed in-app job and
    /// two execution details) of workflow `bench-notice`, created when missing.
    #[command(hide = true)]
    SeedNotifications {
        #[arg(long)]
        api_key: String,
        #[arg(long)]
        count: i64,
        #[arg(long, default_value_t = 100_000)]
        subscribers: i64,
        #[arg(long, default_value = "bench")]
        prefix: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum EnvironmentsCommand {
    /// Create an environment in the default organization and print its key as JSON. Its Inbox sessions
    /// need the subscriber's HMAC with `--hmac` (always for one named Production).
    Create {
        name: String,
        #[arg(long)]
        hmac: bool,
    },
    /// Print every environment's id and name, one JSON object per line (never a key).
    List,
    /// Issue a new API key for an environment of the default organization and print it once as JSON;
    /// its previous keys stop working (servers that cached one refuse it within 5 seconds).
    RotateKey { name: String },
    /// Turn on or off whether the environment's Inbox sessions need the subscriber's HMAC
    /// (`subscriberHash`); turning it on ends the sessions open.
    Hmac {
        name: String,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// End every Inbox session of the environment: their tokens are refused and their sockets closed.
    EndSessions { name: String },
}

/// Everything the process needs, resolved once at start-up.
#[derive(Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub database_url: String,
    pub compat: WireProfile,
    /// `TIDINGS_API_KEY`: the bootstrap key of the "Development" environment.
    pub api_key: Option<String>,
    /// `TIDINGS_ENCRYPTION_KEY`: 32 bytes, base64.
    pub encryption_key: Option<String>,
    /// `TIDINGS_WORKERS`: concurrent jobs per process.
    pub workers: usize,
    /// `TIDINGS_MAX_CONNECTIONS`, `TIDINGS_HEADER_TIMEOUT`, `TIDINGS_SHUTDOWN_TIMEOUT`.
    pub server: crate::server::ServerOptions,
    /// `TIDINGS_BODY_TIMEOUT`, `TIDINGS_REQUEST_TIMEOUT`.
    pub requests: crate::api::limits::RequestLimits,
    /// `TIDINGS_MAX_SOCKETS`, `TIDINGS_MAX_SOCKETS_PER_SUBSCRIBER`.
    pub sockets: crate::api::socket::SocketLimits,
    // Rate limits and metrics.
    /// `TIDINGS_RATE_LIMIT_EVENTS`, `…_CONFIGURATION`, `…_GLOBAL`, `…_INBOX…`, `…_AUTH_FAILURES`.
    pub rate_limits: RateLimits,
    /// `TIDINGS_METRICS_TOKEN`: when set, `/metrics` requires `Authorization: Bearer <token>`.
    pub metrics_token: Option<String>,
    /// `tidings worker --metrics-listen` / `TIDINGS_METRICS_LISTEN`: where a worker serves `/metrics`.
    pub metrics_listen: Option<SocketAddr>,
    /// `TIDINGS_INBOX_ORIGINS`: the browser origins allowed to call the Inbox's routes, comma-separated
    /// (`https://app.example.com,https://admin.example.com`); unset: any origin.
    pub inbox_origins: Vec<String>,
    /// `TIDINGS_PUBLIC_URL`: the address the world reaches the server at (see [`public_url`]); when set,
    /// emails carry one-click unsubscribe links.
    pub public_url: Option<String>,
    /// `TIDINGS_ALLOW_PRIVATE_NETWORKS`: `true` lets `http_request` steps, attachments and providers call
    /// private, loopback and link-local addresses; by default only public ones (see `crate::outbound`).
    pub allow_private_networks: bool,
    /// `TIDINGS_TRUSTED_PROXIES`: reverse proxies (addresses or CIDR ranges, comma-separated) whose
    /// `X-Forwarded-For` names the client for the limits by address; unset: none.
    pub trusted_proxies: Vec<crate::api::ratelimit::Network>,
}

/// Requests per second per environment in each of Novu's rate-limit categories (the defaults are Novu's top
/// tier), and the limits of public traffic (the Inbox's, refused API keys); 0 turns a limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// `TIDINGS_RATE_LIMIT_EVENTS`: triggers (`/v1/events/…`).
    pub events: u32,
    /// `TIDINGS_RATE_LIMIT_CONFIGURATION`: subscribers, workflows, channel connections and endpoints.
    pub configuration: u32,
    /// `TIDINGS_RATE_LIMIT_GLOBAL`: everything else.
    pub global: u32,
    /// `TIDINGS_RATE_LIMIT_INBOX`: the Inbox's routes and sessions (`/v1/inbox/…`), a budget of their own.
    pub inbox: u32,
    /// `TIDINGS_RATE_LIMIT_INBOX_PER_ADDRESS`: the Inbox's routes and sessions per client address (not
    /// per environment).
    pub inbox_per_address: u32,
    /// `TIDINGS_RATE_LIMIT_INBOX_PER_SUBSCRIBER`: the Inbox's routes and sessions per subscriber.
    pub inbox_per_subscriber: u32,
    /// `TIDINGS_RATE_LIMIT_AUTH_FAILURES`: refused API keys per client address.
    pub auth_failures: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            events: 6000,
            configuration: 2000,
            global: 3000,
            inbox: 3000,
            inbox_per_address: 100,
            inbox_per_subscriber: 20,
            auth_failures: 10,
        }
    }
}

impl RateLimits {
    /// The defaults, each replaced by its variable when set.
    pub fn from_env() -> anyhow::Result<Self> {
        let d = Self::default();
        Ok(Self {
            events: env_u32("TIDINGS_RATE_LIMIT_EVENTS", d.events)?,
            configuration: env_u32("TIDINGS_RATE_LIMIT_CONFIGURATION", d.configuration)?,
            global: env_u32("TIDINGS_RATE_LIMIT_GLOBAL", d.global)?,
            inbox: env_u32("TIDINGS_RATE_LIMIT_INBOX", d.inbox)?,
            inbox_per_address: env_u32(
                "TIDINGS_RATE_LIMIT_INBOX_PER_ADDRESS",
                d.inbox_per_address,
            )?,
            inbox_per_subscriber: env_u32(
                "TIDINGS_RATE_LIMIT_INBOX_PER_SUBSCRIBER",
                d.inbox_per_subscriber,
            )?,
            auth_failures: env_u32("TIDINGS_RATE_LIMIT_AUTH_FAILURES", d.auth_failures)?,
        })
    }
}

/// A variable holding a count (at most 10,000,000), or `default` when unset.
fn env_u32(name: &str, default: u32) -> anyhow::Result<u32> {
    match non_empty_env(name) {
        Some(v) => v
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| *n <= 10_000_000)
            .ok_or_else(|| {
                anyhow::anyhow!("{name} must be an integer from 0 to 10000000, got {v:?}")
            }),
        None => Ok(default),
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("database_url", &redact_url(&self.database_url))
            .field("compat", &self.compat)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field(
                "encryption_key",
                &self.encryption_key.as_ref().map(|_| "<set>"),
            )
            .field("workers", &self.workers)
            .field("server", &self.server)
            .field("requests", &self.requests)
            .field("sockets", &self.sockets)
            .field("rate_limits", &self.rate_limits)
            .field(
                "metrics_token",
                &self.metrics_token.as_ref().map(|_| "<set>"),
            )
            .field("metrics_listen", &self.metrics_listen)
            .field("public_url", &self.public_url)
            .field("inbox_origins", &self.inbox_origins)
            .field("allow_private_networks", &self.allow_private_networks)
            .field("trusted_proxies", &self.trusted_proxies)
            .finish()
    }
}

impl Config {
    /// Combines the parsed flags with the variables that have no flag.
    pub fn from_cli(cli: &Cli) -> anyhow::Result<Self> {
        let workers = match non_empty_env("TIDINGS_WORKERS") {
            Some(v) => v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                anyhow::anyhow!("TIDINGS_WORKERS must be a positive integer, got {v:?}")
            })?,
            None => {
                4 * std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1)
            }
        };
        let server = crate::server::ServerOptions::default();
        let requests = crate::api::limits::RequestLimits::default();
        let sockets = crate::api::socket::SocketLimits::default();
        let public_url = non_empty_env("TIDINGS_PUBLIC_URL")
            .map(|v| public_url(&v))
            .transpose()?;
        if public_url
            .as_deref()
            .is_some_and(|u| u.starts_with("http://"))
        {
            tracing::warn!("TIDINGS_PUBLIC_URL is not https: mail providers ignore one-click unsubscribe links that are not https, so emails will carry links no mail client offers");
        }
        Ok(Self {
            listen: cli.listen,
            database_url: cli.database_url.clone(),
            compat: cli.compat,
            api_key: non_empty_env("TIDINGS_API_KEY"),
            encryption_key: non_empty_env("TIDINGS_ENCRYPTION_KEY"),
            workers,
            server: crate::server::ServerOptions {
                max_connections: positive("TIDINGS_MAX_CONNECTIONS", server.max_connections)?,
                header_timeout: seconds("TIDINGS_HEADER_TIMEOUT", server.header_timeout)?,
                shutdown_timeout: seconds("TIDINGS_SHUTDOWN_TIMEOUT", server.shutdown_timeout)?,
            },
            requests: crate::api::limits::RequestLimits {
                body_timeout: seconds("TIDINGS_BODY_TIMEOUT", requests.body_timeout)?,
                request_timeout: seconds("TIDINGS_REQUEST_TIMEOUT", requests.request_timeout)?,
            },
            sockets: crate::api::socket::SocketLimits {
                max: positive("TIDINGS_MAX_SOCKETS", sockets.max)?,
                per_subscriber: positive(
                    "TIDINGS_MAX_SOCKETS_PER_SUBSCRIBER",
                    sockets.per_subscriber,
                )?,
            },
            rate_limits: RateLimits::from_env()?,
            metrics_token: non_empty_env("TIDINGS_METRICS_TOKEN"),
            metrics_listen: match cli.command {
                Command::Worker { metrics_listen } => metrics_listen,
                _ => None,
            },
            public_url,
            inbox_origins: inbox_origins(non_empty_env("TIDINGS_INBOX_ORIGINS").as_deref())?,
            allow_private_networks: env_bool("TIDINGS_ALLOW_PRIVATE_NETWORKS", false)?,
            trusted_proxies: trusted_proxies(non_empty_env("TIDINGS_TRUSTED_PROXIES").as_deref())?,
        })
    }
}

/// `TIDINGS_TRUSTED_PROXIES` checked: addresses or CIDR ranges, comma-separated; unset: none.
pub fn trusted_proxies(raw: Option<&str>) -> anyhow::Result<Vec<crate::api::ratelimit::Network>> {
    raw.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            crate::api::ratelimit::Network::parse(p).ok_or_else(|| {
                anyhow::anyhow!(
                    "TIDINGS_TRUSTED_PROXIES holds {p:?}: each entry must be an IP address or a CIDR range such as 10.0.0.0/8"
                )
            })
        })
        .collect()
}

/// `TIDINGS_INBOX_ORIGINS` checked: each origin `http(s)://host[:port]`, without path; `*` or unset: any.
pub fn inbox_origins(raw: Option<&str>) -> anyhow::Result<Vec<String>> {
    let Some(raw) = raw.filter(|r| r.trim() != "*") else {
        return Ok(Vec::new());
    };
    raw.split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(|o| {
            let url = url::Url::parse(o).ok().filter(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some()
                    && u.path() == "/"
                    && !o.ends_with('/')
                    && u.query().is_none()
            });
            match url {
                Some(_) => Ok(o.to_owned()),
                None => anyhow::bail!(
                    "TIDINGS_INBOX_ORIGINS holds {o:?}: each origin must be like https://app.example.com (scheme, host and optional port, no path)"
                ),
            }
        })
        .collect()
}

/// `TIDINGS_PUBLIC_URL` checked and normalised: an absolute `http` or `https` URL with a host, without
/// credentials, query or fragment; trailing slashes are removed (`https://mail.example.com/tidings/` →
/// `https://mail.example.com/tidings`), so a route is appended as `{url}/v1/…`.
pub fn public_url(raw: &str) -> anyhow::Result<String> {
    let bad = |why: &str| anyhow::anyhow!("TIDINGS_PUBLIC_URL {why}, got {raw:?}");
    let url = url::Url::parse(raw.trim())
        .map_err(|e| bad(&format!("must be an absolute http(s) URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("must start with https:// (or http://)"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("must name a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("must not hold a user name or password"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("must not have a query (?…) or a fragment (#…)"));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// A positive count from the environment variable `name`, else `default`.
fn positive(name: &str, default: usize) -> anyhow::Result<usize> {
    let Some(v) = non_empty_env(name) else {
        return Ok(default);
    };
    v.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| anyhow::anyhow!("{name} must be a positive integer, got {v:?}"))
}

/// A duration in seconds (fractions allowed) from the environment variable `name`, else `default`.
fn seconds(name: &str, default: Duration) -> anyhow::Result<Duration> {
    let Some(v) = non_empty_env(name) else {
        return Ok(default);
    };
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            anyhow::anyhow!("{name} must be a number of seconds (0 < s ≤ 86400), got {v:?}")
        })
}

/// A `true`/`false` variable (also `1`/`0`); unset or empty: `default`.
fn env_bool(name: &str, default: bool) -> anyhow::Result<bool> {
    match non_empty_env(name).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) if v == "true" || v == "1" => Ok(true),
        Some(v) if v == "false" || v == "0" => Ok(false),
        Some(v) => anyhow::bail!("{name} must be true or false, got {v:?}"),
    }
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The URL with any password replaced, for logs.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme_end + 3],
                    &userinfo[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_design() {
        let cli = Cli::try_parse_from(["tidings", "serve"]).unwrap();
        assert_eq!(cli.listen.to_string(), "127.0.0.1:3000");
        assert_eq!(cli.compat, WireProfile::Spec);
        assert!(matches!(cli.command, Command::Serve));
    }

    #[test]
    fn a_worker_takes_a_metrics_address() {
        let cli = Cli::try_parse_from(["tidings", "worker", "--metrics-listen", "127.0.0.1:9464"])
            .unwrap();
        assert_eq!(
            Config::from_cli(&cli).unwrap().metrics_listen,
            Some("127.0.0.1:9464".parse().unwrap())
        );
        assert!(Cli::try_parse_from(["tidings", "worker", "--metrics-listen", "nope"]).is_err());
        // Only a worker serves metrics on an address of its own: `serve` has them on the API's.
        assert!(
            Cli::try_parse_from(["tidings", "serve", "--metrics-listen", "127.0.0.1:9464"])
                .is_err()
        );
    }

    #[test]
    fn flags_parse() {
        let cli = Cli::try_parse_from([
            "tidings",
            "--listen",
            "0.0.0.0:8080",
            "--compat",
            "novu",
            "--database-url",
            "postgres://u:p@h/db",
            "environments",
            "create",
            "Staging",
        ])
        .unwrap();
        assert_eq!(cli.compat, WireProfile::Novu);
        assert_eq!(cli.database_url, "postgres://u:p@h/db");
        match cli.command {
            Command::Environments {
                command: EnvironmentsCommand::Create { name, hmac },
            } => assert_eq!((name.as_str(), hmac), ("Staging", false)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn environment_commands_parse() {
        let cli = Cli::try_parse_from(["tidings", "environments", "list"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Environments {
                command: EnvironmentsCommand::List
            }
        ));
        let cli =
            Cli::try_parse_from(["tidings", "environments", "rotate-key", "Production"]).unwrap();
        match cli.command {
            Command::Environments {
                command: EnvironmentsCommand::RotateKey { name },
            } => assert_eq!(name, "Production"),
            other => panic!("unexpected {other:?}"),
        }
        let cli =
            Cli::try_parse_from(["tidings", "environments", "create", "Shop", "--hmac"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Environments {
                command: EnvironmentsCommand::Create { hmac: true, .. }
            }
        ));
        let cli = Cli::try_parse_from(["tidings", "environments", "hmac", "Shop", "off"]).unwrap();
        match cli.command {
            Command::Environments {
                command: EnvironmentsCommand::Hmac { name, state },
            } => assert_eq!((name.as_str(), state.as_str()), ("Shop", "off")),
            other => panic!("unexpected {other:?}"),
        }
        assert!(Cli::try_parse_from(["tidings", "environments", "hmac", "Shop", "maybe"]).is_err());
        let cli = Cli::try_parse_from(["tidings", "environments", "end-sessions", "Shop"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Environments {
                command: EnvironmentsCommand::EndSessions { .. }
            }
        ));
    }

    #[test]
    fn the_public_url_is_checked_and_loses_its_trailing_slash() {
        assert_eq!(
            public_url("https://mail.example.com/").unwrap(),
            "https://mail.example.com"
        );
        assert_eq!(
            public_url(" http://127.0.0.1:3000/tidings// ").unwrap(),
            "http://127.0.0.1:3000/tidings"
        );
        assert_eq!(
            public_url("HTTPS://Mail.Example.com:8443/a").unwrap(),
            "https://mail.example.com:8443/a"
        );
        for (bad, why) in [
            ("mail.example.com", "absolute http(s) URL"),
            ("/v1", "absolute http(s) URL"),
            ("ftp://example.com", "https://"),
            ("mailto:a@example.com", "https://"),
            ("https://u:p@example.com", "user name or password"),
            ("https://example.com/?a=1", "query"),
            ("https://example.com/#top", "fragment"),
        ] {
            let e = public_url(bad).unwrap_err().to_string();
            assert!(e.starts_with("TIDINGS_PUBLIC_URL "), "{e}");
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_url("sqlite://x.db"), "sqlite://x.db");
    }
}
