//! The HTTP probe against an HTTPS server on 127.0.0.1 whose certificate an rcgen CA
//! signed: verified with `caBundle`, refused without it or with another CA, accepted with
//! `insecureSkipVerify`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use fleetpulse_common::api::check::HttpProbe;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use super::run_http;

const TIMEOUT: Duration = Duration::from_secs(5);

/// A CA named `ca_name` (PEM) and a server certificate for 127.0.0.1 it signed.
fn ca_and_server(ca_name: &str) -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, ca_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    (ca.pem(), server.der().clone(), key)
}

/// Serves `/healthz` over TLS on 127.0.0.1 with `cert` and returns its URL.
async fn serve_tls(cert: CertificateDer<'static>, key: PrivateKeyDer<'static>) -> String {
    let app = Router::new().route("/healthz", get(|| async { "ok" }));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                // A client refusing our certificate ends the handshake: not a test failure.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                    .await;
            });
        }
    });
    format!("https://{addr}/healthz")
}

fn probe(url: &str) -> HttpProbe {
    HttpProbe {
        url: Some(url.to_owned()),
        ..HttpProbe::default()
    }
}

#[tokio::test]
async fn https_endpoint_is_verified_against_the_ca_bundle() {
    let (ca_pem, cert, key) = ca_and_server("probe test CA");
    let url = serve_tls(cert, key).await;
    let spec = HttpProbe {
        ca_bundle: Some(ca_pem),
        ..probe(&url)
    };
    let outcome = run_http(&spec, TIMEOUT).await;
    assert!(outcome.passing, "{}", outcome.message);
    assert_eq!(outcome.message, format!("GET {url}: 200 OK"));
}

#[tokio::test]
async fn https_endpoint_of_an_unknown_ca_is_refused_without_ca_bundle() {
    let (_, cert, key) = ca_and_server("probe test CA");
    let url = serve_tls(cert, key).await;
    let outcome = run_http(&probe(&url), TIMEOUT).await;
    assert!(!outcome.passing);
    // The system roots do not hold the test CA (or the machine has none at all).
    assert!(
        outcome.message.contains("certificate"),
        "{}",
        outcome.message
    );
}

#[tokio::test]
async fn https_endpoint_signed_by_another_ca_is_refused() {
    let (_, cert, key) = ca_and_server("probe test CA");
    let (other_ca_pem, _, _) = ca_and_server("another CA");
    let url = serve_tls(cert, key).await;
    let spec = HttpProbe {
        ca_bundle: Some(other_ca_pem),
        ..probe(&url)
    };
    let outcome = run_http(&spec, TIMEOUT).await;
    assert!(!outcome.passing);
    assert_eq!(
        outcome.message,
        format!("GET {url}: TLS handshake failed: invalid peer certificate: UnknownIssuer")
    );
}

#[tokio::test]
async fn insecure_skip_verify_accepts_an_unknown_ca() {
    let (_, cert, key) = ca_and_server("probe test CA");
    let url = serve_tls(cert, key).await;
    let spec = HttpProbe {
        insecure_skip_verify: true,
        ..probe(&url)
    };
    let outcome = run_http(&spec, TIMEOUT).await;
    assert!(outcome.passing, "{}", outcome.message);
}

#[tokio::test]
async fn unusable_ca_bundle_is_a_failing_outcome_naming_the_field() {
    let spec = HttpProbe {
        ca_bundle: Some("not pem".into()),
        ..probe("https://127.0.0.1:1/")
    };
    let outcome = run_http(&spec, TIMEOUT).await;
    assert!(!outcome.passing);
    assert!(
        outcome.message.contains("`http.caBundle`"),
        "{}",
        outcome.message
    );
}

#[tokio::test]
async fn ca_bundle_and_insecure_skip_verify_together_are_refused() {
    let (ca_pem, _, _) = ca_and_server("probe test CA");
    let spec = HttpProbe {
        ca_bundle: Some(ca_pem),
        insecure_skip_verify: true,
        ..probe("https://127.0.0.1:1/")
    };
    let outcome = run_http(&spec, TIMEOUT).await;
    assert!(!outcome.passing);
    assert!(
        outcome.message.contains("`http.insecureSkipVerify`"),
        "{}",
        outcome.message
    );
}
