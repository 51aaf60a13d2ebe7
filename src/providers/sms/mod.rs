//! SMS providers.

mod generic;
mod plivo;
mod telnyx;
mod twilio;

use super::http::api_url;
use super::{Provider, ProviderError};

/// Every supported SMS provider.
pub const ALL: &[&dyn Provider] = &[
    &twilio::Twilio,
    &plivo::Plivo,
    &telnyx::Telnyx,
    &generic::GenericSms,
];

/// The SMS provider registered under `id`.
pub fn lookup(id: &str) -> Option<&'static dyn Provider> {
    ALL.iter().copied().find(|p| p.id() == id)
}

/// The sender the provider needs: the message's `from` (overrides, else the `from` credential).
fn require_from(from: Option<&str>, provider: &str) -> Result<String, ProviderError> {
    from.filter(|f| !f.trim().is_empty())
        .map(|f| f.trim().to_owned())
        .ok_or_else(|| {
            ProviderError::permanent(format!(
                "{provider} needs a sender: set the integration's `from` credential or `overrides.sms.from`"
            ))
        })
}
