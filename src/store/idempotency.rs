//! Idempotency records: one row per (environment, key) holding the request hash and, once done, the
//! stored response. Kept in the database so replays survive restarts and work across processes. The
//! response's body is sealed by the store's cipher as a whole: answers carry secrets (a channel
//! connection's access token, a subscriber's channel credentials) that are encrypted everywhere else.

use super::row::sql_row;
use super::{on_db, Store};
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::{Error, Result};

/// A request still marked in progress after this long is treated as abandoned (its process died).
const STALE_IN_PROGRESS_MS: i64 = 5 * 60 * 1000;

#[derive(Debug, Clone, PartialEq)]
pub enum IdempotencyBegin {
    /// The caller owns the key now and must `complete` or `abandon` it.
    Started,
    /// Another request with this key is running.
    InProgress,
    /// The key was used for a different request.
    Mismatch,
    /// The stored response of the completed request.
    Done {
        status: u16,
        content_type: Option<String>,
        body: Vec<u8>,
    },
}

sql_row! {
    struct IdemRow {
        request_hash: String,
        state: String,
        status: Option<i32>,
        content_type: Option<String>,
        body: Option<Vec<u8>>,
    }
}

impl Store {
    pub async fn begin_idempotent(
        &self,
        env: &EnvironmentId,
        key: &str,
        request_hash: &str,
        ttl_ms: i64,
    ) -> Result<IdempotencyBegin> {
        let now = Timestamp::now().0;
        on_db!(self.w(), p => sqlx::query(
            "delete from idempotency_keys where environment_id = $1 and idem_key = $2
               and (expires_at < $3 or (state = 'in_progress' and created_at < $4))")
            .bind(env.as_str()).bind(key).bind(now).bind(now - STALE_IN_PROGRESS_MS).execute(p).await.map(|r| r.rows_affected()))?;
        let inserted = on_db!(self.w(), p => sqlx::query(
            "insert into idempotency_keys (environment_id, idem_key, request_hash, state, created_at, expires_at)
             values ($1, $2, $3, 'in_progress', $4, $5) on conflict (environment_id, idem_key) do nothing")
            .bind(env.as_str()).bind(key).bind(request_hash).bind(now).bind(now + ttl_ms).execute(p).await.map(|r| r.rows_affected()))?;
        if inserted == 1 {
            return Ok(IdempotencyBegin::Started);
        }
        let row: Option<IdemRow> = on_db!(self.w(), p => sqlx::query_as::<_, IdemRow>(
            "select request_hash, state, status, content_type, body from idempotency_keys
             where environment_id = $1 and idem_key = $2")
            .bind(env.as_str()).bind(key).fetch_optional(p).await)?;
        Ok(match row {
            // Deleted between our statements (expired or abandoned): the client may simply retry.
            None => IdempotencyBegin::InProgress,
            Some(r) if r.request_hash != request_hash => IdempotencyBegin::Mismatch,
            Some(r) if r.state != "done" => IdempotencyBegin::InProgress,
            Some(r) => IdempotencyBegin::Done {
                status: r.status.unwrap_or(200) as u16,
                content_type: r.content_type,
                body: match r.body {
                    Some(sealed) => self.cipher().open(&sealed).map_err(|e| {
                        Error::Internal(anyhow::anyhow!("a stored idempotent answer: {e}"))
                    })?,
                    None => Vec::new(),
                },
            },
        })
    }

    pub async fn complete_idempotent(
        &self,
        env: &EnvironmentId,
        key: &str,
        status: u16,
        content_type: Option<&str>,
        body: &[u8],
        ttl_ms: i64,
    ) -> Result<()> {
        let now = Timestamp::now().0;
        let sealed = self.cipher().seal(body);
        on_db!(self.w(), p => sqlx::query(
            "update idempotency_keys set state = 'done', status = $1, content_type = $2, body = $3, expires_at = $4
             where environment_id = $5 and idem_key = $6")
            .bind(status as i32).bind(content_type).bind(&sealed).bind(now + ttl_ms)
            .bind(env.as_str()).bind(key).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Forgets a key whose request failed with a server error, so the client can retry it.
    pub async fn abandon_idempotent(&self, env: &EnvironmentId, key: &str) -> Result<()> {
        on_db!(self.w(), p => sqlx::query("delete from idempotency_keys where environment_id = $1 and idem_key = $2")
            .bind(env.as_str()).bind(key).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Deletes expired records; returns how many.
    pub async fn purge_expired_idempotency(&self) -> Result<u64> {
        let n = on_db!(self.w(), p => sqlx::query("delete from idempotency_keys where expires_at < $1")
            .bind(Timestamp::now().0).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n)
    }
}
