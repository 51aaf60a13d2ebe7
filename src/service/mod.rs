//! One function per API operation: validate, call the store (in a transaction where several writes
//! belong together), return domain values. No HTTP here.

pub mod activity;
pub mod channels;
pub mod environments;
pub mod events;
pub mod inbox;
pub mod integrations;
pub mod preview;
pub mod subscribers;
pub mod workflows;

/// How often a read-modify-write retries when another writer changed the row in between.
pub(crate) const OPTIMISTIC_RETRIES: usize = 8;
