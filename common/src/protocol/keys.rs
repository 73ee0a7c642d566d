//! Ed25519 keys: generation, PKCS#8 PEM storage, the base64url public-key form used in
//! `spec.agent.publicKeys`, and key ids (RFC 7638 JWK thumbprints).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey, spki::der::pem::LineEnding};
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

/// Public keys whose private halves are published (the Ed25519 test vector of RFC 8037,
/// appendix A.2): refused wherever a key is listed or registered, since anyone could sign
/// reports with them.
pub const PUBLISHED_KEYS: &[&str] = &["11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"];

/// Why `public_key` must not be trusted, if it is a [`PUBLISHED_KEYS`] entry.
pub fn published(public_key: &str) -> Option<String> {
    PUBLISHED_KEYS.contains(&public_key).then(|| {
        format!(
            "{public_key} is the RFC 8037 test vector, whose private key is published: anyone \
             could sign reports with it; generate a key with `fleetpulse-agent keygen` and use \
             its public key"
        )
    })
}

/// A key could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The public key is not 32 bytes of base64url.
    #[error("public key {0:?} is not 43 characters of base64url (a raw Ed25519 key)")]
    PublicKeyEncoding(String),
    /// The bytes are not a valid Ed25519 point.
    #[error("public key {0:?} is not a valid Ed25519 public key")]
    PublicKeyPoint(String),
    /// The point is of small order: signatures anyone can make verify with it.
    #[error(
        "public key {0:?} is a weak (small-order) Ed25519 key, with which anyone could sign; \
         generate a key with `fleetpulse-agent keygen` and use its public key"
    )]
    WeakPublicKey(String),
    /// The private key PEM could not be parsed.
    #[error("private key is not an Ed25519 PKCS#8 PEM ('BEGIN PRIVATE KEY'): {0}")]
    PrivateKey(String),
}

/// An Ed25519 public key that is not weak (of small order), checked once, when it was
/// made: with a weak key, signatures anyone can make verify, so no key fleetpulse trusts
/// is one. [`super::jws::batch::verify_many`] takes only these, so a batch need not check
/// each signature's key again. Derefs to the [`VerifyingKey`] it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrongKey(VerifyingKey);

impl StrongKey {
    /// `key`, unless it is weak.
    pub fn new(key: VerifyingKey) -> Result<Self, KeyError> {
        if key.is_weak() {
            return Err(KeyError::WeakPublicKey(public_key_string(&key)));
        }
        Ok(Self(key))
    }

    /// The public half of `key`.
    pub fn of(key: &SigningKey) -> Self {
        // The public half is the private scalar (clamped: a multiple of 8 below 2^255, so
        // never a multiple of the group order) times the base point: of prime order.
        Self::new(key.verifying_key()).expect("a key made from a private key is not weak")
    }
}

impl std::ops::Deref for StrongKey {
    type Target = VerifyingKey;

    fn deref(&self) -> &VerifyingKey {
        &self.0
    }
}

/// A key id: the RFC 7638 thumbprint (SHA-256, base64url) of the key's JWK.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub String);

impl KeyId {
    /// The key id of a public key.
    pub fn of(key: &VerifyingKey) -> Self {
        // RFC 7638 §3.2: required members only, lexicographic order, no whitespace.
        let jwk = format!(
            r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
            public_key_string(key)
        );
        KeyId(URL_SAFE_NO_PAD.encode(Sha256::digest(jwk.as_bytes())))
    }

    /// The string form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for KeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Generates a new key from the operating system's random source.
pub fn generate() -> SigningKey {
    SigningKey::generate(&mut rand::rngs::OsRng)
}

/// The public key as written in `spec.agent.publicKeys[].publicKey`: base64url, no padding.
pub fn public_key_string(key: &VerifyingKey) -> String {
    URL_SAFE_NO_PAD.encode(key.as_bytes())
}

/// Parses the `spec.agent.publicKeys[].publicKey` form, refusing a weak key.
pub fn parse_public_key(s: &str) -> Result<StrongKey, KeyError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(s.trim())
        .map_err(|_| KeyError::PublicKeyEncoding(s.to_owned()))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| KeyError::PublicKeyEncoding(s.to_owned()))?;
    let key =
        VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::PublicKeyPoint(s.to_owned()))?;
    StrongKey::new(key)
}

/// Encodes a private key as PKCS#8 PEM.
pub fn to_pem(key: &SigningKey) -> String {
    key.to_pkcs8_pem(LineEnding::LF)
        .expect("an Ed25519 key always encodes as PKCS#8")
        .to_string()
}

/// Reads a PKCS#8 PEM private key.
pub fn from_pem(pem: &str) -> Result<SigningKey, KeyError> {
    SigningKey::from_pkcs8_pem(pem).map_err(|e| KeyError::PrivateKey(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_and_public_key_round_trip() {
        let key = generate();
        let back = from_pem(&to_pem(&key)).unwrap();
        assert_eq!(back.to_bytes(), key.to_bytes());
        let public = public_key_string(&key.verifying_key());
        assert_eq!(public.len(), 43);
        assert_eq!(*parse_public_key(&public).unwrap(), key.verifying_key());
        assert_eq!(StrongKey::of(&key), parse_public_key(&public).unwrap());
    }

    #[test]
    fn key_id_matches_rfc8037_appendix_a3() {
        // RFC 8037 A.3: the thumbprint of the A.2 public key.
        let key = parse_public_key("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo").unwrap();
        assert_eq!(
            KeyId::of(&key).as_str(),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }

    #[test]
    fn malformed_public_keys_are_rejected() {
        assert!(parse_public_key("abc").is_err());
        assert!(parse_public_key(&"A".repeat(44)).is_err());
        assert!(from_pem("-----BEGIN PRIVATE KEY-----\nxx\n-----END PRIVATE KEY-----\n").is_err());
    }

    #[test]
    fn weak_public_keys_are_refused_when_parsed() {
        // The identity (y = 1) and the point of order 2 (y = -1, that is p - 1): valid
        // encodings of points of small order.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let mut order_two = [0xffu8; 32];
        order_two[0] = 0xec;
        order_two[31] = 0x7f;
        for bytes in [identity, order_two] {
            let text = URL_SAFE_NO_PAD.encode(bytes);
            let point = VerifyingKey::from_bytes(&bytes).expect("a valid point");
            assert!(point.is_weak(), "{text}");
            let err = parse_public_key(&text).unwrap_err();
            assert!(matches!(err, KeyError::WeakPublicKey(_)), "{text}: {err}");
            assert!(err.to_string().contains("fleetpulse-agent keygen"), "{err}");
            assert!(StrongKey::new(point).is_err());
        }
    }
}
