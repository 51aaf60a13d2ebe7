//! SDK compatibility: the official Novu SDKs (`novu-py`, pinned in `tests/sdk/requirements.txt`, and
//! `@novu/api`, pinned in `tests/sdk-ts/package-lock.json`) drive a server in the `novu` wire profile. Each
//! script asserts what the SDK needs (status codes, envelopes, field names and types, error models) and
//! exits non-zero on a failure. The contract scenario (`tests/sdk/contract.py`, `tests/sdk-ts/contract.mjs`)
//! calls every route through both SDKs after producing every state the engine produces. The v1 preference
//! routes, which the pinned releases no longer call, run with the last releases that do (`preferences_v1`).

use tidings::config::WireProfile;

use crate::support::receiver::Receiver;
use crate::support::smtp::SmtpServer;
use crate::support::{self, Backend, TestApp};

/// Spawns a `novu`-profile app on `backend` and runs `tests/sdk/<script>` against it.
async fn run(backend: Backend, script: &str) {
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

            crate::postgres_test!(postgres, run(Backend::Postgres, $script));
        }
    };
}

sdk_test!(subscribers, "subscribers.py");
sdk_test!(integrations, "integrations.py");
sdk_test!(workflows, "workflows.py");
sdk_test!(messages, "messages.py");
sdk_test!(trigger, "trigger.py");
sdk_test!(notifications, "notifications.py");

/// Which official SDK runs a contract scenario.
#[derive(Clone, Copy)]
enum Sdk {
    Python,
    Node,
}

/// Runs the contract scenario with `sdk` on `backend`: a `novu`-profile app, an SMTP server that accepts
/// mail (the successful email), a port nobody listens on (the failed one), and a receiver standing in for
/// the SMS, chat and push providers and the `http_request` step's endpoint.
async fn contract(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let smtp = SmtpServer::start().await;
    let receiver = Receiver::start().await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let env = [
        ("TIDINGS_SMTP_HOST", smtp.host.clone()),
        ("TIDINGS_SMTP_PORT", smtp.port.to_string()),
        ("TIDINGS_CLOSED_PORT", closed.to_string()),
        ("TIDINGS_RECEIVER_URL", receiver.url.clone()),
    ];
    let script = match sdk {
        Sdk::Python => support::sdk::run_python(&app, "contract.py", &env).await,
        Sdk::Node => support::sdk::run_node(&app, "contract.mjs", &env).await,
    };
    // The scenario's successful email really went out, and the providers at the receiver were called.
    let mut missing = Vec::new();
    if smtp.mails().is_empty() {
        missing.push("no mail reached the SMTP server".to_owned());
    }
    let paths: Vec<String> = receiver.requests().iter().map(|r| r.path.clone()).collect();
    for expected in ["/sms/", "/chat/ann", "/push", "/http/A-7"] {
        if !paths.iter().any(|p| p.starts_with(expected)) {
            missing.push(format!(
                "no request to {expected} at the receiver: {paths:?}"
            ));
        }
    }
    match script {
        Ok(()) => assert!(missing.is_empty(), "{missing:#?}"),
        Err(out) => panic!("{out}\n--- deliveries\n{missing:#?}"),
    }
}

/// Runs the v1 preference routes' scenario (`tests/sdk/preferences_v1.py`, `tests/sdk-ts/preferences_v1.mjs`)
/// with the last release of `sdk` that has methods for them (novu-py 0.3.4, @novu/api 0.0.1), on `backend`.
async fn preferences_v1(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let script = match sdk {
        Sdk::Python => support::sdk::run_python_legacy(&app, "preferences_v1.py", &[]).await,
        Sdk::Node => support::sdk::run_node(&app, "preferences_v1.mjs", &[]).await,
    };
    if let Err(out) = script {
        panic!("{out}");
    }
}

/// Runs the v1 topic routes' scenario (`tests/sdk/topics_v1.py`, `tests/sdk-ts/topics_v1.mjs`) with the last
/// release of `sdk` that has methods for them (novu-py 0.3.4, @novu/api 0.0.1), on `backend`.
async fn topics_v1(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let script = match sdk {
        Sdk::Python => support::sdk::run_python_legacy(&app, "topics_v1.py", &[]).await,
        Sdk::Node => support::sdk::run_node(&app, "topics_v1.mjs", &[]).await,
    };
    if let Err(out) = script {
        panic!("{out}");
    }
}

/// Runs the v2 subscriber notifications' scenario (`tests/sdk/notifications_v2.py`,
/// `tests/sdk-ts/notifications_v2.mjs`) with `sdk` on `backend`, with a second environment's key
/// (`TIDINGS_KEY_B`) for the cross-environment cases.
async fn notifications_v2(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let env = [("TIDINGS_KEY_B", app.second_environment("Production").await)];
    let script = match sdk {
        Sdk::Python => support::sdk::run_python(&app, "notifications_v2.py", &env).await,
        Sdk::Node => support::sdk::run_node(&app, "notifications_v2.mjs", &env).await,
    };
    if let Err(out) = script {
        panic!("{out}");
    }
}

/// A scenario (`$run`) in one SDK, on SQLite and on PostgreSQL.
macro_rules! scenario_test {
    ($name:ident, $run:ident, $sdk:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $run(Backend::Sqlite, $sdk).await;
            }

            crate::postgres_test!(postgres, $run(Backend::Postgres, $sdk));
        }
    };
}

scenario_test!(contract_py, contract, Sdk::Python);
scenario_test!(contract_ts, contract, Sdk::Node);
scenario_test!(preferences_v1_py, preferences_v1, Sdk::Python);
scenario_test!(preferences_v1_ts, preferences_v1, Sdk::Node);
scenario_test!(topics_v1_py, topics_v1, Sdk::Python);
scenario_test!(topics_v1_ts, topics_v1, Sdk::Node);
scenario_test!(notifications_v2_py, notifications_v2, Sdk::Python);
scenario_test!(notifications_v2_ts, notifications_v2, Sdk::Node);
