//! The hub's read API from the command line: the `--server`, `--ca` and `--token-file`
//! flags `get` and `describe` share, a client trusting that CA, and GET of a JSON
//! document with the bearer token.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use serde::de::DeserializeOwned;

use crate::ingest::read::List;

/// Where the hub's admin API is, and how to authenticate to it.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// URL of the hub's admin listener (`serve --admin-listen`, not the agents' port).
    #[arg(
        long,
        env = "FLEETPULSE_SERVER",
        default_value = "https://127.0.0.1:9443"
    )]
    pub server: String,
    /// PEM CA bundle to verify the hub's certificate (default: the system roots).
    #[arg(long, env = "FLEETPULSE_CA")]
    pub ca: Option<PathBuf>,
    /// File holding the bearer token to send: the hub's --admin-token-file, or in
    /// Kubernetes mode a token of a user the hub's RBAC allows (e.g. a ServiceAccount's).
    /// Not needed for a hub whose admin listener is on loopback without a token.
    #[arg(long, env = "FLEETPULSE_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
}

impl ServerArgs {
    /// GETs `path` (e.g. `/v1/memberclusters?namespace=fleet`) from the hub as JSON.
    pub async fn get(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        let client = client(self.ca.as_deref())?;
        let url = format!("{}{path}", self.server.trim_end_matches('/'));
        let mut request = client.get(&url);
        if let Some(file) = &self.token_file {
            let token = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the token file {}", file.display()))?;
            request = request.bearer_auth(token.trim());
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot reach the hub at {url}"))?;
        let status = response.status();
        let body = response.text().await?;
        anyhow::ensure!(
            status != reqwest::StatusCode::NOT_FOUND || !body.is_empty(),
            "hub answered {status} for {url}: is --server the hub's admin listener \
             (serve --admin-listen, default 127.0.0.1:9443) rather than the agents' port?"
        );
        anyhow::ensure!(
            status.is_success(),
            "hub answered {status} for {url}: {body}"
        );
        serde_json::from_str(&body)
            .with_context(|| format!("the hub's answer to {url} is not JSON"))
    }
}

/// The items of a list answer.
pub fn items<T: DeserializeOwned>(value: serde_json::Value) -> anyhow::Result<Vec<T>> {
    Ok(serde_json::from_value::<List<T>>(value)
        .context("hub answer is not a list of the expected kind")?
        .items)
}

fn client(ca: Option<&std::path::Path>) -> anyhow::Result<reqwest::Client> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("cannot read CA bundle {}", path.display()))?;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
                roots.add(
                    cert.with_context(|| format!("{} is not a PEM CA bundle", path.display()))?,
                )?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()?)
}
