//! A subscriber deleted and created again under the same subscriberId, through the official Inbox client
//! `@novu/js` and its socket (`tests/sdk-ts/erasure.mjs`): the first one's session ends and its socket hears
//! nothing of the second; the second's list, counts and socket hold its own messages only.

use tidings::config::WireProfile;

use crate::support::{self, Backend, TestApp};

async fn run(backend: Backend) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    if let Err(out) = support::sdk::run_node(&app, "erasure.mjs", &[]).await {
        panic!("{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    run(Backend::Sqlite).await;
}

crate::postgres_test!(postgres, run(Backend::Postgres));
