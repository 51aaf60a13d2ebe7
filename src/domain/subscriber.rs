//! Subscribers and their per-provider channel credentials (spec §2.4), with the pure rules for
//! validating fields and merging credentials.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{EnvironmentId, IntegrationId, OrganizationId, SubscriberRef, Timestamp};
use crate::error::Validation;

/// Most device tokens one subscriber channel may hold.
pub const MAX_DEVICE_TOKENS: usize = 100;

/// ChannelCredentials: every field optional; unknown keys are dropped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelCredentials {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_tokens: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_url: Option<String>,
}

/// One provider's settings on a subscriber, as stored (provider id in canonical spelling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelSettings {
    pub provider_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration_identifier: Option<String>,
    pub credentials: ChannelCredentials,
    #[serde(rename = "_integrationId")]
    pub integration_id: IntegrationId,
}

/// Declares the subscriber's profile once, as the struct [`SubscriberProfile`] and its change form
/// [`ProfileInput`] (what a caller sends: a missing field is left alone, `null` clears it), each field
/// with its wire name. Everything else serialises or deserialises these two.
macro_rules! profile {
    ( $( $(#[$meta:meta])* $field:ident $name:tt : $ty:ty ),+ $(,)? ) => {
        /// A subscriber's profile: the fields a caller sets and templates, conditions and the Inbox read.
        /// Every field is optional; on the wire an unset field is `null`.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
        pub struct SubscriberProfile {
            $( $(#[$meta])* #[serde(rename = $name, default)] pub $field: Option<$ty>, )+
        }

        /// A subscriber as a caller gives it (`POST`/`PATCH /v2/subscribers`, a trigger's `to`, the Inbox
        /// session's `subscriber`): its subscriberId and the profile fields it sends. A missing field
        /// (`None`) is left alone, `null` (`Some(None)`) clears it; unknown fields are ignored.
        #[derive(Debug, Clone, Default, PartialEq, Deserialize, utoipa::ToSchema)]
        #[schema(as = SubscriberIn, description = "Body of `POST /v2/subscribers` (`subscriberId` required) \
            and `PATCH /v2/subscribers/{subscriberId}`\n(`subscriberId` ignored): a missing field is unchanged, \
            `null` clears it.")]
        pub struct ProfileInput {
            /// Required on create: the id of the subscriber in your system.
            #[serde(rename = "subscriberId", default)]
            pub subscriber_id: Option<String>,
            $(
                $(#[$meta])*
                #[serde(rename = $name, default, deserialize_with = "present")]
                pub $field: Option<Option<$ty>>,
            )+
        }

        impl SubscriberProfile {
            /// The wire names of the fields, in declaration order.
            pub const FIELDS: &'static [&'static str] = &[$($name),+];

            /// Writes the fields `keep` accepts as entries of `map`, in declaration order (an output
            /// whose wire order splits the profile writes it in parts).
            pub fn serialize_fields<M: serde::ser::SerializeMap>(
                &self,
                map: &mut M,
                keep: impl Fn(&str) -> bool,
            ) -> Result<(), M::Error> {
                $( if keep($name) { map.serialize_entry($name, &self.$field)?; } )+
                Ok(())
            }
        }

        impl ProfileInput {
            /// Whether it changes no profile field.
            pub fn changes_nothing(&self) -> bool {
                true $( && self.$field.is_none() )+
            }

            /// Writes the fields it gives over `profile`.
            pub fn apply(self, profile: &mut SubscriberProfile) {
                $( if let Some(v) = self.$field { profile.$field = v; } )+
            }

            /// The profile it would give a new subscriber.
            /// These fields, then `later`'s over them: what giving both in turn sets.
            pub fn then(self, later: ProfileInput) -> ProfileInput {
                ProfileInput {
                    subscriber_id: later.subscriber_id.or(self.subscriber_id),
                    $( $field: later.$field.or(self.$field), )+
                }
            }

            pub fn profile(&self) -> SubscriberProfile {
                let mut p = SubscriberProfile::default();
                self.clone().apply(&mut p);
                p
            }
        }
    };
}

profile! {
    first_name "firstName": String,
    last_name "lastName": String,
    email "email": String,
    phone "phone": String,
    avatar "avatar": String,
    locale "locale": String,
    #[schema(value_type = Option<Object>)]
    data "data": Value,
    timezone "timezone": String,
}

/// Distinguishes an absent field (`None`, through `default`) from an explicit `null` (`Some(None)`).
pub(crate) fn present<'de, T: Deserialize<'de>, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Subscriber {
    pub id: SubscriberRef,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub subscriber_id: String,
    pub profile: SubscriberProfile,
    pub channels: Vec<ChannelSettings>,
    pub is_online: Option<bool>,
    pub last_online_at: Option<Timestamp>,
    pub deleted: bool,
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What an activity record shows of its subscriber, borrowed from a row.
#[derive(Debug, Clone, Copy)]
pub struct SubscriberContact<'a> {
    pub id: &'a str,
    pub subscriber_id: &'a str,
    pub first_name: Option<&'a str>,
    pub last_name: Option<&'a str>,
    pub email: Option<&'a str>,
    pub phone: Option<&'a str>,
}

impl Subscriber {
    /// `firstName + " " + lastName`, trimmed: what the `name` search matches.
    pub fn full_name(&self) -> String {
        full_name(
            self.profile.first_name.as_deref(),
            self.profile.last_name.as_deref(),
        )
    }

    /// The subscriber as templates, skip conditions and integration conditions see it: its profile under
    /// the API's names, and `subscriberId`.
    pub fn values(&self) -> Value {
        let mut v =
            serde_json::to_value(&self.profile).unwrap_or_else(|_| Value::Object(Map::new()));
        if let Value::Object(m) = &mut v {
            m.insert(
                "subscriberId".into(),
                Value::String(self.subscriber_id.clone()),
            );
        }
        v
    }
}

pub fn full_name(first: Option<&str>, last: Option<&str>) -> String {
    format!("{} {}", first.unwrap_or(""), last.unwrap_or(""))
        .trim()
        .to_owned()
}

/// How `deviceTokens` of an update combine with the stored ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenMode {
    /// `PUT …/credentials`: the given list replaces the stored one (`[]` clears; absent keeps it).
    Replace,
    /// `PATCH …/credentials`: the given tokens are added to the stored ones.
    Append,
}

/// Too many device tokens: how many the channel would have held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyTokens(pub usize);

fn dedupe(tokens: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tokens {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// Creates or updates the subscriber's entry for (`provider_id`, `integration_id`).
/// Fields given in `incoming` replace stored ones; fields not given are kept.
pub fn upsert_channel(
    channels: &mut Vec<ChannelSettings>,
    provider_id: &str,
    integration_id: &IntegrationId,
    integration_identifier: Option<&str>,
    incoming: ChannelCredentials,
    mode: TokenMode,
) -> Result<(), TooManyTokens> {
    let incoming_tokens = incoming.device_tokens.clone().map(dedupe);
    let pos = channels
        .iter()
        .position(|c| c.provider_id == provider_id && c.integration_id == *integration_id);
    let merged = match pos.map(|i| &channels[i].credentials) {
        None => ChannelCredentials {
            device_tokens: incoming_tokens,
            ..incoming
        },
        Some(old) => {
            let device_tokens = match (mode, incoming_tokens) {
                (_, None) => old.device_tokens.clone(),
                (TokenMode::Replace, Some(new)) => Some(new),
                (TokenMode::Append, Some(new)) => Some(dedupe(
                    old.device_tokens
                        .clone()
                        .unwrap_or_default()
                        .into_iter()
                        .chain(new),
                )),
            };
            ChannelCredentials {
                webhook_url: incoming.webhook_url.or_else(|| old.webhook_url.clone()),
                channel: incoming.channel.or_else(|| old.channel.clone()),
                device_tokens,
                alert_uid: incoming.alert_uid.or_else(|| old.alert_uid.clone()),
                title: incoming.title.or_else(|| old.title.clone()),
                image_url: incoming.image_url.or_else(|| old.image_url.clone()),
                state: incoming.state.or_else(|| old.state.clone()),
                external_url: incoming.external_url.or_else(|| old.external_url.clone()),
            }
        }
    };
    let count = merged.device_tokens.as_ref().map_or(0, Vec::len);
    if count > MAX_DEVICE_TOKENS {
        return Err(TooManyTokens(count));
    }
    let entry = ChannelSettings {
        provider_id: provider_id.to_owned(),
        integration_identifier: integration_identifier.map(str::to_owned),
        credentials: merged,
        integration_id: integration_id.clone(),
    };
    match pos {
        Some(i) => {
            let keep_identifier = channels[i].integration_identifier.clone();
            channels[i] = ChannelSettings {
                integration_identifier: entry.integration_identifier.or(keep_identifier),
                ..entry
            };
        }
        None => channels.push(entry),
    }
    Ok(())
}

/// Checks the user-editable profile fields; adds a message per bad field.
pub fn validate_profile(
    v: &mut Validation,
    email: Option<&str>,
    timezone: Option<&str>,
    data: Option<&Value>,
    avatar: Option<&str>,
) {
    if let Some(e) = email {
        if e.parse::<email_address::EmailAddress>().is_err() {
            v.add("email", "email must be a valid email address", e);
        }
    }
    if let Some(tz) = timezone {
        if tz.parse::<chrono_tz::Tz>().is_err() {
            v.add(
                "timezone",
                "timezone must be a valid IANA time zone, e.g. Europe/Paris",
                tz,
            );
        }
    }
    if let Some(d) = data {
        if !d.is_object() {
            v.add("data", "data must be an object", d.clone());
        }
    }
    if let Some(a) = avatar {
        if !(a.starts_with("http://") || a.starts_with("https://")) {
            v.add("avatar", "avatar must be an http(s) URL", a);
        }
    }
}

/// A trigger's recipient (`to`) as its notification keeps it: as given, but for the `credentials` of its
/// `channels`. They are the subscriber's, stored sealed with it (the trigger updates it); the notification is
/// kept in clear for the activity feed, so it names each channel (`providerId`, `integrationIdentifier`)
/// and nothing secret.
pub fn recipient_as_kept(mut to: Value) -> Value {
    if let Some(channels) = to.get_mut("channels").and_then(Value::as_array_mut) {
        for c in channels.iter_mut().filter_map(Value::as_object_mut) {
            c.remove("credentials");
        }
    }
    to
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_recipient_names_its_channels_without_their_credentials() {
        let to = serde_json::json!({"subscriberId": "s", "email": "a@b.c", "channels": [
            {"providerId": "fcm", "integrationIdentifier": "f", "credentials": {"deviceTokens": ["t"]}},
            {"providerId": "slack", "credentials": {"webhookUrl": "https://hooks/x"}}, "odd"]});
        assert_eq!(
            recipient_as_kept(to),
            serde_json::json!({"subscriberId": "s", "email": "a@b.c", "channels": [
                {"providerId": "fcm", "integrationIdentifier": "f"}, {"providerId": "slack"}, "odd"]})
        );
        let plain = serde_json::json!({"subscriberId": "s", "channels": "x"});
        assert_eq!(recipient_as_kept(plain.clone()), plain);
    }

    fn creds(tokens: &[&str]) -> ChannelCredentials {
        ChannelCredentials {
            device_tokens: Some(tokens.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn replace_dedupes_and_keeps_other_fields() {
        let mut ch = Vec::new();
        let first = ChannelCredentials {
            webhook_url: Some("https://hook".into()),
            ..creds(&["a", "b", "a"])
        };
        upsert_channel(
            &mut ch,
            "fcm",
            &"int1".into(),
            None,
            first,
            TokenMode::Replace,
        )
        .unwrap();
        assert_eq!(
            ch[0].credentials.device_tokens,
            Some(vec!["a".into(), "b".into()])
        );
        upsert_channel(
            &mut ch,
            "fcm",
            &"int1".into(),
            None,
            creds(&["c"]),
            TokenMode::Replace,
        )
        .unwrap();
        assert_eq!(ch.len(), 1);
        assert_eq!(ch[0].credentials.device_tokens, Some(vec!["c".into()]));
        assert_eq!(
            ch[0].credentials.webhook_url.as_deref(),
            Some("https://hook")
        );
        upsert_channel(
            &mut ch,
            "fcm",
            &"int1".into(),
            None,
            creds(&[]),
            TokenMode::Replace,
        )
        .unwrap();
        assert_eq!(ch[0].credentials.device_tokens, Some(vec![]));
    }

    #[test]
    fn append_unions_and_other_integrations_get_their_own_entry() {
        let mut ch = Vec::new();
        upsert_channel(
            &mut ch,
            "fcm",
            &"int1".into(),
            None,
            creds(&["a"]),
            TokenMode::Append,
        )
        .unwrap();
        upsert_channel(
            &mut ch,
            "fcm",
            &"int1".into(),
            None,
            creds(&["b", "a"]),
            TokenMode::Append,
        )
        .unwrap();
        assert_eq!(
            ch[0].credentials.device_tokens,
            Some(vec!["a".into(), "b".into()])
        );
        upsert_channel(
            &mut ch,
            "fcm",
            &"int2".into(),
            Some("fcm-2"),
            creds(&["z"]),
            TokenMode::Append,
        )
        .unwrap();
        assert_eq!(ch.len(), 2);
        assert_eq!(ch[1].integration_identifier.as_deref(), Some("fcm-2"));
    }

    #[test]
    fn more_than_100_tokens_is_refused() {
        let many: Vec<String> = (0..101).map(|i| format!("t{i}")).collect();
        let mut ch = Vec::new();
        let c = ChannelCredentials {
            device_tokens: Some(many),
            ..Default::default()
        };
        assert_eq!(
            upsert_channel(&mut ch, "fcm", &"i".into(), None, c, TokenMode::Replace),
            Err(TooManyTokens(101))
        );
        assert!(ch.is_empty());
    }

    #[test]
    fn profile_validation() {
        let mut v = Validation::new();
        validate_profile(
            &mut v,
            Some("nope"),
            Some("Mars/Base"),
            Some(&Value::from(3)),
            Some("ftp://x"),
        );
        let fields: Vec<_> = v.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["email", "timezone", "data", "avatar"]);
        let mut ok = Validation::new();
        validate_profile(
            &mut ok,
            Some("a@b.co"),
            Some("Europe/Paris"),
            Some(&serde_json::json!({})),
            None,
        );
        assert!(ok.is_empty());
    }

    #[test]
    fn full_name_is_trimmed() {
        assert_eq!(full_name(Some("Ada"), Some("Lovelace")), "Ada Lovelace");
        assert_eq!(full_name(Some("Ada"), None), "Ada");
        assert_eq!(full_name(None, None), "");
    }
}
