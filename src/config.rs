//! Command line and configuration (design.md §2): flag, else environment variable, else default.
//!
//! Every setting is declared once, as one clap argument of [`Config`] (or of the option types it flattens:
//! [`ServerOptions`], [`RequestLimits`], [`SocketLimits`], [`RateLimits`]) with its flag, its variable, its
//! default and the check of its value; the README's configuration table is checked against these
//! declarations by a test (`readme_table_matches_the_declarations`). A variable set to blank counts as unset.
//! This module owns the option types: the layers that apply them (`server`, `api`) take them from here.

use std::ffi::OsStr;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::parser::ValueSource;
use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

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
    #[command(flatten)]
    pub config: Config,

    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line and the environment of this process (exits with clap's message when they do not
    /// parse).
    pub fn parse_env() -> Self {
        Self::try_parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// `args` (the program's name first) and the environment of this process; a blank variable counts as
    /// unset.
    pub fn try_parse_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = without_blank_variables(Self::command()).try_get_matches_from(args)?;
        Self::from_arg_matches(&matches)
    }

    /// The configuration the command runs with: the settings, and the worker's metrics address.
    pub fn config(&self) -> Config {
        let mut config = self.config.clone();
        if let Command::Worker { metrics_listen } = self.command {
            config.metrics_listen = metrics_listen;
        }
        if config
            .public_url
            .as_deref()
            .is_some_and(|u| u.starts_with("http://"))
        {
            tracing::warn!("TIDINGS_PUBLIC_URL is not https: mail providers ignore one-click unsubscribe links that are not https, so emails will carry links no mail client offers");
        }
        config
    }
}

/// `cmd` with the variables of its arguments that are set to blank left out, as if unset.
fn without_blank_variables(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|arg| {
        let blank = arg
            .get_env()
            .and_then(std::env::var_os)
            .is_some_and(|v| v.to_string_lossy().trim().is_empty());
        if blank {
            arg.env(None)
        } else {
            arg
        }
    })
    .mut_subcommands(without_blank_variables)
}

/// The declared defaults of the option type `T`, whatever the environment holds.
fn declared_defaults<T: Args + FromArgMatches>() -> T {
    let cmd = T::augment_args(clap::Command::new("tidings")).mut_args(|arg| arg.env(None));
    let matches = cmd
        .try_get_matches_from(["tidings"])
        .expect("the declared defaults are valid values");
    T::from_arg_matches(&matches).expect("the declared defaults are valid values")
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
    /// Benchmark and test helper: bulk-insert synthetic subscribers into the environment of `--api-key`.
    #[command(hide = true)]
    SeedSubscribers {
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

/// Every setting, resolved once at start-up: flag, else environment variable, else default. Each field
/// is its setting's only declaration (README "Configuration" is checked against them). Settings are
/// global: they may come before or after the command.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Address the HTTP API listens on.
    #[arg(
        long,
        env = "TIDINGS_LISTEN",
        default_value = "127.0.0.1:3000",
        global = true
    )]
    pub listen: SocketAddr,

    /// `sqlite://path/to/file.db` or `postgres://user@host/db`.
    #[arg(long, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL, global = true, hide_env_values = true)]
    pub database_url: DatabaseUrl,

    /// Wire profile: `spec` (the specification literally) or `novu` (drop-in for the Novu SDKs).
    #[arg(
        long,
        env = "TIDINGS_COMPAT",
        value_enum,
        default_value = "spec",
        global = true
    )]
    pub compat: WireProfile,

    /// Log lines as `text` or `json` (filtered by `RUST_LOG`).
    #[arg(
        long,
        env = "TIDINGS_LOG",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log: LogFormat,

    /// The bootstrap key of the "Development" environment (at least 32 characters); the seed helpers'
    /// environment.
    #[arg(long, env = "TIDINGS_API_KEY", global = true, hide_env_values = true)]
    pub api_key: Option<Secret>,

    /// 32 bytes, base64 (`openssl rand -base64 32`); SQLite: generated into `secret.key` when unset.
    #[arg(
        long,
        env = "TIDINGS_ENCRYPTION_KEY",
        global = true,
        hide_env_values = true
    )]
    pub encryption_key: Option<Secret>,

    /// Concurrent jobs per process; `auto`: 4 × cores.
    #[arg(long, env = "TIDINGS_WORKERS", default_value = "auto", value_parser = Checked(workers), global = true)]
    pub workers: usize,

    #[command(flatten)]
    pub server: ServerOptions,

    #[command(flatten)]
    pub requests: RequestLimits,

    #[command(flatten)]
    pub sockets: SocketLimits,

    #[command(flatten)]
    pub rate_limits: RateLimits,

    /// When set, `/metrics` requires `Authorization: Bearer <token>`.
    #[arg(
        long,
        env = "TIDINGS_METRICS_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub metrics_token: Option<Secret>,

    /// `tidings worker --metrics-listen`: where a worker serves `/metrics` (declared by the command).
    #[arg(skip)]
    pub metrics_listen: Option<SocketAddr>,

    /// The browser origins allowed to call the Inbox's routes and socket, comma-separated
    /// (`https://app.example.com,https://admin.example.com`); `*`: any.
    #[arg(long, env = "TIDINGS_INBOX_ORIGINS", default_value = "*", value_parser = Checked(inbox_origins), global = true)]
    pub inbox_origins: InboxOrigins,

    /// The address the world reaches the server at (see [`public_url`]); when set, emails carry one-click
    /// unsubscribe links.
    #[arg(long, env = "TIDINGS_PUBLIC_URL", value_parser = Checked(public_url), global = true)]
    pub public_url: Option<String>,

    /// `true` lets `http_request` steps, attachments and providers call private, loopback and link-local
    /// addresses; by default only public ones (see `crate::outbound`).
    #[arg(long, env = "TIDINGS_ALLOW_PRIVATE_NETWORKS", default_value = "false", num_args = 0..=1,
        default_missing_value = "true", action = ArgAction::Set, value_parser = Checked(boolean), global = true)]
    pub allow_private_networks: bool,

    /// Reverse proxies (addresses or CIDR ranges, comma-separated) whose `X-Forwarded-For` names the client
    /// for the limits by address; unset: none.
    #[arg(long, env = "TIDINGS_TRUSTED_PROXIES", value_delimiter = ',', value_parser = Checked(network), global = true)]
    pub trusted_proxies: Vec<Network>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The server's connection settings (README "Limits, timeouts and shutdown").
#[derive(Debug, Clone, Copy, PartialEq, Args)]
pub struct ServerOptions {
    /// Connections open at once (lowered to what the descriptor limit allows).
    #[arg(long, env = "TIDINGS_MAX_CONNECTIONS", default_value = "10000", value_parser = Checked(positive), global = true)]
    pub max_connections: usize,
    /// Seconds a connection has to send a complete request head, after opening or its previous response.
    #[arg(long, env = "TIDINGS_HEADER_TIMEOUT", default_value = "10", value_parser = Checked(seconds), global = true)]
    pub header_timeout: Duration,
    /// Seconds in-flight requests and jobs get to finish after SIGTERM or SIGINT.
    #[arg(long, env = "TIDINGS_SHUTDOWN_TIMEOUT", default_value = "20", value_parser = Checked(seconds), global = true)]
    pub shutdown_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        declared_defaults()
    }
}

/// How long a request may take (README "Limits, timeouts and shutdown").
#[derive(Debug, Clone, Copy, PartialEq, Args)]
pub struct RequestLimits {
    /// Seconds from the end of the request head to the end of its body (else 408).
    #[arg(long, env = "TIDINGS_BODY_TIMEOUT", default_value = "15", value_parser = Checked(seconds), global = true)]
    pub body_timeout: Duration,
    /// Seconds from the end of the request head to the response (else 503).
    #[arg(long, env = "TIDINGS_REQUEST_TIMEOUT", default_value = "30", value_parser = Checked(seconds), global = true)]
    pub request_timeout: Duration,
}

impl Default for RequestLimits {
    fn default() -> Self {
        declared_defaults()
    }
}

/// The caps on the Inbox's sockets (README "Limits, timeouts and shutdown").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct SocketLimits {
    /// Sockets open in this process; one more is refused before its upgrade (503).
    #[arg(id = "max_sockets", long = "max-sockets", env = "TIDINGS_MAX_SOCKETS", default_value = "5000",
        value_parser = Checked(positive), global = true)]
    pub max: usize,
    /// One subscriber's sockets in this process; a new one past it closes the subscriber's oldest.
    #[arg(id = "max_sockets_per_subscriber", long = "max-sockets-per-subscriber",
        env = "TIDINGS_MAX_SOCKETS_PER_SUBSCRIBER", default_value = "10", value_parser = Checked(positive),
        global = true)]
    pub per_subscriber: usize,
}

impl Default for SocketLimits {
    fn default() -> Self {
        declared_defaults()
    }
}

/// Requests per second per environment in each of Novu's rate-limit categories (the defaults are Novu's top
/// tier), and the limits of public traffic (the Inbox's, refused API keys); 0 turns a limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct RateLimits {
    /// Triggers (`/v1/events/…`), per environment.
    #[arg(id = "rate_limit_events", long = "rate-limit-events", env = "TIDINGS_RATE_LIMIT_EVENTS",
        default_value = "6000", value_parser = Checked(rate), global = true)]
    pub events: u32,
    /// Subscribers, workflows, channel connections and endpoints, per environment.
    #[arg(id = "rate_limit_configuration", long = "rate-limit-configuration",
        env = "TIDINGS_RATE_LIMIT_CONFIGURATION", default_value = "2000", value_parser = Checked(rate), global = true)]
    pub configuration: u32,
    /// Everything else with an API key, per environment.
    #[arg(id = "rate_limit_global", long = "rate-limit-global", env = "TIDINGS_RATE_LIMIT_GLOBAL",
        default_value = "3000", value_parser = Checked(rate), global = true)]
    pub global: u32,
    /// The Inbox's routes and sessions (`/v1/inbox/…`), per environment: a budget of their own.
    #[arg(id = "rate_limit_inbox", long = "rate-limit-inbox", env = "TIDINGS_RATE_LIMIT_INBOX",
        default_value = "3000", value_parser = Checked(rate), global = true)]
    pub inbox: u32,
    /// The Inbox's routes and sessions per client address (not per environment).
    #[arg(id = "rate_limit_inbox_per_address", long = "rate-limit-inbox-per-address",
        env = "TIDINGS_RATE_LIMIT_INBOX_PER_ADDRESS", default_value = "100", value_parser = Checked(rate),
        global = true)]
    pub inbox_per_address: u32,
    /// The Inbox's routes and sessions per subscriber.
    #[arg(id = "rate_limit_inbox_per_subscriber", long = "rate-limit-inbox-per-subscriber",
        env = "TIDINGS_RATE_LIMIT_INBOX_PER_SUBSCRIBER", default_value = "20", value_parser = Checked(rate),
        global = true)]
    pub inbox_per_subscriber: u32,
    /// Refused API keys per client address.
    #[arg(id = "rate_limit_auth_failures", long = "rate-limit-auth-failures",
        env = "TIDINGS_RATE_LIMIT_AUTH_FAILURES", default_value = "10", value_parser = Checked(rate), global = true)]
    pub auth_failures: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        declared_defaults()
    }
}

/// A secret setting (a key, a token): its `Debug` says only that it is set.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

impl std::ops::Deref for Secret {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<set>")
    }
}

/// The database's URL: its `Debug` hides the password ([`redact_url`]).
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl std::str::FromStr for DatabaseUrl {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

impl std::ops::Deref for DatabaseUrl {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact_url(&self.0))
    }
}

/// `TIDINGS_INBOX_ORIGINS`: the origins listed; empty: any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxOrigins(pub Vec<String>);

/// Addresses of trusted reverse proxies (`TIDINGS_TRUSTED_PROXIES`): an address, or a range in CIDR
/// notation (`10.0.0.0/8`, `fd00::/8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u32,
}

impl Network {
    /// `None` when `text` is no address or range.
    pub fn parse(text: &str) -> Option<Self> {
        let (addr, prefix) = match text.trim().split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text.trim(), None),
        };
        let addr = addr.parse::<IpAddr>().ok()?.to_canonical();
        let width = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.parse().ok().filter(|p| *p <= width)?,
            None => width,
        };
        Some(Self { addr, prefix })
    }

    /// Whether `ip` (an IPv4 address mapped into IPv6 counts as the IPv4 address) is in the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let high = |bits: u128, width: u32| bits.checked_shr(width - self.prefix).unwrap_or(0);
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                high(u32::from(net).into(), 32) == high(u32::from(ip).into(), 32)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => high(net.into(), 128) == high(ip.into(), 128),
            _ => false,
        }
    }
}

/// A value parser from a check that says what is wrong; clap's error names the variable or the flag the
/// value came from: `TIDINGS_WORKERS must be a positive integer or auto, got "0"`.
#[derive(Clone, Copy)]
struct Checked<T>(fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Checked<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        self.parse_ref_(cmd, arg, value, ValueSource::CommandLine)
    }

    fn parse_ref_(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
        source: ValueSource,
    ) -> Result<T, clap::Error> {
        let text = value.to_string_lossy();
        (self.0)(&text).map_err(|why| {
            let name = match (source, arg) {
                (ValueSource::EnvVariable, Some(arg)) => {
                    arg.get_env().map(|v| v.to_string_lossy().into_owned())
                }
                (_, Some(arg)) => arg.get_long().map(|l| format!("--{l}")),
                _ => None,
            };
            let name = name.unwrap_or_else(|| "a setting".into());
            let mut cmd = cmd.clone();
            cmd.error(
                clap::error::ErrorKind::ValueValidation,
                format!("{name} {why}, got {text:?}"),
            )
        })
    }
}

/// `auto` (4 × cores) or a positive count of concurrent jobs.
fn workers(v: &str) -> Result<usize, String> {
    if v.trim() == "auto" {
        return Ok(4 * std::thread::available_parallelism().map_or(1, |n| n.get()));
    }
    positive(v).map_err(|_| "must be a positive integer or auto".into())
}

/// A positive count.
fn positive(v: &str) -> Result<usize, String> {
    v.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| "must be a positive integer".into())
}

/// Requests per second: 0 (off) to 10,000,000.
fn rate(v: &str) -> Result<u32, String> {
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n <= 10_000_000)
        .ok_or_else(|| "must be an integer from 0 to 10000000".into())
}

/// A duration in seconds, fractions allowed.
fn seconds(v: &str) -> Result<Duration, String> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| "must be a number of seconds (0 < s ≤ 86400)".into())
}

/// `true`/`false` (also `1`/`0`).
fn boolean(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err("must be true or false".into()),
    }
}

/// One entry of `TIDINGS_TRUSTED_PROXIES`.
fn network(v: &str) -> Result<Network, String> {
    Network::parse(v).ok_or_else(|| {
        "holds an entry that is neither an IP address nor a CIDR range such as 10.0.0.0/8".into()
    })
}

/// `TIDINGS_INBOX_ORIGINS` checked: each origin `http(s)://host[:port]`, without path; `*`: any.
fn inbox_origins(raw: &str) -> Result<InboxOrigins, String> {
    if raw.trim() == "*" {
        return Ok(InboxOrigins::default());
    }
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
                None => Err(format!(
                    "holds {o:?}: each origin must be like https://app.example.com (scheme, host and optional port, no path)"
                )),
            }
        })
        .collect::<Result<_, _>>()
        .map(InboxOrigins)
}

/// `TIDINGS_PUBLIC_URL` checked and normalised: an absolute `http` or `https` URL with a host, without
/// credentials, query or fragment; trailing slashes are removed (`https://mail.example.com/tidings/` →
/// `https://mail.example.com/tidings`), so a route is appended as `{url}/v1/…`.
pub fn public_url(raw: &str) -> Result<String, String> {
    let url = url::Url::parse(raw.trim())
        .map_err(|e| format!("must be an absolute http(s) URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must start with https:// (or http://)".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not hold a user name or password".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not have a query (?…) or a fragment (#…)".into());
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
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
        let cli = Cli::try_parse_args(["tidings", "serve"]).unwrap();
        assert_eq!(cli.config.listen.to_string(), "127.0.0.1:3000");
        assert_eq!(cli.config.compat, WireProfile::Spec);
        assert!(matches!(cli.command, Command::Serve));
    }

    #[test]
    fn a_worker_takes_a_metrics_address() {
        let cli = Cli::try_parse_args(["tidings", "worker", "--metrics-listen", "127.0.0.1:9464"])
            .unwrap();
        assert_eq!(
            cli.config().metrics_listen,
            Some("127.0.0.1:9464".parse().unwrap())
        );
        assert!(Cli::try_parse_args(["tidings", "worker", "--metrics-listen", "nope"]).is_err());
        // Only a worker serves metrics on an address of its own: `serve` has them on the API's.
        assert!(
            Cli::try_parse_args(["tidings", "serve", "--metrics-listen", "127.0.0.1:9464"])
                .is_err()
        );
    }

    #[test]
    fn flags_parse() {
        let cli = Cli::try_parse_args([
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
        assert_eq!(cli.config.compat, WireProfile::Novu);
        assert_eq!(&*cli.config.database_url, "postgres://u:p@h/db");
        assert_eq!(
            format!("{:?}", cli.config.database_url),
            "postgres://u:***@h/db"
        );
        match cli.command {
            Command::Environments {
                command: EnvironmentsCommand::Create { name, hmac },
            } => assert_eq!((name.as_str(), hmac), ("Staging", false)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn environment_commands_parse() {
        let cli = Cli::try_parse_args(["tidings", "environments", "list"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Environments {
                command: EnvironmentsCommand::List
            }
        ));
        let cli =
            Cli::try_parse_args(["tidings", "environments", "rotate-key", "Production"]).unwrap();
        match cli.command {
            Command::Environments {
                command: EnvironmentsCommand::RotateKey { name },
            } => assert_eq!(name, "Production"),
            other => panic!("unexpected {other:?}"),
        }
        let cli =
            Cli::try_parse_args(["tidings", "environments", "create", "Shop", "--hmac"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Environments {
                command: EnvironmentsCommand::Create { hmac: true, .. }
            }
        ));
        let cli = Cli::try_parse_args(["tidings", "environments", "hmac", "Shop", "off"]).unwrap();
        match cli.command {
            Command::Environments {
                command: EnvironmentsCommand::Hmac { name, state },
            } => assert_eq!((name.as_str(), state.as_str()), ("Shop", "off")),
            other => panic!("unexpected {other:?}"),
        }
        assert!(Cli::try_parse_args(["tidings", "environments", "hmac", "Shop", "maybe"]).is_err());
        let cli = Cli::try_parse_args(["tidings", "environments", "end-sessions", "Shop"]).unwrap();
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
            let e = public_url(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            // Through the command line, the message names the flag and the value.
            let e = Cli::try_parse_args(["tidings", "serve", "--public-url", bad])
                .unwrap_err()
                .to_string();
            assert!(e.contains("--public-url must") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn networks_parse_and_match() {
        let n = |t: &str| Network::parse(t);
        assert!(n("10.0.0.0/8")
            .unwrap()
            .contains("10.255.0.1".parse().unwrap()));
        assert!(!n("10.0.0.0/8")
            .unwrap()
            .contains("11.0.0.1".parse().unwrap()));
        assert!(n("0.0.0.0/0").unwrap().contains("8.8.8.8".parse().unwrap()));
        assert!(n("::ffff:127.0.0.1")
            .unwrap()
            .contains("127.0.0.1".parse().unwrap()));
        assert!(n("fd00::/8").unwrap().contains("fdab::1".parse().unwrap()));
        assert!(!n("fd00::/8").unwrap().contains("10.0.0.1".parse().unwrap()));
        for bad in [
            "",
            "10.0.0.0/33",
            "fd00::/129",
            "host.example",
            "10.0.0.0/x",
        ] {
            assert!(n(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn option_types_default_to_their_declarations() {
        let server = ServerOptions::default();
        assert_eq!(server.max_connections, 10_000);
        assert_eq!(server.header_timeout, Duration::from_secs(10));
        assert_eq!(server.shutdown_timeout, Duration::from_secs(20));
        let requests = RequestLimits::default();
        assert_eq!(requests.body_timeout, Duration::from_secs(15));
        assert_eq!(requests.request_timeout, Duration::from_secs(30));
        assert_eq!(
            SocketLimits::default(),
            SocketLimits {
                max: 5_000,
                per_subscriber: 10
            }
        );
        assert_eq!(
            RateLimits::default(),
            RateLimits {
                events: 6000,
                configuration: 2000,
                global: 3000,
                inbox: 3000,
                inbox_per_address: 100,
                inbox_per_subscriber: 20,
                auth_failures: 10,
            }
        );
        let config = Cli::try_parse_args(["tidings", "serve"]).unwrap().config;
        assert_eq!(config.server, server);
        assert_eq!(config.rate_limits, RateLimits::default());
        assert!(!config.allow_private_networks);
        assert!(config.inbox_origins.0.is_empty() && config.trusted_proxies.is_empty());
        assert!(config.workers >= 4);
    }

    #[test]
    fn every_setting_has_a_flag_and_a_variable() {
        let cli = Cli::try_parse_args([
            "tidings",
            "serve",
            "--workers",
            "3",
            "--max-connections",
            "7",
            "--header-timeout",
            "0.5",
            "--max-sockets-per-subscriber",
            "2",
            "--rate-limit-inbox",
            "0",
            "--allow-private-networks",
            "--trusted-proxies",
            "10.0.0.0/8,127.0.0.1",
            "--inbox-origins",
            "https://a.example.com, http://b.example.com:8080",
            "--public-url",
            "https://mail.example.com/",
            "--log",
            "json",
        ])
        .unwrap();
        let c = cli.config();
        assert_eq!(c.workers, 3);
        assert_eq!(c.server.max_connections, 7);
        assert_eq!(c.server.header_timeout, Duration::from_millis(500));
        assert_eq!(c.sockets.per_subscriber, 2);
        assert_eq!(c.rate_limits.inbox, 0);
        assert!(c.allow_private_networks);
        assert_eq!(c.trusted_proxies.len(), 2);
        assert_eq!(
            c.inbox_origins.0,
            ["https://a.example.com", "http://b.example.com:8080"]
        );
        assert_eq!(c.public_url.as_deref(), Some("https://mail.example.com"));
        assert_eq!(c.log, LogFormat::Json);
        // Every argument but the commands' own has its variable.
        for arg in Cli::command().get_arguments() {
            if arg.get_id() != "help" && arg.get_id() != "version" {
                assert!(arg.get_env().is_some(), "{} has no variable", arg.get_id());
            }
        }
    }

    #[test]
    fn bad_values_are_refused_naming_the_setting() {
        for (args, message) in [
            (
                &["--workers", "0"][..],
                "--workers must be a positive integer or auto, got \"0\"",
            ),
            (
                &["--max-sockets=-1"],
                "--max-sockets must be a positive integer, got \"-1\"",
            ),
            (
                &["--rate-limit-events", "10000001"],
                "--rate-limit-events must be an integer from 0 to 10000000",
            ),
            (
                &["--body-timeout", "0"],
                "--body-timeout must be a number of seconds (0 < s ≤ 86400), got \"0\"",
            ),
            (
                &["--allow-private-networks", "sometimes"],
                "--allow-private-networks must be true or false, got \"sometimes\"",
            ),
            (
                &["--trusted-proxies", "10.0.0.0/8,host.example"],
                "host.example",
            ),
            (
                &["--inbox-origins", "https://a.example.com/path"],
                "no path",
            ),
        ] {
            let e = Cli::try_parse_args(["tidings", "serve"].iter().chain(args))
                .unwrap_err()
                .to_string();
            assert!(e.contains(message), "{args:?}: {e}");
        }
    }

    #[test]
    fn errors_name_the_variable_a_value_came_from() {
        // A variable of this test alone (the process's environment is shared by the tests).
        const VAR: &str = "TIDINGS_CONFIG_TEST_ONLY_COUNT";
        std::env::set_var(VAR, "none");
        let cmd = clap::Command::new("t").arg(
            clap::Arg::new("count")
                .long("count")
                .env(VAR)
                .value_parser(Checked(positive)),
        );
        let e = without_blank_variables(cmd.clone())
            .try_get_matches_from(["t"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("TIDINGS_CONFIG_TEST_ONLY_COUNT must be a positive integer, got \"none\""),
            "{e}"
        );
        // Blank counts as unset.
        std::env::set_var(VAR, "  ");
        let m = without_blank_variables(cmd)
            .try_get_matches_from(["t"])
            .unwrap();
        assert_eq!(m.get_one::<usize>("count"), None);
        std::env::remove_var(VAR);
    }

    /// Each argument with a variable, in the command tree: (variable, flag, default or `None`).
    fn declared(cmd: &clap::Command) -> Vec<(String, String, Option<String>)> {
        let mut out: Vec<_> = cmd
            .get_arguments()
            .filter_map(|arg| {
                let var = arg.get_env()?.to_string_lossy().into_owned();
                let flag = format!("--{}", arg.get_long()?);
                let defaults = arg.get_default_values();
                let default = (!defaults.is_empty()).then(|| {
                    let all: Vec<_> = defaults.iter().map(|d| d.to_string_lossy()).collect();
                    all.join(",")
                });
                Some((var, flag, default))
            })
            .collect();
        for sub in cmd.get_subcommands() {
            out.extend(declared(sub));
        }
        out
    }

    /// README's configuration table: one row per setting, `--flag` / `VARIABLE` in the second column, and
    /// the third starting with the default in backticks, or with "unset" when there is none.
    #[test]
    fn readme_table_matches_the_declarations() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        let section = readme
            .split("\n## Configuration\n")
            .nth(1)
            .expect("README has a Configuration section");
        let spans = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        let mut documented = Vec::new();
        for line in section
            .lines()
            .skip_while(|l| !l.starts_with("| setting |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
        {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            assert_eq!(cells.len(), 3, "a row of three cells: {line}");
            let named = spans(cells[1]);
            let flag = named
                .iter()
                .find_map(|s| s.split(' ').find(|w| w.starts_with("--")))
                .unwrap_or_else(|| panic!("no `--flag` in: {line}"));
            let var = named
                .iter()
                .find(|s| s.len() > 1 && s.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
                .unwrap_or_else(|| panic!("no `VARIABLE` in: {line}"));
            let default = match cells[2].trim_start().strip_prefix('`') {
                Some(rest) => Some(rest.split('`').next().unwrap_or_default().to_owned()),
                None => {
                    assert!(
                        cells[2].trim_start().starts_with("unset"),
                        "the default of {var} is `…` or unset: {line}"
                    );
                    None
                }
            };
            documented.push((var.clone(), flag.to_owned(), default));
        }
        let mut declared = declared(&Cli::command());
        declared.sort();
        documented.sort();
        let rows = |v: &[(String, String, Option<String>)]| {
            v.iter()
                .map(|(var, flag, default)| {
                    let default = default
                        .as_ref()
                        .map_or("unset".into(), |d| format!("`{d}`"));
                    format!("`{flag}` / `{var}` | {default}")
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            rows(&documented),
            rows(&declared),
            "README's configuration table (left) and the declared settings (right) differ"
        );
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
