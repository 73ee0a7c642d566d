//! The real `fleetpulse-hub serve` in embedded mode as a child process on loopback HTTPS,
//! and its read API through the real `fleetpulse-hub get`.

use std::path::Path;
use std::time::Duration;

use fleetpulse_common::api::MemberCluster;

use crate::pki::Pki;
use crate::process::{self, Running};
use crate::wait::blocking_until;

/// What the hub logs, with `addr=`, once its admin listener is bound.
pub const ADMIN_LINE: &str = "admin API";

/// A running embedded hub.
pub struct EmbeddedHub {
    /// The process (its stderr is captured).
    pub process: Running,
    /// `https://localhost:PORT`: the agents' listener.
    pub server: String,
    /// `https://localhost:PORT`: the admin listener (read API, `/metrics`).
    pub admin: String,
    /// The CA that signed its certificate, for `--ca` / `--hub-ca`.
    pub ca: String,
}

impl EmbeddedHub {
    /// Starts `serve` over `manifests` with state in `data`, both listeners on port 0 (no
    /// port race), and waits until it listens. `extra` flags are appended (a `--listen` or
    /// `--admin-listen` there replaces the free loopback port, e.g. to restart a hub where
    /// its agents look for it).
    pub fn spawn(
        manifests: &Path,
        data: &Path,
        pki: &Pki,
        extra: &[&str],
    ) -> anyhow::Result<EmbeddedHub> {
        let (manifests, data) = (manifests.display().to_string(), data.display().to_string());
        let (cert, key) = (
            pki.server_cert.display().to_string(),
            pki.server_key.display().to_string(),
        );
        let mut args = vec![
            "serve",
            "--manifests",
            &manifests,
            "--data",
            &data,
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ];
        if !extra.contains(&"--listen") {
            args.extend(["--listen", "127.0.0.1:0"]);
        }
        if !extra.contains(&"--admin-listen") {
            args.extend(["--admin-listen", "127.0.0.1:0"]);
        }
        args.extend_from_slice(extra);
        let mut process = Running::spawn_logged("fleetpulse-hub", "hub", &args)?;
        let mut addr = None;
        blocking_until("the hub to listen", Duration::from_secs(20), || {
            addr = process.logged_addr("listening");
            addr.is_some() || process.exited().is_some()
        })?;
        let port = addr
            .ok_or_else(|| anyhow::anyhow!("the hub exited before listening (its log is above)"))?
            .port();
        let admin = process
            .logged_addr(ADMIN_LINE)
            .ok_or_else(|| anyhow::anyhow!("the hub logged no admin address"))?
            .port();
        Ok(EmbeddedHub {
            process,
            server: format!("https://localhost:{port}"),
            admin: format!("https://localhost:{admin}"),
            ca: pki.ca_cert.display().to_string(),
        })
    }

    /// Starts the real `fleetpulse-agent run` for `cluster` (`NAMESPACE/NAME`) against this
    /// hub, trusting its CA, signing with `key_file`, reporting every second; its log is
    /// captured under `label`.
    pub fn agent(&self, label: &str, cluster: &str, key_file: &Path) -> anyhow::Result<Running> {
        let key = key_file.display().to_string();
        Running::spawn_logged(
            "fleetpulse-agent",
            label,
            &[
                "run",
                "--hub",
                &self.server,
                "--cluster",
                cluster,
                "--key-file",
                &key,
                "--hub-ca",
                &self.ca,
                "--interval-seconds",
                "1",
            ],
        )
    }

    /// Waits until the hub has restored its state and serves agents (it listens before
    /// that): its read API, installed after the agents' routes, lists `clusters`
    /// MemberClusters.
    pub fn wait_serving(&self, clusters: usize, timeout: Duration) -> anyhow::Result<()> {
        blocking_until("the hub to load its state", timeout, || {
            self.clusters().is_some_and(|c| c.len() == clusters)
        })?;
        Ok(())
    }

    /// The MemberClusters as `fleetpulse-hub get memberclusters -o json` prints them (from
    /// the admin listener), or `None` while the hub does not serve its read API.
    pub fn clusters(&self) -> Option<Vec<MemberCluster>> {
        let args = [
            "get",
            "memberclusters",
            "-o",
            "json",
            "--server",
            &self.admin,
            "--ca",
            &self.ca,
        ];
        let out = process::run("fleetpulse-hub", &args).ok()?;
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        serde_json::from_value(list["items"].clone()).ok()
    }
}
