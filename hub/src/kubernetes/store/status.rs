//! The status consumer: a cluster's or set's record becomes the `status` of its
//! MemberCluster, ClusterSet or Set, written through the status subresource with a merge
//! patch, and only when it differs from the one last written (or read at start).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;

use fleetpulse_common::api::{ClusterSet, MemberCluster, Set};
use fleetpulse_common::protocol::report::ClusterId;

use super::ignore_not_found;
use crate::ids::SetKey;
use crate::store::{Snapshot, StoreError, Write};

/// Writes statuses; remembers a digest of each one written, not the status itself.
pub struct StatusWriter {
    client: kube::Client,
    clusters: HashMap<ClusterId, u64>,
    sets: HashMap<SetKey, u64>,
}

/// A digest of a status's JSON: equal statuses, equal digests.
fn digest(status: &impl Serialize) -> u64 {
    let json = serde_json::to_vec(status).expect("a status always serializes");
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    json.hash(&mut hasher);
    hasher.finish()
}

/// A merge patch that sets `status`.
fn status_patch(status: &impl Serialize) -> Patch<serde_json::Value> {
    Patch::Merge(json!({ "status": status }))
}

impl StatusWriter {
    /// A writer through `client` that knows nothing written yet.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            clusters: HashMap::new(),
            sets: HashMap::new(),
        }
    }

    /// Remembers the statuses the API holds at start.
    pub fn seed(&mut self, snapshot: &Snapshot) {
        for (id, record) in &snapshot.clusters {
            self.clusters.insert(id.clone(), digest(&record.status));
        }
        for (key, status) in &snapshot.sets {
            self.sets.insert(key.clone(), digest(status));
        }
    }

    /// Writes the status `write` carries, if it changed.
    pub async fn apply(&mut self, write: &Write) -> Result<(), StoreError> {
        let params = PatchParams::default();
        match write {
            Write::Cluster { cluster, record } => {
                let digest = digest(&record.status);
                if self.clusters.get(cluster) == Some(&digest) {
                    return Ok(());
                }
                let api: Api<MemberCluster> =
                    Api::namespaced(self.client.clone(), &cluster.namespace);
                let result = api
                    .patch_status(&cluster.name, &params, &status_patch(&record.status))
                    .await;
                ignore_not_found(result, || format!("status of MemberCluster {cluster}"))?;
                self.clusters.insert(cluster.clone(), digest);
            }
            Write::Set { key, status } => {
                let digest = digest(status);
                if self.sets.get(key) == Some(&digest) {
                    return Ok(());
                }
                let result = match key {
                    SetKey::ClusterSet(name) => Api::<ClusterSet>::all(self.client.clone())
                        .patch_status(name, &params, &status_patch(status))
                        .await
                        .map(drop),
                    SetKey::Set(id) => Api::<Set>::namespaced(self.client.clone(), &id.namespace)
                        .patch_status(&id.name, &params, &status_patch(status))
                        .await
                        .map(drop),
                };
                ignore_not_found(result, || format!("status of {key}"))?;
                self.sets.insert(key.clone(), digest);
            }
            // Positions stay in memory in Kubernetes mode (see the store's module docs).
            Write::Positions { .. } => {}
        }
        Ok(())
    }
}
