//! The Inbox's sessions made safe (issue 36, medium 3 and 4, and a low): the HMAC is required by default in
//! Production and in environments created with `--hmac`, turned off only explicitly and never by deleting
//! the in-app integration; the start-up banner names the environments without it; sessions carry their
//! environment's epoch, and raising it (the operator's route, turning the HMAC on, rotating the API key)
//! ends them, REST and socket alike; deleting a subscriber closes its sockets; a session's body must be
//! JSON.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tidings::service::{environments, inbox_session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::db_test;
use crate::support::{assert_error, send, TestApp};

fn hmac(key: &str, subscriber: &str) -> String {
    tidings::crypto::hmac_sha256_hex(key, &[subscriber.as_bytes()])
}

/// `POST /v1/inbox/session` in the environment `identifier`, with `hash` when given.
async fn open(
    app: &TestApp,
    identifier: &str,
    subscriber: &str,
    hash: Option<String>,
) -> (StatusCode, Value) {
    let mut body = json!({"applicationIdentifier": identifier, "subscriber": subscriber});
    if let Some(h) = hash {
        body["subscriberHash"] = json!(h);
    }
    send(app.client.post(app.url("/v1/inbox/session")).json(&body)).await
}

/// A session's token in the app's environment (no hash: its HMAC is off).
async fn token(app: &TestApp, subscriber: &str) -> String {
    let (status, out) = open(app, &app.application_identifier, subscriber, None).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out["data"]["token"].as_str().unwrap().to_owned()
}

/// The status of an Inbox list read with `token`.
async fn inbox_status(app: &TestApp, token: &str) -> StatusCode {
    send(
        app.client
            .request(Method::GET, app.url("/v1/inbox/notifications?limit=1"))
            .bearer_auth(token),
    )
    .await
    .0
}

/// Whether a session without a hash opens for `subscriber` in `identifier` (201), or needs one (400).
async fn needs_hash(app: &TestApp, identifier: &str, key: &str, subscriber: &str) -> bool {
    let (status, out) = open(app, identifier, subscriber, None).await;
    let needs = match status {
        StatusCode::CREATED => false,
        StatusCode::BAD_REQUEST => {
            assert_eq!(out["message"], "Please provide a valid HMAC hash", "{out}");
            true
        }
        other => panic!("{other}: {out}"),
    };
    // The right hash always opens it.
    let (status, out) = open(app, identifier, subscriber, Some(hmac(key, subscriber))).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    needs
}

/// Production needs the HMAC with no integration and no operator action, as does an environment created
/// with the flag; others do not.
async fn hmac_by_default(app: TestApp) {
    let production = environments::create(&app.store, "Production", None)
        .await
        .unwrap();
    let flagged = environments::create_with_hmac(&app.store, "Shop", None, true)
        .await
        .unwrap();
    let plain = environments::create(&app.store, "Staging", None)
        .await
        .unwrap();
    for (env, needs) in [(&production, true), (&flagged, true), (&plain, false)] {
        assert_eq!(
            needs_hash(&app, &env.application_identifier, &env.api_key, "ann").await,
            needs,
            "{}",
            env.name
        );
    }
    assert!(!needs_hash(&app, &app.application_identifier, &app.key, "ann").await);
}
db_test!(inbox_hmac_by_default, hmac_by_default);

/// The in-app integration's `credentials.hmac` turns the HMAC on and off (explicitly `false` only);
/// deleting or re-creating the integration without it changes nothing; the CLI's setting does the same.
async fn hmac_off_only_explicitly(app: TestApp) {
    let (id, key) = (app.application_identifier.clone(), app.key.clone());
    let needs = || needs_hash(&app, &id, &key, "bob");
    assert!(!needs().await);
    let integration = app
        .integration(json!({"providerId": "novu", "channel": "in_app", "credentials": {"hmac": true}, "active": true}))
        .await;
    assert!(needs().await);
    let path = format!("/v1/integrations/{}", integration["_id"].as_str().unwrap());
    // Credentials replaced without `hmac`: still on.
    let (status, out) = app
        .put(&path, json!({"credentials": {"apiKey": "x"}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(needs().await);
    // Deleted: still on (before, an environment without an in-app integration needed no HMAC).
    let (status, out) = app.delete(&path).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(needs().await);
    // A new integration that does not say: still on; one that says `false`: off.
    let again = app
        .integration(json!({"providerId": "novu", "channel": "in_app", "active": true}))
        .await;
    assert!(needs().await);
    let path = format!("/v1/integrations/{}", again["_id"].as_str().unwrap());
    let (status, out) = app
        .put(&path, json!({"credentials": {"hmac": false}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(!needs().await);
    // The command line's setting.
    let rules = environments::set_hmac(&app.store, "Development", true)
        .await
        .unwrap();
    assert!(rules.hmac);
    assert!(needs().await);
    assert!(
        !environments::set_hmac(&app.store, "Development", false)
            .await
            .unwrap()
            .hmac
    );
    assert!(!needs().await);
    // Another channel's `hmac` credential is not the Inbox's.
    app.integration(
        json!({"providerId": "sendgrid", "channel": "email", "credentials": {"hmac": true}}),
    )
    .await;
    assert!(!needs().await);
}
db_test!(inbox_hmac_off_only_explicitly, hmac_off_only_explicitly);

/// The start-up banner names the environments whose sessions need no HMAC.
async fn banner(app: TestApp) {
    environments::create(&app.store, "Production", None)
        .await
        .unwrap();
    environments::create(&app.store, "Preview", None)
        .await
        .unwrap();
    let line = environments::without_hmac_banner(&app.store)
        .await
        .unwrap()
        .expect("a banner line");
    assert_eq!(
        line,
        "Inbox sessions need no subscriberHash (HMAC off) in: \"Development\", \"Preview\". Any browser \
         can open any subscriber's Inbox there; require it with `tidings environments hmac NAME on`."
    );
    for name in ["Development", "Preview"] {
        environments::set_hmac(&app.store, name, true)
            .await
            .unwrap();
    }
    assert_eq!(
        environments::without_hmac_banner(&app.store).await.unwrap(),
        None
    );
}
db_test!(inbox_hmac_banner, banner);

/// Environments from before this version keep their rule: on where the active in-app integration said
/// `hmac: true`, off elsewhere; Production (the migration) on.
async fn older_environments(app: TestApp) {
    app.integration(json!({"providerId": "novu", "channel": "in_app", "credentials": {"hmac": true}, "active": true}))
        .await;
    let other = environments::create(&app.store, "Other", None)
        .await
        .unwrap();
    // As the migration leaves environments made before it.
    crate::support::execute(&app, "update environments set inbox_hmac = null").await;
    app.store.migrate().await.unwrap();
    assert!(needs_hash(&app, &app.application_identifier, &app.key, "cy").await);
    assert!(!needs_hash(&app, &other.application_identifier, &other.api_key, "cy").await);
}
db_test!(inbox_hmac_of_older_environments, older_environments);

/// Each way of raising the epoch ends the sessions opened before it (401), and only those of its
/// environment; new sessions work.
async fn epochs(app: TestApp) {
    let other = environments::create(&app.store, "Other", None)
        .await
        .unwrap();
    let (status, out) = open(&app, &other.application_identifier, "ann", None).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let other_token = out["data"]["token"].as_str().unwrap().to_owned();

    // The operator's route.
    let before = token(&app, "ann").await;
    assert_eq!(inbox_status(&app, &before).await, StatusCode::OK);
    let (status, out) = app
        .post("/v1/environments/me/end-sessions", json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(
        out,
        json!({"environmentId": app.tenant.environment_id.as_str(), "sessionEpoch": 1})
    );
    assert_eq!(inbox_status(&app, &before).await, StatusCode::UNAUTHORIZED);
    assert_eq!(inbox_status(&app, &other_token).await, StatusCode::OK);
    let (status, _) = send(
        app.client
            .post(app.url("/v1/environments/me/end-sessions"))
            .json(&json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Turning the HMAC on (the in-app integration).
    let before = token(&app, "ann").await;
    assert_eq!(inbox_status(&app, &before).await, StatusCode::OK);
    let integration = app
        .integration(json!({"providerId": "novu", "channel": "in_app", "credentials": {"hmac": true}, "active": true}))
        .await;
    assert_eq!(inbox_status(&app, &before).await, StatusCode::UNAUTHORIZED);
    let (status, out) = open(
        &app,
        &app.application_identifier,
        "ann",
        Some(hmac(&app.key, "ann")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let hashed = out["data"]["token"].as_str().unwrap().to_owned();
    assert_eq!(inbox_status(&app, &hashed).await, StatusCode::OK);
    // Saying it again, or turning it off, ends nothing.
    let path = format!("/v1/integrations/{}", integration["_id"].as_str().unwrap());
    for hmac in [true, false] {
        let (status, out) = app.put(&path, json!({"credentials": {"hmac": hmac}})).await;
        assert_eq!(status, StatusCode::OK, "{out}");
        assert_eq!(inbox_status(&app, &hashed).await, StatusCode::OK);
    }

    // Rotating the API key.
    let rotated = environments::rotate_key(&app.store, "Development")
        .await
        .unwrap();
    assert_eq!(inbox_status(&app, &hashed).await, StatusCode::UNAUTHORIZED);
    let after = token(&app, "ann").await;
    assert_eq!(inbox_status(&app, &after).await, StatusCode::OK);
    // The command line's call.
    let rules = environments::end_sessions(&app.store, "Development")
        .await
        .unwrap();
    assert_eq!(rules.session_epoch, 4, "{rules:?}");
    assert_eq!(inbox_status(&app, &after).await, StatusCode::UNAUTHORIZED);
    assert_eq!(inbox_status(&app, &other_token).await, StatusCode::OK);
    let (status, out) = send(
        app.req_as(
            &rotated.api_key,
            Method::POST,
            "/v1/environments/me/end-sessions",
        )
        .json(&json!({})),
    )
    .await;
    assert_eq!(
        (status, &out["sessionEpoch"]),
        (StatusCode::CREATED, &json!(5)),
        "{out}"
    );
}
db_test!(inbox_session_epochs, epochs);

/// A socket.io client over a bare WebSocket (engine.io 4): enough to connect and to see the server end it.
struct Socket {
    stream: tokio::net::TcpStream,
    buf: Vec<u8>,
}

impl Socket {
    /// Upgrades with `token` and connects to the main namespace of the app's server.
    async fn connect(app: &TestApp, token: &str) -> Self {
        Self::connect_at(&app.base, token).await
    }

    /// The same at the server at `base` (`http://host:port`).
    async fn connect_at(base: &str, token: &str) -> Self {
        let host = base.trim_start_matches("http://").to_owned();
        let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
        let request = format!(
            "GET /socket.io/?EIO=4&transport=websocket&token={token} HTTP/1.1\r\nHost: {host}\r\n\
             Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut s = Self {
            stream,
            buf: Vec::new(),
        };
        let head = loop {
            if let Some(end) = s.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&s.buf[..end]).into_owned();
                s.buf.drain(..end + 4);
                break head;
            }
            assert!(s.fill().await, "the upgrade's answer ended early");
        };
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let open = s.text().await.expect("engine.io's open packet");
        assert!(open.starts_with("0{"), "{open}");
        s.send("40").await;
        let connected = s.text().await.expect("socket.io's connect packet");
        assert!(connected.starts_with("40{"), "{connected}");
        s
    }

    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    async fn need(&mut self, n: usize) -> bool {
        while self.buf.len() < n {
            if !self.fill().await {
                return false;
            }
        }
        true
    }

    /// The next text frame but pings; `None` when the connection closes (a close frame or its end).
    async fn text(&mut self) -> Option<String> {
        loop {
            if !self.need(2).await {
                return None;
            }
            let opcode = self.buf[0] & 0x0f;
            let (len, at) = match self.buf[1] & 0x7f {
                126 => {
                    self.need(4).await.then_some(())?;
                    (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 4)
                }
                127 => {
                    self.need(10).await.then_some(())?;
                    let b: [u8; 8] = self.buf[2..10].try_into().unwrap();
                    (u64::from_be_bytes(b) as usize, 10)
                }
                n => (n as usize, 2),
            };
            if !self.need(at + len).await {
                return None;
            }
            let payload: Vec<u8> = self.buf.drain(..at + len).skip(at).collect();
            match opcode {
                // engine.io's ping: answered, never handed out.
                1 if payload == b"2" => self.send("3").await,
                1 => return Some(String::from_utf8(payload).unwrap()),
                8 => return None,
                _ => {}
            }
        }
    }

    async fn send(&mut self, text: &str) {
        let mask = [7u8, 1, 3, 5];
        let mut frame = vec![0x81, 0x80 | text.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).await.unwrap();
    }

    /// Waits up to 20 s (generous on a machine shared with other tests; pings are answered, so nothing
    /// else ends it meanwhile) for the server to end the socket: socket.io's disconnect packet (`41`) or
    /// the connection's end.
    async fn ended(&mut self) -> bool {
        self.ended_within(Duration::from_secs(20)).await
    }

    async fn ended_within(&mut self, within: Duration) -> bool {
        let wait = async {
            while let Some(text) = self.text().await {
                if text == "41" {
                    return;
                }
            }
        };
        tokio::time::timeout(within, wait).await.is_ok()
    }
}

/// Whether the subscriber is online (it holds a socket).
async fn online(app: &TestApp, subscriber: &str) -> bool {
    let (status, s) = app.get(&format!("/v2/subscribers/{subscriber}")).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    s["isOnline"] == true
}

/// Sockets end with their sessions: an epoch raised closes every socket of the environment with an older
/// token (not another environment's, nor one opened since), and a deleted subscriber's socket is closed
/// while another subscriber's stays; the old token then opens nothing, not even for a subscriber created
/// again under the same subscriberId.
async fn sockets_end(app: TestApp) {
    let other = environments::create(&app.store, "Other", None)
        .await
        .unwrap();
    let (status, out) = open(&app, &other.application_identifier, "ann", None).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let elsewhere = Socket::connect(&app, out["data"]["token"].as_str().unwrap()).await;
    let mut ann = Socket::connect(&app, &token(&app, "ann").await).await;
    crate::support::eventually(|| async { online(&app, "ann").await.then_some(()) }).await;
    inbox_session::end_sessions(&app.store, &app.tenant.environment_id)
        .await
        .unwrap();
    assert!(
        ann.ended().await,
        "the socket of an ended session is closed"
    );
    crate::support::eventually(|| async { (!online(&app, "ann").await).then_some(()) }).await;
    // Not another environment's.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, s) = send(app.req_as(&other.api_key, Method::GET, "/v2/subscribers/ann")).await;
    assert_eq!(
        (status, &s["isOnline"]),
        (StatusCode::OK, &json!(true)),
        "{s}"
    );

    // A subscriber deleted: its socket is closed, another's is not.
    let ann_token = token(&app, "ann").await;
    let mut ann = Socket::connect(&app, &ann_token).await;
    let bob = Socket::connect(&app, &token(&app, "bob").await).await;
    crate::support::eventually(|| async {
        (online(&app, "ann").await && online(&app, "bob").await).then_some(())
    })
    .await;
    let (status, out) = app.delete("/v2/subscribers/ann").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(ann.ended().await, "a deleted subscriber's socket is closed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        online(&app, "bob").await,
        "another subscriber's socket stays"
    );
    // The old token names the deleted record: refused, also once the subscriberId is taken again.
    assert_eq!(
        inbox_status(&app, &ann_token).await,
        StatusCode::UNAUTHORIZED
    );
    app.subscriber("ann", json!({})).await;
    assert_eq!(
        inbox_status(&app, &ann_token).await,
        StatusCode::UNAUTHORIZED
    );
    drop((bob, elsewhere));
}
db_test!(inbox_sockets_end_with_sessions, sockets_end);

/// The command line ends sessions from another process: their tokens are refused at once, and a server
/// that did not hear the announcement (SQLite: none crosses processes) closes their sockets at its next
/// heartbeat, which compares the epochs of the environments it holds sockets of.
async fn command_line_ends_sockets(app: TestApp) {
    let ann_token = token(&app, "ann").await;
    let mut ann = Socket::connect(&app, &ann_token).await;
    crate::support::eventually(|| async { online(&app, "ann").await.then_some(()) }).await;
    // `tidings environments end-sessions`: a store of its own, as the command's process opens.
    let mut opts = tidings::store::StoreOptions::new(app.database_url.clone());
    opts.pg_schema = app.pg_schema.clone();
    let cipher = tidings::crypto::Cipher::from_base64(&app.encryption_key).unwrap();
    let cli = tidings::store::Store::open(&opts, cipher).await.unwrap();
    environments::end_sessions(&cli, "Development")
        .await
        .unwrap();
    cli.close().await;
    assert_eq!(
        inbox_status(&app, &ann_token).await,
        StatusCode::UNAUTHORIZED
    );
    // A heartbeat every 20 s, looked for every 5 s: awaited with room for a loaded machine.
    assert!(
        ann.ended_within(Duration::from_secs(60)).await,
        "the socket is closed by the heartbeat"
    );
}
db_test!(inbox_command_line_ends_sockets, command_line_ends_sockets);

/// A session's body must be sent as JSON: a browser posts `text/plain` (or no type) from any page without
/// a CORS preflight.
async fn session_body_is_json(app: TestApp) {
    let body = json!({"applicationIdentifier": app.application_identifier, "subscriber": "ann"})
        .to_string();
    for content_type in [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut req = app
            .client
            .post(app.url("/v1/inbox/session"))
            .header("Origin", "https://evil.example")
            .body(body.clone());
        if let Some(t) = content_type {
            req = req.header("Content-Type", t);
        }
        let (status, out) = send(req).await;
        assert_eq!(
            status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}: {out}"
        );
        assert_error(&out, 415);
    }
    assert_eq!(app.subscriber_ref("ann").await, None, "nothing was created");
    for content_type in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
    ] {
        let (status, out) = send(
            app.client
                .post(app.url("/v1/inbox/session"))
                .header("Content-Type", content_type)
                .body(body.clone()),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{content_type}: {out}");
    }
}
db_test!(inbox_session_body_is_json, session_body_is_json);

/// Two `tidings serve` processes on one PostgreSQL database: a socket held by instance A is closed when
/// the API key deletes its subscriber, or ends the environment's sessions, through instance B.
async fn two_instances() {
    use crate::inbox_instances::{FreshDatabase, Instance};
    let db = FreshDatabase::create(&crate::support::postgres_url()).await;
    let encryption_key = tidings::crypto::Cipher::generate_base64();
    let key = format!("sk_inst_{}", tidings::domain::new_object_id());
    let a = Instance::start("A", &db.url, &encryption_key, &key).await;
    let b = Instance::start("B", &db.url, &encryption_key, &key).await;
    let client = reqwest::Client::new();
    let with_key = |method: Method, url: String| {
        client
            .request(method, url)
            .header("Authorization", format!("ApiKey {key}"))
    };
    let (status, me) = send(with_key(
        Method::GET,
        format!("{}/v1/environments/me", b.url),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{me}");
    let identifier = me["data"]["identifier"].as_str().unwrap().to_owned();
    let session_at_a = |subscriber: &'static str| {
        let (client, url, identifier) = (client.clone(), a.url.clone(), identifier.clone());
        async move {
            let (status, out) = send(
                client
                    .post(format!("{url}/v1/inbox/session"))
                    .json(&json!({"applicationIdentifier": identifier, "subscriber": subscriber})),
            )
            .await;
            assert_eq!(status, StatusCode::CREATED, "{out}");
            out["data"]["token"].as_str().unwrap().to_owned()
        }
    };

    let mut ann = Socket::connect_at(&a.url, &session_at_a("ann").await).await;
    let (status, out) = send(with_key(
        Method::DELETE,
        format!("{}/v2/subscribers/ann", b.url),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(
        ann.ended().await,
        "A closes the socket of a subscriber deleted through B:\n{}",
        a.log()
    );

    let mut bob = Socket::connect_at(&a.url, &session_at_a("bob").await).await;
    let (status, out) = send(
        with_key(
            Method::POST,
            format!("{}/v1/environments/me/end-sessions", b.url),
        )
        .json(&json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert!(
        bob.ended().await,
        "A closes the sockets of sessions ended through B:\n{}",
        a.log()
    );
}
crate::postgres_test!(two_instances_postgres, two_instances());
