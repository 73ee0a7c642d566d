//! A throwaway PKI for loopback HTTPS: a CA and a server certificate for `localhost` and
//! `127.0.0.1`, written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// PEM files of a CA and a hub certificate signed by it.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA certificate (give it to agents as `--hub-ca`).
    pub ca_cert: PathBuf,
    /// The hub's certificate chain.
    pub server_cert: PathBuf,
    /// The hub's private key.
    pub server_key: PathBuf,
}

impl Pki {
    /// Generates the CA and the hub certificate into `dir`.
    pub fn generate(dir: &Path) -> anyhow::Result<Pki> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "fleetpulse test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, "fleetpulse-hub");
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &ca)?;
        let pki = Pki {
            ca_cert: dir.join("ca.pem"),
            server_cert: dir.join("hub.pem"),
            server_key: dir.join("hub-key.pem"),
        };
        std::fs::write(&pki.ca_cert, ca.pem())?;
        std::fs::write(&pki.server_cert, cert.pem())?;
        std::fs::write(&pki.server_key, key.serialize_pem())?;
        Ok(pki)
    }
}
