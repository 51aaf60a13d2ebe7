//! A local webhook receiver for the delivery benchmark (`BENCH_ONLY=deliveries bench/run.sh`): answers every
//! POST with `200 {"id": "<n>"}` and counts them; `GET /count` returns how many arrived.
//!
//!     cargo run --release --example bench_receiver -- 127.0.0.1:4999

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::Router;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:4999".to_owned());
    let count = Arc::new(AtomicU64::new(0));
    let app =
        Router::new()
            .route(
                "/count",
                get(|State(c): State<Arc<AtomicU64>>| async move {
                    c.load(Ordering::Relaxed).to_string()
                }),
            )
            .fallback(|State(c): State<Arc<AtomicU64>>| async move {
                let n = c.fetch_add(1, Ordering::Relaxed) + 1;
                (
                    [("content-type", "application/json")],
                    format!("{{\"id\":\"{n}\"}}"),
                )
            })
            .with_state(count);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("bench receiver listening on {addr}");
    axum::serve(listener, app).await
}
