//! Server TLS with rustls (ring provider): certificate chain and key from PEM files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// TLS material could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM item.
    #[error("{path}: {problem}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is missing.
        problem: String,
    },
    /// rustls refused the certificate/key pair.
    #[error("TLS certificate {cert} with key {key}: {source}")]
    Config {
        /// Certificate file.
        cert: PathBuf,
        /// Key file.
        key: PathBuf,
        /// The cause.
        #[source]
        source: rustls::Error,
    },
}

/// Builds an acceptor from a PEM certificate chain and a PEM private key.
pub fn server_config(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|source| TlsError::Read {
            path: p.to_owned(),
            source,
        })
    };
    let pem_err = |p: &Path, problem: &str| TlsError::Pem {
        path: p.to_owned(),
        problem: problem.into(),
    };
    let cert_pem = read(cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| pem_err(cert, "not a PEM certificate chain"))?;
    if chain.is_empty() {
        return Err(pem_err(cert, "no 'BEGIN CERTIFICATE' block found"));
    }
    let key_pem = read(key)?;
    let private_key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => pem_err(key, "no private key block found"),
        _ => pem_err(key, "not a PEM private key"),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, private_key))
        .map_err(|source| TlsError::Config {
            cert: cert.to_owned(),
            key: key.to_owned(),
            source,
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
