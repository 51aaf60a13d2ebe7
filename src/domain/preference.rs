//! Subscriber preferences and the rule that decides whether a channel step reaches a subscriber.
//!
//! Three levels, each overriding the one before it channel by channel (as Novu merges them):
//! 1. the workflow's defaults: its `preferences` (`{workflow, user}`, the `user` level winning), every
//!    channel on where they say nothing; `all.readOnly` keeps subscribers from overriding them;
//! 2. the subscriber's global preference;
//! 3. the subscriber's preference for that workflow.
//!
//! A level says nothing about a channel it did not set (`None`). `enabled` (the whole workflow, or at the
//! global level everything) is off when the nearest level that set it says so. A critical workflow ignores
//! every level: it always delivers.

use serde_json::Value;

use super::{Channel, EnvironmentId, SubscriberRef, Timestamp, WorkflowRef};

/// A level's choice per channel; `None`: not chosen at this level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelChoices {
    pub in_app: Option<bool>,
    pub email: Option<bool>,
    pub sms: Option<bool>,
    pub chat: Option<bool>,
    pub push: Option<bool>,
}

impl ChannelChoices {
    pub fn get(&self, channel: Channel) -> Option<bool> {
        match channel {
            Channel::InApp => self.in_app,
            Channel::Email => self.email,
            Channel::Sms => self.sms,
            Channel::Chat => self.chat,
            Channel::Push => self.push,
        }
    }

    pub fn set(&mut self, channel: Channel, value: Option<bool>) {
        let slot = match channel {
            Channel::InApp => &mut self.in_app,
            Channel::Email => &mut self.email,
            Channel::Sms => &mut self.sms,
            Channel::Chat => &mut self.chat,
            Channel::Push => &mut self.push,
        };
        *slot = value;
    }

    /// Whether no channel is chosen.
    pub fn is_empty(&self) -> bool {
        Channel::ALL.iter().all(|c| self.get(*c).is_none())
    }
}

/// A subscriber's preference at one level: global (`workflow_ref` `None`) or for one workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriberPreference {
    pub environment_id: EnvironmentId,
    pub subscriber_ref: SubscriberRef,
    pub workflow_ref: Option<WorkflowRef>,
    /// The whole workflow (or, globally, everything) on or off; `None`: not chosen.
    pub enabled: Option<bool>,
    pub channels: ChannelChoices,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A workflow's default preferences, read from its stored `preferences`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkflowDefaults {
    /// Each channel's default, in [`Channel::ALL`] order.
    pub channels: [bool; 5],
    /// Subscribers cannot override these defaults.
    pub read_only: bool,
}

impl Default for WorkflowDefaults {
    fn default() -> Self {
        Self {
            channels: [true; 5],
            read_only: false,
        }
    }
}

impl WorkflowDefaults {
    /// The defaults of a workflow's stored `preferences` (`{workflow, user}`): for each channel its own
    /// `enabled`, else the level's `all.enabled`, the `user` level over the `workflow` one; every channel on
    /// and not read-only where neither says anything. A malformed level is ignored.
    pub fn of(preferences: Option<&Value>) -> Self {
        let mut out = Self::default();
        for level in ["workflow", "user"] {
            let Some(level) = preferences
                .and_then(|p| p.get(level))
                .filter(|l| l.is_object())
            else {
                continue;
            };
            let flag =
                |v: Option<&Value>, key: &str| v.and_then(|x| x.get(key)).and_then(Value::as_bool);
            let all = level.get("all");
            if let Some(read_only) = flag(all, "readOnly") {
                out.read_only = read_only;
            }
            let all_enabled = flag(all, "enabled");
            for (i, c) in Channel::ALL.iter().enumerate() {
                let own = flag(
                    level.get("channels").and_then(|cs| cs.get(c.as_str())),
                    "enabled",
                );
                if let Some(on) = own.or(all_enabled) {
                    out.channels[i] = on;
                }
            }
        }
        out
    }

    pub fn channel(&self, channel: Channel) -> bool {
        self.channels[channel_index(channel)]
    }
}

fn channel_index(channel: Channel) -> usize {
    Channel::ALL
        .iter()
        .position(|c| *c == channel)
        .expect("every channel is in Channel::ALL")
}

/// Where an effective value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The workflow's defaults.
    Workflow,
    /// The subscriber's global preference.
    SubscriberGlobal,
    /// The subscriber's preference for the workflow.
    SubscriberWorkflow,
}

impl Source {
    /// The `source` of Novu's preference `overrides`.
    pub fn wire(self) -> &'static str {
        match self {
            Source::Workflow => "template",
            Source::SubscriberGlobal | Source::SubscriberWorkflow => "subscriber",
        }
    }

    /// The level in words, for an execution detail.
    pub fn describe(self) -> &'static str {
        match self {
            Source::Workflow => "the workflow's default preferences",
            Source::SubscriberGlobal => "the subscriber's global preference",
            Source::SubscriberWorkflow => "the subscriber's preference for this workflow",
        }
    }
}

/// The preference that applies to one subscriber and one workflow, each value with its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effective {
    pub enabled: (bool, Source),
    /// In [`Channel::ALL`] order.
    pub channels: [(bool, Source); 5],
}

impl Effective {
    /// Merges the levels (see the module). `critical` or read-only defaults leave the subscriber's levels out.
    pub fn of(
        critical: bool,
        defaults: WorkflowDefaults,
        global: Option<&SubscriberPreference>,
        own: Option<&SubscriberPreference>,
    ) -> Self {
        let mut out = Self {
            enabled: (true, Source::Workflow),
            channels: [(true, Source::Workflow); 5],
        };
        if critical {
            return out;
        }
        for (i, on) in defaults.channels.iter().enumerate() {
            out.channels[i] = (*on, Source::Workflow);
        }
        if defaults.read_only {
            return out;
        }
        for (level, source) in [
            (global, Source::SubscriberGlobal),
            (own, Source::SubscriberWorkflow),
        ] {
            let Some(p) = level else { continue };
            if let Some(on) = p.enabled {
                out.enabled = (on, source);
            }
            for (i, c) in Channel::ALL.iter().enumerate() {
                if let Some(on) = p.channels.get(*c) {
                    out.channels[i] = (on, source);
                }
            }
        }
        out
    }

    pub fn channel(&self, channel: Channel) -> (bool, Source) {
        self.channels[channel_index(channel)]
    }

    /// Whether a step of `channel` runs; else what turned it off, in words.
    pub fn allows(&self, channel: Channel) -> Result<(), String> {
        let (on, source) = self.enabled;
        if !on {
            let what = match source {
                Source::SubscriberGlobal => "every notification",
                _ => "this workflow",
            };
            return Err(format!("{what} is off in {}", source.describe()));
        }
        match self.channel(channel) {
            (true, _) => Ok(()),
            (false, source) => Err(format!(
                "{} is off in {}",
                channel.as_str(),
                source.describe()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pref(enabled: Option<bool>, email: Option<bool>, sms: Option<bool>) -> SubscriberPreference {
        SubscriberPreference {
            environment_id: "e".into(),
            subscriber_ref: SubscriberRef::from("s".to_owned()),
            workflow_ref: None,
            enabled,
            channels: ChannelChoices {
                email,
                sms,
                ..Default::default()
            },
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        }
    }

    #[test]
    fn defaults_take_the_channel_then_all_then_on_and_the_user_level_wins() {
        assert_eq!(WorkflowDefaults::of(None), WorkflowDefaults::default());
        let d = WorkflowDefaults::of(Some(&json!({
            "workflow": {"all": {"enabled": false, "readOnly": false}, "channels": {"email": {"enabled": true}}},
            "user": {"all": {"readOnly": true}, "channels": {"sms": {"enabled": true}}},
        })));
        assert!(d.channel(Channel::Email));
        assert!(d.channel(Channel::Sms));
        assert!(!d.channel(Channel::Push));
        assert!(!d.channel(Channel::InApp));
        assert!(d.read_only);
        // A malformed level says nothing.
        let d = WorkflowDefaults::of(Some(&json!({"workflow": "off", "user": null})));
        assert_eq!(d, WorkflowDefaults::default());
    }

    #[test]
    fn each_level_overrides_the_one_before_channel_by_channel() {
        let mut defaults = WorkflowDefaults::default();
        defaults.channels[channel_index(Channel::Sms)] = false;
        let global = pref(None, Some(false), None);
        let own = pref(None, None, Some(true));
        let e = Effective::of(false, defaults, Some(&global), Some(&own));
        assert_eq!(e.channel(Channel::Email), (false, Source::SubscriberGlobal));
        assert_eq!(e.channel(Channel::Sms), (true, Source::SubscriberWorkflow));
        assert_eq!(e.channel(Channel::Push), (true, Source::Workflow));
        assert!(e.allows(Channel::Email).unwrap_err().contains("global"));
        // The workflow's own preference wins over the global one.
        let own = pref(None, Some(true), None);
        let e = Effective::of(false, defaults, Some(&global), Some(&own));
        assert_eq!(e.allows(Channel::Email), Ok(()));
        assert_eq!(
            e.allows(Channel::Sms),
            Err("sms is off in the workflow's default preferences".into())
        );
    }

    #[test]
    fn enabled_off_stops_every_channel() {
        let own = pref(Some(false), Some(true), None);
        let e = Effective::of(false, WorkflowDefaults::default(), None, Some(&own));
        assert_eq!(
            e.allows(Channel::Email),
            Err("this workflow is off in the subscriber's preference for this workflow".into())
        );
        let global = pref(Some(false), None, None);
        let e = Effective::of(false, WorkflowDefaults::default(), Some(&global), None);
        assert!(e
            .allows(Channel::Push)
            .unwrap_err()
            .contains("every notification"));
    }

    #[test]
    fn read_only_defaults_and_critical_workflows_ignore_the_subscriber() {
        let global = pref(Some(false), Some(false), None);
        let defaults = WorkflowDefaults {
            read_only: true,
            ..Default::default()
        };
        let e = Effective::of(false, defaults, Some(&global), None);
        assert_eq!(e.allows(Channel::Email), Ok(()));
        let off = WorkflowDefaults {
            channels: [false; 5],
            ..Default::default()
        };
        let e = Effective::of(true, off, Some(&global), Some(&global));
        assert_eq!(e.allows(Channel::Email), Ok(()));
        assert_eq!(e.allows(Channel::InApp), Ok(()));
    }
}
