//! Database ids in the ObjectId layout: 4-byte seconds, 5 random bytes fixed per process, 3-byte counter.
//! Written as 24 lowercase hex characters, so ids sort by creation time.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use rand::RngCore;

fn process_unique() -> &'static [u8; 5] {
    static UNIQUE: OnceLock<[u8; 5]> = OnceLock::new();
    UNIQUE.get_or_init(|| {
        let mut b = [0u8; 5];
        rand::thread_rng().fill_bytes(&mut b);
        b
    })
}

fn counter() -> &'static AtomicU32 {
    static COUNTER: OnceLock<AtomicU32> = OnceLock::new();
    COUNTER.get_or_init(|| AtomicU32::new(rand::random::<u32>() & 0x00ff_ffff))
}

/// A new 24-hex id for the current second.
pub fn new_object_id() -> String {
    let secs = (chrono::Utc::now().timestamp() as u64 & 0xffff_ffff) as u32;
    object_id_at(secs)
}

fn object_id_at(secs: u32) -> String {
    let count = counter().fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    bytes[4..9].copy_from_slice(process_unique());
    bytes[9..].copy_from_slice(&count.to_be_bytes()[1..]);
    hex::encode(bytes)
}

/// True when `s` has the ObjectId layout (24 hex characters).
pub fn is_object_id(s: &str) -> bool {
    s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A generated identifier: `prefix` + 12 characters of `[0-9a-z]`.
pub fn new_identifier(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::thread_rng();
    let mut out = String::with_capacity(prefix.len() + 12);
    out.push_str(prefix);
    for _ in 0..12 {
        out.push(ALPHABET[(rng.next_u32() % ALPHABET.len() as u32) as usize] as char);
    }
    out
}

/// An entity id: a string that names one kind of row. The store keeps every id in a TEXT column
/// (`store::row` implements its `Stored<String>` once for every `Id`), so this module stays free of SQL.
pub trait Id: From<String> + AsRef<str> {}

/// Declares an id newtype (as svix's `create_id_type!`): a distinct type per entity, so a job id cannot be
/// passed where a notification id is expected. Serialized as the bare string (`serde(transparent)`), so the
/// wire and the stored JSON are unchanged. No `Deref<Target = str>`: a place that wants the text says
/// `.as_str()`, and a place that wants the id cannot be handed any other string by accident.
macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// A new id in the ObjectId layout.
            pub fn new() -> Self {
                Self(new_object_id())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl Id for $name {}

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

id_type!(
    /// Id of an organization.
    OrganizationId
);
id_type!(
    /// Id of an environment; every tenant row carries one.
    EnvironmentId
);
id_type!(
    /// Id of any other stored document.
    ObjectId
);
id_type!(
    /// The internal `_id` of a subscriber (its `_subscriberId` on the wire), not the user-given
    /// `subscriberId`.
    SubscriberRef
);
id_type!(
    /// The internal `_id` of a workflow (its `_templateId` on the wire), not the user-given `workflowId`
    /// identifier it is triggered by.
    WorkflowRef
);
id_type!(
    /// The internal `_id` of an integration, not its user-given `identifier`.
    IntegrationId
);
id_type!(
    /// Id of a notification: one per trigger and subscriber.
    NotificationId
);
id_type!(
    /// Id of a job: one per notification step.
    JobId
);
id_type!(
    /// Id of a message a job produced (in-app or channel delivery).
    MessageId
);
id_type!(
    /// The internal `_id` of a topic, not its user-given `key`.
    TopicId
);
id_type!(
    /// The `_id` of a topic subscription (time-ordered: a fan-out reads a topic's subscriptions by it).
    SubscriptionId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_object_id_layout_and_sort_by_time() {
        let a = object_id_at(0x5f00_0000);
        let b = object_id_at(0x5f00_0001);
        assert!(is_object_id(&a));
        assert_eq!(&a[..8], "5f000000");
        assert!(a < b);
        assert_ne!(new_object_id(), new_object_id());
        assert!(!is_object_id("xyz"));
        assert!(!is_object_id("5f000000000000000000000g"));
    }

    #[test]
    fn ids_serialize_as_their_text() {
        let id = JobId::from("6b05edefbd5e51c18e7ee068");
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"6b05edefbd5e51c18e7ee068\"");
        assert_eq!(serde_json::from_str::<JobId>(&json).unwrap(), id);
        assert!(is_object_id(JobId::new().as_str()));
    }

    #[test]
    fn generated_identifiers_use_the_prefix_and_alphabet() {
        let id = new_identifier("chconn_");
        assert_eq!(id.len(), 19);
        assert!(id[7..]
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
    }
}
