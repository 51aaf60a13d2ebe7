//! Push providers.

mod webhook;

use super::Provider;

/// Every supported push provider.
pub const ALL: &[&dyn Provider] = &[&webhook::PushWebhook];

/// The push provider registered under `id`.
pub fn lookup(id: &str) -> Option<&'static dyn Provider> {
    ALL.iter().copied().find(|p| p.id() == id)
}
