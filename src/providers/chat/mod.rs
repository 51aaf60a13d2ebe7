//! Chat providers.

mod webhook;

use super::Provider;

/// Every supported chat provider.
pub const ALL: &[&dyn Provider] = &[&webhook::ChatWebhook];

/// The chat provider registered under `id`.
pub fn lookup(id: &str) -> Option<&'static dyn Provider> {
    ALL.iter().copied().find(|p| p.id() == id)
}
