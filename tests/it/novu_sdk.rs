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

/// Runs `tests/sdk/<name>.py` or `tests/sdk-ts/<name>.mjs` (the current release of `sdk`) against `app`
/// with `env`, and fails the test with the script's output when it fails.
async fn scenario(app: &TestApp, sdk: Sdk, name: &str, env: &[(&str, String)]) {
    let script = match sdk {
        Sdk::Python => support::sdk::run_python(app, &format!("{name}.py"), env).await,
        Sdk::Node => support::sdk::run_node(app, &format!("{name}.mjs"), env).await,
    };
    if let Err(out) = script {
        panic!("{out}");
    }
}

/// The contexts scenario, with the key of a second environment (`TIDINGS_OTHER_KEY`) whose contexts must
/// stay apart.
async fn contexts(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let env = [("TIDINGS_OTHER_KEY", app.second_environment("Other").await)];
    scenario(&app, sdk, "contexts", &env).await;
}

/// The official Svix clients managing the app's webhook endpoints (issue 39), with a second environment
/// whose endpoints must stay apart.
async fn webhook_endpoints(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let other = tidings::service::environments::create(&app.store, "Other", None)
        .await
        .unwrap();
    let env = [
        ("TIDINGS_APP_ID", app.application_identifier.clone()),
        ("TIDINGS_OTHER_KEY", other.api_key),
        ("TIDINGS_OTHER_APP_ID", other.application_identifier),
    ];
    scenario(&app, sdk, "webhook_endpoints", &env).await;
}

/// Webhook deliveries as the official verifiers receive them (issue 39): `@novu/api` changes, a local
/// receiver checks each request with `svix` and `standardwebhooks`.
async fn webhook_deliveries(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let env = [("TIDINGS_APP_ID", app.application_identifier.clone())];
    scenario(&app, sdk, "webhook_deliveries", &env).await;
}

/// The Inbox's actions through `@novu/js` emit their webhook events (issue 39).
async fn inbox_webhooks(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let env = [("TIDINGS_APP_ID", app.application_identifier.clone())];
    scenario(&app, sdk, "inbox_webhooks", &env).await;
}

/// The promotion scenario: the app's environment is Development; a Production environment of its
/// organization and an environment of another organization are made here.
async fn promotion(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let prod = tidings::service::environments::create(&app.store, "Production", None)
        .await
        .unwrap();
    let org = tidings::domain::OrganizationId::new();
    support::execute(
        &app,
        &format!(
            "insert into organizations (id, name, created_at) values ('{}', 'Elsewhere', 0)",
            org.as_str()
        ),
    )
    .await;
    let foreign = app
        .store
        .insert_environment(&org, "Production", false, None)
        .await
        .unwrap();
    let env = [
        ("TIDINGS_PROD_ID", prod.environment_id.0.clone()),
        ("TIDINGS_PROD_KEY", prod.api_key.clone()),
        ("TIDINGS_FOREIGN_ID", foreign.id.0.clone()),
    ];
    scenario(&app, sdk, "promotion", &env).await;
}

/// The scenario of bulk subscribers, the online flag and deleting a trigger's messages.
async fn subscribers_bulk(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    scenario(&app, sdk, "subscribers_bulk", &[]).await;
}

/// The environments scenario: create, list, update, delete through the API.
async fn environments(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    scenario(&app, sdk, "environments", &[]).await;
}

/// The v2 subscriber notifications' scenario, with a second environment's key (`TIDINGS_KEY_B`) for the
/// cross-environment cases.
async fn notifications_v2(backend: Backend, sdk: Sdk) {
    let app = TestApp::spawn_with(backend, WireProfile::Novu).await;
    let env = [("TIDINGS_KEY_B", app.second_environment("Production").await)];
    scenario(&app, sdk, "notifications_v2", &env).await;
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
scenario_test!(contexts_py, contexts, Sdk::Python);
scenario_test!(contexts_ts, contexts, Sdk::Node);
scenario_test!(promotion_py, promotion, Sdk::Python);
scenario_test!(promotion_ts, promotion, Sdk::Node);
scenario_test!(environments_py, environments, Sdk::Python);
scenario_test!(environments_ts, environments, Sdk::Node);
scenario_test!(subscribers_bulk_py, subscribers_bulk, Sdk::Python);
scenario_test!(subscribers_bulk_ts, subscribers_bulk, Sdk::Node);
scenario_test!(notifications_v2_py, notifications_v2, Sdk::Python);
scenario_test!(notifications_v2_ts, notifications_v2, Sdk::Node);
scenario_test!(webhook_endpoints_py, webhook_endpoints, Sdk::Python);
scenario_test!(webhook_endpoints_ts, webhook_endpoints, Sdk::Node);
scenario_test!(webhook_deliveries_py, webhook_deliveries, Sdk::Python);
scenario_test!(webhook_deliveries_ts, webhook_deliveries, Sdk::Node);
scenario_test!(inbox_webhooks_js, inbox_webhooks, Sdk::Node);
