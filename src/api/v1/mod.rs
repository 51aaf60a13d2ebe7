//! `/v1/…` routes.

pub mod channels;
pub mod integrations;
pub mod subscriber_credentials;
