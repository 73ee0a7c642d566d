//! [`HttpHubClient`]: the hub over HTTPS with reqwest and rustls (ring provider).

use std::time::Duration;

use fleetpulse_common::enrol::ROTATE_PATH;
use fleetpulse_common::enrol::message::{RotateAnswer, RotationRequest};
use fleetpulse_common::protocol::errors::ErrorBody;
use fleetpulse_common::protocol::report::{AgentConfig, ClusterId, HeartbeatAnswer};
use fleetpulse_common::protocol::{AUTH_SCHEME, CONTENT_TYPE_JOSE, config_path, heartbeat_path};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Client, RequestBuilder};
use rustls::RootCertStore;
use serde::de::DeserializeOwned;

use super::{HubClient, HubError};
use crate::Url;
use crate::error::AgentError;
use crate::options::{AgentOptions, endpoint, validate_hub_url};
use crate::tls;
use fleetpulse_common::enrol::pin::CaPin;

/// How much of an unexpected error body ends up in the error.
const MAX_ERROR_BODY_CHARS: usize = 512;
/// How long an idle connection is kept for the next heartbeat (longer than any usual
/// interval; a longer interval opens a new connection, with TLS session resumption).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// TCP keepalive on the connection to the hub.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// The hub's two endpoints for one cluster, over one reqwest client.
#[derive(Clone, Debug)]
pub struct HttpHubClient {
    client: Client,
    hub: Url,
    heartbeat_url: Url,
    config_url: Url,
}

impl HttpHubClient {
    /// A client for `cluster` on the hub at `hub`, verifying the hub against `hub_ca_pem`
    /// (only those roots) or the system roots. Refuses `http://` unless
    /// `allow_insecure_http`. Redirects are not followed.
    pub fn new(
        hub: &Url,
        cluster: &ClusterId,
        hub_ca_pem: Option<&[u8]>,
        allow_insecure_http: bool,
    ) -> Result<Self, AgentError> {
        Self::with_tls(hub, cluster, hub_ca_pem, None, allow_insecure_http)
    }

    /// As [`Self::new`], trusting the CA matching `hub_ca_pin` when given.
    pub fn with_tls(
        hub: &Url,
        cluster: &ClusterId,
        hub_ca_pem: Option<&[u8]>,
        hub_ca_pin: Option<CaPin>,
        allow_insecure_http: bool,
    ) -> Result<Self, AgentError> {
        validate_hub_url(hub, allow_insecure_http)?;
        let https = hub.scheme() == "https";
        let tls = match (https, hub_ca_pem, hub_ca_pin) {
            (_, _, Some(pin)) => tls::pinned_client_config(pin)?,
            // Plain HTTP never handshakes; do not require system roots for it.
            (false, None, None) => tls::client_config_with_roots(RootCertStore::empty())?,
            (_, ca, None) => tls::client_config(ca)?,
        };
        // Connections are kept between heartbeats (TCP keepalive holds NAT entries open
        // and finds dead peers), and rustls resumes TLS sessions (its default in-memory
        // session cache), so a reconnect after the hub closed an idle connection costs an
        // abbreviated handshake, not a full one.
        let mut builder = Client::builder()
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .tcp_keepalive(TCP_KEEPALIVE)
            .tls_backend_preconfigured(tls)
            .https_only(https)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("fleetpulse-agent/", env!("CARGO_PKG_VERSION")));
        if is_loopback(hub) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|source| AgentError::HttpClient {
            url: hub.clone(),
            source,
        })?;
        Ok(Self {
            client,
            hub: hub.clone(),
            heartbeat_url: endpoint(hub, &heartbeat_path(&cluster.namespace, &cluster.name)),
            config_url: endpoint(hub, &config_path(&cluster.namespace, &cluster.name)),
        })
    }

    /// The client for an agent's options (validated first).
    pub fn for_agent(opts: &AgentOptions) -> Result<Self, AgentError> {
        opts.validate()?;
        Self::with_tls(
            &opts.hub,
            &opts.cluster,
            opts.hub_ca_pem.as_deref(),
            opts.hub_ca_pin,
            opts.allow_insecure_http,
        )
    }

    /// POSTs `body` as JSON to `path` of the hub and returns the status and decoded answer
    /// (enrolment and rotation).
    pub async fn post_json<B: serde::Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<(u16, T), HubError> {
        let url = endpoint(&self.hub, path);
        let request = self
            .client
            .post(url.clone())
            .header(ACCEPT, "application/json")
            .json(body);
        exchange_with_status(request, timeout, &url, "enrolment answer").await
    }

    /// The URL heartbeats are POSTed to.
    pub fn heartbeat_url(&self) -> &Url {
        &self.heartbeat_url
    }

    /// The URL the config is pulled from.
    pub fn config_url(&self) -> &Url {
        &self.config_url
    }
}

impl HubClient for HttpHubClient {
    async fn send_heartbeat(
        &self,
        jws: String,
        timeout: Duration,
    ) -> Result<HeartbeatAnswer, HubError> {
        let request = self
            .client
            .post(self.heartbeat_url.clone())
            .header(CONTENT_TYPE, CONTENT_TYPE_JOSE)
            .header(ACCEPT, "application/json")
            .body(jws);
        exchange(request, timeout, &self.heartbeat_url, "heartbeat answer").await
    }

    async fn fetch_config(
        &self,
        request_jws: String,
        timeout: Duration,
    ) -> Result<AgentConfig, HubError> {
        let request = self
            .client
            .get(self.config_url.clone())
            .header(AUTHORIZATION, format!("{AUTH_SCHEME} {request_jws}"))
            .header(ACCEPT, "application/json");
        exchange(request, timeout, &self.config_url, "cluster config").await
    }

    async fn rotate_key(
        &self,
        request: RotationRequest,
        timeout: Duration,
    ) -> Result<RotateAnswer, HubError> {
        self.post_json(ROTATE_PATH, &request, timeout)
            .await
            .map(|(_, answer)| answer)
    }
}

/// Sends `request` and decodes a success body as `T`, or sorts the failure.
async fn exchange<T: DeserializeOwned>(
    request: RequestBuilder,
    timeout: Duration,
    url: &Url,
    expected: &'static str,
) -> Result<T, HubError> {
    exchange_with_status(request, timeout, url, expected)
        .await
        .map(|(_, t)| t)
}

/// As [`exchange`], also returning the success status.
async fn exchange_with_status<T: DeserializeOwned>(
    request: RequestBuilder,
    timeout: Duration,
    url: &Url,
    expected: &'static str,
) -> Result<(u16, T), HubError> {
    let unreachable = |source: reqwest::Error| HubError::Unreachable {
        url: url.to_string(),
        source: Box::new(source.without_url()),
    };
    let response = request.timeout(timeout).send().await.map_err(unreachable)?;
    let status = response.status();
    let body = response.bytes().await.map_err(unreachable)?;
    if status.is_success() {
        return serde_json::from_slice(&body)
            .map(|t| (status.as_u16(), t))
            .map_err(|source| HubError::BadAnswer {
                url: url.to_string(),
                expected,
                source,
            });
    }
    let status = status.as_u16();
    match serde_json::from_slice::<ErrorBody>(&body) {
        Ok(body) => Err(HubError::Rejected {
            url: url.to_string(),
            status,
            body,
        }),
        Err(_) => Err(HubError::Status {
            url: url.to_string(),
            status,
            body: String::from_utf8_lossy(&body)
                .chars()
                .take(MAX_ERROR_BODY_CHARS)
                .collect(),
        }),
    }
}

fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
