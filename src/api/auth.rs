//! `Authorization: ApiKey <key>` (`Bearer <key>` on the Svix routes, [`scheme_of`]) and `idempotency-key`, in
//! one layer on every authenticated route ([`Gate`]):
//! resolves the key to its environment, puts the [`Tenant`] into the request and hands keyed writes to
//! [`super::idempotency`]. Positive lookups are cached for [`KEY_CACHE_TTL`] by the key's SHA-256; the
//! database stays the source of truth, so a key removed from it (`tidings environments rotate-key`, run by any
//! process) is refused by every instance within that bound. Refused keys are cached too, for
//! [`UNKNOWN_KEY_TTL`] (so a key created meanwhile works within that bound, and a new random key at once), and
//! a client address whose keys were refused too often gets 429 without a lookup
//! ([`super::ratelimit::Limiter::may_authenticate`]): a flood of bad keys reads nothing.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{FromRequestParts, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::routing::Route;
use sha2::{Digest, Sha256};
use tower::Service;

use super::error::ApiError;
use super::idempotency;
use super::ratelimit::{self, RouteLimit, Verdict};
use super::AppState;
use crate::domain::{EnvironmentId, Tenant};
use crate::error::Error;

/// How long an instance trusts a key it looked up: the bound on a rotated key still being accepted. Short, as
/// a hit rate over 99.9 % needs only a few requests per key per second.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(5);
/// How long an instance remembers that a key is unknown: the bound on a key created after it was tried
/// (a freshly generated key was never tried, so it works at once). Costs one lookup per bad key per second.
pub const UNKNOWN_KEY_TTL: Duration = Duration::from_secs(1);
const CACHE_MAX: usize = 10_000;

type KeyDigest = [u8; 32];

/// Recently seen API keys (by SHA-256): the tenant of those found, and those refused.
pub struct KeyCache {
    known: Recent<Tenant>,
    unknown: Recent<()>,
}

impl Default for KeyCache {
    fn default() -> Self {
        Self {
            known: Recent::new(KEY_CACHE_TTL),
            unknown: Recent::new(UNKNOWN_KEY_TTL),
        }
    }
}

impl KeyCache {
    fn get(&self, digest: &KeyDigest) -> Option<Tenant> {
        self.known.get(digest)
    }

    /// Forgets every key of `env` this process trusts: the environment was deleted, and its keys are
    /// refused from the next request on rather than after [`KEY_CACHE_TTL`].
    pub fn forget_environment(&self, env: &EnvironmentId) {
        let mut entries = self.known.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|_, (t, _)| &t.environment_id != env);
    }
}

/// Forgets the cached keys of every environment deleted by any process, as the store announces it, until
/// the store closes: a deleted environment's keys are refused everywhere at once, not after [`KEY_CACHE_TTL`].
pub async fn forget_deleted_environments(state: AppState) {
    use tokio::sync::broadcast::error::RecvError;
    let mut rx = state.store.inbox_events().subscribe();
    loop {
        match rx.recv().await {
            Ok(events) => {
                for e in events.iter().filter(|e| e.is_environment_deleted()) {
                    state.keys.forget_environment(&e.environment_id);
                }
            }
            // A deleted environment's announcement lost: its keys go within the TTL.
            Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
    }
}

/// Values by key digest, each for `ttl`, at most [`CACHE_MAX`] of them (when full, the expired ones go,
/// else all).
struct Recent<V> {
    ttl: Duration,
    entries: Mutex<HashMap<KeyDigest, (V, Instant)>>,
}

impl<V: Clone> Recent<V> {
    fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::default(),
        }
    }

    fn get(&self, digest: &KeyDigest) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(digest)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(v, _)| v.clone())
    }

    fn put(&self, digest: KeyDigest, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CACHE_MAX {
            entries.retain(|_, (_, at)| at.elapsed() < self.ttl);
            if entries.len() >= CACHE_MAX {
                entries.clear();
            }
        }
        entries.insert(digest, (value, Instant::now()));
    }
}

/// The layer of every authenticated route (see the module's documentation).
#[derive(Clone)]
pub struct GateLayer {
    state: AppState,
    limit: RouteLimit,
    scheme: &'static str,
}

impl GateLayer {
    pub fn new(state: AppState) -> Self {
        Self {
            state,
            limit: RouteLimit::of(""),
            scheme: scheme_of(""),
        }
    }

    /// The gate of the route `template`, which it rate-limits by the template's category and cost.
    pub fn for_route(&self, template: &str) -> Self {
        Self {
            state: self.state.clone(),
            limit: RouteLimit::of(template),
            scheme: scheme_of(template),
        }
    }
}

/// The `Authorization` scheme a route's key comes with: `Bearer` on the Svix routes (`/api/v1/app/…`), as
/// the official Svix clients send it; `ApiKey` on Novu's.
fn scheme_of(template: &str) -> &'static str {
    if template.starts_with("/api/v1/app/") {
        "Bearer"
    } else {
        "ApiKey"
    }
}

impl tower::Layer<Route> for GateLayer {
    type Service = Gate;

    fn layer(&self, route: Route) -> Gate {
        Gate {
            route,
            state: self.state.clone(),
            limit: self.limit,
            scheme: self.scheme,
        }
    }
}

/// [`GateLayer`]'s service. A request whose key is cached and that carries no idempotency key to honour is
/// decided here, before anything is awaited, and goes straight to its route; the others take the full path.
#[derive(Clone)]
pub struct Gate {
    route: Route,
    state: AppState,
    limit: RouteLimit,
    scheme: &'static str,
}

impl Service<Request> for Gate {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<Request>::poll_ready(&mut self.route, cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        if let Some(echo) = idempotency::passes_through(&req) {
            if let Some(tenant) =
                cached_tenant(&self.state, req.headers().get(AUTHORIZATION), self.scheme)
            {
                // `None`: the rate limit needs the database, so the full path.
                match self
                    .state
                    .limiter
                    .try_admit(tenant.environment_id.as_str(), self.limit)
                {
                    Some(Verdict::Refused(resp)) => return Box::pin(std::future::ready(Ok(resp))),
                    Some(Verdict::Admitted(limit)) => {
                        req.extensions_mut().insert(tenant);
                        let answer = self.route.call(req);
                        return Box::pin(async move {
                            let mut resp = answer.await?;
                            idempotency::echo(&mut resp, echo);
                            ratelimit::stamp(&mut resp, limit);
                            Ok(resp)
                        });
                    }
                    None => {}
                }
            }
        }
        let (state, route, limit, scheme) = (
            self.state.clone(),
            self.route.clone(),
            self.limit,
            self.scheme,
        );
        Box::pin(async move { Ok(gate(state, req, route, limit, scheme).await) })
    }
}

/// The full path: the key may need a database read, the rate limit a take from the shared bucket, and a
/// keyed write goes through the idempotency record (after the rate limit: a refusal is not the key's answer).
async fn gate(
    state: AppState,
    mut req: Request,
    route: Route,
    limit: RouteLimit,
    scheme: &'static str,
) -> Response {
    let header = req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes);
    let from = state
        .limiter
        .client_address(req.headers(), req.extensions());
    match authenticate(&state, header, from, scheme).await {
        Ok(tenant) => {
            let env = tenant.environment_id.as_str();
            let headers = match state.limiter.admit(env, limit).await {
                Verdict::Admitted(headers) => headers,
                Verdict::Refused(resp) => return resp,
            };
            req.extensions_mut().insert(tenant);
            let mut resp = idempotency::idempotency(state, req, route).await;
            ratelimit::stamp(&mut resp, headers);
            resp
        }
        Err(refused) => *refused,
    }
}

/// The key of an `Authorization` header of `scheme`, or why it is refused.
fn api_key<'h>(header: Option<&'h [u8]>, scheme: &str) -> Result<&'h str, Error> {
    let header =
        header.ok_or_else(|| Error::Unauthorized("Missing authorization header".into()))?;
    let header =
        std::str::from_utf8(header).map_err(|_| Error::Unauthorized("Unauthorized".into()))?;
    let (given, key) = header.split_once(' ').unwrap_or((header, ""));
    if given != scheme {
        return Err(Error::Unauthorized(format!(
            "Invalid authentication scheme: \"{given}\""
        )));
    }
    let key = key.trim();
    if key.is_empty() {
        return Err(Error::Unauthorized("Unauthorized".into()));
    }
    Ok(key)
}

/// The tenant of a key seen in the last [`KEY_CACHE_TTL`], without touching the database.
fn cached_tenant(state: &AppState, header: Option<&HeaderValue>, scheme: &str) -> Option<Tenant> {
    let key = api_key(header.map(HeaderValue::as_bytes), scheme).ok()?;
    state.keys.get(&Sha256::digest(key.as_bytes()).into())
}

/// The tenant of the request's key, or the answer refusing it: 401, or 429 when its client address (`from`)
/// was refused too often (see the module's documentation).
async fn authenticate(
    state: &AppState,
    header: Option<&[u8]>,
    from: Option<IpAddr>,
    scheme: &str,
) -> Result<Tenant, ratelimit::Refused> {
    let refused = |e: Error| {
        state.limiter.authentication_failed(from);
        Box::new(ApiError(e).into_response())
    };
    let digest: KeyDigest = match api_key(header, scheme) {
        Ok(key) => Sha256::digest(key.as_bytes()).into(),
        Err(e) => {
            state.limiter.may_authenticate(from)?;
            return Err(refused(e));
        }
    };
    if let Some(t) = state.keys.get(&digest) {
        return Ok(t);
    }
    state.limiter.may_authenticate(from)?;
    let unknown = || Error::Unauthorized("API Key not found".into());
    if state.keys.unknown.get(&digest).is_some() {
        return Err(refused(unknown()));
    }
    match state
        .store
        .find_tenant_by_key_hash(&hex::encode(digest))
        .await
    {
        Ok(Some(tenant)) => {
            state.keys.known.put(digest, tenant.clone());
            Ok(tenant)
        }
        Ok(None) => {
            state.keys.unknown.put(digest, ());
            Err(refused(unknown()))
        }
        Err(e) => Err(Box::new(ApiError(e).into_response())),
    }
}

/// The request's tenant, which the [`Gate`] put there. It is taken out of the request, not copied: a handler
/// extracts it once.
impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .remove::<Tenant>()
            .ok_or_else(|| ApiError(Error::Unauthorized("Unauthorized".into())))
    }
}
