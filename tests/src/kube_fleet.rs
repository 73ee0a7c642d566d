//! [`KubeFleet`]: multi-cluster runs of the real binaries against simulated clusters. One
//! in-process [`KubeSim`] is the management cluster and one more serves each member
//! cluster; each listens on a loopback socket and has a kubeconfig file, so the real
//! `fleetpulse-hub serve --kube` and one `fleetpulse-agent run` per member talk to them over
//! HTTP like they would to real API servers (agent to hub over HTTPS with a test CA), while
//! the test injects faults straight into the simulators (nodes, pod outcomes, objects),
//! freezes or kills processes, and counts the hub's writes to the management API.
//!
//! - `kube_fleet/objects.rs`: the objects a run starts from.
//! - `kube_fleet/processes.rs`: starting, stopping, freezing and killing the hub and agents.
//! - `kube_fleet/observe.rs`: reading what the hub wrote, its metrics, and Events.
//! - `kube_fleet/replicas.rs`: several hub replicas with leader election behind a Service
//!   stand-in.
//! - `kube_fleet/shards.rs`: several hub replicas sharing the fleet through shard Leases.

pub mod objects;
pub mod observe;
mod processes;
mod replicas;
mod shards;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use fleetpulse_kubesim::{KubeSim, kubeconfig};
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::pki::Pki;
use crate::process::Running;
use crate::service::ReadyProxy;

/// Namespace of the MemberClusters (and the HealthPolicy) on the management cluster.
pub const NAMESPACE: &str = "fleet";
/// Name of the ClusterSet (maxReplicas 1, selecting every member).
pub const CLUSTER_SET: &str = "primary";

/// What to run.
#[derive(Clone, Debug)]
pub struct FleetSpec {
    /// Member clusters, named `m1`, `m2`, ... (the ClusterSet prefers them in that order).
    pub members: usize,
    /// Heartbeat interval in seconds (MemberCluster spec and the agents' flag).
    pub interval_secs: u32,
    /// Grace period in seconds before a silent cluster is unreachable.
    pub grace_secs: u32,
    /// Liveness checks of a HealthPolicy applying to every member (none: no policy).
    pub liveness_checks: Vec<Value>,
    /// Extra `fleetpulse-hub serve` flags, e.g. `--healthy-after-reports 3`. The default
    /// turns the coarse `lastHeartbeatTime` refresh off (`--status-refresh-seconds 0`), so
    /// the hub writes on transitions only and a quiet period is exactly quiet; remove it to
    /// test the refresh.
    pub hub_args: Vec<String>,
    /// Adoption and enrolment: the members are SveltosClusters (label `region: eu`) that
    /// the hub adopts (`--adopt sveltoscluster`); no MemberCluster and no agent key is
    /// installed, and agents enrol with bootstrap tokens ([`KubeFleet::enrol_agent`]).
    pub adopt: bool,
}

impl Default for FleetSpec {
    /// Three members, 1 s heartbeats, 4 s grace, no checks beyond the built-in `/readyz`,
    /// status written on transitions only.
    fn default() -> Self {
        Self {
            members: 3,
            interval_secs: 1,
            grace_secs: 4,
            liveness_checks: Vec::new(),
            hub_args: vec!["--status-refresh-seconds".into(), "0".into()],
            adopt: false,
        }
    }
}

impl FleetSpec {
    /// `members` members with a `grace_secs` grace period, for hub replicas taking turns
    /// or sharing the fleet: status on transitions only, and the hub state flushed every
    /// 2 s, so a killed replica's successor finds what it accepted up to 2 s before.
    pub fn for_replicas(members: usize, grace_secs: u32) -> Self {
        let flush = ["--seq-flush-seconds".to_owned(), "2".to_owned()];
        let mut spec = Self {
            members,
            grace_secs,
            ..Self::default()
        };
        spec.hub_args.extend(flush);
        spec
    }
}

/// A simulated cluster served on loopback.
pub struct SimCluster {
    /// The simulator: inject faults and read objects through it.
    pub sim: KubeSim,
    /// Kubeconfig file pointing at the served simulator.
    pub kubeconfig: PathBuf,
    server: JoinHandle<()>,
}

impl SimCluster {
    async fn serve(sim: KubeSim, kubeconfig_path: PathBuf) -> anyhow::Result<SimCluster> {
        let (addr, server) = sim.serve("127.0.0.1:0".parse()?).await?;
        std::fs::write(&kubeconfig_path, kubeconfig(&format!("http://{addr}")))?;
        Ok(SimCluster {
            sim,
            kubeconfig: kubeconfig_path,
            server,
        })
    }

    /// A client to the simulator, in process.
    pub fn client(&self) -> kube::Client {
        self.sim.client()
    }
}

/// One member cluster and its agent.
pub struct Member {
    /// The MemberCluster's name (in [`NAMESPACE`]).
    pub name: String,
    /// The simulated member cluster.
    pub cluster: SimCluster,
    agent: Option<Running>,
}

/// A running fleet. Dropping it kills the processes and stops the simulators.
pub struct KubeFleet {
    /// Temporary directory holding kubeconfigs and PKI.
    pub dir: tempfile::TempDir,
    /// The CA and the hub's certificate.
    pub pki: Pki,
    /// What was asked for.
    pub spec: FleetSpec,
    /// The management cluster, where the hub's CRs live.
    pub mgmt: SimCluster,
    /// The member clusters, in name order.
    pub members: Vec<Member>,
    /// Each member's agent key (none for adopted members, which enrol), for tests that
    /// drive agents by hand.
    pub keys: Vec<(String, ed25519_dalek::SigningKey)>,
    hub: Option<Running>,
    hub_addr: Option<SocketAddr>,
    /// Hub replicas (with leader election, or sharded), by identity: address and process.
    replicas: BTreeMap<String, (SocketAddr, Option<Running>)>,
    /// The shard count of sharded replicas (0: not sharded).
    shards: u32,
    /// The admin listener (read API, `/metrics`) of the single hub (`hub`) and of each
    /// replica, by identity.
    admin_addrs: BTreeMap<String, SocketAddr>,
    /// The Service stand-in in front of the replicas; agents use it when set.
    service: Option<ReadyProxy>,
    /// Management API writes made before the hub first started (the test's own setup).
    baseline: BTreeMap<(String, String), u64>,
    http: reqwest::Client,
}

impl KubeFleet {
    /// Creates the simulators, serves them, and installs every object; starts no process.
    pub async fn prepare(spec: FleetSpec) -> anyhow::Result<KubeFleet> {
        let dir = tempfile::tempdir()?;
        let mut pki = Pki::generate(dir.path())?;
        if spec.adopt {
            // The hub serves its CA after its own certificate, so enrolling agents pin it.
            let chain = dir.path().join("hub-chain.pem");
            let pem = std::fs::read_to_string(&pki.server_cert)?
                + &std::fs::read_to_string(&pki.ca_cert)?;
            std::fs::write(&chain, pem)?;
            pki.server_cert = chain;
        }
        let mgmt = SimCluster::serve(KubeSim::new(), dir.path().join("mgmt.kubeconfig")).await?;
        let mut members = Vec::new();
        let mut keys = Vec::new();
        for i in 1..=spec.members {
            let name = format!("m{i}");
            let path = dir.path().join(format!("{name}.kubeconfig"));
            let cluster = SimCluster::serve(KubeSim::new(), path).await?;
            if spec.adopt {
                objects::namespace(&cluster.client(), objects::AGENT_NAMESPACE).await?;
            } else {
                let key = fleetpulse_common::protocol::keys::generate();
                objects::install_agent_key(&cluster.client(), &key).await?;
                keys.push((name.clone(), key));
            }
            members.push(Member {
                name,
                cluster,
                agent: None,
            });
        }
        objects::install_hub_objects(&mgmt.client(), &spec, &keys).await?;
        if spec.adopt {
            let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
            objects::install_adopted(&mgmt.client(), &names).await?;
        }
        let tls = fleetpulse_agent::tls::client_config(Some(&std::fs::read(&pki.ca_cert)?))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(Duration::from_secs(5))
            .build()?;
        Ok(KubeFleet {
            baseline: mgmt.sim.writes(),
            keys,
            dir,
            pki,
            spec,
            mgmt,
            members,
            hub: None,
            hub_addr: None,
            replicas: BTreeMap::new(),
            shards: 0,
            admin_addrs: BTreeMap::new(),
            service: None,
            http,
        })
    }

    /// Starts the hub, then every agent.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        self.start_hub().await?;
        for i in 0..self.members.len() {
            self.start_agent(i)?;
        }
        Ok(())
    }

    /// [`KubeFleet::prepare`], then [`KubeFleet::start`].
    pub async fn launch(spec: FleetSpec) -> anyhow::Result<KubeFleet> {
        let mut fleet = Self::prepare(spec).await?;
        fleet.start().await?;
        Ok(fleet)
    }

    /// The hub's base URL (`https://127.0.0.1:PORT`), once it has started.
    /// With replicas, the URL of the Service stand-in in front of them.
    pub fn hub_url(&self) -> anyhow::Result<String> {
        let addr = (self.service.as_ref().map(|s| s.addr))
            .or(self.hub_addr)
            .ok_or_else(|| anyhow::anyhow!("the hub has not started"))?;
        Ok(format!("https://{addr}"))
    }

    /// The admin listener's base URL of the hub, or with replicas of the one that leads.
    pub async fn admin_url(&self) -> anyhow::Result<String> {
        let id = match self.replicas.is_empty() {
            true => "hub".to_owned(),
            false => (self.leader().await).ok_or_else(|| anyhow::anyhow!("no replica leads"))?,
        };
        let addr = self
            .admin_addrs
            .get(&id)
            .ok_or_else(|| anyhow::anyhow!("{id} has not started"))?;
        Ok(format!("https://{addr}"))
    }

    /// An HTTPS client trusting the hub's CA, as an agent's (for agents driven by hand).
    pub fn agent_http(&self) -> reqwest::Client {
        self.http.clone()
    }

    /// Index of the member named `name`.
    pub fn index(&self, name: &str) -> anyhow::Result<usize> {
        self.members
            .iter()
            .position(|m| m.name == name)
            .ok_or_else(|| anyhow::anyhow!("no member {name}"))
    }
}

impl Drop for KubeFleet {
    fn drop(&mut self) {
        for member in &mut self.members {
            drop(member.agent.take());
            member.cluster.server.abort();
        }
        drop(self.hub.take());
        self.replicas.clear();
        self.mgmt.server.abort();
    }
}
