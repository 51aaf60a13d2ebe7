//! Secrets at rest: AES-256-GCM for credentials and API-key copies, SHA-256 for API-key lookup,
//! HMAC-SHA256 for signatures.

use aes_gcm::aead::{Aead, KeyInit, OsRng};
use aes_gcm::{AeadCore, Aes256Gcm, Key, Nonce};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use sha2::{Digest, Sha256};

/// The 32-byte key that encrypts secrets stored in the database.
#[derive(Clone)]
pub struct Cipher {
    aead: Aes256Gcm,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cipher(..)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("the encryption key must be 32 bytes, base64-encoded")]
    BadKey,
    #[error("a stored secret could not be decrypted (wrong TIDINGS_ENCRYPTION_KEY?)")]
    Decrypt,
}

impl Cipher {
    pub fn from_bytes(key: &[u8; 32]) -> Self {
        Self {
            aead: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key)),
        }
    }

    /// Parses the base64 form used by `TIDINGS_ENCRYPTION_KEY` and `secret.key`.
    pub fn from_base64(s: &str) -> Result<Self, CryptoError> {
        let bytes = B64.decode(s.trim()).map_err(|_| CryptoError::BadKey)?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| CryptoError::BadKey)?;
        Ok(Self::from_bytes(&key))
    }

    /// A fresh random key in its base64 form.
    pub fn generate_base64() -> String {
        B64.encode(Aes256Gcm::generate_key(OsRng))
    }

    /// `base64(nonce ‖ ciphertext)`.
    pub fn encrypt(&self, plain: &[u8]) -> String {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let sealed = self
            .aead
            .encrypt(&nonce, plain)
            .expect("AES-GCM encryption cannot fail for in-memory data");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        B64.encode(out)
    }

    pub fn decrypt(&self, stored: &str) -> Result<Vec<u8>, CryptoError> {
        let bytes = B64.decode(stored).map_err(|_| CryptoError::Decrypt)?;
        if bytes.len() < 12 {
            return Err(CryptoError::Decrypt);
        }
        let (nonce, sealed) = bytes.split_at(12);
        self.aead
            .decrypt(Nonce::from_slice(nonce), sealed)
            .map_err(|_| CryptoError::Decrypt)
    }

    pub fn decrypt_string(&self, stored: &str) -> Result<String, CryptoError> {
        String::from_utf8(self.decrypt(stored)?).map_err(|_| CryptoError::Decrypt)
    }
}

/// Lowercase hex SHA-256, used to look API keys up without storing them in clear.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// A new secret API key: 32 lowercase hex characters.
pub fn new_api_key() -> String {
    let mut bytes = [0u8; 16];
    rand::RngCore::fill_bytes(&mut OsRng, &mut bytes);
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_tampering() {
        let c = Cipher::from_base64(&Cipher::generate_base64()).unwrap();
        let sealed = c.encrypt(b"secret");
        assert_ne!(sealed, c.encrypt(b"secret"), "nonces must differ");
        assert_eq!(c.decrypt(&sealed).unwrap(), b"secret");
        let other = Cipher::from_base64(&Cipher::generate_base64()).unwrap();
        assert!(other.decrypt(&sealed).is_err());
        assert!(Cipher::from_base64("c2hvcnQ=").is_err());
    }

    #[test]
    fn sha256_is_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(new_api_key().len(), 32);
    }
}

/// The `svc-signature` header value: `t=<unix ms>,v1=<hex HMAC-SHA256(key, "<t>." + body)>`, where `body`
/// is the JSON text of the request body. The step preview shows the same value as `svcSignature`.
pub fn svc_signature(key: &str, t_ms: i64, body_json: &str) -> String {
    let v1 = hmac_sha256_hex(key, &[format!("{t_ms}.").as_bytes(), body_json.as_bytes()]);
    format!("t={t_ms},v1={v1}")
}

/// Hex HMAC-SHA256 of the concatenated `parts` keyed with `key`.
pub fn hmac_sha256_hex(key: &str, parts: &[&[u8]]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes())
        .expect("HMAC accepts keys of any length");
    for p in parts {
        mac.update(p);
    }
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod signature_tests {
    #[test]
    fn signature_layout() {
        // Reference value computed independently: HMAC-SHA256("secret", "1700000000000.{}").
        let s = super::svc_signature("secret", 1_700_000_000_000, "{}");
        assert_eq!(
            s,
            "t=1700000000000,v1=8399216d111287e3bb28e25c0f4f31dffdf831c68c9ee2b96c2f67c9b81d341b"
        );
        assert_ne!(s, super::svc_signature("other", 1_700_000_000_000, "{}"));
    }
}
