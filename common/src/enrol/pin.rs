//! The hub CA pin, as kubeadm's `--discovery-token-ca-cert-hash`: `sha256:` and the
//! lowercase hex SHA-256 of the CA certificate's DER-encoded SubjectPublicKeyInfo. It
//! pins the CA's key, not the certificate, so a CA certificate re-issued with the same
//! key keeps the pin valid.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::token::hex;

/// A pinned CA: the SHA-256 of its SubjectPublicKeyInfo.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CaPin(pub [u8; 32]);

/// Why a pin or a certificate could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PinError {
    /// Not `sha256:` and 64 hex digits.
    #[error(
        "CA hash {0:?} is not sha256: followed by 64 hex digits; copy it from `fleetpulse-hub \
         token create` (or compute it as `openssl x509 -pubkey -noout -in ca.pem | openssl pkey \
         -pubin -outform der | sha256sum`)"
    )]
    Format(String),
    /// The DER is not an X.509 certificate.
    #[error("not an X.509 certificate: {0}")]
    Certificate(String),
}

impl CaPin {
    /// The pin of a DER-encoded certificate.
    pub fn of_certificate(der: &[u8]) -> Result<Self, PinError> {
        let (_, cert) =
            X509Certificate::from_der(der).map_err(|e| PinError::Certificate(e.to_string()))?;
        Ok(Self::of_spki(cert.tbs_certificate.subject_pki.raw))
    }

    /// The pin of a DER-encoded SubjectPublicKeyInfo.
    pub fn of_spki(spki_der: &[u8]) -> Self {
        CaPin(Sha256::digest(spki_der).into())
    }
}

impl FromStr for CaPin {
    type Err = PinError;

    fn from_str(s: &str) -> Result<Self, PinError> {
        let bad = || PinError::Format(s.to_owned());
        let digits = s.trim().strip_prefix("sha256:").ok_or_else(bad)?;
        if digits.len() != 64 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(CaPin(out))
    }
}

impl fmt::Display for CaPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex(&self.0))
    }
}

impl fmt::Debug for CaPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CaPin({self})")
    }
}
