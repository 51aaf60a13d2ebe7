//! The README's "Compatibility with Novu" section cannot lie: it is checked against the operations of the
//! pinned SDKs, the server's OpenAPI document and the SDK scripts that call them.
//!
//! - **The SDKs' operations**, read offline from the installed packages: `tests/sdk/operations.py` (novu-py:
//!   each generated method's `_build_request(method=…, path=…)`, its accessor from `Novu` down the sub-SDK
//!   attributes) and `tests/sdk-ts/operations.mjs` (@novu/api: each `funcs/*.js` with its `pathToFunc` and
//!   method, its accessor from the `Novu` client's getters and methods). An operation is its HTTP method and
//!   path template, parameter names ignored (`{subscriberId}` ≡ `{id}`); both SDKs must have the same ones.
//! - **Only the SDKs' operations are listed.** A route the server has that neither SDK calls (the Inbox's
//!   `/v1/inbox/*`, `/v1/environments/me`, health checks, unsubscribe pages, the v1 routes of older SDK
//!   releases) is not in the table and is not checked here.
//! - **Served** means the `/openapi.json` of a `novu`-profile server lists the operation. The table has one
//!   row per SDK operation, under the heading of its group (its Python accessor without the method name;
//!   the client's own methods are the group `(client)`), with status `served` or the reason it is not; the
//!   summary table's counts are those of the rows.
//! - **A served operation has an SDK contract test in each language**: a script of `tests/sdk/*.py` that
//!   binds `novu = client(` (the current novu-py, `sdkcheck.client`) and calls `novu.<python accessor>(`, and
//!   a script of `tests/sdk-ts/*.mjs` that binds `const novu = client(` (the current @novu/api,
//!   `lib.mjs`'s `client`) and calls `novu.<ts accessor>(`. Calls through another name (an alias such as
//!   `prefs = novu.subscribers.preferences`, the legacy SDKs' or the Inbox client's `novu`) do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::StatusCode;
use tidings::config::WireProfile;

use crate::support::{self, send, Backend, TestApp};

const SECTION: &str = "## Compatibility with Novu";
const ROOT_GROUP: &str = "(client)";
const SERVED: &str = "served";

/// An operation as one SDK has it.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SdkOperation {
    accessor: String,
    method: String,
    path: String,
    operation_id: String,
}

/// An operation of both SDKs: its accessor in each, its method and path (novu-py's spelling).
#[derive(Debug, Clone, PartialEq)]
struct Operation {
    py: String,
    ts: String,
    method: String,
    path: String,
}

impl Operation {
    fn group(&self) -> &str {
        self.py.rsplit_once('.').map_or(ROOT_GROUP, |(g, _)| g)
    }

    fn key(&self) -> Key {
        key(&self.method, &self.path)
    }

    fn row(&self, status: &str) -> String {
        format!(
            "| `{}` | `{}` | {} | `{}` | {status} |",
            self.py, self.ts, self.method, self.path
        )
    }
}

/// (method, path with every `{parameter}` as `{}`).
type Key = (String, String);

fn key(method: &str, path: &str) -> Key {
    let mut out = String::with_capacity(path.len());
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push_str("{}");
            }
            '}' => in_param = false,
            _ if !in_param => out.push(c),
            _ => {}
        }
    }
    (method.to_ascii_uppercase(), out)
}

/// A row of an operation table in the README.
#[derive(Debug, Clone)]
struct Row {
    line: usize,
    heading: String,
    py: String,
    ts: String,
    method: String,
    path: String,
    status: String,
}

impl Row {
    fn served(&self) -> bool {
        self.status == SERVED
    }
}

/// A row of the summary table: a group and its counts.
#[derive(Debug, Clone)]
struct Count {
    line: usize,
    group: String,
    operations: usize,
    served: usize,
    not_served: usize,
}

#[derive(Debug, Default)]
struct Table {
    rows: Vec<Row>,
    counts: Vec<Count>,
    total: Option<Count>,
}

fn cells(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split('|').map(|c| c.trim().to_owned()).collect())
}

fn unquote(cell: &str) -> String {
    cell.trim_matches('`').to_owned()
}

/// The section's tables: the summary (`| group | operations | served | not served |`, then `total`) and,
/// under each `#### <group>` heading, `| Python | TypeScript | method | path | status |`.
fn parse_readme(readme: &str) -> Result<Table, String> {
    let start = readme
        .lines()
        .position(|l| l.trim_end() == SECTION)
        .ok_or_else(|| format!("README.md has no section `{SECTION}`"))?;
    let mut table = Table::default();
    let mut heading = String::new();
    for (i, line) in readme.lines().enumerate().skip(start + 1) {
        let n = i + 1;
        if line.starts_with("## ") {
            break;
        }
        if let Some(h) = line.strip_prefix("#### ") {
            heading = unquote(h.trim());
            continue;
        }
        if line.starts_with('#') {
            heading.clear();
            continue;
        }
        let Some(c) = cells(line) else { continue };
        if c.iter().all(|c| c.chars().all(|ch| ch == '-' || ch == ':')) || !c[0].starts_with('`') {
            if c[0] == "total" {
                table.total = Some(count(n, &c)?);
            }
            continue; // a header, a separator
        }
        match c.len() {
            4 => table.counts.push(count(n, &c)?),
            5 => table.rows.push(Row {
                line: n,
                heading: heading.clone(),
                py: unquote(&c[0]),
                ts: unquote(&c[1]),
                method: c[2].clone(),
                path: unquote(&c[3]),
                status: c[4].clone(),
            }),
            k => return Err(format!("README.md line {n}: a row of {k} cells: {line}")),
        }
    }
    Ok(table)
}

fn count(line: usize, c: &[String]) -> Result<Count, String> {
    if c.len() != 4 {
        return Err(format!("README.md line {line}: a summary row has 4 cells"));
    }
    let number = |s: &str| {
        s.parse::<usize>()
            .map_err(|_| format!("README.md line {line}: `{s}` is not a count"))
    };
    Ok(Count {
        line,
        group: unquote(&c[0]),
        operations: number(&c[1])?,
        served: number(&c[2])?,
        not_served: number(&c[3])?,
    })
}

/// The operations of both SDKs, joined on their key; a difference between the SDKs is a problem.
fn join(py: &[SdkOperation], ts: &[SdkOperation], problems: &mut Vec<String>) -> Vec<Operation> {
    let by_key = |ops: &[SdkOperation]| -> BTreeMap<Key, SdkOperation> {
        ops.iter()
            .map(|o| (key(&o.method, &o.path), o.clone()))
            .collect()
    };
    let (py_ops, ts_ops) = (by_key(py), by_key(ts));
    for (sdk, ops, n) in [
        ("novu-py", &py_ops, py.len()),
        ("@novu/api", &ts_ops, ts.len()),
    ] {
        if ops.len() != n {
            problems.push(format!(
                "{sdk} has two operations with the same method and path"
            ));
        }
    }
    let mut out = Vec::new();
    for o in py {
        let Some(t) = ts_ops.get(&key(&o.method, &o.path)) else {
            problems.push(format!(
                "novu-py's `{}` ({} {}) is not in @novu/api",
                o.accessor, o.method, o.path
            ));
            continue;
        };
        if t.operation_id != o.operation_id {
            problems.push(format!(
                "{} {}: operation id `{}` in novu-py, `{}` in @novu/api",
                o.method, o.path, o.operation_id, t.operation_id
            ));
        }
        out.push(Operation {
            py: o.accessor.clone(),
            ts: t.accessor.clone(),
            method: o.method.clone(),
            path: o.path.clone(),
        });
    }
    for t in ts
        .iter()
        .filter(|t| !py_ops.contains_key(&key(&t.method, &t.path)))
    {
        problems.push(format!(
            "@novu/api's `{}` ({} {}) is not in novu-py",
            t.accessor, t.method, t.path
        ));
    }
    out
}

/// What the SDK scripts call: the accessors after `novu.` in every script that binds `novu` to the shared
/// helper's `client(` (`binding` is how that line starts).
fn calls(scripts: &[(String, String)], binding: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, text) in scripts {
        let binds = text
            .lines()
            .any(|l| compact(l.trim_start()).starts_with(&compact(binding)));
        if binds {
            chains_after_novu(text, &mut out);
        }
    }
    out
}

fn compact(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Every `novu.a.b(` of `text`, as `a.b`: `novu` not itself a member or part of a longer name; blanks (and
/// Python's `\` line continuations) allowed around the dots and before `(`.
fn chains_after_novu(text: &str, out: &mut BTreeSet<String>) {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let c: Vec<char> = text.chars().collect();
    let blank = |mut k: usize| {
        while k < c.len() && (c[k].is_whitespace() || c[k] == '\\') {
            k += 1;
        }
        k
    };
    for i in 0..c.len().saturating_sub(4) {
        if c[i..i + 4] != ['n', 'o', 'v', 'u'] || (i > 0 && (ident(c[i - 1]) || c[i - 1] == '.')) {
            continue;
        }
        let (mut k, mut parts) = (i + 4, Vec::<String>::new());
        loop {
            k = blank(k);
            if c.get(k) != Some(&'.') {
                break;
            }
            let from = blank(k + 1);
            k = from;
            while k < c.len() && ident(c[k]) {
                k += 1;
            }
            if k == from {
                break;
            }
            parts.push(c[from..k].iter().collect());
        }
        if c.get(k) == Some(&'(') && !parts.is_empty() {
            out.insert(parts.join("."));
        }
    }
}

/// Everything the README's table says that is not so; empty when it tells the truth.
fn check(
    ops: &[Operation],
    served: &BTreeSet<Key>,
    table: &Table,
    py_calls: &BTreeSet<String>,
    ts_calls: &BTreeSet<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    check_rows(ops, served, table, &mut problems);
    check_counts(table, ops.len(), &mut problems);
    for op in ops.iter().filter(|o| served.contains(&o.key())) {
        if !py_calls.contains(&op.py) {
            problems.push(format!(
                "`{}` ({} {}) is served but no tests/sdk/*.py script with `novu = client()` calls \
                 `novu.{}(`: add it to an SDK scenario",
                op.py, op.method, op.path, op.py
            ));
        }
        if !ts_calls.contains(&op.ts) {
            problems.push(format!(
                "`{}` ({} {}) is served but no tests/sdk-ts/*.mjs script with `const novu = client()` \
                 calls `novu.{}(`: add it to an SDK scenario",
                op.ts, op.method, op.path, op.ts
            ));
        }
    }
    problems
}

/// Each SDK operation has exactly one row, under its group's heading, that says what the server does.
fn check_rows(
    ops: &[Operation],
    served: &BTreeSet<Key>,
    table: &Table,
    problems: &mut Vec<String>,
) {
    let mut rows: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for row in &table.rows {
        rows.entry(row.py.as_str()).or_default().push(row);
    }
    for op in ops {
        let is_served = served.contains(&op.key());
        let Some(found) = rows.remove(op.py.as_str()) else {
            let status = if is_served {
                SERVED
            } else {
                "<why it is not served>"
            };
            problems.push(format!(
                "README.md: add the row {} under the heading #### `{}`",
                op.row(status),
                op.group()
            ));
            continue;
        };
        if found.len() > 1 {
            let lines: Vec<String> = found.iter().map(|r| r.line.to_string()).collect();
            problems.push(format!(
                "README.md lines {}: `{}` is listed {} times; keep one row",
                lines.join(", "),
                op.py,
                found.len()
            ));
        }
        let row = found[0];
        let listed = Operation {
            py: row.py.clone(),
            ts: row.ts.clone(),
            method: row.method.clone(),
            path: row.path.clone(),
        };
        if listed != *op || row.heading != op.group() {
            problems.push(format!(
                "README.md line {}: the row of `{}` should read {} under the heading #### `{}`",
                row.line,
                op.py,
                op.row(&row.status),
                op.group()
            ));
        }
        if is_served && !row.served() {
            problems.push(format!(
                "README.md line {}: `{}` is served ({} {} is in /openapi.json): change its status \
                 `{}` to `served`",
                row.line, op.py, op.method, op.path, row.status
            ));
        }
        if !is_served && row.served() {
            problems.push(format!(
                "README.md line {}: `{}` is listed as served but /openapi.json has no {} {}: replace \
                 `served` with why it is not served",
                row.line, op.py, op.method, op.path
            ));
        }
        if !is_served && row.status.is_empty() {
            problems.push(format!(
                "README.md line {}: `{}` is not served: its status must say why",
                row.line, op.py
            ));
        }
    }
    for row in rows.values().flatten() {
        problems.push(format!(
            "README.md line {}: neither SDK has `{}` ({} {}): remove the row",
            row.line, row.py, row.method, row.path
        ));
    }
}

/// The summary has one row per group with the counts of the group's rows, and a total.
fn check_counts(table: &Table, operations: usize, problems: &mut Vec<String>) {
    let mut groups: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for row in &table.rows {
        let g = groups.entry(row.heading.as_str()).or_default();
        g.0 += 1;
        g.1 += usize::from(row.served());
    }
    let mut listed = BTreeSet::new();
    for c in &table.counts {
        let (rows, served) = groups.get(c.group.as_str()).copied().unwrap_or_default();
        if !listed.insert(c.group.as_str()) {
            problems.push(format!(
                "README.md line {}: `{}` is summarised twice",
                c.line, c.group
            ));
        }
        if (c.operations, c.served, c.not_served) != (rows, served, rows - served) {
            problems.push(format!(
                "README.md line {}: the summary of `{}` should read | `{}` | {rows} | {served} | {} |",
                c.line,
                c.group,
                c.group,
                rows - served
            ));
        }
    }
    for (group, (rows, served)) in &groups {
        if !listed.contains(group) {
            problems.push(format!(
                "README.md: add | `{group}` | {rows} | {served} | {} | to the summary",
                rows - served
            ));
        }
    }
    let served: usize = groups.values().map(|g| g.1).sum();
    let rows: usize = groups.values().map(|g| g.0).sum();
    let want = format!("| total | {operations} | {served} | {} |", rows - served);
    match &table.total {
        Some(t)
            if (t.operations, t.served, t.not_served) == (operations, served, rows - served) => {}
        Some(t) => problems.push(format!(
            "README.md line {}: the total should read {want}",
            t.line
        )),
        None => problems.push(format!(
            "README.md: the summary ends with no total: add {want}"
        )),
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The operations a helper script prints, one JSON object a line.
fn read_operations(program: &Path, script: &Path) -> Vec<SdkOperation> {
    let out = Command::new(program)
        .arg(script)
        .current_dir(script.parent().unwrap())
        .output()
        .unwrap_or_else(|e| panic!("{} {}: {e}", program.display(), script.display()));
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn scripts(dir: &str, ext: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// How the README names the pinned releases (tests/sdk/requirements.txt, tests/sdk-ts/package.json).
fn pins() -> [String; 2] {
    let requirements = std::fs::read_to_string(repo().join("tests/sdk/requirements.txt")).unwrap();
    let py = requirements
        .lines()
        .find_map(|l| l.trim().strip_prefix("novu-py=="))
        .expect("novu-py is pinned in tests/sdk/requirements.txt");
    let package = std::fs::read_to_string(repo().join("tests/sdk-ts/package.json")).unwrap();
    let package: serde_json::Value = serde_json::from_str(&package).unwrap();
    let ts = package["dependencies"]["@novu/api"].as_str().unwrap();
    [format!("`novu-py` {py}"), format!("`@novu/api` {ts}")]
}

/// The operations of the server's OpenAPI document (`novu` profile).
async fn served_operations() -> BTreeSet<Key> {
    let app = TestApp::spawn_with(Backend::Sqlite, WireProfile::Novu).await;
    let (status, doc) = send(app.client.get(app.url("/openapi.json"))).await;
    assert_eq!(status, StatusCode::OK);
    let methods = ["get", "post", "put", "patch", "delete"];
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in methods.iter().filter(|m| item.get(**m).is_some()) {
            out.insert(key(m, path));
        }
    }
    out
}

/// The README's table against the pinned SDKs (named in the section), the OpenAPI document and the SDK
/// scripts. The document does not depend on the database, so this runs on SQLite only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_table_tells_the_truth() {
    let python = tokio::task::spawn_blocking(support::sdk::python)
        .await
        .unwrap();
    tokio::task::spawn_blocking(support::sdk::node_modules)
        .await
        .unwrap();
    let py = read_operations(&python, &repo().join("tests/sdk/operations.py"));
    let ts = read_operations(
        Path::new("node"),
        &repo().join("tests/sdk-ts/operations.mjs"),
    );
    let mut problems = Vec::new();
    let ops = join(&py, &ts, &mut problems);
    let served = served_operations().await;
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let table = parse_readme(&readme).unwrap_or_else(|e| panic!("{e}"));
    let py_calls = calls(&scripts("tests/sdk", "py"), "novu = client(");
    let ts_calls = calls(&scripts("tests/sdk-ts", "mjs"), "const novu = client(");
    problems.extend(check(&ops, &served, &table, &py_calls, &ts_calls));
    let section = readme[readme.find(SECTION).unwrap() + SECTION.len()..]
        .split("\n## ")
        .next()
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for pin in pins() {
        if !section.contains(&pin) {
            problems.push(format!(
                "README.md: the section should name the pinned release {pin}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) with README.md's \"Compatibility with Novu\" ({} SDK operations, {} served):\n  - {}",
        problems.len(),
        ops.len(),
        ops.iter().filter(|o| served.contains(&o.key())).count(),
        problems.join("\n  - ")
    );
}

/// The check names what is wrong with each kind of bad table, and the row to write instead.
#[test]
fn the_check_says_which_row_to_change() {
    let op = |py: &str, ts: &str, method: &str, path: &str| Operation {
        py: py.into(),
        ts: ts.into(),
        method: method.into(),
        path: path.into(),
    };
    let ops = [
        op("trigger", "trigger", "POST", "/v1/events/trigger"),
        op("topics.list", "topics.list", "GET", "/v2/topics"),
        op("topics.get", "topics.get", "GET", "/v2/topics/{topicKey}"),
        op(
            "topics.delete",
            "topics.delete",
            "DELETE",
            "/v2/topics/{topicKey}",
        ),
        op(
            "messages.delete_by_transaction_id",
            "messages.deleteByTransactionId",
            "DELETE",
            "/v1/messages/transaction/{transactionId}",
        ),
    ];
    // The server has trigger, topics.list and topics.get (under other parameter names).
    let served: BTreeSet<Key> = [
        key("post", "/v1/events/trigger"),
        key("get", "/v2/topics"),
        key("get", "/v2/topics/{key}"),
    ]
    .into();
    let readme = "## Compatibility with Novu\n\n\
        | group | operations | served | not served |\n|---|---|---|---|\n\
        | `(client)` | 1 | 1 | 0 |\n| `topics` | 3 | 1 | 1 |\n| total | 5 | 2 | 2 |\n\n\
        ### Every operation\n\n#### `(client)`\n\n\
        | Python | TypeScript | method | path | status |\n|---|---|---|---|---|\n\
        | `trigger` | `trigger` | POST | `/v1/events/trigger` | served |\n\n\
        #### `topics`\n\n\
        | Python | TypeScript | method | path | status |\n|---|---|---|---|---|\n\
        | `topics.list` | `topics.list` | GET | `/v2/topics` | served |\n\
        | `topics.get` | `topics.get` | GET | `/v2/topics/{topicKey}` | issue 38 |\n\
        | `topics.delete` | `topics.delete` | DELETE | `/v2/topics/{topicKey}` | served |\n\
        | `topics.purge` | `topics.purge` | POST | `/v2/topics/purge` | not planned |\n\
        | `topics.list` | `topics.list` | GET | `/v2/topics` | served |\n\n\
        ## Next section\n\n| `ignored` | `ignored` | GET | `/x` | served |\n";
    let table = parse_readme(readme).unwrap();
    let py_calls: BTreeSet<String> = ["trigger".to_owned(), "topics.list".to_owned()].into();
    let ts_calls: BTreeSet<String> = ["trigger".to_owned(), "topics.get".to_owned()].into();
    let problems = check(&ops, &served, &table, &py_calls, &ts_calls);
    let expected = [
        "README.md lines 21, 25: `topics.list` is listed 2 times; keep one row",
        "README.md line 22: `topics.get` is served (GET /v2/topics/{topicKey} is in /openapi.json): change its \
         status `issue 38` to `served`",
        "README.md line 23: `topics.delete` is listed as served but /openapi.json has no DELETE \
         /v2/topics/{topicKey}: replace `served` with why it is not served",
        "README.md: add the row | `messages.delete_by_transaction_id` | `messages.deleteByTransactionId` | \
         DELETE | `/v1/messages/transaction/{transactionId}` | <why it is not served> | under the heading \
         #### `messages`",
        "README.md line 24: neither SDK has `topics.purge` (POST /v2/topics/purge): remove the row",
        "README.md line 6: the summary of `topics` should read | `topics` | 5 | 3 | 2 |",
        "README.md line 7: the total should read | total | 5 | 4 | 2 |",
        "`topics.list` (GET /v2/topics) is served but no tests/sdk-ts/*.mjs script with `const novu = \
         client()` calls `novu.topics.list(`: add it to an SDK scenario",
        "`topics.get` (GET /v2/topics/{topicKey}) is served but no tests/sdk/*.py script with `novu = \
         client()` calls `novu.topics.get(`: add it to an SDK scenario",
    ];
    for want in expected {
        assert!(
            problems.iter().any(|p| p == want),
            "missing: {want}\nall:\n{}",
            problems.join("\n")
        );
    }
    assert_eq!(problems.len(), expected.len(), "{}", problems.join("\n"));

    // A row under another group's heading, and a group without a summary row.
    let moved = readme.replace("#### `topics`", "#### `messages`");
    let problems = check(
        &ops,
        &served,
        &parse_readme(&moved).unwrap(),
        &py_calls,
        &ts_calls,
    );
    assert!(
        problems.iter().any(|p| p
            == "README.md line 21: the row of `topics.list` should read | `topics.list` | `topics.list` | GET \
                | `/v2/topics` | served | under the heading #### `topics`"),
        "{}",
        problems.join("\n")
    );
    assert!(
        problems
            .iter()
            .any(|p| p == "README.md: add | `messages` | 5 | 3 | 2 | to the summary"),
        "{}",
        problems.join("\n")
    );
}

/// Calls count on `novu` bound to the shared helper's client, with the full accessor, and no other way.
#[test]
fn calls_are_read_from_scripts_that_bind_the_client() {
    let py = "from sdkcheck import client\n\ndef main():\n    novu = client()\n    \
              novu.subscribers.notifications.list(subscriber_id='a')\n    \
              x = lambda: novu.topics \\\n        .subscriptions.create(topic_key='t')\n    \
              prefs = novu.subscribers.preferences\n    prefs.update(subscriber_id='a')\n    \
              other.novu.workflows.get(workflow_id='w')\n    anovu.messages.retrieve()\n    \
              novu.trigger(trigger_event_request_dto={})\n";
    let legacy = "from legacy import novu\nnovu.subscribers.preferences.update_legacy()\n";
    let scripts = vec![
        ("a.py".to_owned(), py.to_owned()),
        ("b.py".to_owned(), legacy.to_owned()),
    ];
    let found = calls(&scripts, "novu = client(");
    let want: BTreeSet<String> = [
        "subscribers.notifications.list",
        "topics.subscriptions.create",
        "trigger",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(found, want);

    let ts = "import { client } from \"./lib.mjs\";\nconst novu = client();\n\
              await novu.subscribers.notifications.markAllAsRead({}, \"a\");\n";
    let inbox = "import { Novu } from \"@novu/js\";\nconst novu = new Novu({});\nawait novu.notifications.list();\n";
    let scripts = vec![
        ("a.mjs".to_owned(), ts.to_owned()),
        ("b.mjs".to_owned(), inbox.to_owned()),
    ];
    let found = calls(&scripts, "const novu = client(");
    assert_eq!(
        found,
        ["subscribers.notifications.markAllAsRead".to_owned()].into()
    );
}
