//! [`KubeStore`]: the [`Store`] of the Kubernetes mode. Cluster and set records become the
//! `status` of their MemberCluster, ClusterSet or Set, written through the status
//! subresource with a merge patch, and only when the hub queues a write (transitions). A
//! set's membership label is added to and removed from MemberClusters as its selection
//! changes.
//!
//! Not kept here (yet): accepted sequence positions, which in Kubernetes mode live only in
//! the hub's memory. After a restart, replay protection then rests on each report's
//! freshness window (`exp`) until the agent's next report; see docs/architecture.md.

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::runtime::Handle;

use std::collections::HashMap;

use fleetpulse_common::api::{ClusterSet, MEMBERSHIP_LABEL_VALUE, MemberCluster, Set};
use fleetpulse_common::protocol::report::ClusterId;

use crate::selection::SetKey;
use crate::store::{Snapshot, Store, StoreError, StoredCluster, Write};

/// Status of the hub's CRs, through a Kubernetes client.
pub struct KubeStore {
    client: kube::Client,
    runtime: Handle,
    /// Each set's selection as last written, to patch membership labels by difference.
    selections: HashMap<SetKey, Vec<ClusterId>>,
}

impl KubeStore {
    /// A store writing through `client`; `runtime` runs its requests (the store's writer
    /// thread is not a runtime thread).
    pub fn new(client: kube::Client, runtime: Handle) -> Self {
        Self {
            client,
            runtime,
            selections: HashMap::new(),
        }
    }
}

fn api_error(what: String, source: kube::Error) -> StoreError {
    StoreError::Kube { what, source }
}

impl Store for KubeStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        let client = self.client.clone();
        self.runtime
            .block_on(async move {
                let mut snapshot = Snapshot::default();
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
                        snapshot.clusters.insert(
                            id,
                            StoredCluster {
                                status,
                                config_hash: 0,
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
            })
            .inspect(|snapshot: &Snapshot| {
                for (key, status) in &snapshot.sets {
                    self.selections.insert(key.clone(), selected(key, status));
                }
            })
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let client = self.client.clone();
        let writes = writes.to_vec();
        let selections = &mut self.selections;
        self.runtime.block_on(async move {
            let params = PatchParams::default();
            for write in writes {
                match write {
                    Write::Cluster { cluster, record } => {
                        let api: Api<MemberCluster> =
                            Api::namespaced(client.clone(), &cluster.namespace);
                        let patch = Patch::Merge(json!({ "status": record.status }));
                        match api.patch_status(&cluster.name, &params, &patch).await {
                            Err(kube::Error::Api(e)) if e.code == 404 => {}
                            other => {
                                other.map_err(|e| {
                                    api_error(format!("status of MemberCluster {cluster}"), e)
                                })?;
                            }
                        }
                    }
                    Write::Set { key, status } => {
                        let now = selected(&key, &status);
                        let before = selections
                            .insert(key.clone(), now.clone())
                            .unwrap_or_default();
                        label_members(&client, &key, &before, &now).await?;
                        let patch = Patch::Merge(json!({ "status": status }));
                        let result = match &key {
                            SetKey::ClusterSet(name) => Api::<ClusterSet>::all(client.clone())
                                .patch_status(name, &params, &patch)
                                .await
                                .map(drop),
                            SetKey::Set(id) => {
                                Api::<Set>::namespaced(client.clone(), &id.namespace)
                                    .patch_status(&id.name, &params, &patch)
                                    .await
                                    .map(drop)
                            }
                        };
                        match result {
                            Err(kube::Error::Api(e)) if e.code == 404 => {}
                            other => other.map_err(|e| api_error(format!("status of {key}"), e))?,
                        }
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
