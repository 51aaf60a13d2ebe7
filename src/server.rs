//! The HTTP/1.1 server: accepts connections up to a cap, times out slow or idle clients, and shuts down
//! gracefully (docs/decisions.md "Connections, timeouts and shutdown").
//!
//! - **Connection cap.** At most `max_connections` are open, so the process never runs out of descriptors
//!   (the database and the providers need them too). At the cap a new connection takes the place of the
//!   one that has been idle longest (no request under way); when every connection is busy it is closed.
//! - **Header and idle timeout.** A connection must deliver a complete request head within `header_timeout`
//!   of opening or of its previous response, else it is closed: one timer (hyper's) covers a half-sent head
//!   and a keep-alive connection left idle.
//! - **Body and request timeouts** are applied per request by the API's limits layer (`api::limits`).
//! - **Upgrades.** A connection that upgrades (the Inbox's WebSocket) leaves the connection cap: what
//!   admitted it holds its own slot for as long as the connection lives ([`Upgrade::hold`]), and may close it
//!   at any time ([`Upgrade::close`]). Each request that asks for an upgrade carries the [`Upgrade`] handle
//!   of its connection in its extensions.
//! - **Shutdown.** On the signal the listener closes (new connections are refused) and readiness answers
//!   503. A request under way finishes and its response says `Connection: close`; a connection without one
//!   is closed once it has been quiet for [`QUIET_BEFORE_CLOSE`], so a request a client has just written
//!   still gets its answer. Whatever is left at `shutdown_timeout` is dropped.

use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tower::Service;

/// How long a connection with no request under way must have been quiet before shutdown closes it.
pub const QUIET_BEFORE_CLOSE: Duration = Duration::from_millis(500);

/// The server's connection settings, declared with the other settings (`TIDINGS_MAX_CONNECTIONS`, …).
pub use crate::config::ServerOptions;

/// Serves `app` on `listener` until `signal` resolves, then drains (see the module's comment). `draining` is
/// set when the signal arrives, before the listener closes (readiness reads it).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    options: ServerOptions,
    draining: Arc<AtomicBool>,
    signal: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let open = Arc::new(Open::default());
    let drain = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut signal = pin!(signal);
    let mut refused = 0u64;
    loop {
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            _ = &mut signal => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors or memory: wait rather than spin; a client's aborted handshake: go on.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            // At the cap: the connection that has been idle longest makes room, if there is one. The loop
            // waits for that slot itself, so no later connection can take it first.
            Err(_) if open.evict_idlest() => {
                match tokio::time::timeout(EVICTION_WAIT, slots.clone().acquire_owned()).await {
                    Ok(Ok(slot)) => slot,
                    _ => continue,
                }
            }
            Err(_) => {
                refused += 1;
                if refused.is_power_of_two() {
                    tracing::warn!(
                        max = options.max_connections,
                        refused,
                        "connection cap reached with every connection busy; closing new connections"
                    );
                }
                continue;
            }
        };
        connections.spawn(connection(
            stream,
            app.clone(),
            options.header_timeout,
            open.clone(),
            drain.clone(),
            slot,
        ));
    }
    draining.store(true, Ordering::SeqCst);
    drop(listener);
    drain.cancel();
    tracing::info!(open = connections.len(), "draining connections");
    let drained = tokio::time::timeout(options.shutdown_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = connections.len(),
            "connections still open at the shutdown deadline are dropped"
        );
        connections.shutdown().await;
    }
}

/// How long the accept loop waits for the slot of a connection it evicted.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// The open connections, for eviction at the cap.
#[derive(Default)]
struct Open {
    epoch: OnceLock<Instant>,
    next: AtomicU64,
    by_id: Mutex<HashMap<u64, Arc<Activity>>>,
}

impl Open {
    /// Milliseconds since the server's first connection.
    fn now(&self) -> u64 {
        self.epoch.get_or_init(Instant::now).elapsed().as_millis() as u64
    }

    fn add(&self) -> (u64, Arc<Activity>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity {
            quiet_since: AtomicU64::new(self.now()),
            ..Default::default()
        });
        let mut by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        by_id.insert(id, activity.clone());
        (id, activity)
    }

    fn remove(&self, id: u64) {
        let mut by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        by_id.remove(&id);
    }

    /// Tells the connection with no request under way that has been quiet longest to close; false when
    /// every connection is busy (or already told).
    fn evict_idlest(&self) -> bool {
        let by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        let idlest = by_id
            .values()
            .filter(|a| a.busy.load(Ordering::SeqCst) == 0 && !a.evict.is_cancelled())
            .min_by_key(|a| a.quiet_since.load(Ordering::SeqCst));
        match idlest {
            Some(a) => {
                a.evict.cancel();
                true
            }
            None => false,
        }
    }
}

/// What a connection's service tells its task and the eviction: requests under way and when the last one
/// ended.
#[derive(Default)]
struct Activity {
    busy: AtomicUsize,
    /// When the connection opened or a request last ended ([`Open::now`]).
    quiet_since: AtomicU64,
    /// Set to close the connection at once (it was idle when the cap was reached).
    evict: CancellationToken,
}

/// Serves one connection; on `drain`, lets it finish what is under way and closes it.
async fn connection(
    stream: TcpStream,
    app: Router,
    header_timeout: Duration,
    open: Arc<Open>,
    drain: CancellationToken,
    _slot: OwnedSemaphorePermit,
) {
    let (id, activity) = open.add();
    let _counted = crate::metrics::Open::new(crate::metrics::CONNECTIONS_OPEN);
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().ok().map(ConnectInfo);
    let upgrade = Upgrade::default();
    let stream = Closable {
        io: stream,
        upgrade: upgrade.clone(),
        closing: [None, None],
    };
    let service = ConnectionService {
        peer,
        app: RefCell::new(app),
        activity: activity.clone(),
        open: open.clone(),
        drain: drain.clone(),
        upgrade,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    // With upgrades: the Inbox's socket is a WebSocket.
    let conn = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::select! {
        _ = drained(conn, &activity, &open, drain) => {}
        _ = activity.evict.cancelled() => {}
    }
    open.remove(id);
}

/// Runs `conn` to its end; once `drain` fires, closes it when no request is under way and it has been
/// quiet for [`QUIET_BEFORE_CLOSE`].
async fn drained(
    conn: hyper::server::conn::http1::UpgradeableConnection<TokioIo<Closable>, ConnectionService>,
    activity: &Activity,
    open: &Open,
    drain: CancellationToken,
) {
    let mut conn = pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = drain.cancelled() => {}
    }
    loop {
        let quiet = open
            .now()
            .saturating_sub(activity.quiet_since.load(Ordering::SeqCst));
        if activity.busy.load(Ordering::SeqCst) == 0
            && quiet >= QUIET_BEFORE_CLOSE.as_millis() as u64
        {
            conn.as_mut().graceful_shutdown();
            break;
        }
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = tokio::time::sleep(QUIET_BEFORE_CLOSE / 5) => {}
        }
    }
    let _ = conn.await;
}

/// The router, counting the requests under way on one connection; once `drain` fires, its answers close
/// the connection. Each request carries the client's address (`ConnectInfo`, for limits by address).
struct ConnectionService {
    peer: Option<ConnectInfo<SocketAddr>>,
    /// The connection's own handle on the router: hyper calls with `&self` one request at a time (HTTP/1),
    /// so a request borrows it for the call instead of cloning the router (a shared reference count).
    app: RefCell<Router>,
    activity: Arc<Activity>,
    open: Arc<Open>,
    drain: CancellationToken,
    upgrade: Upgrade,
}

impl hyper::service::Service<hyper::Request<Incoming>> for ConnectionService {
    type Response = Response;
    type Error = Infallible;
    type Future = Served;

    fn call(&self, mut req: hyper::Request<Incoming>) -> Served {
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(peer);
        }
        if req.headers().contains_key(header::UPGRADE) {
            self.upgrade.0.asked.store(true, Ordering::Relaxed);
            req.extensions_mut().insert(self.upgrade.clone());
        }
        self.activity.busy.fetch_add(1, Ordering::SeqCst);
        let finished = Finished {
            activity: self.activity.clone(),
            open: self.open.clone(),
        };
        Served {
            inner: self.app.borrow_mut().call(req.map(Body::new)),
            drain: self.drain.clone(),
            _finished: finished,
        }
    }
}

/// A request's answer on its way (a named future: no allocation per request): the router's, with
/// `Connection: close` once the server drains. The request ends when it completes or is dropped.
struct Served {
    inner: axum::routing::future::RouteFuture<Infallible>,
    drain: CancellationToken,
    _finished: Finished,
}

impl Future for Served {
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Poll::Ready(result) = Pin::new(&mut self.inner).poll(cx) else {
            return Poll::Pending;
        };
        let mut resp = match result {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
        if self.drain.is_cancelled() {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        Poll::Ready(Ok(resp))
    }
}

/// Marks a request ended when dropped (also when the client went away and the future was dropped).
struct Finished {
    activity: Arc<Activity>,
    open: Arc<Open>,
}

impl Drop for Finished {
    fn drop(&mut self) {
        self.activity
            .quiet_since
            .store(self.open.now(), Ordering::SeqCst);
        self.activity.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection's handle for what upgrades it (the Inbox's socket), in the extensions of each of its requests
/// that asks for an upgrade.
#[derive(Clone, Default)]
pub struct Upgrade(Arc<UpgradeState>);

#[derive(Default)]
struct UpgradeState {
    /// What is kept until the connection closes.
    held: Mutex<Vec<Box<dyn Send>>>,
    /// The connection is gone: what is handed to [`Upgrade::hold`] now is dropped at once.
    gone: AtomicBool,
    /// Set by [`Upgrade::close`].
    close: CancellationToken,
    /// A request asked for an upgrade: from then on the connection's reads and writes watch `close`.
    asked: AtomicBool,
}

impl Upgrade {
    /// Keeps `guard` (a slot of a cap of its own, a gauge's count) until the connection closes.
    pub fn hold(&self, guard: impl Send + 'static) {
        let mut held = self.0.held.lock().unwrap_or_else(|e| e.into_inner());
        if !self.0.gone.load(Ordering::SeqCst) {
            held.push(Box::new(guard));
        }
    }

    /// Closes the connection: its reads and writes fail from now on, so whatever serves it (hyper, or the
    /// WebSocket it was upgraded to) lets it go, and the descriptor is closed.
    pub fn close(&self) {
        self.0.close.cancel();
    }
}

/// The connection's stream, which fails its reads and writes once its [`Upgrade`] is closed, and drops what
/// the handle holds when it is dropped (the connection is closed).
struct Closable {
    io: TcpStream,
    upgrade: Upgrade,
    /// Watch the close for reads and for writes (each side wakes its own task) once a request asked for an
    /// upgrade; ordinary connections never make them.
    closing: [Option<Pin<Box<WaitForCancellationFutureOwned>>>; 2],
}

const READ: usize = 0;
const WRITE: usize = 1;

impl Closable {
    /// An error once the connection was closed through its handle; registers `cx` to be woken by the close.
    fn closed(&mut self, side: usize, cx: &mut Context<'_>) -> std::io::Result<()> {
        let state = &self.upgrade.0;
        if !state.asked.load(Ordering::Relaxed) {
            return Ok(());
        }
        let closing = self.closing[side]
            .get_or_insert_with(|| Box::pin(state.close.clone().cancelled_owned()));
        match closing.as_mut().poll(cx) {
            Poll::Ready(()) => Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "closed by the server",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl Drop for Closable {
    fn drop(&mut self) {
        let state = &self.upgrade.0;
        let held = {
            let mut held = state.held.lock().unwrap_or_else(|e| e.into_inner());
            state.gone.store(true, Ordering::SeqCst);
            std::mem::take(&mut *held)
        };
        drop(held);
    }
}

impl AsyncRead for Closable {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if let Err(e) = this.closed(READ, cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Closable {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if let Err(e) = this.closed(WRITE, cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if let Err(e) = this.closed(WRITE, cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
