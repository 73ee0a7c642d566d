//! JWS compact serialization (RFC 7515) with `alg: EdDSA` (RFC 8037), signing and strict
//! verification.
//!
//! Strict means: exactly three base64url parts without padding and with canonical
//! trailing bits; a protected header with only `alg` (must be `EdDSA`), `kid` and `typ`
//! (any other member, including `crit` and `b64`, is refused); the expected `typ`; and
//! `verify_strict`, which refuses small-order keys and non-canonical signatures. The
//! payload is decoded only after the signature verified.
//!
//! [`batch`] verifies many signatures at once, for a hub under load.

pub mod batch;

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::keys::KeyId;
use super::limits::MAX_HEADER_BYTES;

/// Why a JWS was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwsError {
    /// Not three dot-separated base64url parts, or a part does not decode.
    #[error("not a JWS compact serialization: {0}")]
    Malformed(&'static str),
    /// The protected header is not acceptable.
    #[error("unacceptable JWS header: {0}")]
    Header(String),
    /// The signature does not verify with the key.
    #[error("signature does not verify with key {0}")]
    BadSignature(String),
}

/// The protected header. Unknown members are refused (no `crit`, no `b64`, no `jwk`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Always `EdDSA`.
    pub alg: String,
    /// Key id: the RFC 7638 thumbprint of the signing key.
    pub kid: String,
    /// What the payload is, e.g. [`super::TYP_HEARTBEAT`].
    pub typ: String,
}

/// Signs `payload` as a compact JWS.
pub fn sign(key: &SigningKey, typ: &str, payload: &[u8]) -> String {
    let header = Header {
        alg: "EdDSA".into(),
        kid: KeyId::of(&key.verifying_key()).0,
        typ: typ.into(),
    };
    let header_json = serde_json::to_vec(&header).expect("a header always serializes");
    let mut out = URL_SAFE_NO_PAD.encode(header_json);
    out.push('.');
    out.push_str(&URL_SAFE_NO_PAD.encode(payload));
    let signature = key.sign(out.as_bytes());
    out.push('.');
    out.push_str(&URL_SAFE_NO_PAD.encode(signature.to_bytes()));
    out
}

/// The protected header as read: the same members and rules as [`Header`], borrowed from
/// the decoded bytes (a member with JSON escapes is the one case that allocates).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderRef<'h> {
    #[serde(borrow)]
    alg: Cow<'h, str>,
    #[serde(borrow)]
    kid: Cow<'h, str>,
    #[serde(borrow)]
    typ: Cow<'h, str>,
}

/// A parsed JWS whose signature is not verified yet. Reading the `kid` is all it allows.
#[derive(Debug)]
pub struct Unverified<'a> {
    kid: String,
    signing_input: &'a str,
    payload_b64: &'a str,
    signature: Signature,
}

/// Longest base64url protected header: [`MAX_HEADER_BYTES`] encoded, with slack.
const HEADER_B64_MAX: usize = MAX_HEADER_BYTES * 4 / 3 + 4;

/// Splits a compact JWS, decodes and checks its header and signature bytes. Cheap: no
/// cryptography and no payload decoding.
pub fn parse<'a>(compact: &'a str, expected_typ: &str) -> Result<Unverified<'a>, JwsError> {
    // memchr finds the dots with SIMD: a report's JWS is a few kilobytes.
    let mut dots = memchr::memchr_iter(b'.', compact.as_bytes());
    let (Some(first), Some(second), None) = (dots.next(), dots.next(), dots.next()) else {
        return Err(JwsError::Malformed("expected three '.'-separated parts"));
    };
    let (h, p, s) = (
        &compact[..first],
        &compact[first + 1..second],
        &compact[second + 1..],
    );
    if h.len() > HEADER_B64_MAX {
        return Err(JwsError::Malformed("protected header too large"));
    }
    // Decoded on the stack: the size check above bounds it (decoding never grows it).
    let mut header_buf = [0u8; HEADER_B64_MAX];
    let header_len = URL_SAFE_NO_PAD
        .decode_slice(h, &mut header_buf)
        .map_err(|_| JwsError::Malformed("header is not base64url"))?;
    let header: HeaderRef<'_> = serde_json::from_slice(&header_buf[..header_len])
        .map_err(|e| JwsError::Header(format!("not a JSON object of alg, kid, typ: {e}")))?;
    if header.alg != "EdDSA" {
        return Err(JwsError::Header(format!(
            "alg {:?} is not EdDSA",
            header.alg
        )));
    }
    if header.typ != expected_typ {
        return Err(JwsError::Header(format!(
            "typ {:?} is not {expected_typ:?}",
            header.typ
        )));
    }
    // 64 bytes are 86 base64url characters; decoding needs room for 66.
    let mut decoded = [0u8; 66];
    let len = match s.len() {
        86 => URL_SAFE_NO_PAD
            .decode_slice(s, &mut decoded)
            .map_err(|_| JwsError::Malformed("signature is not base64url"))?,
        _ => return Err(JwsError::Malformed("signature is not 64 bytes")),
    };
    let sig_bytes: [u8; 64] = decoded[..len]
        .try_into()
        .map_err(|_| JwsError::Malformed("signature is not 64 bytes"))?;
    Ok(Unverified {
        kid: header.kid.into_owned(),
        signing_input: &compact[..h.len() + 1 + p.len()],
        payload_b64: p,
        signature: Signature::from_bytes(&sig_bytes),
    })
}

impl Unverified<'_> {
    /// The key id the signer claims; look the key up with it.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The key id, taken out (for whoever keeps it once the JWS is admitted).
    pub fn into_kid(self) -> String {
        self.kid
    }

    /// Verifies the signature strictly with `key` and returns the decoded payload.
    pub fn verify(&self, key: &VerifyingKey) -> Result<Vec<u8>, JwsError> {
        let verified = key
            .verify_strict(self.signing_input.as_bytes(), &self.signature)
            .is_ok();
        self.payload_if_verified(verified)
    }

    /// What a signature is checked over: `BASE64URL(header) "." BASE64URL(payload)`.
    pub fn signing_input(&self) -> &[u8] {
        self.signing_input.as_bytes()
    }

    /// The signature.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The decoded payload if `verified` (the verdict of [`batch::verify_many`] on this
    /// JWS's [`Self::signing_input`] and [`Self::signature`]), else `BadSignature`.
    pub fn payload_if_verified(&self, verified: bool) -> Result<Vec<u8>, JwsError> {
        if !verified {
            return Err(JwsError::BadSignature(self.kid.clone()));
        }
        // SIMD decoding, as strict as `URL_SAFE_NO_PAD`'s (no padding, canonical trailing
        // bits): the payload is nearly all of a heartbeat's bytes.
        base64_simd::URL_SAFE_NO_PAD
            .decode_to_vec(self.payload_b64)
            .map_err(|_| JwsError::Malformed("payload is not base64url"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{TYP_HEARTBEAT, keys};

    #[test]
    fn signed_payload_verifies_and_round_trips() {
        let key = keys::generate();
        let jws = sign(&key, TYP_HEARTBEAT, b"{\"a\":1}");
        let parsed = parse(&jws, TYP_HEARTBEAT).unwrap();
        assert_eq!(parsed.kid(), KeyId::of(&key.verifying_key()).as_str());
        assert_eq!(parsed.verify(&key.verifying_key()).unwrap(), b"{\"a\":1}");
    }

    #[test]
    fn other_key_fails_verification() {
        let key = keys::generate();
        let jws = sign(&key, TYP_HEARTBEAT, b"x");
        let other = keys::generate().verifying_key();
        let err = parse(&jws, TYP_HEARTBEAT)
            .unwrap()
            .verify(&other)
            .unwrap_err();
        assert!(matches!(err, JwsError::BadSignature(_)));
    }

    #[test]
    fn wrong_typ_alg_or_extra_header_members_are_refused() {
        let key = keys::generate();
        let jws = sign(&key, TYP_HEARTBEAT, b"x");
        assert!(matches!(parse(&jws, "other"), Err(JwsError::Header(_))));
        let rest = jws.split_once('.').unwrap().1;
        for header in [
            r#"{"alg":"none","kid":"k","typ":"fleetpulse-heartbeat+jws"}"#,
            r#"{"alg":"EdDSA","kid":"k","typ":"fleetpulse-heartbeat+jws","crit":["b64"],"b64":false}"#,
        ] {
            let forged = format!("{}.{rest}", URL_SAFE_NO_PAD.encode(header));
            assert!(
                matches!(parse(&forged, TYP_HEARTBEAT), Err(JwsError::Header(_))),
                "{header}"
            );
        }
    }

    #[test]
    fn signature_must_be_86_canonical_base64url_characters() {
        let key = keys::generate();
        let jws = sign(&key, TYP_HEARTBEAT, b"x");
        let (input, sig) = jws.rsplit_once('.').unwrap();
        assert!(parse(&jws, TYP_HEARTBEAT).is_ok());
        // 64 bytes in 86 characters leave 4 unused bits in the last one; 'B' sets one.
        let noncanonical = format!("{input}.{}B", &sig[..85]);
        let forms = [
            format!("{input}.{sig}=="),
            format!("{input}.{}", &sig[..85]),
            format!("{input}.{sig}A"),
            noncanonical,
        ];
        for form in &forms {
            assert!(
                matches!(parse(form, TYP_HEARTBEAT), Err(JwsError::Malformed(_))),
                "{form}"
            );
        }
    }

    #[test]
    fn a_verified_payload_must_be_canonical_base64url() {
        let key = keys::generate();
        // "x" is one byte: two characters, the second with four unused bits.
        let jws = sign(&key, TYP_HEARTBEAT, b"x");
        let (header, rest) = jws.split_once('.').unwrap();
        let (payload, signature) = rest.split_once('.').unwrap();
        assert_eq!(payload, "eA");
        let with = |payload: &str| {
            let forged = format!("{header}.{payload}.{signature}");
            // Decoding is what is tested: the verdict is given, not computed.
            parse(&forged, TYP_HEARTBEAT)
                .unwrap()
                .payload_if_verified(true)
        };
        assert_eq!(with("eA").unwrap(), b"x");
        assert_eq!(with("eHk").unwrap(), b"xy");
        for bad in ["eA==", "eB", "e", "eA+", "eA/", "e A"] {
            assert_eq!(
                with(bad),
                Err(JwsError::Malformed("payload is not base64url")),
                "{bad}"
            );
        }
    }

    #[test]
    fn structural_garbage_is_malformed() {
        for s in ["", "a.b", "a.b.c.d", "!!.b.c", "e30.e30.AAAA"] {
            assert!(parse(s, TYP_HEARTBEAT).is_err(), "{s}");
        }
    }
}
