//! [`KubeStore`]: the [`Store`] of the Kubernetes mode. Cluster and set records become the
//! `status` of their MemberCluster, ClusterSet or Set, written through the status
//! subresource with a merge patch, and only when the hub queues a write (transitions, and
//! the coarse `lastHeartbeatTime` refresh); a record equal to the one last written is not
//! written again. A set's membership label is added to and removed from MemberClusters as
//! its selection changes, and every transition and failover is published as an Event
//! ([`super::events`]).
//!
//! Not kept here: accepted sequence positions, which in Kubernetes mode live only in the
//! hub's memory. Writing them would cost one API write per cluster per flush; instead the
//! snapshot says [`PositionsKept::NotStored`], and a hub that starts to lead refuses every
//! agent incarnation from before its start (each agent restarts its sequence above it
//! once); see docs/architecture.md.

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::runtime::Handle;

use std::collections::HashMap;

use fleetpulse_common::api::{
    ClusterSet, MEMBERSHIP_LABEL_VALUE, MemberCluster, MemberClusterStatus, Set, SetStatus,
};
use fleetpulse_common::protocol::report::ClusterId;

use super::events::{self, Publisher};
use crate::ids::SetKey;
use crate::store::{PositionsKept, Snapshot, Store, StoreError, StoredCluster, Write};

/// Status of the hub's CRs, through a Kubernetes client.
pub struct KubeStore {
    client: kube::Client,
    runtime: Handle,
    events: Publisher,
    /// Each cluster's status as last written (or read at start).
    clusters: HashMap<ClusterId, MemberClusterStatus>,
    /// Each set's status as last written (or read at start): the membership labels are
    /// patched by difference of its selection.
    sets: HashMap<SetKey, SetStatus>,
}

impl KubeStore {
    /// A store writing through `client`; `runtime` runs its requests (the store's writer
    /// thread is not a runtime thread). Events name `instance` as the reporting replica.
    pub fn new(client: kube::Client, runtime: Handle, instance: Option<String>) -> Self {
        Self {
            events: Publisher::new(client.clone(), instance),
            client,
            runtime,
            clusters: HashMap::new(),
            sets: HashMap::new(),
        }
    }
}

fn api_error(what: String, source: kube::Error) -> StoreError {
    StoreError::Kube { what, source }
}

/// A missing object is not an error: it was deleted while its write was queued.
fn ignore_not_found<T>(
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
        let id = ClusterId::new(
            mc.metadata.namespace.clone().unwrap_or_default(),
            mc.metadata.name.clone().unwrap_or_default(),
        );
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

impl KubeStore {
    async fn write_cluster(
        &mut self,
        cluster: ClusterId,
        status: MemberClusterStatus,
    ) -> Result<(), StoreError> {
        let before = self.clusters.get(&cluster);
        if before == Some(&status) {
            return Ok(());
        }
        let events = events::condition_events(
            before.map(|s| s.conditions.as_slice()).unwrap_or_default(),
            &status.conditions,
        );
        let api: Api<MemberCluster> = Api::namespaced(self.client.clone(), &cluster.namespace);
        let patch = Patch::Merge(json!({ "status": status }));
        ignore_not_found(
            api.patch_status(&cluster.name, &PatchParams::default(), &patch)
                .await,
            || format!("status of MemberCluster {cluster}"),
        )?;
        self.events.cluster(&cluster, events).await;
        self.clusters.insert(cluster, status);
        Ok(())
    }

    async fn write_set(&mut self, key: SetKey, status: SetStatus) -> Result<(), StoreError> {
        let before = self.sets.get(&key).cloned().unwrap_or_default();
        if before == status {
            return Ok(());
        }
        let (was, now) = (selected(&key, &before), selected(&key, &status));
        label_members(&self.client, &key, &was, &now).await?;
        let patch = Patch::Merge(json!({ "status": status }));
        let params = PatchParams::default();
        let result = match &key {
            SetKey::ClusterSet(name) => Api::<ClusterSet>::all(self.client.clone())
                .patch_status(name, &params, &patch)
                .await
                .map(drop),
            SetKey::Set(id) => Api::<Set>::namespaced(self.client.clone(), &id.namespace)
                .patch_status(&id.name, &params, &patch)
                .await
                .map(drop),
        };
        ignore_not_found(result, || format!("status of {key}"))?;
        let events = events::set_events(&before, &status, &was, &now);
        self.events.set(&key, events).await;
        self.sets.insert(key, status);
        Ok(())
    }
}

impl Store for KubeStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        let snapshot = self.runtime.block_on(load(self.client.clone()))?;
        for (id, record) in &snapshot.clusters {
            self.clusters.insert(id.clone(), record.status.clone());
        }
        self.sets.clone_from(&snapshot.sets);
        Ok(snapshot)
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let runtime = self.runtime.clone();
        runtime.block_on(async {
            for write in writes {
                match write {
                    Write::Cluster { cluster, record } => {
                        self.write_cluster(cluster.clone(), record.status.clone())
                            .await?;
                    }
                    Write::Set { key, status } => {
                        self.write_set(key.clone(), status.clone()).await?;
                    }
                    // Positions stay in memory in Kubernetes mode (see the module docs).
                    Write::Positions { .. } => {}
                }
            }
            Ok(())
        })
    }
}

/// The clusters a set status selects.
fn selected(key: &SetKey, status: &fleetpulse_common::api::SetStatus) -> Vec<ClusterId> {
    let default_ns = match key {
        SetKey::Set(id) => id.namespace.as_str(),
        SetKey::ClusterSet(_) => "default",
    };
    status
        .selected_cluster_refs
        .iter()
        .map(|r| ClusterId::new(r.namespace.as_deref().unwrap_or(default_ns), &r.name))
        .collect()
}

/// Adds the set's membership label to newly selected MemberClusters and removes it from
/// those no longer selected (a merge patch of `metadata.labels`; `null` removes).
async fn label_members(
    client: &kube::Client,
    key: &SetKey,
    before: &[ClusterId],
    now: &[ClusterId],
) -> Result<(), StoreError> {
    let label = key.label_key();
    let changes = now
        .iter()
        .filter(|c| !before.contains(c))
        .map(|c| (c, json!(MEMBERSHIP_LABEL_VALUE)))
        .chain(
            before
                .iter()
                .filter(|c| !now.contains(c))
                .map(|c| (c, serde_json::Value::Null)),
        );
    for (cluster, value) in changes {
        let api: Api<MemberCluster> = Api::namespaced(client.clone(), &cluster.namespace);
        let patch = Patch::Merge(json!({ "metadata": { "labels": { label.clone(): value } } }));
        match api
            .patch(&cluster.name, &PatchParams::default(), &patch)
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            other => {
                other.map_err(|e| {
                    api_error(format!("membership label of MemberCluster {cluster}"), e)
                })?;
            }
        }
    }
    Ok(())
}
