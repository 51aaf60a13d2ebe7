//! `/v1/…` routes.

pub mod activity_json;
pub mod channels;
pub mod environments;
pub mod events;
pub mod integrations;
pub mod messages;
pub mod notifications;
pub mod preferences;
pub mod subscriber_credentials;
pub mod subscribers_bulk;
pub mod topics;
pub mod unsubscribe;
