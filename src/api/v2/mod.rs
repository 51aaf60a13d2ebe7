//! `/v2/…` routes.

pub mod preview;
pub mod subscribers;
pub mod workflows;
