//! [`KubeStore`]: the [`Store`] of the Kubernetes mode, the port through which the hub's
//! decisions reach the API: each batch of writes goes to one consumer per destination, in
//! order for each write:
//!
//! - [`labels::MembershipLabels`]: a set's membership label on the MemberClusters it
//!   gains and loses;
//! - [`status::StatusWriter`]: the `status` of the MemberCluster, ClusterSet or Set,
//!   written only when the hub queues a write (transitions, and the coarse
//!   `lastHeartbeatTime` refresh) and it differs from the one last written;
//! - [`event_log::EventLog`]: an Event per transition and failover, once the status is
//!   written.
//!
//! Each consumer remembers what it last carried out, so a batch retried after a failure
//! repeats only what did not happen. A mirror writer or another destination is one more
//! consumer.
//!
//! Not kept here: accepted sequence positions, which in Kubernetes mode live only in the
//! hub's memory. Writing them would cost one API write per cluster per flush; instead the
//! snapshot says [`PositionsKept::NotStored`], and a hub that starts to lead refuses every
//! agent incarnation from before its start (each agent restarts its sequence above it
//! once); see docs/architecture.md.

mod event_log;
mod labels;
mod status;

use kube::api::Api;
use tokio::runtime::Handle;

use fleetpulse_common::api::{ClusterSet, MemberCluster, Set};

use super::events::Publisher;
use crate::ids::{SetKey, cluster_id};
use crate::store::{PositionsKept, Snapshot, Store, StoreError, StoredCluster, Write};

/// Status, membership labels and Events of the hub's CRs, through a Kubernetes client.
pub struct KubeStore {
    client: kube::Client,
    runtime: Handle,
    labels: labels::MembershipLabels,
    statuses: status::StatusWriter,
    events: event_log::EventLog,
}

impl KubeStore {
    /// A store writing through `client`; `runtime` runs its requests (the store's writer
    /// thread is not a runtime thread). Events name `instance` as the reporting replica.
    pub fn new(client: kube::Client, runtime: Handle, instance: Option<String>) -> Self {
        Self {
            labels: labels::MembershipLabels::new(client.clone()),
            statuses: status::StatusWriter::new(client.clone()),
            events: event_log::EventLog::new(Publisher::new(client.clone(), instance)),
            client,
            runtime,
        }
    }
}

fn api_error(what: String, source: kube::Error) -> StoreError {
    StoreError::Kube { what, source }
}

/// A missing object is not an error: it was deleted while its write was queued.
pub(super) fn ignore_not_found<T>(
    result: Result<T, kube::Error>,
    what: impl FnOnce() -> String,
) -> Result<(), StoreError> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(api_error(what(), e)),
    }
}

async fn load(client: kube::Client) -> Result<Snapshot, StoreError> {
    let mut snapshot = Snapshot {
        positions_kept: PositionsKept::NotStored,
        ..Snapshot::default()
    };
    let list = |what: &str, e| api_error(format!("listing {what}"), e);
    let clusters = Api::<MemberCluster>::all(client.clone())
        .list(&Default::default())
        .await
        .map_err(|e| list("MemberClusters", e))?;
    for mc in clusters {
        let id = cluster_id(&mc);
        if let Some(status) = mc.status {
            let config_hash = (status.config_hash.as_deref())
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .unwrap_or(0);
            snapshot.clusters.insert(
                id,
                StoredCluster {
                    status,
                    config_hash,
                },
            );
        }
    }
    let cluster_sets = Api::<ClusterSet>::all(client.clone())
        .list(&Default::default())
        .await
        .map_err(|e| list("ClusterSets", e))?;
    for cs in cluster_sets {
        if let Some(status) = cs.status.clone() {
            snapshot.sets.insert(SetKey::of_cluster_set(&cs), status);
        }
    }
    let sets = Api::<Set>::all(client)
        .list(&Default::default())
        .await
        .map_err(|e| list("Sets", e))?;
    for s in sets {
        if let Some(status) = s.status.clone() {
            snapshot.sets.insert(SetKey::of_set(&s), status);
        }
    }
    Ok(snapshot)
}

impl Store for KubeStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        let snapshot = self.runtime.block_on(load(self.client.clone()))?;
        self.labels.seed(&snapshot);
        self.statuses.seed(&snapshot);
        self.events.seed(&snapshot);
        Ok(snapshot)
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let runtime = self.runtime.clone();
        runtime.block_on(async {
            for write in writes {
                self.labels.apply(write).await?;
                self.statuses.apply(write).await?;
                self.events.apply(write).await;
            }
            Ok(())
        })
    }
}
