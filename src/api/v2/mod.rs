//! `/v2/…` routes.

pub mod subscribers;
