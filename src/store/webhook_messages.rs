//! The messages of outbound webhooks (issue 39), written by the outbox (`store::outbox`) and sent by the
//! engine (`engine::webhooks`): claimed under a lease, then finished with their attempts in one transaction
//! per batch.

use super::insert::{batched, insert_rows};
use super::outbox::{event_rows, insert_event_rows, record_events, Event, Handover, Receivers};
use super::page::{env_scope, Keyed, Listing, Page, PageRequest};
use super::row::sql_row;
use super::sql::{bind_args, Arg, Sql};
use super::{on_db, Cost, Dialect, Store};
use crate::domain::webhook::{endpoint_disabled_data, WebhookEndpoint};
use crate::domain::{EnvironmentId, Timestamp};
use crate::error::Result;

sql_row! {
    /// A message due to one endpoint, as the claim leases it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Claimed {
        id: String,
        endpoint_id: String,
        environment_id: String,
        event_type: String,
        attempts: i64,
    }
}

sql_row! {
    /// An event's signed body.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct EventBody {
        id: String,
        body: String,
    }
}

/// A message due to one endpoint, as the sender holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// `msg_…`: the `webhook-id` header.
    pub id: String,
    pub endpoint_id: String,
    pub environment_id: String,
    pub event_type: String,
    /// The signed body, the same on every attempt.
    pub body: String,
    /// Attempts made before this one.
    pub attempts: i64,
}

/// How an attempt ended.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub msg_id: String,
    pub endpoint_id: String,
    pub environment_id: String,
    pub url: String,
    /// The start of the receiver's answer (or why there was none).
    pub response: String,
    /// 0 when there was no answer (refused, timed out).
    pub status_code: i64,
    pub duration_ms: i64,
    pub success: bool,
    /// Manual (`send-example`, `recover`) rather than scheduled.
    pub manual: bool,
    /// When the message is tried again (Unix ms); `None`: never (it succeeded, or it failed for good).
    pub retry_at: Option<i64>,
    pub at: Timestamp,
}

/// How long an endpoint may fail without a success before it is disabled: 5 days, as Svix.
pub const DISABLE_AFTER_MS: i64 = 5 * 24 * 60 * 60 * 1000;

/// `(id, endpoint_id) in (select * from (values (…), …) as k)`: the rows of `keys`. A subquery, not a
/// list of row values: SQLite scans the whole table for a list, and searches the primary key for this.
fn push_keys<'a>(q: &mut Sql, keys: impl Iterator<Item = (&'a str, &'a str)>) {
    q.push("(id, endpoint_id) in (select * from (values ");
    for (i, (id, endpoint)) in keys.enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        q.bind(id).push(", ").bind(endpoint).push(")");
    }
    q.push(") as k)");
}

impl Store {
    /// Claims up to `limit` messages due now for `lease_ms`: first those whose lease ran out (their sender
    /// died), then due pending ones in order; none of the endpoints in `busy` (sending as much as they may).
    pub async fn claim_webhook_messages(
        &self,
        limit: i64,
        lease_ms: i64,
        busy: &[&str],
    ) -> Result<Vec<Outgoing>> {
        let now = Timestamp::now().0;
        let mut out = self
            .claim_webhooks_where(("sending", "locked_until < "), now, limit, lease_ms, busy)
            .await?;
        let left = limit - out.len() as i64;
        if left > 0 {
            out.extend(
                self.claim_webhooks_where(("pending", "next_at <= "), now, left, lease_ms, busy)
                    .await?,
            );
        }
        Ok(out)
    }

    /// Claims the messages in `status` whose `column` compares (`<`, `<=`) with now, in that column's order.
    async fn claim_webhooks_where(
        &self,
        (status, due): (&str, &str),
        now: i64,
        limit: i64,
        lease_ms: i64,
        busy: &[&str],
    ) -> Result<Vec<Outgoing>> {
        let order = due.split_whitespace().next().unwrap_or("next_at");
        let condition = format!("status = '{status}' and {due}");
        let mut q = Sql::new("update webhook_messages set status = 'sending', locked_until = ");
        q.bind(now + lease_ms).push(", updated_at = ").bind(now);
        q.push(" where (id, endpoint_id) in (select id, endpoint_id from webhook_messages where ")
            .push(&condition)
            .bind(now);
        if !busy.is_empty() {
            q.push(" and endpoint_id not in (");
            for (i, e) in busy.iter().enumerate() {
                if i > 0 {
                    q.push(", ");
                }
                q.bind(*e);
            }
            q.push(")");
        }
        q.push(&format!(" order by {order} limit ")).bind(limit);
        if self.dialect() == Dialect::Postgres {
            q.push(" for update skip locked");
        }
        q.push(") returning id, endpoint_id, environment_id, event_type, attempts");
        let claimed: Vec<Claimed> = on_db!(self.w(), p => bind_args!(sqlx::query_as::<_, Claimed>(&q.text), q.args).fetch_all(p).await)?;
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        // The bodies, through the reader: they were committed with their events and never change.
        let mut ids: Vec<&str> = claimed.iter().map(|c| c.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut b = Sql::new("select id, body from webhook_events where true");
        b.push_in("id", &ids);
        let bodies: std::collections::HashMap<String, String> = self
            .rows::<EventBody>(Cost::Point, b)
            .await?
            .into_iter()
            .map(|e| (e.id, e.body))
            .collect();
        Ok(claimed
            .into_iter()
            .map(|c| Outgoing {
                body: bodies.get(&c.id).cloned().unwrap_or_default(),
                id: c.id,
                endpoint_id: c.endpoint_id,
                environment_id: c.environment_id,
                event_type: c.event_type,
                attempts: c.attempts,
            })
            .collect())
    }

    /// Gives claimed messages back, due as they were, their claim not counted.
    pub async fn release_webhook_messages(&self, held: &[&Outgoing]) -> Result<()> {
        if held.is_empty() {
            return Ok(());
        }
        let mut q =
            Sql::new("update webhook_messages set status = 'pending', locked_until = null where ");
        push_keys(
            &mut q,
            held.iter().map(|m| (m.id.as_str(), m.endpoint_id.as_str())),
        );
        q.push(" and status = 'sending'");
        on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// The endpoints `ids`, secrets opened.
    pub async fn webhook_endpoints_by_id(&self, ids: &[&str]) -> Result<Vec<WebhookEndpoint>> {
        use super::row::Table;
        let mut q = Sql::new("select ");
        q.push(WebhookEndpoint::COLUMNS)
            .push(" from webhook_endpoints where true");
        q.push_in("id", ids);
        self.rows(Cost::Point, q).await
    }

    /// Records how `attempts` ended, in one transaction: each message succeeds, is due again, or fails for
    /// good; the attempts are kept; an endpoint's failure clock starts at its first failure after a success,
    /// stops at a success, and an endpoint failing for [`DISABLE_AFTER_MS`] is disabled, with an
    /// `endpoint.disabled` event for the environment's endpoints that take it. Answers the endpoints
    /// disabled.
    pub async fn finish_webhook_attempts(&self, attempts: &[Attempt]) -> Result<Vec<Disabled>> {
        if attempts.is_empty() {
            return Ok(Vec::new());
        }
        let dialect = self.dialect();
        let sender = self.webhook_sender();
        let now = Timestamp::now().0;
        let writes = batched(dialect, finish_statements(dialect, attempts, now));
        let failing: Vec<&str> = attempts
            .iter()
            .filter(|a| !a.success)
            .map(|a| a.endpoint_id.as_str())
            .collect();
        let mut disable = Sql::new("update webhook_endpoints set disabled = true, updated_at = ");
        disable
            .bind(now)
            .push(" where disabled = false and failing_since < ")
            .bind(now - DISABLE_AFTER_MS);
        disable.push_in("id", &failing);
        disable.push(" returning ").push(Disabled::COLUMNS);
        let (disabled, webhooks) = on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            for q in writes {
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            let disabled: Vec<Disabled> = if failing.is_empty() {
                Vec::new()
            } else {
                bind_args!(sqlx::query_as(&disable.text), disable.args).fetch_all(&mut *tx).await?
            };
            let webhooks = if disabled.is_empty() {
                Handover::new(None)
            } else {
                let mut envs: Vec<&str> = disabled.iter().map(|d| d.environment_id.as_str()).collect();
                envs.sort_unstable();
                envs.dedup();
                record_events!(tx, dialect, sender.as_ref(), &envs, Timestamp(now), |r: &Receivers| {
                    disabled.iter().map(|d| d.event(r)).collect()
                })
            };
            tx.commit().await.map(|()| (disabled, webhooks))
        })?;
        webhooks.announce(self);
        Ok(disabled)
    }
}

sql_row! {
    /// An endpoint the sender disabled (5 days of failures).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Disabled {
        pub id: String,
        pub uid: Option<String>,
        pub environment_id: String,
        pub organization_id: String,
        /// When its failures began (set on every endpoint the disabling picks).
        pub failing_since: i64,
    }
}

impl Disabled {
    /// Its `endpoint.disabled` event, addressed with the environment's identifier from `receivers`.
    fn event(&self, receivers: &Receivers) -> Event {
        let app_id = receivers.identifier(&self.environment_id).unwrap_or("");
        Event {
            environment_id: self.environment_id.as_str().into(),
            organization_id: self.organization_id.as_str().into(),
            kind: "endpoint.disabled",
            data: endpoint_disabled_data(
                app_id,
                &self.id,
                self.uid.as_deref(),
                Timestamp(self.failing_since),
            ),
        }
    }
}

/// The writes that finish `attempts` at `now`.
fn finish_statements(dialect: Dialect, attempts: &[Attempt], now: i64) -> Vec<Sql> {
    let mut writes = Vec::new();
    let keys = |pick: &dyn Fn(&Attempt) -> bool| -> Vec<(&str, &str)> {
        attempts
            .iter()
            .filter(|a| pick(a))
            .map(|a| (a.msg_id.as_str(), a.endpoint_id.as_str()))
            .collect()
    };
    for (status, rows) in [
        ("success", keys(&|a| a.success)),
        ("failed", keys(&|a| !a.success && a.retry_at.is_none())),
    ] {
        if !rows.is_empty() {
            let mut q = Sql::new("update webhook_messages set status = ");
            q.bind(status)
                .push(", attempts = attempts + 1, locked_until = null, updated_at = ")
                .bind(now);
            q.push(" where ");
            push_keys(&mut q, rows.into_iter());
            writes.push(q);
        }
    }
    for a in attempts.iter().filter(|a| !a.success) {
        if let Some(at) = a.retry_at {
            let mut q = Sql::new("update webhook_messages set status = 'pending', attempts = attempts + 1, locked_until = null, next_at = ");
            q.bind(at).push(", updated_at = ").bind(now).push(" where ");
            push_keys(
                &mut q,
                std::iter::once((a.msg_id.as_str(), a.endpoint_id.as_str())),
            );
            writes.push(q);
        }
    }
    let mut ok: Vec<&str> = attempts
        .iter()
        .filter(|a| a.success)
        .map(|a| a.endpoint_id.as_str())
        .collect();
    let mut failing: Vec<&str> = attempts
        .iter()
        .filter(|a| !a.success)
        .map(|a| a.endpoint_id.as_str())
        .collect();
    ok.sort_unstable();
    ok.dedup();
    failing.sort_unstable();
    failing.dedup();
    if !ok.is_empty() {
        let mut q = Sql::new(
            "update webhook_endpoints set failing_since = null where failing_since is not null",
        );
        q.push_in("id", &ok);
        writes.push(q);
    }
    if !failing.is_empty() {
        let mut q =
            Sql::new("update webhook_endpoints set failing_since = coalesce(failing_since, ");
        q.bind(now).push(") where true");
        q.push_in("id", &failing);
        writes.push(q);
    }
    let rows = attempts
        .iter()
        .map(|a| {
            vec![
                Arg::Text(format!("atmpt_{}", crate::domain::new_object_id())),
                Arg::Text(a.msg_id.clone()),
                Arg::Text(a.endpoint_id.clone()),
                Arg::Text(a.environment_id.clone()),
                Arg::Text(a.url.clone()),
                Arg::Text(a.response.clone()),
                Arg::Int(a.status_code),
                Arg::Int(a.duration_ms),
                Arg::Text(if a.success { "success" } else { "failed" }.into()),
                Arg::Text(if a.manual { "manual" } else { "scheduled" }.into()),
                Arg::Int(a.at.0),
            ]
        })
        .collect();
    writes.extend(insert_rows(
        dialect,
        "insert into webhook_attempts (id, msg_id, endpoint_id, environment_id, url, response, \
         response_status_code, response_duration_ms, status, trigger_type, created_at)",
        "",
        rows,
    ));
    writes
}

sql_row! {
    /// An attempt as the attempt lists show it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AttemptRow {
        /// `atmpt_…`.
        pub id: String,
        pub msg_id: String,
        pub endpoint_id: String,
        pub url: String,
        pub response: String,
        pub response_status_code: i64,
        pub response_duration_ms: i64,
        /// `success` or `failed`.
        pub status: String,
        /// `scheduled` or `manual`.
        pub trigger_type: String,
        pub created_at: i64,
    }
}

sql_row! {
    /// A message to one endpoint as the message lists show it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct MessageRow {
        /// `msg_…`.
        pub id: String,
        pub endpoint_id: String,
        pub event_type: String,
        pub body: String,
        /// `pending`, `sending`, `success` or `failed`.
        pub status: String,
        pub next_at: i64,
        pub created_at: i64,
    }
}

impl Keyed for AttemptRow {
    fn key(&self) -> &str {
        &self.id
    }
}

impl Keyed for MessageRow {
    fn key(&self) -> &str {
        &self.id
    }
}

/// Whose attempts a list shows.
#[derive(Debug, Clone, Copy)]
pub enum AttemptsOf<'a> {
    Endpoint(&'a str),
    /// A message's, to one endpoint or to all.
    Message(&'a str, Option<&'a str>),
}

const ATTEMPT_COLUMNS: &str = "id, msg_id, endpoint_id, url, response, response_status_code, \
     response_duration_ms, status, trigger_type, created_at";
const MESSAGE_COLUMNS: &str = "id, endpoint_id, event_type, \
     (select body from webhook_events e where e.id = webhook_messages.id) as body, status, next_at, created_at";

impl Store {
    /// A page of attempts of `env`, newest first, those of `status` only if given.
    pub async fn list_webhook_attempts(
        &self,
        env: &EnvironmentId,
        of: AttemptsOf<'_>,
        status: Option<&str>,
        page: &PageRequest,
    ) -> Result<Page<AttemptRow>> {
        let mut filter = env_scope(env);
        match of {
            AttemptsOf::Endpoint(e) => {
                filter.push(" and endpoint_id = ").bind(e);
            }
            AttemptsOf::Message(m, e) => {
                filter.push(" and msg_id = ").bind(m);
                if let Some(e) = e {
                    filter.push(" and endpoint_id = ").bind(e);
                }
            }
        }
        if let Some(s) = status {
            filter.push(" and status = ").bind(s);
        }
        let listing = Listing {
            columns: ATTEMPT_COLUMNS,
            from: "webhook_attempts",
            filter,
            cursor_scope: env_scope(env),
        };
        self.cursor_page::<AttemptRow>(listing, page).await
    }

    /// A page of the messages to endpoint `endpoint` of `env`, newest first, those of `status` only if given.
    pub async fn list_webhook_messages(
        &self,
        env: &EnvironmentId,
        endpoint: &str,
        status: Option<&str>,
        page: &PageRequest,
    ) -> Result<Page<MessageRow>> {
        let mut filter = env_scope(env);
        filter.push(" and endpoint_id = ").bind(endpoint);
        if let Some(s) = status {
            filter.push(" and status = ").bind(s);
        }
        let mut cursor_scope = env_scope(env);
        cursor_scope.push(" and endpoint_id = ").bind(endpoint);
        let listing = Listing {
            columns: MESSAGE_COLUMNS,
            from: "webhook_messages",
            filter,
            cursor_scope,
        };
        self.cursor_page::<MessageRow>(listing, page).await
    }

    /// The endpoints message `msg` of `env` went to, by endpoint id (at most one per endpoint of the
    /// environment).
    pub async fn webhook_message_destinations(
        &self,
        env: &EnvironmentId,
        msg: &str,
    ) -> Result<Vec<MessageRow>> {
        let mut q = Sql::new("select ");
        q.push(MESSAGE_COLUMNS)
            .push(" from webhook_messages where ");
        q.append(&env_scope(env));
        q.push(" and id = ").bind(msg).push(" order by endpoint_id");
        self.rows(Cost::Scan, q).await
    }

    /// Sends again the messages to endpoint `endpoint` of `env` that failed for good and were recorded
    /// from `since` (and before `until`): due now, with a whole retry schedule ahead. Answers how many.
    pub async fn recover_webhook_messages(
        &self,
        env: &EnvironmentId,
        endpoint: &str,
        since: i64,
        until: Option<i64>,
    ) -> Result<u64> {
        let now = Timestamp::now().0;
        let mut q =
            Sql::new("update webhook_messages set status = 'pending', attempts = 0, next_at = ");
        q.bind(now)
            .push(", updated_at = ")
            .bind(now)
            .push(" where ");
        q.append(&env_scope(env));
        q.push(" and endpoint_id = ").bind(endpoint);
        q.push(" and status = 'failed' and created_at >= ")
            .bind(since);
        if let Some(until) = until {
            q.push(" and created_at < ").bind(until);
        }
        let n = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?;
        super::outbox::announce(self, n);
        Ok(n)
    }

    /// Records a message of `event` for endpoint `e` alone (an example), due now; answers its id, the
    /// event's and when it was recorded.
    pub async fn insert_webhook_example(
        &self,
        e: &WebhookEndpoint,
        identifier: &str,
        event: &Event,
    ) -> Result<(String, String, Timestamp)> {
        let now = Timestamp::now();
        let oid = crate::domain::new_object_id();
        let body = crate::domain::webhook::envelope(&oid, event.kind, &event.data, now, identifier);
        let id = format!("msg_{oid}");
        let (event_row, messages) = event_rows(
            &id,
            event,
            body,
            std::iter::once((e.id.as_str(), None)),
            now,
        );
        let statements = batched(
            self.dialect(),
            insert_event_rows(self.dialect(), vec![event_row], messages),
        );
        on_db!(self.w(), p => {
            let mut tx = p.begin().await?;
            for q in statements {
                bind_args!(sqlx::query(&q.text), q.args).execute(&mut *tx).await?;
            }
            tx.commit().await
        })?;
        super::outbox::announce(self, 1);
        Ok((id, format!("evt_{oid}"), now))
    }
}

/// How long finished webhook messages and their attempts are kept: 90 days, as Svix keeps them.
pub const RETENTION_MS: i64 = 90 * 24 * 60 * 60 * 1000;
/// Rows deleted per statement of the retention sweep.
const PURGE_BATCH: i64 = 5_000;

impl Store {
    /// Deletes the finished webhook messages and the attempts recorded before `before` (Unix ms), in bounded
    /// statements; answers how many rows. Their ids start with the ObjectId's creation time, so the rows to
    /// delete are a range of each primary key.
    pub async fn purge_webhook_history(&self, before: Timestamp) -> Result<u64> {
        let secs = u32::try_from(before.0.max(0) / 1000).unwrap_or(u32::MAX);
        let mut total = 0;
        for (table, prefix, key, finished) in [
            (
                "webhook_messages",
                "msg_",
                "(id, endpoint_id)",
                " and status in ('success', 'failed')",
            ),
            ("webhook_attempts", "atmpt_", "id", ""),
            (
                "webhook_events",
                "msg_",
                "id",
                " and not exists (select 1 from webhook_messages m where m.id = webhook_events.id \
                 and m.status in ('pending', 'sending'))",
            ),
        ] {
            loop {
                let mut q = Sql::new(&format!(
                    "delete from {table} where {key} in (select {} from {table} where id >= ",
                    key.trim_matches(|c| c == '(' || c == ')')
                ));
                q.bind(prefix)
                    .push(" and id < ")
                    .bind(format!("{prefix}{secs:08x}"));
                q.push(finished).push(" limit ").bind(PURGE_BATCH);
                q.push(")");
                let n = on_db!(self.w(), p => bind_args!(sqlx::query(&q.text), q.args).execute(p).await.map(|r| r.rows_affected()))?;
                total += n;
                if n < PURGE_BATCH as u64 {
                    break;
                }
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::plans::{migrated, plan};

    /// Finishing, giving back and claiming a batch search the primary key, never scan the table; the claim's
    /// inner select reads its partial index.
    #[test]
    fn batches_search_the_primary_key() {
        let conn = migrated();
        let mut q = Sql::new("update webhook_messages set status = 'success' where ");
        push_keys(&mut q, [("msg_a", "ep_a"), ("msg_b", "ep_b")].into_iter());
        let p = plan(&conn, &q.text);
        assert!(
            p.contains("sqlite_autoindex_webhook_messages_1 (id=? AND endpoint_id=?)"),
            "{p}"
        );
        assert!(!p.contains("SCAN webhook_messages"), "{p}");
        let claim = "update webhook_messages set status = 'sending' where (id, endpoint_id) in \
                     (select id, endpoint_id from webhook_messages where status = 'pending' and next_at <= $1 \
                     and endpoint_id not in ($2) order by next_at limit $3) returning id";
        let p = plan(&conn, claim);
        assert!(p.contains("INDEX webhook_messages_due (next_at<?)"), "{p}");
        assert!(!p.contains("SCAN webhook_messages"), "{p}");
    }
}
