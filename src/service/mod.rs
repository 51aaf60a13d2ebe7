//! One function per API operation: validate, call the store (in a transaction where several writes
//! belong together), return domain values. No HTTP here.

pub mod activity;
pub mod channels;
pub mod contexts;
pub mod environments;
pub mod events;
pub mod inbox;
pub mod inbox_notifications;
pub mod inbox_session;
pub mod inbox_socket;
pub mod inbox_topics;
pub mod integrations;
pub mod preferences;
pub mod preview;
pub mod promotion;
pub mod subscribers;
pub mod topics;
pub mod unsubscribe;
pub mod webhook_messages;
pub mod webhooks;
pub mod workflows;

/// How often a read-modify-write retries when another writer changed the row in between.
pub(crate) const OPTIMISTIC_RETRIES: usize = 8;

/// The pause before attempt `attempt` (from 1) of a read-modify-write that lost to another writer: random,
/// up to 2^attempt ms and at most 32 ms, so that writers who collided spread out instead of colliding again.
pub(crate) async fn pause_after_lost_write(attempt: usize) {
    let ceiling = 1u64 << attempt.clamp(1, 5);
    let ms = rand::random::<u64>() % (ceiling + 1);
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
}

/// The most items a list input may hold (README "Limits"): each keeps a request's SQL parameters and the
/// rows it writes bounded. A list over its cap is a 422 that states the cap.
pub mod limits {
    /// `events` of `POST /v1/events/trigger/bulk` (Novu's cap).
    pub const BULK_EVENTS: usize = 100;
    /// Recipients in a trigger's `to`.
    pub const RECIPIENTS: usize = 100;
    /// `exclude` of one topic in a trigger's `to`.
    pub const EXCLUDED: usize = 100;
    /// `messageId` of mark-as.
    pub const MESSAGE_IDS: usize = 1000;
    /// A workflow's `tags` (Novu's cap).
    pub const WORKFLOW_TAGS: usize = 16;
    /// A workflow's `steps`.
    pub const WORKFLOW_STEPS: usize = 50;
    /// A step's `filters` and an integration's `conditions`.
    pub const FILTERS: usize = 100;
    /// Workflows of an environment a diff or a publish reads (a larger environment publishes in parts).
    pub const PROMOTED_WORKFLOWS: usize = 1000;
    /// `resources` of a publish.
    pub const PUBLISH_RESOURCES: usize = 100;
    /// Values of one repeated query parameter (`channels=a&channels=b`, `tags[]=…`).
    pub const QUERY_VALUES: usize = 100;
}

/// Adds "`field` must hold at most `cap` items" to `v` when `len` is over `cap`; true when it was.
pub fn over_cap(v: &mut crate::error::Validation, field: &str, len: usize, cap: usize) -> bool {
    if len <= cap {
        return false;
    }
    v.add(
        field,
        format!("{field} must hold at most {cap} items, not {len}"),
        len,
    );
    true
}
