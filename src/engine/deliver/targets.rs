//! Destinations of a message, one function per channel: an email's addresses, an SMS's phone number, a chat
//! message's endpoints (or webhook), a push's device tokens — each with the record the message shows and
//! the key under which `State::done` remembers it was served.

use serde_json::Value;

use super::render::Rendered;
use super::{Outgoing, Resolved, Undelivered};
use crate::domain::context::context_set;
use crate::domain::endpoint::{ChannelEndpoint, EndpointType};
use crate::domain::integration::Integration;
use crate::domain::job::MessageDelivery;
use crate::domain::subscriber::{ChannelSettings, Subscriber};
use crate::domain::Channel;
use crate::engine::steps::Runner;
use crate::error::Result;
use crate::providers::{
    ChatMessage, ChatTarget, Credentials, EmailMessage, Outbound, PushMessage, SmsMessage,
};

/// One destination of a message.
#[derive(Debug)]
pub(super) struct Target {
    /// Stable key, for `State::done`.
    pub(super) key: String,
    pub(super) outbound: Outbound,
    /// What the message record shows as its destination.
    pub(super) record: MessageDelivery,
}

/// Where a destination search ends: the destinations, or why the subscriber has none.
type Found = std::result::Result<Vec<Target>, Undelivered>;

impl Runner {
    /// The destinations of this step through `integration`.
    pub(super) async fn targets(
        &self,
        r: &Resolved<'_>,
        integration: &Integration,
        credentials: &Credentials,
        out: &Outgoing,
    ) -> Result<Found> {
        let channel = integration.channel.unwrap_or(Channel::Email);
        let channel_overrides = r
            .overrides
            .get(channel.as_str())
            .cloned()
            .unwrap_or(Value::Null);
        Ok(match channel {
            Channel::Email => email(r, credentials, out, &channel_overrides),
            Channel::Sms => {
                let phone = self.phone(r, &channel_overrides).await?;
                sms(r, phone, credentials, &out.rendered, &channel_overrides)
            }
            Channel::Chat => self.chat(r, integration, &out.rendered).await?,
            _ => push(r, integration, &out.rendered, &channel_overrides),
        })
    }

    /// The phone number of an SMS: `overrides.sms.to`, else the subscriber's `phone`, else its phone
    /// channel endpoint for the trigger's context.
    async fn phone(&self, r: &Resolved<'_>, channel_overrides: &Value) -> Result<Option<String>> {
        let phone = text(channel_overrides, "to").or_else(|| r.subscriber.profile.phone.clone());
        if phone.is_some() {
            return Ok(phone);
        }
        let context = context_set(&r.step.n.context_keys);
        let endpoints = self
            .store
            .delivery_endpoints(&r.env, &r.subscriber.subscriber_id, None, &context)
            .await?;
        Ok(endpoints
            .iter()
            .find(|e| e.endpoint_type == EndpointType::Phone)
            .and_then(|e| text(&e.endpoint, "phoneNumber")))
    }

    /// A chat message's destinations: the subscriber's channel endpoints of the integration for the
    /// trigger's context (with their connection's access token), else its first `webhookUrl` credential.
    async fn chat(
        &self,
        r: &Resolved<'_>,
        integration: &Integration,
        rendered: &Rendered,
    ) -> Result<Found> {
        let context = context_set(&r.step.n.context_keys);
        let endpoints = self
            .store
            .delivery_endpoints(
                &r.env,
                &r.subscriber.subscriber_id,
                Some(&integration.identifier),
                &context,
            )
            .await?;
        let mut out = Vec::new();
        for e in endpoints {
            if e.endpoint_type == EndpointType::Phone {
                continue;
            }
            let (access_token, workspace) = match &e.connection_identifier {
                Some(c) => match self.store.get_connection(&r.env, c).await? {
                    Some(conn) => (Some(conn.access_token), Some(conn.workspace)),
                    None => (None, None),
                },
                None => (None, None),
            };
            out.push(endpoint_target(r, e, rendered, access_token, workspace));
        }
        if out.is_empty() {
            out.extend(webhook_target(r, integration, rendered));
        }
        if out.is_empty() {
            return Ok(Err(Undelivered {
                error_id: "missing_chat_destination",
                text: format!(
                    "Subscriber {} has no {} destination: no channel endpoint of integration {} for this \
                     context and no webhookUrl credential",
                    r.subscriber.subscriber_id,
                    integration.provider_id.as_str(),
                    integration.identifier
                ),
            }));
        }
        Ok(Ok(out))
    }
}

/// An email to the subscriber's address and any `overrides.email.to`, with the overrides' sender, text,
/// reply-to, cc, bcc and headers, and the unsubscribe headers when it has a link.
fn email(
    r: &Resolved<'_>,
    credentials: &Credentials,
    out: &Outgoing,
    channel_overrides: &Value,
) -> Found {
    let subscriber = r.subscriber;
    let content = &out.rendered;
    let mut to: Vec<String> = subscriber.profile.email.iter().cloned().collect();
    for extra in strings(channel_overrides.get("to")) {
        if !to.contains(&extra) {
            to.push(extra);
        }
    }
    if to.is_empty() {
        return Err(Undelivered {
            error_id: "missing_email",
            text: format!(
                "Subscriber {} has no email address",
                subscriber.subscriber_id
            ),
        });
    }
    let msg = EmailMessage {
        to: to.clone(),
        from: text(channel_overrides, "from").or_else(|| credentials.get("from")),
        sender_name: text(channel_overrides, "senderName")
            .or_else(|| credentials.get("senderName")),
        subject: content.subject.clone().unwrap_or_default(),
        html: content.body.clone(),
        text: text(channel_overrides, "text").or_else(|| content.text.clone()),
        reply_to: text(channel_overrides, "replyTo"),
        cc: strings(channel_overrides.get("cc")),
        bcc: strings(channel_overrides.get("bcc")),
        attachments: out.attachments.clone(),
        headers: headers(channel_overrides, out.unsubscribe_url.as_deref()),
        payload: r.step.job.payload.clone(),
    };
    Ok(vec![Target {
        key: format!("email:{}", to.join(",")),
        outbound: Outbound::Email(msg),
        record: MessageDelivery {
            email: to.first().cloned(),
            ..Default::default()
        },
    }])
}

/// The headers an email step has: those of `overrides.email.headers` (string values), then, when the email
/// has an unsubscribe link, RFC 8058's one-click pair. The pair replaces any header of the same names
/// (case-insensitive) from the overrides: a link of another system beside ours, or a `List-Unsubscribe-Post`
/// that pointed to it, would unsubscribe from one place and not the other.
fn headers(channel_overrides: &Value, unsubscribe_url: Option<&str>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = channel_overrides
        .get("headers")
        .and_then(Value::as_object)
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    if let Some(url) = unsubscribe_url {
        let ours = [
            ("List-Unsubscribe", format!("<{url}>")),
            (
                "List-Unsubscribe-Post",
                "List-Unsubscribe=One-Click".to_owned(),
            ),
        ];
        out.retain(|(k, _)| !ours.iter().any(|(name, _)| k.eq_ignore_ascii_case(name)));
        out.extend(ours.map(|(k, v)| (k.to_owned(), v)));
    }
    out
}

/// An SMS to `phone` (see `Runner::phone`), from `overrides.sms.from` or the `from` credential.
fn sms(
    r: &Resolved<'_>,
    phone: Option<String>,
    credentials: &Credentials,
    rendered: &Rendered,
    channel_overrides: &Value,
) -> Found {
    let Some(phone) = phone else {
        return Err(Undelivered {
            error_id: "missing_phone",
            text: format!(
                "Subscriber {} has no phone number (neither `phone` nor a phone channel endpoint)",
                r.subscriber.subscriber_id
            ),
        });
    };
    Ok(vec![Target {
        key: format!("sms:{phone}"),
        outbound: Outbound::Sms(SmsMessage {
            to: phone.clone(),
            from: text(channel_overrides, "from").or_else(|| credentials.get("from")),
            content: rendered.body.clone(),
            payload: r.step.job.payload.clone(),
        }),
        record: MessageDelivery {
            phone: Some(phone),
            ..Default::default()
        },
    }])
}

/// A chat message to a channel endpoint.
fn endpoint_target(
    r: &Resolved<'_>,
    e: ChannelEndpoint,
    rendered: &Rendered,
    access_token: Option<String>,
    workspace: Option<Value>,
) -> Target {
    Target {
        key: format!("endpoint:{}", e.identifier),
        record: MessageDelivery {
            direct_webhook_url: e
                .endpoint
                .get("url")
                .and_then(Value::as_str)
                .map(str::to_owned),
            ..Default::default()
        },
        outbound: Outbound::Chat(ChatMessage {
            content: rendered.body.clone(),
            target: ChatTarget::Endpoint {
                endpoint_type: e.endpoint_type,
                data: e.endpoint,
                access_token,
                workspace,
            },
            payload: r.step.job.payload.clone(),
        }),
    }
}

/// A chat message to the first `webhookUrl` of the subscriber's settings for the integration.
fn webhook_target(
    r: &Resolved<'_>,
    integration: &Integration,
    rendered: &Rendered,
) -> Option<Target> {
    let (c, url) = settings_for(r.subscriber, integration)
        .into_iter()
        .find_map(|c| Some((c, c.credentials.webhook_url.clone()?)))?;
    Some(Target {
        key: format!("webhook:{url}"),
        record: MessageDelivery {
            direct_webhook_url: Some(url.clone()),
            ..Default::default()
        },
        outbound: Outbound::Chat(ChatMessage {
            content: rendered.body.clone(),
            target: ChatTarget::Webhook {
                url,
                channel: c.credentials.channel.clone(),
            },
            payload: r.step.job.payload.clone(),
        }),
    })
}

/// A push to every device token of the subscriber's settings for the integration, with `overrides.data`
/// (else `overrides.push.data`, else the payload) as its data.
fn push(
    r: &Resolved<'_>,
    integration: &Integration,
    rendered: &Rendered,
    channel_overrides: &Value,
) -> Found {
    let mut tokens: Vec<String> = Vec::new();
    for c in settings_for(r.subscriber, integration) {
        for t in c.credentials.device_tokens.iter().flatten() {
            if !tokens.contains(t) {
                tokens.push(t.clone());
            }
        }
    }
    if tokens.is_empty() {
        return Err(Undelivered {
            error_id: "missing_device_tokens",
            text: format!(
                "Subscriber {} has no device tokens for {}",
                r.subscriber.subscriber_id,
                integration.provider_id.as_str()
            ),
        });
    }
    let payload = &r.step.job.payload;
    let data = r
        .overrides
        .get("data")
        .or_else(|| channel_overrides.get("data"))
        .cloned()
        .unwrap_or_else(|| payload.clone());
    Ok(vec![Target {
        key: format!("push:{}", integration.id),
        record: MessageDelivery {
            device_tokens: Some(tokens.clone()),
            ..Default::default()
        },
        outbound: Outbound::Push(PushMessage {
            tokens,
            title: rendered.subject.clone().unwrap_or_default(),
            content: rendered.body.clone(),
            data,
            payload: payload.clone(),
        }),
    }])
}

/// The subscriber's channel settings for this integration: those linked to it first, then any of its provider.
fn settings_for<'a>(s: &'a Subscriber, i: &Integration) -> Vec<&'a ChannelSettings> {
    let mut out: Vec<_> = s
        .channels
        .iter()
        .filter(|c| c.provider_id == i.provider_id.as_str() && c.integration_id == i.id)
        .collect();
    out.extend(
        s.channels
            .iter()
            .filter(|c| c.provider_id == i.provider_id.as_str() && c.integration_id != i.id),
    );
    out
}

/// A text field of a JSON object.
fn text(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_owned)
}

/// Strings from a string or an array of strings.
fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixtures::{integration, notification, settings, step_job, subscriber};
    use super::super::{resolve, ChannelJob};
    use super::*;
    use crate::domain::subscriber::ChannelCredentials;

    fn rendered() -> Rendered {
        Rendered {
            subject: Some("Hi".into()),
            body: "<p>Hello</p>".into(),
            text: Some("Hello".into()),
        }
    }

    fn outgoing() -> Outgoing {
        Outgoing {
            rendered: rendered(),
            attachments: vec![],
            unsubscribe_url: None,
        }
    }

    fn credentials(v: Value) -> Credentials {
        Credentials::new(v.as_object().unwrap().clone())
    }

    /// `f` on a job of `step_type` with these overrides, for `subscriber`.
    fn with<T>(
        step_type: &str,
        overrides: Option<Value>,
        s: &Subscriber,
        f: impl FnOnce(&Resolved<'_>) -> T,
    ) -> T {
        let job = step_job(step_type, json!({}), overrides);
        let n = notification();
        f(&resolve(ChannelJob::new(&job, &n), Some(s)).ok().unwrap())
    }

    #[test]
    fn an_email_goes_to_the_subscriber_and_the_overrides_with_their_fields() {
        let overrides = json!({"email": {"to": ["ada@example.com", "cc@example.com"],
            "from": "news@example.com", "replyTo": "r@example.com", "cc": "c@example.com",
            "headers": {"X-A": "1", "X-N": 2}}});
        let creds = credentials(json!({"from": "default@example.com", "senderName": "Tidings"}));
        let found = with("email", Some(overrides.clone()), &subscriber(), |r| {
            let channel_overrides = &r.overrides["email"];
            email(r, &creds, &outgoing(), channel_overrides)
        });
        let [target] = &found.unwrap()[..] else {
            panic!("one target");
        };
        assert_eq!(target.key, "email:ada@example.com,cc@example.com");
        assert_eq!(target.record.email.as_deref(), Some("ada@example.com"));
        let Outbound::Email(m) = &target.outbound else {
            panic!("not an email");
        };
        assert_eq!(m.to, ["ada@example.com", "cc@example.com"]);
        assert_eq!(m.from.as_deref(), Some("news@example.com"));
        assert_eq!(m.sender_name.as_deref(), Some("Tidings"));
        assert_eq!(
            (m.subject.as_str(), m.html.as_str()),
            ("Hi", "<p>Hello</p>")
        );
        assert_eq!(m.text.as_deref(), Some("Hello"));
        assert_eq!(m.reply_to.as_deref(), Some("r@example.com"));
        assert_eq!(m.cc, ["c@example.com"]);
        assert!(m.bcc.is_empty());
        assert_eq!(m.headers, [("X-A".to_owned(), "1".to_owned())]);
        assert_eq!(m.payload, json!({"plan": "free"}));
    }

    #[test]
    fn an_unsubscribe_link_adds_the_one_click_pair_over_the_overrides_headers() {
        let overrides = json!({"headers": {"X-A": "1", "list-unsubscribe": "<mailto:u@x.test>",
            "List-Unsubscribe-POST": "x"}});
        let url = "https://t.example/v1/unsubscribe/abc.def";
        assert_eq!(
            headers(&overrides, Some(url)),
            [
                ("X-A".to_owned(), "1".to_owned()),
                ("List-Unsubscribe".to_owned(), format!("<{url}>")),
                (
                    "List-Unsubscribe-Post".to_owned(),
                    "List-Unsubscribe=One-Click".to_owned()
                ),
            ]
        );
        // Without a link the overrides' headers are sent as given.
        assert_eq!(headers(&overrides, None).len(), 3);
        assert!(headers(&Value::Null, None).is_empty());
    }

    #[test]
    fn a_subscriber_without_an_address_gets_no_email() {
        let mut s = subscriber();
        s.profile.email = None;
        let creds = credentials(json!({}));
        let why = with("email", None, &s, |r| {
            email(r, &creds, &outgoing(), &Value::Null)
        })
        .unwrap_err();
        assert_eq!(why.error_id, "missing_email");
        assert_eq!(why.text, "Subscriber sub-1 has no email address");
    }

    #[test]
    fn an_sms_goes_to_the_phone_found_or_says_there_is_none() {
        let creds = credentials(json!({"from": "+100"}));
        let found = with("sms", None, &subscriber(), |r| {
            sms(r, Some("+4412".into()), &creds, &rendered(), &Value::Null)
        })
        .unwrap();
        assert_eq!(found[0].key, "sms:+4412");
        assert_eq!(found[0].record.phone.as_deref(), Some("+4412"));
        let Outbound::Sms(m) = &found[0].outbound else {
            panic!("not an sms");
        };
        assert_eq!((m.to.as_str(), m.from.as_deref()), ("+4412", Some("+100")));
        assert_eq!(m.content, "<p>Hello</p>");

        let why = with("sms", None, &subscriber(), |r| {
            sms(r, None, &creds, &rendered(), &Value::Null)
        })
        .unwrap_err();
        assert_eq!(why.error_id, "missing_phone");
    }

    /// A subscriber with these channel settings.
    fn subscriber_with(channels: Vec<ChannelSettings>) -> Subscriber {
        Subscriber {
            channels,
            ..subscriber()
        }
    }

    fn tokens(t: &[&str]) -> ChannelCredentials {
        ChannelCredentials {
            device_tokens: Some(t.iter().map(|t| t.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn a_push_goes_to_the_tokens_of_the_integration_first_then_of_its_provider() {
        let fcm = integration("i-fcm", "fcm", 1);
        let s = subscriber_with(vec![
            settings("fcm", "other", tokens(&["t3", "t1"])),
            settings("apns", "i-apns", tokens(&["t9"])),
            settings("fcm", "i-fcm", tokens(&["t1", "t2"])),
        ]);
        let overrides = json!({"push": {"data": {"k": "push"}}});
        let found = with("push", Some(overrides), &s, |r| {
            push(r, &fcm, &rendered(), &r.overrides["push"])
        })
        .unwrap();
        assert_eq!(found[0].key, "push:i-fcm");
        assert_eq!(
            found[0].record.device_tokens.as_deref(),
            Some(&["t1".to_owned(), "t2".to_owned(), "t3".to_owned()][..])
        );
        let Outbound::Push(m) = &found[0].outbound else {
            panic!("not a push");
        };
        assert_eq!(
            (m.title.as_str(), m.content.as_str()),
            ("Hi", "<p>Hello</p>")
        );
        assert_eq!(m.data, json!({"k": "push"}));

        // `overrides.data` wins; without either, the payload.
        let overrides = json!({"data": {"k": "top"}, "push": {"data": {"k": "push"}}});
        let data = |overrides: Option<Value>| {
            with("push", overrides, &s, |r| {
                let found = push(r, &fcm, &rendered(), &r.overrides["push"]).unwrap();
                match &found[0].outbound {
                    Outbound::Push(m) => m.data.clone(),
                    _ => Value::Null,
                }
            })
        };
        assert_eq!(data(Some(overrides)), json!({"k": "top"}));
        assert_eq!(data(None), json!({"plan": "free"}));

        let why = with("push", None, &subscriber(), |r| {
            push(r, &fcm, &rendered(), &Value::Null)
        })
        .unwrap_err();
        assert_eq!(why.text, "Subscriber sub-1 has no device tokens for fcm");
    }

    #[test]
    fn a_chat_webhook_is_the_first_webhook_url_of_the_settings() {
        let slack = integration("i-slack", "slack", 1);
        let hook = |url: Option<&str>, channel: Option<&str>| ChannelCredentials {
            webhook_url: url.map(str::to_owned),
            channel: channel.map(str::to_owned),
            ..Default::default()
        };
        let s = subscriber_with(vec![
            settings("slack", "other", hook(Some("https://hooks/other"), None)),
            settings("slack", "i-slack", hook(None, None)),
            settings(
                "slack",
                "i-slack",
                hook(Some("https://hooks/mine"), Some("#general")),
            ),
        ]);
        let target = with("chat", None, &s, |r| webhook_target(r, &slack, &rendered())).unwrap();
        assert_eq!(target.key, "webhook:https://hooks/mine");
        assert_eq!(
            target.record.direct_webhook_url.as_deref(),
            Some("https://hooks/mine")
        );
        let Outbound::Chat(ChatMessage {
            target: ChatTarget::Webhook { url, channel },
            ..
        }) = &target.outbound
        else {
            panic!("not a webhook");
        };
        assert_eq!(
            (url.as_str(), channel.as_deref()),
            ("https://hooks/mine", Some("#general"))
        );
        assert!(with("chat", None, &subscriber(), |r| webhook_target(
            r,
            &slack,
            &rendered()
        ))
        .is_none());
    }

    #[test]
    fn override_lists_take_a_string_or_an_array() {
        assert_eq!(strings(Some(&json!("a"))), ["a"]);
        assert_eq!(strings(Some(&json!(["a", 1, "b"]))), ["a", "b"]);
        assert!(strings(Some(&json!(""))).is_empty());
        assert!(strings(None).is_empty());
    }
}
