//! [`HttpHubClient`]: the hub over HTTPS with reqwest and rustls (ring provider).
//!
//! Requests go over two connection pools ([`Lane`]s): heartbeats, config pulls and
//! enrolment over the primary, a hedged heartbeat copy over the spare, so a hedge does
//! not share the fate of the connection it hedges. A pool whose request timed out is
//! replaced by a new one: a kept connection whose path died without a reset (a NAT entry
//! dropped, a load balancer failed over) would otherwise carry, and lose, every later
//! request until the kernel gave up on it, many minutes later.
//!
//! A cluster's heartbeats and config pulls go to the hub replica that owns its shard
//! when replicas share the fleet: a redirect to it is followed once and its address kept
//! until it refuses ([`super::owner`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fleetpulse_common::enrol::ROTATE_PATH;
use fleetpulse_common::enrol::message::{RotateAnswer, RotationRequest};
use fleetpulse_common::protocol::errors::ErrorBody;
use fleetpulse_common::protocol::report::{AgentConfig, ClusterId, HeartbeatAnswer};
use fleetpulse_common::protocol::{AUTH_SCHEME, CONTENT_TYPE_JOSE, config_path, heartbeat_path};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, RETRY_AFTER};
use reqwest::{Client, RequestBuilder};
use rustls::{ClientConfig, RootCertStore};
use serde::de::DeserializeOwned;
use tracing::{debug, info, warn};

use super::owner::{Owner, owner_of};
use super::{HubClient, HubError, retry_after};
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

/// The hub's two endpoints for one cluster, over two connection pools.
#[derive(Clone, Debug)]
pub struct HttpHubClient {
    lanes: Arc<Lanes>,
    hub: Url,
    /// The replica owning this cluster's shard, as a redirect last named it.
    owner: Arc<Owner>,
    heartbeat_path: String,
    config_path: String,
}

/// A failed exchange, with the `Location` of a `307`/`308` answer.
struct Failed {
    error: HubError,
    location: Option<String>,
}

impl Failed {
    /// Whether a cached owner that answered this is no longer to be sent to: it did not
    /// answer, refused transiently (`503` while its shard moves), or sent elsewhere.
    fn drops_owner(&self) -> bool {
        self.error.is_transient() || self.location.is_some()
    }
}

/// How every pool is built, and the two pools.
#[derive(Debug)]
struct Lanes {
    settings: PoolSettings,
    primary: Lane,
    spare: Lane,
}

/// What a new pool is built from (the TLS config shares its session cache, so a new
/// pool's first connection resumes the TLS session).
#[derive(Debug)]
struct PoolSettings {
    tls: ClientConfig,
    https: bool,
    loopback: bool,
    hub: Url,
}

/// One connection pool, replaced after a timeout.
#[derive(Debug)]
struct Lane(Mutex<Client>);

impl PoolSettings {
    fn build(&self) -> Result<Client, AgentError> {
        // Connections are kept between heartbeats (TCP keepalive holds NAT entries open
        // and finds dead peers), and rustls resumes TLS sessions (its default in-memory
        // session cache), so a reconnect after the hub closed an idle connection costs an
        // abbreviated handshake, not a full one.
        let mut builder = Client::builder()
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .tcp_keepalive(TCP_KEEPALIVE)
            .tls_backend_preconfigured(self.tls.clone())
            .https_only(self.https)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("fleetpulse-agent/", env!("CARGO_PKG_VERSION")));
        if self.loopback {
            builder = builder.no_proxy();
        }
        builder.build().map_err(|source| AgentError::HttpClient {
            url: self.hub.clone(),
            source,
        })
    }
}

impl Lane {
    fn client(&self) -> Client {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Lanes {
    /// Sends on `lane`; a timeout replaces the lane's pool (requests still in flight on
    /// the old one finish or fail on their own).
    async fn exchange<T: DeserializeOwned>(
        &self,
        lane: &Lane,
        request: impl FnOnce(&Client) -> RequestBuilder,
        timeout: Duration,
        url: &Url,
        expected: &'static str,
    ) -> Result<(u16, T), Failed> {
        let result = exchange_with_status(request(&lane.client()), timeout, url, expected).await;
        if let Err(Failed {
            error: HubError::Unreachable { source, .. },
            ..
        }) = &result
            && source
                .downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_timeout)
        {
            match self.settings.build() {
                Ok(fresh) => {
                    *lane.0.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
                    debug!(%url, "request timed out; the next one opens a new connection");
                }
                Err(e) => {
                    warn!(%url, error = %e, "request timed out and a new connection pool cannot be built; keeping the old one")
                }
            }
        }
        result
    }
}

impl HttpHubClient {
    /// A client for `cluster` on the hub at `hub`, verifying the hub against `hub_ca_pem`
    /// (only those roots) or the system roots. Refuses `http://` unless
    /// `allow_insecure_http`. A redirect to the replica owning the cluster's shard is
    /// followed (same scheme, same path) and kept; no other redirect is.
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
        let settings = PoolSettings {
            tls,
            https,
            loopback: is_loopback(hub),
            hub: hub.clone(),
        };
        let (primary, spare) = (settings.build()?, settings.build()?);
        Ok(Self {
            lanes: Arc::new(Lanes {
                settings,
                primary: Lane(Mutex::new(primary)),
                spare: Lane(Mutex::new(spare)),
            }),
            hub: hub.clone(),
            owner: Arc::default(),
            heartbeat_path: heartbeat_path(&cluster.namespace, &cluster.name),
            config_path: config_path(&cluster.namespace, &cluster.name),
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
        let request = |c: &Client| {
            c.post(url.clone())
                .header(ACCEPT, "application/json")
                .json(body)
        };
        let lanes = &self.lanes;
        lanes
            .exchange(&lanes.primary, request, timeout, &url, "enrolment answer")
            .await
            .map_err(|failed| failed.error)
    }

    /// Sends a request for this cluster's `path` to the owner of its shard if one is
    /// cached, else to the configured hub; follows one redirect to the owner it names
    /// (and caches it), and drops a cached owner that refuses (unreachable, a transient
    /// refusal, or a redirect of its own).
    async fn to_owner<T: DeserializeOwned>(
        &self,
        lane: &Lane,
        path: &str,
        request: impl Fn(&Client, Url) -> RequestBuilder,
        timeout: Duration,
        expected: &'static str,
    ) -> Result<T, HubError> {
        let cached = self.owner.get();
        let url = endpoint(cached.as_ref().unwrap_or(&self.hub), path);
        let request = &request;
        let send = |url: Url| async move {
            let attempt = |c: &Client| request(c, url.clone());
            self.lanes
                .exchange(lane, attempt, timeout, &url, expected)
                .await
        };
        let failed = match send(url).await {
            Ok((_, answer)) => return Ok(answer),
            Err(failed) => failed,
        };
        if let Some(cached) = &cached
            && failed.drops_owner()
        {
            debug!(owner = %cached, error = %failed.error, "the hub replica this cluster was sent to refused; back to the configured hub");
            self.owner.forget(cached);
        }
        let Some(location) = failed.location else {
            return Err(failed.error);
        };
        let owner = match owner_of(&location, &self.hub, path) {
            Ok(owner) if Some(&owner) != cached.as_ref() => owner,
            Ok(_) => return Err(failed.error),
            Err(why) => {
                warn!(hub = %self.hub, error = %why, "not following the hub's redirect");
                return Err(failed.error);
            }
        };
        info!(%owner, "a hub replica sent this cluster to the replica owning its shard; sending there from now on");
        self.owner.set(owner.clone());
        match send(endpoint(&owner, path)).await {
            Ok((_, answer)) => Ok(answer),
            Err(failed) => {
                if failed.drops_owner() {
                    self.owner.forget(&owner);
                }
                Err(failed.error)
            }
        }
    }

    /// POSTs a heartbeat over `lane`.
    async fn heartbeat_on(
        &self,
        lane: &Lane,
        jws: String,
        timeout: Duration,
    ) -> Result<HeartbeatAnswer, HubError> {
        let request = |c: &Client, url: Url| {
            c.post(url)
                .header(CONTENT_TYPE, CONTENT_TYPE_JOSE)
                .header(ACCEPT, "application/json")
                .body(jws.clone())
        };
        let path = &self.heartbeat_path;
        self.to_owner(lane, path, request, timeout, "heartbeat answer")
            .await
    }
}

impl HubClient for HttpHubClient {
    async fn send_heartbeat(
        &self,
        jws: String,
        timeout: Duration,
    ) -> Result<HeartbeatAnswer, HubError> {
        self.heartbeat_on(&self.lanes.primary, jws, timeout).await
    }

    async fn send_heartbeat_beside(
        &self,
        jws: String,
        timeout: Duration,
    ) -> Result<HeartbeatAnswer, HubError> {
        self.heartbeat_on(&self.lanes.spare, jws, timeout).await
    }

    async fn fetch_config(
        &self,
        request_jws: String,
        timeout: Duration,
    ) -> Result<AgentConfig, HubError> {
        let request = |c: &Client, url: Url| {
            c.get(url)
                .header(AUTHORIZATION, format!("{AUTH_SCHEME} {request_jws}"))
                .header(ACCEPT, "application/json")
        };
        let (lane, path) = (&self.lanes.primary, &self.config_path);
        self.to_owner(lane, path, request, timeout, "cluster config")
            .await
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

/// Sends `request` and decodes a success body as `T` (with the success status), or sorts
/// the failure (keeping the wait a `Retry-After` asks for, and a redirect's `Location`).
async fn exchange_with_status<T: DeserializeOwned>(
    request: RequestBuilder,
    timeout: Duration,
    url: &Url,
    expected: &'static str,
) -> Result<(u16, T), Failed> {
    let unreachable = |source: reqwest::Error| Failed {
        error: HubError::Unreachable {
            url: url.to_string(),
            source: Box::new(source.without_url()),
        },
        location: None,
    };
    let response = request.timeout(timeout).send().await.map_err(unreachable)?;
    let status = response.status();
    let header = |name| {
        (response.headers().get(name))
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let retry_after = header(RETRY_AFTER).and_then(|v| retry_after::parse(&v, SystemTime::now()));
    let location = matches!(status.as_u16(), 307 | 308)
        .then(|| header(LOCATION))
        .flatten();
    let body = response.bytes().await.map_err(unreachable)?;
    if status.is_success() {
        return serde_json::from_slice(&body)
            .map(|t| (status.as_u16(), t))
            .map_err(|source| Failed {
                error: HubError::BadAnswer {
                    url: url.to_string(),
                    expected,
                    source,
                },
                location: None,
            });
    }
    let status = status.as_u16();
    let error = match serde_json::from_slice::<ErrorBody>(&body) {
        Ok(body) => HubError::Rejected {
            url: url.to_string(),
            status,
            body,
            retry_after,
        },
        Err(_) => HubError::Status {
            url: url.to_string(),
            status,
            body: String::from_utf8_lossy(&body)
                .chars()
                .take(MAX_ERROR_BODY_CHARS)
                .collect(),
            retry_after,
        },
    };
    Err(Failed { error, location })
}

fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
