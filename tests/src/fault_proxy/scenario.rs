//! The real `fleetpulse-hub serve` (embedded) and one real `fleetpulse-agent run` per
//! cluster, each agent reaching the hub through its own [`FaultProxy`]: the faulty-network
//! end-to-end test and the `soak` tool drive this.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::api::condition::{self, REACHABLE, Status};
use fleetpulse_common::protocol::keys;
use fleetpulse_common::protocol::report::ClusterId;

use super::FaultProxy;
use crate::fleet;
use crate::loadgen::client::{self, Transport};
use crate::loadgen::hub::{HubUnderTest, hub_binary};

/// Where the binaries are: `fleetpulse-agent` beside `fleetpulse-hub`.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// `fleetpulse-hub`.
    pub hub: PathBuf,
    /// `fleetpulse-agent`.
    pub agent: PathBuf,
}

impl Binaries {
    /// The binaries next to the running executable (or one directory up, for a test).
    pub fn beside_this_executable() -> anyhow::Result<Self> {
        let hub = hub_binary(None)?;
        let agent = hub.with_file_name(format!("fleetpulse-agent{}", std::env::consts::EXE_SUFFIX));
        anyhow::ensure!(
            agent.exists(),
            "{} is not built; build the workspace first (`cargo build --workspace`)",
            agent.display()
        );
        Ok(Self { hub, agent })
    }
}

/// A cluster's Reachable condition as the hub reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reachable {
    /// True, False or Unknown.
    pub status: Status,
    /// When it last changed (RFC 3339, seconds).
    pub since: String,
    /// The hub's message.
    pub message: String,
}

/// The hub, its agents and their proxies; everything stops when dropped.
pub struct FaultyFleet {
    hub: HubUnderTest,
    agents: Vec<Child>,
    proxies: Vec<FaultProxy>,
    ids: Vec<ClusterId>,
    client: reqwest::Client,
    _work: tempfile::TempDir,
}

impl FaultyFleet {
    /// Starts the hub with `clusters` MemberClusters at `interval` / `grace` seconds, and
    /// an agent per cluster through its own proxy; returns once every cluster is Reachable.
    pub async fn start(
        bins: &Binaries,
        clusters: usize,
        interval: u32,
        grace: u32,
    ) -> anyhow::Result<Self> {
        let work = tempfile::tempdir()?;
        let manifests = work.path().join("manifests");
        let sims = fleet::write_clusters(&manifests, clusters, interval, grace)?;
        let hub = HubUnderTest::start_embedded(&bins.hub, &manifests, work.path(), None, &[])?;
        let ca = work.path().join("hub-ca.pem");
        std::fs::write(&ca, &hub.ca_pem)?;
        let upstream = (std::net::Ipv4Addr::LOCALHOST, hub.url.port().unwrap_or(443)).into();
        let mut fleet = Self {
            client: client::client(&hub.ca_pem, Transport::Http2)?,
            hub,
            agents: Vec::new(),
            proxies: Vec::new(),
            ids: sims.iter().map(|s| s.id.clone()).collect(),
            _work: work,
        };
        for sim in &sims {
            let proxy = FaultProxy::start(upstream).await?;
            let key = fleet._work.path().join(format!("{}.pem", sim.id.name));
            std::fs::write(&key, keys::to_pem(&sim.key))?;
            let log =
                std::fs::File::create(fleet._work.path().join(format!("{}.log", sim.id.name)))?;
            let agent = Command::new(&bins.agent)
                .arg("run")
                .args([
                    "--hub",
                    &format!("https://localhost:{}", proxy.addr().port()),
                ])
                .args(["--cluster", &sim.id.to_string()])
                .arg("--key-file")
                .arg(&key)
                .arg("--hub-ca")
                .arg(&ca)
                .args(["--interval-seconds", &interval.to_string()])
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .env("NO_COLOR", "1")
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", bins.agent.display()))?;
            fleet.agents.push(agent);
            fleet.proxies.push(proxy);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let all = fleet.reachable_all().await;
            if all
                .as_ref()
                .is_some_and(|r| r.iter().all(|c| c.status == Status::True))
            {
                return Ok(fleet);
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "not every cluster became Reachable within 60 s: {all:?}{}",
                fleet.hub.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The cluster ids, in proxy order.
    pub fn ids(&self) -> &[ClusterId] {
        &self.ids
    }

    /// The proxy in front of cluster `i`'s agent.
    pub fn proxy(&self, i: usize) -> &FaultProxy {
        &self.proxies[i]
    }

    /// Every proxy.
    pub fn proxies(&self) -> &[FaultProxy] {
        &self.proxies
    }

    /// Each cluster's Reachable condition, in proxy order (`None` if the hub did not answer).
    pub async fn reachable_all(&self) -> Option<Vec<Reachable>> {
        let url = self
            .hub
            .admin_url
            .join("/v1/memberclusters?namespace=fleet")
            .ok()?;
        let response = self.client.get(url).send().await.ok()?;
        let list: serde_json::Value = response.json().await.ok()?;
        let items: Vec<MemberCluster> = serde_json::from_value(list["items"].clone()).ok()?;
        Some(self.ids.iter().map(|id| reachable_of(&items, id)).collect())
    }

    /// How many "became unreachable" verdicts the hub has logged.
    pub fn unreachable_verdicts(&self) -> usize {
        self.hub_log()
            .map(|log| {
                log.lines()
                    .filter(|l| l.contains("cluster became unreachable"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// The hub's log so far.
    pub fn hub_log(&self) -> Option<String> {
        self.hub
            .log
            .as_deref()
            .and_then(|p: &Path| std::fs::read_to_string(p).ok())
    }

    /// The end of the hub's log, for an error message.
    pub fn hub_log_tail(&self) -> String {
        self.hub.log_tail()
    }
}

impl Drop for FaultyFleet {
    fn drop(&mut self) {
        for agent in &mut self.agents {
            let _ = agent.kill();
            let _ = agent.wait();
        }
    }
}

fn reachable_of(items: &[MemberCluster], id: &ClusterId) -> Reachable {
    let found = items
        .iter()
        .find(|mc| {
            mc.metadata.name.as_deref() == Some(&id.name)
                && mc.metadata.namespace.as_deref() == Some(&id.namespace)
        })
        .and_then(|mc| mc.status.as_ref())
        .and_then(|s| condition::find(&s.conditions, REACHABLE));
    match found {
        Some(c) => Reachable {
            status: Status::parse(&c.status),
            since: c.last_transition_time.0.to_string(),
            message: c.message.clone(),
        },
        None => Reachable {
            status: Status::Unknown,
            since: String::new(),
            message: String::new(),
        },
    }
}
