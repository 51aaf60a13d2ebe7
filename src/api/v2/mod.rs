//! `/v2/…` routes.

pub mod subscribers;
pub mod workflows;
