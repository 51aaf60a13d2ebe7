//! Topics (named groups of subscribers, addressed by a key) and their subscriptions.

use super::{EnvironmentId, OrganizationId, SubscriberRef, SubscriptionId, Timestamp, TopicId};
use crate::error::Validation;

/// Longest topic key.
pub const MAX_KEY_LEN: usize = 100;
/// Longest topic name.
pub const MAX_NAME_LEN: usize = 200;
/// Longest subscription identifier (the default one joins a key and a subscriberId).
pub const MAX_IDENTIFIER_LEN: usize = 400;
/// Most subscriber ids one subscribe or unsubscribe request may name.
pub const MAX_SUBSCRIPTIONS_PER_REQUEST: usize = 100;

#[derive(Debug, Clone, PartialEq)]
pub struct Topic {
    pub id: TopicId,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub key: String,
    pub name: Option<String>,
    /// The operator opened the topic to self-subscription: a subscriber may subscribe itself to it through
    /// the Inbox (off by default: the Inbox never joins a topic the operator did not offer).
    pub allow_self_subscription: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One subscriber's membership of one topic.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicSubscription {
    pub id: SubscriptionId,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub topic_id: TopicId,
    pub topic_key: String,
    pub subscriber_ref: SubscriberRef,
    pub subscriber_id: String,
    pub identifier: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The identifier a subscription gets when the request names none.
pub fn default_identifier(topic_key: &str, subscriber_id: &str) -> String {
    format!("tk_{topic_key}:si_{subscriber_id}")
}

/// A topic key: 1 to [`MAX_KEY_LEN`] characters among letters, digits, `_`, `-`, `:` and `.`, and not `.` or
/// `..` (path segments: clients and proxies resolve `/v2/topics/..` to another route, so such a topic could
/// never be read, changed or deleted).
pub fn validate_key(v: &mut Validation, field: &str, key: &str) {
    if key.is_empty() {
        v.add(field, format!("{field} must not be empty"), key);
    } else if key == "." || key == ".." {
        v.add(field, format!("{field} must not be '.' or '..'"), key);
    } else if key.chars().count() > MAX_KEY_LEN {
        v.add(
            field,
            format!("{field} must be at most {MAX_KEY_LEN} characters"),
            key,
        );
    } else if !key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.'))
    {
        v.add(
            field,
            format!("{field} may hold only letters, digits, '_', '-', ':' and '.'"),
            key,
        );
    }
}

/// A topic name: at most [`MAX_NAME_LEN`] characters.
pub fn validate_name(v: &mut Validation, field: &str, name: &str) {
    if name.chars().count() > MAX_NAME_LEN {
        v.add(
            field,
            format!("{field} must be at most {MAX_NAME_LEN} characters"),
            name,
        );
    }
}

/// A subscription identifier: 1 to [`MAX_IDENTIFIER_LEN`] characters, no control characters.
pub fn validate_identifier(v: &mut Validation, field: &str, identifier: &str) {
    if identifier.is_empty() {
        v.add(field, format!("{field} must not be empty"), identifier);
    } else if identifier.chars().count() > MAX_IDENTIFIER_LEN {
        v.add(
            field,
            format!("{field} must be at most {MAX_IDENTIFIER_LEN} characters"),
            identifier,
        );
    } else if identifier.chars().any(char::is_control) {
        v.add(
            field,
            format!("{field} must not hold control characters"),
            identifier,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(key: &str) -> usize {
        let mut v = Validation::new();
        validate_key(&mut v, "key", key);
        v.0.len()
    }

    #[test]
    fn keys_are_bounded_and_plain() {
        assert_eq!(problems("team:42.watchers_a-b"), 0);
        assert_eq!(problems(""), 1);
        assert_eq!(problems(&"k".repeat(MAX_KEY_LEN)), 0);
        assert_eq!(problems(&"k".repeat(MAX_KEY_LEN + 1)), 1);
        assert_eq!(problems("with space"), 1);
        assert_eq!(problems("a/b"), 1);
        assert_eq!(problems("é"), 1);
        assert_eq!(problems("."), 1);
        assert_eq!(problems(".."), 1);
        assert_eq!(problems("..."), 0);
        assert_eq!(problems("v1.2"), 0);
    }

    #[test]
    fn the_default_identifier_names_topic_and_subscriber() {
        assert_eq!(default_identifier("news", "ada"), "tk_news:si_ada");
    }
}
