//! `/v2/…` routes.

pub mod contexts;
pub mod environments;
pub mod preferences;
pub mod preview;
pub mod subscriber_notifications;
pub mod subscribers;
pub mod topics;
pub mod workflows;
