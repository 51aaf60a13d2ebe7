//! The Novu Inbox API (`POST /v1/inbox/session`, `/v1/inbox/*`) driven by the official headless Inbox client,
//! `@novu/js` (pinned in `tests/sdk-ts/package-lock.json`), in `tests/sdk-ts/inbox.mjs`: the session and its
//! HMAC, the list, its filters and paging, the counts, every action and its effect, the state seen with the
//! API key, isolation between subscribers and between environments (a second environment's key is passed as
//! `TIDINGS_KEY_B`), and the subscriber's preferences.

use tidings::config::WireProfile;

use crate::support::{self, Backend, TestApp};

/// Spawns a `novu`-profile app on `backend` with a second environment and runs `inbox.mjs` against it.
async fn run(backend: Backend) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let key_b = app.second_environment("Production").await;
    if let Err(out) = support::sdk::run_node(&app, "inbox.mjs", &[("TIDINGS_KEY_B", key_b)]).await {
        panic!("{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    run(Backend::Sqlite).await;
}

crate::postgres_test!(postgres, run(Backend::Postgres));
