//! Trusting the hub through a pinned CA (`--hub-ca-hash sha256:HEX`), as kubeadm's
//! discovery: the hub's certificate chain must hold a CA certificate whose
//! SubjectPublicKeyInfo hashes to the pin, and the hub's certificate must verify against
//! that CA (name, validity, signature). Nothing is sent before the handshake passed, so a
//! first contact cannot be intercepted.

use std::sync::Arc;

use fleetpulse_common::enrol::pin::CaPin;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::AcceptAnyServerCert;

/// Verifies the hub against the CA its chain carries, if that CA matches the pin.
#[derive(Debug)]
pub struct PinnedCaVerifier {
    pin: CaPin,
    provider: Arc<CryptoProvider>,
    /// Checks handshake signatures with the provider's algorithms (only its signature
    /// checks are used; the chain is verified above, against the pinned CA).
    handshake: AcceptAnyServerCert,
}

impl PinnedCaVerifier {
    /// A verifier for `pin`, checking signatures with `provider`'s algorithms.
    pub fn new(pin: CaPin, provider: Arc<CryptoProvider>) -> Self {
        Self {
            pin,
            handshake: AcceptAnyServerCert::new(provider.clone()),
            provider,
        }
    }
}

impl ServerCertVerifier for PinnedCaVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let pinned = intermediates
            .iter()
            .position(|c| CaPin::of_certificate(c).is_ok_and(|p| p == self.pin))
            .ok_or_else(|| {
                rustls::Error::General(format!(
                    "the hub's certificate chain holds no CA certificate matching --hub-ca-hash \
                     {}: the hub is not the one the token was made for, or its --tls-cert file \
                     does not include its CA certificate (append it)",
                    self.pin
                ))
            })?;
        let mut roots = RootCertStore::empty();
        roots.add(intermediates[pinned].clone().into_owned())?;
        let rest: Vec<CertificateDer<'_>> = intermediates
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != pinned)
            .map(|(_, c)| c.clone())
            .collect();
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?
            .verify_server_cert(end_entity, &rest, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.handshake.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.handshake.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.handshake.supported_verify_schemes()
    }
}
