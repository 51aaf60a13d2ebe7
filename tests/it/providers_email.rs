//! Email providers end to end (issue: real deliveries): a one-step email workflow is triggered and the
//! request is checked exactly as the real API would receive it — SMTP against a real SMTP server on
//! 127.0.0.1 for `nodemailer`, the HTTP APIs against a local receiver set as `baseUrl`.

use base64::Engine as _;
use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::{Received, Receiver, Reply};
use crate::support::smtp::SmtpServer;
use crate::support::{
    deliver_one, last_detail, only_post, replying_always, replying_once, TestApp,
};

const API_KEY: &str = "key-0123456789abcdef";

/// The one-step email workflow's controls: subject and body use the payload.
fn mail() -> Value {
    json!({"subject": "Order {{ payload.order }} shipped", "body": "<p>Hello {{ payload.name }}</p>"})
}

/// The trigger: Ann, her order, and email overrides (cc, bcc, reply-to) plus `extra` overrides.
fn trigger(extra_overrides: Value) -> Value {
    let mut overrides = json!({"email": {"cc": ["carl@example.com"], "bcc": ["bea@example.com"],
        "replyTo": "help@acme.test"}});
    if let (Some(o), Some(e)) = (overrides.as_object_mut(), extra_overrides.as_object()) {
        for (k, v) in e {
            match (o.get_mut(k), v) {
                (Some(Value::Object(a)), Value::Object(b)) => a.extend(b.clone()),
                _ => {
                    o.insert(k.clone(), v.clone());
                }
            }
        }
    }
    json!({"to": {"subscriberId": "ann", "email": "ann@example.com"},
        "payload": {"order": "A-17", "name": "Ann"}, "overrides": overrides})
}

/// An active email integration of `provider` with `credentials`.
async fn integration(app: &TestApp, provider: &str, credentials: Value) {
    app.integration(
        json!({"providerId": provider, "channel": "email", "active": true,
        "identifier": format!("{provider}-main"), "name": provider, "credentials": credentials}),
    )
    .await;
}

/// An active email integration of `provider` at the receiver `r`: the API key, `from` news@acme.test,
/// and `extra` credentials (over those).
async fn at_receiver(app: &TestApp, provider: &str, r: &Receiver, extra: Value) {
    let mut credentials = json!({"apiKey": API_KEY, "baseUrl": r.url, "from": "news@acme.test"});
    if let (Some(c), Some(e)) = (credentials.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    integration(app, provider, credentials).await;
}

/// An accepted send (202) with the provider's message `id` in `x-message-id`.
fn accepted(id: &str) -> Reply {
    Reply::status(202).with_header("x-message-id", id)
}

/// The credentials' sender name.
fn acme_news() -> Value {
    json!({"senderName": "Acme News"})
}

/// Triggers the email step with `extra_overrides` (see [`trigger`]); returns the job and the message.
async fn send(app: &TestApp, extra_overrides: Value) -> (Value, Value) {
    deliver_one(app, "email", mail(), trigger(extra_overrides)).await
}

/// [`only_post`], with the API key as its bearer token.
async fn bearer_post(r: &Receiver, path: &str) -> Received {
    let req = only_post(r, path).await;
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    req
}

/// The request's body is the JSON `expected`, sent as `application/json`.
fn assert_json(req: &Received, expected: Value) {
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.json(), expected);
}

/// The job's execution details.
fn details(job: &Value) -> &Vec<Value> {
    job["executionDetails"].as_array().unwrap()
}

/// The job completed through `provider` (with `id` reported) and the message is recorded as sent.
fn assert_sent(job: &Value, message: &Value, provider: &str, id: Option<&str>) {
    assert_eq!(job["status"], "completed", "{job}");
    let d = last_detail(job);
    assert_eq!(d["status"], "Success", "{d}");
    assert_eq!(d["providerId"], provider);
    let expected = match id {
        Some(id) => format!("Message sent by {provider} (id {id})"),
        None => format!("Message sent by {provider}"),
    };
    assert_eq!(d["detail"], expected.as_str());
    assert!(
        !d["raw"].as_str().unwrap_or_default().contains(API_KEY),
        "{d}"
    );
    assert_eq!(message["status"], "sent", "{message}");
    assert_eq!(message["providerId"], provider);
    assert_eq!(message["email"], "ann@example.com");
    assert_eq!(message["subject"], "Order A-17 shipped");
    let delivered = message["deliveredAt"].as_array().unwrap();
    assert_eq!(delivered.len(), 1, "{message}");
    assert!(!delivered[0].as_str().unwrap().is_empty());
    assert!(message.get("errorText").is_none(), "{message}");
}

/// The job failed without retrying and the message records the error.
fn assert_failed(job: &Value, message: &Value, provider: &str, error_has: &str) {
    assert_eq!(job["status"], "failed", "{job}");
    let details = details(job);
    assert!(
        details.iter().all(|d| d["isRetry"] == false),
        "no retry: {details:?}"
    );
    // One failed call, then the verdict.
    let failed: Vec<&Value> = details.iter().filter(|d| d["status"] == "Failed").collect();
    assert_eq!(failed.len(), 2, "one failed call: {details:?}");
    assert_eq!(failed[0]["providerId"], provider);
    assert_eq!(message["status"], "error", "{message}");
    let text = message["errorText"].as_str().unwrap_or_default();
    assert!(text.contains(error_has), "{error_has:?} not in {text:?}");
    assert!(!text.contains(API_KEY), "{text}");
    assert_eq!(message["deliveredAt"], json!([]));
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// One part of a `multipart/form-data` body.
#[derive(Debug)]
struct FormPart {
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    value: Vec<u8>,
}

impl FormPart {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.value).into_owned()
    }
}

/// The parts of a `multipart/form-data` request, in order.
fn multipart(r: &Received) -> Vec<FormPart> {
    let content_type = r.header("content-type").unwrap();
    assert!(
        content_type.starts_with("multipart/form-data"),
        "{content_type}"
    );
    let boundary = content_type
        .split("boundary=")
        .nth(1)
        .unwrap()
        .trim_matches('"');
    let delimiter = format!("--{boundary}");
    let body = r.body.to_vec();
    let mut out = Vec::new();
    let mut rest: &[u8] = &body;
    // Everything before the first delimiter is preamble.
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let start = find(rest, delimiter.as_bytes()).unwrap();
    rest = &rest[start + delimiter.len()..];
    loop {
        if rest.starts_with(b"--") {
            break;
        }
        rest = rest.strip_prefix(b"\r\n").unwrap();
        let end = find(rest, format!("\r\n{delimiter}").as_bytes()).unwrap();
        let part = &rest[..end];
        rest = &rest[end + 2 + delimiter.len()..];
        let split = find(part, b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&part[..split]).into_owned();
        let value = part[split + 4..].to_vec();
        let mut p = FormPart {
            name: String::new(),
            filename: None,
            content_type: None,
            value,
        };
        for line in head.split("\r\n") {
            let (k, v) = line.split_once(':').unwrap();
            match k.to_ascii_lowercase().as_str() {
                "content-disposition" => {
                    for param in v.split(';').map(str::trim) {
                        if let Some(n) = param.strip_prefix("name=") {
                            p.name = n.trim_matches('"').to_owned();
                        } else if let Some(f) = param.strip_prefix("filename=") {
                            p.filename = Some(f.trim_matches('"').to_owned());
                        }
                    }
                }
                "content-type" => p.content_type = Some(v.trim().to_owned()),
                _ => {}
            }
        }
        out.push(p);
    }
    out
}

/// A receiver serving `a.txt` for attachments by URL.
async fn file_server() -> Receiver {
    let files = Receiver::start().await;
    files.always(Reply {
        status: 200,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: "hello from a.txt".into(),
    });
    files
}

// ---------------------------------------------------------------------------------------------------------
// nodemailer (SMTP)

async fn nodemailer_sends_over_smtp(app: TestApp) {
    let smtp = SmtpServer::start().await;
    let files = file_server().await;
    integration(
        &app,
        "nodemailer",
        json!({"host": smtp.host, "port": smtp.port.to_string(), "secure": false, "ignoreTls": true,
            "user": "mailer", "password": API_KEY, "from": "news@acme.test", "senderName": "Acme News"}),
    )
    .await;
    let file = json!({"name": "a.txt", "url": format!("{}/files/a.txt", files.url)});
    let email = json!({"attachments": [file], "headers": {"X-Campaign": "spring"}});
    let (job, message) = send(&app, json!({"email": email})).await;
    let mails = smtp.wait_for(1).await;
    assert_eq!(mails.len(), 1);
    assert_eq!(smtp.transactions(), 1);
    let m = &mails[0];
    assert_eq!(m.auth, Some(("mailer".to_owned(), API_KEY.to_owned())));
    assert_eq!(m.from, "news@acme.test");
    assert_eq!(
        m.rcpt,
        ["ann@example.com", "carl@example.com", "bea@example.com"]
    );
    assert_eq!(m.header("Subject").as_deref(), Some("Order A-17 shipped"));
    assert_eq!(
        m.header("From").as_deref(),
        Some("\"Acme News\" <news@acme.test>")
    );
    assert_eq!(m.header("To").as_deref(), Some("ann@example.com"));
    assert_eq!(m.header("Cc").as_deref(), Some("carl@example.com"));
    assert_eq!(m.header("Reply-To").as_deref(), Some("help@acme.test"));
    assert_eq!(m.header("X-Campaign").as_deref(), Some("spring"));
    assert_eq!(m.header("Bcc"), None, "Bcc stays out of the headers");
    assert!(m
        .header("Content-Type")
        .unwrap()
        .starts_with("multipart/mixed"));
    assert!(m.data.contains("Content-Type: text/html"), "{}", m.data);
    assert!(m.data.contains("<p>Hello Ann</p>"), "{}", m.data);
    assert!(
        m.data
            .contains("Content-Disposition: attachment; filename=\"a.txt\""),
        "{}",
        m.data
    );
    let file = base64::engine::general_purpose::STANDARD.encode("hello from a.txt");
    assert!(
        m.data.contains(&file) || m.data.contains("hello from a.txt"),
        "{}",
        m.data
    );
    // The provider's id is the Message-ID header it set.
    let message_id = m.header("Message-ID").unwrap();
    assert!(message_id.ends_with("@acme.test>"), "{message_id}");
    assert_sent(&job, &message, "nodemailer", Some(&message_id));
}
db_test!(nodemailer_smtp, nodemailer_sends_over_smtp);

async fn nodemailer_rejected_recipient_is_permanent(app: TestApp) {
    let smtp = SmtpServer::start().await;
    smtp.reject_recipients("550 5.1.1 <ann@example.com>: Recipient address rejected");
    // No `ignoreTls`: STARTTLS would be used if offered; this server offers none.
    integration(
        &app,
        "nodemailer",
        json!({"host": smtp.host, "port": smtp.port.to_string(), "from": "news@acme.test"}),
    )
    .await;
    let (job, message) = send(&app, json!({})).await;
    assert_failed(&job, &message, "nodemailer", "550");
    assert_eq!(smtp.transactions(), 1, "a 5xx reply is not retried");
    assert!(smtp.mails().is_empty());
    let text = message["errorText"].as_str().unwrap();
    assert!(text.contains("Recipient address rejected"), "{message}");
}
db_test!(nodemailer_550, nodemailer_rejected_recipient_is_permanent);

// ---------------------------------------------------------------------------------------------------------
// sendgrid

async fn sendgrid_mail_send(app: TestApp) {
    let r = replying_once(accepted("sg-Ab12")).await;
    at_receiver(&app, "sendgrid", &r, acme_news()).await;
    let (job, message) = send(&app, json!({})).await;
    let req = bearer_post(&r, "/v3/mail/send").await;
    assert_json(
        &req,
        json!({
            "personalizations": [{
                "to": [{"email": "ann@example.com"}],
                "cc": [{"email": "carl@example.com"}],
                "bcc": [{"email": "bea@example.com"}],
            }],
            "from": {"email": "news@acme.test", "name": "Acme News"},
            "reply_to": {"email": "help@acme.test"},
            "subject": "Order A-17 shipped",
            "content": [{"type": "text/plain", "value": "Hello Ann"}, {"type": "text/html", "value": "<p>Hello Ann</p>"}],
        }),
    );
    assert_sent(&job, &message, "sendgrid", Some("sg-Ab12"));
    let raw: Value = serde_json::from_str(last_detail(&job)["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw, json!({"status": 202, "body": ""}));
}
db_test!(sendgrid, sendgrid_mail_send);

async fn sendgrid_attachments_by_url(app: TestApp) {
    let files = file_server().await;
    let r = replying_once(accepted("sg-2")).await;
    at_receiver(&app, "sendgrid", &r, json!({})).await;
    let (job, message) = deliver_one(
        &app,
        "email",
        mail(),
        json!({"to": {"subscriberId": "ann", "email": "ann@example.com"},
            "payload": {"order": "A-17", "name": "Ann"},
            "overrides": {"email": {"from": "orders@acme.test", "senderName": "Orders",
                "text": "Hello Ann",
                "attachments": [{"name": "a.txt", "url": format!("{}/files/a.txt", files.url)}]}}}),
    )
    .await;
    let fetched = files.wait_for(1).await;
    assert_eq!(fetched[0].method, "GET");
    assert_eq!(fetched[0].path, "/files/a.txt");
    let body = r.wait_for(1).await[0].json();
    assert_eq!(
        body["attachments"],
        json!([{
            "content": base64::engine::general_purpose::STANDARD.encode("hello from a.txt"),
            "filename": "a.txt",
            "type": "text/plain",
            "disposition": "attachment",
        }])
    );
    // The trigger's from and senderName win over the credentials; text/plain comes first.
    assert_eq!(
        body["from"],
        json!({"email": "orders@acme.test", "name": "Orders"})
    );
    assert_eq!(
        body["content"],
        json!([{"type": "text/plain", "value": "Hello Ann"},
            {"type": "text/html", "value": "<p>Hello Ann</p>"}])
    );
    assert_eq!(
        body["personalizations"],
        json!([{"to": [{"email": "ann@example.com"}]}])
    );
    assert!(body.get("reply_to").is_none());
    assert_sent(&job, &message, "sendgrid", Some("sg-2"));
}
db_test!(sendgrid_attachments, sendgrid_attachments_by_url);

async fn sendgrid_unauthorized_is_not_retried(app: TestApp) {
    let r = replying_always(Reply::json(
        401,
        json!({"errors": [{"message": "The provided authorization grant is invalid, expired, or revoked",
            "field": null, "help": null}]}),
    )).await;
    at_receiver(&app, "sendgrid", &r, json!({})).await;
    let (job, message) = send(&app, json!({})).await;
    let error = "401 Unauthorized: The provided authorization grant is invalid";
    assert_failed(&job, &message, "sendgrid", error);
    assert_eq!(r.requests().len(), 1, "a 401 is not retried");
}
db_test!(sendgrid_401, sendgrid_unauthorized_is_not_retried);

// ---------------------------------------------------------------------------------------------------------
// mailgun

async fn mailgun_messages(app: TestApp) {
    let r = replying_once(Reply::json(
        200,
        json!({"id": "<20240101.1@mg.acme.test>", "message": "Queued. Thank you."}),
    ))
    .await;
    let credentials = json!({"domain": "mg.acme.test", "senderName": "Acme News"});
    at_receiver(&app, "mailgun", &r, credentials).await;
    let mailgun = json!({"o:tag": ["orders", "eu"], "v:order": "A-17"});
    let (job, message) = send(&app, json!({"providers": {"mailgun": mailgun}})).await;
    let req = &only_post(&r, "/v3/mg.acme.test/messages").await;
    assert_eq!(
        req.header("authorization"),
        Some(basic("api", API_KEY).as_str())
    );
    let fields: Vec<(String, String)> = multipart(req)
        .into_iter()
        .map(|p| (p.name.clone(), p.text()))
        .collect();
    let expected: Vec<(String, String)> = [
        ("from", "Acme News <news@acme.test>"),
        ("subject", "Order A-17 shipped"),
        ("html", "<p>Hello Ann</p>"),
        ("to", "ann@example.com"),
        ("text", "Hello Ann"),
        ("cc", "carl@example.com"),
        ("bcc", "bea@example.com"),
        ("h:Reply-To", "help@acme.test"),
        ("o:tag", "orders"),
        ("o:tag", "eu"),
        ("v:order", "A-17"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(fields, expected);
    assert_sent(&job, &message, "mailgun", Some("<20240101.1@mg.acme.test>"));
}
db_test!(mailgun, mailgun_messages);

async fn mailgun_attachment_parts_and_eu_region(app: TestApp) {
    // Without baseUrl the EU region would pick api.eu.mailgun.net; with it, the receiver gets the call.
    let r = Receiver::start().await;
    let files = file_server().await;
    let credentials =
        json!({"domain": "mg.acme.test", "region": "eu", "baseUrl": format!("{}/", r.url)});
    at_receiver(&app, "mailgun", &r, credentials).await;
    let file = json!({"name": "a.txt", "url": format!("{}/files/a.txt", files.url)});
    let (job, _) = send(&app, json!({"email": {"attachments": [file]}})).await;
    assert_eq!(job["status"], "completed", "{job}");
    let req = &r.wait_for(1).await[0];
    assert_eq!(req.path, "/v3/mg.acme.test/messages");
    let parts = multipart(req);
    let from = parts.iter().find(|p| p.name == "from").unwrap();
    assert_eq!(from.text(), "news@acme.test");
    let file = parts.iter().find(|p| p.name == "attachment").unwrap();
    assert_eq!(file.filename.as_deref(), Some("a.txt"));
    assert_eq!(file.content_type.as_deref(), Some("text/plain"));
    assert_eq!(file.text(), "hello from a.txt");
}
db_test!(mailgun_attachments, mailgun_attachment_parts_and_eu_region);

async fn mailgun_without_domain_fails_before_calling(app: TestApp) {
    let r = Receiver::start().await;
    at_receiver(&app, "mailgun", &r, json!({})).await;
    let (job, message) = send(&app, json!({})).await;
    assert_failed(&job, &message, "mailgun", "`domain`");
    assert!(r.requests().is_empty());
}
db_test!(
    mailgun_no_domain,
    mailgun_without_domain_fails_before_calling
);

// ---------------------------------------------------------------------------------------------------------
// postmark

async fn postmark_email(app: TestApp) {
    let id = "b7bc2f4a-e38e-4336-af7d-e6c392c2f817";
    let answer = json!({"To": "ann@example.com", "SubmittedAt": "2024-01-01T00:00:00Z",
            "MessageID": id, "ErrorCode": 0, "Message": "OK"});
    let r = replying_once(Reply::json(200, answer)).await;
    at_receiver(&app, "postmark", &r, acme_news()).await;
    let (job, message) = send(&app, json!({})).await;
    let req = only_post(&r, "/email").await;
    assert_eq!(req.header("x-postmark-server-token"), Some(API_KEY));
    assert_eq!(req.header("accept"), Some("application/json"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert!(req.header("authorization").is_none());
    assert_eq!(
        req.json(),
        json!({
            "From": "Acme News <news@acme.test>",
            "To": "ann@example.com",
            "Cc": "carl@example.com",
            "Bcc": "bea@example.com",
            "ReplyTo": "help@acme.test",
            "Subject": "Order A-17 shipped",
            "HtmlBody": "<p>Hello Ann</p>",
            "TextBody": "Hello Ann",
        })
    );
    assert_sent(&job, &message, "postmark", Some(id));
}
db_test!(postmark, postmark_email);

async fn postmark_unprocessable_is_not_retried(app: TestApp) {
    let r = replying_always(Reply::json(
        422,
        json!({"ErrorCode": 300, "Message": "Invalid 'From' address: 'nobody'."}),
    ))
    .await;
    at_receiver(&app, "postmark", &r, json!({"from": "nobody"})).await;
    let (job, message) = send(&app, json!({})).await;
    let error = "Invalid 'From' address: 'nobody'. (ErrorCode 300)";
    assert_failed(&job, &message, "postmark", error);
    assert_eq!(r.requests().len(), 1);
}
db_test!(postmark_422, postmark_unprocessable_is_not_retried);

// ---------------------------------------------------------------------------------------------------------
// resend

async fn resend_emails(app: TestApp) {
    let id = "49a3999c-0ce1-4ea6-ab68-afcd6dc2e794";
    let r = replying_once(Reply::json(200, json!({"id": id}))).await;
    at_receiver(&app, "resend", &r, acme_news()).await;
    // Provider overrides: their fields over the body, then `_passthrough` (body, headers, query).
    let resend = json!({"tags": [{"name": "kind", "value": "order"}],
        "_passthrough": {"body": {"scheduled_at": "in 1 min"}, "headers": {"Idempotency-Key": "order-A-17"}}});
    let (job, message) = send(&app, json!({"providers": {"resend": resend}})).await;
    let req = bearer_post(&r, "/emails").await;
    assert_eq!(req.header("idempotency-key"), Some("order-A-17"));
    assert_eq!(
        req.json(),
        json!({
            "from": "Acme News <news@acme.test>",
            "to": ["ann@example.com"],
            "cc": ["carl@example.com"],
            "bcc": ["bea@example.com"],
            "reply_to": "help@acme.test",
            "subject": "Order A-17 shipped",
            "html": "<p>Hello Ann</p>",
            "text": "Hello Ann",
            "tags": [{"name": "kind", "value": "order"}],
            "scheduled_at": "in 1 min",
        })
    );
    assert_sent(&job, &message, "resend", Some(id));
}
db_test!(resend, resend_emails);

// ---------------------------------------------------------------------------------------------------------
// mailersend

async fn mailersend_email(app: TestApp) {
    let id = "5e42957d51f1d94a1070a733";
    let r = replying_once(accepted(id)).await;
    at_receiver(&app, "mailersend", &r, acme_news()).await;
    let (job, message) = send(&app, json!({})).await;
    let req = bearer_post(&r, "/v1/email").await;
    assert_json(
        &req,
        json!({
            "from": {"email": "news@acme.test", "name": "Acme News"},
            "to": [{"email": "ann@example.com"}],
            "cc": [{"email": "carl@example.com"}],
            "bcc": [{"email": "bea@example.com"}],
            "reply_to": {"email": "help@acme.test"},
            "subject": "Order A-17 shipped",
            "html": "<p>Hello Ann</p>",
            "text": "Hello Ann",
        }),
    );
    assert_sent(&job, &message, "mailersend", Some(id));
}
db_test!(mailersend, mailersend_email);

async fn mailersend_throttled_then_accepted(app: TestApp) {
    let r = Receiver::start().await;
    r.reply([
        Reply::json(429, json!({"message": "Too Many Attempts."})).with_header("retry-after", "0"),
        accepted("ms-2"),
    ]);
    at_receiver(&app, "mailersend", &r, json!({})).await;
    let (job, message) = send(&app, json!({})).await;
    assert_eq!(r.requests().len(), 2, "a 429 is retried");
    let throttled = details(&job)
        .iter()
        .find(|d| d["status"] == "Failed")
        .expect("the 429 attempt");
    assert!(
        throttled["detail"].as_str().unwrap().starts_with(
            "MailerSend email answered 429 Too Many Requests: Too Many Attempts.; retry 1 of"
        ),
        "{throttled}"
    );
    assert_sent(&job, &message, "mailersend", Some("ms-2"));
}
db_test!(mailersend_429, mailersend_throttled_then_accepted);
