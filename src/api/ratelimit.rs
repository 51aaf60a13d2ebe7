//! Rate limits per environment, by Novu's categories (reference/novu-behaviour.md §0.5): a token bucket per
//! (environment, category) that refills at the category's requests per second and holds a window of 5 s of
//! them plus 10 % ("burst"); a request costs 1 token, a bulk request 100 — at most what its bucket holds, so
//! that a bulk is admitted whatever the rate (once the bucket is full). API-key callers are limited by the
//! [`super::auth::Gate`], which asks [`Limiter::try_admit`] (or [`Limiter::admit`]) once it knows the
//! environment, before the idempotency record, so a refusal is never stored as a key's answer.
//!
//! Public traffic never spends an API key's budget. The Inbox's routes and sessions have a category of their
//! own (`inbox`, [`Limiter::admit_inbox`]) and are limited per client address ([`Limiter::admit_address`])
//! and per subscriber as well; refused API keys are limited per client address ([`Limiter::may_authenticate`]).
//! Those limits by address and subscriber are kept by each instance ([`Keyed`]).
//!
//! On SQLite the buckets live in the serving process. On PostgreSQL every instance shares one bucket per
//! (environment, category), a row of `rate_limit_buckets`: an instance takes tokens from it a chunk (1 % of
//! the burst) at a time and spends them locally, so only one request in a chunk waits for the database.
//! Precision: tokens leave the shared bucket before they are spent, so the instances together never exceed
//! the rate; a request may be refused while other instances still hold up to a chunk each (at most 1 % of
//! the burst per instance), and the headers show this instance's view.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Map;

use super::error::error_response;
pub use crate::config::Network;
use crate::config::RateLimits;
use crate::store::{Dialect, Store};

/// Seconds of the rate a bucket holds (Novu's window).
pub const WINDOW_SECS: u32 = 5;
/// What a bucket holds beyond a window's worth.
const BURST_ALLOWANCE: f64 = 0.1;
/// On PostgreSQL, the share of the burst an instance takes from the shared bucket at once.
const CHUNK_SHARE: f64 = 0.01;
const SINGLE_COST: f64 = 1.0;
const BULK_COST: f64 = 100.0;
/// The tier named in `RateLimit-Policy`: the defaults are Novu's top tier.
const SERVICE_LEVEL: &str = "enterprise";

static LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
static REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
static RESET: HeaderName = HeaderName::from_static("ratelimit-reset");
static POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
static RETRY_AFTER: HeaderName = HeaderName::from_static("retry-after");
static FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Novu's rate-limit categories, and the Inbox's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Triggers (`/v1/events/…`); `TIDINGS_RATE_LIMIT_EVENTS`.
    Trigger,
    /// Subscribers, workflows, channel connections and endpoints.
    Configuration,
    /// Everything else: notifications, messages, integrations, …
    Global,
    /// The Inbox's routes and sessions (`/v1/inbox/…`), public: never an API key's budget.
    Inbox,
}

impl Category {
    const ALL: [Category; 4] = [
        Self::Trigger,
        Self::Configuration,
        Self::Global,
        Self::Inbox,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trigger => "trigger",
            Self::Configuration => "configuration",
            Self::Global => "global",
            Self::Inbox => "inbox",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What a route costs and from which bucket, decided once per route from its template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteLimit {
    pub category: Category,
    pub bulk: bool,
}

impl RouteLimit {
    pub fn of(template: &str) -> Self {
        const CONFIGURATION: [&str; 6] = [
            "/api/v1/app",
            "/v1/subscribers",
            "/v2/subscribers",
            "/v2/workflows",
            "/v1/channel-connections",
            "/v1/channel-endpoints",
        ];
        let category = if template.starts_with("/v1/events") {
            Category::Trigger
        } else if template.starts_with("/v1/inbox") {
            Category::Inbox
        } else if CONFIGURATION.iter().any(|p| template.starts_with(p)) {
            Category::Configuration
        } else {
            Category::Global
        };
        Self {
            category,
            bulk: template.ends_with("/bulk"),
        }
    }

    /// The request's tokens under `policy`: at most what its bucket holds, else a bulk would never be
    /// admitted at a low rate (one rule on both databases).
    fn cost(self, policy: &Policy) -> f64 {
        let cost = if self.bulk { BULK_COST } else { SINGLE_COST };
        cost.min(policy.burst)
    }
}

/// One category's settings and the header values that never change.
#[derive(Debug)]
struct Policy {
    category: &'static str,
    per_second: f64,
    burst: f64,
    /// PostgreSQL: tokens taken from the shared bucket at once.
    chunk: f64,
    limit: HeaderValue,
    /// `RateLimit-Policy` for a single request and for a bulk one.
    policy: [HeaderValue; 2],
}

impl Policy {
    /// The policy of `per_second` for the category named `category` in headers and metrics; `None` when 0.
    fn new(category: &'static str, per_second: u32) -> Option<Self> {
        if per_second == 0 {
            return None;
        }
        let limit = u64::from(per_second) * u64::from(WINDOW_SECS);
        let burst = (limit as f64 * (1.0 + BURST_ALLOWANCE)).floor();
        let policy = |cost: &str| {
            let text = format!(
                "{limit};w={WINDOW_SECS};burst={burst};comment=\"token bucket\";category=\"{category}\";\
                 cost=\"{cost}\";serviceLevel=\"{SERVICE_LEVEL}\""
            );
            HeaderValue::from_str(&text).expect("a policy is visible ASCII")
        };
        Some(Self {
            category,
            per_second: f64::from(per_second),
            burst,
            chunk: (burst * CHUNK_SHARE).ceil().max(1.0),
            limit: HeaderValue::from(limit),
            policy: [policy("single"), policy("bulk")],
        })
    }

    /// Whole seconds until `tokens` more have flowed in, at least 1.
    fn seconds_for(&self, tokens: f64) -> u64 {
        (tokens / self.per_second).ceil().max(1.0) as u64
    }

    /// `tokens`, held at `at`, refilled up to `now` (a bucket kept in this process).
    fn refill(&self, tokens: &mut f64, at: &mut Instant, now: Instant) {
        let elapsed = now.saturating_duration_since(*at).as_secs_f64();
        *tokens = (*tokens + elapsed * self.per_second).min(self.burst);
        *at = now;
    }

    fn headers(&self, bulk: bool, remaining: f64, reset: u64) -> Headers {
        Headers {
            limit: self.limit.clone(),
            policy: self.policy[usize::from(bulk)].clone(),
            remaining: remaining.max(0.0).floor() as u64,
            reset,
        }
    }

    /// The 429 answer (counted): `Retry-After` is when the request's cost has refilled, `RateLimit-Reset`
    /// when the whole quota is available again (the bucket full), as the IETF draft means it.
    fn refusal(&self, bulk: bool, retry_after: u64, reset: u64) -> Response {
        crate::metrics::rate_limited(self.category);
        let mut resp = error_response(
            StatusCode::TOO_MANY_REQUESTS,
            "API rate limit exceeded",
            Map::new(),
        );
        self.headers(bulk, 0.0, reset).stamp(&mut resp);
        resp.headers_mut()
            .insert(RETRY_AFTER.clone(), HeaderValue::from(retry_after));
        resp
    }
}

/// One (environment, category) bucket as this instance sees it.
#[derive(Debug)]
struct Bucket {
    /// Tokens this instance may spend: the bucket itself (SQLite), or what it took from the shared bucket
    /// and has not spent yet (PostgreSQL).
    tokens: f64,
    /// SQLite: when `tokens` was last refilled.
    at: Instant,
    /// PostgreSQL: tokens the shared bucket held after this instance's last take.
    shared_left: f64,
    /// PostgreSQL: the shared bucket was short; requests that need a take are refused until then.
    empty_until: Option<Instant>,
    /// PostgreSQL: one take at a time per bucket.
    taking: Arc<tokio::sync::Mutex<()>>,
}

/// The rate-limit headers of an admitted request.
#[derive(Debug)]
pub struct Headers {
    limit: HeaderValue,
    policy: HeaderValue,
    remaining: u64,
    reset: u64,
}

impl Headers {
    fn stamp(self, resp: &mut Response) {
        let h = resp.headers_mut();
        h.insert(REMAINING.clone(), HeaderValue::from(self.remaining));
        h.insert(LIMIT.clone(), self.limit);
        h.insert(RESET.clone(), HeaderValue::from(self.reset));
        h.insert(POLICY.clone(), self.policy);
    }
}

/// Adds an admitted request's headers (none when its category is off) to its answer.
pub fn stamp(resp: &mut Response, headers: Option<Headers>) {
    if let Some(h) = headers {
        h.stamp(resp);
    }
}

/// The decision on one request.
#[derive(Debug)]
pub enum Verdict {
    /// Go on; stamp these headers on the answer.
    Admitted(Option<Headers>),
    /// The 429 answer.
    Refused(Response),
}

/// A 429 answer of a limit by address or subscriber (boxed: refusals are the rare path).
pub type Refused = Box<Response>;

/// What spending from a bucket found.
enum Spend {
    Verdict(Verdict),
    /// PostgreSQL: this instance holds too few tokens; take more from the shared bucket.
    Short,
}

/// The rate limits of one server (see the module's documentation).
#[derive(Debug)]
pub struct Limiter {
    policies: [Option<Policy>; 4],
    buckets: Mutex<HashMap<String, [Bucket; 4]>>,
    /// Set on PostgreSQL: the buckets are shared there.
    shared: Option<Store>,
    /// The Inbox's requests by client address.
    by_address: Keyed<IpAddr>,
    /// The Inbox's requests by (environment, subscriberId), hashed with [`Limiter::subscriber_keys`]: a
    /// key of fixed size, whatever the length of the subscriberId a session names.
    by_subscriber: Keyed<u64>,
    /// Keyed with a random seed, so a client cannot choose subscriberIds that share a bucket.
    subscriber_keys: std::hash::RandomState,
    /// Refused API keys by client address.
    auth_failures: Keyed<IpAddr>,
    /// Proxies whose `X-Forwarded-For` names the client.
    trusted_proxies: Vec<Network>,
}

impl Limiter {
    pub fn new(limits: RateLimits, trusted_proxies: Vec<Network>, store: &Store) -> Self {
        let per_second = |c: Category| match c {
            Category::Trigger => limits.events,
            Category::Configuration => limits.configuration,
            Category::Global => limits.global,
            Category::Inbox => limits.inbox,
        };
        Self {
            policies: Category::ALL.map(|c| Policy::new(c.as_str(), per_second(c))),
            buckets: Mutex::new(HashMap::new()),
            shared: (store.dialect() == Dialect::Postgres).then(|| store.clone()),
            by_address: Keyed::new(Policy::new("inbox-address", limits.inbox_per_address)),
            by_subscriber: Keyed::new(Policy::new("inbox-subscriber", limits.inbox_per_subscriber)),
            subscriber_keys: Default::default(),
            auth_failures: Keyed::new(Policy::new("auth-failure", limits.auth_failures)),
            trusted_proxies,
        }
    }

    /// The verdict on a request of `environment` to a route limited by `route`, when this instance can
    /// give it without the database; `None` when it must take tokens from the shared bucket
    /// ([`Limiter::admit`]).
    pub fn try_admit(&self, environment: &str, route: RouteLimit) -> Option<Verdict> {
        match self.spend(environment, route, Instant::now()) {
            Spend::Verdict(v) => Some(v),
            Spend::Short => None,
        }
    }

    /// The verdict on a request, taking tokens from the shared bucket when needed. If the database fails,
    /// the request is let through (without headers): the limit protects the service, it must not stop it.
    pub async fn admit(&self, environment: &str, route: RouteLimit) -> Verdict {
        if let Some(v) = self.try_admit(environment, route) {
            return v;
        }
        let (Some(store), Some(policy)) = (&self.shared, &self.policies[route.category.index()])
        else {
            return Verdict::Admitted(None);
        };
        let cost = route.cost(policy);
        let taking = self.with_bucket(environment, route.category, |b| b.taking.clone());
        let _one_take = taking.lock().await;
        // Another request may have taken a chunk while this one waited.
        if let Some(v) = self.try_admit(environment, route) {
            return v;
        }
        let held = self.with_bucket(environment, route.category, |b| b.tokens);
        let want = policy.chunk.max(cost - held);
        let category = route.category.as_str();
        let take = match store
            .take_rate_tokens(environment, category, want, policy.burst, policy.per_second)
            .await
        {
            Ok(take) => take,
            Err(e) => {
                tracing::warn!(error = ?e, "rate limit: taking tokens failed; request let through");
                return Verdict::Admitted(None);
            }
        };
        let now = Instant::now();
        self.with_bucket(environment, route.category, |b| {
            b.tokens += take.granted;
            b.shared_left = take.left;
            let missing = cost - b.tokens - take.left;
            b.empty_until = (b.tokens < cost).then(|| {
                now + Duration::from_secs_f64(missing.max(0.0) / policy.per_second)
                    .max(Duration::from_millis(1))
            });
        });
        match self.spend(environment, route, now) {
            Spend::Verdict(v) => v,
            // Unreachable: the take either covered the cost or marked the bucket empty.
            Spend::Short => Verdict::Admitted(None),
        }
    }

    /// The Inbox's limit per client address (`from`; none known: not limited), checked before anything
    /// else of an Inbox request is read: `Err` is the 429.
    pub fn admit_address(&self, from: Option<IpAddr>) -> Result<(), Refused> {
        match from {
            Some(ip) => self.by_address.take(ip, SINGLE_COST),
            None => Ok(()),
        }
    }

    /// The verdict on an Inbox request (a session, or a route with a session's token) of `subscriber_id`
    /// in `environment`: the subscriber's bucket, then the environment's `inbox` bucket, whose headers the
    /// answer carries.
    pub async fn admit_inbox(&self, environment: &str, subscriber_id: &str) -> Verdict {
        let key = self.subscriber_keys.hash_one((environment, subscriber_id));
        if let Err(refused) = self.by_subscriber.take(key, SINGLE_COST) {
            return Verdict::Refused(*refused);
        }
        self.admit(environment, RouteLimit::of("/v1/inbox")).await
    }

    /// Whether a client at `from` may have an API key this instance does not know looked up: `Err` (the 429)
    /// once its refused keys have spent its bucket.
    pub fn may_authenticate(&self, from: Option<IpAddr>) -> Result<(), Refused> {
        match from {
            Some(ip) => self.auth_failures.check(ip, SINGLE_COST),
            None => Ok(()),
        }
    }

    /// A client at `from` was refused an API key.
    pub fn authentication_failed(&self, from: Option<IpAddr>) {
        if let Some(ip) = from {
            self.auth_failures.charge(ip, SINGLE_COST);
        }
    }

    fn with_bucket<T>(
        &self,
        environment: &str,
        category: Category,
        f: impl FnOnce(&mut Bucket) -> T,
    ) -> T {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !buckets.contains_key(environment) {
            let new = |c: Category| Bucket {
                // SQLite: a new bucket starts full; PostgreSQL: this instance holds nothing yet.
                tokens: match (&self.shared, &self.policies[c.index()]) {
                    (None, Some(p)) => p.burst,
                    _ => 0.0,
                },
                at: Instant::now(),
                shared_left: 0.0,
                empty_until: None,
                taking: Default::default(),
            };
            buckets.insert(environment.to_owned(), Category::ALL.map(new));
        }
        let bucket = buckets
            .get_mut(environment)
            .map(|b| &mut b[category.index()])
            .expect("inserted above");
        f(bucket)
    }

    fn spend(&self, environment: &str, route: RouteLimit, now: Instant) -> Spend {
        let Some(policy) = &self.policies[route.category.index()] else {
            return Spend::Verdict(Verdict::Admitted(None));
        };
        let cost = route.cost(policy);
        let shared = self.shared.is_some();
        let decided = self.with_bucket(environment, route.category, |b| {
            let mut visible = b.tokens;
            if shared {
                visible += b.shared_left;
            } else {
                policy.refill(&mut b.tokens, &mut b.at, now);
                visible = b.tokens;
            }
            if b.tokens >= cost {
                b.tokens -= cost;
                let left = visible - cost;
                return Some(Ok((left, policy.seconds_for(policy.burst - left))));
            }
            let full = policy.seconds_for(policy.burst - visible);
            if !shared {
                return Some(Err((policy.seconds_for(cost - b.tokens), full)));
            }
            match b.empty_until {
                Some(until) if until > now => {
                    let wait = until.duration_since(now).as_secs_f64().ceil().max(1.0) as u64;
                    Some(Err((wait, full.max(wait))))
                }
                _ => None,
            }
        });
        match decided {
            None => Spend::Short,
            Some(Ok((left, reset))) => {
                // A full bucket resets now.
                let reset = if left >= policy.burst { 0 } else { reset };
                Spend::Verdict(Verdict::Admitted(Some(
                    policy.headers(route.bulk, left, reset),
                )))
            }
            Some(Err((retry_after, reset))) => Spend::Verdict(Verdict::Refused(policy.refusal(
                route.bulk,
                retry_after,
                reset,
            ))),
        }
    }
}

/// How many keys a [`Keyed`] generation holds before it is retired (two generations are kept).
const KEYED_GENERATION: usize = 32_768;

/// Token buckets by key (a client address, a subscriber), kept in this process and refilled as they are
/// used. Memory is bounded: keys go into the current generation; when it holds [`KEYED_GENERATION`] keys it
/// becomes the previous one and the previous one is dropped, so a bucket unused for a generation is
/// forgotten (as good as full: a client idle that long has refilled it, unless a flood of new keys
/// passed). A key found in the previous generation moves to the current one.
#[derive(Debug)]
struct Keyed<K> {
    policy: Option<Policy>,
    /// The current generation and the previous one: (tokens, refilled at) by key.
    generations: Mutex<[HashMap<K, (f64, Instant)>; 2]>,
}

impl<K: Hash + Eq> Keyed<K> {
    fn new(policy: Option<Policy>) -> Self {
        Self {
            policy,
            generations: Mutex::new([HashMap::new(), HashMap::new()]),
        }
    }

    /// Runs `f` on `key`'s bucket, refilled up to now (a new one is full).
    fn with<T>(&self, key: K, f: impl FnOnce(&Policy, &mut f64) -> T) -> Option<T> {
        let policy = self.policy.as_ref()?;
        let now = Instant::now();
        let mut generations = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        let [current, previous] = &mut *generations;
        let mut bucket = current
            .remove(&key)
            .or_else(|| previous.remove(&key))
            .unwrap_or((policy.burst, now));
        if current.len() >= KEYED_GENERATION {
            *previous = std::mem::take(current);
        }
        policy.refill(&mut bucket.0, &mut bucket.1, now);
        let out = f(policy, &mut bucket.0);
        current.insert(key, bucket);
        Some(out)
    }

    /// Spends `cost` from `key`'s bucket, or answers the 429.
    fn take(&self, key: K, cost: f64) -> Result<(), Refused> {
        self.decide(key, cost, true)
    }

    /// Whether `key`'s bucket holds `cost`, without spending it (else the 429).
    fn check(&self, key: K, cost: f64) -> Result<(), Refused> {
        self.decide(key, cost, false)
    }

    fn decide(&self, key: K, cost: f64, spend: bool) -> Result<(), Refused> {
        self.with(key, |policy, tokens| {
            let cost = cost.min(policy.burst);
            if *tokens >= cost {
                if spend {
                    *tokens -= cost;
                }
                return Ok(());
            }
            let retry_after = policy.seconds_for(cost - *tokens);
            let reset = policy.seconds_for(policy.burst - *tokens);
            Err(Box::new(policy.refusal(false, retry_after, reset)))
        })
        .unwrap_or(Ok(()))
    }

    /// Spends `cost` from `key`'s bucket whatever it holds (down to empty).
    fn charge(&self, key: K, cost: f64) {
        self.with(key, |_, tokens| *tokens = (*tokens - cost).max(0.0));
    }
}

/// The client's address as limits count it: the TCP peer the server put into the request
/// ([`ConnectInfo`]) or, when that peer is a trusted proxy, the last address of `X-Forwarded-For` that is
/// not one ([`Limiter::client_address`]). An IPv4 address counts as such (also when mapped into IPv6), an
/// IPv6 address by its /64 prefix (what one host or one customer is routed).
fn counted(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[4..].fill(0);
            IpAddr::V6(segments.into())
        }
        v4 => v4,
    }
}

impl Limiter {
    /// The address limits count a request by (see [`counted`]); `None` when the request did not come
    /// through the server (no limit by address then). Behind trusted proxies, `X-Forwarded-For` is read
    /// from its end: each proxy appends the address it received from, so the last address that is not a
    /// trusted proxy is the client (what comes before it, the client may have written).
    pub fn client_address(&self, headers: &HeaderMap, extensions: &Extensions) -> Option<IpAddr> {
        let ConnectInfo(peer) = extensions.get::<ConnectInfo<SocketAddr>>()?;
        let trusted = |ip: IpAddr| self.trusted_proxies.iter().any(|n| n.contains(ip));
        let mut client = peer.ip();
        if trusted(client) {
            let forwarded = headers
                .get_all(&FORWARDED_FOR)
                .iter()
                .rev()
                .flat_map(|v| v.to_str().unwrap_or_default().rsplit(','));
            for hop in forwarded {
                let Ok(ip) = hop.trim().parse::<IpAddr>() else {
                    break;
                };
                client = ip;
                if !trusted(ip) {
                    break;
                }
            }
        }
        Some(counted(client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_fall_into_novu_categories() {
        let of = |t| RouteLimit::of(t);
        assert_eq!(of("/v1/events/trigger").category, Category::Trigger);
        assert!(!of("/v1/events/trigger").bulk);
        assert!(of("/v1/events/trigger/bulk").bulk);
        assert_eq!(
            of("/v1/events/trigger/{transactionId}").category,
            Category::Trigger
        );
        for t in [
            "/v2/subscribers/{subscriberId}",
            "/v1/subscribers/{subscriberId}/credentials",
            "/v2/workflows",
            "/v1/channel-connections/{identifier}",
            "/v1/channel-endpoints",
        ] {
            assert_eq!(of(t).category, Category::Configuration, "{t}");
        }
        for t in [
            "/v1/notifications",
            "/v1/messages",
            "/v1/integrations/active",
        ] {
            assert_eq!(of(t).category, Category::Global, "{t}");
        }
    }

    #[test]
    fn policies_follow_novu() {
        let p = Policy::new("trigger", 6000).unwrap();
        assert_eq!(p.burst, 33_000.0);
        assert_eq!(p.chunk, 330.0);
        assert_eq!(p.limit, "30000");
        assert_eq!(
            p.policy[1],
            "30000;w=5;burst=33000;comment=\"token bucket\";category=\"trigger\";cost=\"bulk\";\
             serviceLevel=\"enterprise\""
        );
        assert!(Policy::new("global", 0).is_none());
        assert_eq!(Policy::new("global", 2).unwrap().seconds_for(3.0), 2);
    }

    #[test]
    fn a_request_costs_at_most_its_bucket() {
        let bulk = RouteLimit::of("/v1/events/trigger/bulk");
        assert_eq!(bulk.cost(&Policy::new("trigger", 40).unwrap()), 100.0);
        // 10/s: a bucket of 55.
        assert_eq!(bulk.cost(&Policy::new("trigger", 10).unwrap()), 55.0);
        assert_eq!(RouteLimit::of("/v1/inbox").category, Category::Inbox);
    }

    #[test]
    fn keyed_buckets_refuse_past_the_burst_and_stay_bounded() {
        let keyed = Keyed::new(Policy::new("inbox-address", 1));
        for _ in 0..5 {
            assert!(keyed.take(1u32, 1.0).is_ok());
        }
        let refused = keyed.take(1, 1.0).unwrap_err();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[&RETRY_AFTER], "1");
        assert!(keyed.take(2, 1.0).is_ok(), "another key has its own bucket");
        // `check` does not spend; `charge` spends whatever is left.
        assert!(keyed.check(3, 1.0).is_ok());
        for _ in 0..10 {
            keyed.charge(3, 1.0);
        }
        assert!(keyed.check(3, 1.0).is_err());
        // A flood of keys keeps at most two generations.
        for k in 0..(3 * KEYED_GENERATION as u32) {
            let _ = keyed.take(10 + k, 1.0);
        }
        let generations = keyed.generations.lock().unwrap();
        assert!(generations.iter().map(HashMap::len).sum::<usize>() <= 2 * KEYED_GENERATION);
        // Off: never refuses.
        let off: Keyed<u32> = Keyed::new(None);
        for _ in 0..100 {
            assert!(off.take(1, 1.0).is_ok());
        }
    }

    #[test]
    fn addresses_count_by_host_or_ipv6_prefix_and_proxies_forward() {
        let limiter = |proxies: &[&str]| Limiter {
            trusted_proxies: proxies.iter().map(|p| Network::parse(p).unwrap()).collect(),
            ..test_limiter()
        };
        let of = |limiter: &Limiter, peer: &str, forwarded: &[&str]| {
            let mut e = Extensions::new();
            e.insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
            let mut h = HeaderMap::new();
            for f in forwarded {
                h.append(FORWARDED_FOR.clone(), HeaderValue::from_str(f).unwrap());
            }
            limiter.client_address(&h, &e).unwrap().to_string()
        };
        let direct = limiter(&[]);
        assert_eq!(of(&direct, "203.0.113.7:5000", &[]), "203.0.113.7");
        assert_eq!(of(&direct, "[::ffff:203.0.113.7]:5000", &[]), "203.0.113.7");
        assert_eq!(
            of(&direct, "[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", &[]),
            "2001:db8:1:2::"
        );
        // Without trusted proxies the header is the client's to write: ignored.
        assert_eq!(
            of(&direct, "203.0.113.7:1", &["198.51.100.1"]),
            "203.0.113.7"
        );
        assert!(direct
            .client_address(&HeaderMap::new(), &Extensions::new())
            .is_none());

        let proxied = limiter(&["10.0.0.0/8", "127.0.0.1", "fd00::/8"]);
        // The last address that is not a trusted proxy; what the client wrote before it is ignored.
        assert_eq!(
            of(&proxied, "10.1.2.3:1", &["1.1.1.1, 198.51.100.1, 10.9.9.9"]),
            "198.51.100.1"
        );
        assert_eq!(
            of(&proxied, "127.0.0.1:1", &["1.1.1.1", "198.51.100.2"]),
            "198.51.100.2"
        );
        assert_eq!(of(&proxied, "[fd00::1]:1", &["2001:db8::5"]), "2001:db8::");
        // No header, or garbage: the last address known.
        assert_eq!(of(&proxied, "10.1.2.3:1", &[]), "10.1.2.3");
        assert_eq!(of(&proxied, "10.1.2.3:1", &["junk, 10.0.0.9"]), "10.0.0.9");
        // A peer that is no trusted proxy is the client, whatever it forwards.
        assert_eq!(of(&proxied, "11.0.0.1:1", &["198.51.100.1"]), "11.0.0.1");
    }

    fn test_limiter() -> Limiter {
        Limiter {
            policies: [None, None, None, None],
            buckets: Mutex::default(),
            shared: None,
            by_address: Keyed::new(None),
            by_subscriber: Keyed::new(None),
            subscriber_keys: Default::default(),
            auth_failures: Keyed::new(None),
            trusted_proxies: Vec::new(),
        }
    }
}
