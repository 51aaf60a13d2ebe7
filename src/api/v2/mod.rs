//! `/v2/…` routes.

pub mod preferences;
pub mod preview;
pub mod subscriber_notifications;
pub mod subscribers;
pub mod topics;
pub mod workflows;
