//! [`AgentError`]: why an agent could not start or did not stop cleanly.
//!
//! Failures of single requests to the hub are not errors of the agent: the loop retries
//! them and reports them through [`crate::AgentStatus`] and the logs (see
//! [`crate::hub_client::HubError`]).

use crate::Url;
use crate::keys::KeyFileError;
use crate::tls::TlsError;

/// Why an agent could not start, or how its task ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The hub URL is `http://` and plain HTTP was not allowed.
    #[error(
        "hub URL {url} uses plain http://, which sends heartbeats unencrypted; use an https:// \
         hub URL, or pass --insecure-http (FLEETPULSE_INSECURE_HTTP=true) to allow plain HTTP \
         for development"
    )]
    InsecureHubUrl {
        /// The refused URL.
        url: Url,
    },
    /// The hub URL is neither `https://` nor `http://`, or carries a query, fragment or
    /// credentials.
    #[error(
        "hub URL {url} is not usable: {reason}; pass the hub's base URL, e.g. \
         https://fleetpulse-hub.example.com"
    )]
    BadHubUrl {
        /// The refused URL.
        url: Url,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The interval is zero.
    #[error("heartbeat interval must be at least 1 second")]
    ZeroInterval,
    /// The TLS configuration could not be built.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The private key file could not be read.
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client for hub {url}: {source}")]
    HttpClient {
        /// The hub URL.
        url: Url,
        /// What reqwest reported.
        #[source]
        source: reqwest::Error,
    },
    /// The agent task panicked or was aborted.
    #[error("the agent task for cluster {cluster} ended abnormally: {reason}")]
    Task {
        /// The cluster the agent reported for.
        cluster: String,
        /// The panic message or abort reason.
        reason: String,
    },
}
