//! Email providers.

mod webhook;

use super::Provider;

/// Every supported email provider.
pub const ALL: &[&dyn Provider] = &[&webhook::EmailWebhook];

/// The email provider registered under `id`.
pub fn lookup(id: &str) -> Option<&'static dyn Provider> {
    ALL.iter().copied().find(|p| p.id() == id)
}
