//! [`AgentOptions`]: everything one agent needs to run, and the hub URL rules.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;
use fleetpulse_common::protocol::keys::KeyId;
use fleetpulse_common::protocol::report::ClusterId;

use crate::Url;
use crate::checks::{ChecksSource, NoChecks};
use crate::error::AgentError;
use crate::metrics::AgentMetrics;

/// The audience (`aud`) an agent addresses its reports to unless told otherwise.
pub const DEFAULT_AUDIENCE: &str = "fleetpulse";
/// The heartbeat interval used until the hub answers with its own.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// What one agent needs to run. Build it with [`AgentOptions::new`] and override fields
/// with struct update syntax:
///
/// ```
/// # use fleetpulse_agent::{AgentOptions, Url};
/// # use fleetpulse_common::protocol::{keys, report::ClusterId};
/// let opts = AgentOptions {
///     allow_insecure_http: true,
///     ..AgentOptions::new(
///         Url::parse("http://127.0.0.1:8443").unwrap(),
///         ClusterId::new("fleet", "edge-1"),
///         keys::generate(),
///     )
/// };
/// assert_eq!(opts.audience, "fleetpulse");
/// ```
#[derive(Clone)]
pub struct AgentOptions {
    /// Base URL of the hub; the protocol paths are appended to it (a path prefix is kept).
    pub hub: Url,
    /// The MemberCluster on the hub this agent reports for.
    pub cluster: ClusterId,
    /// The cluster's private key.
    pub key: SigningKey,
    /// PEM bundle of the CAs that may sign the hub's certificate. When set, only these
    /// roots are trusted; when `None`, the system roots are.
    pub hub_ca_pem: Option<Vec<u8>>,
    /// A pinned hub CA (`--hub-ca-hash`): when set, the CA in the hub's chain matching it
    /// is trusted instead of `hub_ca_pem` or the system roots.
    pub hub_ca_pin: Option<fleetpulse_common::enrol::pin::CaPin>,
    /// The hub's identity (`aud` of every report); must match the hub's `--audience`.
    pub audience: String,
    /// UID of the managed cluster, reported as is (empty: unknown).
    pub cluster_uid: String,
    /// The interval used until the hub answers with its own.
    pub interval: Duration,
    /// Allow an `http://` hub URL (development only: heartbeats travel unencrypted).
    pub allow_insecure_http: bool,
    /// Where check results come from (default: [`NoChecks`]).
    pub checks: Arc<dyn ChecksSource>,
    /// Where the heartbeat loop records its metrics (default: a set nobody serves).
    pub metrics: AgentMetrics,
    /// Key rotation, for an agent that enrolled with a bootstrap token (default: none;
    /// a pre-shared key is rotated in the MemberCluster's spec).
    pub rotation: Option<crate::rotation::RotationSettings>,
}

impl AgentOptions {
    /// Options with the defaults: audience [`DEFAULT_AUDIENCE`], no cluster UID,
    /// [`DEFAULT_INTERVAL`], system roots, `https://` only, no checks.
    pub fn new(hub: Url, cluster: ClusterId, key: SigningKey) -> Self {
        Self {
            hub,
            cluster,
            key,
            hub_ca_pem: None,
            hub_ca_pin: None,
            audience: DEFAULT_AUDIENCE.to_owned(),
            cluster_uid: String::new(),
            interval: DEFAULT_INTERVAL,
            allow_insecure_http: false,
            checks: Arc::new(NoChecks),
            metrics: AgentMetrics::default(),
            rotation: None,
        }
    }

    /// Checks the options that can be wrong before anything is sent.
    pub fn validate(&self) -> Result<(), AgentError> {
        validate_hub_url(&self.hub, self.allow_insecure_http)?;
        if self.interval.is_zero() {
            return Err(AgentError::ZeroInterval);
        }
        Ok(())
    }
}

impl fmt::Debug for AgentOptions {
    /// Shows the key id, never the private key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentOptions")
            .field("hub", &self.hub.as_str())
            .field("cluster", &self.cluster)
            .field("key_id", &KeyId::of(&self.key.verifying_key()).0)
            .field("hub_ca_pem", &self.hub_ca_pem.as_ref().map(|pem| pem.len()))
            .field("hub_ca_pin", &self.hub_ca_pin)
            .field("audience", &self.audience)
            .field("cluster_uid", &self.cluster_uid)
            .field("interval", &self.interval)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .finish_non_exhaustive()
    }
}

/// Accepts `https://` hub URLs, and `http://` ones only when `allow_insecure_http`.
/// Refuses queries, fragments and credentials, which would end up in every request.
pub fn validate_hub_url(url: &Url, allow_insecure_http: bool) -> Result<(), AgentError> {
    let bad = |reason| {
        Err(AgentError::BadHubUrl {
            url: url.clone(),
            reason,
        })
    };
    match url.scheme() {
        "https" => {}
        "http" if allow_insecure_http => {}
        "http" => return Err(AgentError::InsecureHubUrl { url: url.clone() }),
        _ => return bad("the scheme must be https"),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return bad("it has no host");
    }
    if url.query().is_some() || url.fragment().is_some() {
        return bad("it must not have a query or fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad("it must not carry credentials");
    }
    Ok(())
}

/// The URL of a protocol `path` (e.g. [`fleetpulse_common::protocol::heartbeat_path`])
/// under the hub's base URL, keeping any path prefix of the base.
pub fn endpoint(hub: &Url, path: &str) -> Url {
    let mut url = hub.clone();
    let joined = format!("{}{path}", hub.path().trim_end_matches('/'));
    url.set_path(&joined);
    url
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetpulse_common::protocol::{heartbeat_path, keys};

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn http_hub_is_refused_without_insecure_http_and_the_error_names_the_flag() {
        let err = validate_hub_url(&url("http://hub.example"), false).unwrap_err();
        assert!(matches!(err, AgentError::InsecureHubUrl { .. }));
        assert!(err.to_string().contains("--insecure-http"), "{err}");
        validate_hub_url(&url("http://hub.example"), true).unwrap();
        validate_hub_url(&url("https://hub.example:8443"), false).unwrap();
    }

    #[test]
    fn other_schemes_queries_and_credentials_are_refused() {
        for bad in [
            "ftp://hub.example",
            "https://hub.example/?x=1",
            "https://hub.example/#f",
            "https://user:pw@hub.example",
        ] {
            let err = validate_hub_url(&url(bad), true).unwrap_err();
            assert!(matches!(err, AgentError::BadHubUrl { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn zero_interval_is_refused() {
        let opts = AgentOptions {
            interval: Duration::ZERO,
            ..AgentOptions::new(
                url("https://hub"),
                ClusterId::new("a", "b"),
                keys::generate(),
            )
        };
        assert!(matches!(opts.validate(), Err(AgentError::ZeroInterval)));
    }

    #[test]
    fn endpoints_keep_the_base_path_prefix() {
        let path = heartbeat_path("fleet", "edge-1");
        assert_eq!(
            endpoint(&url("https://hub.example:8443"), &path).as_str(),
            "https://hub.example:8443/v1/clusters/fleet/edge-1/heartbeat"
        );
        assert_eq!(
            endpoint(&url("https://hub.example/fleetpulse/"), &path).as_str(),
            "https://hub.example/fleetpulse/v1/clusters/fleet/edge-1/heartbeat"
        );
    }

    #[test]
    fn debug_output_never_contains_the_private_key() {
        let key = keys::generate();
        let secret = format!("{:?}", key.to_bytes());
        let opts = AgentOptions::new(url("https://hub"), ClusterId::new("a", "b"), key);
        let shown = format!("{opts:?}");
        assert!(shown.contains("key_id"));
        assert!(!shown.contains(&secret));
    }
}
