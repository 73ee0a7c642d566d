//! [`Scenario`]: an embedded hub on loopback HTTPS with simulated clusters and their agents,
//! all in one process, that a test (or the demo) drives like an operator would: stop an
//! agent, restart the hub, read conditions.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use std::sync::Arc;

use fleetpulse_agent::checks::engine::{CheckEngine, EngineOptions};
use fleetpulse_agent::checks::resources::Reader;
use fleetpulse_agent::{AgentHandle, AgentOptions, Url};
use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::api::condition::Status;
use fleetpulse_hub::mirrors::MirrorArgs;
use fleetpulse_hub::server::{Hub, HubOptions};
use tokio_util::sync::CancellationToken;

use crate::fleet::{self, SimCluster};
use crate::pki::Pki;

/// A running scenario. Dropping it stops everything (agents first, then the hub).
pub struct Scenario {
    /// Temporary directory holding manifests, data and PKI.
    pub dir: tempfile::TempDir,
    /// The PKI the hub serves with.
    pub pki: Pki,
    /// The simulated clusters, in order (`edge-1`, `edge-2`, ...).
    pub clusters: Vec<SimCluster>,
    /// The hub's base URL for agents (`https://localhost:PORT`).
    pub url: Url,
    /// The base URL of the hub's admin listener: the read API and `/metrics`.
    pub admin_url: Url,
    addr: SocketAddr,
    admin_addr: SocketAddr,
    hub: Option<Hub>,
    agents: BTreeMap<usize, AgentHandle>,
    interval: Duration,
    engines: CancellationToken,
    /// The cluster mirror objects live on, and the hub's mirror flags.
    mirrors: Option<(kube::Client, MirrorArgs)>,
    /// The admin token file the hub requires, if any.
    admin_token: Option<std::path::PathBuf>,
}

impl Scenario {
    /// Starts a hub with `count` clusters at the given timing; no agents yet.
    pub async fn start(
        count: usize,
        interval_secs: u32,
        grace_secs: u32,
    ) -> anyhow::Result<Scenario> {
        Self::start_with_mirrors(count, interval_secs, grace_secs, None).await
    }

    /// [`Scenario::start`], with the hub writing mirrors to `mirrors`' cluster as its
    /// flags say (what `--mirror-kubeconfig` and `--mirror-default` give a real hub).
    pub async fn start_with_mirrors(
        count: usize,
        interval_secs: u32,
        grace_secs: u32,
        mirrors: Option<(kube::Client, MirrorArgs)>,
    ) -> anyhow::Result<Scenario> {
        let dir = tempfile::tempdir()?;
        let pki = Pki::generate(dir.path())?;
        let clusters = fleet::write_clusters(
            &dir.path().join("manifests"),
            count,
            interval_secs,
            grace_secs,
        )?;
        let mut scenario = Scenario {
            url: "https://localhost:1".parse()?,
            admin_url: "https://localhost:1".parse()?,
            addr: "127.0.0.1:0".parse()?,
            admin_addr: "127.0.0.1:0".parse()?,
            dir,
            pki,
            clusters,
            hub: None,
            agents: BTreeMap::new(),
            interval: Duration::from_secs(interval_secs.into()),
            engines: CancellationToken::new(),
            mirrors,
            admin_token: None,
        };
        scenario.start_hub().await?;
        scenario.url = format!("https://localhost:{}", scenario.addr.port()).parse()?;
        scenario.admin_url = format!("https://localhost:{}", scenario.admin_addr.port()).parse()?;
        Ok(scenario)
    }

    /// Writes (or replaces) a manifest file in the hub's manifest directory; the hub picks
    /// it up on its next rescan.
    pub fn write_manifest(&self, file: &str, yaml: &str) -> anyhow::Result<()> {
        std::fs::write(self.dir.path().join("manifests").join(file), yaml)?;
        Ok(())
    }

    /// Makes the hub require `token` on its admin listener from its next start (as
    /// `--admin-token-file` does), even on loopback.
    pub fn require_admin_token(&mut self, token: &str) -> anyhow::Result<()> {
        let path = self.dir.path().join("admin.token");
        std::fs::write(&path, token)?;
        self.admin_token = Some(path);
        Ok(())
    }

    /// Options of the embedded hub (same data directory and addresses across restarts).
    pub fn hub_options(&self) -> HubOptions {
        let mut o = HubOptions::new(
            self.dir.path().join("manifests"),
            self.dir.path().join("data"),
            self.addr,
        );
        o.tls = Some((self.pki.server_cert.clone(), self.pki.server_key.clone()));
        o.admin.listen = self.admin_addr;
        o.admin.token_file.clone_from(&self.admin_token);
        if let Some((client, args)) = &self.mirrors {
            o.mirror_client = Some(client.clone());
            o.mirrors = args.clone();
        }
        o
    }

    /// Starts the hub (again) on the same address and data.
    pub async fn start_hub(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.hub.is_none(), "the hub is already running");
        let hub = Hub::start(self.hub_options()).await?;
        self.addr = hub.addr;
        self.admin_addr = hub.admin_addr;
        self.hub = Some(hub);
        Ok(())
    }

    /// Stops the hub gracefully (state persisted).
    pub async fn stop_hub(&mut self) {
        if let Some(hub) = self.hub.take() {
            hub.shutdown().await;
        }
    }

    /// The running hub.
    pub fn hub(&self) -> &Hub {
        self.hub.as_ref().expect("the hub is running")
    }

    /// Options for the agent of cluster `i` (0-based).
    pub fn agent_options(&self, i: usize) -> anyhow::Result<AgentOptions> {
        let c = &self.clusters[i];
        let mut o = AgentOptions::new(self.url.clone(), c.id.clone(), c.key.clone());
        o.hub_ca_pem = Some(std::fs::read(&self.pki.ca_cert)?);
        o.interval = self.interval;
        Ok(o)
    }

    /// Starts the agent of cluster `i` (with no checks of its own beyond the hub's config).
    pub fn start_agent(&mut self, i: usize) -> anyhow::Result<()> {
        let handle = fleetpulse_agent::spawn(self.agent_options(i)?)?;
        self.agents.insert(i, handle);
        Ok(())
    }

    /// Starts the agent of cluster `i` with a check engine reading the cluster through
    /// `reader` (a simulated API server, or objects in memory a test changes while it runs).
    pub fn start_agent_with_engine(&mut self, i: usize, reader: Reader) -> anyhow::Result<()> {
        let mut options = self.agent_options(i)?;
        let engine_options = EngineOptions {
            default_period: self.interval,
            ..Default::default()
        };
        let engine = CheckEngine::spawn(reader, engine_options, self.engines.child_token());
        options.checks = Arc::new(engine);
        let handle = fleetpulse_agent::spawn(options)?;
        self.agents.insert(i, handle);
        Ok(())
    }

    /// Stops the agent of cluster `i`.
    pub async fn stop_agent(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(handle) = self.agents.remove(&i) {
            handle.stop().await?;
        }
        Ok(())
    }

    /// The agent of cluster `i`, if running.
    pub fn agent(&self, i: usize) -> Option<&AgentHandle> {
        self.agents.get(&i)
    }

    /// Every MemberCluster with its live status, from the running hub.
    pub fn member_clusters(&self) -> Vec<MemberCluster> {
        self.hub().fleet.member_clusters()
    }

    /// Condition `type_` of cluster `i` on the running hub.
    pub fn condition(&self, i: usize, type_: &str) -> Status {
        fleet::condition_of(&self.member_clusters(), &self.clusters[i].id, type_)
    }

    /// Stops every agent, then the hub.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        let agents = std::mem::take(&mut self.agents);
        for (_, a) in agents {
            a.stop().await?;
        }
        self.engines.cancel();
        self.stop_hub().await;
        Ok(())
    }
}
