//! The hub under load: a `fleetpulse-hub serve` child process in embedded mode (HTTPS with
//! a throwaway PKI, manifests and data in a work directory), or a hub that is already
//! running at a URL. Its CPU time and memory are read from `/proc/<pid>`.

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::pki::Pki;

/// A hub the load generator talks to.
pub struct HubUnderTest {
    /// Base URL of the agents' listener, e.g. `https://localhost:8443`.
    pub url: reqwest::Url,
    /// Base URL of the admin listener (read API), e.g. `https://localhost:9443`.
    pub admin_url: reqwest::Url,
    /// PEM of the CA that signed the hub's certificate.
    pub ca_pem: Vec<u8>,
    /// The hub's process id, when known (started here, or `--hub-pid`).
    pub pid: Option<u32>,
    /// The hub's log file, when started here.
    pub log: Option<PathBuf>,
    child: Option<Child>,
}

/// Where `fleetpulse-hub` is: `explicit`, else next to this executable, else one directory
/// up (a test executable lives in `target/<profile>/deps`).
pub fn hub_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    binary_beside("fleetpulse-hub", explicit, "--hub-bin")
}

/// Where the workspace binary `name` is: `explicit`, else next to this executable, else one
/// directory up; the error names the build command and `flag` to pass instead.
pub fn binary_beside(name: &str, explicit: Option<&Path>, flag: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_owned());
    }
    crate::process::binary(name).map_err(|e| {
        anyhow::anyhow!("{e}; for a load run, `cargo build --release -p {name}`, or pass {flag}")
    })
}

impl HubUnderTest {
    /// Starts `bin serve` over HTTPS on a free loopback port with the manifests in
    /// `manifests`, its store and PKI under `work`, logging to `work/hub.log`; only on
    /// `cpus` (a `taskset` list) when given; `extra` are more flags for `serve`.
    pub fn start_embedded(
        bin: &Path,
        manifests: &Path,
        work: &Path,
        cpus: Option<&str>,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        let pki = Pki::generate(work)?;
        let log = work.join("hub.log");
        let data = work.join("data");
        let out = File::create(&log)?;
        // `taskset` execs the hub, so the child's pid is the hub's.
        let mut command = match cpus {
            Some(list) => {
                let mut c = Command::new("taskset");
                c.args(["-c", list]).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        command
            .arg("serve")
            .arg("--manifests")
            .arg(manifests)
            .arg("--data")
            .arg(&data)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .arg("--tls-cert")
            .arg(&pki.server_cert)
            .arg("--tls-key")
            .arg(&pki.server_key)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .env("NO_COLOR", "1");
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "info");
        }
        let child = command
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", bin.display()))?;
        let mut hub = Self {
            url: "https://localhost/".parse()?,
            admin_url: "https://localhost/".parse()?,
            ca_pem: std::fs::read(&pki.ca_cert)?,
            pid: Some(child.id()),
            log: Some(log),
            child: Some(child),
        };
        let port = hub.logged_port("listening", Duration::from_secs(30))?;
        hub.url = format!("https://localhost:{port}").parse()?;
        let admin = hub.logged_port(crate::embedded_hub::ADMIN_LINE, Duration::from_secs(30))?;
        hub.admin_url = format!("https://localhost:{admin}").parse()?;
        Ok(hub)
    }

    /// The port the hub bound (it listens on port 0 and logs `listening addr=...`, or
    /// `admin API ... addr=...`, so there is no race for a free port), waiting for the line
    /// containing `needle` up to `timeout`.
    fn logged_port(&mut self, needle: &str, timeout: Duration) -> anyhow::Result<u16> {
        let start = Instant::now();
        loop {
            let log = self.log.as_ref().map(std::fs::read_to_string);
            if let Some(Ok(text)) = log
                && let Some(addr) = text
                    .lines()
                    .filter(|l| l.contains(needle))
                    .find_map(crate::process::addr_field)
            {
                return Ok(addr.port());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                anyhow::bail!(
                    "the hub exited with {status} before listening{}",
                    self.log_tail()
                );
            }
            anyhow::ensure!(
                start.elapsed() < timeout,
                "the hub did not log where it listens within {timeout:?}{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A hub that is already running.
    pub fn external(
        url: reqwest::Url,
        admin_url: reqwest::Url,
        ca: &Path,
        pid: Option<u32>,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            url,
            admin_url,
            ca_pem: std::fs::read(ca)
                .map_err(|e| anyhow::anyhow!("cannot read --ca {}: {e}", ca.display()))?,
            pid,
            log: None,
            child: None,
        })
    }

    /// Waits until the hub answers `/readyz` with 200 and lists a MemberCluster in
    /// namespace `fleet` for every one of `public_keys`; returns how long that took.
    pub async fn wait_ready(
        &mut self,
        client: &reqwest::Client,
        public_keys: &HashSet<String>,
        timeout: Duration,
    ) -> anyhow::Result<Duration> {
        let clusters = public_keys.len();
        let start = Instant::now();
        let readyz = self.url.join("/readyz")?;
        let list = self.admin_url.join("/v1/memberclusters?namespace=fleet")?;
        let mut ready = false;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                anyhow::bail!(
                    "the hub exited with {status} while starting{}",
                    self.log_tail()
                );
            }
            if !ready {
                ready = client
                    .get(readyz.clone())
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
            }
            if ready && listed(client, &list, public_keys).await >= clusters {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                anyhow::bail!(
                    "the hub at {} did not become ready with {clusters} MemberClusters within \
                     {timeout:?}{}",
                    self.url,
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last lines of the hub's log, for an error message.
    pub fn log_tail(&self) -> String {
        let Some(text) = self
            .log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
        else {
            return String::new();
        };
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        format!("; the hub's log ends with:\n{tail}")
    }

    /// Stops a hub started here: SIGTERM (state is persisted), then a kill after 10 s.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if crate::process::terminate_child(&mut child, "the hub", Duration::from_secs(10)).is_err()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for HubUnderTest {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How many MemberClusters at `url` list one of `public_keys`.
async fn listed(
    client: &reqwest::Client,
    url: &reqwest::Url,
    public_keys: &HashSet<String>,
) -> usize {
    let Ok(response) = client.get(url.clone()).send().await else {
        return 0;
    };
    let Ok(list) = response.json::<serde_json::Value>().await else {
        return 0;
    };
    let items = list["items"].as_array().map_or(&[][..], Vec::as_slice);
    items
        .iter()
        .filter(|mc| {
            mc["spec"]["agent"]["publicKeys"][0]["publicKey"]
                .as_str()
                .is_some_and(|k| public_keys.contains(k))
        })
        .count()
}

/// CPU time (user + system) and resident memory of a process.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcSample {
    /// utime + stime, in seconds.
    pub cpu_secs: f64,
    /// VmRSS, in KiB.
    pub rss_kib: u64,
    /// VmHWM (the peak of VmRSS since the process started), in KiB.
    pub hwm_kib: u64,
}

/// Reads `/proc/<pid>/stat` (utime, stime) and `/proc/<pid>/status` (VmRSS, VmHWM).
pub fn sample(pid: u32, ticks_per_sec: f64) -> anyhow::Result<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow::anyhow!("unexpected /proc/{pid}/stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok(ProcSample {
        cpu_secs: ticks as f64 / ticks_per_sec,
        rss_kib: kib("VmRSS:"),
        hwm_kib: kib("VmHWM:"),
    })
}

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`; 100 on Linux).
pub fn ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Restricts every thread of process `pid` to `cpus` (a `taskset` list); threads it starts
/// later inherit the mask.
pub fn pin_process(pid: u32, cpus: &str) -> anyhow::Result<()> {
    let out = Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid.to_string()])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| {
            anyhow::anyhow!("cannot run taskset (util-linux) to pin to CPUs {cpus}: {e}")
        })?;
    anyhow::ensure!(
        out.status.success(),
        "taskset could not pin process {pid} to CPUs {cpus:?}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// The text of the hub's `/metrics` on its admin listener; `None` when it does not answer
/// with success.
pub async fn scrape_metrics(client: &reqwest::Client, admin: &reqwest::Url) -> Option<String> {
    let response = client.get(admin.join("/metrics").ok()?).send().await.ok()?;
    response.error_for_status().ok()?.text().await.ok()
}
