//! A local HTTP receiver standing in for a provider's API: it records every request (method, path, query,
//! headers, body) and answers with scripted responses, so a test can check the request exactly as the real
//! API would and make the "provider" fail, throttle or succeed.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// Path without the query.
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON (panics when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as `application/x-www-form-urlencoded` pairs.
    pub fn form(&self) -> Vec<(String, String)> {
        form_urlencoded::parse(&self.body).into_owned().collect()
    }

    /// The first value of form field `name`.
    pub fn form_value(&self, name: &str) -> Option<String> {
        self.form()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: String::new(),
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    /// Answers used in order, one per request; when empty, `fallback`.
    queue: VecDeque<Reply>,
    fallback: Option<Reply>,
    /// How long every answer waits before it is sent.
    delay: Duration,
}

/// A receiver listening on `127.0.0.1:<random port>` until dropped.
pub struct Receiver {
    pub url: String,
    state: Arc<Mutex<State>>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl Receiver {
    /// Starts a receiver that answers `200 {"id": "msg-1"}` unless told otherwise.
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = shared.clone();
                async move {
                    let (reply, delay) = {
                        let mut s = state.lock().unwrap();
                        s.received.push(Received {
                            method: method.to_string(),
                            path: uri.path().to_owned(),
                            query: uri.query().map(str::to_owned),
                            headers,
                            body,
                            at: Instant::now(),
                        });
                        (s.queue.pop_front().or_else(|| s.fallback.clone()), s.delay)
                    };
                    tokio::time::sleep(delay).await;
                    let reply = reply
                        .unwrap_or_else(|| Reply::json(200, serde_json::json!({"id": "msg-1"})));
                    respond(reply)
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await
                .ok();
        });
        Self {
            url,
            state,
            _shutdown: tx,
        }
    }

    /// Queues answers for the next requests, in order.
    pub fn reply(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.lock().unwrap().queue.extend(replies);
    }

    /// The answer for every request once the queue is empty.
    pub fn always(&self, reply: Reply) {
        self.state.lock().unwrap().fallback = Some(reply);
    }

    /// Makes every answer wait `delay` (a slow provider or endpoint).
    pub fn delay(&self, delay: Duration) {
        self.state.lock().unwrap().delay = delay;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    /// Waits (up to 20 s) until at least `n` requests arrived, and returns them.
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.requests();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "expected {n} request(s), got {}: {:?}",
                got.len(),
                got.iter()
                    .map(|r| format!("{} {}", r.method, r.path))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn respond(reply: Reply) -> Response {
    let mut resp = (
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        reply.body,
    )
        .into_response();
    for (k, v) in reply.headers {
        resp.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            axum::http::HeaderValue::from_str(&v).unwrap(),
        );
    }
    resp
}
