//! [`HubOptions`]: how to run a hub, as `serve` parsed it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::admission::BatchSettings;
use crate::fleet::Settings;
use crate::kubernetes::leader::LeaderSettings;
use crate::mirrors::MirrorArgs;
use crate::server::{AdminOptions, ConnectionLimits};

/// How to run an embedded hub.
#[derive(Clone)]
pub struct HubOptions {
    /// Directory of manifests.
    pub manifests: PathBuf,
    /// Directory of the embedded store.
    pub data: PathBuf,
    /// Address to listen on.
    pub listen: SocketAddr,
    /// TLS certificate chain and key (PEM files); `None` only with `insecure_http`.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Serve plain HTTP (development only).
    pub insecure_http: bool,
    /// The admin listener (read API, `/metrics`) and who may read it; by default a free
    /// loopback port, open.
    pub admin: AdminOptions,
    /// What any one client may hold: connections, timeouts, HTTP/2 streams.
    pub limits: ConnectionLimits,
    /// What the decisions use: this hub's identity (`aud`), the freshness window, the
    /// debounce of `Healthy`, the partition and rollout brakes.
    pub decisions: Settings,
    /// How often the failure detector runs.
    pub tick: Duration,
    /// How often the manifest directory is rescanned.
    pub reload_interval: Duration,
    /// How often accepted positions are flushed to the store.
    pub position_flush_interval: Duration,
    /// Kubernetes mode: watch the CRDs and write status through this client (the
    /// manifest and data directories are then unused).
    pub kube: Option<kube::Client>,
    /// Kubernetes mode: take part in leader election; only the leader decides and writes.
    pub leader: Option<LeaderSettings>,
    /// Kubernetes mode: share the fleet with other replicas by shard Leases instead of
    /// leader election (which is then not used): each replica judges and writes the
    /// clusters of the shards it owns.
    pub shards: Option<crate::shards::ShardSettings>,
    /// Kubernetes mode: how often a reporting cluster's status is rewritten so that its
    /// `lastHeartbeatTime` (and check results) on the API stay that fresh; zero writes
    /// status on transitions only.
    pub status_refresh: Duration,
    /// How heartbeat signatures are batched (`None`: one `verify_strict` each).
    pub batch_verify: Option<BatchSettings>,
    /// Expose per-cluster condition gauges on `/metrics`.
    pub per_cluster_metrics: bool,
    /// How long an enrolled agent's previous key stays accepted after a rotation.
    pub key_overlap: Duration,
    /// Kubernetes mode: the namespace of the enrolment Secrets.
    pub enrolment_namespace: String,
    /// Kubernetes mode: the namespace of the hub-state ConfigMaps (accepted positions and
    /// last-heard times, for the next leader).
    pub state_namespace: String,
    /// Kubernetes mode: the kinds whose objects become MemberClusters.
    pub adopt: crate::adoption::AdoptArgs,
    /// Mirrors: hub-wide defaults and the resync interval.
    pub mirrors: MirrorArgs,
    /// The cluster mirror objects live on, from `--mirror-kubeconfig` (default: the
    /// Kubernetes mode's own cluster; an embedded hub without it only shows what it would
    /// write).
    pub mirror_client: Option<kube::Client>,
}

impl HubOptions {
    /// Defaults for everything but the directories and address.
    pub fn new(manifests: PathBuf, data: PathBuf, listen: SocketAddr) -> Self {
        Self {
            manifests,
            data,
            listen,
            tls: None,
            insecure_http: false,
            admin: AdminOptions::loopback(),
            limits: ConnectionLimits::default(),
            decisions: Settings::default(),
            tick: Duration::from_secs(1),
            reload_interval: Duration::from_secs(2),
            position_flush_interval: Duration::from_secs(10),
            kube: None,
            leader: None,
            shards: None,
            status_refresh: Duration::from_secs(300),
            batch_verify: Some(BatchSettings::default()),
            per_cluster_metrics: false,
            key_overlap: Duration::from_secs(600),
            enrolment_namespace: crate::enrolment::DEFAULT_NAMESPACE.into(),
            state_namespace: crate::enrolment::DEFAULT_NAMESPACE.into(),
            adopt: Default::default(),
            mirrors: MirrorArgs::default(),
            mirror_client: None,
        }
    }
}
