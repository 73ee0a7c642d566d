//! The agent's footprint (`loadgen --agent-footprint N`): one real `fleetpulse-agent run`
//! against a simulated member cluster holding `N` Pods, reporting to an embedded hub. Its
//! RSS and CPU are read from `/proc` first while it only heartbeats (idle), then while a Lua
//! check over every Pod runs each interval (a check round converts every matched object to
//! Lua, see the Lua-round benchmark in docs/performance.md). While busy it also counts the
//! requests and bytes the member cluster's API server (kubesim) served the agent, per
//! round.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use fleetpulse_common::protocol::keys;
use fleetpulse_kubesim::{KubeSim, kubeconfig};

use super::hub::{self, HubUnderTest, ProcSample};

const CHECK: &str = "  livenessChecks:
    - name: pods-running
      resourceSelectors:
        - {group: \"\", version: v1, kind: Pod}
      condition: |-
        function evaluate()
          local running = 0
          for _, pod in ipairs(resources) do
            if pod.status and pod.status.phase == \"Running\" then running = running + 1 end
          end
          return {pass = true, message = running .. \" of \" .. #resources .. \" pods running\"}
        end
";

fn manifest(public_key: &str, interval: u32, with_check: bool) -> String {
    format!(
        "apiVersion: fleetpulse.io/v1alpha1\nkind: MemberCluster\nmetadata: {{name: edge-1, namespace: fleet}}\n\
         spec:\n  heartbeat: {{intervalSeconds: {interval}, gracePeriodSeconds: {}}}\n  agent:\n    \
         publicKeys:\n      - publicKey: {public_key}\n{}",
        interval * 4,
        if with_check { CHECK } else { "" }
    )
}

/// A Pod of a typical workload (labels, two containers with env, probes and resources).
fn pod(i: usize) -> serde_json::Value {
    let container = |name: &str| {
        json!({"name": name, "image": format!("registry.example.com/team/{name}:1.{i}"),
            "ports": [{"containerPort": 8080, "name": "http"}],
            "env": (0..8).map(|e| json!({"name": format!("SETTING_{e}"), "value": format!("value-{e}-{i}")})).collect::<Vec<_>>(),
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10}})
    };
    json!({"metadata": {"name": format!("web-{i}"), "namespace": "default",
            "labels": {"app": "web", "tier": "frontend", "pod-template-hash": format!("{:08x}", i * 7919)},
            "annotations": {"example.com/revision": i.to_string()}},
        "spec": {"containers": [container("web"), container("sidecar")], "nodeName": "node-1"}})
}

/// Measures the agent idle and with a check over `objects` Pods, `seconds` each.
pub async fn footprint(
    objects: usize,
    interval: u32,
    seconds: u64,
    work: &Path,
    hub_bin: &Path,
) -> anyhow::Result<()> {
    let sim = KubeSim::builder()
        .kubelet_tick(Duration::from_secs(3600))
        .build();
    let (addr, _server) = sim.serve("127.0.0.1:0".parse()?).await?;
    let kubeconfig_path = work.join("member.kubeconfig");
    std::fs::write(&kubeconfig_path, kubeconfig(&format!("http://{addr}")))?;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    for i in 0..objects {
        pods.create(&PostParams::default(), &serde_json::from_value(pod(i))?)
            .await?;
    }
    let key = keys::generate();
    let public_key = keys::public_key_string(&key.verifying_key());
    std::fs::write(work.join("agent.pem"), keys::to_pem(&key))?;
    let manifests = work.join("manifests");
    std::fs::create_dir_all(&manifests)?;
    let file = manifests.join("edge.yaml");
    std::fs::write(&file, manifest(&public_key, interval, false))?;
    let mut hub = HubUnderTest::start_embedded(hub_bin, &manifests, work, None, &[])?;
    let setup = super::client::client(&hub.ca_pem, super::client::Transport::Http2)?;
    let keys = [public_key.clone()].into_iter().collect();
    hub.wait_ready(&setup, &keys, Duration::from_secs(60))
        .await?;
    std::fs::write(work.join("ca.pem"), &hub.ca_pem)?;
    let mut agent = start_agent(hub_bin, &hub, &kubeconfig_path, work, interval)?;
    let pid = agent.id();
    let status = hub.admin_url.join("/v1/memberclusters")?;
    let ticks = hub::ticks_per_second();
    wait_for(
        &setup,
        &status,
        "lastHeartbeatTime",
        Duration::from_secs(60),
    )
    .await?;
    let idle = measure(pid, ticks, seconds).await?;
    println!(
        "{}",
        idle.line(&format!("agent idle (heartbeat every {interval}s)"))
    );
    std::fs::write(&file, manifest(&public_key, interval, true))?;
    // The check's message counts the Pods it saw: all of them, or the round is not the one
    // to measure.
    let saw_all = format!(" of {objects} pods running");
    if let Err(e) = wait_for(&setup, &status, &saw_all, Duration::from_secs(120)).await {
        let log = std::fs::read_to_string(work.join("agent.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        anyhow::bail!(
            "{e}{}; the agent's log ends with:\n{}",
            hub.log_tail(),
            tail.join("\n")
        );
    }
    let (requests_before, bytes_before) = (sim.requests().len(), sim.served_bytes());
    let busy = measure(pid, ticks, seconds).await?;
    let rounds = seconds as f64 / f64::from(interval);
    // What the member's API server served the agent over the phase: every request (a
    // watch counts once, when it opens) and every byte of every response (a watch's
    // events as they flow). /readyz, one a round, is not a resource request.
    let requests = (sim.requests().len() - requests_before) as f64;
    let bytes = (sim.served_bytes() - bytes_before) as f64;
    println!(
        "{} cpu_ms_per_round={:.0} member_api_requests_per_round={:.2} member_api_bytes_per_round={:.0}",
        busy.line(&format!(
            "agent with a Lua check over {objects} Pods every {interval}s"
        )),
        busy.cpu_secs * 1e3 / rounds,
        requests / rounds,
        bytes / rounds,
    );
    let _ = agent.kill();
    let _ = agent.wait();
    hub.stop();
    Ok(())
}

fn start_agent(
    hub_bin: &Path,
    hub: &HubUnderTest,
    kubeconfig: &Path,
    work: &Path,
    interval: u32,
) -> anyhow::Result<Child> {
    let bin = hub_bin.with_file_name(format!("fleetpulse-agent{}", std::env::consts::EXE_SUFFIX));
    let log = std::fs::File::create(work.join("agent.log"))?;
    Command::new(&bin)
        .arg("run")
        .args(["--hub", hub.url.as_str(), "--cluster", "fleet/edge-1"])
        .arg("--hub-ca")
        .arg(work.join("ca.pem"))
        .arg("--key-file")
        .arg(work.join("agent.pem"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--interval-seconds", &interval.to_string()])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", bin.display()))
}

/// Polls the hub's MemberCluster list until its JSON contains `text`.
async fn wait_for(
    client: &reqwest::Client,
    url: &reqwest::Url,
    text: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Ok(r) = client.get(url.clone()).send().await
            && r.text().await.is_ok_and(|body| body.contains(text))
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!("the hub did not show {text:?} for edge-1 within {timeout:?}")
}

/// CPU used and memory held over a measurement.
struct Footprint {
    cpu_secs: f64,
    seconds: f64,
    rss_max_kib: u64,
    hwm_kib: u64,
}

impl Footprint {
    fn line(&self, what: &str) -> String {
        format!(
            "{what}: rss_max_mib={:.1} peak_rss_since_start_mib={:.1} cpu_pct={:.2}",
            self.rss_max_kib as f64 / 1024.0,
            self.hwm_kib as f64 / 1024.0,
            self.cpu_secs * 100.0 / self.seconds
        )
    }
}

/// Samples process `pid` every 100 ms for `seconds`.
async fn measure(pid: u32, ticks: f64, seconds: u64) -> anyhow::Result<Footprint> {
    let start = Instant::now();
    let first: ProcSample = hub::sample(pid, ticks)?;
    let mut rss_max_kib = first.rss_kib;
    let mut last = first;
    while start.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = hub::sample(pid, ticks)?;
        rss_max_kib = rss_max_kib.max(last.rss_kib);
    }
    Ok(Footprint {
        cpu_secs: last.cpu_secs - first.cpu_secs,
        seconds: start.elapsed().as_secs_f64(),
        rss_max_kib,
        hwm_kib: last.hwm_kib,
    })
}
