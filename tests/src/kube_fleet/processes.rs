//! Process control of a [`KubeFleet`]: the real `fleetpulse-hub serve --kube` and one
//! `fleetpulse-agent run` per member, started, stopped gracefully, frozen (SIGSTOP), resumed
//! (SIGCONT) or killed (SIGKILL) like pods and nodes are in real life.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{KubeFleet, NAMESPACE};
use crate::process::Running;
use crate::wait;

impl KubeFleet {
    /// Starts `fleetpulse-hub serve --kube` and waits until it serves. The first start
    /// listens on port 0 and reads the bound address from the hub's log (no port race);
    /// later starts reuse that address so the agents find the hub again.
    pub async fn start_hub(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.hub.is_none(), "the hub is already running");
        let args = self.hub_args(self.hub_addr, &[]);
        let (hub, addr, admin) = spawn_hub("hub", &args, "hub serving").await?;
        self.hub_addr = Some(addr);
        self.admin_addrs.insert("hub".into(), admin);
        self.hub = Some(hub);
        Ok(())
    }

    /// `fleetpulse-hub serve --kube` arguments against the management simulator, listening
    /// on `addr` (a free port if none), with `extra` flags and the spec's.
    pub(super) fn hub_args(&self, addr: Option<SocketAddr>, extra: &[String]) -> Vec<String> {
        let listen = addr.map_or_else(|| "127.0.0.1:0".to_owned(), |a| a.to_string());
        let path = |p: &PathBuf| p.display().to_string();
        let mut args = vec![
            "serve".to_owned(),
            "--kube".into(),
            "--kubeconfig".into(),
            path(&self.mgmt.kubeconfig),
            "--listen".into(),
            listen,
            "--admin-listen".into(),
            "127.0.0.1:0".into(),
            "--tls-cert".into(),
            path(&self.pki.server_cert),
            "--tls-key".into(),
            path(&self.pki.server_key),
        ];
        args.extend(extra.iter().cloned());
        args.extend(self.spec.hub_args.iter().cloned());
        args
    }

    /// Stops the hub with SIGTERM (a graceful shutdown); returns whether it exited cleanly.
    pub fn stop_hub(&mut self) -> anyhow::Result<bool> {
        let mut hub = self
            .hub
            .take()
            .ok_or_else(|| anyhow::anyhow!("the hub is not running"))?;
        // The hub's last writes go to the management simulator, served by this runtime.
        tokio::task::block_in_place(|| hub.terminate(Duration::from_secs(20)))
    }

    /// Kills the hub with SIGKILL (a crash: nothing is flushed).
    pub fn kill_hub(&mut self) {
        drop(self.hub.take());
    }

    /// Restarts the hub gracefully on the same address.
    pub async fn restart_hub(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.stop_hub()?, "the hub did not exit cleanly on SIGTERM");
        self.start_hub().await
    }

    /// Starts the agent of member `i` (index into [`KubeFleet::members`]): the real
    /// `fleetpulse-agent run` against the member's API (key from its Secret there).
    pub fn start_agent(&mut self, i: usize) -> anyhow::Result<()> {
        let ca = self.pki.ca_cert.display().to_string();
        self.start_agent_with(i, &["--hub-ca", &ca])
    }

    /// Starts the agent of member `i` with a bootstrap token and the hub CA hash it pins
    /// (instead of the CA file): it generates its key, keeps it in its Secret in the member
    /// cluster, and enrols.
    pub fn enrol_agent(&mut self, i: usize, token: &str, ca_hash: &str) -> anyhow::Result<()> {
        self.start_agent_with(i, &["--bootstrap-token", token, "--hub-ca-hash", ca_hash])
    }

    /// `fleetpulse-hub` enrolment commands (`token`, `approve`, `key`) against the
    /// management simulator (`--kube`); returns what it printed.
    pub fn hub_cli(&self, args: &[&str]) -> anyhow::Result<String> {
        let kubeconfig = self.mgmt.kubeconfig.display().to_string();
        let mut all = args.to_vec();
        all.extend(["--kube", "--kubeconfig", &kubeconfig]);
        let out = tokio::task::block_in_place(|| crate::process::run("fleetpulse-hub", &all))?;
        Ok(String::from_utf8(out.stdout)?)
    }

    /// `fleetpulse-hub token create --for CLUSTER` (with the hub's chain, so the CA hash is
    /// printed) and `extra` flags; returns the token and the CA hash.
    pub fn create_token(&self, cluster: &str, extra: &[&str]) -> anyhow::Result<(String, String)> {
        let chain = self.pki.server_cert.display().to_string();
        let mut args = vec!["token", "create", "--for", cluster, "--tls-cert", &chain];
        args.extend_from_slice(extra);
        crate::process::token_and_ca_hash(&self.hub_cli(&args)?)
    }

    fn start_agent_with(&mut self, i: usize, extra: &[&str]) -> anyhow::Result<()> {
        let hub = self.hub_url()?;
        let interval = self.spec.interval_secs.to_string();
        let member = &mut self.members[i];
        anyhow::ensure!(member.agent.is_none(), "{} already runs", member.name);
        let cluster = format!("{NAMESPACE}/{}", member.name);
        let kubeconfig = member.cluster.kubeconfig.display().to_string();
        let mut args = vec![
            "run",
            "--hub",
            &hub,
            "--cluster",
            &cluster,
            "--kubeconfig",
            &kubeconfig,
            "--interval-seconds",
            &interval,
        ];
        args.extend_from_slice(extra);
        let label = format!("agent {}", member.name);
        member.agent = Some(Running::spawn_logged("fleetpulse-agent", &label, &args)?);
        Ok(())
    }

    fn agent(&self, i: usize) -> anyhow::Result<&Running> {
        let member = &self.members[i];
        member
            .agent
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the agent of {} is not running", member.name))
    }

    /// Kills member `i`'s agent with SIGKILL (a crashed pod or a lost node).
    pub fn kill_agent(&mut self, i: usize) -> anyhow::Result<()> {
        self.agent(i)?;
        drop(self.members[i].agent.take());
        Ok(())
    }

    /// Freezes member `i`'s agent with SIGSTOP: it sends nothing, as if cut off.
    pub fn pause_agent(&self, i: usize) -> anyhow::Result<()> {
        self.agent(i)?.signal("STOP")
    }

    /// Resumes a frozen agent with SIGCONT.
    pub fn resume_agent(&self, i: usize) -> anyhow::Result<()> {
        self.agent(i)?.signal("CONT")
    }
}

/// Starts `fleetpulse-hub` with `args` (its log lines prefixed with `label` in the test's
/// output) and waits until it logs `needle` with its address (`addr=`, port 0 resolved);
/// returns it with that address and its admin listener's.
pub(super) async fn spawn_hub(
    label: &str,
    args: &[String],
    needle: &str,
) -> anyhow::Result<(Running, SocketAddr, SocketAddr)> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut hub = Running::spawn_logged("fleetpulse-hub", label, &args)?;
    let mut exited = None;
    wait::until(
        &format!("{label} to log {needle:?}"),
        Duration::from_secs(30),
        || {
            exited = hub.exited();
            exited.is_some() || hub.log_line(needle).is_some()
        },
    )
    .await?;
    if let Some(status) = exited {
        anyhow::bail!("{label} exited with {status} before logging {needle:?} (its log is above)");
    }
    let addr = hub.logged_addr(needle).ok_or_else(|| {
        anyhow::anyhow!("no addr= in {label}'s log line {:?}", hub.log_line(needle))
    })?;
    let admin = hub
        .logged_addr(crate::embedded_hub::ADMIN_LINE)
        .ok_or_else(|| anyhow::anyhow!("{label} logged no admin address"))?;
    Ok((hub, addr, admin))
}
