//! No silent drops, no small lies (issue 35, item 4): what the server says at start-up, fields the
//! API accepts but does not implement refused with a 422 naming them, every shape of a message with
//! the same fields, and filters that are honoured rather than ignored.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::db_test;
use crate::support::TestApp;

/// `tidings serve` on a fresh SQLite folder: the banner names the active wire profile and says
/// when to choose `novu`, and the environments whose Inbox needs no HMAC; the warning about an `http`
/// public address is a whole sentence.
#[test]
fn the_start_up_banner_names_the_profile() {
    for (profile, args) in [("spec", &[][..]), ("novu", &["--compat", "novu"][..])] {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidings"))
            .arg("serve")
            .args(args)
            .current_dir(dir.path())
            .env("TIDINGS_LISTEN", "127.0.0.1:0")
            .env("TIDINGS_PUBLIC_URL", "http://notify.example.com")
            .env("RUST_LOG", "warn")
            .env_remove("TIDINGS_COMPAT")
            .env_remove("TIDINGS_API_KEY")
            .env_remove("DATABASE_URL")
            .env_remove("TIDINGS_ENCRYPTION_KEY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tidings serve");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = Vec::new();
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
            let done = line.starts_with("Choose ");
            lines.push(line);
            if done {
                break;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        let mut err = String::new();
        stderr.read_to_string(&mut err).unwrap();

        let serving = lines
            .iter()
            .find(|l| l.starts_with("Serving the API on http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("no banner: {lines:?} {err}"));
        // The first start creates Development and Production; only Production needs the Inbox's HMAC
        // (issue 36), and the banner names the other.
        assert!(
            lines.iter().any(|l| l
                == "Inbox sessions need no subscriberHash (HMAC off) in: \"Development\". Any browser \
                    can open any subscriber's Inbox there; require it with `tidings environments hmac NAME on`."),
            "{lines:?}"
        );
        assert!(
            serving.ends_with(&format!(
                " with the wire profile \"{profile}\" (--compat / TIDINGS_COMPAT)."
            )),
            "{serving}"
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some(
                "Choose \"novu\" when Novu's SDKs (novu-py, @novu/api) call this server: they expect \
                 identifiers spelled novu… and bodies inside {\"data\": …}; \"spec\" follows the \
                 specification literally."
            )
        );
        assert!(
            err.contains(
                "TIDINGS_PUBLIC_URL is not https: mail providers ignore one-click unsubscribe links \
                 that are not https, so emails will carry links no mail client offers"
            ),
            "{err}"
        );
    }
}

async fn in_app_workflow(app: &TestApp, id: &str) {
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": id, "workflowId": id, "active": true, "steps": [
                {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hi {{ payload.n }}"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

/// A bulk trigger answers per event, as Novu does (201): a refused event is `status: "error"` with its
/// reason, the others are recorded and `processed`, whatever refused it (an unknown workflow, an
/// invalid event, the database refusing the event's rows).
async fn bulk_answers_per_event(app: TestApp) {
    in_app_workflow(&app, "hello").await;
    let (status, out) = app
        .post(
            "/v1/events/trigger/bulk",
            json!({"events": [
                {"name": "missing", "to": "s1", "transactionId": "tx-missing"},
                {"name": "hello", "to": "s1", "transactionId": "tx-ok", "payload": {"n": 1}},
                {"name": "hello", "to": "s2", "transactionId": "tx-ok", "payload": {"n": 2}},
                {"name": " ", "to": "s3"},
                {"name": "hello", "to": "s4", "payload": {"n": 4}}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let items = out.as_array().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(items.len(), 5, "{out}");
    assert_eq!(
        items[0],
        json!({"acknowledged": true, "status": "error", "transactionId": "tx-missing",
            "error": ["Workflow not found: missing"]})
    );
    assert_eq!(
        items[1],
        json!({"acknowledged": true, "status": "processed", "transactionId": "tx-ok"})
    );
    assert_eq!(
        items[2],
        json!({"acknowledged": true, "status": "error", "transactionId": "tx-ok",
            "error": ["transactionId tx-ok was already used; the trigger did not run again"]})
    );
    assert_eq!(
        items[3],
        json!({"acknowledged": true, "status": "error",
            "error": ["Validation failed: name: name (the workflow identifier) is required"]})
    );
    assert_eq!(items[4]["status"], "processed", "{out}");
    let generated = items[4]["transactionId"].as_str().unwrap();

    // The accepted events were recorded: one notification each, the refused ones none.
    for (tx, subscriber) in [("tx-ok", "s1"), (generated, "s4")] {
        let (_, page) = app
            .get(&format!("/v1/notifications?transactionId={tx}"))
            .await;
        let data = page["data"].as_array().unwrap();
        assert_eq!(data.len(), 1, "{tx}: {page}");
        assert_eq!(data[0]["subscriber"]["subscriberId"], subscriber);
    }
    let (_, page) = app.get("/v1/notifications?transactionId=tx-missing").await;
    assert_eq!(page["data"], json!([]));
}
db_test!(bulk_per_event, bulk_answers_per_event);

/// The writer answers each record of a request on its own: a record the database refuses fails
/// alone, and the request's other records are recorded and say so (the bulk route answers them
/// `processed` and the refused one `error`, where it used to answer 500).
async fn the_writer_answers_each_record(app: TestApp) {
    use tidings::engine::{Handoff, TriggerWriter};

    use crate::hardening_engine::{record, refused_record};
    let org = app.tenant.organization_id.clone();
    let env = app.tenant.environment_id.clone();
    let writer = TriggerWriter::new(app.store.clone(), Handoff::default());
    let outcomes = writer
        .insert_triggers_each(vec![
            record(&org, &env, "each-1", 1),
            refused_record(&org, &env, "each-bad"),
            record(&org, &env, "each-2", 2),
        ])
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 3);
    assert_eq!(outcomes[0], Ok(true));
    assert!(outcomes[1].is_err(), "{outcomes:?}");
    assert_eq!(outcomes[2], Ok(true));
    // The aggregate form still fails the whole request.
    assert!(writer
        .insert_triggers(vec![refused_record(&org, &env, "each-bad-2")])
        .await
        .is_err());
    for (tx, n) in [("each-1", 1), ("each-2", 2), ("each-bad", 0)] {
        let (_, page) = app
            .get(&format!("/v1/notifications?transactionId={tx}"))
            .await;
        assert_eq!(page["data"].as_array().unwrap().len(), n, "{tx}: {page}");
    }
}
db_test!(writer_answers_each, the_writer_answers_each_record);

/// The messages of a 422's `errors.<field>` (the body in design.md's error shape).
fn refused(out: &serde_json::Value, field: &str) -> Vec<String> {
    assert_eq!(out["statusCode"], 422, "{out}");
    serde_json::from_value(out["errors"][field]["messages"].clone())
        .unwrap_or_else(|_| panic!("no errors.{field}: {out}"))
}

/// A field the API accepts but Tidings does not implement is refused with a 422 naming it, on the
/// single, bulk and broadcast triggers and on workflows, when it carries a value; null is accepted.
/// Nothing of a refused request is recorded.
async fn unsupported_fields_are_refused(app: TestApp) {
    in_app_workflow(&app, "hello").await;
    let cases = [
        ("tenant", json!({"identifier": "acme"})),
        ("bridgeUrl", json!("https://bridge.example.com/api/novu")),
        ("controls", json!({"steps": {"inbox": {"body": "x"}}})),
        ("agentId", json!("agent-1")),
    ];
    for (field, value) in &cases {
        let mut body = json!({"name": "hello", "to": "s1", "transactionId": format!("tx-{field}")});
        body[field] = value.clone();
        let (status, out) = app.post("/v1/events/trigger", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {out}");
        assert_eq!(
            refused(&out, field),
            [format!("{field} is not supported by this server")]
        );
        assert_eq!(out["errors"][field]["value"], *value);

        let mut broadcast = json!({"name": "hello"});
        broadcast[field] = value.clone();
        let (status, out) = app.post("/v1/events/trigger/broadcast", broadcast).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {out}");
        assert_eq!(
            refused(&out, field),
            [format!("{field} is not supported by this server")]
        );

        let (status, out) = app
            .post(
                "/v1/events/trigger/bulk",
                json!({"events": [{"name": "hello", "to": "s2", "transactionId": format!("tx-bulk-{field}")}, body]}),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {out}");
        let bulk_field = format!("events[1].{field}");
        assert_eq!(
            refused(&out, &bulk_field),
            [format!("{bulk_field} is not supported by this server")]
        );
    }
    // The overrides Tidings does not apply.
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "hello", "to": "s1", "transactionId": "tx-overrides", "overrides": {
                "layoutIdentifier": "brand", "severity": "high", "channels": {"email": {"layoutId": "l1"}},
                "steps": {"inbox": {"providers": {"slack": {"text": "x"}}, "layoutId": "l2",
                    "integrationIdentifier": "kept"}},
                "email": {"from": "kept@example.com"}, "providers": {"sendgrid": {"ip_pool_name": "kept"}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    let mut fields: Vec<&String> = out["errors"].as_object().unwrap().keys().collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "overrides.channels",
            "overrides.layoutIdentifier",
            "overrides.severity",
            "overrides.steps.inbox.layoutId",
            "overrides.steps.inbox.providers",
        ]
    );
    // Nothing of the refused triggers was recorded.
    for tx in [
        "tx-tenant",
        "tx-bridgeUrl",
        "tx-bulk-tenant",
        "tx-overrides",
    ] {
        let (_, page) = app
            .get(&format!("/v1/notifications?transactionId={tx}"))
            .await;
        assert_eq!(page["data"], json!([]), "{tx}");
    }
    // Null is the same as leaving the field out.
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "hello", "to": "s1", "tenant": null, "bridgeUrl": null, "controls": null,
                "agentId": null, "overrides": {"severity": null, "layoutIdentifier": null}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["status"], "processed");

    // Workflows: translations and agents.
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "T", "workflowId": "translated", "isTranslationEnabled": true, "agent": {"id": "a1"},
                "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "x"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_eq!(
        refused(&out, "isTranslationEnabled"),
        ["isTranslationEnabled is not supported by this server: translations are not implemented"]
    );
    assert_eq!(
        refused(&out, "agent"),
        ["agent is not supported by this server"]
    );
    let (status, _) = app.get("/v2/workflows/translated").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, out) = app
        .patch("/v2/workflows/hello", json!({"isTranslationEnabled": true}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_eq!(
        refused(&out, "isTranslationEnabled"),
        ["isTranslationEnabled is not supported by this server: translations are not implemented"]
    );
    let (status, out) = app
        .patch(
            "/v2/workflows/hello",
            json!({"isTranslationEnabled": false}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");

    // Integrations: `check: true` asks for a verification with the provider.
    let check =
        "check is not supported by this server: credentials are not verified with the provider";
    let (status, out) = app
        .post(
            "/v1/integrations",
            json!({"providerId": "sendgrid", "channel": "email", "identifier": "checked",
                "credentials": {"apiKey": "k"}, "check": true}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_eq!(refused(&out, "check"), [check]);
    let (_, list) = app.get("/v1/integrations").await;
    assert!(!list.to_string().contains("\"checked\""), "{list}");
    let (status, created) = app
        .post(
            "/v1/integrations",
            json!({"providerId": "sendgrid", "channel": "email", "identifier": "unchecked",
                "credentials": {"apiKey": "k"}, "check": false}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"));
    let (status, out) = app
        .put(&format!("/v1/integrations/{id}"), json!({"check": true}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_eq!(refused(&out, "check"), [check]);
}
db_test!(unsupported_fields, unsupported_fields_are_refused);

/// `GET /v1/messages` items carry `archived` and `archivedAt` as the feed does: every shape of a
/// message has the same fields (the feed adds `_jobId`; it leaves out `_messageTemplateId`, which the
/// TS SDK's feed item cannot take as null).
async fn messages_carry_archived(app: TestApp) {
    in_app_workflow(&app, "hello").await;
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "hello", "to": "ada", "payload": {"n": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let mut message = serde_json::Value::Null;
    for _ in 0..200 {
        let (_, page) = app.get("/v1/messages?subscriberId=ada").await;
        if let Some(m) = page["data"].get(0) {
            message = m.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(message["archived"], false, "{message}");
    assert!(message.get("archivedAt").is_none(), "{message}");
    let id = message["_id"].as_str().unwrap().to_owned();

    // Archived in the Inbox: both shapes say so, with the time.
    let (status, session) =
        crate::support::send(app.client.post(app.url("/v1/inbox/session")).json(&json!({
            "applicationIdentifier": app.application_identifier,
            "subscriber": {"subscriberId": "ada"}})))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let token = session["data"]["token"].as_str().unwrap();
    let (status, out) = crate::support::send(
        app.client
            .patch(app.url(&format!("/v1/inbox/notifications/{id}/archive")))
            .bearer_auth(token),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");

    let (_, page) = app.get("/v1/messages?subscriberId=ada").await;
    let message = page["data"][0].clone();
    let (_, feed) = app.get("/v1/subscribers/ada/notifications/feed").await;
    let item = feed["data"][0].clone();
    for shape in [&message, &item] {
        assert_eq!(shape["archived"], true, "{shape}");
        let at = shape["archivedAt"]
            .as_str()
            .unwrap_or_else(|| panic!("{shape}"));
        assert!(at.ends_with('Z') && at.len() == 24, "{at}");
    }
    assert_eq!(message["archivedAt"], item["archivedAt"]);
    let keys = |v: &serde_json::Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.retain(|k| k != "_jobId" && k != "_messageTemplateId");
        k.sort();
        k
    };
    assert_eq!(keys(&message), keys(&item));
}
db_test!(messages_archived, messages_carry_archived);

/// Tidings refuses preference schedules (422), so `examples/inbox` hides the Inbox's Schedule section.
/// @novu/js 3.19.2 (the version the example pins, installed for the SDK tests) has no switch for it;
/// the section is the element its appearance calls `scheduleContainer`, whose style the example sets
/// to `display: none`. The check reads the pinned package, so an upgrade that renames the element
/// fails here.
#[test]
fn the_inbox_example_hides_the_schedule_section() {
    crate::support::sdk::node_modules();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read =
        |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let example: serde_json::Value =
        serde_json::from_str(&read("examples/inbox/package.json")).unwrap();
    let installed: serde_json::Value =
        serde_json::from_str(&read("tests/sdk-ts/node_modules/@novu/js/package.json")).unwrap();
    assert_eq!(example["dependencies"]["@novu/js"], installed["version"]);

    // In the pinned package: `scheduleContainer` is an appearance element, and it is the Schedule
    // section's container (the element the global preference's schedule row renders).
    let types = read("tests/sdk-ts/node_modules/@novu/js/dist/esm/types-cscc3enH.d.mts");
    let keys = types
        .lines()
        .find(|l| l.starts_with("declare const inboxAppearanceKeys"))
        .expect("the Inbox's appearance keys");
    assert!(keys.contains("\"scheduleContainer\""), "{keys}");
    let ui = read("tests/sdk-ts/node_modules/@novu/js/dist/esm/ui/index.mjs");
    let row = &ui[ui.find("var ScheduleRow = ").expect("the Schedule row")..];
    let row = &row[..row.find("\nvar ").unwrap()];
    assert!(row.contains("key: \"scheduleContainer\""), "{row}");

    // The example hides it.
    let main = read("examples/inbox/src/main.js");
    assert!(
        main.contains(
            "const appearance = { elements: { scheduleContainer: { display: 'none' } } };"
        ),
        "{main}"
    );
    assert!(
        main.contains("new NovuUI({ options, novu, appearance })"),
        "{main}"
    );
}

/// The feed's `payload` filter (a JSON object, as it is or in base64, matched against the trigger
/// payload) and `contextKeys` on `GET /v1/messages` (the exact set of the trigger's contexts) are
/// honoured, not ignored; malformed ones are a 422.
async fn message_filters_are_honoured(app: TestApp) {
    use base64::Engine;
    in_app_workflow(&app, "hello").await;
    let sends = [
        (
            "p-1",
            json!({"n": 1, "kind": "order", "meta": {"shop": "eu"}}),
            json!({"tenant": "acme"}),
        ),
        (
            "p-2",
            json!({"n": 2, "kind": "order", "meta": {"shop": "us"}}),
            json!({"tenant": "acme", "region": "eu"}),
        ),
        (
            "p-3",
            json!({"n": 3, "kind": "news"}),
            serde_json::Value::Null,
        ),
    ];
    for (tx, payload, context) in &sends {
        let mut body =
            json!({"name": "hello", "to": "ada", "payload": payload, "transactionId": tx});
        if !context.is_null() {
            body["context"] = context.clone();
        }
        let (status, out) = app.post("/v1/events/trigger", body).await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
    for _ in 0..200 {
        let (_, page) = app.get("/v1/messages?subscriberId=ada").await;
        if page["data"].as_array().map_or(0, Vec::len) == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let txs = |page: &serde_json::Value| -> Vec<String> {
        let mut t: Vec<String> = page["data"]
            .as_array()
            .unwrap_or_else(|| panic!("{page}"))
            .iter()
            .map(|m| m["transactionId"].as_str().unwrap().to_owned())
            .collect();
        t.sort();
        t
    };
    let feed = |q: &str| {
        let q = q.to_owned();
        let app = &app;
        async move {
            let (status, page) = app
                .get(&format!("/v1/subscribers/ada/notifications/feed?{q}"))
                .await;
            assert_eq!(status, StatusCode::OK, "{q}: {page}");
            page
        }
    };
    let b64 = |v: serde_json::Value| {
        let s = base64::engine::general_purpose::STANDARD.encode(v.to_string());
        s.replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D")
    };
    assert_eq!(txs(&feed("").await), ["p-1", "p-2", "p-3"]);
    // Base64, as Novu's clients send it; a nested value by dotted key; an object compared whole.
    let page = feed(&format!("payload={}", b64(json!({"kind": "order"})))).await;
    assert_eq!(txs(&page), ["p-1", "p-2"]);
    assert_eq!(page["totalCount"], 2);
    let page = feed(&format!(
        "payload={}",
        b64(json!({"kind": "order", "meta.shop": "us"}))
    ))
    .await;
    assert_eq!(txs(&page), ["p-2"]);
    let page = feed(&format!("payload={}", b64(json!({"meta": {"shop": "eu"}})))).await;
    assert_eq!(txs(&page), ["p-1"]);
    // JSON as it is; a number stays a number.
    let page = feed("payload=%7B%22n%22%3A3%7D").await;
    assert_eq!(txs(&page), ["p-3"]);
    let page = feed("payload=%7B%22n%22%3A%223%22%7D").await;
    assert_eq!(txs(&page), Vec::<String>::new());
    // Not an object: 422 naming the field.
    for bad in ["payload=not-json", "payload=%5B1%5D"] {
        let (status, out) = app
            .get(&format!("/v1/subscribers/ada/notifications/feed?{bad}"))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {out}");
        assert_eq!(
            refused(&out, "payload"),
            ["payload must be a JSON object, as it is or encoded in base64"]
        );
    }

    // contextKeys: the exact set, in any order; `contextKeys=` for none.
    let messages = |q: &str| {
        let q = q.to_owned();
        let app = &app;
        async move {
            let (status, page) = app.get(&format!("/v1/messages?subscriberId=ada&{q}")).await;
            assert_eq!(status, StatusCode::OK, "{q}: {page}");
            page
        }
    };
    assert_eq!(txs(&messages("contextKeys=tenant:acme").await), ["p-1"]);
    assert_eq!(
        txs(&messages("contextKeys=tenant:acme&contextKeys=region:eu").await),
        ["p-2"]
    );
    assert_eq!(
        txs(&messages("contextKeys=region:eu&contextKeys=tenant:acme").await),
        ["p-2"]
    );
    let page = messages("contextKeys=").await;
    assert_eq!(txs(&page), ["p-3"]);
    assert_eq!(page["totalCount"], 1);
    assert_eq!(
        txs(&messages("contextKeys=region:eu").await),
        Vec::<String>::new()
    );
    let (status, out) = app.get("/v1/messages?contextKeys=acme").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert_eq!(
        refused(&out, "contextKeys"),
        ["contextKeys entries must have the form type:id"]
    );
}
db_test!(message_filters, message_filters_are_honoured);
