//! Hub replicas with leader election, as the chart runs them: each real
//! `fleetpulse-hub serve --kube --leader-elect` process knows "its" Pod (an object in the
//! management simulator, named after the replica), the leader labels it
//! `fleetpulse.io/leader=true`, and a Service stand-in ([`ReadyProxy`] routing by that
//! label) is the address agents use.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;

use fleetpulse_hub::kubernetes::leader::LEADER_LABEL;

use super::{KubeFleet, objects};
use crate::process::Running;
use crate::service::{Backend, ReadyProxy, Routing};
use crate::wait;

/// Namespace of the hub's Pods and Lease on the management cluster.
pub const HUB_NAMESPACE: &str = "fleetpulse-system";
/// Seconds the replicas' Lease lasts without renewal (how long a crash goes unnoticed).
pub const LEASE_SECONDS: u64 = 3;

impl KubeFleet {
    /// Starts one hub replica per identity (the first leads, as it starts first) and the
    /// Service stand-in in front of them. Agents started afterwards use the Service.
    pub async fn start_replicas(&mut self, identities: &[&str]) -> anyhow::Result<()> {
        anyhow::ensure!(self.hub.is_none(), "a single hub already runs");
        let client = self.mgmt.client();
        objects::namespace(&client, HUB_NAMESPACE).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), HUB_NAMESPACE);
        for id in identities {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": id, "namespace": HUB_NAMESPACE,
                             "labels": {"app.kubernetes.io/name": "fleetpulse-hub"}},
                "spec": {"containers": [{"name": "hub", "image": "fleetpulse-hub"}]}
            }))?;
            pods.create(&Default::default(), &pod).await?;
        }
        self.baseline = self.mgmt.sim.writes();
        let mut backends = Vec::new();
        for id in identities {
            let addr = self.start_replica(id).await?;
            backends.push(Backend {
                addr,
                url: format!("https://{addr}").parse()?,
                pod: Some((*id).to_owned()),
            });
            if backends.len() == 1 {
                self.wait_leader(id, Duration::from_secs(30)).await?;
            }
        }
        let routing = Routing::PodLabel {
            client,
            namespace: HUB_NAMESPACE.into(),
            label: LEADER_LABEL.into(),
        };
        self.service = Some(ReadyProxy::start(backends, routing).await?);
        Ok(())
    }

    /// Starts (or restarts, on its former address) the replica `id`; returns its address.
    pub async fn start_replica(&mut self, id: &str) -> anyhow::Result<SocketAddr> {
        let former = self.replicas.get(id).map(|(addr, _)| *addr);
        anyhow::ensure!(
            self.replicas.get(id).is_none_or(|(_, p)| p.is_none()),
            "replica {id} already runs"
        );
        let leader = [
            "--leader-elect".to_owned(),
            "--lease-duration-seconds".into(),
            LEASE_SECONDS.to_string(),
            "--pod-name".into(),
            id.into(),
            "--pod-namespace".into(),
            HUB_NAMESPACE.into(),
        ];
        let args = self.hub_args(former, &leader);
        let (hub, addr, admin) =
            super::processes::spawn_hub(&format!("hub {id}"), &args, "listening").await?;
        self.replicas.insert(id.to_owned(), (addr, Some(hub)));
        self.admin_addrs.insert(id.to_owned(), admin);
        Ok(addr)
    }

    fn replica(&mut self, id: &str) -> anyhow::Result<Running> {
        self.replicas
            .get_mut(id)
            .and_then(|(_, p)| p.take())
            .ok_or_else(|| anyhow::anyhow!("replica {id} is not running"))
    }

    /// Stops replica `id` with SIGTERM; returns whether it exited cleanly.
    pub fn stop_replica(&mut self, id: &str) -> anyhow::Result<bool> {
        let mut hub = self.replica(id)?;
        tokio::task::block_in_place(|| hub.terminate(Duration::from_secs(20)))
    }

    /// Kills replica `id` with SIGKILL (a crash: no last writes, the Lease is not released).
    pub fn kill_replica(&mut self, id: &str) -> anyhow::Result<()> {
        drop(self.replica(id)?);
        Ok(())
    }

    /// The Lease holder.
    pub async fn leader(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.mgmt.client(), HUB_NAMESPACE);
        leases
            .get_opt("fleetpulse-hub")
            .await
            .ok()??
            .spec?
            .holder_identity
    }

    /// Waits until `id` holds the Lease and its Pod carries the leader label (so the
    /// Service routes to it); returns how long that took.
    pub async fn wait_leader(&self, id: &str, timeout: Duration) -> anyhow::Result<Duration> {
        let pods: Api<Pod> = Api::namespaced(self.mgmt.client(), HUB_NAMESPACE);
        let started = std::time::Instant::now();
        wait::until_some(&format!("{id} to lead"), timeout, || async {
            let labelled = pods
                .get_opt(id)
                .await
                .ok()??
                .metadata
                .labels?
                .get(LEADER_LABEL)
                == Some(&"true".to_owned());
            (labelled && self.leader().await.as_deref() == Some(id)).then_some(())
        })
        .await?;
        Ok(started.elapsed())
    }
}
