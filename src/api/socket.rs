//! The Inbox's real-time socket: socket.io (protocol v5, WebSocket transport) at `/socket.io/` on the API's
//! port, as `@novu/js` dials it with `socketUrl`. A socket brings its session token in the query string
//! (`?token=`); a socket without a valid one, from a page of an origin not allowed, or past the process's
//! cap of sockets is refused before its upgrade ([`refuse_without_session`]), and one whose subscriber is gone
//! is disconnected. A subscriber's socket past its cap closes its oldest ([`SocketLimits`]), and a socket
//! ended at the namespace level loses its connection ([`close_transport`]). Each socket joins its
//! subscriber's room (the subscriber is online while it has a socket here) and the room of its session's
//! context within it: a socket hears only of the messages whose context keys are exactly its session's, and
//! its counts are of those (Novu's multi-tenant Inbox).
//!
//! [`dispatch`] hears the store's announcements (`store::inbox_events`, from every process) and tells the
//! rooms this process holds: `notification_received` with the new message, then `unseen_count_changed` and
//! `unread_count_changed` with the subscriber's counts — after a message is created, and after any change of
//! its read, seen or archived state, whichever route made it. A subscriber whose last socket on a process
//! closes is recorded offline and announced so; a process that still holds one of its sockets records it
//! online again, so that it stays online while any instance holds a socket of it. A process that stops
//! without closing its sockets (a crash) cannot say so: the presence loop (`service::inbox_socket`) refreshes a
//! heartbeat of the subscribers this process holds ([`Held`]), and records offline the subscribers whose
//! heartbeat is stale. A snooze that is over is ended by a sweep there and its message sent again, as Novu
//! re-delivers it. What the socket reads and records is in `service::inbox_socket`; each payload it sends is
//! a typed `…Out` below.
//!
//! Sessions that end close their sockets on every process: a deleted subscriber's room is disconnected, and
//! when an environment's session epoch is raised every socket whose token is of an older epoch is
//! ([`close_older_sessions`], on the announcement). The upgrade's check stays free of database reads: the
//! epoch is compared at connect, which reads the subscriber anyway, and the heartbeat compares the epochs of
//! the environments it holds sockets of, so that a raise whose announcement this process did not hear (made
//! by the command line, or lost) closes their sockets within a heartbeat.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use socketioxide::extract::SocketRef;
use socketioxide::layer::SocketIoLayer;
use socketioxide::socket::{DisconnectReason, Sid};
use socketioxide::{SocketIo, TransportType};
use tokio::sync::broadcast::error::RecvError;

use super::v2::preferences::InboxWorkflowOut;
use super::wire::IsoTime;
use crate::api::inbox::InboxSubscriberOut;
use crate::domain::{EnvironmentId, SubscriberRef};
use crate::service::inbox_notifications::InboxMessage;
use crate::service::inbox_session::{self, UnreadCounts, INBOX_COUNT_CAP};
use crate::service::inbox_socket;
use crate::store::inbox_events::{Ended, InboxEvent};
use crate::store::Store;

/// Where the socket is served (socketioxide's default path). It answers the path and every path below it.
const SOCKET_PATH: &str = "/socket.io/";

/// Whether socketioxide answers `path`: `/socket.io` and everything under `/socket.io/`, as engine.io
/// matches its path.
fn is_socket_path(path: &str) -> bool {
    path.strip_prefix(SOCKET_PATH.trim_end_matches('/'))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The caps on the Inbox's sockets, declared with the other settings (`TIDINGS_MAX_SOCKETS`, …).
pub use crate::config::SocketLimits;

/// Refuses a socket before its WebSocket upgrade, so that a refused socket costs neither storage nor a held
/// connection: from a browser page of an origin `TIDINGS_INBOX_ORIGINS` does not list (403; no `Origin`, as
/// from a server, is let through, as on the Inbox's routes); whose session token is missing, forged or
/// expired (401: the signature and expiry are checked without a database read); and past the cap of open
/// sockets (503). A socket upgraded holds its slot until its connection closes, counted in
/// `tidings_sockets_open`. (A token that verifies but whose subscriber is gone is refused at connect, with a
/// read.)
pub async fn refuse_without_session(
    axum::extract::State(state): axum::extract::State<super::AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    if !is_socket_path(req.uri().path()) {
        return next.run(req).await;
    }
    if req
        .headers()
        .get(header::ORIGIN)
        .is_some_and(|origin| !state.inbox_origins.allow(origin))
    {
        return refusal(
            &state,
            StatusCode::FORBIDDEN,
            "The socket's origin is not one of TIDINGS_INBOX_ORIGINS",
        );
    }
    let token = token_of(req.uri());
    let now = crate::domain::Timestamp::now();
    if crate::domain::session::SessionToken::verify(&token, state.store.cipher(), now).is_none() {
        return refusal(
            &state,
            StatusCode::UNAUTHORIZED,
            "The socket needs a valid Inbox session token (?token=)",
        );
    }
    // Served by `server::serve`, a request asking for an upgrade carries its connection's handle.
    let upgrade = req.extensions().get::<crate::server::Upgrade>().cloned();
    let slot = match upgrade {
        Some(_) => match state.socket_slots.clone().try_acquire_owned() {
            Ok(slot) => Some(slot),
            Err(_) => {
                let refused = REFUSED_AT_CAP.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if refused.is_power_of_two() {
                    tracing::warn!(
                        max = state.socket_limits.max,
                        refused,
                        "socket cap reached (TIDINGS_MAX_SOCKETS); refusing new sockets"
                    );
                }
                return refusal(
                    &state,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Too many sockets are open on this server; try again later",
                );
            }
        },
        None => None,
    };
    let resp = next.run(req).await;
    if let (StatusCode::SWITCHING_PROTOCOLS, Some(upgrade), Some(slot)) =
        (resp.status(), upgrade, slot)
    {
        upgrade.hold((
            slot,
            crate::metrics::Open::new(crate::metrics::SOCKETS_OPEN),
        ));
    }
    resp
}

/// Sockets refused at the cap since start (their warning is logged at powers of two).
static REFUSED_AT_CAP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The error answer of a refused socket; its path is without the query, which holds the token.
fn refusal(
    state: &super::AppState,
    status: axum::http::StatusCode,
    message: &str,
) -> axum::response::Response {
    let ctx = super::wire::RequestContext {
        profile: state.profile,
        path: axum::http::uri::PathAndQuery::from_static(SOCKET_PATH),
    };
    super::wire::within(Some(ctx), || {
        super::error::error_response(status, message, serde_json::Map::new())
    })
}

/// The `token` query parameter of a socket's request (empty when absent).
fn token_of(uri: &axum::http::Uri) -> String {
    uri.query()
        .and_then(|q| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "token")
                .map(|(_, v)| v.into_owned())
        })
        .unwrap_or_default()
}

/// Closes every socket of this process (it is stopping) and records their subscribers offline, announcing
/// it so that another instance holding one of their sockets records them online again.
pub async fn close(io: &SocketIo, store: &Store) {
    let subscribers = held_subscribers(io);
    io.close().await;
    inbox_socket::went_offline(store, &subscribers).await;
}

/// The subscribers (environment, record) whose sockets `io` holds, sorted, each once.
fn held_subscribers(io: &SocketIo) -> Vec<(EnvironmentId, SubscriberRef)> {
    let mut held: Vec<(EnvironmentId, SubscriberRef)> = io
        .sockets()
        .iter()
        .flat_map(|s| s.rooms())
        .filter_map(|r| subscriber_of_room(&r))
        .collect();
    held.sort_unstable();
    held.dedup();
    held
}

/// This process's sockets, as the presence loop (`service::inbox_socket::spawn_loops`) asks about them.
pub struct Held {
    io: SocketIo,
    store: Store,
}

impl Held {
    pub fn new(io: SocketIo, store: Store) -> Self {
        Self { io, store }
    }
}

impl inbox_socket::HeldSockets for Held {
    fn held(&self) -> Vec<(EnvironmentId, SubscriberRef)> {
        held_subscribers(&self.io)
    }

    fn close_older_sessions(&self, epochs: &HashMap<EnvironmentId, i64>) {
        close_older_sessions(&self.store, &self.io, epochs);
    }
}

/// The layer that serves `/socket.io/` and its handle, and the task that tells its sockets what changed
/// (until the store closes). Its loops are `service::inbox_socket::spawn_loops`.
pub fn layer(store: Store, limits: SocketLimits) -> (SocketIoLayer, SocketIo) {
    let (layer, io) = SocketIo::builder()
        .transports([TransportType::Websocket])
        .ping_interval(Duration::from_secs(25))
        .ping_timeout(Duration::from_secs(20))
        // A connection that joins no namespace in time (it asked for another one, or for none) is closed:
        // `@novu/js` asks as soon as the connection opens.
        .connect_timeout(CONNECT_TIMEOUT)
        // Clients send nothing but pings: any packet beyond a few bytes is abuse.
        .max_payload(4 * 1024)
        .build_layer();
    let connect_store = store.clone();
    let held = Arc::new(Rooms::default());
    io.ns("/", move |socket: SocketRef, io: SocketIo| {
        let (store, held) = (connect_store.clone(), held.clone());
        async move { connect(store, io, held, limits.per_subscriber, socket).await }
    });
    tokio::spawn(dispatch(store, io.clone()));
    (layer, io)
}

/// Disconnects every socket of this process whose session is of an epoch older than its environment's in
/// `epochs` (environment id → epoch). The token is read again from the socket's request, signature and all:
/// no database read.
fn close_older_sessions(store: &Store, io: &SocketIo, epochs: &HashMap<EnvironmentId, i64>) {
    let now = crate::domain::Timestamp::now();
    for socket in io.sockets() {
        let token = token_of(&socket.req_parts().uri);
        let Some(t) = crate::domain::session::SessionToken::verify(&token, store.cipher(), now)
        else {
            continue;
        };
        if epochs
            .get(&t.tenant.environment_id)
            .is_some_and(|&epoch| t.epoch < epoch)
        {
            let _ = socket.disconnect();
        }
    }
}

/// The room of a subscriber's sockets: its record's, not its reusable subscriberId's.
fn room(environment_id: &EnvironmentId, subscriber: &SubscriberRef) -> String {
    format!("{environment_id}\n{subscriber}")
}

/// The room, within the subscriber's, of its sockets whose session has the context `context_keys`: the
/// keys' JSON array, a newline and the subscriber's room. It starts with `[` (a subscriber's room starts with
/// its environment's id) and its first newline ends the JSON (a JSON string holds none), whatever the
/// subscriberId holds.
fn context_room(subscriber_room: &str, context_keys: &[String]) -> String {
    let keys = serde_json::to_string(context_keys).expect("strings serialize");
    format!("{keys}\n{subscriber_room}")
}

/// `(environment, subscriber record)` of a subscriber's room; `None` for a context room.
fn subscriber_of_room(room: &str) -> Option<(EnvironmentId, SubscriberRef)> {
    if room.starts_with('[') {
        return None;
    }
    let (env, subscriber) = room.split_once('\n')?;
    Some((EnvironmentId::from(env), SubscriberRef::from(subscriber)))
}

/// The contexts of the sockets this process holds in a subscriber's room (their keys, sorted), each once.
fn contexts_held(io: &SocketIo, subscriber_room: &str) -> Vec<Vec<String>> {
    let mut held: Vec<Vec<String>> = io
        .to(subscriber_room.to_owned())
        .sockets()
        .iter()
        .flat_map(|s| s.rooms())
        .filter(|r| r.starts_with('['))
        .filter_map(|r| {
            let (keys, of) = r.split_once('\n')?;
            (of == subscriber_room)
                .then(|| serde_json::from_str(keys).ok())
                .flatten()
        })
        .collect();
    held.sort_unstable();
    held.dedup();
    held
}

/// How long a connection has to join the namespace after it opens.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after a socket ends at the namespace level its connection is closed: time for the client to read
/// why (`41`: a client told so does not reconnect), none for one that ignores it.
pub const TRANSPORT_GRACE: Duration = Duration::from_secs(1);

/// The sockets this process holds of each subscriber (by its room), oldest first.
#[derive(Default)]
struct Rooms(Mutex<HashMap<String, Vec<SocketRef>>>);

impl Rooms {
    /// Adds a subscriber's new socket. Returns whether it is the subscriber's only one here, and its oldest
    /// when the subscriber now has more than `cap` (taken out: to be closed).
    fn add(&self, room: &str, socket: SocketRef, cap: usize) -> (bool, Option<SocketRef>) {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let sockets = held.entry(room.to_owned()).or_default();
        sockets.push(socket);
        let oldest = (sockets.len() > cap.max(1)).then(|| sockets.remove(0));
        (sockets.len() == 1, oldest)
    }

    /// Takes a subscriber's socket out; whether it was the subscriber's last one here.
    fn remove(&self, room: &str, id: Sid) -> bool {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(sockets) = held.get_mut(room) else {
            return false;
        };
        let Some(at) = sockets.iter().position(|s| s.id == id) else {
            return false;
        };
        sockets.remove(at);
        if !sockets.is_empty() {
            return false;
        }
        held.remove(room);
        true
    }
}

/// Closes the connection of a socket that ended at the namespace level (refused, disconnected by the server,
/// or left by the client), [`TRANSPORT_GRACE`] later. socket.io keeps a connection open after its namespace
/// socket ends, for as long as the client answers pings; nothing here needs it.
fn close_transport(socket: &SocketRef) {
    let upgrade = socket
        .req_parts()
        .extensions
        .get::<crate::server::Upgrade>()
        .cloned();
    if let Some(upgrade) = upgrade {
        tokio::spawn(async move {
            tokio::time::sleep(TRANSPORT_GRACE).await;
            upgrade.close();
        });
    }
}

/// Admits a socket whose token names a subscriber: it joins the subscriber's room, and the subscriber goes
/// online with its first socket here; past [`SocketLimits::per_subscriber`] its oldest socket here is
/// closed. Any other socket is disconnected and its connection closed. Opening and closing are logged
/// (environment, subscriber record and socket id; never the token).
async fn connect(
    store: Store,
    io: SocketIo,
    held: Arc<Rooms>,
    per_subscriber: usize,
    socket: SocketRef,
) {
    let token = token_of(&socket.req_parts().uri);
    let who = match inbox_session::authenticate(&store, &token).await {
        Ok(Some(who)) => who,
        Ok(None) => {
            close_transport(&socket);
            let _ = socket.disconnect();
            return;
        }
        Err(e) => {
            tracing::warn!(error = ?e, "an Inbox socket could not be authenticated");
            close_transport(&socket);
            let _ = socket.disconnect();
            return;
        }
    };
    let (env, subscriber) = (who.tenant.environment_id, who.subscriber_ref);
    let subscriber_room = room(&env, &subscriber);
    socket.join(context_room(
        &subscriber_room,
        who.context_keys.as_deref().unwrap_or_default(),
    ));
    socket.join(subscriber_room.clone());
    let closing = (
        store.clone(),
        held.clone(),
        env.clone(),
        subscriber.clone(),
        subscriber_room.clone(),
    );
    socket.on_disconnect(move |s: SocketRef, reason: DisconnectReason| {
        let (store, held, env, subscriber, room) = closing.clone();
        async move {
            if matches!(
                reason,
                DisconnectReason::ClientNSDisconnect | DisconnectReason::ServerNSDisconnect
            ) {
                close_transport(&s);
            }
            tracing::info!(env = env.as_str(), subscriber = %subscriber, socket = %s.id, %reason, "Inbox socket closed");
            // Offline when this was its last socket here; other processes holding one say otherwise.
            if held.remove(&room, s.id) {
                inbox_socket::went_offline(&store, &[(env.clone(), subscriber)]).await;
            }
        }
    });
    let (first, oldest) = held.add(&subscriber_room, socket.clone(), per_subscriber);
    tracing::info!(env = env.as_str(), subscriber = %subscriber, socket = %socket.id, "Inbox socket opened");
    if let Some(oldest) = oldest {
        tracing::info!(env = env.as_str(), subscriber = %subscriber, socket = %oldest.id, cap = per_subscriber, "closing the subscriber's oldest socket: one more than TIDINGS_MAX_SOCKETS_PER_SUBSCRIBER opened");
        let _ = oldest.disconnect();
    }
    // Ended before its handler was set (while it was authenticated, or even before socketioxide marked it
    // connected, which it then does all the same), so the handler does not run.
    if !socket.connected() || io.get_socket(socket.id).is_none() {
        socket.leave_all();
        held.remove(&subscriber_room, socket.id);
        close_transport(&socket);
        return;
    }
    if first {
        inbox_socket::set_online(&store, &env, &subscriber, true).await;
    }
}

/// Tells this process's sockets what the announcements say, until the store closes.
async fn dispatch(store: Store, io: SocketIo) {
    let mut rx = store.inbox_events().subscribe();
    loop {
        let events = match rx.recv().await {
            Ok(events) => events,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(
                    skipped = n,
                    "the Inbox socket fell behind; some counts are late"
                );
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        tell(&store, &io, &events).await;
    }
}

/// Rooms told at once (each a few queries).
const TELLING: usize = 16;

/// Tells each room this process holds what its events say, [`TELLING`] rooms at a time.
async fn tell(store: &Store, io: &SocketIo, events: &[InboxEvent]) {
    let mut rooms: Vec<(String, Vec<InboxEvent>)> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut epochs: HashMap<EnvironmentId, i64> = HashMap::new();
    for e in events {
        let room = room(&e.environment_id, &e.subscriber_ref);
        match e.ended {
            Some(Ended::Subscriber) => {
                let _ = io.to(room).disconnect().await;
                continue;
            }
            Some(Ended::Epoch(epoch)) => {
                let at = epochs.entry(e.environment_id.clone()).or_default();
                *at = epoch.max(*at);
                continue;
            }
            None => {}
        }
        if io.to(room.clone()).sockets().is_empty() {
            continue;
        }
        match at.get(&room) {
            Some(&i) => rooms[i].1.push(e.clone()),
            None => {
                at.insert(room.clone(), rooms.len());
                rooms.push((room, vec![e.clone()]));
            }
        }
    }
    if !epochs.is_empty() {
        close_older_sessions(store, io, &epochs);
    }
    let mut telling = tokio::task::JoinSet::new();
    for (room, events) in rooms {
        if telling.len() >= TELLING {
            report(telling.join_next().await);
        }
        telling.spawn(tell_room(store.clone(), io.clone(), room, events));
    }
    while let Some(done) = telling.join_next().await {
        report(Some(done));
    }
}

fn report(done: Option<Result<crate::error::Result<()>, tokio::task::JoinError>>) {
    match done {
        Some(Ok(Err(e))) => tracing::warn!(error = ?e, "an Inbox event was not sent"),
        Some(Err(e)) => tracing::warn!(error = ?e, "telling an Inbox room failed"),
        _ => {}
    }
}

/// Sends a subscriber's room its new messages, in order, then its counts once (when a message changed):
/// each to the sockets of the message's context, each context's counts to its sockets.
async fn tell_room(
    store: Store,
    io: SocketIo,
    room: String,
    events: Vec<InboxEvent>,
) -> crate::error::Result<()> {
    let mut changed = None;
    for e in &events {
        if e.offline {
            // Recorded offline by another process (or by this one, for a socket that joined since); a
            // socket closing is no longer connected while it leaves.
            if io.to(room.clone()).sockets().iter().any(|o| o.connected()) {
                let env = e.environment_id.clone();
                inbox_socket::set_online(&store, &env, &e.subscriber_ref, true).await;
            }
            continue;
        }
        if let Some(id) = &e.created {
            let env = e.environment_id.clone();
            if let Some(m) = inbox_socket::message(&store, &env, &e.subscriber_ref, id).await? {
                let to = context_room(&room, &m.message.context_keys);
                let _ = io
                    .to(to)
                    .emit("notification_received", &NotificationReceivedOut::from(m))
                    .await;
            }
        }
        changed = Some(e);
    }
    let Some(e) = changed else {
        return Ok(());
    };
    let env = e.environment_id.clone();
    for context_keys in contexts_held(&io, &room) {
        let (unseen, unread) =
            inbox_socket::counts(&store, &env, &e.subscriber_ref, &context_keys).await?;
        let to = context_room(&room, &context_keys);
        let _ = io
            .to(to.clone())
            .emit("unseen_count_changed", &UnseenCountOut::of(unseen))
            .await;
        let _ = io
            .to(to)
            .emit("unread_count_changed", &UnreadCountChangedOut::from(unread))
            .await;
    }
    Ok(())
}

// The socket's payloads. Their fields are in the order of their names, as the socket sent them when they
// were written as JSON values.

/// `notification_received`: the new message.
#[derive(Debug, Serialize)]
pub struct NotificationReceivedOut {
    pub message: SocketMessageOut,
}

impl From<InboxMessage> for NotificationReceivedOut {
    fn from(m: InboxMessage) -> Self {
        Self {
            message: SocketMessageOut::from(m),
        }
    }
}

/// A message as the socket sends it: the stored message's own fields (Novu sends its document, which
/// `@novu/js` maps itself), with its workflow and subscriber.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SocketMessageOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub archived: bool,
    pub archived_at: Option<IsoTime>,
    pub avatar: Option<String>,
    pub channel: &'static str,
    pub content: String,
    pub created_at: IsoTime,
    /// Always an object: @novu/js reads `cta.action` of every message it is sent.
    pub cta: Value,
    pub data: Option<Value>,
    pub delivered_at: [IsoTime; 1],
    pub first_seen_date: Option<IsoTime>,
    pub last_read_date: Option<IsoTime>,
    pub read: bool,
    pub seen: bool,
    pub severity: crate::domain::workflow::Severity,
    pub snoozed_until: Option<IsoTime>,
    pub subject: Option<String>,
    pub subscriber: SocketSubscriberOut,
    pub tags: Vec<String>,
    pub transaction_id: String,
    pub workflow: Option<InboxWorkflowOut>,
}

/// The subscriber of a message the socket sends.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SocketSubscriberOut {
    #[serde(rename = "_id")]
    pub id: String,
    pub avatar: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub subscriber_id: String,
}

impl From<InboxMessage> for SocketMessageOut {
    fn from(
        InboxMessage {
            message: m,
            workflow,
            subscriber,
        }: InboxMessage,
    ) -> Self {
        let now = crate::domain::Timestamp::now();
        let to = InboxSubscriberOut::of(&m, subscriber.as_deref());
        Self {
            subscriber: SocketSubscriberOut {
                id: to.id,
                avatar: to.avatar,
                first_name: to.first_name,
                last_name: to.last_name,
                subscriber_id: to.subscriber_id,
            },
            id: m.id.into(),
            archived: m.archived,
            archived_at: m.archived_at.map(IsoTime),
            avatar: m.avatar,
            channel: crate::domain::Channel::InApp.as_str(),
            content: m.content,
            created_at: IsoTime(m.created_at),
            cta: if m.cta.is_object() {
                m.cta
            } else {
                Value::Object(Default::default())
            },
            data: m.data,
            delivered_at: [IsoTime(m.created_at)],
            first_seen_date: m.first_seen_date.map(IsoTime),
            last_read_date: m.last_read_date.filter(|_| m.read).map(IsoTime),
            read: m.read,
            seen: m.seen,
            severity: m.severity,
            snoozed_until: m.snoozed_until.filter(|t| t.0 > now.0).map(IsoTime),
            subject: m.subject,
            tags: m.tags,
            transaction_id: m.transaction_id,
            workflow: workflow.as_deref().map(InboxWorkflowOut::from),
        }
    }
}

/// `unseen_count_changed`: the unseen count, capped.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnseenCountOut {
    pub has_more: bool,
    pub unseen_count: i64,
}

impl UnseenCountOut {
    /// Of `unseen`, counted up to one past the cap.
    fn of(unseen: i64) -> Self {
        Self {
            has_more: unseen > INBOX_COUNT_CAP,
            unseen_count: unseen.min(INBOX_COUNT_CAP),
        }
    }
}

/// `unread_count_changed`: the unread count, in all and by severity.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnreadCountChangedOut {
    pub counts: UnreadCountsOut,
    pub has_more: bool,
    pub unread_count: i64,
}

#[derive(Debug, Serialize)]
pub struct UnreadCountsOut {
    pub severity: SeverityCountsOut,
    pub total: i64,
}

/// Unread messages by severity.
#[derive(Debug, Serialize)]
pub struct SeverityCountsOut {
    pub high: i64,
    pub low: i64,
    pub medium: i64,
    pub none: i64,
}

impl From<UnreadCounts> for UnreadCountChangedOut {
    fn from(unread: UnreadCounts) -> Self {
        let [high, medium, low, none] = unread.severity;
        Self {
            counts: UnreadCountsOut {
                severity: SeverityCountsOut {
                    high,
                    low,
                    medium,
                    none,
                },
                total: unread.total,
            },
            has_more: unread.total >= INBOX_COUNT_CAP,
            unread_count: unread.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_check_covers_every_path_the_socket_answers() {
        for path in ["/socket.io", "/socket.io/", "/socket.io/x", "/socket.io//"] {
            assert!(is_socket_path(path), "{path}");
        }
        for path in ["/socket.iox", "/v1/socket.io/", "/", "/socket"] {
            assert!(!is_socket_path(path), "{path}");
        }
    }

    /// The counts' payloads are typed, with their fields in the order of their names, as the socket sent
    /// them when they were written as JSON values (whose keys are sorted).
    #[test]
    fn the_count_payloads_keep_their_wire_form() {
        let unseen = serde_json::to_string(&UnseenCountOut::of(INBOX_COUNT_CAP + 1)).unwrap();
        assert_eq!(
            unseen,
            format!(r#"{{"hasMore":true,"unseenCount":{INBOX_COUNT_CAP}}}"#)
        );
        let unread = UnreadCountChangedOut::from(UnreadCounts {
            total: 7,
            severity: [1, 2, 3, 1],
        });
        assert_eq!(
            serde_json::to_string(&unread).unwrap(),
            r#"{"counts":{"severity":{"high":1,"low":3,"medium":2,"none":1},"total":7},"hasMore":false,"unreadCount":7}"#
        );
        let sorted = serde_json::to_value(&unread).unwrap().to_string();
        assert_eq!(serde_json::to_string(&unread).unwrap(), sorted);
    }

    #[test]
    fn rooms_tell_subscribers_and_contexts_apart() {
        // A context key may hold newlines and brackets.
        let subscriber = SubscriberRef::from("65a1b2c3d4e5f60718293a4e");
        let sub = room(&"65a1b2c3d4e5f60718293a4d".into(), &subscriber);
        assert_eq!(
            subscriber_of_room(&sub),
            Some(("65a1b2c3d4e5f60718293a4d".into(), subscriber))
        );
        let ctx = context_room(&sub, &["tenant:a\nb".to_owned()]);
        assert_eq!(subscriber_of_room(&ctx), None);
        let (keys, of) = ctx.split_once('\n').unwrap();
        assert_eq!(of, sub);
        assert_eq!(
            serde_json::from_str::<Vec<String>>(keys).unwrap(),
            ["tenant:a\nb"]
        );
        assert_eq!(context_room(&sub, &[]), format!("[]\n{sub}"));
    }
}
