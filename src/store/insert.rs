//! Multi-row inserts of the engine's tables, shared by the writes that record triggers and complete jobs:
//! statements of bounded size, joined into one script on SQLite.

use super::row::Table;
use super::sql::{Arg, Sql};
use super::Dialect;
use crate::crypto::Cipher;
use crate::domain::job::{ExecutionDetail, Job, JobStatus, Message, Notification};

/// Bound values per multi-row `insert`. SQLite (through sqlx) looks each parameter up by walking the
/// statement's parameter list, so binding costs grow with the square of their number: 4,600 parameters took
/// ~30 ms per statement, 256 take ~0.1 ms. PostgreSQL pays a round trip per statement instead: a fan-out's
/// batch went from 10,300 to 12,500 recipients/s with 2,048 rather than 256 (more did not help, and each
/// statement text is prepared and kept by every connection that runs it).
fn params_per_insert(dialect: Dialect) -> usize {
    match dialect {
        Dialect::Sqlite => 256,
        Dialect::Postgres => 2048,
    }
}

/// The statements, for one call: on SQLite joined into one script (each made [`fail_fast`]) with anonymous
/// `?` parameters (sqlx runs every statement of a query and binds the arguments in order), so a
/// transaction's inserts cost one hand-off to the connection's thread instead of one each; on PostgreSQL
/// (no multi-statement queries with parameters) as they are. Anonymous, not numbered: sqlx looks a numbered parameter's name up in SQLite's
/// list of names, a walk of the list per parameter, and a script numbered through holds thousands (trigger
/// throughput fell by a quarter with `$n` numbered through the script).
pub(super) fn batched(dialect: Dialect, statements: Vec<Sql>) -> Vec<Sql> {
    if dialect != Dialect::Sqlite {
        return statements;
    }
    let mut script = Sql::new("");
    for q in statements {
        if !script.text.is_empty() {
            script.text.push_str(";\n");
        }
        script
            .text
            .push_str(&anonymous(&fail_fast(dialect, &q.text)));
        script.args.extend(q.args);
    }
    if script.text.is_empty() {
        return Vec::new();
    }
    vec![script]
}

/// A write of the engine's transactions as SQLite should run it: `insert or fail`, `update or fail`.
///
/// Inside a transaction, SQLite keeps a statement journal for each statement that may write several rows
/// and stop on a constraint (`abort`, the default conflict resolution): a copy of every page the statement
/// changes, so that it can undo its own rows and leave the transaction's earlier statements in place. The
/// engine never goes on after a failed statement — its transactions are rolled back whole — so `fail`
/// (stop, keep the rows written so far) is the same to it and skips the copies: a tenth of the writer
/// thread's time while a fan-out and its in-app steps were being stored. PostgreSQL: unchanged.
pub(super) fn fail_fast(dialect: Dialect, text: &str) -> std::borrow::Cow<'_, str> {
    if dialect == Dialect::Sqlite {
        for verb in ["insert ", "update "] {
            if let Some(rest) = text.strip_prefix(verb) {
                return format!("{verb}or fail {rest}").into();
            }
        }
    }
    text.into()
}

/// [`fail_fast`] for a statement run on its own.
pub(super) fn fail_fast_sql(dialect: Dialect, q: Sql) -> Sql {
    Sql {
        text: fail_fast(dialect, &q.text).into_owned(),
        args: q.args,
    }
}

/// `$1`, `$2`, … → `?` (the builder numbers placeholders in the order they appear).
fn anonymous(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

/// `head values (…), (…), … tail`, in statements of at most [`params_per_insert`] bound values.
pub(super) fn insert_rows(
    dialect: Dialect,
    head: &str,
    tail: &str,
    rows: Vec<Vec<Arg>>,
) -> Vec<Sql> {
    insert_rows_of(params_per_insert(dialect), head, tail, rows)
}

/// The rows as one statement on SQLite, whose anonymous `?` parameters (see [`batched`]) bind in linear
/// time, up to SQLite's limit of 32,766 bound values; as [`insert_rows`] on PostgreSQL.
///
/// For a table that full-text indexes keep (`subscribers`): FTS5 writes its pending index to disk at the
/// start of every statement of a transaction, as a new segment that later merges have to fold in. A bulk
/// import of 500 subscribers in statements of 256 values wrote 42 segments per index instead of one;
/// those flushes and merges were a third of the writer thread's time.
pub(super) fn insert_rows_at_once(
    dialect: Dialect,
    head: &str,
    tail: &str,
    rows: Vec<Vec<Arg>>,
) -> Vec<Sql> {
    match dialect {
        Dialect::Sqlite => batched(dialect, insert_rows_of(32_766, head, tail, rows)),
        Dialect::Postgres => insert_rows(dialect, head, tail, rows),
    }
}

fn insert_rows_of(params: usize, head: &str, tail: &str, rows: Vec<Vec<Arg>>) -> Vec<Sql> {
    let mut out = Vec::new();
    let per_statement = rows.first().map_or(1, |r| (params / r.len().max(1)).max(1));
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let mut q = Sql::new(head);
        q.push(" values ");
        for (i, row) in rows.by_ref().take(per_statement).enumerate() {
            q.push(if i == 0 { "(" } else { ", (" });
            for (k, arg) in row.into_iter().enumerate() {
                if k > 0 {
                    q.push(", ");
                }
                q.bind(arg);
            }
            q.push(")");
        }
        q.push(" ").push(tail);
        out.push(q);
    }
    out
}

/// `insert into <table> (<written columns>) values …, …` of rows of a declared table (see `row::table!`),
/// followed by `tail`.
pub(super) fn insert_declared<T: Table<Keys = ()>>(
    dialect: Dialect,
    rows: &[&T],
    tail: &str,
) -> serde_json::Result<Vec<Sql>> {
    let head = format!("insert into {} ({})", T::TABLE, T::WRITTEN.join(", "));
    let args = rows
        .iter()
        .map(|r| r.args())
        .collect::<serde_json::Result<_>>()?;
    Ok(insert_rows(dialect, &head, tail, args))
}

/// Inserts jobs, queued — or, with `lease` (worker, until), already claimed by that worker (or finished by
/// it: a job whose status is final is stored without the lease).
pub(super) fn insert_jobs(
    dialect: Dialect,
    jobs: &[&Job],
    lease: Option<(&str, i64)>,
) -> serde_json::Result<Vec<Sql>> {
    insert_jobs_then(dialect, jobs, lease, "on conflict (dedupe_key) do nothing")
}

/// Activates the next steps' jobs: a job still `pending` under the same dedupe key takes the activated
/// state (status, when it runs, its digest, payload); one already settled (canceled, or activated by a
/// completion of the same step that lost its lease) is left alone; a missing one (a notification
/// triggered before the jobs of all steps were created at trigger time) is inserted. The stored step,
/// id and creation time stay those of the trigger. Returns the ids of the jobs activated.
pub(super) fn activate_jobs(dialect: Dialect, jobs: &[&Job]) -> serde_json::Result<Vec<Sql>> {
    insert_jobs_then(
        dialect,
        jobs,
        None,
        "on conflict (dedupe_key) do update set status = excluded.status, run_at = excluded.run_at, \
         digest = excluded.digest, digest_key = excluded.digest_key, payload = excluded.payload, \
         updated_at = excluded.updated_at where jobs.status = 'pending' returning id",
    )
}

fn insert_jobs_then(
    dialect: Dialect,
    jobs: &[&Job],
    lease: Option<(&str, i64)>,
    on_conflict: &str,
) -> serde_json::Result<Vec<Sql>> {
    // A job handed to a worker as it is recorded is stored claimed: its first attempt under way.
    let attempts = Job::WRITTEN.iter().position(|c| *c == "attempts");
    let rows = jobs
        .iter()
        .map(|j| {
            let mut args = j.args()?;
            if let (Some(at), Some(_)) = (attempts, lease) {
                args[at] = Arg::Int(1);
            }
            args.push(Arg::OptText(lease.map(|(worker, _)| worker.to_owned())));
            // One stored already finished (see `Completion::held`) keeps its worker, not the lease.
            let running = j.status == JobStatus::Running;
            args.push(Arg::OptInt(
                lease.filter(|_| running).map(|(_, until)| until),
            ));
            Ok(args)
        })
        .collect::<serde_json::Result<_>>()?;
    let head = format!(
        "insert into jobs ({}, locked_by, locked_until)",
        Job::WRITTEN.join(", ")
    );
    Ok(insert_rows(dialect, &head, on_conflict, rows))
}

pub(super) fn insert_details(
    dialect: Dialect,
    details: &[&ExecutionDetail],
) -> serde_json::Result<Vec<Sql>> {
    insert_declared(dialect, details, "")
}

/// The messages' rows, written once per job: a completion re-run after a lost lease adds nothing. What they
/// record of subscribers' channel credentials is sealed (see [`super::messages::sealed_message`]).
pub(super) fn insert_messages(
    dialect: Dialect,
    cipher: &Cipher,
    messages: &[&Message],
) -> serde_json::Result<Vec<Sql>> {
    let sealed: Vec<Option<Message>> = messages
        .iter()
        .map(|m| super::messages::sealed_message(cipher, m))
        .collect();
    let rows: Vec<&Message> = messages
        .iter()
        .zip(&sealed)
        .map(|(m, s)| s.as_ref().unwrap_or(m))
        .collect();
    insert_declared(dialect, &rows, "on conflict (job_id) do nothing")
}

pub(super) fn insert_notifications(
    dialect: Dialect,
    notifications: &[&Notification],
) -> serde_json::Result<Vec<Sql>> {
    insert_declared(dialect, notifications, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite runs the engine's writes without statement journals; PostgreSQL's text is left as it is.
    #[test]
    fn writes_fail_fast_on_sqlite_only() {
        let insert = "insert into jobs (id) values ($1) on conflict (dedupe_key) do nothing";
        assert_eq!(
            fail_fast(Dialect::Sqlite, insert),
            "insert or fail into jobs (id) values ($1) on conflict (dedupe_key) do nothing"
        );
        assert_eq!(
            fail_fast(Dialect::Sqlite, "update jobs set status = $1"),
            "update or fail jobs set status = $1"
        );
        assert_eq!(fail_fast(Dialect::Postgres, insert), insert);
        assert_eq!(
            fail_fast(Dialect::Sqlite, "select 1 from jobs"),
            "select 1 from jobs"
        );
        let script = batched(
            Dialect::Sqlite,
            vec![
                Sql::new("insert into a (x) values ($1)"),
                Sql::new("update b set y = $1"),
            ],
        );
        assert_eq!(
            script[0].text,
            "insert or fail into a (x) values (?);\nupdate or fail b set y = ?"
        );
        assert!(batched(Dialect::Sqlite, Vec::new()).is_empty());
    }

    /// A bulk write indexed by FTS5 is one statement on SQLite (anonymous parameters, linear to bind), and
    /// PostgreSQL's usual statements.
    #[test]
    fn writes_at_once_are_one_statement_on_sqlite() {
        let rows = |n: i64| (0..n).map(|i| vec![Arg::Int(i); 22]).collect::<Vec<_>>();
        let head = "insert into t (a)";
        let sqlite = insert_rows_at_once(Dialect::Sqlite, head, "returning a", rows(500));
        assert_eq!(sqlite.len(), 1);
        assert_eq!(sqlite[0].args.len(), 22 * 500);
        assert!(sqlite[0]
            .text
            .starts_with("insert or fail into t (a) values (?, ?"));
        assert!(!sqlite[0].text.contains('$'));
        assert!(
            sqlite[0].text.ends_with(" returning a"),
            "{}",
            &sqlite[0].text
        );
        let postgres = insert_rows_at_once(Dialect::Postgres, head, "", rows(500));
        assert_eq!(postgres.len(), 6);
    }

    /// Few parameters per statement on SQLite (binding costs grow with their square), few statements on
    /// PostgreSQL (each a round trip); every row is written once, in order.
    #[test]
    fn multi_row_inserts_are_sized_per_database() {
        let rows = |n: i64| (0..n).map(|i| vec![Arg::Int(i); 4]).collect::<Vec<_>>();
        let sqlite = insert_rows(
            Dialect::Sqlite,
            "insert into t (a, b, c, d)",
            "",
            rows(1000),
        );
        let postgres = insert_rows(
            Dialect::Postgres,
            "insert into t (a, b, c, d)",
            "",
            rows(1000),
        );
        assert_eq!(sqlite.len(), 16);
        assert_eq!(postgres.len(), 2);
        for (statements, per_statement) in [(&sqlite, 64), (&postgres, 512)] {
            assert_eq!(statements[0].args.len(), 4 * per_statement);
            let firsts: Vec<&Arg> = statements
                .iter()
                .flat_map(|q| q.args.iter().step_by(4))
                .collect();
            assert_eq!(firsts.len(), 1000);
            assert!(firsts
                .iter()
                .enumerate()
                .all(|(i, a)| **a == Arg::Int(i as i64)));
        }
        assert!(
            postgres[1]
                .text
                .trim_end()
                .ends_with("($1949, $1950, $1951, $1952)"),
            "{}",
            postgres[1].text
        );
    }
}
