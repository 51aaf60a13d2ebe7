//! SMS providers.

mod generic;
mod plivo;
mod telnyx;
mod twilio;

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

/// `base` with `segments` appended as path segments, each percent-encoded (an account id taken from the
/// credentials cannot change the path).
fn api_url(base: &str, segments: &[&str]) -> Result<url::Url, ProviderError> {
    let mut url = url::Url::parse(base).map_err(|_| {
        ProviderError::permanent(format!("The API address {base} is not a valid URL"))
    })?;
    url.path_segments_mut()
        .map_err(|_| {
            ProviderError::permanent(format!("The API address {base} is not a valid URL"))
        })?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_urls_keep_the_base_path_and_encode_segments() {
        assert_eq!(
            api_url(
                "https://api.example.com",
                &["v1", "Account", "A/B C", "Message", ""]
            )
            .unwrap()
            .as_str(),
            "https://api.example.com/v1/Account/A%2FB%20C/Message/"
        );
        assert_eq!(
            api_url("http://127.0.0.1:9/proxy", &["v2", "messages"])
                .unwrap()
                .as_str(),
            "http://127.0.0.1:9/proxy/v2/messages"
        );
        assert!(api_url("not a url", &["x"]).is_err());
    }
}
