//! The agent processes of a real-agent run: started with a key file each and `--listen` on
//! a loopback port (read back from the `listening` line of each one's log), scraped
//! together, stopped with SIGTERM, and killed if still running when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fleetpulse_common::protocol::keys;

use crate::fleet::SimCluster;
use crate::loadgen::client::{self, Transport};
use crate::loadgen::histogram::{Buckets, counter};
use crate::loadgen::hub::{self, HubUnderTest};

/// The agents' round-trip histogram family.
const FAMILY: &str = "fleetpulse_agent_heartbeat_duration_seconds";

/// One `fleetpulse-agent run`.
struct Agent {
    cluster: String,
    child: Child,
    log: PathBuf,
    /// `http://addr/metrics`, once the agent logged where it listens.
    metrics: Option<reqwest::Url>,
}

impl Agent {
    /// The agent's log, last lines, for an error message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(10)..].join("\n");
        format!("; the agent of {}'s log ends with:\n{tail}", self.cluster)
    }

    /// An error if the process has exited.
    fn alive(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait()? {
            Some(status) => anyhow::bail!(
                "the agent of {} exited with {status}{}",
                self.cluster,
                self.log_tail()
            ),
            None => Ok(()),
        }
    }
}

/// What the agents' metrics said at one moment, summed over the agents.
#[derive(Debug, Default)]
pub struct Scrape {
    /// The round-trip histograms, merged.
    pub buckets: Buckets,
    /// `fleetpulse_agent_heartbeats_sent_total`.
    pub sent: u64,
    /// `fleetpulse_agent_heartbeats_failed_total`, every reason.
    pub failed: u64,
    /// The agent processes' CPU time (user + system), in seconds.
    pub cpu_secs: f64,
}

/// The running agents.
pub struct Agents {
    agents: Vec<Agent>,
    http: reqwest::Client,
    ticks: f64,
}

impl Agents {
    /// Starts `bin run` for each of `clusters` against `hub` at `interval` seconds, keys
    /// and logs under `work`.
    pub fn start(
        bin: &Path,
        clusters: &[SimCluster],
        hub: &HubUnderTest,
        audience: &str,
        interval: u32,
        work: &Path,
    ) -> anyhow::Result<Self> {
        let ca = work.join("hub-ca.pem");
        std::fs::write(&ca, &hub.ca_pem)?;
        // Built first, so the agents started before a failure are killed when it drops.
        let mut this = Self {
            agents: Vec::with_capacity(clusters.len()),
            // Plain HTTP to the agents; the client is built the loadgen way (its TLS
            // settings go unused).
            http: client::client(&hub.ca_pem, Transport::Http1)?,
            ticks: hub::ticks_per_second(),
        };
        for sim in clusters {
            let key = work.join(format!("{}.pem", sim.id.name));
            std::fs::write(&key, keys::to_pem(&sim.key))?;
            let log = work.join(format!("agent-{}.log", sim.id.name));
            let out = std::fs::File::create(&log)?;
            let child = Command::new(bin)
                .arg("run")
                .args(["--hub", hub.url.as_str(), "--cluster", &sim.id.to_string()])
                .arg("--key-file")
                .arg(&key)
                .arg("--hub-ca")
                .arg(&ca)
                .args(["--audience", audience])
                .args(["--interval-seconds", &interval.to_string()])
                .args(["--listen", "127.0.0.1:0"])
                .stdin(Stdio::null())
                .stdout(out.try_clone()?)
                .stderr(out)
                .env("NO_COLOR", "1")
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", bin.display()))?;
            this.agents.push(Agent {
                cluster: sim.id.to_string(),
                child,
                log,
                metrics: None,
            });
        }
        Ok(this)
    }

    /// Waits until every agent listens and has had `rounds` heartbeats accepted (by its own
    /// histogram), up to `timeout`; returns how long that took.
    pub async fn warm_up(&mut self, rounds: u64, timeout: Duration) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let accepted = format!("{FAMILY}_count");
        loop {
            let mut waiting = None;
            for agent in &mut self.agents {
                agent.alive()?;
                if agent.metrics.is_none() {
                    let text = std::fs::read_to_string(&agent.log).unwrap_or_default();
                    agent.metrics = text
                        .lines()
                        .filter(|l| l.contains("listening: /healthz"))
                        .find_map(crate::process::addr_field)
                        .and_then(|addr| format!("http://{addr}/metrics").parse().ok());
                }
                let text = match &agent.metrics {
                    Some(url) => get_text(&self.http, url).await.ok(),
                    None => None,
                };
                let done =
                    text.is_some_and(|t| counter(&t, &accepted, "outcome=\"accepted\"") >= rounds);
                if !done {
                    waiting = Some(agent.cluster.clone());
                    break;
                }
            }
            let Some(cluster) = waiting else {
                return Ok(start.elapsed());
            };
            if start.elapsed() > timeout {
                let tail = self
                    .agents
                    .iter()
                    .find(|a| a.cluster == cluster)
                    .map(Agent::log_tail)
                    .unwrap_or_default();
                anyhow::bail!(
                    "the agent of {cluster} did not have {rounds} heartbeats accepted within \
                     {timeout:?}{tail}"
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Scrapes every agent's `/metrics`; an agent that exited or does not answer is an
    /// error naming it.
    pub async fn scrape(&mut self) -> anyhow::Result<Scrape> {
        let mut all = Scrape::default();
        for agent in &mut self.agents {
            agent.alive()?;
            let url = agent
                .metrics
                .clone()
                .ok_or_else(|| anyhow::anyhow!("the agent of {} never listened", agent.cluster))?;
            let text = get_text(&self.http, &url).await.map_err(|e| {
                anyhow::anyhow!(
                    "cannot scrape the agent of {}: {e}{}",
                    agent.cluster,
                    agent.log_tail()
                )
            })?;
            all.buckets.merge(&Buckets::parse(&text, FAMILY));
            all.sent += counter(&text, "fleetpulse_agent_heartbeats_sent_total", "");
            all.failed += counter(&text, "fleetpulse_agent_heartbeats_failed_total", "");
            all.cpu_secs += hub::sample(agent.child.id(), self.ticks).map_or(0.0, |s| s.cpu_secs);
        }
        Ok(all)
    }

    /// Stops every agent with SIGTERM, each given 10 s (the rest is killed on drop).
    pub fn stop(&mut self) {
        for agent in &mut self.agents {
            let _ = crate::process::terminate_child(
                &mut agent.child,
                &format!("the agent of {}", agent.cluster),
                Duration::from_secs(10),
            );
        }
    }
}

/// The body of a GET of `url`, an error status being an error.
async fn get_text(http: &reqwest::Client, url: &reqwest::Url) -> reqwest::Result<String> {
    http.get(url.clone())
        .send()
        .await?
        .error_for_status()?
        .text()
        .await
}

impl Drop for Agents {
    fn drop(&mut self) {
        for agent in &mut self.agents {
            let _ = agent.child.kill();
            let _ = agent.child.wait();
        }
    }
}
