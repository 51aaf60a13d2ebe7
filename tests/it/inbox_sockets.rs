//! The Inbox's sockets are bounded (issue 36): a socket refused or ended at the namespace level has its
//! connection closed by the server; open sockets count against a cap of their own (refused before the
//! upgrade past it) and a cap per subscriber (its oldest socket closed), in `tidings_sockets_open`; a page
//! of an origin `TIDINGS_INBOX_ORIGINS` does not list is refused before the upgrade.
//!
//! The sockets here speak raw WebSocket frames over a `TcpStream`, so that the test sees exactly when the
//! server closes the connection (a read of 0 bytes).

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use tidings::api::{router, ApiOptions, AppState};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::db_test;
use crate::inbox_instances::{FreshDatabase, Instance};
use crate::support::{self, assert_error, eventually, send, Backend, TestApp};

/// A socket.io client on a raw WebSocket.
pub(crate) struct Ws {
    io: BufReader<TcpStream>,
}

/// Dials `/socket.io/` of `base` (`http://host:port`) with `query` added, as `@novu/js` does (engine.io 4,
/// WebSocket transport), from a page of `origin` when given. `Err` holds a refusal's status and body.
pub(crate) async fn dial(
    base: &str,
    query: &str,
    origin: Option<&str>,
) -> Result<Ws, (u16, Value)> {
    let host = base.trim_start_matches("http://");
    let mut io = BufReader::new(TcpStream::connect(host).await.unwrap());
    let origin = origin
        .map(|o| format!("Origin: {o}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "GET /socket.io/?EIO=4&transport=websocket&{query} HTTP/1.1\r\nHost: {host}\r\n\
         Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{origin}\r\n"
    );
    io.get_mut().write_all(head.as_bytes()).await.unwrap();
    let mut line = String::new();
    io.read_line(&mut line).await.unwrap();
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line, got {line:?}"));
    let mut length = 0;
    loop {
        line.clear();
        io.read_line(&mut line).await.unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
    }
    if status != 101 {
        let mut body = vec![0; length];
        io.read_exact(&mut body).await.unwrap();
        return Err((status, serde_json::from_slice(&body).unwrap_or(Value::Null)));
    }
    Ok(Ws { io })
}

/// A socket's token query.
pub(crate) fn with_token(token: &str) -> String {
    format!("token={token}")
}

impl Ws {
    /// Sends a text message (a client's frames are masked).
    async fn send(&mut self, text: &str) {
        let mask = [7u8, 1, 8, 2];
        let mut frame = vec![0x81, 0x80 | text.len() as u8];
        assert!(text.len() < 126);
        frame.extend(mask);
        frame.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.io.get_mut().write_all(&frame).await.unwrap();
    }

    /// The next text message but pings (answered: this client stays alive); `None` once the server closed
    /// the connection (or sent a close frame).
    async fn recv(&mut self) -> Option<String> {
        loop {
            let mut head = [0u8; 2];
            self.io.read_exact(&mut head).await.ok()?;
            let mut length = (head[1] & 0x7f) as u64;
            if length == 126 {
                length = self.io.read_u16().await.ok()? as u64;
            } else if length == 127 {
                length = self.io.read_u64().await.ok()?;
            }
            let mut payload = vec![0; length as usize];
            self.io.read_exact(&mut payload).await.ok()?;
            match head[0] & 0x0f {
                0x1 if payload == b"2" => self.send("3").await,
                0x1 => return Some(String::from_utf8(payload).unwrap()),
                0x8 => return None,
                _ => {}
            }
        }
    }

    /// Opens the engine.io session and asks for the namespace `ns` (`""`: the main one); the answer
    /// (`40…` admitted, `44…` refused).
    pub(crate) async fn join(&mut self, ns: &str) -> String {
        let open = self.recv().await.expect("the engine.io open packet");
        assert!(open.starts_with("0{"), "{open}");
        self.send(&format!("40{ns}")).await;
        self.recv().await.expect("an answer to the connect")
    }

    /// How long until the server closes the connection, reading (and dropping) what it sends; `None` if
    /// it is still open after `within`.
    async fn closed_within(&mut self, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        tokio::time::timeout(within, async { while self.recv().await.is_some() {} })
            .await
            .ok()
            .map(|()| start.elapsed())
    }
}

/// A session token of `subscriber` (created by the session) from the server at `base`.
pub(crate) async fn session(
    client: &reqwest::Client,
    base: &str,
    app_id: &str,
    subscriber: &str,
) -> String {
    let (status, out) = send(client.post(format!("{base}/v1/inbox/session")).json(
        &json!({"applicationIdentifier": app_id, "subscriber": {"subscriberId": subscriber}}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out["data"]["token"].as_str().unwrap().to_owned()
}

/// How long a connection has to join a namespace.
const CONNECT_TIMEOUT: Duration = tidings::api::socket::CONNECT_TIMEOUT;

/// How long a test awaits the server's closing of a connection it has refused or ended (after the grace of a
/// socket ended at the namespace level): generous for a machine shared with other tests, and below the
/// engine.io heartbeat (a 25 s ping interval, then a 20 s timeout), the only other thing that would close it.
const CLOSED_WITHIN: Duration = Duration::from_secs(20);

/// A socket that the namespace refuses or ends loses its connection: one that leaves the namespace, one that
/// asks for a namespace that does not exist, one that never asks, and one whose subscriber is gone (unless
/// its token is already refused before the upgrade). A socket admitted stays open.
async fn refused_sockets_lose_their_connection(app: TestApp) {
    let base = app.base.clone();
    let token = session(&app.client, &base, &app.application_identifier, "ann").await;

    // Admitted: stays open.
    let mut kept = dial(&base, &with_token(&token), None).await.unwrap();
    let answer = kept.join("").await;
    assert!(answer.starts_with("40{"), "{answer}");

    // Another namespace: refused with a connect error. And one that never asks for a namespace.
    let mut other = dial(&base, &with_token(&token), None).await.unwrap();
    let answer = other.join("/admin,").await;
    assert!(answer.starts_with("44/admin,"), "{answer}");
    let mut silent = dial(&base, &with_token(&token), None).await.unwrap();
    assert!(silent.recv().await.unwrap().starts_with("0{"));

    // The client leaves the namespace ("41") but keeps the connection.
    let mut left = dial(&base, &with_token(&token), None).await.unwrap();
    assert!(left.join("").await.starts_with("40{"));
    left.send("41").await;
    let closed = left.closed_within(CLOSED_WITHIN).await;
    assert!(closed.is_some(), "a socket that left is still connected");

    // A subscriber deleted after its session opened: refused at connect ("41"), and closed.
    let gone = session(&app.client, &base, &app.application_identifier, "gone").await;
    let (status, out) = app.delete("/v2/subscribers/gone").await;
    assert!(status.is_success(), "{out}");
    match dial(&base, &with_token(&gone), None).await {
        Ok(mut socket) => {
            let answer = socket.join("").await;
            let mut told = answer.starts_with("41") || answer.starts_with("44");
            if answer.starts_with("40") {
                told = socket.recv().await.is_some_and(|m| m.starts_with("41"));
            }
            assert!(told, "the gone subscriber's socket is refused: {answer}");
            let closed = socket.closed_within(CLOSED_WITHIN).await;
            assert!(closed.is_some(), "a refused socket is still connected");
        }
        Err((status, body)) => assert_eq!(status, 401, "{body}"),
    }

    // Closed when the time to join a namespace is over.
    for (what, socket) in [
        ("refused a namespace", &mut other),
        ("joined none", &mut silent),
    ] {
        let closed = socket.closed_within(CONNECT_TIMEOUT + CLOSED_WITHIN).await;
        assert!(closed.is_some(), "a socket that {what} is still connected");
    }

    // The admitted socket is still there.
    kept.send("3").await;
    assert!(kept
        .closed_within(Duration::from_millis(300))
        .await
        .is_none());
}
db_test!(
    inbox_socket_transport_closed,
    refused_sockets_lose_their_connection
);

/// `TIDINGS_INBOX_ORIGINS` holds for the socket too: a page of another origin is refused before the upgrade
/// (403, no WebSocket); a listed origin, and a client that sends no `Origin` (a server), are upgraded.
async fn sockets_honour_the_inbox_origins(app: TestApp) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let options = ApiOptions {
        inbox_origins: vec!["https://app.example.com".into()],
        ..Default::default()
    };
    let state = AppState::with_options(app.store.clone(), app.profile, options);
    let server = tokio::spawn(support::serve(listener, router(state)));
    let token = session(&app.client, &base, &app.application_identifier, "ann").await;

    let (status, body) = dial(&base, &with_token(&token), Some("https://evil.example.com"))
        .await
        .err()
        .expect("a page of another origin is refused");
    assert_eq!(status, 403, "{body}");
    assert_error(&body, 403);
    assert_eq!(body["path"], "/socket.io/", "{body}");
    for origin in [Some("https://app.example.com"), None] {
        let mut socket = dial(&base, &with_token(&token), origin)
            .await
            .unwrap_or_else(|e| panic!("{origin:?} is upgraded: {e:?}"));
        assert!(socket.join("").await.starts_with("40{"), "{origin:?}");
    }
    // Any origin by default (the test app's server).
    let mut socket = dial(
        &app.base,
        &with_token(&token),
        Some("https://evil.example.com"),
    )
    .await
    .unwrap();
    assert!(socket.join("").await.starts_with("40{"));
    server.abort();
}
db_test!(inbox_socket_origins, sockets_honour_the_inbox_origins);

/// The value of the gauge `name` in a Prometheus text.
fn gauge(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// The caps, in a `tidings serve` process of its own (the gauge is the process's): at most
/// `TIDINGS_MAX_SOCKETS` (3) sockets are open, one more is refused before its upgrade (503, no WebSocket)
/// until one closes; a subscriber's third socket (`TIDINGS_MAX_SOCKETS_PER_SUBSCRIBER`: 2) closes its oldest
/// (told `41`, then its connection closed), and the subscriber stays online. `tidings_sockets_open` counts
/// the open sockets; each socket's opening and closing is logged without its token.
async fn sockets_are_capped(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let fresh = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(FreshDatabase::create(&support::postgres_url()).await),
    };
    let database_url = match &fresh {
        Some(db) => db.url.clone(),
        None => format!("sqlite://{}/tidings.db", dir.path().display()),
    };
    let api_key = format!("sk_caps_{}", tidings::domain::new_object_id());
    let server = Instance::start_with(
        "caps",
        &database_url,
        &tidings::crypto::Cipher::generate_base64(),
        &api_key,
        &[
            ("TIDINGS_MAX_SOCKETS", "3"),
            ("TIDINGS_MAX_SOCKETS_PER_SUBSCRIBER", "2"),
        ],
    )
    .await;
    let base = server.url.clone();
    let client = reqwest::Client::new();
    let (status, envs) = send(
        client
            .get(format!("{base}/v1/environments"))
            .header("Authorization", format!("ApiKey {api_key}")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{envs}");
    let app_id = envs["data"][0]["identifier"].as_str().unwrap().to_owned();
    let ann = session(&client, &base, &app_id, "ann").await;
    let bob = session(&client, &base, &app_id, "bob").await;
    let metrics = || async {
        let text = client
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        gauge(&text, "tidings_sockets_open")
    };

    // A socket is the subscriber's from when its connect handler has run (logged "opened"), which may be
    // after the client read its `40`: each is awaited, so that the oldest is the one dialled first.
    let opened = |n: usize| {
        let server = &server;
        eventually(move || async move {
            let log = server.log();
            (log.matches("Inbox socket opened").count() >= n).then_some(())
        })
    };
    let mut ann1 = dial(&base, &with_token(&ann), None).await.unwrap();
    assert!(ann1.join("").await.starts_with("40{"));
    opened(1).await;
    let mut ann2 = dial(&base, &with_token(&ann), None).await.unwrap();
    assert!(ann2.join("").await.starts_with("40{"));
    opened(2).await;
    assert_eq!(metrics().await, 2.0, "{}", server.log());

    // Ann's third socket closes her oldest.
    let mut ann3 = dial(&base, &with_token(&ann), None).await.unwrap();
    assert!(ann3.join("").await.starts_with("40{"));
    let told = tokio::time::timeout(CLOSED_WITHIN, ann1.recv()).await;
    assert_eq!(
        told.ok().flatten().as_deref(),
        Some("41"),
        "{}",
        server.log()
    );
    assert!(
        ann1.closed_within(CLOSED_WITHIN).await.is_some(),
        "the oldest socket is still connected"
    );
    let (status, sub) = send(
        client
            .get(format!("{base}/v2/subscribers/ann"))
            .header("Authorization", format!("ApiKey {api_key}")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    assert_eq!(sub["data"]["isOnline"], true, "{sub}");
    eventually(|| async { (metrics().await == 2.0).then_some(()) }).await;

    // The third socket of the process; a fourth is refused before its upgrade.
    let mut bob1 = dial(&base, &with_token(&bob), None).await.unwrap();
    assert!(bob1.join("").await.starts_with("40{"));
    let (status, body) = dial(&base, &with_token(&bob), None)
        .await
        .err()
        .expect("the fourth socket is refused");
    assert_eq!(status, 503, "{body}");
    assert_error(&body, 503);
    assert_eq!(metrics().await, 3.0);
    // One closes (the client goes away): there is room again.
    drop(bob1);
    eventually(|| async { (metrics().await == 2.0).then_some(()) }).await;
    let mut bob2 = dial(&base, &with_token(&bob), None).await.unwrap();
    assert!(bob2.join("").await.starts_with("40{"));
    assert_eq!(metrics().await, 3.0);

    // The sockets kept are still there.
    for socket in [&mut ann2, &mut ann3, &mut bob2] {
        socket.send("3").await;
        assert!(socket
            .closed_within(Duration::from_millis(200))
            .await
            .is_none());
    }
    // The log thread writes lines as they come: wait for the last close's line.
    let counts = |log: &str| {
        let lines = |what: &str| log.lines().filter(|l| l.contains(what)).count();
        (lines("Inbox socket opened"), lines("Inbox socket closed"))
    };
    let log = eventually(|| async {
        let log = server.log();
        (counts(&log) == (5, 2)).then_some(log)
    })
    .await;
    assert!(log.contains("subscriber="), "{log}");
    assert!(!log.contains(&ann) && !log.contains(&bob), "{log}");
}
db_test!(inbox_socket_caps, sockets_are_capped, backend);

/// How long a socket event may take on a loaded machine (the snooze sweep runs every 5 s).
const HEARD_WITHIN: Duration = Duration::from_secs(30);

impl Ws {
    /// The payload of the next `event` the socket hears for which `wanted` holds, other packets dropped;
    /// panics when none comes within [`HEARD_WITHIN`].
    async fn heard(&mut self, event: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let found = tokio::time::timeout(HEARD_WITHIN, async {
            while let Some(text) = self.recv().await {
                let Some(packet) = text.strip_prefix("42") else {
                    continue;
                };
                let v: Value = serde_json::from_str(packet).unwrap();
                if v[0] == event && wanted(&v[1]) {
                    return Some(v[1].clone());
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(v)) => v,
            Ok(None) => panic!("the socket closed before {event}"),
            Err(_) => panic!("no {event} as wanted within {HEARD_WITHIN:?}"),
        }
    }

    /// Waits for `notification_received` of the message whose body is `body`; answers its id.
    pub(crate) async fn received(&mut self, body: &str) -> String {
        let m = self
            .heard("notification_received", |v| v["message"]["content"] == body)
            .await;
        m["message"]["_id"].as_str().unwrap().to_owned()
    }

    /// Waits for `unseen_count_changed` with `unseen` and `unread_count_changed` with `unread`.
    pub(crate) async fn counts(&mut self, unseen: i64, unread: i64) {
        self.heard("unseen_count_changed", |v| v["unseenCount"] == unseen)
            .await;
        self.heard("unread_count_changed", |v| v["unreadCount"] == unread)
            .await;
    }
}

/// Every kind of change to a subscriber's in-app messages reaches its socket, whichever entry point made it
/// (issue 37): none of them announces by hand, the store does. Created by the engine's in-app step and by a
/// topic's fan-out (`notification_received`, then the counts); read, seen, unread, archived, snoozed and
/// deleted through the API key's routes and the Inbox's (the counts); a snooze ended by the sweep (the
/// message again); erased with its subscriber (the socket closed). Each step moves a count, so that the
/// count heard is this step's.
async fn every_in_app_change_reaches_the_socket(app: TestApp) {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "News", "workflowId": "news", "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "News {{payload.n}}"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let token = session(&app.client, &app.base, &app.application_identifier, "ann").await;
    let mut ws = dial(&app.base, &with_token(&token), None).await.unwrap();
    assert!(ws.join("").await.starts_with("40"));
    let inbox = |method: reqwest::Method, path: String, body: Value| {
        let req = app
            .client
            .request(method, app.url(&path))
            .bearer_auth(&token)
            .json(&body);
        async move {
            let (status, out) = send(req).await;
            assert!(status.is_success(), "{path}: {status} {out}");
            out
        }
    };

    // Created by the engine's in-app step.
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "news", "to": "ann", "payload": {"n": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let first = ws.received("News 1").await;
    ws.counts(1, 1).await;
    // Created by a topic's fan-out.
    let (status, out) = app
        .post(
            "/v2/topics/team/subscriptions",
            json!({"subscriptions": ["ann"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "news", "to": [{"type": "Topic", "topicKey": "team"}], "payload": {"n": 2}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let second = ws.received("News 2").await;
    ws.counts(2, 2).await;

    // The API key's routes: seen, read (mark-all), unread, delete.
    let (status, out) = app
        .post(
            "/v1/subscribers/ann/messages/mark-as",
            json!({"messageId": first, "markAs": "seen"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    ws.counts(1, 2).await;
    let (status, out) = app
        .post(
            "/v1/subscribers/ann/messages/mark-all",
            json!({"markAs": "read"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    ws.counts(0, 0).await;
    let (status, out) = app
        .post(
            "/v1/subscribers/ann/messages/mark-as",
            json!({"messageId": [first, second], "markAs": "unread"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    ws.counts(0, 2).await;

    // The Inbox's routes: read, unread, archive, snooze, bulk seen, delete.
    use reqwest::Method;
    inbox(
        Method::PATCH,
        format!("/v1/inbox/notifications/{first}/read"),
        json!({}),
    )
    .await;
    ws.counts(0, 1).await;
    inbox(
        Method::PATCH,
        format!("/v1/inbox/notifications/{first}/unread"),
        json!({}),
    )
    .await;
    ws.counts(0, 2).await;
    inbox(
        Method::PATCH,
        format!("/v1/inbox/notifications/{second}/archive"),
        json!({}),
    )
    .await;
    ws.counts(0, 1).await;
    inbox(
        Method::PATCH,
        format!("/v1/inbox/notifications/{second}/unarchive"),
        json!({}),
    )
    .await;
    inbox(
        Method::PATCH,
        format!("/v1/inbox/notifications/{second}/unread"),
        json!({}),
    )
    .await;
    ws.counts(0, 2).await;
    let until = chrono::Utc::now() + chrono::Duration::hours(1);
    inbox(
        Method::PATCH,
        format!("/v1/inbox/notifications/{first}/snooze"),
        json!({"snoozeUntil": until.to_rfc3339()}),
    )
    .await;
    ws.counts(0, 1).await;
    // The snooze sweep: the snooze planted as over (the API's shortest is a minute), the message comes back.
    support::execute(
        &app,
        &format!("update messages set snoozed_until = 1 where id = '{first}'"),
    )
    .await;
    let back = ws.received("News 1").await;
    assert_eq!(back, first);
    ws.counts(0, 2).await;
    let (status, out) = app
        .post(
            "/v1/subscribers/ann/messages/mark-as",
            json!({"messageId": [first, second], "markAs": "unseen"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    ws.counts(2, 2).await;
    inbox(
        Method::POST,
        "/v1/inbox/notifications/seen".into(),
        json!({"notificationIds": [second]}),
    )
    .await;
    ws.counts(1, 2).await;
    inbox(
        Method::DELETE,
        format!("/v1/inbox/notifications/{second}/delete"),
        json!({}),
    )
    .await;
    ws.counts(1, 1).await;
    // Deleted with the API key.
    let (status, out) = app.delete(&format!("/v1/messages/{first}")).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    ws.counts(0, 0).await;
    // Deleted with the API key by its transaction.
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "news", "to": "ann", "payload": {"n": 3}, "transactionId": "tx-3"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    ws.received("News 3").await;
    ws.counts(1, 1).await;
    let (status, out) = app.delete("/v1/messages/transaction/tx-3").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    ws.counts(0, 0).await;

    // Erased with its subscriber: the session ends, the socket is closed.
    let (status, out) = app.delete("/v2/subscribers/ann").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(ws.closed_within(HEARD_WITHIN).await.is_some());
}
db_test!(
    inbox_socket_hears_every_change,
    every_in_app_change_reaches_the_socket
);
