//! Hub replicas sharing the fleet through shard Leases, as the chart runs them sharded:
//! each real `fleetpulse-hub serve --kube --shards N` process serves agents on its own
//! address (written on the Leases it holds, so the others redirect there), and a Service
//! stand-in ([`ReadyProxy`] over every ready replica) is the address agents start from.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

use fleetpulse_hub::shards::{LEASE_LABEL, LEASE_PREFIX};

use super::replicas::{HUB_NAMESPACE, LEASE_SECONDS};
use super::{KubeFleet, objects};
use crate::service::{Backend, ReadyProxy, Routing};
use crate::wait;

impl KubeFleet {
    /// Starts one sharded replica per identity, each with `shards` shards, and the Service
    /// stand-in in front of them. Agents started afterwards use the Service.
    pub async fn start_sharded(&mut self, identities: &[&str], shards: u32) -> anyhow::Result<()> {
        anyhow::ensure!(self.hub.is_none(), "a single hub already runs");
        objects::namespace(&self.mgmt.client(), HUB_NAMESPACE).await?;
        self.baseline = self.mgmt.sim.writes();
        self.shards = shards;
        let mut backends = Vec::new();
        for id in identities {
            let addr = self.start_shard_replica(id).await?;
            backends.push(Backend {
                addr,
                url: format!("https://{addr}").parse()?,
                pod: None,
            });
        }
        let routing = Routing::Ready(self.agent_http());
        self.service = Some(ReadyProxy::start(backends, routing).await?);
        Ok(())
    }

    /// Starts (or restarts, on its former address) the sharded replica `id`; returns its
    /// address. The address is chosen before the start (a free port, released for the
    /// hub to bind), as the replica must name it in `--shard-url`.
    pub async fn start_shard_replica(&mut self, id: &str) -> anyhow::Result<SocketAddr> {
        anyhow::ensure!(self.shards > 0, "start_sharded first");
        anyhow::ensure!(
            self.replicas.get(id).is_none_or(|(_, p)| p.is_none()),
            "replica {id} already runs"
        );
        let addr = match self.replicas.get(id) {
            Some((addr, _)) => *addr,
            None => std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?,
        };
        let sharded = [
            "--shards".to_owned(),
            self.shards.to_string(),
            "--shard-url".into(),
            format!("https://{addr}"),
            "--lease-duration-seconds".into(),
            LEASE_SECONDS.to_string(),
            "--lease-namespace".into(),
            HUB_NAMESPACE.into(),
            "--identity".into(),
            id.into(),
        ];
        let args = self.hub_args(Some(addr), &sharded);
        let (hub, addr, admin) =
            super::processes::spawn_hub(&format!("hub {id}"), &args, "hub serving").await?;
        self.replicas.insert(id.to_owned(), (addr, Some(hub)));
        self.admin_addrs.insert(id.to_owned(), admin);
        Ok(addr)
    }

    /// Sharded replica `id`'s agents' address, admin address and process id, while it
    /// runs.
    pub fn replica_endpoints(&self, id: &str) -> Option<(SocketAddr, SocketAddr, u32)> {
        let (addr, process) = self.replicas.get(id)?;
        let pid = process.as_ref()?.child.id();
        Some((*addr, *self.admin_addrs.get(id)?, pid))
    }

    /// Waits until the replicas `live` hold every shard, each `shards / n` or one more;
    /// returns the holders.
    pub async fn wait_balanced(
        &self,
        live: &[&str],
        timeout: Duration,
    ) -> anyhow::Result<BTreeMap<u32, String>> {
        let (n, shards) = (live.len().max(1) as u32, self.shards);
        let what = format!("{shards} shards balanced over {live:?}");
        let probe = || async {
            let holders = self.shard_holders().await.ok()?;
            let count = |id: &str| holders.values().filter(|h| *h == id).count() as u32;
            let even =
                (live.iter()).all(|id| (shards / n..=shards.div_ceil(n)).contains(&count(id)));
            (holders.len() as u32 == shards && even).then_some(holders)
        };
        Ok(wait::until_some(&what, timeout, probe).await?.0)
    }

    /// Each shard's holder as its Lease says, if the Lease was renewed within its
    /// duration (a holder whose renewals stopped longer ago owns nothing).
    pub async fn shard_holders(&self) -> anyhow::Result<BTreeMap<u32, String>> {
        let leases: Api<Lease> = Api::namespaced(self.mgmt.client(), HUB_NAMESPACE);
        let listed = leases
            .list(&ListParams::default().labels(&format!("{LEASE_LABEL}=true")))
            .await?;
        let now = Timestamp::now();
        let mut holders = BTreeMap::new();
        for lease in listed {
            let Some(shard) = (lease.metadata.name.as_deref())
                .and_then(|n| n.strip_prefix(LEASE_PREFIX))
                .and_then(|k| k.parse::<u32>().ok())
            else {
                continue;
            };
            let Some(spec) = lease.spec else { continue };
            let duration = i64::from(spec.lease_duration_seconds.unwrap_or_default());
            let fresh = (spec.renew_time.as_ref())
                .is_some_and(|t| now.duration_since(t.0).as_secs() < duration);
            if let (Some(holder), true) = (spec.holder_identity, fresh) {
                holders.insert(shard, holder);
            }
        }
        Ok(holders)
    }
}
