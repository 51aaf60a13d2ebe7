//! One-click unsubscribe (issue 22): with `TIDINGS_PUBLIC_URL` set, every email of a workflow the subscriber
//! may opt out of carries RFC 8058's headers (seen here by a real SMTP receiver) and `{{ unsubscribeUrl }}`;
//! `GET /v1/unsubscribe/{token}` shows a page, `POST` turns email off for the workflow (or everywhere), which
//! the subscriber's preferences and later triggers show. Tokens that are forged, altered or too long change
//! nothing, and no log line or metric holds a token.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tidings::crypto::Cipher;
use tidings::domain::unsubscribe::UnsubscribeToken;
use tidings::domain::{SubscriberRef, WorkflowRef};

use crate::db_test;
use crate::support::smtp::{Mail, SmtpServer};
use crate::support::{last_detail, settled, worker_options, Backend, TestApp};

/// An app whose workers put unsubscribe links under its own address, given as an operator would write
/// `TIDINGS_PUBLIC_URL` (a trailing slash), and an SMTP integration at a test receiver.
async fn linked_app(backend: Backend) -> (TestApp, SmtpServer) {
    let app = TestApp::spawn_without_workers(backend).await;
    let public_url = tidings::config::public_url(&format!("{}/", app.base)).unwrap();
    assert_eq!(public_url, app.base);
    app.start_workers_with(tidings::engine::WorkerOptions {
        public_url: Some(public_url),
        ..worker_options(app.profile)
    });
    let smtp = smtp_integration(&app).await;
    (app, smtp)
}

async fn smtp_integration(app: &TestApp) -> SmtpServer {
    let smtp = SmtpServer::start().await;
    app.integration(json!({"providerId": "nodemailer", "channel": "email", "active": true,
        "identifier": "smtp", "name": "SMTP", "credentials": {"host": smtp.host, "port": smtp.port.to_string(),
        "secure": false, "ignoreTls": true, "from": "news@acme.test"}}))
        .await;
    smtp
}

/// A one-step email workflow whose body links `{{ unsubscribeUrl }}`; `extra` fields join its body.
async fn email_workflow(app: &TestApp, id: &str, extra: Value) -> Value {
    let mut body = json!({"name": format!("{id} <& \"news\">"), "workflowId": id, "steps": [
        {"name": "Mail", "type": "email", "controlValues": {"subject": "News",
            "body": "<p>Hello</p><p><a href=\"{{ unsubscribeUrl }}\">Unsubscribe</a> [{{ unsubscribeUrl }}]</p>"}}]});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let (status, out) = app.post("/v2/workflows", body).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

/// Triggers `workflow` for `ann` with these overrides and waits until it settles; returns its one job.
async fn trigger(app: &TestApp, workflow: &str, overrides: Value) -> Value {
    let transaction_id = format!("t-{}", tidings::domain::new_object_id());
    let (status, out) = app
        .post(
            "/v1/events/trigger",
            json!({"name": workflow, "to": "ann", "payload": {}, "overrides": overrides,
                "transactionId": transaction_id}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let items = settled(app, &transaction_id, 1).await;
    items[0]["jobs"][0].clone()
}

/// The lines of the mail's top-level head that set `name`.
fn header_lines(m: &Mail, name: &str) -> usize {
    let head = m.data.split("\r\n\r\n").next().unwrap();
    head.split("\r\n")
        .filter(|l| {
            l.split_once(':')
                .is_some_and(|(k, _)| k.eq_ignore_ascii_case(name))
        })
        .count()
}

/// The mail's link: the `List-Unsubscribe` URL.
fn link_of(m: &Mail) -> String {
    let v = m.header("List-Unsubscribe").expect("List-Unsubscribe");
    v.strip_prefix('<')
        .and_then(|v| v.strip_suffix('>'))
        .unwrap_or_else(|| panic!("not <url>: {v}"))
        .to_owned()
}

/// `GET` or `POST` (a form body) of a link, without an API key: status, content type and page.
async fn open(
    app: &TestApp,
    method: Method,
    url: &str,
    form: Option<&str>,
) -> (StatusCode, String) {
    let mut req = app.client.request(method, url);
    if let Some(form) = form {
        req = req
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.to_owned());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let header = |n: &str| {
        resp.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(
        header("content-type").as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(header("cache-control").as_deref(), Some("no-store"));
    assert_eq!(header("referrer-policy").as_deref(), Some("no-referrer"));
    let page = resp.text().await.unwrap();
    // Self-contained: no script, no external resource.
    assert!(page.starts_with("<!doctype html>"), "{page}");
    for outside in ["<script", "src=", "href=", "http://", "https://"] {
        assert!(!page.contains(outside), "{outside} in {page}");
    }
    (status, page)
}

/// Ann's preferences: the global email choice, and this workflow's email choice with its source.
async fn email_preferences(app: &TestApp, workflow: &str) -> (bool, bool, String) {
    let (status, prefs) = app
        .get("/v2/subscribers/ann/preferences?criticality=all")
        .await;
    assert_eq!(status, StatusCode::OK, "{prefs}");
    let w = prefs["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["workflow"]["identifier"] == workflow)
        .unwrap_or_else(|| panic!("no {workflow} in {prefs}"));
    let source = w["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["channel"] == "email")
        .map(|o| o["source"].as_str().unwrap().to_owned())
        .unwrap();
    (
        prefs["global"]["channels"]["email"].as_bool().unwrap(),
        w["channels"]["email"].as_bool().unwrap(),
        source,
    )
}

async fn one_click_turns_the_workflows_email_off_then_all_email(backend: Backend) {
    let (app, smtp) = linked_app(backend).await;
    app.subscriber("ann", json!({"email": "ann@example.com"}))
        .await;
    email_workflow(&app, "news", json!({})).await;
    email_workflow(&app, "digest", json!({})).await;

    // The overrides' own List-Unsubscribe gives way to the one-click pair; their other headers stay.
    let headers = json!({"email": {"headers": {"X-Campaign": "spring",
        "List-Unsubscribe": "<mailto:old@acme.test>"}}});
    let job = trigger(&app, "news", headers).await;
    assert_eq!(job["status"], "completed", "{job}");
    let mails = smtp.wait_for(1).await;
    let m = &mails[0];
    let url = link_of(m);
    let prefix = format!("{}/v1/unsubscribe/", app.base);
    assert!(url.starts_with(&prefix), "{url}");
    let token = &url[prefix.len()..];
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
        "{token}"
    );
    assert_eq!(
        m.header("List-Unsubscribe-Post").as_deref(),
        Some("List-Unsubscribe=One-Click")
    );
    assert_eq!(header_lines(m, "List-Unsubscribe"), 1, "{}", m.data);
    assert_eq!(header_lines(m, "List-Unsubscribe-Post"), 1, "{}", m.data);
    assert_eq!(m.header("X-Campaign").as_deref(), Some("spring"));
    // The template's `{{ unsubscribeUrl }}` is the same link, in the body as sent (quoted-printable undone)
    // and as the message records it.
    let body = m.data.replace("=\r\n", "").replace("=3D", "=");
    assert!(body.contains(&format!("href=\"{url}\"")), "{body}");
    let (_, page) = app.get("/v1/messages?channel=email&subscriberId=ann").await;
    let content = page["data"][0]["content"].as_str().unwrap();
    assert!(content.contains(&format!("[{url}]")), "{content}");

    // The page changes nothing (mail scanners fetch links): it names the workflow, escaped, and offers both.
    let before = email_preferences(&app, "news").await;
    assert_eq!(before, (true, true, "template".to_owned()));
    let (status, page) = open(&app, Method::GET, &url, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("<strong>news &lt;&amp; &quot;news&quot;&gt;</strong>"),
        "{page}"
    );
    assert!(page.contains("<form method=\"post\">"), "{page}");
    assert!(page.contains("name=\"scope\" value=\"workflow\""), "{page}");
    assert!(page.contains("name=\"scope\" value=\"all\""), "{page}");
    assert_eq!(email_preferences(&app, "news").await, before);

    // RFC 8058's one-click POST, twice (a replay is the same choice again).
    for _ in 0..2 {
        let (status, page) =
            open(&app, Method::POST, &url, Some("List-Unsubscribe=One-Click")).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert!(page.contains("You are unsubscribed"), "{page}");
        assert!(page.contains("value=\"all\""), "{page}");
        assert_eq!(
            email_preferences(&app, "news").await,
            (true, false, "subscriber".to_owned())
        );
    }
    assert_eq!(
        email_preferences(&app, "digest").await,
        (true, true, "template".to_owned())
    );

    // A later trigger skips the email step, and says why; no mail leaves.
    let job = trigger(&app, "news", json!({})).await;
    assert_eq!(job["status"], "skipped", "{job}");
    let detail = last_detail(&job);
    assert_eq!(
        detail["detail"],
        "Step skipped by the subscriber's preferences: email is off in the subscriber's preference for this workflow"
    );
    let raw: Value = serde_json::from_str(detail["raw"].as_str().unwrap()).unwrap();
    assert_eq!(
        raw["preference"],
        json!({"channel": "email", "enabled": false, "level": "subscriber_workflow", "source": "subscriber"})
    );
    // The other workflow still delivers, until the page's second button turns all email off.
    assert_eq!(
        trigger(&app, "digest", json!({})).await["status"],
        "completed"
    );
    assert_eq!(smtp.wait_for(2).await.len(), 2);
    let (status, page) = open(&app, Method::POST, &url, Some("scope=all")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("no longer receive our emails"), "{page}");
    assert_eq!(
        email_preferences(&app, "digest").await,
        (false, false, "subscriber".to_owned())
    );
    let job = trigger(&app, "digest", json!({})).await;
    assert_eq!(job["status"], "skipped", "{job}");
    assert_eq!(
        last_detail(&job)["detail"],
        "Step skipped by the subscriber's preferences: email is off in the subscriber's global preference"
    );
    assert_eq!(smtp.mails().len(), 2);
}
db_test!(
    one_click,
    one_click_turns_the_workflows_email_off_then_all_email,
    backend
);

/// `token` with one character replaced at byte `at`.
fn flipped(token: &str, at: usize) -> String {
    let mut bytes = token.as_bytes().to_vec();
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap()
}

async fn forged_altered_or_stale_links_change_nothing(app: TestApp) {
    app.subscriber("ann", json!({"email": "ann@example.com"}))
        .await;
    let bob = app.subscriber("bob", json!({})).await;
    let news = email_workflow(&app, "news", json!({})).await;
    let cipher = app.store.cipher();
    let ids = |subscriber: &Value| UnsubscribeToken {
        environment_id: app.tenant.environment_id.clone(),
        subscriber_ref: SubscriberRef::from(subscriber["_id"].as_str().unwrap().to_owned()),
        workflow_ref: WorkflowRef::from(news["_id"].as_str().unwrap().to_owned()),
    };
    let (_, ann) = app.get("/v2/subscribers/ann").await;
    let valid = ids(&ann).sign(cipher);
    let (payload, tag) = valid.split_once('.').unwrap();
    let bobs_token = ids(&bob).sign(cipher);
    let other_server = Cipher::from_base64(&Cipher::generate_base64()).unwrap();
    // Another environment of the same server: its key signs no token of this one.
    app.second_environment("Staging").await;
    let staging = app
        .store
        .list_environments(None)
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.name == "Staging")
        .unwrap();
    let staging_token = UnsubscribeToken {
        environment_id: staging.id.clone(),
        ..ids(&ann)
    }
    .sign(cipher);
    let (staging_payload, _) = staging_token.split_once('.').unwrap();
    let bad = [
        // Bob's payload under Ann's signature: altered.
        format!("{}.{tag}", bobs_token.split_once('.').unwrap().0),
        // Another environment named under this one's signature.
        format!("{staging_payload}.{tag}"),
        // A character of the payload, then of the signature, changed.
        flipped(&valid, 3),
        flipped(&valid, valid.len() - 5),
        // Signed by another server's key.
        ids(&ann).sign(&other_server),
        // Cut, or without its signature.
        valid[..valid.len() - 2].to_owned(),
        payload.to_owned(),
        format!("{payload}."),
        // Too long to be read at all.
        format!("{valid}{}", "A".repeat(600)),
        "not-a-token".to_owned(),
    ];
    let before = email_preferences(&app, "news").await;
    for token in &bad {
        let url = app.url(&format!("/v1/unsubscribe/{token}"));
        for (method, form) in [
            (Method::GET, None),
            (Method::POST, Some("List-Unsubscribe=One-Click")),
            (Method::POST, Some("scope=all")),
        ] {
            let (status, page) = open(&app, method, &url, form).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{token}: {page}");
            assert!(
                page.contains("This unsubscribe link is not valid"),
                "{page}"
            );
            assert!(page.contains("Nothing was changed."), "{page}");
        }
    }
    assert_eq!(email_preferences(&app, "news").await, before);
    // Staging's own valid token naming Ann (of this environment) finds no such subscriber in Staging.
    let url = app.url(&format!("/v1/unsubscribe/{staging_token}"));
    let (status, page) = open(&app, Method::POST, &url, Some("scope=all")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(
        page.contains("The subscriber of this link no longer exists"),
        "{page}"
    );
    assert_eq!(email_preferences(&app, "news").await, before);

    // A valid token with an unknown choice is refused too.
    let url = app.url(&format!("/v1/unsubscribe/{valid}"));
    let (status, page) = open(&app, Method::POST, &url, Some("scope=everything")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("scope is workflow or all"), "{page}");
    assert_eq!(email_preferences(&app, "news").await, before);
    // Any other body (a multipart one-click request, none at all) unsubscribes from the workflow.
    let resp = app
        .client
        .post(&url)
        .multipart(reqwest::multipart::Form::new().text("List-Unsubscribe", "One-Click"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        email_preferences(&app, "news").await,
        (true, false, "subscriber".to_owned())
    );
    let (status, _) = open(&app, Method::POST, &url, None).await;
    assert_eq!(status, StatusCode::OK);

    // The workflow became critical: the link can no longer unsubscribe, and says why.
    let (status, out) = app
        .put(
            "/v2/workflows/news",
            json!({"name": "News", "workflowId": "news", "critical": true, "steps": [
                {"name": "Mail", "type": "email", "controlValues": {"subject": "News", "body": "x"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    for (method, form) in [(Method::GET, None), (Method::POST, Some("scope=all"))] {
        let (status, page) = open(&app, method, &url, form).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
        assert!(page.contains("critical"), "{page}");
    }
    assert!(email_preferences(&app, "news").await.0, "global untouched");

    // A deleted subscriber or workflow: the link is refused, nothing changes.
    let bobs = app.url(&format!("/v1/unsubscribe/{bobs_token}"));
    let (status, _) = app.delete("/v2/subscribers/bob").await;
    assert_eq!(status, StatusCode::OK);
    let (status, page) = open(&app, Method::POST, &bobs, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(
        page.contains("The subscriber of this link no longer exists"),
        "{page}"
    );
    let (status, _) = app.delete("/v2/workflows/news").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, page) = open(&app, Method::GET, &url, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(
        page.contains("The notification of this link no longer exists"),
        "{page}"
    );
}
db_test!(
    forged_or_altered,
    forged_altered_or_stale_links_change_nothing
);

async fn critical_workflows_and_servers_without_a_public_url_send_no_link(backend: Backend) {
    let (app, smtp) = linked_app(backend).await;
    app.subscriber("ann", json!({"email": "ann@example.com"}))
        .await;
    email_workflow(&app, "alerts", json!({"critical": true})).await;
    email_workflow(
        &app,
        "locked",
        json!({"preferences": {"workflow": {"all": {"enabled": true, "readOnly": true}, "channels": {}}}}),
    )
    .await;
    let override_header =
        json!({"email": {"headers": {"List-Unsubscribe": "<mailto:u@acme.test>"}}});
    for (n, workflow) in ["alerts", "locked"].into_iter().enumerate() {
        assert_eq!(
            trigger(&app, workflow, override_header.clone()).await["status"],
            "completed"
        );
        let m = &smtp.wait_for(n + 1).await[n];
        // No link of ours: the overrides' header is sent as given, the variable renders empty.
        assert_eq!(
            m.header("List-Unsubscribe").as_deref(),
            Some("<mailto:u@acme.test>")
        );
        assert_eq!(m.header("List-Unsubscribe-Post"), None);
        assert!(m.data.contains("Unsubscribe</a> []"), "{}", m.data);
    }

    // A server without TIDINGS_PUBLIC_URL sends no link, yet still honours those already sent.
    let plain = TestApp::spawn(backend).await;
    let smtp = smtp_integration(&plain).await;
    plain
        .subscriber("ann", json!({"email": "ann@example.com"}))
        .await;
    let news = email_workflow(&plain, "news", json!({})).await;
    assert_eq!(
        trigger(&plain, "news", json!({})).await["status"],
        "completed"
    );
    let m = &smtp.wait_for(1).await[0];
    assert_eq!(m.header("List-Unsubscribe"), None);
    assert_eq!(m.header("List-Unsubscribe-Post"), None);
    assert!(m.data.contains("Unsubscribe</a> []"), "{}", m.data);
    let (_, ann) = plain.get("/v2/subscribers/ann").await;
    let token = UnsubscribeToken {
        environment_id: plain.tenant.environment_id.clone(),
        subscriber_ref: SubscriberRef::from(ann["_id"].as_str().unwrap().to_owned()),
        workflow_ref: WorkflowRef::from(news["_id"].as_str().unwrap().to_owned()),
    }
    .sign(plain.store.cipher());
    let url = plain.url(&format!("/v1/unsubscribe/{token}"));
    let (status, page) = open(&plain, Method::POST, &url, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(
        email_preferences(&plain, "news").await,
        (true, false, "subscriber".to_owned())
    );
}
db_test!(
    no_link,
    critical_workflows_and_servers_without_a_public_url_send_no_link,
    backend
);

async fn no_log_line_or_metric_holds_a_token(app: TestApp) {
    let logs = crate::operability::captured();
    app.subscriber("ann", json!({})).await;
    let news = email_workflow(&app, "news", json!({})).await;
    let (_, ann) = app.get("/v2/subscribers/ann").await;
    let token = UnsubscribeToken {
        environment_id: app.tenant.environment_id.clone(),
        subscriber_ref: SubscriberRef::from(ann["_id"].as_str().unwrap().to_owned()),
        workflow_ref: WorkflowRef::from(news["_id"].as_str().unwrap().to_owned()),
    }
    .sign(app.store.cipher());
    let url = app.url(&format!("/v1/unsubscribe/{token}"));
    for (method, form, status) in [
        (Method::GET, None, 200),
        (Method::POST, Some("List-Unsubscribe=One-Click"), 200),
        (Method::POST, Some("scope=nope"), 400),
    ] {
        let id = format!("it-{}", tidings::domain::new_object_id());
        let mut req = app
            .client
            .request(method.clone(), &url)
            .header("x-request-id", &id);
        if let Some(form) = form {
            req = req
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form);
        }
        assert_eq!(req.send().await.unwrap().status().as_u16(), status);
        let line = crate::operability::log_line(&logs, &format!("request_id={id}")).await;
        assert!(
            line.contains(&format!(
                "method={method} route=/v1/unsubscribe/{{token}} status={status}"
            )),
            "{line}"
        );
    }
    let (payload, signature) = token.split_once('.').unwrap();
    let text = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    let scrape = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        scrape.contains("route=\"/v1/unsubscribe/{token}\""),
        "{scrape}"
    );
    for (what, text) in [("log", &text), ("metrics", &scrape)] {
        assert!(
            !text.contains(payload) && !text.contains(signature),
            "the {what} holds the token"
        );
    }
}
db_test!(not_logged, no_log_line_or_metric_holds_a_token);
