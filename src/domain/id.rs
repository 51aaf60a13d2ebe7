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

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub String);

        impl $name {
            pub fn new() -> Self {
                Self(new_object_id())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

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
    fn generated_identifiers_use_the_prefix_and_alphabet() {
        let id = new_identifier("chconn_");
        assert_eq!(id.len(), 19);
        assert!(id[7..]
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
    }
}
