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
//! - [`hub_state::HubState`] (with [`KubeStore::with_state`]): accepted positions and
//!   last-heard times, per shard of clusters, in ConfigMaps written once per flush, so a
//!   new leader goes on where the last one stopped.
//!
//! Each consumer remembers what it last carried out, so a batch retried after a failure
//! repeats only what did not happen. A mirror writer or another destination is one more
//! consumer.

mod event_log;
pub mod hub_state;
mod labels;
mod status;

use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tokio::runtime::Handle;

use fleetpulse_common::api::{ClusterSet, MemberCluster, Set};

use super::events::Publisher;
use crate::fleet::{Objects, shared};
use crate::ids::{SetKey, cluster_id};
use crate::store::{PositionsKept, Snapshot, Store, StoreError, StoredCluster, Write};

/// Status, membership labels and Events of the hub's CRs, through a Kubernetes client.
pub struct KubeStore {
    client: kube::Client,
    runtime: Handle,
    labels: labels::MembershipLabels,
    statuses: status::StatusWriter,
    events: event_log::EventLog,
    state: Option<hub_state::HubState>,
    /// The objects the hub's watches already hold, read at load instead of listing.
    seen: Option<Objects>,
    /// When replicas share the fleet: which shards this replica owns. It writes the
    /// status of its own shards' clusters only, and set statuses only while it owns
    /// shard 0 (the replica that evaluates the sets).
    sharded: Option<hub_state::Sharded>,
}

impl KubeStore {
    /// A store writing through `client`; `runtime` runs its requests (the store's writer
    /// thread is not a runtime thread). Events name `instance` as the reporting replica.
    pub fn new(client: kube::Client, runtime: Handle, instance: Option<String>) -> Self {
        Self {
            labels: labels::MembershipLabels::new(client.clone()),
            statuses: status::StatusWriter::new(client.clone()),
            events: event_log::EventLog::new(Publisher::new(client.clone(), instance)),
            state: None,
            seen: None,
            sharded: None,
            client,
            runtime,
        }
    }

    /// Reads the statuses at load from `objects` (what the hub's watches hold) instead of
    /// listing them.
    pub fn with_objects(mut self, objects: Objects) -> Self {
        self.seen = Some(objects);
        self
    }

    /// Also keeps the hub state (positions and last-heard times) where `settings` say.
    pub fn with_state(mut self, settings: hub_state::StateSettings) -> Self {
        self.state = Some(hub_state::HubState::new(self.client.clone(), settings));
        self
    }

    /// Replicas share the fleet: the hub state is kept by Lease shard, and this replica
    /// writes only what concerns the shards it owns (see [`hub_state::Sharded`]).
    pub fn sharded(mut self, sharded: hub_state::Sharded) -> Self {
        self.state = (self.state.take()).map(|s| s.sharded(sharded.clone()));
        self.sharded = Some(sharded);
        self
    }

    /// Whether this replica writes `write` (always, unless replicas share the fleet).
    fn writes(&self, write: &Write) -> bool {
        let Some(sharded) = &self.sharded else {
            return true;
        };
        match write {
            Write::Cluster { cluster, .. } => {
                sharded.owns(crate::ids::shard_of(cluster, sharded.shards))
            }
            Write::Set { .. } => sharded.owns(0),
            Write::Positions { .. } => true,
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

/// The statuses the API holds: read from `seen` (the objects the hub's watches hold, so
/// a standby that took over lists nothing again), else listed.
async fn load(client: kube::Client, seen: Option<Objects>) -> Result<Snapshot, StoreError> {
    let mut snapshot = Snapshot {
        positions_kept: PositionsKept::NotStored,
        ..Snapshot::default()
    };
    let Objects {
        member_clusters,
        cluster_sets,
        sets,
        ..
    } = match seen {
        Some(objects) => objects,
        None => list_objects(client).await?,
    };
    for mc in member_clusters {
        let id = cluster_id(&mc);
        if let Some(status) = mc.status.clone() {
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
    for cs in cluster_sets {
        if let Some(status) = cs.status.clone() {
            snapshot.sets.insert(SetKey::of_cluster_set(&cs), status);
        }
    }
    for s in sets {
        if let Some(status) = s.status.clone() {
            snapshot.sets.insert(SetKey::of_set(&s), status);
        }
    }
    Ok(snapshot)
}

/// Lists the MemberClusters, ClusterSets and Sets.
async fn list_objects(client: kube::Client) -> Result<Objects, StoreError> {
    let list = |what: &str, e| api_error(format!("listing {what}"), e);
    let params = Default::default();
    Ok(Objects {
        member_clusters: shared(
            (Api::<MemberCluster>::all(client.clone())
                .list(&params)
                .await)
                .map_err(|e| list("MemberClusters", e))?,
        ),
        cluster_sets: shared(
            (Api::<ClusterSet>::all(client.clone()).list(&params).await)
                .map_err(|e| list("ClusterSets", e))?,
        ),
        sets: shared((Api::<Set>::all(client).list(&params).await).map_err(|e| list("Sets", e))?),
        ..Objects::default()
    })
}

impl Store for KubeStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        let runtime = self.runtime.clone();
        let snapshot = runtime.block_on(async {
            let mut snapshot = load(self.client.clone(), self.seen.take()).await?;
            if let Some(state) = &mut self.state {
                state.load(&mut snapshot, Timestamp::now()).await;
            }
            Ok::<_, StoreError>(snapshot)
        })?;
        self.labels.seed(&snapshot);
        self.statuses.seed(&snapshot);
        self.events.seed(&snapshot);
        Ok(snapshot)
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let runtime = self.runtime.clone();
        runtime.block_on(async {
            for write in writes {
                if !self.writes(write) {
                    continue;
                }
                self.labels.apply(write).await?;
                self.statuses.apply(write).await?;
                self.events.apply(write).await;
                if let Some(state) = &mut self.state {
                    state.apply(write);
                }
            }
            if let Some(state) = &mut self.state {
                state.flush(false).await;
            }
            Ok(())
        })
    }

    /// Writes the whole hub state marked clean: nothing was accepted after it, so the next
    /// leader trusts it whatever its age.
    fn clean_stop(&mut self) -> Result<(), StoreError> {
        let runtime = self.runtime.clone();
        if let Some(state) = &mut self.state {
            runtime.block_on(state.flush(true));
        }
        Ok(())
    }
}
