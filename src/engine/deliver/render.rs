//! The render phase: a channel step's `subject` and `body` controls as they are sent.

use serde_json::{Map, Value};

use crate::domain::Channel;
use crate::render::email_blocks::email_body_template;
use crate::render::{
    html_to_text, sanitization_disabled, sanitize_html, text_of_clean_html, Renderer,
};

/// A step's rendered content.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Rendered {
    pub(super) subject: Option<String>,
    pub(super) body: String,
    /// An email's plain-text alternative, derived from its HTML body.
    pub(super) text: Option<String>,
}

/// Renders the step's `subject` and `body` controls (an email body given as a block document becomes HTML);
/// `Err` says why the step cannot be sent.
pub(super) fn render(
    renderer: &Renderer,
    controls: &Map<String, Value>,
    channel: Channel,
    vars: &Value,
) -> Result<Rendered, String> {
    let get = |k: &str| controls.get(k).and_then(Value::as_str).unwrap_or_default();
    let body_template = if channel == Channel::Email {
        email_body_template(get("body"))
            .map_err(|e| e.message)?
            .into_owned()
    } else {
        get("body").to_owned()
    };
    let body = renderer
        .render_str(&body_template, vars)
        .map_err(|e| format!("The {} body could not be rendered: {e}", channel.as_str()))?;
    let subject = match controls.get("subject").and_then(Value::as_str) {
        Some(s) => Some(
            renderer
                .render_str(s, vars)
                .map_err(|e| format!("The subject could not be rendered: {e}"))?,
        ),
        None => None,
    };
    if channel == Channel::Email && subject.as_deref().unwrap_or("").trim().is_empty() {
        return Err("The email step has no subject: set the `subject` control".to_owned());
    }
    if body.trim().is_empty() {
        return Err(format!(
            "The {} step rendered an empty body: set the `body` control",
            channel.as_str()
        ));
    }
    // An email's HTML is sanitised unless the step says otherwise (the subject is a plain-text
    // header, not HTML); its text part comes from the HTML as sent.
    let (body, text) = if channel != Channel::Email {
        (body, None)
    } else if sanitization_disabled(controls) {
        let text = html_to_text(&body);
        (body, Some(text))
    } else {
        let clean = sanitize_html(&body).into_owned();
        let text = text_of_clean_html(&clean);
        (clean, Some(text))
    };
    Ok(Rendered {
        subject,
        body,
        text: text.filter(|t| !t.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rendered(channel: Channel, controls: Value) -> Result<Rendered, String> {
        let vars = json!({"payload": {"name": "Ada"}, "subscriber": {"firstName": "Grace"}});
        render(
            &Renderer::default(),
            controls.as_object().unwrap(),
            channel,
            &vars,
        )
    }

    #[test]
    fn an_email_is_rendered_sanitised_with_a_text_part() {
        let r = rendered(
            Channel::Email,
            json!({"subject": "Hi {{subscriber.firstName}}",
                "body": "<p>Hello {{payload.name}}</p><script>x()</script>"}),
        )
        .unwrap();
        assert_eq!(r.subject.as_deref(), Some("Hi Grace"));
        assert_eq!(r.body, "<p>Hello Ada</p>");
        assert_eq!(r.text.as_deref(), Some("Hello Ada"));
        // Unless the step turns sanitisation off.
        let r = rendered(
            Channel::Email,
            json!({"subject": "s", "body": "<p>a</p><script>x()</script>",
                "disableOutputSanitization": true}),
        )
        .unwrap();
        assert_eq!(r.body, "<p>a</p><script>x()</script>");
    }

    #[test]
    fn other_channels_send_the_body_as_rendered() {
        let r = rendered(Channel::Sms, json!({"body": "<b>{{payload.name}}</b>"})).unwrap();
        assert_eq!(
            r,
            Rendered {
                subject: None,
                body: "<b>Ada</b>".into(),
                text: None
            }
        );
    }

    #[test]
    fn a_step_without_subject_or_body_says_which_control_to_set() {
        assert_eq!(
            rendered(Channel::Email, json!({"body": "<p>a</p>"})).unwrap_err(),
            "The email step has no subject: set the `subject` control"
        );
        assert_eq!(
            rendered(Channel::Chat, json!({"body": "  {{payload.none}} "})).unwrap_err(),
            "The chat step rendered an empty body: set the `body` control"
        );
        let bad = rendered(
            Channel::Sms,
            json!({"body": "{{ payload.name | nofilter }}"}),
        );
        assert!(bad
            .unwrap_err()
            .starts_with("The sms body could not be rendered: "));
    }
}
