//! `nodemailer`: SMTP through `lettre`, with Nodemailer's credentials: `host`, `port` (587, or 465 when
//! `secure`), `secure` (implicit TLS from the first byte), `requireTls` (STARTTLS or fail), `ignoreTls`
//! (plain text, STARTTLS never tried), otherwise STARTTLS when the server offers it; `user`/`password` (AUTH
//! only when `user` is set), `from`, `senderName`, and `tlsOptions.rejectUnauthorized: false` for servers
//! with a certificate no public root signs.
//!
//! SMTP replies are classified by their code: 5xx is permanent, 4xx transient; connection failures and
//! timeouts are transient; TLS and client-side problems (a bad address, no STARTTLS when required, no
//! common AUTH mechanism) are configuration errors, permanent.

use std::time::Duration;

use async_trait::async_trait;
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::authentication::Credentials as SmtpCredentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{Address, AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::{json, Value};

use super::sender;
use crate::domain::Channel;
use crate::providers::{
    Credentials, Delivered, EmailMessage, Failure, Outbound, Provider, ProviderError, SendContext,
};

/// How long one SMTP conversation (connect, each command) may take.
const TIMEOUT: Duration = Duration::from_secs(30);

pub struct Nodemailer;

#[async_trait]
impl Provider for Nodemailer {
    fn id(&self) -> &'static str {
        "nodemailer"
    }

    fn channel(&self) -> Channel {
        Channel::Email
    }

    async fn send(
        &self,
        ctx: &SendContext<'_>,
        msg: &Outbound,
    ) -> Result<Delivered, ProviderError> {
        let Outbound::Email(m) = msg else {
            return Err(ProviderError::wrong_channel(self.id()));
        };
        let creds = ctx.credentials;
        let host = creds.require("host")?;
        let secure = creds.flag("secure");
        let port = match creds.get("port") {
            Some(p) => p.parse::<u16>().map_err(|_| {
                ProviderError::permanent(format!(
                    "The integration's `port` credential is not a port number: {p}"
                ))
            })?,
            None if secure => 465,
            None => 587,
        };
        let from = sender(ctx, m)?;
        let (message, message_id) = build_message(m, &from)?;

        let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.clone())
            .port(port)
            .tls(tls(creds, &host, secure)?)
            .timeout(Some(TIMEOUT));
        if let Some(user) = creds.get("user") {
            transport = transport.credentials(SmtpCredentials::new(
                user,
                creds.get("password").unwrap_or_default(),
            ));
        }
        let what = format!("SMTP server {host}:{port}");
        match transport.build().send(message).await {
            Ok(response) => Ok(Delivered {
                id: Some(message_id),
                raw: json!({
                    "code": u16::from(response.code()),
                    "message": response.message().collect::<Vec<_>>(),
                })
                .to_string(),
                invalid_tokens: Vec::new(),
            }),
            Err(e) => Err(classify(&what, &e)),
        }
    }
}

/// The TLS mode: implicit (`secure`), none (`ignoreTls`), STARTTLS required (`requireTls`), else STARTTLS
/// when offered.
fn tls(creds: &Credentials, host: &str, secure: bool) -> Result<Tls, ProviderError> {
    if !secure && creds.flag("ignoreTls") {
        return Ok(Tls::None);
    }
    let params = TlsParameters::builder(host.to_owned())
        .dangerous_accept_invalid_certs(!reject_unauthorized(creds))
        .build_rustls()
        .map_err(|e| ProviderError::permanent(format!("SMTP TLS settings for {host}: {e}")))?;
    Ok(if secure {
        Tls::Wrapper(params)
    } else if creds.flag("requireTls") {
        Tls::Required(params)
    } else {
        Tls::Opportunistic(params)
    })
}

/// Nodemailer's `tlsOptions.rejectUnauthorized` (an object or its JSON text); true unless set to false.
fn reject_unauthorized(creds: &Credentials) -> bool {
    let options = match creds.0.get("tlsOptions") {
        Some(Value::String(s)) => serde_json::from_str::<Value>(s).unwrap_or(Value::Null),
        Some(v) => v.clone(),
        None => Value::Null,
    };
    !matches!(options.get("rejectUnauthorized"), Some(Value::Bool(false)))
        && !matches!(options.get("rejectUnauthorized"), Some(Value::String(s)) if s == "false")
}

/// The MIME message (HTML, with a plain-text alternative when given; attachments in a mixed part) and its
/// `Message-ID`. The envelope's recipients are to, cc and bcc; the `Bcc` header is not sent.
fn build_message(m: &EmailMessage, from: &str) -> Result<(Message, String), ProviderError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        ProviderError::permanent(format!("SMTP: {what}: {e}"))
    };
    let address = |a: &str, what: &str| -> Result<Address, ProviderError> {
        a.trim()
            .parse::<Address>()
            .map_err(|e| bad(&format!("{what} address {a:?}"), &e))
    };
    let sender_address = address(from, "sender")?;
    let name = m
        .sender_name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    let message_id = format!("<{}@{}>", uuid::Uuid::new_v4(), sender_address.domain());
    let mut builder = Message::builder()
        .from(Mailbox::new(name, sender_address))
        .subject(m.subject.clone())
        .message_id(Some(message_id.clone()));
    for to in &m.to {
        builder = builder.to(Mailbox::new(None, address(to, "recipient")?));
    }
    for cc in &m.cc {
        builder = builder.cc(Mailbox::new(None, address(cc, "cc")?));
    }
    for bcc in &m.bcc {
        builder = builder.bcc(Mailbox::new(None, address(bcc, "bcc")?));
    }
    if let Some(reply_to) = &m.reply_to {
        builder = builder.reply_to(Mailbox::new(None, address(reply_to, "reply-to")?));
    }
    for (k, v) in &m.headers {
        let name =
            HeaderName::new_from_ascii(k.clone()).map_err(|e| bad(&format!("header {k:?}"), &e))?;
        builder = builder.raw_header(HeaderValue::new(name, v.clone()));
    }

    let text = m.text.as_deref().filter(|t| !t.is_empty());
    let message = if m.attachments.is_empty() {
        match text {
            Some(text) => builder.multipart(MultiPart::alternative_plain_html(
                text.to_owned(),
                m.html.clone(),
            )),
            None => builder.singlepart(SinglePart::html(m.html.clone())),
        }
    } else {
        let mixed = MultiPart::mixed();
        let mut mixed = match text {
            Some(text) => mixed.multipart(MultiPart::alternative_plain_html(
                text.to_owned(),
                m.html.clone(),
            )),
            None => mixed.singlepart(SinglePart::html(m.html.clone())),
        };
        for a in &m.attachments {
            let content_type = ContentType::parse(&a.mime)
                .unwrap_or_else(|_| ContentType::parse("application/octet-stream").unwrap());
            mixed = mixed
                .singlepart(Attachment::new(a.name.clone()).body(a.content.clone(), content_type));
        }
        builder.multipart(mixed)
    }
    .map_err(|e| bad("building the message", &e))?;
    Ok((message, message_id))
}

/// 5xx replies and client-side errors are permanent; 4xx replies, network errors and timeouts transient.
fn classify(what: &str, e: &lettre::transport::smtp::Error) -> ProviderError {
    let failure = if e.is_permanent() || e.is_client() || e.is_tls() {
        Failure::Permanent
    } else {
        Failure::Transient { retry_after: None }
    };
    let kind = if e.is_timeout() { " (timed out)" } else { "" };
    ProviderError {
        invalid_tokens: Vec::new(),
        failure,
        message: format!("{what}{kind}: {e}"),
        raw: Some(
            json!({
                "code": e.status().map(u16::from),
                "error": e.to_string(),
            })
            .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Attachment as FileAttachment;

    fn message() -> EmailMessage {
        EmailMessage {
            to: vec!["ann@example.com".into()],
            sender_name: Some("Acme".into()),
            subject: "Hello Ann".into(),
            html: "<p>Hi</p>".into(),
            text: Some("Hi".into()),
            reply_to: Some("help@acme.test".into()),
            cc: vec!["cc@example.com".into()],
            bcc: vec!["bcc@example.com".into()],
            attachments: vec![FileAttachment {
                name: "a.txt".into(),
                mime: "text/plain".into(),
                content: b"file body".to_vec(),
            }],
            headers: vec![("X-Campaign".into(), "spring".into())],
            ..Default::default()
        }
    }

    #[test]
    fn the_mime_message_has_every_part_and_no_bcc_header() {
        let (msg, id) = build_message(&message(), "news@acme.test").unwrap();
        assert!(id.ends_with("@acme.test>"), "{id}");
        let envelope = msg.envelope();
        assert_eq!(envelope.from().unwrap().to_string(), "news@acme.test");
        let to: Vec<String> = envelope.to().iter().map(ToString::to_string).collect();
        assert_eq!(to, ["ann@example.com", "cc@example.com", "bcc@example.com"]);
        let text = String::from_utf8(msg.formatted()).unwrap();
        for needle in [
            "From: Acme <news@acme.test>",
            "To: ann@example.com",
            "Cc: cc@example.com",
            "Reply-To: help@acme.test",
            "Subject: Hello Ann",
            "X-Campaign: spring",
            "multipart/mixed",
            "multipart/alternative",
            "Content-Type: text/html",
            "Content-Disposition: attachment; filename=\"a.txt\"",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
        assert!(!text.contains("Bcc:"), "{text}");
    }

    #[test]
    fn bad_addresses_are_permanent() {
        let mut m = message();
        m.cc = vec!["not an address".into()];
        let e = build_message(&m, "news@acme.test").unwrap_err();
        assert!(!e.is_transient());
        assert!(e.message.contains("cc address"), "{}", e.message);
    }

    #[test]
    fn tls_modes_follow_nodemailer_credentials() {
        let creds = |v: Value| Credentials::new(v.as_object().unwrap().clone());
        let mode =
            |v: Value, secure: bool| match tls(&creds(v), "smtp.example.com", secure).unwrap() {
                Tls::None => "none",
                Tls::Opportunistic(_) => "opportunistic",
                Tls::Required(_) => "required",
                Tls::Wrapper(_) => "wrapper",
            };
        assert_eq!(mode(json!({}), false), "opportunistic");
        assert_eq!(mode(json!({"ignoreTls": true}), false), "none");
        assert_eq!(mode(json!({"requireTls": "true"}), false), "required");
        assert_eq!(mode(json!({"ignoreTls": true}), true), "wrapper");
        assert!(reject_unauthorized(&creds(json!({}))));
        assert!(!reject_unauthorized(&creds(
            json!({"tlsOptions": "{\"rejectUnauthorized\": false}"})
        )));
    }
}
