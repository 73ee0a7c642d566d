//! The agent against an HTTPS test hub: the pinned CA bundle is trusted, any other is
//! not. Certificates come from rcgen; the server is tokio-rustls + hyper on 127.0.0.1.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use fleetpulse_common::protocol::keys;
use fleetpulse_common::protocol::report::ClusterId;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use super::http_tests::test_hub;
use crate::{AgentOptions, Url, spawn};

const DEADLINE: Duration = Duration::from_secs(20);

/// A CA (PEM) and a server certificate for 127.0.0.1 it signed.
fn ca_and_server() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
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

/// Serves `app` over TLS on 127.0.0.1 and returns its https URL.
async fn serve_tls(app: Router, cert: CertificateDer<'static>, key: PrivateKeyDer<'static>) -> Url {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                // A client refusing our certificate ends the handshake: not a test failure.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = TowerToHyperService::new(app);
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Url::parse(&format!("https://{addr}")).unwrap()
}

fn options(hub: Url, ca_pem: String, key: ed25519_dalek::SigningKey) -> AgentOptions {
    AgentOptions {
        hub_ca_pem: Some(ca_pem.into_bytes()),
        interval: Duration::from_millis(200),
        ..AgentOptions::new(hub, ClusterId::new("fleet", "edge-1"), key)
    }
}

#[tokio::test]
async fn https_hub_is_trusted_through_the_pinned_ca_bundle() {
    let key = keys::generate();
    let (app, hub) = test_hub(key.verifying_key(), 0, 0);
    let (ca_pem, cert, cert_key) = ca_and_server();
    let url = serve_tls(app, cert, cert_key).await;

    let agent = spawn(options(url, ca_pem, key)).unwrap();
    let status = agent
        .wait_for(DEADLINE, |s| s.accepted_total >= 1)
        .await
        .unwrap();
    assert_eq!(status.consecutive_failures, 0);
    assert_eq!(
        hub.lock().unwrap().heartbeats.len() as u64,
        status.last_sent.unwrap().seq
    );
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn https_hub_signed_by_another_ca_is_refused_and_retried() {
    let key = keys::generate();
    let (app, hub) = test_hub(key.verifying_key(), 0, 0);
    let (_, cert, cert_key) = ca_and_server();
    let (other_ca_pem, _, _) = ca_and_server();
    let url = serve_tls(app, cert, cert_key).await;

    let agent = spawn(options(url, other_ca_pem, key)).unwrap();
    let status = agent
        .wait_for(DEADLINE, |s| s.consecutive_failures >= 2)
        .await
        .unwrap();
    assert_eq!(status.accepted_total, 0);
    let error = status.last_error.unwrap();
    assert!(
        error.contains("unreachable") && error.contains("certificate"),
        "{error}"
    );
    assert!(hub.lock().unwrap().heartbeats.is_empty());
    agent.stop().await.unwrap();
}
