//! The rustls client configuration the agent verifies the hub with.
//!
//! Always built on the `ring` provider passed explicitly (no process-wide default
//! provider is needed or installed). With a CA bundle (`--hub-ca`) only those roots are
//! trusted; without one, the system roots are (via `rustls-native-certs`). With a pin
//! (`--hub-ca-hash`), the CA the hub presents is trusted if it matches ([`pinned`]).

mod any_cert;
pub mod pinned;

pub use any_cert::AcceptAnyServerCert;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::{self, PemObject};
use rustls::{ClientConfig, RootCertStore};

/// Why the TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The CA bundle file could not be read.
    #[error(
        "cannot read the hub CA bundle {path} (--hub-ca): {source}; point --hub-ca at the PEM \
         file of the CA that signed the hub's certificate"
    )]
    ReadCaBundle {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The CA bundle is not valid PEM.
    #[error(
        "the hub CA bundle {origin} is not valid PEM: {source}; it must hold one or more \
         'BEGIN CERTIFICATE' blocks"
    )]
    CaBundlePem {
        /// Where the bundle came from (a file name).
        origin: String,
        /// The PEM error.
        #[source]
        source: pem::Error,
    },
    /// The CA bundle holds no certificate.
    #[error(
        "the hub CA bundle {origin} holds no 'BEGIN CERTIFICATE' block; pass the PEM file of \
         the CA that signed the hub's certificate"
    )]
    EmptyCaBundle {
        /// Where the bundle came from.
        origin: String,
    },
    /// A certificate of the bundle is not a usable trust anchor.
    #[error(
        "certificate #{index} of the hub CA bundle {origin} is not a usable CA certificate: \
         {source}"
    )]
    BadCaCertificate {
        /// Where the bundle came from.
        origin: String,
        /// 1-based position in the bundle.
        index: usize,
        /// What rustls reported.
        #[source]
        source: rustls::Error,
    },
    /// No system root certificates could be loaded.
    #[error(
        "no system root certificates could be loaded ({errors}); pass --hub-ca with the hub's \
         CA bundle"
    )]
    NoSystemRoots {
        /// The loader's errors, joined.
        errors: String,
    },
    /// rustls refused the protocol versions (should not happen with the ring provider).
    #[error("cannot configure TLS: {0}")]
    Config(#[source] rustls::Error),
}

/// Reads and checks a CA bundle file, so that a bad `--hub-ca` fails at startup with the
/// file's name. Returns the PEM bytes for [`crate::AgentOptions::hub_ca_pem`].
pub fn read_ca_bundle(path: &Path) -> Result<Vec<u8>, TlsError> {
    let pem = std::fs::read(path).map_err(|source| TlsError::ReadCaBundle {
        path: path.to_owned(),
        source,
    })?;
    parse_ca_bundle(&pem, &path.display().to_string())?;
    Ok(pem)
}

/// Parses the certificates of a PEM CA bundle; `origin` names it in errors.
pub fn parse_ca_bundle(pem: &[u8], origin: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::CaBundlePem {
            origin: origin.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::EmptyCaBundle {
            origin: origin.to_owned(),
        });
    }
    Ok(certs)
}

/// The client configuration: trusts only `hub_ca_pem` when given, else the system roots.
/// Offers HTTP/2 and HTTP/1.1 by ALPN.
pub fn client_config(hub_ca_pem: Option<&[u8]>) -> Result<ClientConfig, TlsError> {
    let roots = match hub_ca_pem {
        Some(pem) => roots_from_bundle(pem, "given as hub_ca_pem")?,
        None => system_roots()?,
    };
    client_config_with_roots(roots)
}

/// A client configuration trusting exactly `roots`.
pub fn client_config_with_roots(roots: RootCertStore) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A client configuration trusting the CA in the hub's chain that matches `pin`.
pub fn pinned_client_config(
    pin: fleetpulse_common::enrol::pin::CaPin,
) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(pinned::PinnedCaVerifier::new(pin, provider.clone()));
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

fn roots_from_bundle(pem: &[u8], origin: &str) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for (i, cert) in parse_ca_bundle(pem, origin)?.into_iter().enumerate() {
        roots
            .add(cert)
            .map_err(|source| TlsError::BadCaCertificate {
                origin: origin.to_owned(),
                index: i + 1,
                source,
            })?;
    }
    Ok(roots)
}

fn system_roots() -> Result<RootCertStore, TlsError> {
    let loaded = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
    if added == 0 {
        let errors = loaded
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>();
        let errors = if errors.is_empty() {
            "none found".to_owned()
        } else {
            errors.join("; ")
        };
        return Err(TlsError::NoSystemRoots { errors });
    }
    for error in &loaded.errors {
        tracing::debug!(%error, "some system root certificates could not be loaded");
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_without_certificates_is_refused_with_its_name() {
        let err = parse_ca_bundle(b"not a pem file\n", "/etc/hub-ca.pem").unwrap_err();
        assert!(matches!(err, TlsError::EmptyCaBundle { .. }));
        assert!(err.to_string().contains("/etc/hub-ca.pem"), "{err}");
    }

    #[test]
    fn a_missing_bundle_file_names_the_file_and_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.pem");
        let err = read_ca_bundle(&path).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("missing.pem") && text.contains("--hub-ca"),
            "{text}"
        );
    }

    #[test]
    fn config_without_bundle_builds_on_the_ring_provider_without_a_default() {
        // Plain roots: no process-wide provider has been installed in this test binary.
        let config = client_config_with_roots(RootCertStore::empty()).unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }
}
