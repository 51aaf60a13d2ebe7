//! Secrets at rest and in records (issue #21, item 9): subscribers' channel credentials sealed in the
//! database, every encoding of a credential redacted from stored provider answers, the SQLite folder and
//! files private to their owner, and bootstrap API keys long enough not to be guessed.

use std::time::Duration;

use base64::Engine;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tidings::service::environments;

use crate::db_test;
use crate::support::receiver::{Receiver, Reply};
use crate::support::{deliver_one, raw_sql, TestApp};

/// The stored `channels` column of subscriber `id`, as text.
async fn stored_channels(app: &TestApp, id: &str) -> String {
    let sql =
        format!("select cast(channels as text) from subscribers where subscriber_id = '{id}'");
    raw_sql(app, &sql).await.remove(0)
}

const TOKEN: &str = "device-token-7f3a9c-secret";
const HOOK_SECRET: &str = "T0001/B0002/hook-secret-9d8e7f";

/// Pat with a push token (push-webhook) and a chat webhook (Slack), both integrations at `r`.
async fn pat_with_credentials(app: &TestApp, r: &Receiver) {
    app.integration(
        json!({"providerId": "push-webhook", "channel": "push", "active": true, "identifier": "pw",
        "credentials": {"webhookUrl": format!("{}/push", r.url), "secretKey": "whsec-0123456789"}}),
    )
    .await;
    app.integration(
        json!({"providerId": "slack", "channel": "chat", "active": true,
        "identifier": "slack", "credentials": {"baseUrl": r.url}}),
    )
    .await;
    app.subscriber("pat", json!({})).await;
    for body in [
        json!({"providerId": "push-webhook", "integrationIdentifier": "pw",
            "credentials": {"deviceTokens": [TOKEN]}}),
        json!({"providerId": "slack", "integrationIdentifier": "slack",
            "credentials": {"webhookUrl": format!("{}/hooks/{HOOK_SECRET}", r.url)}}),
    ] {
        let (status, out) = app.put("/v1/subscribers/pat/credentials", body).await;
        assert!(status.is_success(), "{out}");
    }
}

/// What the API shows of pat's channels: `(providerId, credentials)`, in order.
async fn shown_channels(app: &TestApp) -> Vec<(String, Value)> {
    let (status, one) = app.get("/v2/subscribers/pat").await;
    assert_eq!(status, StatusCode::OK, "{one}");
    // A patch answers from the owned subscriber rather than the by-id read's view.
    let (status, patched) = app.patch("/v2/subscribers/pat", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["channels"], one["channels"]);
    one["channels"]
        .as_array()
        .unwrap_or_else(|| panic!("{one}"))
        .iter()
        .map(|c| {
            (
                c["providerId"].as_str().unwrap().to_owned(),
                c["credentials"].clone(),
            )
        })
        .collect()
}

async fn subscriber_credentials_are_sealed_at_rest(app: TestApp) {
    let r = Receiver::start().await;
    pat_with_credentials(&app, &r).await;

    let stored = stored_channels(&app, "pat").await;
    for clear in [TOKEN, HOOK_SECRET, "hooks", "deviceTokens", "webhookUrl"] {
        assert!(!stored.contains(clear), "{clear} stored in clear: {stored}");
    }
    // A subscriber without credentials stores its empty list as is.
    app.subscriber("sam", json!({})).await;
    assert_eq!(stored_channels(&app, "sam").await, "[]");

    // The API answers as before.
    let hook = format!("{}/hooks/{HOOK_SECRET}", r.url);
    let want = vec![
        ("push-webhook".to_owned(), json!({"deviceTokens": [TOKEN]})),
        ("slack".to_owned(), json!({"webhookUrl": hook})),
    ];
    assert_eq!(shown_channels(&app).await, want);

    // Deliveries read them: push to the token, chat to the webhook.
    let (job, message) = deliver_one(
        &app,
        "push",
        json!({"subject": "Hi", "body": "Push"}),
        json!({"to": "pat", "payload": {}}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(message["deviceTokens"], json!([TOKEN]));
    let (job, _) = deliver_one(
        &app,
        "chat",
        json!({"body": "Chat"}),
        json!({"to": "pat", "payload": {}}),
    )
    .await;
    assert_eq!(job["status"], "completed", "{job}");
    let got = r.wait_for(2).await;
    assert_eq!(got[0].path, "/push");
    assert_eq!(got[0].json()["target"], json!([TOKEN]));
    assert_eq!(got[1].path, format!("/hooks/{HOOK_SECRET}"));

    // A change of credentials is sealed again.
    let (status, out) = app
        .patch(
            "/v1/subscribers/pat/credentials",
            json!({"providerId": "push-webhook", "integrationIdentifier": "pw",
                "credentials": {"deviceTokens": ["second-token-4b5c6d"]}}),
        )
        .await;
    assert!(status.is_success(), "{out}");
    let stored = stored_channels(&app, "pat").await;
    assert!(
        !stored.contains("second-token") && !stored.contains(TOKEN),
        "{stored}"
    );
    assert_eq!(
        shown_channels(&app).await[0].1,
        json!({"deviceTokens": [TOKEN, "second-token-4b5c6d"]})
    );
}
db_test!(
    sealed_credentials,
    subscriber_credentials_are_sealed_at_rest
);

/// Rows written in clear by an earlier version are read as they are, and sealed by the next `migrate`
/// (which start-up runs).
async fn clear_rows_are_read_and_sealed_by_migrate(app: TestApp) {
    let r = Receiver::start().await;
    pat_with_credentials(&app, &r).await;
    let want = shown_channels(&app).await;
    let clear = serde_json::to_string(
        &want
            .iter()
            .map(|(p, c)| json!({"providerId": p, "credentials": c, "_integrationId": "6b06cf4f733d860000000001"}))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let write = format!(
        "update subscribers set channels = '{clear}' where subscriber_id = 'pat' returning id"
    );
    raw_sql(&app, &write).await;
    assert!(stored_channels(&app, "pat").await.contains(TOKEN));
    assert_eq!(shown_channels(&app).await, want, "a clear row is read");

    app.store.migrate().await.unwrap();
    let stored = stored_channels(&app, "pat").await;
    assert!(
        !stored.contains(TOKEN) && !stored.contains(HOOK_SECRET),
        "{stored}"
    );
    assert_eq!(shown_channels(&app).await, want, "and read once sealed");
    // Nothing left to seal.
    assert_eq!(app.store.seal_subscriber_channels().await.unwrap(), 0);
}
db_test!(clear_rows_sealed, clear_rows_are_read_and_sealed_by_migrate);

const ACCOUNT: &str = "AC0123456789";
const AUTH_TOKEN: &str = "tw/auth+token=secret 42";

/// A provider echoing its credentials in every encoding: the Basic header, the token in JSON, URL- and
/// form-encoded, base64; and a bearer token that is no credential of ours.
fn echo(status: u16) -> Reply {
    let b64 = base64::engine::general_purpose::STANDARD;
    let form: String = form_urlencoded::byte_serialize(AUTH_TOKEN.as_bytes()).collect();
    Reply::json(
        status,
        json!({"sid": "SM0001", "message": format!("auth {AUTH_TOKEN} refused"),
            "echo": {"authorization": format!("Basic {}", b64.encode(format!("{ACCOUNT}:{AUTH_TOKEN}"))),
                "token": AUTH_TOKEN, "query": format!("token={}", form.replace('+', "%20")),
                "form": format!("Token={form}"), "base64": b64.encode(AUTH_TOKEN),
                "upstream": "Bearer ya29.a0AfH6SMBx-upstream_token"}}),
    )
}

async fn every_encoding_of_a_credential_is_redacted(app: TestApp) {
    let r = Receiver::start().await;
    r.reply([echo(201)]);
    app.integration(
        json!({"providerId": "twilio", "channel": "sms", "identifier": "tw", "active": true,
        "credentials": {"accountSid": ACCOUNT, "token": AUTH_TOKEN, "from": "+15550009999",
            "baseUrl": r.url}}),
    )
    .await;
    let trigger = || json!({"to": {"subscriberId": "ann", "phone": "+15550001111"}, "payload": {}});
    let (job, message) = deliver_one(&app, "sms", json!({"body": "Hi"}), trigger()).await;
    assert_eq!(job["status"], "completed", "{job}");
    // The provider did get the credentials.
    let sent = r.wait_for(1).await;
    assert!(sent[0]
        .header("authorization")
        .unwrap()
        .starts_with("Basic "));

    // A failure's answer too (its message and raw answer).
    r.always(echo(401));
    let (failed, failed_message) = deliver_one(&app, "sms", json!({"body": "Hi"}), trigger()).await;
    assert_eq!(failed["status"], "failed", "{failed}");

    let form: String = form_urlencoded::byte_serialize(AUTH_TOKEN.as_bytes()).collect();
    let b64 = base64::engine::general_purpose::STANDARD;
    let leaks = [
        AUTH_TOKEN.to_owned(),
        b64.encode(format!("{ACCOUNT}:{AUTH_TOKEN}")),
        form.clone(),
        form.replace('+', "%20"),
        b64.encode(AUTH_TOKEN),
        "ya29.a0AfH6SMBx".to_owned(),
        "secret 42".to_owned(),
    ];
    let answers = [&job, &message, &failed, &failed_message]
        .map(Value::to_string)
        .join("\n");
    let stored = raw_sql(
        &app,
        "select coalesce(raw, '') || ' ' || detail from execution_details",
    )
    .await
    .join("\n");
    for text in [&answers, &stored] {
        for leak in &leaks {
            assert!(!text.contains(leak.as_str()), "{leak} in {text}");
        }
    }
    // What is not a credential stays.
    let raw = job["executionDetails"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|d| d["raw"].as_str().filter(|r| r.contains("SM0001")))
        .unwrap_or_else(|| panic!("no raw answer in {job}"));
    assert!(
        raw.contains("Basic [redacted]") && raw.contains("Bearer [redacted]"),
        "{raw}"
    );
    assert!(stored.contains("auth [redacted] refused"), "{stored}");
}
db_test!(
    redacted_encodings,
    every_encoding_of_a_credential_is_redacted
);

/// `TIDINGS_API_KEY` (and a key given to `environments create`) needs 32 characters or more.
async fn short_bootstrap_keys_are_refused(app: TestApp) {
    let short = "only-11-chr";
    let e = environments::bootstrap(&app.store, Some(short))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("at least 32 characters") && e.contains("it has 11"),
        "{e}"
    );
    assert!(!e.contains(short), "the key itself is not echoed: {e}");
    assert!(
        environments::create(&app.store, "Short", Some(&"k".repeat(31)))
            .await
            .is_err()
    );
    let long = "k".repeat(32);
    let created = environments::create(&app.store, "Long", Some(&long))
        .await
        .unwrap();
    assert_eq!(created.api_key, long);
    assert!(environments::bootstrap(&app.store, Some(&long))
        .await
        .is_ok());
    // Generated keys satisfy the rule.
    assert!(tidings::crypto::new_api_key().len() >= environments::MIN_API_KEY_CHARS);
}
db_test!(bootstrap_keys, short_bootstrap_keys_are_refused);

/// Start-up with a short `TIDINGS_API_KEY` fails, saying why.
#[test]
fn the_server_does_not_start_with_a_short_api_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tidings"))
        .arg("serve")
        .current_dir(dir.path())
        .env("TIDINGS_LISTEN", "127.0.0.1:0")
        .env("TIDINGS_API_KEY", "sk_short_key")
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("TIDINGS_ENCRYPTION_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start tidings serve");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("tidings serve started with a 12-character API key");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!status.success());
    assert!(
        stderr.contains("TIDINGS_API_KEY must be at least 32 characters long, it has 12"),
        "{stderr}"
    );
}

/// A new data folder is 0700, the database, its -wal and -shm and secret.key 0600; an existing folder keeps
/// its mode.
#[cfg(unix)]
#[tokio::test]
async fn the_data_folder_and_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data").join("nested");
    let db = data.join("tidings.db");
    let url = format!("sqlite://{}", db.display());

    // The binary without an encryption key: it creates the folder, secret.key and the database.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidings"))
        .args(["migrate", "--database-url", &url])
        .env("RUST_LOG", "warn")
        .env_remove("TIDINGS_ENCRYPTION_KEY")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&dir.path().join("data")), 0o700);
    assert_eq!(mode(&data.join("secret.key")), 0o600);
    assert_eq!(mode(&db), 0o600);

    // While a store has it open, the log and shared-memory files exist, and are private too.
    let key = std::fs::read_to_string(data.join("secret.key")).unwrap();
    let cipher = tidings::crypto::Cipher::from_base64(&key).unwrap();
    let store =
        tidings::store::Store::open(&tidings::store::StoreOptions::new(&url), cipher.clone())
            .await
            .unwrap();
    store.migrate().await.unwrap();
    for file in ["tidings.db-wal", "tidings.db-shm"] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    store.close().await;

    // An existing folder is the operator's: its mode is kept; the database file is still created 0600.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let url = format!("sqlite://{}", shared.join("t.db").display());
    let store = tidings::store::Store::open(&tidings::store::StoreOptions::new(&url), cipher)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    assert_eq!(mode(&shared), 0o755);
    assert_eq!(mode(&shared.join("t.db")), 0o600);
    store.close().await;
}
