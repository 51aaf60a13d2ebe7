//! `/v1/…` routes.

pub mod channels;
pub mod events;
pub mod integrations;
pub mod subscriber_credentials;
