//! A local webhook receiver for the delivery benchmarks (`BENCH_ONLY=deliveries` and `BENCH_ONLY=webhooks`
//! bench/run.sh): answers every POST with `200 {"id": "<n>"}` and counts them. For the outbound webhooks
//! (Standard Webhooks) it also keeps the distinct `webhook-id` values it saw, so that a message delivered twice
//! shows, and the headers and body of the last such request, so that the signature can be checked.
//!
//!   `GET /count`    how many POSTs arrived
//!   `GET /distinct` how many distinct `webhook-id` values they carried (requests without one are not counted)
//!   `GET /last`     `{"id", "timestamp", "signature", "body"}` of the last POST with a `webhook-id` (`{}` before)
//!
//!     cargo run --release --example bench_receiver -- 127.0.0.1:4999

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::get;
use axum::Router;
use serde_json::json;

/// The last webhook request: `webhook-id`, `webhook-timestamp`, `webhook-signature` and the body as received.
type Last = (String, String, String, Bytes);

#[derive(Default)]
struct Seen {
    count: AtomicU64,
    ids: Mutex<HashSet<String>>,
    last: Mutex<Option<Last>>,
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:4999".to_owned());
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route(
            "/count",
            get(|State(s): State<Arc<Seen>>| async move {
                s.count.load(Ordering::Relaxed).to_string()
            }),
        )
        .route(
            "/distinct",
            get(|State(s): State<Arc<Seen>>| async move {
                s.ids.lock().unwrap().len().to_string()
            }),
        )
        .route(
            "/last",
            get(|State(s): State<Arc<Seen>>| async move {
                let last = match &*s.last.lock().unwrap() {
                    Some((id, timestamp, signature, body)) => json!({
                        "id": id,
                        "timestamp": timestamp,
                        "signature": signature,
                        "body": String::from_utf8_lossy(body),
                    }),
                    None => json!({}),
                };
                ([("content-type", "application/json")], last.to_string())
            }),
        )
        .fallback(
            |State(s): State<Arc<Seen>>, headers: HeaderMap, body: Bytes| async move {
                if let Some(id) = headers.get("webhook-id").and_then(|v| v.to_str().ok()) {
                    let mut ids = s.ids.lock().unwrap();
                    if !ids.contains(id) {
                        ids.insert(id.to_owned());
                    }
                    drop(ids);
                    *s.last.lock().unwrap() = Some((
                        id.to_owned(),
                        header(&headers, "webhook-timestamp"),
                        header(&headers, "webhook-signature"),
                        body,
                    ));
                }
                let n = s.count.fetch_add(1, Ordering::Relaxed) + 1;
                (
                    [("content-type", "application/json")],
                    format!("{{\"id\":\"{n}\"}}"),
                )
            },
        )
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("bench receiver listening on {addr}");
    axum::serve(listener, app).await
}
