//! SDK compatibility: the official Novu Python SDK (`novu-py`, pinned in `tests/sdk/requirements.txt`)
//! drives a server in the `novu` wire profile. Each script in `tests/sdk/` asserts what the SDK needs
//! (status codes, envelopes, field names and types, error models) and exits non-zero on a failure.

use tidings::config::WireProfile;

use crate::support::{self, Backend, TestApp};

/// Spawns a `novu`-profile app on `backend` and runs `tests/sdk/<script>` against it.
async fn run(backend: Backend, script: &str) {
    if backend == Backend::Postgres && support::postgres_url().is_none() {
        eprintln!("skipped: TIDINGS_TEST_POSTGRES_URL is not set");
        return;
    }
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    support::sdk::run_script(&app, script).await;
}

/// One module per script, with a test on SQLite and one on PostgreSQL.
macro_rules! sdk_test {
    ($name:ident, $script:literal) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                run(Backend::Sqlite, $script).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                run(Backend::Postgres, $script).await;
            }
        }
    };
}

sdk_test!(subscribers, "subscribers.py");
sdk_test!(integrations, "integrations.py");
sdk_test!(notifications, "notifications.py");
