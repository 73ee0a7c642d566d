//! The rustls client configuration of an HTTPS probe, always on the `ring` provider passed
//! explicitly (no process-wide default provider is used or installed).
//!
//! - `caBundle` set: only those CA certificates are trusted.
//! - neither `caBundle` nor `insecureSkipVerify`: the system roots (`rustls-native-certs`).
//! - `insecureSkipVerify`: [`AcceptAnyServerCert`] trusts any certificate chain for any
//!   name, as the kubelet's HTTPS probes do. It still verifies the handshake signature
//!   against the certificate's public key, so the peer must hold the key of the
//!   certificate it presents (and the certificate must be well-formed DER); it only gives
//!   up on *who* signed the certificate and which names it covers.
//!
//! Only HTTP/1.1 is offered by ALPN, as the kubelet's probes speak HTTP/1.1.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};

use super::target::ProbeSpecError;
use crate::tls::AcceptAnyServerCert;

/// How the probe verifies the server's certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verification<'a> {
    /// Against the CA certificates of this PEM bundle only.
    CaBundle(&'a str),
    /// Against the system roots. `required` is false when the probe's URL is plain HTTP:
    /// then a machine without system roots still gets a (root-less) configuration.
    SystemRoots {
        /// Fail when no system root can be loaded.
        required: bool,
    },
    /// Not at all (`insecureSkipVerify`), see [`AcceptAnyServerCert`].
    Skip,
}

/// The client configuration for `verification`, on the ring provider.
pub fn client_config(verification: Verification<'_>) -> Result<ClientConfig, ProbeSpecError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ProbeSpecError::BadCaBundle {
            reason: format!("rustls refused the protocol versions: {e}"),
        })?;
    let mut config = match verification {
        Verification::Skip => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert::new(provider)))
            .with_no_client_auth(),
        Verification::CaBundle(pem) => builder
            .with_root_certificates(roots_from_pem(pem)?)
            .with_no_client_auth(),
        Verification::SystemRoots { required } => builder
            .with_root_certificates(system_roots(required)?)
            .with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The CA certificates of a PEM bundle (`http.caBundle`).
pub fn roots_from_pem(pem: &str) -> Result<RootCertStore, ProbeSpecError> {
    let bad = |reason: String| ProbeSpecError::BadCaBundle { reason };
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not valid PEM ({e})")))?;
    if certs.is_empty() {
        return Err(bad("it holds no certificate".to_owned()));
    }
    let mut roots = RootCertStore::empty();
    for (index, cert) in certs.into_iter().enumerate() {
        roots.add(cert).map_err(|e| {
            bad(format!(
                "certificate #{} is not a usable CA ({e})",
                index + 1
            ))
        })?;
    }
    Ok(roots)
}

fn system_roots(required: bool) -> Result<RootCertStore, ProbeSpecError> {
    let loaded = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
    if added == 0 && required {
        let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
        let errors = if errors.is_empty() {
            "none found".to_owned()
        } else {
            errors.join("; ")
        };
        return Err(ProbeSpecError::NoSystemRoots { errors });
    }
    Ok(roots)
}
