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
use base64_simd::AsOut;
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

impl<'h> HeaderRef<'h> {
    /// The header as [`sign`] writes it (`{"alg":"EdDSA","kid":K,"typ":T}`, members in
    /// that order, no space), read without a JSON parser: what serde_json reads from
    /// that text, member for member, when `K` and `T` are plain text (printable ASCII
    /// without `"` or `\`, so nothing in them is escaped). `None` for any other text,
    /// which is parsed.
    fn as_signed(json: &'h [u8]) -> Option<Self> {
        let rest = json.strip_prefix(br#"{"alg":"EdDSA","kid":""#)?;
        let (kid, rest) = plain_string(rest)?;
        let rest = rest.strip_prefix(br#","typ":""#)?;
        let (typ, rest) = plain_string(rest)?;
        (rest == b"}").then_some(Self {
            alg: Cow::Borrowed("EdDSA"),
            kid: Cow::Borrowed(kid),
            typ: Cow::Borrowed(typ),
        })
    }
}

/// The text up to the first `"` of `json` and what follows that quote, if the text is
/// printable ASCII without `\`: the same string JSON reads there.
fn plain_string(json: &[u8]) -> Option<(&str, &[u8])> {
    let end = memchr::memchr(b'"', json)?;
    let text = &json[..end];
    if !text
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'\\')
    {
        return None;
    }
    // Printable ASCII is UTF-8.
    let text = std::str::from_utf8(text).ok()?;
    Some((text, &json[end + 1..]))
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
    // SIMD decoding, as strict as `URL_SAFE_NO_PAD`'s (no padding, canonical trailing bits).
    let mut header_buf = [0u8; HEADER_B64_MAX];
    let header_json = base64_simd::URL_SAFE_NO_PAD
        .decode(h.as_bytes(), header_buf[..].as_out())
        .map_err(|_| JwsError::Malformed("header is not base64url"))?;
    let header = match HeaderRef::as_signed(header_json) {
        Some(header) => header,
        None => serde_json::from_slice(header_json)
            .map_err(|e| JwsError::Header(format!("not a JSON object of alg, kid, typ: {e}")))?,
    };
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
    // 64 bytes are 86 base64url characters, the last with 4 unused bits.
    if s.len() != 86 {
        return Err(JwsError::Malformed("signature is not 64 bytes"));
    }
    let mut sig_bytes = [0u8; 64];
    base64_simd::URL_SAFE_NO_PAD
        .decode(s.as_bytes(), sig_bytes[..].as_out())
        .map_err(|_| JwsError::Malformed("signature is not base64url"))?;
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
    fn the_header_sign_writes_is_read_without_a_parser() {
        let key = keys::generate();
        let jws = sign(&key, TYP_HEARTBEAT, b"x");
        let header = URL_SAFE_NO_PAD
            .decode(jws.split('.').next().unwrap())
            .unwrap();
        let read = HeaderRef::as_signed(&header).expect("sign's header is read directly");
        assert_eq!(read.kid, KeyId::of(&key.verifying_key()).as_str());
        assert_eq!((&*read.alg, &*read.typ), ("EdDSA", TYP_HEARTBEAT));
    }

    #[test]
    fn a_header_written_otherwise_is_parsed_alike() {
        let kid = "abc";
        for (text, expected_kid) in [
            // Escapes, spaces, another order: not read directly, parsed the same.
            (r#"{"alg":"EdDSA","kid":"a\u0062c","typ":"t"}"#, kid),
            (r#"{ "alg":"EdDSA","kid":"abc","typ":"t"}"#, kid),
            (r#"{"kid":"abc","alg":"EdDSA","typ":"t"}"#, kid),
            (r#"{"alg":"EdDSA","kid":"abc","typ":"t"} "#, kid),
            (r#"{"alg":"EdDSA","kid":"é","typ":"t"}"#, "é"),
        ] {
            assert!(HeaderRef::as_signed(text.as_bytes()).is_none(), "{text}");
            let forged = format!("{}.eA.{}", URL_SAFE_NO_PAD.encode(text), "A".repeat(86));
            assert_eq!(parse(&forged, "t").unwrap().kid(), expected_kid, "{text}");
        }
        // A member too many is refused whichever way it is written.
        let extra = r#"{"alg":"EdDSA","kid":"abc","typ":"t","b64":false}"#;
        assert!(HeaderRef::as_signed(extra.as_bytes()).is_none());
        let forged = format!("{}.eA.{}", URL_SAFE_NO_PAD.encode(extra), "A".repeat(86));
        assert!(matches!(parse(&forged, "t"), Err(JwsError::Header(_))));
    }

    proptest::proptest! {
        /// Whatever the direct read answers is what serde_json reads from the same bytes,
        /// and it answers for every whole header of plain members.
        #[test]
        fn the_direct_read_of_a_header_agrees_with_serde_json(
            kid in "[ -~\u{1}-\u{1f}é]{0,12}",
            typ in "[ -~]{0,8}",
            cut in 0usize..64,
        ) {
            let text = format!(r#"{{"alg":"EdDSA","kid":"{kid}","typ":"{typ}"}}"#);
            let bytes = &text.as_bytes()[..text.len().saturating_sub(cut % 3)];
            let parsed: Result<HeaderRef<'_>, _> = serde_json::from_slice(bytes);
            let plain = |t: &str| t.chars().all(|c| (' '..='~').contains(&c) && c != '"' && c != '\\');
            let read = HeaderRef::as_signed(bytes);
            proptest::prop_assert_eq!(read.is_some(), plain(&kid) && plain(&typ) && cut % 3 == 0);
            if let Some(read) = read {
                let parsed = parsed.expect("serde_json reads what the direct read read");
                proptest::prop_assert_eq!(
                    (&*read.alg, &*read.kid, &*read.typ),
                    (&*parsed.alg, &*parsed.kid, &*parsed.typ)
                );
            }
        }
    }

    #[test]
    fn structural_garbage_is_malformed() {
        for s in ["", "a.b", "a.b.c.d", "!!.b.c", "e30.e30.AAAA"] {
            assert!(parse(s, TYP_HEARTBEAT).is_err(), "{s}");
        }
    }
}
