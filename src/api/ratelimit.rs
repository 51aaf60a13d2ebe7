//! Rate limits per environment, by Novu's categories (reference/novu-behaviour.md §0.5): a token bucket per
//! (environment, category) that refills at the category's requests per second and holds a window of 5 s of
//! them plus 10 % ("burst"); a request costs 1 token, a bulk request 100. Only API-key callers are limited: the
//! [`super::auth::Gate`] asks [`Limiter::try_admit`] (or [`Limiter::admit`]) once it knows the environment,
//! before the idempotency record, so a refusal is never stored as a key's answer.
//!
//! On SQLite the buckets live in the serving process. On PostgreSQL every instance shares one bucket per
//! (environment, category), a row of `rate_limit_buckets`: an instance takes tokens from it a chunk (1 % of
//! the burst) at a time and spends them locally, so only one request in a chunk waits for the database.
//! Precision: tokens leave the shared bucket before they are spent, so the instances together never exceed
//! the rate; a request may be refused while other instances still hold up to a chunk each (at most 1 % of
//! the burst per instance), and the headers show this instance's view.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Map;

use super::error::error_response;
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

/// Novu's rate-limit categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Triggers (`/v1/events/…`); `TIDINGS_RATE_LIMIT_EVENTS`.
    Trigger,
    /// Subscribers, workflows, channel connections and endpoints.
    Configuration,
    /// Everything else: notifications, messages, integrations, …
    Global,
}

impl Category {
    const ALL: [Category; 3] = [Self::Trigger, Self::Configuration, Self::Global];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trigger => "trigger",
            Self::Configuration => "configuration",
            Self::Global => "global",
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
        const CONFIGURATION: [&str; 5] = [
            "/v1/subscribers",
            "/v2/subscribers",
            "/v2/workflows",
            "/v1/channel-connections",
            "/v1/channel-endpoints",
        ];
        let category = if template.starts_with("/v1/events") {
            Category::Trigger
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

    fn cost(self) -> f64 {
        if self.bulk {
            BULK_COST
        } else {
            SINGLE_COST
        }
    }
}

/// One category's settings and the header values that never change.
#[derive(Debug)]
struct Policy {
    per_second: f64,
    burst: f64,
    /// PostgreSQL: tokens taken from the shared bucket at once.
    chunk: f64,
    limit: HeaderValue,
    /// `RateLimit-Policy` for a single request and for a bulk one.
    policy: [HeaderValue; 2],
}

impl Policy {
    fn new(category: Category, per_second: u32) -> Option<Self> {
        if per_second == 0 {
            return None;
        }
        let limit = u64::from(per_second) * u64::from(WINDOW_SECS);
        let burst = (limit as f64 * (1.0 + BURST_ALLOWANCE)).floor();
        let policy = |cost: &str| {
            let text = format!(
                "{limit};w={WINDOW_SECS};burst={burst};comment=\"token bucket\";category=\"{}\";\
                 cost=\"{cost}\";serviceLevel=\"{SERVICE_LEVEL}\"",
                category.as_str()
            );
            HeaderValue::from_str(&text).expect("a policy is visible ASCII")
        };
        Some(Self {
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

/// What spending from a bucket found.
enum Spend {
    Verdict(Verdict),
    /// PostgreSQL: this instance holds too few tokens; take more from the shared bucket.
    Short,
}

/// The rate limits of one server (see the module's documentation).
#[derive(Debug)]
pub struct Limiter {
    policies: [Option<Policy>; 3],
    buckets: Mutex<HashMap<String, [Bucket; 3]>>,
    /// Set on PostgreSQL: the buckets are shared there.
    shared: Option<Store>,
}

impl Limiter {
    pub fn new(limits: RateLimits, store: &Store) -> Self {
        let per_second = |c: Category| match c {
            Category::Trigger => limits.events,
            Category::Configuration => limits.configuration,
            Category::Global => limits.global,
        };
        Self {
            policies: Category::ALL.map(|c| Policy::new(c, per_second(c))),
            buckets: Mutex::new(HashMap::new()),
            shared: (store.dialect() == Dialect::Postgres).then(|| store.clone()),
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
        let taking = self.with_bucket(environment, route.category, |b| b.taking.clone());
        let _one_take = taking.lock().await;
        // Another request may have taken a chunk while this one waited.
        if let Some(v) = self.try_admit(environment, route) {
            return v;
        }
        let held = self.with_bucket(environment, route.category, |b| b.tokens);
        let want = policy.chunk.max(route.cost() - held);
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
            let missing = route.cost() - b.tokens - take.left;
            b.empty_until = (b.tokens < route.cost()).then(|| {
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
        let cost = route.cost();
        let shared = self.shared.is_some();
        let decided = self.with_bucket(environment, route.category, |b| {
            let mut visible = b.tokens;
            if shared {
                visible += b.shared_left;
            } else {
                let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
                b.tokens = (b.tokens + elapsed * policy.per_second).min(policy.burst);
                b.at = now;
                visible = b.tokens;
            }
            if b.tokens >= cost {
                b.tokens -= cost;
                let left = visible - cost;
                return Some(Ok((left, policy.seconds_for(policy.burst - left))));
            }
            // Refused: `Retry-After` is when this request's cost has refilled, `RateLimit-Reset`
            // when the whole quota is available again (the bucket full), as the IETF draft means it.
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
        let headers = |remaining: f64, reset: u64| Headers {
            limit: policy.limit.clone(),
            policy: policy.policy[usize::from(route.bulk)].clone(),
            remaining: remaining.max(0.0).floor() as u64,
            reset,
        };
        match decided {
            None => Spend::Short,
            Some(Ok((left, reset))) => {
                // A full bucket resets now.
                let reset = if left >= policy.burst { 0 } else { reset };
                Spend::Verdict(Verdict::Admitted(Some(headers(left, reset))))
            }
            Some(Err((retry_after, reset))) => {
                crate::metrics::rate_limited(route.category.as_str());
                let mut resp = error_response(
                    StatusCode::TOO_MANY_REQUESTS,
                    "API rate limit exceeded",
                    Map::new(),
                );
                headers(0.0, reset).stamp(&mut resp);
                resp.headers_mut()
                    .insert(RETRY_AFTER.clone(), HeaderValue::from(retry_after));
                Spend::Verdict(Verdict::Refused(resp))
            }
        }
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
        let p = Policy::new(Category::Trigger, 6000).unwrap();
        assert_eq!(p.burst, 33_000.0);
        assert_eq!(p.chunk, 330.0);
        assert_eq!(p.limit, "30000");
        assert_eq!(
            p.policy[1],
            "30000;w=5;burst=33000;comment=\"token bucket\";category=\"trigger\";cost=\"bulk\";\
             serviceLevel=\"enterprise\""
        );
        assert!(Policy::new(Category::Global, 0).is_none());
        assert_eq!(
            Policy::new(Category::Global, 2).unwrap().seconds_for(3.0),
            2
        );
    }
}
