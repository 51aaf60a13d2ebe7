//! `Authorization: ApiKey <key>`: resolves the key to its environment and puts the [`Tenant`] into the
//! request. Positive lookups are cached briefly; the database stays the source of truth.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::AppState;
use crate::crypto::sha256_hex;
use crate::domain::Tenant;
use crate::error::Error;

const CACHE_TTL: Duration = Duration::from_secs(30);
const CACHE_MAX: usize = 10_000;

/// Recently seen API keys (by hash) and their tenant.
#[derive(Default)]
pub struct KeyCache {
    entries: Mutex<HashMap<String, (Tenant, Instant)>>,
}

impl KeyCache {
    fn get(&self, hash: &str) -> Option<Tenant> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(hash)
            .filter(|(_, at)| at.elapsed() < CACHE_TTL)
            .map(|(t, _)| t.clone())
    }

    fn put(&self, hash: String, tenant: Tenant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CACHE_MAX {
            entries.retain(|_, (_, at)| at.elapsed() < CACHE_TTL);
            if entries.len() >= CACHE_MAX {
                entries.clear();
            }
        }
        entries.insert(hash, (tenant, Instant::now()));
    }
}

/// Middleware for every authenticated route.
pub async fn require_api_key(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    match authenticate(
        &state,
        req.headers().get(AUTHORIZATION).map(|v| v.as_bytes()),
    )
    .await
    {
        Ok(tenant) => {
            req.extensions_mut().insert(tenant);
            next.run(req).await
        }
        Err(e) => ApiError(e).into_response(),
    }
}

async fn authenticate(state: &AppState, header: Option<&[u8]>) -> Result<Tenant, Error> {
    let header =
        header.ok_or_else(|| Error::Unauthorized("Missing authorization header".into()))?;
    let header =
        std::str::from_utf8(header).map_err(|_| Error::Unauthorized("Unauthorized".into()))?;
    let (scheme, key) = header.split_once(' ').unwrap_or((header, ""));
    if scheme != "ApiKey" {
        return Err(Error::Unauthorized(format!(
            "Invalid authentication scheme: \"{scheme}\""
        )));
    }
    let key = key.trim();
    if key.is_empty() {
        return Err(Error::Unauthorized("Unauthorized".into()));
    }
    let hash = sha256_hex(key.as_bytes());
    if let Some(t) = state.keys.get(&hash) {
        return Ok(t);
    }
    let tenant = state
        .store
        .find_tenant_by_key_hash(&hash)
        .await?
        .ok_or_else(|| Error::Unauthorized("API Key not found".into()))?;
    state.keys.put(hash, tenant.clone());
    Ok(tenant)
}

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Tenant>()
            .cloned()
            .ok_or_else(|| ApiError(Error::Unauthorized("Unauthorized".into())))
    }
}
