//! Secrets at rest: AES-256-GCM for credentials and API-key copies, SHA-256 for API-key lookup,
//! HMAC-SHA256 for signatures (keyed with an API key, or with a key derived from the encryption key).

use aes_gcm::aead::{Aead, KeyInit, OsRng};
use aes_gcm::{AeadCore, Aes256Gcm, Key, Nonce};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use sha2::{Digest, Sha256};

/// The 32-byte key that encrypts secrets stored in the database, and the signing master derived from it.
#[derive(Clone)]
pub struct Cipher {
    aead: Aes256Gcm,
    /// `HKDF-Expand(encryption key, "tidings signing master v1", 32)`: the root of every signing key
    /// ([`Cipher::signing_key`]), so the AES key itself is used for nothing but encryption.
    signing_master: [u8; 32],
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
        // HKDF-Expand (RFC 5869) with the key as the pseudorandom key (it is 32 random bytes): one block,
        // HMAC(key, info ‖ 0x01).
        Self {
            aead: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key)),
            signing_master: hmac_sha256(key, &[b"tidings signing master v1", &[1]]),
        }
    }

    /// The HMAC-SHA256 key of one `purpose` (a fixed label naming the use and its version) within one
    /// `scope` (e.g. an environment id): `HMAC(master, purpose ‖ 0x00 ‖ scope)`. Keys of different purposes or
    /// scopes are unrelated, and none reveals the master or the encryption key.
    pub fn signing_key(&self, purpose: &str, scope: &str) -> [u8; 32] {
        hmac_sha256(
            &self.signing_master,
            &[purpose.as_bytes(), &[0], scope.as_bytes()],
        )
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

    /// `nonce ‖ ciphertext`: what binary columns store.
    pub fn seal(&self, plain: &[u8]) -> Vec<u8> {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let sealed = self
            .aead
            .encrypt(&nonce, plain)
            .expect("AES-GCM encryption cannot fail for in-memory data");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        out
    }

    /// The plain bytes of what [`Cipher::seal`] made.
    pub fn open(&self, sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        if sealed.len() < 12 {
            return Err(CryptoError::Decrypt);
        }
        let (nonce, sealed) = sealed.split_at(12);
        self.aead
            .decrypt(Nonce::from_slice(nonce), sealed)
            .map_err(|_| CryptoError::Decrypt)
    }

    /// `base64(nonce ‖ ciphertext)`: what text columns store.
    pub fn encrypt(&self, plain: &[u8]) -> String {
        B64.encode(self.seal(plain))
    }

    pub fn decrypt(&self, stored: &str) -> Result<Vec<u8>, CryptoError> {
        let bytes = B64.decode(stored).map_err(|_| CryptoError::Decrypt)?;
        self.open(&bytes)
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

/// A new public environment identifier (the Inbox's `applicationIdentifier`): 12 characters of
/// `[A-Za-z0-9_-]`, 72 random bits — unique by chance, and checked by the database's unique index.
pub fn new_environment_identifier() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    let mut bytes = [0u8; 12];
    rand::RngCore::fill_bytes(&mut OsRng, &mut bytes);
    bytes
        .iter()
        .map(|b| ALPHABET[usize::from(b & 63)] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_identifiers_are_twelve_url_safe_characters_and_differ() {
        let a = new_environment_identifier();
        let b = new_environment_identifier();
        assert_eq!(a.len(), 12);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        assert_ne!(a, b);
    }

    #[test]
    fn round_trips_and_rejects_tampering() {
        let c = Cipher::from_base64(&Cipher::generate_base64()).unwrap();
        let sealed = c.encrypt(b"secret");
        assert_ne!(sealed, c.encrypt(b"secret"), "nonces must differ");
        assert_eq!(c.decrypt(&sealed).unwrap(), b"secret");
        let raw = c.seal(b"secret");
        assert_eq!(raw.len(), 12 + 6 + 16, "nonce, text, tag");
        assert_eq!(c.open(&raw).unwrap(), b"secret");
        assert!(c.open(&raw[..20]).is_err());
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
    hex::encode(hmac_sha256(key.as_bytes(), parts))
}

/// HMAC-SHA256 of the concatenated `parts` keyed with `key`.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use hmac::Mac;
    hmac_of(key, parts).finalize().into_bytes().into()
}

/// Whether `tag` is the HMAC-SHA256 of the concatenated `parts` keyed with `key`, compared in constant time.
pub fn hmac_sha256_verify(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    use hmac::Mac;
    hmac_of(key, parts).verify_slice(tag).is_ok()
}

/// A token of signed text fields: `base64url(payload) "." base64url(HMAC-SHA256(key, payload))`, no padding,
/// where `payload` is the fields joined by newlines (so no field may hold one). The first field names the
/// scope whose key signs the token (an environment), so that a verifier can find the key before it trusts
/// anything else.
pub fn sign_fields(key: &[u8; 32], fields: &[&str]) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    debug_assert!(fields.iter().all(|f| !f.contains('\n')));
    let payload = fields.join("\n");
    let tag = hmac_sha256(key, &[payload.as_bytes()]);
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(payload),
        URL_SAFE_NO_PAD.encode(tag)
    )
}

/// The `N` fields of a token made by [`sign_fields`] when it is at most `max_len` long, holds exactly `N`
/// non-empty fields and its tag is the one `key_of(first field)` makes (compared in constant time); `None`
/// for anything else.
pub fn verify_fields<const N: usize>(
    token: &str,
    max_len: usize,
    key_of: impl FnOnce(&str) -> [u8; 32],
) -> Option<[String; N]> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    if token.len() > max_len {
        return None;
    }
    let (payload, tag) = token.split_once('.')?;
    let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
    // The payload is read before the check only to find the key that checks it.
    let text = std::str::from_utf8(&payload).ok()?;
    let fields: Vec<String> = text.split('\n').map(str::to_owned).collect();
    let fields: [String; N] = fields.try_into().ok()?;
    if fields.iter().any(String::is_empty) {
        return None;
    }
    hmac_sha256_verify(&key_of(&fields[0]), &[&payload], &tag).then_some(fields)
}

fn hmac_of(key: &[u8], parts: &[&[u8]]) -> hmac::Hmac<Sha256> {
    use hmac::{Hmac, Mac};
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts keys of any length");
    for p in parts {
        mac.update(p);
    }
    mac
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

    #[test]
    fn signing_keys_are_derived_per_purpose_and_scope() {
        use super::Cipher;
        let raw = [7u8; 32];
        let c = Cipher::from_bytes(&raw);
        let k = c.signing_key("p v1", "env-a");
        assert_eq!(k, Cipher::from_bytes(&raw).signing_key("p v1", "env-a"));
        assert_ne!(k, c.signing_key("p v1", "env-b"));
        assert_ne!(k, c.signing_key("p v2", "env-a"));
        // The separator keeps `purpose` and `scope` apart.
        assert_ne!(c.signing_key("ab", "c"), c.signing_key("a", "bc"));
        assert_ne!(
            k,
            Cipher::from_bytes(&[8u8; 32]).signing_key("p v1", "env-a")
        );
        // Neither the master nor a derived key is the encryption key.
        assert_ne!(c.signing_master, raw);
        assert_ne!(k, raw);
        // Reference values computed independently (Python's hmac): the master is HKDF-Expand's first block,
        // HMAC-SHA256(0x07 × 32, "tidings signing master v1" ‖ 0x01); the key HMAC(master, "p v1" ‖ 0x00 ‖ "env-a").
        assert_eq!(
            hex::encode(c.signing_master),
            "65c7d55af2609b9f7515aff3f43bd36ddb2cbc4b1c9778d78d35a2a12b18011a"
        );
        assert_eq!(
            hex::encode(k),
            "8f75a9b4fc47a1e11fd46e151da2e34863a69e6cea88f1300a8309a942d0020f"
        );
        let tag = super::hmac_sha256(&k, &[b"a", b"b"]);
        assert!(super::hmac_sha256_verify(&k, &[b"ab"], &tag));
        assert!(!super::hmac_sha256_verify(&k, &[b"ab"], &tag[..31]));
        assert!(!super::hmac_sha256_verify(
            &c.signing_key("p v1", "env-b"),
            &[b"ab"],
            &tag
        ));
    }
}
