//! `/v1/…` routes.

pub mod integrations;
pub mod subscriber_credentials;
