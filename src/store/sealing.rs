//! Rows an earlier version wrote with secrets in clear, listed by the migration that started sealing them
//! (`clear_secrets`, `20261129022000_sealed_secrets.sql`) and rewritten at start-up as the store writes them
//! now: a webhook endpoint's data and what chat and push messages record of their destinations sealed, an
//! idempotent answer sealed, a notification's `to` without channel credentials.

use serde_json::Value;
use sqlx::types::Json;

use super::messages::sealed_delivery;
use super::sql::{bind_args, Arg, Sql};
use super::{on_db, Store};
use crate::domain::endpoint::EndpointType;
use crate::domain::job::MessageDelivery;
use crate::domain::subscriber::recipient_as_kept;
use crate::error::{Error, Result};

/// The advisory lock (PostgreSQL) under which one process at a time rewrites the listed rows: a row sealed
/// twice could not be read.
const SEALING_LOCK: i64 = 0x7365_616c_696e_6721;

/// Rows rewritten per read of the list.
const BATCH: i64 = 200;

impl Store {
    /// Rewrites every row `clear_secrets` lists, each in one transaction with its removal from the list, so
    /// a crash leaves every row either listed and in clear or sealed and off the list; `migrate` runs it
    /// after the SQL migrations. Answers how many rows it rewrote.
    pub async fn seal_clear_rows(&self) -> Result<u64> {
        self.exclusively(SEALING_LOCK, async {
            let mut done = 0;
            loop {
                let listed: Vec<(String, String)> = on_db!(self.w(), p => sqlx::query_as(
                    "select table_name, row_key from clear_secrets order by table_name, row_key limit $1")
                    .bind(BATCH).fetch_all(p).await)?;
                if listed.is_empty() {
                    return Ok(done);
                }
                for (table, key) in listed {
                    let rewrite = self.rewrite_of(&table, &key).await?;
                    on_db!(self.w(), p => {
                        let mut tx = p.begin().await?;
                        if let Some(q) = rewrite {
                            bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
                        }
                        sqlx::query("delete from clear_secrets where table_name = $1 and row_key = $2")
                            .bind(&table).bind(&key).execute(&mut *tx).await?;
                        tx.commit().await
                    })?;
                    done += 1;
                }
            }
        })
        .await
    }

    /// The statement that rewrites the listed row `key` of `table` as the store writes it now; `None` when
    /// there is nothing to rewrite (the row is gone, or holds no secret).
    async fn rewrite_of(&self, table: &str, key: &str) -> Result<Option<Sql>> {
        let cipher = self.cipher();
        let q = match table {
            "channel_endpoints" => {
                let row: Option<(String, String)> = on_db!(self.w(), p => sqlx::query_as(
                    "select endpoint_type, cast(endpoint as text) from channel_endpoints where id = $1")
                    .bind(key).fetch_optional(p).await)?;
                let Some((kind, text)) = row else {
                    return Ok(None);
                };
                let clear: Value = serde_json::from_str(&text).map_err(anyhow::Error::from)?;
                let Some(kind) = EndpointType::parse(&kind).filter(|k| k.is_secret()) else {
                    return Ok(None);
                };
                if !clear.is_object() {
                    return Ok(None);
                }
                let mut q = Sql::new("update channel_endpoints set endpoint = ");
                q.bind(self.seal_endpoint_data(kind, &clear));
                q
            }
            "messages" => {
                let row: Option<(Option<String>, Option<String>)> = on_db!(self.w(), p => sqlx::query_as(
                    "select direct_webhook_url, cast(device_tokens as text) from messages where id = $1")
                    .bind(key).fetch_optional(p).await)?;
                let Some((url, tokens)) = row else {
                    return Ok(None);
                };
                let clear = MessageDelivery {
                    direct_webhook_url: url,
                    device_tokens: tokens
                        .map(|t| serde_json::from_str::<Vec<String>>(&t))
                        .transpose()
                        .map_err(anyhow::Error::from)?,
                    ..Default::default()
                };
                let sealed = sealed_delivery(cipher, &clear);
                let mut q = Sql::new("update messages set direct_webhook_url = ");
                q.bind(sealed.direct_webhook_url);
                q.push(", device_tokens = ")
                    .bind(sealed.device_tokens.map(Value::from));
                q
            }
            "notifications" => {
                let row: Option<(Option<Json<Value>>,)> = on_db!(self.w(), p => sqlx::query_as(
                    "select to_value from notifications where id = $1")
                    .bind(key).fetch_optional(p).await)?;
                let Some((Some(Json(to)),)) = row else {
                    return Ok(None);
                };
                let mut q = Sql::new("update notifications set to_value = ");
                q.bind(recipient_as_kept(to));
                q
            }
            "idempotency_keys" => {
                let (env, idem) = key.split_once(':').ok_or_else(|| {
                    Error::Internal(anyhow::anyhow!(
                        "clear_secrets: bad idempotency key {key:?}"
                    ))
                })?;
                let row: Option<(Option<Vec<u8>>,)> = on_db!(self.w(), p => sqlx::query_as(
                    "select body from idempotency_keys where environment_id = $1 and idem_key = $2")
                    .bind(env).bind(idem).fetch_optional(p).await)?;
                let Some((Some(body),)) = row else {
                    return Ok(None);
                };
                let mut q = Sql::new("update idempotency_keys set body = ");
                q.bind(Arg::Bytes(cipher.seal(&body)));
                q.push(" where environment_id = ")
                    .bind(env)
                    .push(" and idem_key = ")
                    .bind(idem);
                return Ok(Some(q));
            }
            other => {
                return Err(Error::Internal(anyhow::anyhow!(
                    "clear_secrets lists a row of {other}, which holds no secret"
                )))
            }
        };
        let mut q = q;
        q.push(" where id = ").bind(key);
        Ok(Some(q))
    }
}
